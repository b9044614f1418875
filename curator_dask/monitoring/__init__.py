"""Watch a run: memory timeline, Prometheus metrics, HTML report, actionable warnings.

- :class:`MemoryTimeline` samples worker and GPU memory while a run executes;
- :func:`write_run_report` renders ``<run_dir>/_report.html`` (``curator-dask report``);
- :func:`record_stage_stats` and :func:`start_metrics_server` expose curator_dask's
  Prometheus metrics (extra ``monitoring``: prometheus-client);
- :func:`check_partition_size`, :func:`detect_unmanaged_growth` and
  :func:`gpu_oom_message` turn symptoms into a :class:`CuratorWarning` that says what to do;
- :func:`on_run_start`, :func:`on_run_end` and :func:`on_run_failed` are what the executor
  calls around a run.

See ``docs/monitoring.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from curator_dask._lazy import lazy_exports

_EXPORTS = {
    "CuratorWarning": "curator_dask.monitoring.checks",
    "MemoryGrowth": "curator_dask.monitoring.checks",
    "check_partition_size": "curator_dask.monitoring.checks",
    "detect_unmanaged_growth": "curator_dask.monitoring.checks",
    "gpu_oom_message": "curator_dask.monitoring.checks",
    "is_gpu_oom": "curator_dask.monitoring.checks",
    "warn_gpu_oom": "curator_dask.monitoring.checks",
    "on_run_end": "curator_dask.monitoring.hooks",
    "on_run_failed": "curator_dask.monitoring.hooks",
    "on_run_start": "curator_dask.monitoring.hooks",
    "CuratorMetrics": "curator_dask.monitoring.metrics",
    "MetricsServer": "curator_dask.monitoring.metrics",
    "default_metrics": "curator_dask.monitoring.metrics",
    "record_stage_stats": "curator_dask.monitoring.metrics",
    "record_task_failure": "curator_dask.monitoring.metrics",
    "record_task_retry": "curator_dask.monitoring.metrics",
    "start_metrics_server": "curator_dask.monitoring.metrics",
    "load_run": "curator_dask.monitoring.report",
    "render_report_html": "curator_dask.monitoring.report",
    "write_run_report": "curator_dask.monitoring.report",
    "MemoryTimeline": "curator_dask.monitoring.timeline",
    "read_timeline": "curator_dask.monitoring.timeline",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from curator_dask.monitoring.checks import (
        CuratorWarning,
        MemoryGrowth,
        check_partition_size,
        detect_unmanaged_growth,
        gpu_oom_message,
        is_gpu_oom,
        warn_gpu_oom,
    )
    from curator_dask.monitoring.hooks import on_run_end, on_run_failed, on_run_start
    from curator_dask.monitoring.metrics import (
        CuratorMetrics,
        MetricsServer,
        default_metrics,
        record_stage_stats,
        record_task_failure,
        record_task_retry,
        start_metrics_server,
    )
    from curator_dask.monitoring.report import load_run, render_report_html, write_run_report
    from curator_dask.monitoring.timeline import MemoryTimeline, read_timeline

__all__ = [
    "CuratorMetrics",
    "CuratorWarning",
    "MemoryGrowth",
    "MemoryTimeline",
    "MetricsServer",
    "check_partition_size",
    "default_metrics",
    "detect_unmanaged_growth",
    "gpu_oom_message",
    "is_gpu_oom",
    "load_run",
    "on_run_end",
    "on_run_failed",
    "on_run_start",
    "read_timeline",
    "record_stage_stats",
    "record_task_failure",
    "record_task_retry",
    "render_report_html",
    "start_metrics_server",
    "warn_gpu_oom",
    "write_run_report",
]
