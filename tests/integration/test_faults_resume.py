"""The client process killed (SIGKILL) in the middle of ``curator-dask run`` and
``curator-dask fuzzy-dedup``; the same command run again resumes and ends with the output of
an undisturbed run.

The scheduler and workers are the ``subprocess_cluster`` fixture's (a batch job's layout:
the cluster outlives the client); the command runs as a subprocess with
``--scheduler-file``.
"""

from __future__ import annotations

import gzip
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _fault_helpers import (
    PartialFileWatch,
    SlowCopy,
    subprocess_env,
    tree_bytes,
    tree_digest,
)
from distributed import Client

from curator_dask.dedup import FuzzyDeduplicationWorkflow
from curator_dask.executor import SequentialExecutor
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "curator_dask.cli"]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    out = open(log, "wb")  # noqa: SIM115 - closed by _finish
    proc = subprocess.Popen(
        [*CLI, *args], stdout=out, stderr=subprocess.STDOUT, env=subprocess_env()
    )
    proc._log = out  # type: ignore[attr-defined]
    return proc


def _kill_when(proc: subprocess.Popen, ready: object, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        if proc.poll() is not None:
            raise AssertionError(f"the command ended (rc {proc.returncode}) before the kill")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the run never reached the kill point")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    proc._log.close()  # type: ignore[attr-defined]
    assert proc.returncode == -signal.SIGKILL


def _mtimes(paths: list[Path]) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in paths}


def _settle(directory: Path, pattern: str, quiet: float = 1.5) -> None:
    """Wait until tasks left running on the workers stop adding files."""
    last, since = None, time.monotonic()
    while time.monotonic() - since < quiet:
        now = sorted(str(p) for p in directory.glob(pattern))
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.1)


def test_cli_run_killed_then_rerun_resumes_and_equals_an_undisturbed_run(
    subprocess_cluster, shard_dir: Path, tmp_path: Path
) -> None:
    before = tree_digest(shard_dir)
    out = tmp_path / "out"
    Pipeline(
        "resume",
        [
            JsonlReader(str(shard_dir), files_per_partition=1),
            SlowCopy(seconds=0.0),
            JsonlWriter(str(tmp_path / "ref")),
        ],
    ).run(SequentialExecutor(progress=False))
    cfg = tmp_path / "p.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "name": "resume",
                "reader": {
                    "class": "JsonlReader",
                    "params": {"paths": str(shard_dir), "files_per_partition": 1},
                },
                "stages": [{"class": "_fault_helpers:SlowCopy", "params": {"seconds": 0.6}}],
                "writer": {"class": "JsonlWriter", "params": {"path": str(out), "mode": "resume"}},
                "execution": {"max_in_flight": 2},
            }
        )
    )
    args = ["run", str(cfg), "--scheduler-file", str(subprocess_cluster.scheduler_file)]
    out.mkdir()
    with PartialFileWatch(out) as watch:
        proc = _start(args, tmp_path / "first.log")
        _kill_when(proc, lambda: any((Path(str(out) + ".curator") / "_stats").glob("part-*.json")))
        _settle(Path(str(out) + ".curator"), "_stats/part-*.json")
    assert not (Path(str(out) + ".curator") / "_SUCCESS").exists()
    done = sorted((Path(str(out) + ".curator") / "_stats").glob("part-*.json"))
    assert 0 < len(done) < 6, f"{len(done)} partitions done when killed"
    print(f"run killed with {len(done)} of 6 partitions written")
    finished = [out / p.name.replace(".json", ".jsonl") for p in done]
    kept = _mtimes(finished + done)
    # what the killed run left under final names is complete and final
    ref = tree_bytes(tmp_path / "ref")
    for path in out.glob("part-*.jsonl"):
        assert path.read_bytes() == ref[path.name], path.name

    second = subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=subprocess_env(), timeout=120
    )
    assert second.returncode == 0, second.stderr
    assert f"6 partitions ({len(done)} already done)" in second.stdout
    assert _mtimes(finished + done) == kept  # not redone
    assert tree_bytes(out) == ref
    assert watch.problems == []
    assert tree_digest(shard_dir) == before


@pytest.fixture
def dedup_dir(tmp_path: Path, sample_path: Path) -> Path:
    with gzip.open(sample_path, "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(1600)]
    src = tmp_path / "in"
    src.mkdir()
    for i in range(8):
        (src / f"shard-{i}.jsonl").write_text("".join(lines[i * 200 : (i + 1) * 200]))
    return src


def test_cli_fuzzy_dedup_killed_then_rerun_reuses_finished_steps(
    subprocess_cluster, dedup_dir: Path, tmp_path: Path
) -> None:
    before = tree_digest(dedup_dir)
    params = {
        "word_ngrams": 5,
        "num_bands": 8,
        "minhashes_per_band": 4,
        "bands_per_iteration": 1,
        "blocksize": "1MB",  # 2 files a partition
    }
    with Client(scheduler_file=str(subprocess_cluster.scheduler_file), timeout="30s") as client:
        ref = FuzzyDeduplicationWorkflow(
            str(dedup_dir),
            cache_path=str(tmp_path / "ref-cache"),
            output_path=str(tmp_path / "ref-out"),
            client=client,
            **params,
        ).run()
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = [
        "fuzzy-dedup",
        str(dedup_dir),
        "--output",
        str(out),
        "--cache-dir",
        str(cache),
        *("--word-ngrams", "5", "--num-bands", "8", "--minhashes-per-band", "4"),
        *("--bands-per-iteration", "1", "--blocksize", "1MB"),
        "--scheduler-file",
        str(subprocess_cluster.scheduler_file),
    ]
    proc = _start(args, tmp_path / "first.log")
    # killed once every signature is written, while the band groups are being bucketed
    _kill_when(proc, lambda: any(cache.glob("fuzzy-*/minhash/_DONE")))
    _settle(cache, "fuzzy-*/lsh/*/_DONE")
    assert not (out / "removed_ids").exists()
    signatures = sorted(cache.glob("fuzzy-*/minhash/*"))
    groups = sorted(cache.glob("fuzzy-*/lsh/*/_DONE"))
    n_parts = json.loads(next(cache.glob("fuzzy-*/minhash/_DONE")).read_text())["partitions"]
    assert len([p for p in signatures if p.suffix == ".parquet"]) == n_parts == 4
    assert len(groups) < 8, "the kill came after every band group was done"
    kept = _mtimes(signatures + groups)
    print(f"fuzzy-dedup killed with {n_parts} signature files and {len(groups)} of 8 band groups")

    second = subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=subprocess_env(), timeout=180
    )
    assert second.returncode == 0, second.stderr
    assert re.search(rf"^  removed\s+{ref['removed']}$", second.stdout, flags=re.M)
    assert _mtimes(signatures + groups) == kept  # signatures and finished groups reused
    assert len(list(cache.glob("fuzzy-*/lsh/*/_DONE"))) == 8
    got = pd.read_parquet(out / "removed_ids")
    want = pd.read_parquet(tmp_path / "ref-out" / "removed_ids")
    assert sorted(got.itertuples(index=False, name=None)) == sorted(
        want.itertuples(index=False, name=None)
    )
    assert tree_digest(dedup_dir) == before
