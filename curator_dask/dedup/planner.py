"""Memory planner for the LSH step: how many bands to bucket per pass.

In one LSH pass every document contributes one row per band of the current group: a 64-bit
bucket and a 64-bit document number, 16 bytes, held several times over while the shuffle
sends, receives, concatenates and sorts them (``SHUFFLE_COPIES``), plus the MinHash band
columns read for the group. Per document and band that is about

    bytes_per_doc_band = SHUFFLE_COPIES * 16 + 8

and the peak of one pass over ``n`` documents, spread over ``w`` workers, is

    peak_per_worker = n * bytes_per_doc_band * bands_per_iteration / w + BASE_WORKER_BYTES

(equivalently ``n * mem_per_doc * bands_per_iteration / num_bands`` with
``mem_per_doc = bytes_per_doc_band * num_bands``, the "8 bytes x num_hashes + overhead" rule of
thumb). :func:`plan_lsh` picks the largest ``bands_per_iteration`` whose peak fits in
``memory_fraction`` (``curator.dedup.memory-fraction``) of a worker's memory limit.

Examples
--------
>>> plan = plan_lsh(num_docs=100_000_000, num_bands=20, n_workers=4, worker_memory=8 * 2**30)
>>> plan.bands_per_iteration
2
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any

from curator_dask import config
from curator_dask.monitoring.checks import CuratorWarning

SHUFFLE_COPIES = 4
ROW_BYTES = 16
# an idle dask worker process with pandas, pyarrow and numba loaded (measured: 450-500 MB)
BASE_WORKER_BYTES = 480 * 2**20


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


def estimate_peak(num_docs: int, bands_per_iteration: int, n_workers: int = 1) -> int:
    """Estimated peak bytes per worker of one LSH pass."""
    n_workers = max(1, n_workers)
    return int(num_docs * bytes_per_doc_band() * bands_per_iteration / n_workers) + (
        BASE_WORKER_BYTES
    )


def plan_lsh(
    num_docs: int,
    num_bands: int,
    n_workers: int = 1,
    worker_memory: int | None = None,
    memory_fraction: float | None = None,
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
    """
    if worker_memory is None:
        import psutil

        worker_memory = psutil.virtual_memory().total // max(1, n_workers)
    if memory_fraction is None:
        memory_fraction = float(config.get("dedup.memory-fraction", 0.5))
    budget = int(worker_memory * memory_fraction)
    per_band = max(1, estimate_peak(num_docs, 1, n_workers) - BASE_WORKER_BYTES)
    fit = (budget - BASE_WORKER_BYTES) // per_band
    bpi = int(max(1, min(num_bands, fit)))
    peak = estimate_peak(num_docs, bpi, n_workers)
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


def cluster_memory(client: Any = None) -> tuple[int, int | None]:
    """``(n_workers, memory_limit per worker)`` of ``client``, or ``(1, None)`` locally."""
    if client is None:
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            return 1, None
    workers = client.scheduler_info(n_workers=-1)["workers"]
    if not workers:
        return 1, None
    limits = [w.get("memory_limit") or 0 for w in workers.values()]
    return len(workers), (min(limits) or None)
