"""Small API items for faults: connect() without ``with``, the failed-run hook, the
partition size check at plan time."""

from __future__ import annotations

import threading
from pathlib import Path

import dask
import pytest
from _fault_helpers import RowLimit, SlowCopy
from distributed import Client, LocalCluster

from curator_dask.cluster import ClusterConfig, connect
from curator_dask.executor import DaskExecutor
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.monitoring import hooks
from curator_dask.monitoring.checks import CuratorWarning
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration


def test_connect_returns_a_client_and_a_close_function() -> None:
    client, close = connect(ClusterConfig(n_workers=1, processes=False, dashboard_address=None))
    cluster = client.cluster
    assert client.submit(sum, [1, 2]).result() == 3
    close()
    close()  # twice is fine
    assert client.status == "closed"
    assert cluster.status.name == "closed"  # the local cluster it started is shut down


def _sampler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "curator-memory-timeline"]


def test_a_failed_run_stops_its_memory_sampler(shard_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pipeline = Pipeline(
        "fails",
        [
            JsonlReader(str(shard_dir), files_per_partition=1),
            SlowCopy(seconds=0.2),
            RowLimit(max_rows=10),  # every partition has 40 rows
            JsonlWriter(str(out)),
        ],
    )
    with (
        dask.config.set({"curator.monitoring.interval": "50ms", "curator.execution.max-splits": 0}),
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False) as cluster,
        Client(cluster) as client,
    ):
        assert not _sampler_threads()
        with pytest.raises(MemoryError):
            pipeline.run(DaskExecutor(client=client, progress=False))
        # the client is still open: only the hook can have stopped the sampler
        assert not _sampler_threads()
        assert str(out) not in hooks._ACTIVE
    assert (
        Path(str(out) + ".curator") / "_timeline.pqt"
    ).exists()  # what it sampled before the failure


def test_partitions_near_the_worker_memory_limit_are_warned_about_at_plan_time(
    shard_dir: Path, tmp_path: Path
) -> None:
    no_memory_management = {
        f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")
    }
    # the executor's estimate of a partition in memory: 2 x the file (about 80 kB)
    big = 2 * (shard_dir / "shard-0.jsonl").stat().st_size
    pipeline = Pipeline(
        "sized",
        [JsonlReader(str(shard_dir), files_per_partition=1), JsonlWriter(str(tmp_path / "out"))],
    )
    with (
        dask.config.set(no_memory_management),
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, memory_limit=big
        ) as cluster,
        Client(cluster) as client,
    ):
        with pytest.warns(CuratorWarning, match=r"blocksize='1MiB'"):
            result = pipeline.run(DaskExecutor(client=client, progress=False))
        assert result.kept == 240
        # a partition well below the limit: no warning (warnings are errors in this suite)
        pipeline = Pipeline(
            "sized",
            [
                JsonlReader(str(shard_dir / "shard-0.jsonl")),
                JsonlWriter(str(tmp_path / "out2")),
            ],
        )
    with (
        dask.config.set(no_memory_management),
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, memory_limit=8 * big
        ) as cluster,
        Client(cluster) as client,
    ):
        assert pipeline.run(DaskExecutor(client=client, progress=False)).kept == 40
