"""What the executor calls around a run: ``on_run_start(client, run_dir)``, ``on_run_end(result)``
and, when the run raised, ``on_run_failed(run_dir)``.

During a run a :class:`MemoryTimeline` samples the cluster; at its end the stage statistics
go to the Prometheus metrics (when prometheus-client is installed), the timeline is written
to ``<run_dir>/_timeline.parquet`` (local outputs only) and, if configured, the HTML report.
What happens is set in config (``curator.monitoring.*``, defaults in code):

- ``timeline`` (true): sample memory during runs;
- ``interval`` ("500ms"): seconds between samples;
- ``prometheus`` (true): record stage statistics in the Prometheus metrics;
- ``report`` (false): render ``_report.html`` at the end of each run (otherwise
  ``curator-dask report RUN_DIR`` renders it when asked, which keeps runs fast);
- ``warn-unmanaged-growth`` (true): warn when a worker's unmanaged memory grew steadily.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from dask.utils import parse_timedelta

from curator_dask import config as _config
from curator_dask.monitoring.timeline import MemoryTimeline

logger = logging.getLogger("curator_dask.monitoring")

_ACTIVE: dict[str, MemoryTimeline] = {}
_LOCK = threading.Lock()


def _setting(key: str, default: Any) -> Any:
    value = _config.get(f"monitoring.{key}", default)
    return default if value is None else value


def _local_dir(path: str) -> Path | None:
    """The local directory of ``path``, or None for a remote (``s3://``) one."""
    if path.startswith("file://"):
        path = path[len("file://") :]
    elif "://" in path:
        return None
    return Path(path)


def on_run_start(client: Any, run_dir: str) -> MemoryTimeline | None:
    """Start sampling memory for a run writing to ``run_dir``; return the timeline.

    Called by the executor before the first task. A previous timeline for the same
    ``run_dir`` that was never ended (a failed run) is stopped.
    """
    if not _setting("timeline", True):
        return None
    if client is not None and getattr(client, "asynchronous", False):
        return None  # the sampler calls the client from a thread: needs a synchronous one
    interval = parse_timedelta(_setting("interval", "500ms"), default="s")
    timeline = MemoryTimeline(client, interval_s=interval, export_metrics=_prometheus())
    with _LOCK:
        old = _ACTIVE.pop(str(run_dir), None)
        _ACTIVE[str(run_dir)] = timeline
    if old is not None:
        old.stop()
    return timeline.start()


def on_run_end(result: Any) -> Path | None:
    """Finish monitoring a run: metrics, timeline file, report; return the report path.

    ``result`` is the run's :class:`~curator_dask.pipeline.PipelineResult` (its
    ``output_path``, ``name``, ``stages`` and ``to_dict()`` are used). Returns the
    report's path when one was written.
    """
    run_dir = str(result.output_path)
    with _LOCK:
        timeline = _ACTIVE.pop(run_dir, None)
    if timeline is not None:
        timeline.stop()
    if _prometheus():
        from curator_dask.monitoring.metrics import record_stage_stats

        record_stage_stats(result.stages, pipeline=str(result.name))
    local = _local_dir(run_dir)
    report = None
    if local is not None and local.is_dir():
        from curator_dask.monitoring.report import TIMELINE_FILE, write_run_report
        from curator_dask.monitoring.timeline import write_timeline

        if timeline is not None and len(timeline):
            write_timeline(timeline.frame(), local / TIMELINE_FILE)
        if _setting("report", False):
            report = write_run_report(local, result.to_dict(), timeline)
            logger.info("run report: %s", report)
    if timeline is not None and _setting("warn-unmanaged-growth", True):
        from curator_dask.monitoring.checks import detect_unmanaged_growth

        detect_unmanaged_growth(timeline, stacklevel=3)
    return report


def on_run_failed(run_dir: str) -> Path | None:
    """Stop the memory sampler of a run that raised; keep what it sampled.

    Called by the executor when a run writing to ``run_dir`` fails, so no sampling
    thread outlives the run. The samples up to the failure (often the most useful ones:
    the memory of the worker that died) are written to ``<run_dir>/_timeline.parquet``
    when ``run_dir`` is a local directory; returns that path, or None.
    """
    with _LOCK:
        timeline = _ACTIVE.pop(str(run_dir), None)
    if timeline is None:
        return None
    timeline.stop()
    local = _local_dir(str(run_dir))
    if local is None or not local.is_dir() or not len(timeline):
        return None
    from curator_dask.monitoring.report import TIMELINE_FILE
    from curator_dask.monitoring.timeline import write_timeline

    return write_timeline(timeline.frame(), local / TIMELINE_FILE)


def _prometheus() -> bool:
    if not _setting("prometheus", True):
        return False
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True
