"""One registry of run hooks, for pipelines and dedup workflows alike.

In the spirit of dask's :class:`dask.callbacks.Callback`: subclass :class:`RunCallback`,
override the events you want, and register an instance, for good (:meth:`~RunCallback.register`)
or for a ``with`` block. Every run, a pipeline's (any executor) or a dedup workflow's, says
the same five events to every registered callback:

- ``on_start(run)`` before its first task;
- ``on_progress(run, step, unit, n, record)`` as ``n`` units (partitions, tasks, band
  groups, documents...) of a step finish; ``n == 0`` once when a step's counter starts.
  A pipeline's written partition comes with its ``record`` (the writer's record: ``rows``,
  ``stages``...), step ``"write"``; on a distributed client each read and stage of a
  partition is said too as it finishes (step ``"read"`` or the stage's task name, unit
  ``"partitions"``, no record);
- ``on_task_failed(run, key, retried)`` when a pipeline partition's task raised (``retried``:
  it is computed again, in pieces);
- ``on_finish(run, result)`` with the run's result (a
  :class:`~curator_dask.pipeline.PipelineResult` or a
  :class:`~curator_dask.dedup.DedupResult`);
- ``on_failed(run)`` when the run raised.

``run`` is a :class:`RunInfo`: what kind of run, its name, its metadata folder, the client.
A callback that raises is logged and never fails the run. Monitoring
(:mod:`curator_dask.monitoring.hooks`) is one such callback; it registers itself when that
module is imported, which the executors and the dedup workflows do (this module, at the
bottom of the layers, imports nothing of curator_dask).

Examples
--------
>>> from curator_dask.hooks import RunCallback
>>> class Count(RunCallback):
...     def __init__(self):
...         self.partitions = 0
...     def on_progress(self, run, step, unit, n, record):
...         self.partitions += n if step == "write" and unit == "partitions" else 0
>>> with Count() as count:  # doctest: +SKIP
...     pipeline.run()
>>> count.partitions  # doctest: +SKIP
4
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

logger = logging.getLogger("curator_dask.hooks")

_LOCK = threading.RLock()


@dataclass(frozen=True)
class RunInfo:
    """Which run an event is about.

    ``kind`` is ``"pipeline"`` or ``"dedup"``; ``name`` the pipeline's name or the workflow's
    (``"fuzzy-dedup"``); ``run_dir`` the folder of the run's metadata (a pipeline's
    ``<output>.curator``, a dedup workflow's output folder); ``client`` the distributed client
    it runs on (None: in this process); ``plan`` a pipeline run's plan (its reader, stages,
    writer and task key prefixes). Two infos of one run compare equal.
    """

    kind: str
    name: str
    run_dir: str | None = None
    client: Any = field(default=None, compare=False, repr=False)
    plan: Any = field(default=None, compare=False, repr=False)


class RunCallback:
    """Base of run hooks; each event is a no-op here (see the module docstring)."""

    #: The registered callbacks, in registration order.
    active: ClassVar[dict[RunCallback, None]] = {}

    def on_start(self, run: RunInfo) -> None:
        """The run starts (its first task has not been submitted yet)."""

    def on_progress(
        self, run: RunInfo, step: str, unit: str, n: int, record: Mapping[str, Any] | None
    ) -> None:
        """``n`` units of ``step`` finished (``record``: a written partition's record)."""

    def on_task_failed(self, run: RunInfo, key: str, retried: bool) -> None:
        """A partition's task (``key``) raised; ``retried``: it is computed again."""

    def on_finish(self, run: RunInfo, result: Any) -> None:
        """The run finished with ``result``."""

    def on_failed(self, run: RunInfo) -> None:
        """The run raised."""

    def register(self) -> RunCallback:
        """Say every run's events to this callback from now on; returns it."""
        with _LOCK:
            RunCallback.active[self] = None
        return self

    def unregister(self) -> None:
        """Stop saying events to this callback."""
        with _LOCK:
            RunCallback.active.pop(self, None)

    def __enter__(self) -> Any:
        return self.register()

    def __exit__(self, *exc: object) -> None:
        self.unregister()


def callbacks() -> list[RunCallback]:
    """The registered callbacks, in registration order."""
    with _LOCK:
        return list(RunCallback.active)


def _say(event: str, run: RunInfo, *args: Any) -> None:
    for callback in callbacks():
        try:
            getattr(callback, event)(run, *args)
        except Exception:
            logger.exception("%s of %r failed; the run goes on", event, callback)


def start(run: RunInfo) -> None:
    """Say ``on_start`` to every registered callback."""
    _say("on_start", run)


def progress(
    run: RunInfo,
    step: str,
    unit: str,
    n: int = 1,
    record: Mapping[str, Any] | None = None,
) -> None:
    """Say ``on_progress`` to every registered callback."""
    _say("on_progress", run, step, unit, n, record)


def task_failed(run: RunInfo, key: str, retried: bool) -> None:
    """Say ``on_task_failed`` to every registered callback."""
    _say("on_task_failed", run, key, retried)


def finish(run: RunInfo, result: Any) -> None:
    """Say ``on_finish`` to every registered callback."""
    _say("on_finish", run, result)


def failed(run: RunInfo) -> None:
    """Say ``on_failed`` to every registered callback."""
    _say("on_failed", run)
