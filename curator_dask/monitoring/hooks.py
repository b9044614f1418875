"""Monitoring as a run hook: :class:`MonitoringHooks`, registered in
:mod:`curator_dask.hooks` when this module is imported (the executors and the dedup
workflows import it).

For a pipeline run on a client it calls ``on_run_start(client, run_dir)``,
``on_partition_done(run_dir, pipeline, record)`` for each partition written,
``on_task_failed(client, plan, key, retried)``, ``on_run_end(result)`` and, when the run
raised, ``on_run_failed(run_dir)``; for a dedup workflow
``on_dedup_progress(workflow, step, unit, n)`` as its steps' work finishes and
``on_dedup_result(result)`` at the end.

During a run a :class:`MemoryTimeline` samples the cluster and each partition's stage
statistics go to the Prometheus metrics as the partition's record reaches the client (when
prometheus-client is installed: one latency observation per partition and stage, counters
that grow while the run goes); at its end the timeline is written
to ``<run_dir>/_timeline.pqt`` (local outputs only) and, if configured, the HTML report.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dask.utils import parse_timedelta

from curator_dask import config as _config
from curator_dask import hooks as _hooks
from curator_dask.monitoring.timeline import MemoryTimeline

logger = logging.getLogger("curator_dask.monitoring")

_ACTIVE: dict[str, MemoryTimeline] = {}
_LOCK = threading.Lock()
#: Runs (output directories) whose partitions reached the metrics one by one.
_STREAMED: set[str] = set()


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
    ``metadata_path``, ``name``, ``stages`` and ``to_dict()`` are used). Returns the
    report's path when one was written.
    """
    run_dir = str(getattr(result, "metadata_path", None) or result.output_path)
    with _LOCK:
        timeline = _ACTIVE.pop(run_dir, None)
    if timeline is not None:
        timeline.stop()
    with _LOCK:
        streamed = run_dir in _STREAMED
        _STREAMED.discard(run_dir)
    if _prometheus() and not streamed:  # an executor that does not report partitions
        from curator_dask.monitoring.metrics import record_stage_stats

        record_stage_stats(result.stages, pipeline=str(result.name))
    local = _local_dir(run_dir)
    report = None
    if local is not None and local.is_dir():
        from curator_dask.monitoring.report import (
            TIMELINE_FILE,
            append_run,
            read_runs,
            write_run_report,
        )
        from curator_dask.monitoring.timeline import write_timeline

        stats = result.to_dict()
        append_run(local, stats)
        if timeline is not None and len(timeline):
            write_timeline(timeline.frame(), local / TIMELINE_FILE)
        if _setting("report", False):
            stats["runs"] = read_runs(local)
            report = write_run_report(local, stats, timeline)
            logger.info("run report: %s", report)
    if timeline is not None and _setting("warn-unmanaged-growth", True):
        from curator_dask.monitoring.checks import detect_unmanaged_growth

        frame = timeline.frame()
        workers = frame["worker"].nunique() if len(frame) else 0
        partitions = getattr(result, "partitions", None)  # None: the result does not say
        per_worker = None
        if partitions is not None and workers:
            computed = int(partitions) - int(getattr(result, "partitions_skipped", 0) or 0)
            per_worker = computed / workers
        detect_unmanaged_growth(frame, partitions_per_worker=per_worker, stacklevel=3)
    return report


def on_run_failed(run_dir: str) -> Path | None:
    """Stop the memory sampler of a run that raised; keep what it sampled.

    Called by the executor when a run writing to ``run_dir`` fails, so no sampling
    thread outlives the run. The samples up to the failure (often the most useful ones:
    the memory of the worker that died) are written to ``<run_dir>/_timeline.pqt``
    when ``run_dir`` is a local directory; returns that path, or None.
    """
    with _LOCK:
        timeline = _ACTIVE.pop(str(run_dir), None)
        _STREAMED.discard(str(run_dir))
    if timeline is None:
        return None
    timeline.stop()
    local = _local_dir(str(run_dir))
    if local is None or not local.is_dir() or not len(timeline):
        return None
    from curator_dask.monitoring.report import TIMELINE_FILE
    from curator_dask.monitoring.timeline import write_timeline

    return write_timeline(timeline.frame(), local / TIMELINE_FILE)


