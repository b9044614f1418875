"""A partition that runs out of memory is split and recomputed in pieces, not the job killed.

Two injections: a stage that raises ``MemoryError`` above a row count (threads in this
process: every branch of the split logic, fast), and a stage that really allocates memory
in proportion to its partition on a worker process with ``--memory-limit``, so the nanny
terminates the worker (``distributed.KilledWorker``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import dask
import pandas as pd
import pytest
from _fault_helpers import Cluster, MemoryHog, RowLimit, subprocess_env, tree_bytes, tree_digest
from distributed import Client, LocalCluster

from curator_dask.executor import DaskExecutor, PartitionMemoryError, SequentialExecutor
from curator_dask.io import JsonlReader, JsonlWriter, read_quarantine
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration


@pytest.fixture
def mixed_input(tmp_path: Path, sample_records: list[dict]) -> Path:
    """``a.jsonl``: 120 docs cut into byte ranges by the reader; ``b.jsonl.gz``: 40 docs read
    whole. One bad line in each (one in the first byte range, one in the gzip file)."""
    src = tmp_path / "in"
    src.mkdir()
    # documents of equal length, so byte ranges and their halves hold equal numbers of them
    recs = [r for r in sample_records if len(r["text"]) >= 600 and r["text"].isascii()][:160]
    lines = [json.dumps({**r, "text": r["text"][:600]}) for r in recs]
    a = lines[:120]
    a.insert(7, '{"id": "broken", "text": ')
    (src / "a.jsonl").write_text("\n".join(a) + "\n")
    b = lines[120:]
    b.insert(25, "not json at all")
    with gzip.open(src / "b.jsonl.gz", "wt") as f:
        f.write("\n".join(b) + "\n")
    return src


def _reader(src: Path) -> JsonlReader:
    # a.jsonl in three byte ranges (of about 40 documents), b.jsonl.gz whole
    return JsonlReader(str(src), blocksize=(src / "a.jsonl").stat().st_size // 3 + 1)


def _pipeline(src: Path, out: Path, max_rows: int | None) -> Pipeline:
    return Pipeline(
        "oom",
        [
            _reader(src),
            RowLimit(max_rows=max_rows),
            JsonlWriter(str(out), mode="resume"),
        ],
    )


def _quarantine_rows(out: Path) -> list[tuple]:
    q = read_quarantine(str(out))
    # ``line`` is -1 for a record in a byte range that does not start its file: a split
    # range piece knows fewer line numbers than the whole range did (byte_offset is exact).
    return sorted(q[["file", "byte_offset", "reason", "raw"]].itertuples(index=False, name=None))


def test_memory_error_splits_the_partition_and_the_output_equals_an_unsplit_run(
    mixed_input: Path, tmp_path: Path
) -> None:
    before = tree_digest(mixed_input)
    ref = _pipeline(mixed_input, tmp_path / "ref", None).run(SequentialExecutor(progress=False))
    specs = _reader(mixed_input).partitions()
    assert [s.start is not None for s in specs] == [True, True, True, False]  # ranges + gzip

    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cluster,
        Client(cluster) as client,
    ):
        result = _pipeline(mixed_input, tmp_path / "out", 15).run(
            DaskExecutor(client=client, progress=False)
        )

    # every partition has about 40 rows: each one was split in halves, and the halves
    # again (max_rows=15): 3 splits each
    assert result.split_partitions == [0, 1, 2, 3]
    assert result.splits == 4 * 3
    assert (result.read, result.kept, result.quarantined) == (ref.read, ref.kept, 2)
    assert result.balanced
    # one file per original partition, byte for byte the unsplit run's
    got, want = tree_bytes(tmp_path / "out"), tree_bytes(tmp_path / "ref")
    parts = sorted(k for k in want if k.startswith("part-"))
    assert parts == [f"part-{i:05d}.jsonl" for i in range(4)]
    for name in parts:
        assert got[name] == want[name], name
    assert _quarantine_rows(tmp_path / "out") == _quarantine_rows(tmp_path / "ref")
    for i in range(4):
        stats = json.loads(
            (Path(str(tmp_path / "out") + ".curator") / "_stats" / f"part-{i:05d}.json").read_text()
        )
        assert stats["split"]["pieces"] == ["00", "01", "10", "11"]
        assert stats["split"]["reasons"] == ["MemoryError"]
    assert (
        json.loads((Path(str(tmp_path / "out") + ".curator") / "_stats.json").read_text())["splits"]
        == result.splits
    )
    assert tree_digest(mixed_input) == before

    # resume understands split partitions: nothing is recomputed
    again = _pipeline(mixed_input, tmp_path / "out", 15).run(SequentialExecutor(progress=False))
    assert again.partitions_skipped == 4
    assert (again.splits, again.kept) == (result.splits, result.kept)


def test_a_partition_too_large_even_in_the_smallest_pieces_fails_clearly(
    mixed_input: Path, tmp_path: Path
) -> None:
    with (
        dask.config.set({"curator.execution.max-splits": 1}),
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False) as cluster,
        Client(cluster) as client,
        pytest.raises(PartitionMemoryError, match=r"partition \d \(.*\) still failed") as err,
    ):
        _pipeline(mixed_input, tmp_path / "out", 5).run(DaskExecutor(client=client, progress=False))
    assert "max-splits = 1" in str(err.value)
    assert not (Path(str(tmp_path / "out") + ".curator") / "_SUCCESS").exists()


def test_a_worker_killed_at_its_memory_limit_gets_the_partition_in_halves(
    tmp_path: Path, sample_records: list[dict]
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    sizes = [4, 12, 4]  # MemoryHog(fits_rows=10): only the 12-row partition is too large
    start = 0
    for i, n in enumerate(sizes):
        with open(src / f"shard-{i}.jsonl", "w") as f:
            for rec in sample_records[start : start + n]:
                f.write(json.dumps(rec) + "\n")
        start += n
    before = tree_digest(src)
    reader = JsonlReader(str(src), files_per_partition=1)
    ref = Pipeline("ref", [reader, JsonlWriter(str(tmp_path / "ref"))])
    ref.run(SequentialExecutor(progress=False))

    # allowed-failures=0: the first worker death is the task's KilledWorker (the default,
    # 3, retries on three more workers first: slower, same outcome)
    env = subprocess_env(DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0")
    with Cluster(tmp_path / "cluster", 1, ("--memory-limit", "1GB"), env) as cluster:
        pipeline = Pipeline(
            "hog", [reader, MemoryHog(fits_rows=10), JsonlWriter(str(tmp_path / "out"))]
        )
        with Client(scheduler_file=str(cluster.scheduler_file), timeout="30s") as client:
            result = pipeline.run(DaskExecutor(client=client, max_in_flight=1, progress=False))
        log = (cluster.tmp / "worker-0.log").read_text()

    assert "exceeded 95% memory budget" in log  # the nanny really terminated the worker
    assert (result.splits, result.split_partitions) == (1, [1])
    assert (result.read, result.kept) == (20, 20)
    assert result.balanced
    got = tree_bytes(tmp_path / "out")
    assert {k: v for k, v in got.items() if k.startswith("part-")} == {
        k: v for k, v in tree_bytes(tmp_path / "ref").items() if k.startswith("part-")
    }
    hog = next(s for s in result.stages if s.name == "MemoryHog")
    assert (hog.docs_in, hog.partitions) == (20, 3)
    assert pd.read_json(tmp_path / "out" / "part-00001.jsonl", lines=True)["id"].tolist() == [
        r["id"] for r in sample_records[4:16]
    ]
    assert tree_digest(src) == before
