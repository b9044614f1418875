"""What the command says on the terminal: its help layout, version line and logging.

:func:`setup_logging` (called by :func:`curator_dask.cli.main`) sends curator_dask's and
dask's records to stderr and a log file; :func:`_remove_handlers` undoes it when ``main()``
returns in a process that goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Any

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_HANDLERS: list[logging.Handler] = []
#: (logger, handler) added to another library's own logger, and (handler, filter) put on
#: another library's handler, by setup_logging (taken off by _remove_handlers).
_ADDED: list[tuple[logging.Logger, logging.Handler]] = []
_FILTERED: list[tuple[logging.Handler, logging.Filter]] = []


class _OthersAtLeast(logging.Filter):
    """Pass curator_dask's records, and other libraries' from ``level`` up: what the
    terminal shows of dask's warnings when the log file gets more of them."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name == "curator_dask" or record.name.startswith("curator_dask.")
        return ours or record.levelno >= self.level


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option with a default says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and "%(default)" not in text
            and not any(default is v for v in (None, False, True))  # 1.0 == True
            and default != argparse.SUPPRESS
            and not isinstance(action, argparse._CountAction)
        ):
            text = f"{text} (default: %(default)s)" if text else "default: %(default)s"
        if isinstance(action, argparse._StoreTrueAction) and "default" not in text:
            text = f"{text} (default: off)"
        return text or " "  # argparse prints nothing for an empty help


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = HelpFormatter
        super().__init__(*args, **kwargs)


def version_string() -> str:
    """``curator-dask X (dask Y, distributed Z, pandas W, Python V)``, without importing them."""
    from importlib import metadata

    from curator_dask import __version__

    parts = []
    for name in ("dask", "distributed", "pandas", "pyarrow"):
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} missing")
    py = ".".join(map(str, sys.version_info[:3]))
    return f"curator-dask {__version__} ({', '.join(parts)}, Python {py})"


class VersionAction(argparse._VersionAction):
    """``--version``, as argparse's, with the line of :func:`version_string` made only when
    asked, not whenever the parser is built (it looks up four installed packages' metadata,
    which every command paid)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        self.version = version_string()
        super().__call__(parser, *args, **kwargs)


def add_logging_args(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """Add ``-v/-q/--log-level/--log-file`` (``suppress``: no defaults, for subcommands)."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    g = parser.add_argument_group("output")
    g.add_argument(
        "-v",
        "--verbose",
        action="count",
        help="more detail: -v debug messages of curator_dask, -vv also dask's",
        **({"default": argparse.SUPPRESS} if suppress else {"default": 0}),
    )
    g.add_argument(
        "-q",
        "--quiet",
        action="count",
        help="less: -q warnings only (no progress), -qq errors only",
        **({"default": argparse.SUPPRESS} if suppress else {"default": 0}),
    )
    g.add_argument(
        "--log-level",
        type=str.upper,
        choices=_LEVELS,
        metavar="LEVEL",
        help=f"level of curator_dask's messages, one of {', '.join(_LEVELS)} "
        "(default: INFO, or as -v/-q say)",
        **default,
    )
    g.add_argument(
        "--log-file",
        metavar="FILE",
        help="also append every message (debug included) to FILE (default: none)",
        **default,
    )
    g.add_argument(
        "--debug",
        action="store_true",
        help="print the traceback of an error (also with -v)",
        **default,
    )


_SHOWWARNING: list[Any] = []
#: Levels of other libraries' loggers before main() set them (restored when it returns).
_SAVED_LEVELS: dict[str, int] = {}
#: The dask preload that gives local worker processes the command's warning display.
_WORKER_PRELOAD = "curator_dask._worker_warnings"
#: The dask preload that keeps a failed task's traceback block off the terminal.
_TASK_PRELOAD = "curator_dask._task_failures"
_SAVED_PRELOAD: list[list[str]] = []
#: ``curator.execution.progress`` before -q turned it off (restored when main() returns).
_SAVED_PROGRESS: list[Any] = []


