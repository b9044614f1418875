"""A local cluster whose workers cannot start fails at once, in one line naming the cause.

Seen on a GPU machine: ``import cudf`` failed in every dask-cuda worker (numba-cuda and a
too-new numpy) and ``curator-dask run --gpu`` printed "Worker failed to start", then
waited for workers until it was killed. Reproduced here on CPU with a worker preload
that raises, through both ways a local cluster starts its workers: in the constructor
(``LocalCluster``) and after it (``LocalCUDACluster``: ``n_workers=0``, then ``scale``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dask
import distributed  # noqa: F401  (its config defaults must be loaded before dask.config.set)
import pytest

import curator_dask.cluster as cluster_mod
from curator_dask.cluster import ClusterConfig, ClusterConnectError, get_client

pytestmark = pytest.mark.integration

_CAUSE = "numba-cuda needs np.row_stack, gone in numpy 2.5 (simulated)"


@pytest.fixture
def failing_preload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "curator_boom_preload.py").write_text(f"raise ImportError({_CAUSE!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers get this sys.path
    return "curator_boom_preload"


def test_cpu_cluster_whose_worker_fails_to_start(failing_preload: str) -> None:
    config = ClusterConfig(n_workers=1, threads_per_worker=1, processes=True)
    start = time.monotonic()
    with (
        dask.config.set({"distributed.worker.preload": [failing_preload]}),
        pytest.raises(ClusterConnectError) as info,
        get_client(config, timeout=20),
    ):
        pass
    assert time.monotonic() - start < 20
    msg = str(info.value)
    assert "\n" not in msg
    assert f"ImportError: {_CAUSE}" in msg
    assert "workers failed to start" in msg


def _cuda_like_cluster(config: ClusterConfig) -> object:
    """LocalCUDACluster's start sequence on CPU: no workers in the constructor, then scale."""
    from distributed import LocalCluster

    class Later(LocalCluster):
        def __init__(self, n_workers: int, **kw: object) -> None:
            super().__init__(n_workers=0, processes=True, **kw)
            self.scale(n_workers)
            self.sync(self._correct_state)

    return Later(n_workers=config.n_workers or 1, threads_per_worker=1, dashboard_address=None)


def test_gpu_style_start_whose_worker_fails_does_not_hang(
    failing_preload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_mod, "_gpu_cluster", _cuda_like_cluster)
    config = ClusterConfig(kind="gpu", n_workers=1)
    start = time.monotonic()
    with (
        dask.config.set({"distributed.worker.preload": [failing_preload]}),
        pytest.raises(ClusterConnectError) as info,
        get_client(config, timeout=20),
    ):
        pass
    assert time.monotonic() - start < 20
    msg = str(info.value)
    assert "\n" not in msg
    assert f"ImportError: {_CAUSE}" in msg
    assert msg.startswith("the dask-cuda cluster's workers failed to start")


def test_cli_run_says_why_the_workers_did_not_start(
    failing_preload: str, sample_path: Path, tmp_path: Path
) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        f"reader: {{class: JsonlReader, params: {{paths: {sample_path}}}}}\n"
        "stages: [{class: WordCountFilter, params: {min_words: 5}}]\n"
        f"writer: {{class: ParquetWriter, params: {{path: {tmp_path / 'out'}}}}}\n"
        "cluster: {n_workers: 1, processes: true}\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    env["DASK_DISTRIBUTED__WORKER__PRELOAD"] = f'["{failing_preload}"]'
    start = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "curator_dask.cli",
            "run",
            str(pipeline),
            "--connect-timeout",
            "20s",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert time.monotonic() - start < 60
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("curator-dask: error: the local cluster's workers failed to start")
    assert f"ImportError: {_CAUSE}" in last