def on_partition_done(run_dir: str, pipeline: str, record: Mapping[str, Any]) -> None:
    """Add one written partition's stage statistics to the Prometheus metrics, now.

    ``record`` is the writer's record of the partition (its ``stages`` hold one
    :meth:`StageStats.to_dict` per stage). The failed/retried counters of each stage are
    created at zero, so dashboards see the series before the first failure.
    """
    if not _prometheus():
        return
    from curator_dask.monitoring.metrics import default_metrics, record_stage_stats

    stages = list(record.get("stages") or [])
    record_stage_stats(stages, pipeline=pipeline)
    metrics = default_metrics()
    for stats in stages:
        metrics.tasks_failed.labels(pipeline, str(stats["name"]))
        metrics.tasks_retried.labels(pipeline, str(stats["name"]))
    with _LOCK:
        _STREAMED.add(str(run_dir))


def on_task_failed(client: Any, plan: Any, key: str, retried: bool) -> None:
    """Count a failed partition task under the stage whose task raised.

    ``key`` is the failed future's key; the scheduler knows which task the failure came
    from (its ``exception_blame``), whose key prefix names the step (see
    ``RunPlan.key``). ``retried``: the executor computes the partition again (in pieces).
    """
    if not _prometheus():
        return
    from curator_dask.monitoring.metrics import record_task_failure

    blamed = key
    try:
        blamed = client.run_on_scheduler(_blamed_key, key=key) or key
    except Exception:  # an old scheduler, a lost connection: count it under the write step
        logger.debug("could not ask the scheduler which task failed", exc_info=True)
    prefix = str(blamed).rsplit("-", 2)[0]
    names = [
        type(plan.reader).__name__,
        *(stage.stage_name for stage in plan.stages),
        type(plan.writer).__name__,
    ]
    prefixes = list(plan.key_prefixes)
    stage = names[prefixes.index(prefix)] if prefix in prefixes else names[-1]
    record_task_failure(stage, pipeline=str(plan.pipeline.name), retried=retried)


def on_dedup_progress(workflow: str, step: str, unit: str, n: int) -> None:
    """Count ``n`` units of a dedup step's work as they finish (called by its progress)."""
    if _prometheus():
        from curator_dask.monitoring.metrics import record_dedup_progress

        record_dedup_progress(workflow, step, unit, n)


def on_dedup_result(result: Any) -> None:
    """Add a finished dedup run's documents to the Prometheus document counters."""
    if _prometheus():
        from curator_dask.monitoring.metrics import record_dedup_result

        record_dedup_result(result)


def _blamed_key(dask_scheduler: Any, key: str) -> str | None:
    ts = dask_scheduler.tasks.get(key)
    if ts is None:
        return None
    blame = getattr(ts, "exception_blame", None)
    return str((blame or ts).key)


def _prometheus() -> bool:
    if not _setting("prometheus", True):
        return False
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


class MonitoringHooks(_hooks.RunCallback):
    """The run events (:mod:`curator_dask.hooks`) to this module's functions.

    A pipeline run in this process without a client (``SequentialExecutor``) feeds only the
    per-partition metrics, as it always did: no memory sampler, no run record.
    """

    def on_start(self, run: _hooks.RunInfo) -> None:
        if run.kind == "pipeline" and run.client is not None and run.run_dir:
            on_run_start(run.client, run.run_dir)

    def on_progress(
        self,
        run: _hooks.RunInfo,
        step: str,
        unit: str,
        n: int,
        record: Mapping[str, Any] | None,
    ) -> None:
        if run.kind == "dedup":
            on_dedup_progress(run.name, step, unit, n)
        elif record is not None and run.run_dir:
            on_partition_done(run.run_dir, run.name, record)

    def on_task_failed(self, run: _hooks.RunInfo, key: str, retried: bool) -> None:
        if run.kind == "pipeline" and run.plan is not None:
            on_task_failed(run.client, run.plan, key, retried)

    def on_finish(self, run: _hooks.RunInfo, result: Any) -> None:
        if run.kind == "dedup":
            on_dedup_result(result)
        elif run.client is not None:
            on_run_end(result)

    def on_failed(self, run: _hooks.RunInfo) -> None:
        if run.kind == "pipeline" and run.client is not None and run.run_dir:
            on_run_failed(run.run_dir)


#: The registered instance (``MONITORING.unregister()`` turns monitoring off for the process).
MONITORING = MonitoringHooks().register()