def _log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` of the command line
    (:func:`curator_dask.progress.log_warning`)."""
    from curator_dask.progress import log_warning

    log_warning(message, category, filename, lineno)


def setup_logging(
    verbose: int = 0,
    quiet: int = 0,
    level: str | None = None,
    log_file: str | None = None,
    debug: bool = False,
) -> int:
    """Send curator_dask's (and dask's) log records to stderr and ``log_file``; return the level.

    curator_dask logs at ``level`` (default INFO, -v DEBUG, -q WARNING, -qq ERROR), every line
    as ``<time> [curator-dask] <message>`` (:class:`curator_dask.progress.ConsoleFormatter`),
    progress included (INFO records of ``curator_dask.progress``, so -q hides them). dask and
    distributed say only their errors unless -v (their warnings: p2p shuffles, workers
    restarted) or -vv (everything); Python warnings of other packages likewise, and
    curator_dask's own warnings become one line each.
    Without ``debug`` (``--debug``/``-v``), distributed's ``Compute Failed`` report of a
    failed task stays off the console (the log file keeps it): the user gets main()'s
    one-line error.
    """
    import warnings

    from curator_dask.progress import ConsoleFormatter, ConsoleHandler

    if level is None:
        level = _LEVELS[min(max(1 - verbose + quiet, 0), len(_LEVELS) - 1)]
    ours = logging.getLevelName(level)
    theirs = logging.DEBUG if verbose >= 2 else logging.WARNING if verbose else logging.ERROR
    # with a log file, dask's and distributed's warnings (p2p shuffles, a worker killed and
    # restarted, Python warnings from their code) are logged for the file; the terminal
    # still shows them only under -v
    logged = min(theirs, logging.WARNING) if log_file else theirs
    console = ConsoleHandler(sys.stderr)  # clears a terminal bar's line before a record
    console.setFormatter(ConsoleFormatter())
    console.setLevel(min(ours, theirs))
    console.addFilter(_OthersAtLeast(theirs))
    if not (debug or verbose > 0):
        # a task's failure reaches the user as the one-line error (main); the traceback of
        # an in-process worker's "Compute Failed" goes to the log file, or -v/--debug
        from curator_dask._task_failures import HideTaskFailures

        console.addFilter(HideTaskFailures())
    handlers: list[logging.Handler] = [console]
    if log_file:
        to_file = logging.FileHandler(log_file)
        to_file.setFormatter(
            logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
        )
        to_file.setLevel(logging.DEBUG)
        handlers.append(to_file)
    root = logging.getLogger()
    package = logging.getLogger("curator_dask")
    _remove_handlers()  # main() called again in one process (tests, notebooks)
    _HANDLERS[:] = handlers
    _SHOWWARNING[:] = [warnings.showwarning]
    warnings.showwarning = _log_warning
    # curator_dask's records go to handlers on its own logger (that is also how its progress
    # display knows to log rather than print); everything else reaches them through root
    for h in handlers:
        root.addHandler(h)
        package.addHandler(h)
    package.propagate = False
    root.setLevel(logged)
    # distributed installs its own stderr handler (propagate=False) when first imported, from
    # the `logging` config; say our levels there so that import does not undo them.
    import dask.config

    dask.config.set(
        {
            "logging": {
                "distributed": logging.getLevelName(theirs).lower(),
                # distributed logs every p2p shuffle's start and end at WARNING
                "distributed.shuffle._scheduler_plugin": "error",
                "bokeh": "error",
                "tornado": "critical",
            }
        }
    )
    # worker processes a local cluster starts say their warnings the same way, and (unless
    # -v/--debug) keep distributed's "Compute Failed" report of a failed task to themselves
    wanted = [_WORKER_PRELOAD] if debug or verbose > 0 else [_WORKER_PRELOAD, _TASK_PRELOAD]
    preload = list(dask.config.get("distributed.worker.preload", []) or [])
    missing = [p for p in wanted if p not in preload]
    if missing:
        _SAVED_PRELOAD[:] = [preload]
        dask.config.set({"distributed.worker.preload": [*preload, *missing]})
    logging.getLogger("curator_dask").setLevel(ours if not log_file else logging.DEBUG)
    if log_file:
        # that config is also what the worker processes start with (their stderr is the
        # terminal); this process sets distributed's logging up now, so that the levels
        # below (the log file's) are not reset by its first import later
        with contextlib.suppress(ImportError):
            import distributed  # noqa: F401
    for name in ("distributed", "dask", "py.warnings"):
        _SAVED_LEVELS.setdefault(name, logging.getLogger(name).level)
        logging.getLogger(name).setLevel(logged)
    shuffle = "distributed.shuffle._scheduler_plugin"
    _SAVED_LEVELS.setdefault(shuffle, logging.getLogger(shuffle).level)
    logging.getLogger(shuffle).setLevel(logging.WARNING if log_file else logging.ERROR)
    # distributed imported before this call has its own stderr handler and does not
    # propagate: the same level rule there, and the log file beside it
    dist = logging.getLogger("distributed")
    if not dist.propagate:
        for h in dist.handlers:
            if h not in handlers:
                shown = _OthersAtLeast(theirs)
                h.addFilter(shown)
                _FILTERED.append((h, shown))
        for h in handlers[1:]:
            dist.addHandler(h)
            _ADDED.append((dist, h))
    if ours > logging.INFO:  # until _remove_handlers: main() may be called in a process
        _SAVED_PROGRESS[:] = [dask.config.get("curator.execution.progress", True)]
        dask.config.set({"curator.execution.progress": False})
    return ours


def _remove_handlers() -> None:
    """Take main()'s log handlers off again (main() called in a process that goes on)."""
    root = logging.getLogger()
    package = logging.getLogger("curator_dask")
    for h in _HANDLERS:
        root.removeHandler(h)
        package.removeHandler(h)
        h.close()
    if _HANDLERS:
        package.propagate = True
        package.setLevel(logging.NOTSET)
    _HANDLERS.clear()
    if _SHOWWARNING:
        import warnings

        warnings.showwarning = _SHOWWARNING.pop()
    for name, level in _SAVED_LEVELS.items():
        logging.getLogger(name).setLevel(level)
    _SAVED_LEVELS.clear()
    if _SAVED_PROGRESS:
        import dask.config

        dask.config.set({"curator.execution.progress": _SAVED_PROGRESS.pop()})
    for logger, handler in _ADDED:
        logger.removeHandler(handler)
    _ADDED.clear()
    for handler, shown in _FILTERED:
        handler.removeFilter(shown)
    _FILTERED.clear()
    if _SAVED_PRELOAD:
        import dask.config

        dask.config.set({"distributed.worker.preload": _SAVED_PRELOAD.pop()})
