"""Losing a worker in the middle of a streaming run: the run still completes, exactly."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from _cluster_helpers import (
    LoggingJsonlReader,
    LoggingJsonlWriter,
    SlowCopy,
    TitleCase,
    jsonl_ids,
    read_log,
)
from distributed import Client, LocalCluster

from curator_dask.executor import DaskExecutor
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration


def test_a_killed_worker_is_replaced_and_no_partition_is_lost(
    shard_dir: Path, tmp_path: Path
) -> None:
    log = str(tmp_path / "events.log")
    out = tmp_path / "out"
    pipeline = Pipeline(
        "fault",
        [
            LoggingJsonlReader(str(shard_dir), files_per_partition=1, log=log),
            SlowCopy(seconds=0.4),
            TitleCase(),
            LoggingJsonlWriter(str(out), log=log),
        ],
    )
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit="1GB",
        ) as cluster,
        Client(cluster) as client,
    ):
        pids = client.run(os.getpid)
        victim = sorted(pids.values())[0]
        killed_at: list[float] = []

        def kill_after_first_write() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if os.path.exists(log) and any(w == "wrote" for w, _, _ in read_log(log)):
                    os.kill(victim, signal.SIGKILL)
                    killed_at.append(time.time())
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_after_first_write)
        killer.start()
        result = pipeline.run(DaskExecutor(client=client, max_in_flight=4, progress=False))
        killer.join()
        assert victim not in client.run(os.getpid).values()  # it really died

    written = {i: t for what, i, t in read_log(log) if what == "wrote"}
    assert set(written) == set(range(6))
    assert killed_at
    assert max(written.values()) > killed_at[0]  # the kill happened mid-run
    assert result.read == 240
    assert result.kept == 240
    assert result.balanced
    assert len(jsonl_ids(out)) == 240
    assert sorted(jsonl_ids(out)) == sorted(set(jsonl_ids(out)))  # no duplicate rows
