"""curator_dask's own Prometheus metrics (optional extra ``monitoring``: prometheus-client).

The executor records each partition's statistics on the client as the partition's record
arrives (statistics are values returned from tasks, never counters mutated inside
partitions), so these metrics live in the client process and grow while a run goes;
``curator-dask run --metrics-port PORT`` (and the dedup commands, whose workflows count
their steps' work as it finishes) serve them. Serve them
with :func:`start_metrics_server` and scrape ``http://<addr>:<port>/metrics``. The scheduler
and workers serve their own ``/metrics``
(``dask_scheduler_*``, ``dask_worker_*``) on their dashboard ports whenever
prometheus-client is installed; see ``docs/monitoring.md``.

Metrics (labels in braces):

- ``curator_documents_processed_total{pipeline,stage}``: documents into a stage;
- ``curator_documents_kept_total{pipeline,stage}``: documents out of a stage;
- ``curator_documents_removed_total{pipeline,stage}``: dropped on purpose (filters, dedup);
- ``curator_documents_quarantined_total{pipeline,stage}``: rejected records kept aside;
- ``curator_partitions_total{pipeline,stage}``: partitions a stage finished;
- ``curator_stage_seconds{pipeline,stage}``: histogram of one partition's time in a stage;
- ``curator_tasks_failed_total{pipeline,stage}``, ``curator_tasks_retried_total{...}``;
- ``curator_dedup_progress_total{workflow,step,unit}``: work a dedup step finished
  (``partitions``, ``band groups``, ``iterations``), counted as it finishes; at the end of a
  dedup run its documents go to the document counters above with
  ``pipeline=stage=<workflow>`` (``exact-dedup``, ``fuzzy-dedup``, ``semantic-dedup``):
  processed (read), removed (duplicates), kept (the rest), quarantined;
- ``curator_worker_memory_bytes{worker,type}`` and ``curator_gpu_memory_used_bytes{device}``,
  ``curator_gpu_memory_total_bytes{device}``: set by a
  :class:`~curator_dask.monitoring.MemoryTimeline` created with ``export_metrics=True``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from curator_dask.stage import StageStats

#: Upper bounds (seconds) of the ``curator_stage_seconds`` histogram buckets.
STAGE_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)

_LOCK = threading.Lock()
_DEFAULT: CuratorMetrics | None = None


class CuratorMetrics:
    """The set of curator_dask metrics registered in one Prometheus registry.

    Parameters
    ----------
    registry : prometheus_client.CollectorRegistry, optional
        Where to register; the process-wide default registry when None. Use a fresh
        registry to keep several sets apart (tests, several pipelines in one process).
    """

    def __init__(self, registry: Any = None) -> None:
        from prometheus_client import REGISTRY, Counter, Gauge, Histogram

        self.registry = REGISTRY if registry is None else registry
        labels = ("pipeline", "stage")
        reg = self.registry
        self.processed = Counter(
            "curator_documents_processed",
            "Documents into a stage",
            labels,
            registry=reg,
        )
        self.kept = Counter(
            "curator_documents_kept", "Documents out of a stage", labels, registry=reg
        )
        self.removed = Counter(
            "curator_documents_removed",
            "Documents a stage dropped on purpose (filters, dedup)",
            labels,
            registry=reg,
        )
        self.quarantined = Counter(
            "curator_documents_quarantined",
            "Rejected input records written to the quarantine",
            labels,
            registry=reg,
        )
        self.partitions = Counter(
            "curator_partitions", "Partitions a stage finished", labels, registry=reg
        )
        self.stage_seconds = Histogram(
            "curator_stage_seconds",
            "Time one partition spent in a stage",
            labels,
            buckets=STAGE_SECONDS_BUCKETS,
            registry=reg,
        )
        self.tasks_failed = Counter(
            "curator_tasks_failed", "Stage tasks that raised", labels, registry=reg
        )
        self.tasks_retried = Counter(
            "curator_tasks_retried",
            "Stage tasks submitted again after a failure",
            labels,
            registry=reg,
        )
        self.dedup_progress = Counter(
            "curator_dedup_progress",
            "Work a dedup step finished (partitions, band groups, iterations)",
            ("workflow", "step", "unit"),
            registry=reg,
        )
        self.worker_memory = Gauge(
            "curator_worker_memory_bytes",
            "Worker process memory by type (rss, managed, unmanaged, spilled)",
            ("worker", "type"),
            registry=reg,
        )
        self.gpu_used = Gauge(
            "curator_gpu_memory_used_bytes", "GPU memory in use", ("device",), registry=reg
        )
        self.gpu_total = Gauge(
            "curator_gpu_memory_total_bytes", "GPU memory in total", ("device",), registry=reg
        )


def default_metrics() -> CuratorMetrics:
    """Return the metrics registered in the default registry (created on first use)."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = CuratorMetrics()
        return _DEFAULT


