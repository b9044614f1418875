"""Sizing policy: how large a run's partitions are, for the workers that will hold them.

One place decides the readers' default blocksize (:func:`default_blocksize`, through
:func:`resolve_blocksize`), from the workers' memory limit and threads (the :class:`Workers`
a reader is told of when it lists its input, e.g. those an executor is about to start; else
a client's, else the active client's; nothing is read from a hidden context) and the input's
size. What is decided here changes how a run is cut into tasks, never what it outputs. The
settings are ``curator.io.*`` in :mod:`dask.config` (read here directly:
:mod:`curator_dask.config` re-exports this module's functions under their old names, so
this module does not import it).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import dask.config
import dask.utils


def _get(key: str, default: Any = None) -> Any:
    return dask.config.get(f"curator.{key}", default=default)


#: More partitions than this is not a small input (and not worth a size per file).
_MAX_SMALL_PARTITIONS = 64


def input_bytes(reader: Any, specs: list[Any] | None = None) -> float | None:
    """Estimated in-memory bytes of a small input, or None (large, or unknown).

    ``reader`` is a :class:`~curator_dask.io.base.Reader` and ``specs`` its partitions
    (listed when None). What :meth:`~curator_dask.cluster.ClusterConfig.for_input` decides
    on: an input of more than 64 partitions, or one the reader cannot size, counts as large.
    """
    specs = reader.partitions() if specs is None else specs
    if len(specs) > _MAX_SMALL_PARTITIONS:
        return None
    sizes = [reader.estimated_bytes(spec) for spec in specs]
    if any(size is None for size in sizes):
        return None
    return float(sum(sizes))  # type: ignore[arg-type]


def blocksize_for_memory(
    memory_limit: float | None,
    threads_per_worker: int = 1,
    *,
    peak_per_partition_byte: float | None = None,
    memory_fraction: float | None = None,
) -> int:
    """A reader blocksize (bytes) that keeps a worker's peak under a share of its memory.

    A worker runs ``threads_per_worker`` partitions at once, and each partition's tasks
    peak at about ``peak_per_partition_byte`` times its bytes. The blocksize is the largest
    power-of-two MiB such that all of them together stay under ``memory_fraction`` of
    ``memory_limit``; at least 1 MiB, at most ``curator.io.blocksize``.

    Parameters
    ----------
    memory_limit : float or None
        A worker's memory limit in bytes (``distributed``'s ``memory_limit``); ``None``
        or 0 (no limit) returns ``curator.io.blocksize``.
    threads_per_worker : int
        Partitions processed at the same time by one worker.
    peak_per_partition_byte : float, optional
        Peak memory per byte of input; default ``curator.io.peak-per-partition-byte``
        (measured with ``bench/bench_filters_memory.py`` and ``bench/bench_dedup_memory.py``).
    memory_fraction : float, optional
        Share of the limit a run may use; default ``curator.io.memory-fraction`` (0.6).

    Returns
    -------
    int
        The blocksize in bytes.

    Examples
    --------
    >>> blocksize_for_memory(8 * 2**30, threads_per_worker=2, peak_per_partition_byte=6)
    32000000
    >>> blocksize_for_memory(2 * 2**30, threads_per_worker=8, peak_per_partition_byte=6) // 2**20
    16
    """
    from dask.utils import parse_bytes

    ceiling = int(parse_bytes(_get("io.blocksize", "32MB")))
    if not memory_limit:
        return ceiling
    if threads_per_worker < 1:
        raise ValueError(f"threads_per_worker must be >= 1, got {threads_per_worker}")
    peak = float(peak_per_partition_byte or _get("io.peak-per-partition-byte", 6))
    fraction = float(memory_fraction or _get("io.memory-fraction", 0.6))
    if peak <= 0 or not 0 < fraction <= 1:
        raise ValueError(
            f"need peak_per_partition_byte > 0 and 0 < memory_fraction <= 1, got {peak}, {fraction}"
        )
    budget = memory_limit * fraction / (threads_per_worker * peak)
    mib = 1
    while mib * 2 * 2**20 <= budget:
        mib *= 2
    return min(ceiling, mib * 2**20)


#: Memory of an idle dask worker process with pandas, pyarrow and numba loaded (measured:
#: 450-500 MB); the default blocksize and the dedup planner budget only what is above it.
BASE_WORKER_BYTES = 480 * 2**20


def worker_resources(client: Any = None) -> tuple[int, int | None, int]:
    """``(n_workers, memory_limit, threads_per_worker)`` of a distributed client's workers.

    ``client`` defaults to the active one (``distributed.default_client()``). The smallest
    memory limit and the largest thread count are reported (the tightest worker). Without
    a client, or with no workers yet, ``(0, None, 1)``.
    """
    if client is None:
        if "distributed" not in sys.modules:  # no client can exist: not worth its import
            return 0, None, 1
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            return 0, None, 1
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:  # distributed releases before the n_workers argument
        workers = client.scheduler_info()["workers"]
    return tightest_worker(workers)


def tightest_worker(workers: dict[str, Any]) -> tuple[int, int | None, int]:
    """``(n_workers, smallest memory_limit, largest nthreads)`` of a scheduler's worker table."""
    if not workers:
        return 0, None, 1
    limits = [int(w.get("memory_limit") or 0) for w in workers.values()]
    threads = [int(w.get("nthreads") or 1) for w in workers.values()]
    return len(workers), (min(limits) or None), max(threads)


