"""The default blocksize gives every worker thread work: >= 2 partitions a thread."""

from __future__ import annotations

import gzip
from pathlib import Path

import dask.config
import pytest

from curator_dask import sizing
from curator_dask.io import JsonlReader

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"
GiB = 2**30


@pytest.fixture(scope="module")
def ten_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 17 MB of JSONL in 10 files (the sample twice, ids made unique)."""
    src = tmp_path_factory.mktemp("input")
    with gzip.open(SAMPLE, "rt") as f:
        lines = f.readlines()
    copies = [line.replace('"id": "', f'"id": "c{c}-', 1) for c in range(2) for line in lines]
    for i in range(10):
        (src / f"part-{i}.jsonl").write_text("".join(copies[i::10]))
    return src


def _read_count(reader: JsonlReader, workers: sizing.Workers) -> int:
    frame = reader.to_dask(workers)
    assert frame.npartitions >= 4
    return int(frame.map_partitions(len).compute(scheduler="sync").sum())


@pytest.mark.parametrize(("n_workers", "threads"), [(2, 1), (1, 2), (2, 2)])
def test_an_input_of_several_mb_gets_two_partitions_per_worker_thread(
    ten_files: Path, n_workers: int, threads: int
) -> None:
    # workers with plenty of memory: by memory alone this is one 256 MB partition
    workers = sizing.Workers(16 * GiB, threads, n_workers)
    specs = JsonlReader(str(ten_files)).partitions(workers)
    assert len(specs) >= 2 * n_workers * threads
    assert _read_count(JsonlReader(str(ten_files)), workers) == 8000  # every document, once


def test_the_memory_bound_still_holds(ten_files: Path) -> None:
    total = sum(p.stat().st_size for p in ten_files.iterdir())
    split = sizing.default_blocksize(input_bytes=total, workers=sizing.Workers(16 * GiB, 1, 2))
    small = sizing.Workers(int(1.5 * GiB), 1, 2)
    by_memory = sizing.default_blocksize(workers=small)
    assert sizing.default_blocksize(input_bytes=total, workers=small) == min(split, by_memory)
    assert sizing.default_blocksize(input_bytes=100 * GiB, workers=small) == by_memory


def test_a_small_input_stays_whole(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": "1", "text": "one document"}\n' * 1000)
    workers = sizing.Workers(16 * GiB, 2, 2)
    assert len(JsonlReader(str(tmp_path)).partitions(workers)) == 1
    with dask.config.set({"curator.io.split-above": "1KiB"}):
        assert sizing.default_blocksize(input_bytes=40 * 2**20, workers=workers) == 5 * 2**20


def test_a_dedup_workflow_splits_for_its_clients_workers(ten_files: Path) -> None:
    from distributed import Client, LocalCluster

    from curator_dask.dedup._runtime import DedupInput
    from curator_dask.dedup.exact import ExactDeduplicationWorkflow

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            memory_limit="16GiB",
            dashboard_address=None,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        workflow = ExactDeduplicationWorkflow(
            input_path=str(ten_files), output_path="unused", client=client
        )
        frame = DedupInput.of(workflow).frame()
        assert frame.npartitions >= 4


def test_a_1_gb_input_gets_partitions_the_size_of_a_250_mb_one() -> None:
    # On the 2-worker 24 GB box, 1 GB used to be read as 256 MB partitions against 62 MB for
    # 250 MB: the busy workers' peak follows the partition, so the larger input peaked at
    # 1.57x the tree memory (bench/bench_memory_pipeline.py). The ceiling keeps them alike.
    workers = sizing.Workers(12 * GiB, 1, 2)
    small = sizing.default_blocksize(input_bytes=250e6, workers=workers)
    large = sizing.default_blocksize(input_bytes=1e9, workers=workers)
    assert small <= large <= 64e6
    assert large / small <= 1.1
