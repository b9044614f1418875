"""The default blocksize chosen from a worker's memory limit."""

from __future__ import annotations

import dask
import pytest

from curator_dask.config import blocksize_for_memory

MiB = 2**20


@pytest.mark.parametrize(
    ("limit", "threads", "peak", "want_mib"),
    [
        (16 * 2**30, 4, 6, 256),  # 16 GiB * 0.6 / 24 = 409 MiB -> 256
        (4 * 2**30, 4, 6, 64),  # 102 MiB -> 64
        (2**30, 8, 6, 8),  # 12.8 MiB -> 8
        (2**20, 1, 6, 1),  # never below 1 MiB
    ],
)
def test_blocksize_keeps_all_threads_under_the_fraction(limit, threads, peak, want_mib):
    with dask.config.set({"curator.io.blocksize": "1GiB"}):
        got = blocksize_for_memory(limit, threads, peak_per_partition_byte=peak)
    assert got == want_mib * MiB
    if want_mib > 1:
        assert threads * peak * got <= 0.6 * limit < threads * peak * 2 * got


def test_blocksize_is_capped_by_the_configured_default_and_reads_config():
    assert blocksize_for_memory(None) == 32_000_000
    assert blocksize_for_memory(2**40, 1) == 32_000_000
    with dask.config.set(
        {
            "curator.io.peak-per-partition-byte": 3,
            "curator.io.memory-fraction": 0.3,
            "curator.io.blocksize": "256MB",
        }
    ):
        assert blocksize_for_memory(2**30, 1) == 64 * MiB  # 1 GiB * 0.3 / 3 = 102 MiB


def test_blocksize_arguments_are_validated():
    with pytest.raises(ValueError, match="threads_per_worker"):
        blocksize_for_memory(2**30, 0)
    with pytest.raises(ValueError, match="memory_fraction"):
        blocksize_for_memory(2**30, 1, memory_fraction=1.5)


def test_readers_default_blocksize_follows_the_workers_memory(tmp_path):
    from distributed import Client, LocalCluster

    from curator_dask.config import BASE_WORKER_BYTES, default_blocksize
    from curator_dask.dedup import ExactDeduplicationWorkflow
    from curator_dask.dedup._runtime import DedupInput
    from curator_dask.io import JsonlReader, ParquetReader

    (tmp_path / "a.jsonl").write_text('{"id": "a", "text": "x"}\n')
    ceiling = 32_000_000
    assert JsonlReader(str(tmp_path)).partition_bytes == ceiling  # no client
    limit = 2 * 2**30
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, memory_limit=limit,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        want = blocksize_for_memory(
            0.6 * limit - BASE_WORKER_BYTES, 2, peak_per_partition_byte=4, memory_fraction=1
        )
        # (0.6 x 2 GiB - 480 MiB) / (2 threads x 4) = 94 MiB -> 64 MiB, capped at the
        # default ceiling (32 MB)
        assert want == ceiling
        # the whole worker, idle memory included, under 60% of its limit
        assert BASE_WORKER_BYTES + 2 * 4 * want <= 0.6 * limit
        reader = JsonlReader(str(tmp_path))
        assert reader.partition_bytes == want == default_blocksize(client)
        # Parquet expands ~3x when decoded: smaller files on disk per partition
        assert ParquetReader(str(tmp_path)).partition_bytes == default_blocksize(client, 3.0)
        assert default_blocksize(client, 3.0) < want
        # a given blocksize wins; the config can switch the rule off
        assert JsonlReader(str(tmp_path), blocksize="1MB").partition_bytes == 1_000_000
        with dask.config.set({"curator.io.blocksize-from-memory": False}):
            assert JsonlReader(str(tmp_path)).partition_bytes == ceiling
        # the dedup workflows read with the same default
        wf = ExactDeduplicationWorkflow(str(tmp_path), output_path=str(tmp_path / "o"))
        assert DedupInput.of(wf).reader().partition_bytes == want
    assert JsonlReader(str(tmp_path)).partition_bytes == ceiling