@dataclass(frozen=True)
class Workers:
    """The shape of the workers a run's partitions are sized for.

    What :func:`default_blocksize` needs to know of a cluster. An executor that starts its
    own cluster knows it before the cluster exists and hands it to the reader when the
    input is listed (:meth:`~curator_dask.io.base.Reader.partitions`); a user can do the
    same to size a reader outside an executor.

    ``memory_limit`` None means no limit (the configured ``curator.io.blocksize``);
    ``n_workers`` None: unknown (one is assumed).

    Examples
    --------
    >>> default_blocksize(workers=Workers(2**30, threads_per_worker=2)) // 2**20
    16
    """

    memory_limit: int | None
    threads_per_worker: int = 1
    n_workers: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "threads_per_worker", max(1, int(self.threads_per_worker)))
        if self.n_workers is not None:
            object.__setattr__(self, "n_workers", max(1, int(self.n_workers)))


def workers_of(client: Any) -> Workers | None:
    """The :class:`Workers` of ``client``'s cluster (None for no client)."""
    if client is None:
        return None
    n, limit, threads = worker_resources(client)
    return Workers(limit, threads, n or None)


def default_blocksize(
    client: Any = None,
    expansion: float = 1.0,
    input_bytes: float | None = None,
    *,
    workers: Workers | None = None,
) -> int:
    """The readers' blocksize (bytes on disk) when none is given.

    With workers that have a memory limit (``workers``, e.g. those an executor is about to
    start; else those of ``client``; else the active client's) and
    ``curator.io.blocksize-from-memory`` (default true):
    :func:`blocksize_for_memory` of ``curator.io.memory-fraction`` (0.6) of the limit less
    an idle worker's memory (:data:`BASE_WORKER_BYTES`), for one partition per worker
    thread (what the streaming executor keeps in flight), with ``expansion`` in-memory
    bytes per stored byte (a reader's ``expansion``: about 3 for Parquet). So partitions
    stay a fixed size however large the corpus, and a worker, idle memory included, stays
    under that share of its limit. Otherwise ``curator.io.blocksize``.

    With ``input_bytes`` (the input's bytes on disk) above ``curator.io.split-above`` (8 MiB),
    the blocksize is also at most what splits the input into
    ``curator.io.partitions-per-thread`` (2) partitions for every worker thread (at least
    1 MiB), so every thread has work and a slow partition does not hold the run: the
    ``workers``, else those of ``client``, else the active client's, else this machine's
    cores (dask's local scheduler). Resolved on the client, at run time, by the readers when
    they list the input.

    Examples
    --------
    >>> default_blocksize() == int(dask.utils.parse_bytes(_get("io.blocksize")))  # no client
    True
    """
    from dask.utils import parse_bytes

    ceiling = int(parse_bytes(_get("io.blocksize", "32MB")))
    if workers is not None:
        limit, threads, n_workers = (
            workers.memory_limit,
            workers.threads_per_worker,
            workers.n_workers,
        )
    else:
        n_workers, limit, threads = worker_resources(client)
    blocksize = ceiling
    if limit and _get("io.blocksize-from-memory", True):
        peak = float(_get("io.peak-per-partition-byte", 4)) * max(float(expansion), 1.0)
        # The whole worker, idle memory included, stays under the fraction of its limit (a
        # quarter of that share at least, for limits barely above an idle worker).
        share = limit * float(_get("io.memory-fraction", 0.6))
        usable = max(share - BASE_WORKER_BYTES, share / 4)
        blocksize = blocksize_for_memory(
            usable, threads, peak_per_partition_byte=peak, memory_fraction=1
        )
    if input_bytes and input_bytes > parse_bytes(_get("io.split-above", "8MiB")):
        if workers is None and not n_workers:  # no cluster: dask's local scheduler
            n_workers, threads = 1, os.cpu_count() or 1
        per_thread = max(1, int(_get("io.partitions-per-thread", 2)))
        parts = per_thread * max(1, n_workers or 1) * max(1, threads)
        # rounded up: ``parts`` ranges cover the input, with no sliver of a partition left
        blocksize = min(blocksize, max(2**20, -(-int(input_bytes) // parts)))
    return blocksize


def resolve_blocksize(
    blocksize: int | str | None,
    files_per_partition: int | None = None,
    *,
    expansion: float = 1.0,
    input_bytes: float | None = None,
    workers: Workers | None = None,
) -> int | None:
    """A reader's blocksize in bytes: the given one, else :func:`default_blocksize`.

    None with ``files_per_partition`` (whole files, no blocksize). The one place a reader's
    ``blocksize`` argument becomes bytes; called on the client when the input is listed,
    with the format's ``expansion``, the listing's ``input_bytes`` and the ``workers`` the
    reader was told of.

    Examples
    --------
    >>> resolve_blocksize("64MB")
    64000000
    >>> resolve_blocksize(None, files_per_partition=2) is None
    True
    """
    if files_per_partition is not None:
        return None
    if blocksize is not None:
        nbytes = int(dask.utils.parse_bytes(blocksize) if isinstance(blocksize, str) else blocksize)
        if nbytes <= 0:
            raise ValueError(f"blocksize must be > 0 bytes, got {blocksize!r}")
        return nbytes
    return default_blocksize(expansion=expansion, input_bytes=input_bytes, workers=workers)
