"""A dask preload for the workers a command-line run starts: warnings in one voice.

``curator-dask`` adds this module to ``distributed.worker.preload`` (the config its local
worker processes get), so that a worker process says curator_dask's warnings (a bad record
quarantined) as the command does, ``<time> [curator-dask] warning: ...`` on stderr, and
other packages' Python warnings only when asked for (``-v``), instead of Python's
``file:line: Category: message`` dump attributed to a dask file.

A worker process writes on the terminal the command draws its progress bar on, but cannot
clear the bar's line first as the command's own lines do (:func:`curator_dask.progress.
bar_cleared`): on a terminal its lines (its warnings, distributed's) start by erasing the
line they land on (:class:`OwnLine`), so that they do not run on from the bar's text; the
command draws the bar again on the next line at its next update.
"""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Any

#: Back to the line's start and erase it (a terminal's carriage return and ``EL``).
ERASE_LINE = "\r\x1b[K"


class OwnLine(logging.Formatter):
    """A formatter whose records start by erasing the terminal line they land on (a bar's,
    drawn by another process), then are ``inner``'s text."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        """``inner``'s text after :data:`ERASE_LINE`."""
        return ERASE_LINE + self.inner.format(record)


def own_lines(handlers: list[logging.Handler]) -> None:
    """Give the handlers that write on a terminal :class:`OwnLine` records (once)."""
    for handler in handlers:
        stream = getattr(handler, "stream", None)
        isatty = getattr(stream, "isatty", None)
        if isinstance(handler.formatter, OwnLine) or not (isatty and isatty()):
            continue
        handler.setFormatter(OwnLine(handler.formatter))


def dask_setup(worker: Any) -> None:
    """Called by distributed in each worker at start; acts in worker processes only (a
    worker of threads in the command's own process has the command's display)."""
    import multiprocessing

    from curator_dask.progress import ConsoleFormatter, log_warning

    if multiprocessing.parent_process() is None:
        return
    # the command's worker processes skip dask's and numba's optional SciPy, as it does
    from curator_dask._optional_scipy import defer_optional_scipy

    defer_optional_scipy()
    # -v lets distributed say its warnings (the `logging` config the workers get): then
    # other packages' Python warnings are said too
    verbose = logging.getLogger("distributed").getEffectiveLevel() <= logging.WARNING
    package = logging.getLogger("curator_dask")
    if not any(getattr(h, "_curator_worker", False) for h in package.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(ConsoleFormatter())
        handler.setLevel(logging.WARNING)
        handler._curator_worker = True  # type: ignore[attr-defined]
        package.addHandler(handler)
        package.propagate = False
    own_lines([*package.handlers, *logging.getLogger("distributed").handlers])

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        log_warning(message, category, filename, lineno, others=verbose)

    warnings.showwarning = show
