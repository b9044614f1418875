"""Memory planner for the LSH step: how many bands to bucket per pass.

In one LSH pass every document contributes one row per band of the current group: a 64-bit
bucket and a 64-bit document number, 16 bytes, held several times over while the shuffle
sends, receives, concatenates and sorts them (``SHUFFLE_COPIES``, measured), plus the MinHash band
columns read for the group. Per document and band that is about

    bytes_per_doc_band = SHUFFLE_COPIES * 16 + 8

With a shuffle that spills to disk (dask's p2p, the default with a distributed client) a
worker holds only the partitions its threads work on: the rows of one input partition on
the way out, one output partition on the way in (the shuffle keeps the number of
partitions). Its peak is then

    peak_per_worker = threads * docs_per_partition * bytes_per_doc_band * bands_per_iteration
                      + P2P_BUFFER + BASE_WORKER_BYTES

(``P2P_BUFFER`` about 200 MB) which does not grow with the corpus: the readers' default blocksize
(:func:`curator_dask.sizing.default_blocksize`) keeps ``docs_per_partition`` fixed. With the
in-memory ``tasks`` shuffle (no distributed client) the whole pass is in memory at once:

    peak_per_worker = num_docs * bytes_per_doc_band * bands_per_iteration / n_workers
                      + BASE_WORKER_BYTES

(the "8 bytes x num_hashes + overhead" rule of thumb per document). :func:`plan_lsh` picks
the largest ``bands_per_iteration`` whose peak fits in ``memory_fraction``
(``curator.dedup.memory-fraction``) of a worker's memory limit.

Examples
--------
>>> plan = plan_lsh(num_docs=20_000_000, num_bands=20, n_workers=4, worker_memory=8 * 2**30)
>>> plan.bands_per_iteration
3
>>> plan_lsh(100_000_000, 20, 4, 8 * 2**30, docs_per_partition=100_000).bands_per_iteration
20
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

from curator_dask import config, sizing
from curator_dask.monitoring.checks import CuratorWarning

# measured with a p2p shuffle of 100,000-200,000 documents per partition (8-27 bands): a
# worker's RSS grew by ~10.5 x the (bucket, uid) rows of the partition it worked on, plus a
# fixed ~200 MB (the shuffle's buffers)
SHUFFLE_COPIES = 10
ROW_BYTES = 16
#: An idle worker process (pandas, pyarrow and numba loaded): the budget is what is above it.
BASE_WORKER_BYTES = sizing.BASE_WORKER_BYTES
#: What a p2p shuffle buffers in memory on a worker besides the partitions (measured).
P2P_BUFFER = 200 * 2**20


@dataclass(frozen=True)
class LSHPlan:
    """The planner's choice and the estimate behind it."""

    bands_per_iteration: int
    num_band_groups: int
    bytes_per_doc_band: int
    estimated_peak_per_worker: int
    budget_per_worker: int

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)


def bytes_per_doc_band() -> int:
    """Estimated bytes per document and band in flight during one LSH pass."""
    return SHUFFLE_COPIES * ROW_BYTES + 8


def estimate_peak(
    num_docs: int,
    bands_per_iteration: int,
    n_workers: int = 1,
    *,
    docs_per_partition: int | None = None,
    threads_per_worker: int = 1,
) -> int:
    """Estimated peak bytes per worker of one LSH pass (see the module docstring).

    With ``docs_per_partition`` (a shuffle that spills), the peak of the partitions a
    worker's threads hold; without, the whole pass spread over ``n_workers``.
    """
    held: float = num_docs / max(1, n_workers)
    extra = 0
    if docs_per_partition is not None:
        held = max(1, threads_per_worker) * min(docs_per_partition, num_docs)
        extra = P2P_BUFFER
    return int(held * bytes_per_doc_band() * bands_per_iteration) + extra + BASE_WORKER_BYTES


