"""The ``curator-dask`` command: parses arguments and calls the public API.

``curator-dask run PIPELINE.yaml`` runs a pipeline described in YAML; :data:`RUN_HELP` (what
``curator-dask run --help`` prints) shows the file's keys. Cluster flags
(:func:`~curator_dask.cli.cluster_args.add_cluster_args`) override the ``cluster:`` section.
Other subcommands come from the modules listed in :data:`SUBCOMMAND_MODULES`, each providing
``register(subparsers, add_cluster_args, client_from_args)``.

The package's modules, by job:

- this module: the parser (:func:`build_parser`), the ``run`` command and :func:`main`;
- :mod:`~curator_dask.cli.pipeline_file`: a pipeline file read, checked and built;
- :mod:`~curator_dask.cli.cluster_args`: the cluster flags every subcommand takes, and the
  client they give;
- :mod:`~curator_dask.cli.console`: the help layout, the version line and logging;
- :mod:`~curator_dask.cli.failures`: the exit status and the one or two lines of an error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
import traceback
from collections.abc import Iterator, Sequence

from curator_dask._lazy import thaw_imports
from curator_dask.cli.cluster_args import (
    add_cluster_args,
    client_from_args,
    cluster_config_from_args,
)
from curator_dask.cli.console import (
    VersionAction,
    _Parser,
    _remove_handlers,
    add_logging_args,
    setup_logging,
)
from curator_dask.cli.failures import describe_error, interrupted_message
from curator_dask.cli.pipeline_file import load_run_config, strings_in
from curator_dask.errors import ConfigError, RunInterrupted

# Only the standard library at module level (here and in the modules above): `curator-dask
# --help` and argument errors must not pay for dask.dataframe, numba and pyarrow
# (tests/test_cli.py times them).

#: Modules whose ``register(subparsers, add_cluster_args, client_from_args)`` adds
#: subcommands (e.g. ``"curator_dask.dedup.cli"``).
SUBCOMMAND_MODULES: list[str] = [
    "curator_dask.dedup.cli",
    "curator_dask.monitoring.cli",
    "curator_dask.demo",
]


RUN_HELP = """\
Run the pipeline described in a YAML file: read, apply the stages in order, write. Progress
goes to stderr, the summary to stdout; run metadata goes beside the output, to
<output>.curator/ (_stats.json, _quarantine/; the HTML report _report.html only with
curator.monitoring.report: true in config:, else `curator-dask report OUTPUT` draws it).
A file looks like this:

    name: demo
    reader:
      class: JsonlReader            # from curator_dask.io, or "package.module:Class"
      params: {paths: data/, blocksize: 64MB}
    stages:
      - class: UnicodeNormalizer    # from curator_dask.filters / modifiers / classifiers
      - class: WordCountFilter
        params: {min_words: 50}
        resources: {cpus: 1}        # or {gpus: 1}, {gpu_memory_gb: 8}
      - class: my_package.stages:MyStage
    writer:
      class: JsonlWriter
      params: {path: out/, mode: resume}
    execution: {mode: streaming, max_in_flight: 8}   # optional
    cluster: {n_workers: 4, threads_per_worker: 1}   # optional; the flags below override it
    config: {curator.io.blocksize: 128MB}            # optional dask config for the run

