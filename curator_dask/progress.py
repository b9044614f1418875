"""One line of progress, said the same way by every command and by the library.

``say(text)`` goes through the ``curator_dask.progress`` logger when the ``curator_dask``
logger has handlers of its own and shows INFO records (as the command line sets it up: its
console handler prints ``<time> [curator-dask] <text>``), and is printed in that same form on
``stream`` (stderr) otherwise. Pipelines (``executor``) and dedup workflows (``dedup``) both
say their progress through it.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

logger = logging.getLogger("curator_dask.progress")

#: What every line starts with, after its time.
PREFIX = "[curator-dask]"
#: The time format of every line.
DATEFMT = "%Y-%m-%d %H:%M:%S"


def say(text: str, stream: TextIO | None = None) -> None:
    """Say one progress line (see the module docstring)."""
    if logging.getLogger("curator_dask").handlers and logger.isEnabledFor(logging.INFO):
        logger.info(text)
    else:
        stamp = time.strftime(DATEFMT)
        print(f"{stamp} {PREFIX} {text}", file=stream or sys.stderr, flush=True)


def log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    *,
    others: bool = True,
) -> None:
    """Say a Python warning in this voice: curator_dask's as one ``warning:`` line of its
    log, other packages' (when ``others``) on the ``py.warnings`` log, shown under -v."""
    if category.__module__.startswith("curator_dask"):
        logging.getLogger("curator_dask").warning("%s", message)
    elif others:
        logging.getLogger("py.warnings").warning(
            "%s:%s: %s: %s", filename, lineno, category.__name__, message
        )


class ConsoleFormatter(logging.Formatter):
    """``<time> [curator-dask] <message>`` for curator_dask's records (``warning:`` or
    ``error:`` in front of those levels), ``<time> [<logger>] <level>: <message>`` for
    other libraries' records."""

    def __init__(self) -> None:
        super().__init__(datefmt=DATEFMT)

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (plus its traceback, if any)."""
        when = self.formatTime(record, self.datefmt)
        text = record.getMessage()
        if record.exc_info:
            text = f"{text}\n{self.formatException(record.exc_info)}"
        level = record.levelname.lower()
        if record.name == "curator_dask" or record.name.startswith("curator_dask."):
            said = text if record.levelno < logging.WARNING else f"{level}: {text}"
            return f"{when} {PREFIX} {said}"
        return f"{when} [{record.name}] {level}: {text}"
