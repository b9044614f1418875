"""Warnings a user can act on: partitions too large, unmanaged memory growth, GPU OOM.

Each check returns what it found (so a caller can act on it programmatically) and issues a
:class:`CuratorWarning` whose message says what to change.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import pandas as pd

from curator_dask.errors import CuratorWarning
from curator_dask.monitoring.timeline import MemoryTimeline, as_frame

_MIB = 1024**2


def format_bytes(n: float) -> str:
    """Format a byte count with a binary unit: ``format_bytes(3 * 2**30) == '3.0 GiB'``."""
    if n is None or math.isnan(n):
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _nice_blocksize(nbytes: float) -> str:
    """Largest 2**k MiB (at least 1 MiB) not above ``nbytes``, as a blocksize string."""
    mib = max(1, 2 ** math.floor(math.log2(max(nbytes / _MIB, 1))))
    return f"{mib}MiB"


def check_partition_size(
    estimated_bytes: float,
    worker_memory_limit: float | None,
    *,
    blocksize: float | None = None,
    tasks_per_worker: int = 1,
    max_fraction: float = 0.5,
    stacklevel: int = 2,
) -> str | None:
    """Warn when partitions are estimated to come near a worker's memory limit.

    A task holds its input partition, its output and intermediates at once, so a partition
    should stay well below its share of the worker's memory.

    Parameters
    ----------
    estimated_bytes : float
        Estimated in-memory size of one partition.
    worker_memory_limit : float or None
        A worker's memory limit in bytes; ``None`` or 0 (no limit) checks nothing.
    blocksize : float, optional
        The reader's current ``blocksize`` in bytes on disk. When given, the suggestion
        keeps the observed ratio between in-memory and on-disk size.
    tasks_per_worker : int
        Partitions a worker processes at the same time (its threads).
    max_fraction : float
        Warn above this fraction of the per-task memory share.
    stacklevel : int
        Passed to :func:`warnings.warn`.

    Returns
    -------
    str or None
        The suggested ``blocksize`` (e.g. ``"64MiB"``) when a warning was issued, else None.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     check_partition_size(3 * 2**30, 4 * 2**30, blocksize=2**30)
    '256MiB'
    >>> check_partition_size(100 * 2**20, 4 * 2**30) is None
    True
    """
    if not worker_memory_limit or worker_memory_limit <= 0 or estimated_bytes <= 0:
        return None
    tasks = max(1, int(tasks_per_worker))
    share = worker_memory_limit / tasks
    if estimated_bytes <= max_fraction * share:
        return None
    ratio = estimated_bytes / blocksize if blocksize else 1.0
    # aim at half the warning threshold: headroom for the task's output and intermediates
    suggested = _nice_blocksize(max_fraction * share / 2 / ratio)
    where = f"{tasks} at a time per worker, " if tasks > 1 else ""
    warnings.warn(
        f"partitions are estimated at {format_bytes(estimated_bytes)} in memory "
        f"({where}worker memory limit {format_bytes(worker_memory_limit)}): "
        f"workers will spill or be restarted. Use smaller partitions, e.g. "
        f"blocksize={suggested!r} (reader argument, or curator.io.blocksize in config)"
        + (", or fewer threads per worker" if tasks > 1 else "")
        + ".",
        CuratorWarning,
        stacklevel=stacklevel,
    )
    return suggested


@dataclass(frozen=True)
class MemoryGrowth:
    """Unmanaged memory of one worker that grew across a whole timeline."""

    worker: str
    start_bytes: float
    end_bytes: float
    seconds: float
    samples: int

    @property
    def growth_bytes(self) -> float:
        """Bytes gained between the first and the last sample."""
        return self.end_bytes - self.start_bytes

    def describe(self) -> str:
        """One line for messages and reports."""
        rate = self.growth_bytes / self.seconds if self.seconds > 0 else float("nan")
        return (
            f"{self.worker}: unmanaged memory {format_bytes(self.start_bytes)} -> "
            f"{format_bytes(self.end_bytes)} over {self.seconds:.0f} s "
            f"({format_bytes(rate)}/s, {self.samples} samples)"
        )


def detect_unmanaged_growth(
    timeline: MemoryTimeline | pd.DataFrame,
    *,
    min_samples: int = 8,
    min_growth_bytes: float = 256 * _MIB,
    tolerance_bytes: float = 16 * _MIB,
    partitions_per_worker: float | None = None,
    min_partitions_per_worker: float = 8,
    warn: bool = True,
    stacklevel: int = 2,
) -> list[MemoryGrowth]:
    """Find workers whose unmanaged memory grows steadily: a likely leak.

    A worker is reported when, over at least ``min_samples`` samples, its unmanaged memory
    (process memory when unmanaged is unknown, as without a distributed client)

    - never falls more than ``tolerance_bytes`` below its running maximum,
    - rises in each quarter of the run by at least ``min_growth_bytes / 8`` (a single step,
      such as loading a model, or imports spread over the first tasks, is no leak),
    - and ends at least ``min_growth_bytes`` above where it started.

    A leak grows with the work done, a warm-up (imports, compiled kernels, the allocator's
    arenas) with the first partitions a worker runs; on a busy machine a run of a few
    partitions per worker spreads its warm-up over the whole run, and the two look the same.
    So when ``partitions_per_worker`` is given and below ``min_partitions_per_worker``,
    nothing is reported: the run is too short to tell.

    Parameters
    ----------
    timeline : MemoryTimeline or DataFrame
        A timeline or its :meth:`~MemoryTimeline.frame`.
    min_samples, min_growth_bytes, tolerance_bytes
        The thresholds above.
    partitions_per_worker : float, optional
        Partitions the run computed per worker (None: unknown, not checked).
    min_partitions_per_worker : float
        Fewer than this per worker: too short a run to tell a leak from a warm-up.
    warn : bool
        Issue one :class:`CuratorWarning` naming the workers found.
    stacklevel : int
        Passed to :func:`warnings.warn`.

    Returns
    -------
    list of MemoryGrowth
        One per worker found, largest growth first.
    """
    frame = as_frame(timeline)
    found: list[MemoryGrowth] = []
    if partitions_per_worker is not None and partitions_per_worker < min_partitions_per_worker:
        return found
    for worker, g in frame.groupby("worker", sort=True):
        col = "unmanaged" if g["unmanaged"].notna().any() else "rss"
        g = g[["time", col]].dropna().sort_values("time", kind="stable")
        if len(g) < max(min_samples, 4):
            continue
        t = g["time"].to_numpy()
        x = g[col].to_numpy()
        if x[-1] - x[0] < min_growth_bytes:
            continue
        running_max = pd.Series(x).cummax().to_numpy()
        if (x < running_max - tolerance_bytes).any():
            continue
        edges = [x[round(i * (len(x) - 1) / 4)] for i in range(5)]
        # each quarter rises by a real amount: workers importing their libraries while the
        # first tasks run (a ramp that stops) is no leak, even when a busy machine spreads it
        step = min_growth_bytes / 8
        if not all(b - a >= step for a, b in itertools.pairwise(edges)):
            continue
        found.append(MemoryGrowth(str(worker), float(x[0]), float(x[-1]), t[-1] - t[0], len(x)))
    found.sort(key=lambda f: -f.growth_bytes)
    if found and warn:
        lines = "\n  ".join(f.describe() for f in found)
        warnings.warn(
            "unmanaged memory grew steadily during the run, which usually means a leak "
            "(objects kept alive between tasks: caches, global lists, a model loaded per "
            "task instead of once in setup()):\n  " + lines + "\nCheck the stage that runs "
            "at that time; see docs/monitoring.md, 'Unmanaged memory'.",
            CuratorWarning,
            stacklevel=stacklevel,
        )
    return found


_OOM_MARKERS = (
    "out of memory",
    "outofmemory",
    "out_of_memory",
    "cudaerrormemoryallocation",
    "std::bad_alloc",
    "cuda_error_out_of_memory",
)


def is_gpu_oom(exc: BaseException) -> bool:
    """True when ``exc`` looks like a GPU out-of-memory error (torch, CuPy, RMM, cuDF)."""
    name = type(exc).__name__.lower()
    if name in ("outofmemoryerror", "cudaoutofmemoryerror"):
        return True
    text = f"{name} {exc}".lower()
    return any(marker in text for marker in _OOM_MARKERS)


def gpu_oom_message(
    stage: str,
    batch_size: int | None = None,
    *,
    gpu_used_bytes: float | None = None,
    gpu_total_bytes: float | None = None,
) -> str:
    """Return advice for a GPU stage that ran out of memory.

    Parameters
    ----------
    stage : str
        The stage's name.
    batch_size : int, optional
        Its current ``model_inference_batch_size``; the message suggests half.
    gpu_used_bytes, gpu_total_bytes : float, optional
        GPU memory at the time, if known (from a :class:`MemoryTimeline`).

    Examples
    --------
    >>> print(gpu_oom_message("QualityClassifier", 256).splitlines()[1])
    Pass a smaller batch: model_inference_batch_size=128 (now 256),
    """
    smaller = max(1, batch_size // 2) if batch_size else None
    mem = ""
    if gpu_used_bytes is not None and gpu_total_bytes:
        mem = f" (GPU memory {format_bytes(gpu_used_bytes)} of {format_bytes(gpu_total_bytes)})"
    head = f"{stage}: the GPU ran out of memory{mem}."
    if smaller is not None:
        fix = f"Pass a smaller batch: model_inference_batch_size={smaller} (now {batch_size}),"
    else:
        fix = "Pass a smaller model_inference_batch_size (halve it until the stage fits),"
    return (
        f"{head}\n{fix}\n"
        "or give each task a larger share of a GPU (Resources(gpus=1) instead of a fraction), "
        "or smaller partitions (blocksize), so fewer documents are on the GPU at once."
    )


def warn_gpu_oom(stage: str, batch_size: int | None = None, **kw: Any) -> str:
    """Issue :func:`gpu_oom_message` as a :class:`CuratorWarning` and return it."""
    msg = gpu_oom_message(stage, batch_size, **kw)
    warnings.warn(msg, CuratorWarning, stacklevel=2)
    return msg
