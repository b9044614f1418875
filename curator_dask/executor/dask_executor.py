"""Run a pipeline on a dask distributed cluster, placing each stage by its resources."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from dask.utils import format_bytes

from curator_dask import config as _config
from curator_dask import sizing
from curator_dask.cluster import (
    ClusterConfig,
    ClusterConnectError,
    dashboard_link,
    get_client,
    local_directories,
    worker_hosts,
)
from curator_dask.executor import _tasks
from curator_dask.executor._oom import PartitionMemoryError
from curator_dask.executor._streaming import StreamingRun
from curator_dask.executor.base import Executor, RunPlan
from curator_dask.io.base import PartitionSpec
from curator_dask.progress import Progress
from curator_dask.sizing import input_bytes
from curator_dask.stage import ProcessingStage, teardown_all

logger = logging.getLogger("curator_dask.executor")

__all__ = ["DaskExecutor", "PartitionMemoryError"]


#: Partitions looked at (evenly spread) to estimate the largest one.
_MAX_SIZED = 256


def largest_partition_bytes(plan: RunPlan) -> tuple[float, float | None]:
    """Estimated in-memory bytes of the largest partition, and the reader's blocksize.

    Asks the reader (:meth:`~curator_dask.io.base.Reader.estimated_bytes` and
    :attr:`~curator_dask.io.base.Reader.partition_bytes`); 0 when it cannot tell.
    """
    specs = plan.specs
    if len(specs) > _MAX_SIZED:
        step = len(specs) / _MAX_SIZED
        specs = [specs[int(k * step)] for k in range(_MAX_SIZED)]
    largest = max((plan.reader.estimated_bytes(spec) or 0.0 for spec in specs), default=0.0)
    blocksize = plan.reader.partition_bytes
    return float(largest), (float(blocksize) if blocksize else None)


def check_partition_sizes(client: Any, plan: RunPlan) -> str | None:
    """Warn (``CuratorWarning``) when the largest partition nears a worker's memory limit.

    Uses :func:`curator_dask.monitoring.checks.check_partition_size` with the smallest
    worker memory limit and the largest worker thread count; returns its suggested
    blocksize, or None.
    """
    from curator_dask.monitoring.checks import check_partition_size  # pandas-heavy: on use

    workers = list(client.scheduler_info(n_workers=-1)["workers"].values())
    limits = [w.get("memory_limit") or 0 for w in workers]
    limits = [x for x in limits if x > 0]
    if not limits:
        return None
    estimate, blocksize = largest_partition_bytes(plan)
    if not estimate:
        return None
    threads = max(int(w.get("nthreads") or 1) for w in workers)
    return check_partition_size(
        estimate, min(limits), blocksize=blocksize, tasks_per_worker=threads, stacklevel=5
    )


class DaskExecutor(Executor):
    """Run a pipeline with :meth:`distributed.Client.submit`, one task per stage and partition.

    Each stage's tasks are submitted with ``resources=stage.resources.to_dask()``, so a
    stage that asks for ``Resources(gpus=1)`` only runs on workers advertising ``GPU`` and
    CPU stages never hold one. (Placement is done here rather than with ``dask.annotate``
    on a dataframe graph, which dask's query planner drops: dask/dask#10937.)

    In ``"streaming"`` mode each partition is a chain ``read -> stage 1 -> ... -> write``;
    at most ``max_in_flight`` chains are in flight, so memory stays near partition size x
    ``max_in_flight`` however large the input, and each partition's intermediate results
    are released as soon as the next step has them. In ``"batch"`` mode each stage runs
    over all partitions, materialised to Parquet under ``<output>/_work/`` (resumable per
    stage).

    Before the run every stage's ``setup_on_node`` runs once per host (on a worker that
    can run the stage); ``setup`` runs once per worker process on first use; ``teardown``
    runs on every worker at the end.

    Parameters
    ----------
    client : distributed.Client, optional
        Use this client (it is left open).
    address, scheduler_file : str, optional
        Connect to a running scheduler (the connection is closed at the end).
    cluster : ClusterConfig or distributed cluster, optional
        A :class:`~curator_dask.cluster.ClusterConfig` to start (and stop at the end), or a
        running cluster object. With nothing given: a local cluster from
        ``curator.cluster.*``, sized to the machine.
    max_in_flight : int, optional
        Partitions in flight in streaming mode; default ``curator.execution.max-in-flight``
        or one per worker thread (the default blocksize is sized for that).
    progress : bool, optional
        Print the dashboard link and a progress line on stderr; default
        ``curator.execution.progress``.

    Examples
    --------
    >>> from curator_dask.cluster import ClusterConfig
    >>> executor = DaskExecutor(cluster=ClusterConfig(n_workers=2))
    >>> result = pipeline.run(executor)  # doctest: +SKIP
    """

    def __init__(
        self,
        client: Any = None,
        address: str | None = None,
        scheduler_file: str | None = None,
        cluster: Any = None,
        *,
        max_in_flight: int | None = None,
        progress: bool | None = None,
    ) -> None:
        super().__init__(progress=progress)
        given = [x for x in (client, address, scheduler_file, cluster) if x is not None]
        if len(given) > 1:
            raise ValueError(
                "DaskExecutor: give at most one of client, address, scheduler_file, cluster"
            )
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.client = client
        self.address = address
        self.scheduler_file = scheduler_file
        self.cluster = cluster
        self.max_in_flight = max_in_flight
        self._connect_error: Exception | None = None  # from listing's look at the scheduler

    def __repr__(self) -> str:
        where = (
            "client"
            if self.client is not None
            else f"address={self.address!r}"
            if self.address
            else f"scheduler_file={self.scheduler_file!r}"
            if self.scheduler_file
            else f"cluster={self.cluster!r}"
            if self.cluster is not None
            else "local cluster from curator.cluster.*"
        )
        return f"DaskExecutor({where})"

    # -- the client -------------------------------------------------------------------
    def _planned_workers(self) -> sizing.Workers | None:
        """The workers of the run: those of the client or the scheduler, else those this
        executor will start (the partitions are listed before the cluster starts, and are
        sized for them, not for the active client's)."""
        self._connect_error = None
        if self.client is not None:
            return sizing.workers_of(self.client)
        connect = self._connect_config()
        if connect is not None:
            # Ask the scheduler (one short extra connection, before listing the input).
            try:
                with get_client(connect) as client:
                    return sizing.workers_of(client)
            except ClusterConnectError as e:
                # raised again when the run needs the cluster (not after a second wait)
                self._connect_error = e
                return None
        if self.cluster is None or isinstance(self.cluster, ClusterConfig):
            config = self.cluster or ClusterConfig.from_dask_config()
            memory = config.worker_memory()
            return None if memory is None else sizing.Workers(*memory, config.sized()[0])
        info = getattr(self.cluster, "scheduler_info", None)  # a running cluster object
        if not isinstance(info, dict):
            return None
        n, limit, threads = sizing.tightest_worker(info.get("workers") or {})
        return sizing.Workers(limit, threads, n or None)

    @contextlib.contextmanager
    def _client(self, plan: RunPlan) -> Iterator[Any]:
        if self.client is not None:
            yield self.client
            return
        connect = self._connect_config()
        if connect is not None:
            error, self._connect_error = self._connect_error, None
            if error is not None:
                raise error
            config = connect
        elif self.cluster is None or isinstance(self.cluster, ClusterConfig):
            config = self.cluster or ClusterConfig.from_dask_config()
            if config.processes == "auto":
                nbytes = input_bytes(plan.reader, plan.specs)
                config = config.for_input(nbytes)
                if config.processes is False:
                    logger.info(
                        "input of %s is below curator.cluster.threads-below (%s): the local "
                        "cluster is 1 worker of %d threads in this process",
                        format_bytes(int(nbytes or 0)),
                        config.threads_below,
                        config.threads_per_worker,
                    )
        else:  # a running cluster object
            from distributed import Client

            with Client(self.cluster) as client:
                yield client
            return
        with get_client(config) as client:
            yield client

    def _scratch_locations(self) -> dict[str, str | None]:
        """The local directory (scratch and spill) of the cluster this executor starts, or
        of the workers of the client it was given when they are a local cluster's."""
        if self.client is not None:
            return local_directories(self.client)
        if self._connect_config() is not None:
            return {}
        if self.cluster is None or isinstance(self.cluster, ClusterConfig):
            config = self.cluster or ClusterConfig.from_dask_config()
            return {"local directory": config.local_directory}
        return {}

    def _connect_config(self) -> ClusterConfig | None:
        """The config to connect with when the workers are a running scheduler's, else None."""
        if self.address is not None:
            return ClusterConfig(kind="address", address=self.address)
        if self.scheduler_file is not None:
            return ClusterConfig(kind="scheduler_file", scheduler_file=self.scheduler_file)
        if self.cluster is None or isinstance(self.cluster, ClusterConfig):
            config = self.cluster or ClusterConfig.from_dask_config()
            if config.kind in ("address", "scheduler_file"):
                return config
        return None

    @contextlib.contextmanager
    def _session(self, plan: RunPlan) -> Iterator[Any]:
        with self._client(plan) as client:
            link = dashboard_link(client)
            if self._progress_enabled() and link:
                Progress(plan.pipeline.name, 0).message(f"dashboard: {link}")
            self._setup_on_nodes(client, plan)
            check_partition_sizes(client, plan)
            try:
                yield client
            finally:
                try:
                    client.run(teardown_all, on_error="ignore")
                except Exception:  # workers gone: nothing left to tear down
                    logger.debug("teardown on workers failed", exc_info=True)

    def _map(
        self, session: Any, fn: Callable[..., dict[str, Any]], args: list[tuple[Any, ...]]
    ) -> list[dict[str, Any]]:
        if session is None:
            return super()._map(session, fn, args)
        return session.gather([session.submit(fn, *a, pure=False) for a in args])

    def _setup_on_nodes(self, client: Any, plan: RunPlan) -> None:
        by_worker: dict[str, list[Any]] = {}
        for stage in plan.stages:
            if type(stage).setup_on_node is ProcessingStage.setup_on_node:
                continue  # the base class's no-op
            hosts = worker_hosts(client, stage.resources.to_dask())
            if not hosts:
                raise RuntimeError(
                    f"no worker can run stage {stage.stage_name!r}: it needs "
                    f"{stage.resources.to_dask()} and no worker advertises that"
                )
            for addr in hosts:
                by_worker.setdefault(addr, []).append(stage)
        for addr, stages in by_worker.items():
            client.run(_tasks.setup_on_node, stages, workers=[addr])

    def _window(self, client: Any) -> int:
        n = self.max_in_flight or _config.get("execution.max-in-flight")
        if n:
            return int(n)
        # One partition per worker thread: what the default blocksize is sized for. A
        # second one per thread does not wait idle: its read runs whenever the thread
        # waits for the scheduler between two steps of the first, so each worker held a
        # stage's working set plus a whole other partition (bench_filters_pipeline.py).
        return max(1, sum(client.nthreads().values()))

    # -- streaming ----------------------------------------------------------------------
    def _run_streaming(
        self, session: Any, plan: RunPlan, todo: list[PartitionSpec]
    ) -> list[dict[str, Any]]:
        self._check_placeable(session, plan)
        progress = self._progress(plan, len(todo), session)
        return StreamingRun(session, plan, todo, self._window(session), progress).run()

    def _check_placeable(self, client: Any, plan: RunPlan) -> None:
        for stage in plan.stages:
            need = stage.resources.to_dask()
            if need and not worker_hosts(client, need):
                raise RuntimeError(
                    f"no worker can run stage {stage.stage_name!r}: it needs {need} and no "
                    "worker advertises that (start GPU workers with ClusterConfig(kind='gpu')"
                    " or `dask worker --resources GPU=1`)"
                )

    # -- batch ---------------------------------------------------------------------------
    def _run_batch(
        self, session: Any, plan: RunPlan, todo: list[PartitionSpec]
    ) -> list[dict[str, Any]]:
        from distributed import as_completed

        client = session
        self._check_placeable(client, plan)
        stats: dict[int, list[dict[str, Any]]] = {s.index: [] for s in todo}
        for step, step_dir, progress in self._batch_steps(plan, len(todo), client):
            futures = []
            markers: dict[int, dict[str, Any]] = {}
            for spec in todo:
                token = plan.step_token(spec, step)
                marker = _tasks.batch_done(plan.layout, step_dir, spec.index, token)
                if marker is not None:
                    markers[spec.index] = marker
                    continue
                task, args = plan.batch_task(spec, step, token)
                resources = plan.stages[step - 1].resources.to_dask() if step else None
                fut = client.submit(
                    task,
                    *args,
                    key=plan.key(step, spec.index),
                    priority=plan.priority(step, spec.index),
                    resources=resources or None,
                )
                futures.append(fut)
            for fut in as_completed(futures):
                marker = fut.result()
                markers[marker["index"]] = marker
                progress.update()
            for spec in todo:
                stats[spec.index].append(markers[spec.index]["stats"])
        last = len(plan.stages)
        futures = [
            client.submit(
                _tasks.batch_write_task,
                *plan.batch_write_args(spec, stats[spec.index]),
                key=plan.key(last + 1, spec.index),
                priority=plan.priority(last + 1, spec.index),
            )
            for spec in todo
        ]
        progress = self._progress(plan, len(todo), client, "write")
        records = []
        for fut in as_completed(futures):
            record = fut.result()
            records.append(record)
            progress.update(record)  # shown, and said to the run hooks
        return records