def plan_lsh(
    num_docs: int,
    num_bands: int,
    n_workers: int = 1,
    worker_memory: int | None = None,
    memory_fraction: float | None = None,
    *,
    docs_per_partition: int | None = None,
    threads_per_worker: int = 1,
) -> LSHPlan:
    """Choose ``bands_per_iteration`` so that one LSH pass fits in worker memory.

    Parameters
    ----------
    num_docs : int
        Documents in the corpus (known exactly after the MinHash step).
    num_bands : int
        Bands in total.
    n_workers : int
        Dask workers sharing the shuffle.
    worker_memory : int, optional
        Memory limit of one worker in bytes; default: this machine's memory / ``n_workers``.
    memory_fraction : float, optional
        Share of a worker's memory one pass may use; default ``curator.dedup.memory-fraction``.
    docs_per_partition : int, optional
        Documents in the largest MinHash partition, when the shuffle spills to disk (p2p):
        the peak is then per partition in flight, not per corpus.
    threads_per_worker : int
        Partitions a worker works on at once (with ``docs_per_partition``).
    """
    if worker_memory is None:
        import psutil

        worker_memory = psutil.virtual_memory().total // max(1, n_workers)
    if memory_fraction is None:
        memory_fraction = float(config.get("dedup.memory-fraction", 0.4))
    budget = int(worker_memory * memory_fraction)

    def peak_of(bpi: int) -> int:
        return estimate_peak(
            num_docs, bpi, n_workers,
            docs_per_partition=docs_per_partition, threads_per_worker=threads_per_worker,
        )  # fmt: skip

    fixed = peak_of(0)
    per_band = max(1, peak_of(1) - fixed)
    fit = int(max(1, min(num_bands, (budget - fixed) // per_band)))
    # as many passes as the budget needs, of equal size (30 bands at most 17 a pass: two
    # passes of 15, not 17 + 13)
    bpi = -(-num_bands // -(-num_bands // fit))
    peak = peak_of(bpi)
    if peak > worker_memory:
        # Only a plan that exceeds the memory limit itself is worth a warning (the budget is a
        # safety margin). Raised without a source line: the message says what to change.
        warnings.warn_explicit(
            f"fuzzy dedup: even one band per LSH pass needs about {peak / 2**30:.1f} GiB per "
            f"worker, over the workers' {worker_memory / 2**30:.1f} GiB memory limit; add "
            "workers or memory, or expect the shuffle to spill heavily",
            CuratorWarning,
            "curator_dask.dedup.planner",
            0,
        )
    return LSHPlan(
        bands_per_iteration=bpi,
        num_band_groups=-(-num_bands // bpi),
        bytes_per_doc_band=bytes_per_doc_band(),
        estimated_peak_per_worker=peak,
        budget_per_worker=budget,
    )


#: Copies of a partition a shuffle-and-reduce step holds at its peak (the candidate check:
#: the shuffle's split, the received pieces, their concatenation, the sort and the sets).
PARTITION_COPIES = 8
#: The smallest partition the planner makes (smaller ones only add overhead).
MIN_PARTITION_BYTES = 16 * 2**20


def partitions_for(
    total_bytes: float,
    worker_memory: int | None,
    threads_per_worker: int = 1,
    copies: int = PARTITION_COPIES,
    memory_fraction: float | None = None,
) -> int:
    """How many partitions a shuffled step of ``total_bytes`` needs so that every worker,
    running ``threads_per_worker`` partitions at ``copies`` times their size, stays within
    ``memory_fraction`` of ``worker_memory`` above an idle worker and the p2p buffers.

    Examples
    --------
    >>> partitions_for(10 * 2**30, worker_memory=2 * 2**30, threads_per_worker=1)
    589
    >>> partitions_for(10 * 2**20, worker_memory=2 * 2**30)
    1
    """
    if worker_memory is None:
        import psutil

        worker_memory = psutil.virtual_memory().total
    if memory_fraction is None:
        memory_fraction = float(config.get("dedup.memory-fraction", 0.4))
    budget = worker_memory * memory_fraction - BASE_WORKER_BYTES - P2P_BUFFER
    per_partition = max(budget / (max(1, threads_per_worker) * copies), MIN_PARTITION_BYTES)
    return max(1, math.ceil(total_bytes / per_partition))


def cluster_memory(client: Any = None) -> tuple[int, int | None]:
    """``(n_workers, memory_limit per worker)`` of ``client``, or ``(1, None)`` locally."""
    n, limit, _ = sizing.worker_resources(client)
    return max(1, n), limit
