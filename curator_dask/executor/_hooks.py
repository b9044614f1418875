"""Optional monitoring hooks: ``on_run_start`` / ``on_run_end`` of ``curator_dask.monitoring``.

If the monitoring package provides them (in ``curator_dask.monitoring.hooks`` or the
package itself), the executor calls ``on_run_start(client,
run_dir)`` before the first task, ``on_partition_done(run_dir, pipeline, record)`` as each
partition's final record arrives on the client, ``on_task_failed(client, plan, key,
retried)`` when a partition's task raised, ``on_run_end(result)`` after the run and, if it
exists, ``on_run_failed(run_dir)`` when the run raised. A failing hook is
logged and never fails the run.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

logger = logging.getLogger("curator_dask.executor")


def _hook(name: str) -> Any:
    for module_name in ("curator_dask.monitoring.hooks", "curator_dask.monitoring"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        fn = getattr(module, name, None)
        if fn is not None:
            return fn
    return None


def run_start(client: Any, run_dir: str) -> None:
    """Call the monitoring start hook, if there is one."""
    fn = _hook("on_run_start")
    if fn is not None:
        try:
            fn(client, run_dir)
        except Exception:
            logger.exception("monitoring hook on_run_start failed; the run goes on")


def run_end(result: Any) -> None:
    """Call the monitoring end hook, if there is one."""
    fn = _hook("on_run_end")
    if fn is not None:
        try:
            fn(result)
        except Exception:
            logger.exception("monitoring hook on_run_end failed")


def run_failed(run_dir: str) -> None:
    """Call the monitoring failure hook, if there is one (stops a sampler left running)."""
    fn = _hook("on_run_failed")
    if fn is not None:
        try:
            fn(run_dir)
        except Exception:
            logger.exception("monitoring hook on_run_failed failed")


def partition_done(run_dir: str, pipeline: str, record: dict[str, Any]) -> None:
    """Call the monitoring per-partition hook (live metrics), if there is one."""
    fn = _hook("on_partition_done")
    if fn is not None:
        try:
            fn(run_dir, pipeline, record)
        except Exception:
            logger.exception("monitoring hook on_partition_done failed; the run goes on")


def task_failed(client: Any, plan: Any, key: str, retried: bool) -> None:
    """Call the monitoring hook for a failed task (``retried``: it is computed again)."""
    fn = _hook("on_task_failed")
    if fn is not None:
        try:
            fn(client, plan, key, retried)
        except Exception:
            logger.exception("monitoring hook on_task_failed failed; the run goes on")