def _stats_dict(stats: StageStats | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(stats, StageStats):
        return stats.to_dict()
    d = dict(stats)
    if "removed" not in d:
        d["removed"] = d.get("docs_in", 0) - d.get("docs_out", 0) - d.get("quarantined", 0)
    return d


def record_stage_stats(
    stats_list: Iterable[StageStats | Mapping[str, Any]],
    *,
    pipeline: str = "",
    metrics: CuratorMetrics | None = None,
) -> None:
    """Add stage statistics to the Prometheus metrics (call on the client).

    Parameters
    ----------
    stats_list : iterable of StageStats or dict
        Per-partition :class:`~curator_dask.stage.StageStats` (best: the latency histogram
        then holds every partition) or stats already summed over ``partitions`` partitions,
        which count as that many observations of their mean time. Dicts as written by
        :meth:`StageStats.to_dict` (the ``stages`` of ``_stats.json``) are accepted.
    pipeline : str
        Value of the ``pipeline`` label.
    metrics : CuratorMetrics, optional
        Where to record; :func:`default_metrics` when None.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry
    >>> m = CuratorMetrics(CollectorRegistry())
    >>> record_stage_stats([StageStats("WordCountFilter", 10, 7)], pipeline="demo", metrics=m)
    >>> m.removed.labels("demo", "WordCountFilter")._value.get()
    3.0
    """
    m = metrics or default_metrics()
    for stats in stats_list:
        d = _stats_dict(stats)
        key = (pipeline, str(d["name"]))
        # a stage may add documents (a splitter): counters only go up, so clamp at zero
        m.processed.labels(*key).inc(max(0, int(d.get("docs_in", 0))))
        m.kept.labels(*key).inc(max(0, int(d.get("docs_out", 0))))
        m.removed.labels(*key).inc(max(0, int(d.get("removed", 0))))
        m.quarantined.labels(*key).inc(max(0, int(d.get("quarantined", 0))))
        parts = max(0, int(d.get("partitions", 1)))
        m.partitions.labels(*key).inc(parts)
        seconds = float(d.get("seconds", 0.0))
        hist = m.stage_seconds.labels(*key)
        for _ in range(parts):
            hist.observe(seconds / parts)


def record_task_failure(
    stage: str, *, pipeline: str = "", retried: bool = False, metrics: CuratorMetrics | None = None
) -> None:
    """Count one failed stage task; ``retried=True`` also counts its resubmission."""
    m = metrics or default_metrics()
    m.tasks_failed.labels(pipeline, stage).inc()
    if retried:
        m.tasks_retried.labels(pipeline, stage).inc()


def record_task_retry(
    stage: str, *, pipeline: str = "", metrics: CuratorMetrics | None = None
) -> None:
    """Count one resubmission of a stage task after a failure."""
    m = metrics or default_metrics()
    m.tasks_retried.labels(pipeline, stage).inc()


def record_dedup_progress(
    workflow: str, step: str, unit: str, n: int = 1, *, metrics: CuratorMetrics | None = None
) -> None:
    """Count ``n`` units of a dedup step's work as they finish (0 creates the series)."""
    m = metrics or default_metrics()
    m.dedup_progress.labels(workflow, step, unit).inc(max(0, int(n)))


def record_dedup_result(result: Any, *, metrics: CuratorMetrics | None = None) -> None:
    """Add a finished dedup run's documents to the document counters.

    ``result`` is a :class:`~curator_dask.dedup.DedupResult`; its ``method`` is both the
    ``pipeline`` and the ``stage`` label.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from prometheus_client import CollectorRegistry
    >>> m = CuratorMetrics(CollectorRegistry())
    >>> run = SimpleNamespace(method="exact-dedup", documents=10, removed=3, quarantined=1)
    >>> record_dedup_result(run, metrics=m)
    >>> m.kept.labels("exact-dedup", "exact-dedup")._value.get()
    7.0
    """
    documents, removed = int(result.documents), int(result.removed)
    stats = {
        "name": result.method,
        "docs_in": documents,
        "docs_out": documents - removed,
        "removed": removed,
        "quarantined": int(result.quarantined),
        "partitions": 0,  # no per-partition latency: the step times are in the result
    }
    record_stage_stats([stats], pipeline=result.method, metrics=metrics)


def set_memory_gauges(
    rows: Iterable[Mapping[str, Any]], *, metrics: CuratorMetrics | None = None
) -> None:
    """Set the memory gauges from timeline rows (see :class:`MemoryTimeline`)."""
    m = metrics or default_metrics()
    for r in rows:
        worker = str(r["worker"])
        for kind in ("rss", "managed", "unmanaged", "spilled"):
            v = r.get(kind)
            if v is not None and not math.isnan(v):
                m.worker_memory.labels(worker, kind).set(v)
        used, total = r.get("gpu_used"), r.get("gpu_total")
        if used is not None and not math.isnan(used):
            m.gpu_used.labels(worker).set(used)
        if total is not None and not math.isnan(total):
            m.gpu_total.labels(worker).set(total)


@dataclass
class MetricsServer:
    """A running ``/metrics`` HTTP endpoint (see :func:`start_metrics_server`)."""

    addr: str
    port: int
    _server: Any
    _thread: Any

    @property
    def url(self) -> str:
        """The scrape URL."""
        return f"http://{self.addr}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_metrics_server(
    port: int = 0, addr: str = "127.0.0.1", *, registry: Any = None
) -> MetricsServer:
    """Serve the Prometheus metrics of this process over HTTP in a daemon thread.

    Parameters
    ----------
    port : int
        TCP port; ``0`` picks a free one (read it from the result's ``port``).
    addr : str
        Address to bind. The default serves this machine only; use ``"0.0.0.0"`` for a
        Prometheus server elsewhere.
    registry : prometheus_client.CollectorRegistry, optional
        The registry to serve; the default registry (which holds :func:`default_metrics`).

    Returns
    -------
    MetricsServer
        With ``port``, ``url`` and ``close()``.

    Examples
    --------
    >>> with start_metrics_server(0) as server:
    ...     server.url.startswith("http://127.0.0.1:")
    True
    """
    from prometheus_client import REGISTRY, start_http_server

    server, thread = start_http_server(
        port, addr=addr, registry=REGISTRY if registry is None else registry
    )
    return MetricsServer(addr, int(server.server_port), server, thread)
