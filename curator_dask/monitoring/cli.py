"""The ``report`` and ``monitor`` subcommands of ``curator-dask``.

``curator_dask.cli`` calls :func:`register` with its subparsers and its two cluster helpers;
each subcommand sets ``func``, which takes the parsed arguments and returns an exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any


def register(
    subparsers: Any,
    add_cluster_args: Callable[[argparse.ArgumentParser], Any],
    client_from_args: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``report`` and ``monitor`` to ``curator-dask``.

    Parameters
    ----------
    subparsers : argparse subparsers action
        From ``parser.add_subparsers()``.
    add_cluster_args : callable
        Adds the options that name a cluster (``--scheduler-address``, ...) to a parser.
    client_from_args : callable
        Returns a connected :class:`distributed.Client` (or a context manager yielding one)
        for the parsed options.
    """
    p = subparsers.add_parser(
        "report",
        help="render (if needed) and show the HTML report of a pipeline run",
        description="Render <run_dir>/_report.html from _stats.json and the memory timeline "
        "when it is missing or older than they are, then print its path.",
    )
    p.add_argument("run_dir", help="the pipeline's output directory (holds _stats.json)")
    p.add_argument("--open", action="store_true", help="open the report in a web browser")
    p.add_argument("--force", action="store_true", help="render again even if up to date")
    p.set_defaults(func=run_report)

    m = subparsers.add_parser(
        "monitor",
        help="record worker and GPU memory of a running cluster to a file",
        description="Sample the memory of a running cluster's workers (and this machine's "
        "GPUs) until Ctrl-C or --duration, then write the timeline.",
    )
    add_cluster_args(m)
    m.add_argument("--output", required=True, help="timeline file (.parquet or .json)")
    m.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    m.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    m.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="also serve the memory gauges as Prometheus metrics on this port",
    )
    m.set_defaults(func=lambda args: run_monitor(args, client_from_args))


def _stale(run_dir: Path, report: Path) -> bool:
    from curator_dask.monitoring.report import RUNS_FILE, STATS_FILE, TIMELINE_FILE

    if not report.exists():
        return True
    mtime = report.stat().st_mtime
    return any(
        (run_dir / name).exists() and (run_dir / name).stat().st_mtime > mtime
        for name in (STATS_FILE, TIMELINE_FILE, RUNS_FILE)
    )


def run_report(args: argparse.Namespace) -> int:
    """Run ``curator-dask report``; return the exit code."""
    from curator_dask.io.layout import run_metadata_dir
    from curator_dask.monitoring.report import REPORT_FILE, STATS_FILE, write_run_report

    run_dir = Path(run_metadata_dir(args.run_dir))  # the output directory or its <output>.curator/
    if not (run_dir / STATS_FILE).exists():
        print(
            f"curator-dask report: {run_dir / STATS_FILE} not found; give the output "
            "directory of a pipeline run",
            file=sys.stderr,
        )
        return 2
    report = run_dir / REPORT_FILE
    if args.force or _stale(run_dir, report):
        report = write_run_report(run_dir)
    print(report.resolve())
    if args.open:
        webbrowser.open(report.resolve().as_uri())
    return 0


def run_monitor(
    args: argparse.Namespace, client_from_args: Callable[[argparse.Namespace], Any]
) -> int:
    """Run ``curator-dask monitor``; return the exit code."""
    from curator_dask.monitoring.metrics import start_metrics_server
    from curator_dask.monitoring.timeline import MemoryTimeline

    made = client_from_args(args)
    with contextlib.ExitStack() as stack:
        # a Client (closed on exit) or a context manager that yields one
        client = stack.enter_context(made) if hasattr(made, "__enter__") else made
        if args.metrics_port is not None:
            stack.enter_context(start_metrics_server(args.metrics_port))
        timeline = MemoryTimeline(
            client, args.interval, export_metrics=args.metrics_port is not None
        )
        try:
            with timeline:
                deadline = None if args.duration is None else time.monotonic() + args.duration
                while deadline is None or time.monotonic() < deadline:
                    time.sleep(min(0.2, args.interval))
        except KeyboardInterrupt:
            pass
    path = timeline.write(args.output)
    print(f"{len(timeline.frame())} samples -> {path}")
    return 0
