"""The cluster flags every ``curator-dask`` subcommand takes, and the client they give.

:func:`add_cluster_args` adds them to a subcommand's parser (each module in
:data:`curator_dask.cli.SUBCOMMAND_MODULES` receives it, and :func:`client_from_args`, from
its ``register``); :func:`cluster_config_from_args` turns them into a
:class:`~curator_dask.cluster.ClusterConfig`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from curator_dask.errors import ConfigError

# Only the standard library at module level: `curator-dask --help` must not pay for
# dask.dataframe, numba and pyarrow (tests/test_cli.py times it).
if TYPE_CHECKING:
    from curator_dask.cluster import ClusterConfig


def add_cluster_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the flags that choose a cluster (shared by every subcommand); return ``parser``."""
    g = parser.add_argument_group("cluster (default: a local cluster from curator.cluster.*)")
    g.add_argument(
        "--scheduler-address",
        metavar="ADDR",
        help="connect to a running scheduler, e.g. tcp://10.0.0.5:8786 (default: none, a local "
        "cluster)",
    )
    g.add_argument(
        "--scheduler-file",
        metavar="FILE",
        help="connect through a scheduler file (dask scheduler --scheduler-file) (default: none)",
    )
    g.add_argument(
        "--n-workers",
        type=int,
        metavar="N",
        help="local workers, started as asked; with a scheduler, workers to wait for (default: "
        "curator.cluster.n-workers, else sized to the machine; a small input then runs on one "
        "worker of threads in this process, and says so)",
    )
    g.add_argument(
        "--threads-per-worker",
        type=int,
        metavar="N",
        help="threads of each local worker (default: curator.cluster.threads-per-worker, else "
        "sized to the machine)",
    )
    g.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help='per worker, e.g. "8GB" or "auto" (default: curator.cluster.memory-limit, auto: '
        "the machine's memory split between the workers)",
    )
    g.add_argument(
        "--local-directory",
        metavar="DIR",
        help="worker scratch and spill dir (default: dask's temporary-directory)",
    )
    g.add_argument(
        "--gpu",
        action="store_true",
        help="start a local CUDA cluster (one worker per GPU, RMM pool)",
    )
    g.add_argument(
        "--dashboard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve dask's dashboard from the local cluster (default: "
        "curator.cluster.dashboard, off)",
    )
    g.add_argument(
        "--connect-timeout",
        metavar="TIME",
        help="give up on a scheduler that does not answer, or has no workers, after this "
        "long (default: curator.cluster.connect-timeout, 30s)",
    )
    return parser


def cluster_config_from_args(
    args: argparse.Namespace, base: ClusterConfig | None = None
) -> ClusterConfig:
    """Combine ``base`` (default: ``curator.cluster.*``) with the cluster flags in ``args``."""
    from curator_dask.cluster import ClusterConfig

    cfg = base if base is not None else ClusterConfig.from_dask_config()
    changes: dict[str, Any] = {}
    address = getattr(args, "scheduler_address", None)
    scheduler_file = getattr(args, "scheduler_file", None)
    if address and scheduler_file:
        raise ConfigError("--scheduler-address", "give either it or --scheduler-file")
    if address:
        changes.update(kind="address", address=address)
    elif scheduler_file:
        changes.update(kind="scheduler_file", scheduler_file=scheduler_file)
    elif getattr(args, "gpu", False):
        changes["kind"] = "gpu"
    names = ("n_workers", "threads_per_worker", "memory_limit", "local_directory")
    for name in (*names, "connect_timeout", "dashboard"):
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    asked = any(getattr(args, n, None) is not None for n in ("n_workers", "threads_per_worker"))
    if asked and cfg.processes == "auto":
        # workers asked for on the command line are started as asked: the one-worker
        # in-process shortcut of processes="auto" is for when nothing was asked
        changes["processes"] = True
    try:
        return dataclasses.replace(cfg, **changes) if changes else cfg
    except ValueError as e:
        flag = next((f"--{n.replace('_', '-')}" for n in changes if n in str(e)), "cluster")
        raise ConfigError(flag, str(e)) from None


@contextlib.contextmanager
def client_from_args(
    args: argparse.Namespace,
    base: ClusterConfig | None = None,
    input_bytes: Callable[[], float | None] | None = None,
    threads_below: str | None = None,
    local_scheduler: bool = False,
) -> Iterator[Any]:
    """Yield a :class:`distributed.Client` for the cluster flags; clean up on exit.

    With ``processes: auto`` and ``input_bytes`` (the input's estimated in-memory bytes, or
    None when large or unknown), a small input runs on one worker of threads in this process,
    as ``run`` does (:meth:`~curator_dask.cluster.ClusterConfig.for_input`).
    ``threads_below`` names a config key that says "small" instead of
    ``curator.cluster.threads-below`` (the dedup commands': ``curator.dedup.threads-below``).
    With ``local_scheduler`` such a small input runs on dask's threaded scheduler in this
    process instead, with as many threads and no distributed cluster at all (None is
    yielded): the dedup commands', whose steps all run on the local scheduler.
    """
    import dask.config
    from dask.utils import format_bytes

    from curator_dask.cluster import get_client

    config = cluster_config_from_args(args, base)
    key = "curator.cluster.threads-below"
    if threads_below is not None and dask.config.get(threads_below, None) is not None:
        key = threads_below
        config = dataclasses.replace(config, threads_below=dask.config.get(key))
    if config.processes == "auto" and config.kind == "cpu" and input_bytes is not None:
        nbytes = input_bytes()
        config = config.for_input(nbytes)
        if config.processes is False:
            logging.getLogger("curator_dask").info(
                "input of %s is below %s (%s): %s of %d threads in this process",
                format_bytes(int(nbytes or 0)),
                key,
                config.threads_below,
                "dask's local scheduler" if local_scheduler else "the local cluster is 1 worker",
                config.threads_per_worker,
            )
            if local_scheduler:
                import dask.threaded

                # the steps' kernels release the GIL: threads need no cluster around them
                # (the function, not its name "threads": dask looks a name up among the
                # distributed clients, importing distributed), and shuffles in memory (the
                # default without a client is partd on disk)
                local = {
                    "scheduler": dask.threaded.get,
                    "num_workers": config.threads_per_worker,
                    "dataframe.shuffle.method": "tasks",
                }
                with dask.config.set(local):
                    yield None
                return
    with get_client(config) as client:
        yield client
