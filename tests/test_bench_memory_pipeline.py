"""bench/bench_memory_pipeline.py measures the cluster's worker processes, not every
process the command spawns."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import bench_memory_pipeline  # noqa: E402

#: A command with one worker process and one other spawned process (``spawn_main`` too).
_COMMAND = """
import multiprocessing
import time

from distributed import Client, LocalCluster


def idle():
    time.sleep(1)


if __name__ == "__main__":
    other = multiprocessing.get_context("spawn").Process(target=idle)
    other.start()
    cluster = LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with cluster, Client(cluster) as client:
        assert client.submit(sum, [1, 2]).result() == 3
        time.sleep(0.2)
    other.join()
"""


@pytest.mark.integration  # a real worker process (about 4 s)
def test_only_the_clusters_worker_processes_count_as_workers(tmp_path: Path) -> None:
    script = tmp_path / "command.py"
    script.write_text(_COMMAND)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = bench_memory_pipeline.run_measured([sys.executable, str(script)], env, tmp_path)
    assert len(run["worker_peaks_mb"]) == 1, run  # the worker, not the other spawned process
    assert run["worker_peaks_mb"][0] > 20  # a worker process with distributed loaded
    assert run["tree_peak_mb"] > run["worker_peaks_mb"][0]
