"""Keep distributed's ``Compute Failed ... Traceback`` block of a failed task off the terminal
(and the tracebacks of the connections its shutdown closes).

The client receives the task's exception with its traceback, and ``curator-dask`` prints
the project's one-line error (the traceback under ``-v``/``--debug``, and every record in
``--log-file``); the worker's own multi-line report of the same failure only repeats it.
:class:`HideTaskFailures` is the filter; the CLI puts it on its console handler and adds
this module to ``distributed.worker.preload``, so that the worker processes of a local
cluster load it (:func:`dask_setup`).
"""

from __future__ import annotations

import logging
from typing import Any

#: The exceptions of a connection that closed (distributed's and tornado's), by name.
_CLOSED = frozenset({"CommClosedError", "StreamClosedError"})


def closed_connection(record: logging.LogRecord) -> bool:
    """True for a ``distributed`` record whose exception (or one it was raised from) is a
    closed connection: a worker's heartbeat or a comm that meets the scheduler or a peer
    gone (a cluster shutting down), whose traceback says nothing a user can act on."""
    if not (record.name == "distributed" or record.name.startswith("distributed.")):
        return False
    exc = record.exc_info[1] if record.exc_info else None
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if any(c.__name__ in _CLOSED for c in type(exc).__mro__):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class HideTaskFailures(logging.Filter):
    """Drop the ``Compute Failed`` records of ``distributed.worker``, and distributed's
    tracebacks of a closed connection (:func:`closed_connection`: a worker process's
    heartbeat to a scheduler that a failed run's shutdown closed); pass everything else."""

    def filter(self, record: logging.LogRecord) -> bool:
        failed = (
            record.name == "distributed.worker"
            and isinstance(record.msg, str)
            and record.msg.startswith("Compute Failed")
        )
        return not (failed or closed_connection(record))


def dask_setup(worker: Any) -> None:
    """Preload hook of a local worker: its process's terminal handlers of ``distributed``
    get the filter (once). A log file's handler does not: a worker of threads runs in the
    command's process, where the ``--log-file`` handler is one of ``distributed``'s, and
    the file keeps every record."""
    for handler in logging.getLogger("distributed").handlers:
        if isinstance(handler, logging.FileHandler) or not isinstance(
            handler, logging.StreamHandler
        ):
            continue
        if not any(isinstance(f, HideTaskFailures) for f in handler.filters):
            handler.addFilter(HideTaskFailures())