A mistake in the file is reported with the key at fault, e.g.
"stages[2].params.min_words: expected int, got 'many'", and exit status 2.
"""


# -- commands -----------------------------------------------------------------------------
def _cmd_run(args: argparse.Namespace) -> int:
    from curator_dask.executor import DaskExecutor, SequentialExecutor

    run = load_run_config(args.config)
    from curator_dask.errors import require_protocols

    require_protocols(strings_in(run.source))  # s3:// without s3fs: said before anything starts
    mode = args.execution_mode or run.execution_mode
    if args.dry_run:  # the pipeline is what was asked for: the result, on stdout
        print(repr(run.pipeline))
        return 0
    for line in repr(run.pipeline).splitlines():  # a log line each, as progress is
        logging.getLogger("curator_dask.cli").info("%s", line)
    import dask.config

    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(dask.config.set(run.dask_config))
            if args.sequential:
                result = run.pipeline.run(SequentialExecutor(), execution_mode=mode)
            else:
                # The executor starts (and stops) the cluster: it knows the input's size,
                # which decides processes="auto" (ClusterConfig.for_input).
                cluster = cluster_config_from_args(args, base=run.cluster)
                executor = DaskExecutor(cluster=cluster, max_in_flight=run.max_in_flight)
                result = run.pipeline.run(executor, execution_mode=mode)
    except KeyboardInterrupt:
        raise RunInterrupted(run.pipeline.writer) from None
    print(result.summary())
    from curator_dask.errors import check_quarantine_share

    writer = run.pipeline.writer
    where = writer.layout.quarantine_dir if writer is not None else "the quarantine"
    with dask.config.set(run.dask_config):  # the file's config says the share too
        check_quarantine_share(result.read, result.quarantined, where, result)
    return 0


#: Subcommands that get ``--metrics-port`` from :func:`main` (``monitor`` has its own).
_SERVE_METRICS = ("run", "exact-dedup", "fuzzy-dedup", "semantic-dedup", "demo")


def add_metrics_port_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--metrics-port`` (serve curator's Prometheus metrics while the command runs)."""
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve curator_dask's Prometheus metrics on this port while the command runs "
        "(0: any free port; the address is logged; needs the monitoring extra) (default: off)",
    )
    parser.add_argument(
        "--metrics-addr",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to serve the metrics on (0.0.0.0: reachable from other machines)",
    )
    parser.set_defaults(_serve_metrics=True)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every registered subcommand."""
    parser = _Parser(
        prog="curator-dask",
        description="Curate text datasets for LLM training on Dask.",
        epilog="`curator-dask COMMAND --help` describes each command and its defaults.",
    )
    parser.add_argument("--version", action=VersionAction)
    add_logging_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = sub.add_parser(
        "run",
        help="run a pipeline described in a YAML file",
        description=RUN_HELP,
    )
    run.add_argument("config", help="pipeline YAML file")
    run.add_argument(
        "--execution-mode",
        choices=("streaming", "batch"),
        help="default: the file's execution.mode, else curator.execution.mode (streaming)",
    )
    run.add_argument(
        "--sequential",
        action="store_true",
        help="run in this process without a cluster (debugging)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="check the file and print the pipeline; run nothing"
    )
    add_cluster_args(run)
    run.set_defaults(func=_cmd_run)
    for module_name in SUBCOMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(sub, add_cluster_args, client_from_args)
    for name in _SERVE_METRICS:
        if name in sub.choices:
            add_metrics_port_arg(sub.choices[name])
    for subparser in sub.choices.values():
        add_logging_args(subparser, suppress=True)
        for action in subparser._actions:
            if action.help is None and action.option_strings:
                action.help = ""  # HelpFormatter adds the default, if there is one
    return parser


@contextlib.contextmanager
def _metrics_server(args: argparse.Namespace) -> Iterator[None]:
    port = getattr(args, "metrics_port", None)
    if not getattr(args, "_serve_metrics", False) or port is None:
        yield
        return
    from curator_dask.monitoring.metrics import start_metrics_server

    with start_metrics_server(port, addr=args.metrics_addr) as server:
        logging.getLogger("curator_dask.cli").warning("metrics: %s", server.url)
        yield


def _end_bar() -> None:
    """End the line of a terminal progress bar the failed run left drawn on stderr: the
    error's message starts a line of its own."""
    if "curator_dask.progress" in sys.modules:  # else no bar was drawn
        from curator_dask.progress import end_bar

        end_bar(sys.stderr)


#: Commands that run no code of the user's: the program may end without the interpreter's
#: teardown once one has returned (:func:`console_main`).
_QUICK_EXIT = ("exact-dedup", "fuzzy-dedup")
#: The commands :func:`main` ran that returned (not raised).
_returned: list[str] = []


def console_main() -> None:
    """The ``curator-dask`` program (and ``python -m curator_dask.cli``): :func:`main`, exit.

    After a command of :data:`_QUICK_EXIT` returned, the process ends as the interpreter's
    exit would, up to its teardown of the modules: the other non-daemon threads are joined
    (a thread pool's workers), the ``atexit`` functions run (logging's flush and close,
    temporary directories), stdout and stderr are flushed, and ``os._exit`` ends it with the
    command's status. The teardown it leaves out frees pandas', pyarrow's and numba's
    objects one by one (0.2-0.4 CPU-s of a 2,000-document ``fuzzy-dedup``, for memory the
    system takes back at once). Any other command, or a failed one, exits as usual.
    """
    code = main()
    if _returned and _returned[-1] in _QUICK_EXIT:
        import atexit
        import os
        import threading

        shutdown = getattr(threading, "_shutdown", None)  # what the interpreter's exit calls
        if shutdown is not None:
            shutdown()
            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a closed pipe: as the usual exit
                    stream.flush()
            os._exit(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``curator-dask``; returns the exit status.

    Errors a user can cause print one or two lines (what, where, what to do) and return 1
    (at run time) or 2 (usage); ``--debug`` or ``-v`` also prints the traceback.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    debug = bool(getattr(args, "debug", False) or (getattr(args, "verbose", 0) or 0) > 0)
    setup_logging(args.verbose, args.quiet, args.log_level, args.log_file, debug)
    from curator_dask._optional_scipy import defer_optional_scipy

    undo_scipy = defer_optional_scipy()  # dask's and numba's optional SciPy: ~0.7 CPU-s
    try:
        if (
            getattr(args, "_serve_metrics", False)
            and getattr(args, "metrics_port", None) is not None
        ):
            from curator_dask.errors import require

            require(("prometheus_client",), "curator_dask[monitoring]", "--metrics-port")
        with _metrics_server(args):
            code = int(args.func(args) or 0)
        _returned.append(str(getattr(args, "command", "")))
        return code
    except KeyboardInterrupt as e:
        _end_bar()
        if debug:
            traceback.print_exc()
        print(interrupted_message(e), file=sys.stderr)
        return 1
    except Exception as e:
        _end_bar()
        if debug:
            traceback.print_exc()
        code, message = describe_error(e)
        where = getattr(args, "config", None)
        if isinstance(e, ConfigError) and where:
            message = message.replace("error: ", f"error: {where}: ", 1)
        print(message, file=sys.stderr)
        return code
    finally:
        undo_scipy()
        _remove_handlers()
        thaw_imports()  # a dedup command froze its imports; the caller's process, as it was
