"""Optional monitoring hooks: ``curator_dask.monitoring.on_run_start`` / ``on_run_end``.

If the monitoring package provides them, the executor calls ``on_run_start(client,
run_dir)`` before the first task and ``on_run_end(result)`` after the run. A failing hook is
logged and never fails the run.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

logger = logging.getLogger("curator_dask.executor")


def _hook(name: str) -> Any:
    try:
        module = importlib.import_module("curator_dask.monitoring")
    except ImportError:
        return None
    return getattr(module, name, None)


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
