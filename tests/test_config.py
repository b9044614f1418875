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
    assert blocksize_for_memory(None) == 256_000_000
    assert blocksize_for_memory(2**40, 1) == 256_000_000
    with dask.config.set(
        {"curator.io.peak-per-partition-byte": 3, "curator.io.memory-fraction": 0.3}
    ):
        assert blocksize_for_memory(2**30, 1) == 64 * MiB  # 1 GiB * 0.3 / 3 = 102 MiB


def test_blocksize_arguments_are_validated():
    with pytest.raises(ValueError, match="threads_per_worker"):
        blocksize_for_memory(2**30, 0)
    with pytest.raises(ValueError, match="memory_fraction"):
        blocksize_for_memory(2**30, 1, memory_fraction=1.5)
