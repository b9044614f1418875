"""Keep distributed's ``Compute Failed ... Traceback`` block of a failed task off the terminal.

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


class HideTaskFailures(logging.Filter):
    """Drop the ``Compute Failed`` records of ``distributed.worker``; pass everything else."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.name == "distributed.worker"
            and isinstance(record.msg, str)
            and record.msg.startswith("Compute Failed")
        )


def dask_setup(worker: Any) -> None:
    """Preload hook of a local worker process: its stderr handlers get the filter."""
    for handler in logging.getLogger("distributed").handlers:
        handler.addFilter(HideTaskFailures())
