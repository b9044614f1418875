"""A dask preload for the workers a command-line run starts: warnings in one voice.

``curator-dask`` adds this module to ``distributed.worker.preload`` (the config its local
worker processes get), so that a worker process says curator_dask's warnings (a bad record
quarantined) as the command does, ``<time> [curator-dask] warning: ...`` on stderr, and
other packages' Python warnings only when asked for (``-v``), instead of Python's
``file:line: Category: message`` dump attributed to a dask file.
"""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Any


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
