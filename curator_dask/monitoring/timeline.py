"""Memory over time while a run executes: per worker process and per GPU.

:class:`MemoryTimeline` samples in a background thread on the client. With a distributed
client it reads what the scheduler already knows about each worker (process memory, managed
bytes, spilled bytes, GPU memory when the workers have NVML): one cheap ``identity`` call per
sample, nothing runs on the workers. Without a client it measures the local process tree
with psutil. GPUs of the client's machine are read through NVML (``nvidia-ml-py``) when the
workers do not report them; without NVML there are simply no GPU rows.

Memory follows distributed's own breakdown: ``managed`` is the data dask holds in memory,
``unmanaged = rss - managed`` (interpreter, libraries, fragmentation, leaks) and ``spilled``
is what the worker wrote to disk.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd

logger = logging.getLogger(__name__)

#: Columns of :meth:`MemoryTimeline.frame`, in order.
TIMELINE_COLUMNS = (
    "time",
    "timestamp",
    "worker",
    "rss",
    "managed",
    "unmanaged",
    "spilled",
    "memory_limit",
    "gpu_used",
    "gpu_total",
)

_NAN = float("nan")
_CLOSED = ("closing", "closed")


# Why not distributed.diagnostics.MemorySampler: it records the cluster's *sum* of process,
# managed, unmanaged and spilled memory per sample, through a scheduler plugin. The report's
# per-worker charts and the leak check (detect_unmanaged_growth, per worker) need each
# worker's series, GPU memory needs NVML, and a client without a scheduler plugin must work
# too (psutil of this process tree). The samples come from the same scheduler-side worker
# metrics MemorySampler reads.
class MemoryTimeline:
    """Sample worker and GPU memory in the background while a run executes.

    Use it as a context manager around a run, or call :meth:`start` and :meth:`stop`.
    A sample is taken at start, every ``interval_s`` seconds, and at stop, so even a short
    run has two.

    Parameters
    ----------
    client : distributed.Client, optional
        Sample the workers of this client's cluster (from the scheduler's worker metrics).
        ``None`` samples the local process and its children with psutil.
    interval_s : float
        Seconds between samples. The workers refresh their metrics with each heartbeat,
        so sampling much faster than that repeats values.
    gpu : bool
        Read GPU memory with NVML on this machine when the workers do not report it.
    export_metrics : bool
        Also set the Prometheus gauges ``curator_worker_memory_bytes`` and
        ``curator_gpu_memory_used_bytes`` at each sample (see
        :mod:`curator_dask.monitoring.metrics`).

    Examples
    --------
    >>> with MemoryTimeline(interval_s=0.05) as timeline:
    ...     _ = sum(range(100_000))
    >>> frame = timeline.frame()
    >>> int(frame["time"].min()), bool((frame["rss"] > 0).all())
    (0, True)
    """

    def __init__(
        self,
        client: Any = None,
        interval_s: float = 0.5,
        *,
        gpu: bool = True,
        export_metrics: bool = False,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.client = client
        self.interval_s = float(interval_s)
        self.gpu = gpu
        self.export_metrics = export_metrics
        self.errors = 0
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0: float | None = None
        self._nvml: _NVML | None = None
        self._procs: dict[int, Any] = {}

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> MemoryTimeline:
        """Take the first sample and start the sampling thread; return ``self``."""
        if self._thread is not None:
            raise RuntimeError("MemoryTimeline already started")
        if self.gpu:
            self._nvml = _NVML.open()
        self._t0 = time.monotonic()
        self._stop.clear()
        self.sample()
        self._thread = threading.Thread(
            target=self._loop, name="curator-memory-timeline", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> MemoryTimeline:
        """Stop the thread and take a last sample; return ``self``. Idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return self
        self._stop.set()
        thread.join()
        self.sample()
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None
        return self

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._thread is not None

    def __enter__(self) -> MemoryTimeline:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            # a run that failed never calls stop(): end with the client, not with the process
            if self.client is not None and getattr(self.client, "status", "") in _CLOSED:
                return
            self.sample()

    # -- sampling ---------------------------------------------------------------------
    def sample(self) -> int:
        """Take one sample now (also called by the thread); return the rows added.

        A failed sample (a scheduler that went away, a process that exited) is counted in
        :attr:`errors` and logged, never raised: monitoring must not break a run.
        """
        if self._t0 is None:
            self._t0 = time.monotonic()
        now = time.monotonic() - self._t0
        stamp = pd.Timestamp.now(tz="UTC")
        try:
            rows = self._sample_local() if self.client is None else _sample_client(self.client)
            if self._nvml is not None and not any(not math.isnan(r["gpu_used"]) for r in rows):
                rows.extend(self._nvml.sample())
        except Exception as e:  # a sampler must never take the run down with it
            self.errors += 1
            logger.debug("memory sample failed: %r", e)
            return 0
        for r in rows:
            r["time"] = now
            r["timestamp"] = stamp
        with self._lock:
            self._rows.extend(rows)
        if self.export_metrics:
            _export(rows)
        return len(rows)

    def _sample_local(self) -> list[dict[str, Any]]:
        import psutil

        me = psutil.Process(os.getpid())
        procs = [me, *me.children(recursive=True)]
        rows = []
        for p in procs:
            # keep Process objects: psutil caches per-object state and pid reuse checks
            proc = self._procs.setdefault(p.pid, p)
            try:
                rss = float(proc.memory_info().rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                self._procs.pop(p.pid, None)
                continue
            worker = "local" if proc.pid == me.pid else f"pid:{proc.pid}"
            rows.append(_row(worker, rss=rss))
        return rows

    # -- results ----------------------------------------------------------------------
    def frame(self) -> pd.DataFrame:
        """Return the samples so far, one row per worker (or GPU) and sample.

        Columns: ``time`` (seconds since start), ``timestamp`` (UTC), ``worker`` (worker
        address, ``local`` / ``pid:<n>`` without a client, ``gpu:<i>`` for GPUs read on
        this machine), and bytes: ``rss``, ``managed``, ``unmanaged``, ``spilled``,
        ``memory_limit``, ``gpu_used``, ``gpu_total``. Unknown values are NaN (for example
        ``managed`` without a distributed client).
        """
        with self._lock:
            rows = list(self._rows)
        return timeline_frame(rows)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`frame` to ``path``: Parquet for ``.parquet``, else JSON records.

        Returns
        -------
        pathlib.Path
            The file written. :func:`read_timeline` reads it back.
        """
        return write_timeline(self.frame(), path)

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)

    def __repr__(self) -> str:
        src = "client" if self.client is not None else "local"
        return f"MemoryTimeline({src}, interval_s={self.interval_s}, samples={len(self)})"


def timeline_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Build a timeline frame with the standard columns and dtypes from sample rows."""
    df = pd.DataFrame(rows, columns=list(TIMELINE_COLUMNS))
    df["worker"] = df["worker"].astype("string")
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
    for col in TIMELINE_COLUMNS:
        if col not in ("timestamp", "worker"):
            df[col] = df[col].astype("float64")
    return df.sort_values(["time", "worker"], kind="stable").reset_index(drop=True)


def write_timeline(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a timeline frame to Parquet (``.parquet``, ``.pqt``) or JSON records (else)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".parquet", ".pqt"):
        frame.to_parquet(path, index=False)
    else:
        frame.to_json(path, orient="records", date_format="iso", date_unit="us")
    return path


def read_timeline(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a timeline written by :meth:`MemoryTimeline.write`."""
    path = Path(path)
    if path.suffix in (".parquet", ".pqt"):
        df = pd.read_parquet(path)
    else:
        df = pd.read_json(path, orient="records", convert_dates=["timestamp"])
    for col in TIMELINE_COLUMNS:
        if col not in df.columns:
            df[col] = _NAN
    return timeline_frame(df[list(TIMELINE_COLUMNS)].to_dict("records"))


def as_frame(timeline: MemoryTimeline | pd.DataFrame | None) -> pd.DataFrame:
    """Return the frame of a timeline, a frame unchanged, or an empty timeline frame."""
    if timeline is None:
        return timeline_frame([])
    if isinstance(timeline, MemoryTimeline):
        return timeline.frame()
    if isinstance(timeline, pd.DataFrame):
        return timeline
    raise TypeError(f"expected a MemoryTimeline or DataFrame, got {type(timeline).__name__}")


# -- samplers -----------------------------------------------------------------------------
def _row(worker: str, **values: float) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(TIMELINE_COLUMNS, _NAN)
    row["worker"] = worker
    row.update(values)
    return row


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else _NAN


def _sample_client(client: Any) -> list[dict[str, Any]]:
    info = client.scheduler_info(n_workers=-1)
    rows = []
    for addr, w in info.get("workers", {}).items():
        m = w.get("metrics", {})
        rss = _num(m.get("memory"))
        spilled = m.get("spilled_bytes") or {}
        # distributed's breakdown (see its worker Prometheus collector): managed is what
        # dask holds in memory, capped by the process size; spilled is bytes on disk.
        managed = _num(m.get("managed_bytes")) - _num(spilled.get("memory", 0))
        managed = _NAN if math.isnan(managed) or math.isnan(rss) else max(0.0, min(rss, managed))
        gpu = m.get("gpu") if isinstance(m.get("gpu"), dict) else {}
        gpu_used = _num(m.get("gpu_memory_used", gpu.get("memory-used")))
        gpu_total = _num(m.get("gpu-memory-total", gpu.get("memory-total")))
        limit = _num(w.get("memory_limit"))
        rows.append(
            _row(
                str(addr),
                rss=rss,
                managed=managed,
                unmanaged=rss - managed,
                spilled=_num(spilled.get("disk", 0)),
                memory_limit=limit if limit and limit > 0 else _NAN,
                gpu_used=gpu_used,
                gpu_total=gpu_total,
            )
        )
    return rows


class _NVML:
    """GPU memory of this machine through NVML; ``open`` returns None without it."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self._handles = handles

    @classmethod
    def open(cls) -> _NVML | None:
        try:
            import pynvml  # from nvidia-ml-py
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
            n = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        except Exception as e:  # NVML library or driver missing: no GPU rows
            logger.debug("NVML unavailable: %r", e)
            return None
        if not handles:
            pynvml.nvmlShutdown()
            return None
        return cls(pynvml, handles)

    def sample(self) -> list[dict[str, Any]]:
        rows = []
        for i, h in enumerate(self._handles):
            mem = self._nvml.nvmlDeviceGetMemoryInfo(h)
            rows.append(_row(f"gpu:{i}", gpu_used=float(mem.used), gpu_total=float(mem.total)))
        return rows

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception as e:
            logger.debug("nvmlShutdown failed: %r", e)


def _export(rows: list[dict[str, Any]]) -> None:
    from curator_dask.monitoring.metrics import set_memory_gauges

    set_memory_gauges(rows)
