"""Streaming on a local cluster of worker processes: output appears while input is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cluster_helpers import (
    LoggingJsonlReader,
    LoggingJsonlWriter,
    TitleCase,
    jsonl_ids,
    read_log,
)

from curator_dask.cluster import ClusterConfig
from curator_dask.executor import DaskExecutor
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration


def test_first_output_exists_before_the_last_partition_is_read(
    shard_dir: Path, tmp_path: Path
) -> None:
    log = str(tmp_path / "events.log")
    out = tmp_path / "out"
    pipeline = Pipeline(
        "stream",
        [
            LoggingJsonlReader(str(shard_dir), files_per_partition=1, log=log),
            TitleCase(),
            LoggingJsonlWriter(str(out), log=log),
        ],
    )
    config = ClusterConfig(
        n_workers=1,
        threads_per_worker=1,
        memory_limit="1GB",
        dashboard_address=None,
        local_directory=str(tmp_path / "scratch"),
    )
    result = pipeline.run(DaskExecutor(cluster=config, max_in_flight=2, progress=False))
    assert result.partitions == 6

    events = read_log(log)
    read_start = {i: t for what, i, t in events if what == "read"}
    written = {i: t for what, i, t in events if what == "wrote"}
    assert sorted(read_start) == sorted(written) == list(range(6))
    assert min(written.values()) < read_start[5]
    assert (out / "part-00000.jsonl").stat().st_mtime < read_start[5]
    # The window: never more than 2 partitions read and not yet written.
    in_flight = 0
    for what, _, _ in sorted(events, key=lambda e: e[2]):
        in_flight += 1 if what == "read" else -1
        assert in_flight <= 2
    assert len(jsonl_ids(out)) == 240
