"""One way to get a dask ``Client``: a local CPU cluster, a local CUDA cluster, or a scheduler.

Everything is driven by one :class:`ClusterConfig`, built from ``curator.cluster.*`` in dask
config (and so from ``curator.yaml`` / ``DASK_CURATOR__CLUSTER__...``), from a YAML file, or
in code; :func:`get_client` turns it into a client and cleans up what it started
(:func:`connect` does the same without a ``with`` block, for notebooks).

=================  =======================================================================
``kind``           what :func:`get_client` does
=================  =======================================================================
``"cpu"``          starts a :class:`distributed.LocalCluster` on 127.0.0.1; workers advertise
                   ``resources={"CPU": threads_per_worker}``
``"gpu"``          starts a ``dask_cuda.LocalCUDACluster``: one worker per GPU with an RMM
                   pool; workers advertise ``{"GPU": 1, "GPU_MEMORY_GB": <device memory>}``
``"address"``      connects to a running scheduler at ``address`` (``tcp://`` or ``tls://``)
``"scheduler_file"``  connects through a scheduler file (the usual way inside a batch job)
=================  =======================================================================

Worker recycling
----------------
``lifetime`` / ``lifetime_stagger`` / ``lifetime_restart`` let distributed retire and
restart workers after a while (a cure for slow leaks in third-party code). A lifetime
shorter than a job can livelock that job: a retiring worker hands its data to the others,
but if every worker is retired before the job's tasks finish, results that only one worker
held are recomputed again and again. Keep ``lifetime`` well above the longest run, and
stagger it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from dask.utils import parse_bytes, parse_timedelta

from curator_dask import config as _config
from curator_dask.errors import ClusterConnectError

KINDS = ("cpu", "gpu", "address", "scheduler_file")


@dataclass
class ClusterConfig:
    """Where and how dask runs; see the module docstring for ``kind``.

    Parameters
    ----------
    kind : {"cpu", "gpu", "address", "scheduler_file"}
        Start a local CPU or CUDA cluster, or connect to a running scheduler.
    n_workers, threads_per_worker : int, optional
        Local clusters only. None sizes them to the machine: one thread per worker
        process on small machines, two on machines with 4+ cores (text work in pandas
        holds the GIL, so processes scale better than threads); one worker per GPU for
        ``"gpu"``. For ``"address"``/``"scheduler_file"``, ``n_workers`` is the number of
        workers to wait for before returning the client.
    memory_limit : str or int or float
        Host memory per worker (``"auto"`` splits the machine's memory); spilling to
        ``local_directory`` starts at distributed's thresholds below this.
    local_directory : str, optional
        Scratch and spill directory of the workers (a fast local disk).
    address, scheduler_file : str, optional
        The scheduler to connect to, for the connecting kinds.
    host : str
        Interface local clusters listen on; ``127.0.0.1`` keeps them private.
    dashboard_address : str, optional
        Where the scheduler's HTTP server listens (``/metrics``, ``/health`` and, with
        ``dashboard``, the dashboard's pages); None: distributed's default (port 8787 on
        every interface).
    dashboard : bool
        Serve dask's dashboard (bokeh) from local clusters. Off by default
        (``curator.cluster.dashboard``, ``--dashboard`` on the command line): loading bokeh
        costs a run about 0.7 CPU-s and 20 MB, what a small input takes in all.
    processes : bool or "auto"
        Local CPU clusters: worker processes (default) or threads in this process.
        ``"auto"`` (what ``curator.cluster.processes`` asks for, so the command line and a
        :class:`~curator_dask.executor.DaskExecutor` without a cluster get it): threads when
        the input is known to be smaller than ``threads_below``, processes otherwise; see
        :meth:`for_input`.
    threads_below : str or int, optional
        With ``processes="auto"``: the input size (estimated in-memory bytes) below which
        the cluster is one worker of threads in this process. None: always processes.
    rmm_pool_size, rmm_async, rmm_release_threshold, enable_cudf_spill,
    device_memory_limit : optional
        GPU memory settings passed to ``dask_cuda.LocalCUDACluster``: an RMM pool per
        worker (e.g. ``"24GB"`` or a fraction such as ``0.8``), the CUDA async allocator,
        when the async pool returns memory, cudf's own spilling to host, and the device
        memory at which dask-cuda spills.
    torch_rmm : bool
        Route PyTorch's CUDA allocations through RMM too, so a model and cudf share one
        pool instead of fighting over the device.
    lifetime, lifetime_stagger : str, optional
        Retire each worker after this long (e.g. ``"2 hours"``), give or take the stagger.
        See *Worker recycling* in the module docstring for the livelock warning.
    lifetime_restart : bool
        Restart a worker retired by ``lifetime`` (local clusters restart through nannies).
    adaptive_minimum, adaptive_maximum : int, optional
        If either is set, local clusters scale adaptively between them.
    security : distributed.Security or bool or dict, optional
        TLS: a :class:`distributed.Security`; ``True`` for a temporary self-signed
        certificate (local clusters, needs ``cryptography``); or a dict of
        ``Security`` arguments (``tls_ca_file``, ``tls_client_cert``, ``tls_client_key``,
        ...) as written in YAML.
    connect_timeout : str or float, optional
        Connecting kinds: how long to wait for the scheduler to answer, for the scheduler
        file to appear and for workers to join before failing with
        :class:`ClusterConnectError`; default ``curator.cluster.connect-timeout`` (30 s).

    Examples
    --------
    >>> ClusterConfig(n_workers=2, threads_per_worker=1).kind
    'cpu'
    >>> ClusterConfig(kind="address", address="tcp://10.0.0.5:8786").address
    'tcp://10.0.0.5:8786'
    """

    kind: str = "cpu"
    n_workers: int | None = None
    threads_per_worker: int | None = None
    memory_limit: str | int | float | None = "auto"
    local_directory: str | None = None
    address: str | None = None
    scheduler_file: str | None = None
    host: str = "127.0.0.1"
    dashboard_address: str | None = "127.0.0.1:0"
    dashboard: bool = False
    processes: bool | str = True
    threads_below: str | int | None = "64MiB"
    rmm_pool_size: str | float | None = None
    rmm_async: bool = False
    rmm_release_threshold: str | float | None = None
    enable_cudf_spill: bool = False
    device_memory_limit: str | float | None = None
    torch_rmm: bool = False
    lifetime: str | None = None
    lifetime_stagger: str | None = None
    lifetime_restart: bool = False
    adaptive_minimum: int | None = None
    adaptive_maximum: int | None = None
    security: Any = None
    connect_timeout: str | float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"ClusterConfig.kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "address" and not self.address:
            raise ValueError("ClusterConfig(kind='address') needs address=")
        if self.kind == "scheduler_file" and not self.scheduler_file:
            raise ValueError("ClusterConfig(kind='scheduler_file') needs scheduler_file=")
        for name in ("n_workers", "threads_per_worker", "adaptive_minimum", "adaptive_maximum"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"ClusterConfig.{name} must be an int >= 0, got {value!r}")
        if self.processes not in (True, False, "auto"):
            raise ValueError(
                f"ClusterConfig.processes must be true, false or 'auto', got {self.processes!r}"
            )
        local = self.kind in ("cpu", "gpu")
        if local and self.n_workers == 0 and not self.adaptive_maximum:
            raise ValueError(
                "ClusterConfig.n_workers is 0: a local cluster without workers runs nothing; "
                "give n_workers >= 1, or leave it unset to size it to the machine"
            )

    # -- constructors ---------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ClusterConfig:
        """Build from a mapping; keys may use ``-`` or ``_`` (``n-workers``, ``n_workers``).

        Unknown keys raise ``ValueError`` naming the key.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in (data or {}).items():
            name = str(key).replace("-", "_")
            if name not in names:
                raise ValueError(
                    f"cluster.{key}: unknown setting (known: {', '.join(sorted(names))})"
                )
            kwargs[name] = value
        return cls(**kwargs)

    @classmethod
    def from_dask_config(cls, **overrides: Any) -> ClusterConfig:
        """Build from ``curator.cluster.*`` in dask config, then apply ``overrides``.

        None-valued overrides are ignored, so command-line flags can be passed directly.
        """
        data = dict(_config.get("cluster", {}) or {})
        cfg = cls.from_dict(data)
        changes = {k: v for k, v in overrides.items() if v is not None}
        return dataclasses.replace(cfg, **changes) if changes else cfg

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> ClusterConfig:
        """Build from a YAML file holding the settings (optionally under ``cluster:``)."""
        with open(path) as f:
            data = yaml.safe_load(f) or {}
        if "cluster" in data and isinstance(data["cluster"], Mapping):
            data = data["cluster"]
        return cls.from_dict(data)

    # -- derived settings -------------------------------------------------------------
    def sized(self) -> tuple[int, int]:
        """Return ``(n_workers, threads_per_worker)`` for a local CPU cluster."""
        cpus = _cpu_count()
        threads = self.threads_per_worker or (2 if cpus >= 4 else 1)
        workers = self.n_workers if self.n_workers is not None else max(1, cpus // threads)
        return workers, threads

    def worker_memory(self) -> tuple[int | None, int] | None:
        """``(memory_limit, threads_per_worker)`` the workers of this local CPU cluster get.

        The limit in bytes as distributed resolves ``memory_limit`` (``"auto"``: the
        machine's memory shared by thread), None for no limit; known before the cluster
        starts, so a run can size its partitions for it. None for other kinds (a GPU
        cluster's limits are dask-cuda's; a scheduler's workers are known once connected).

        Examples
        --------
        >>> ClusterConfig(n_workers=2, threads_per_worker=1, memory_limit="2GiB").worker_memory()
        (2147483648, 1)
        """
        if self.kind != "cpu":
            return None
        from distributed.worker_memory import parse_memory_limit

        _, threads = self.sized()
        limit = parse_memory_limit(
            self.memory_limit, threads, logger=logging.getLogger("curator_dask.cluster")
        )
        return limit, threads

    def for_input(self, nbytes: float | None) -> ClusterConfig:
        """This config with ``processes="auto"`` decided for an input of ``nbytes``.

        A local CPU cluster for an input known to be smaller than ``threads_below`` becomes
        one worker in this process with all the threads (and the memory) the workers would
        have had: each worker process costs seconds of CPU and hundreds of MB to start, to
        import pandas, pyarrow and the kernels into, and to stop, more than a small input
        takes to process (``bench/bench_cli.py`` measures it). Anything else (a larger or
        unknown input, TLS, worker lifetimes, adaptive scaling, other kinds) gets worker
        processes. Configs that do not say ``"auto"`` are returned as they are.

        Examples
        --------
        >>> small = ClusterConfig(processes="auto", n_workers=2, threads_per_worker=1)
        >>> cfg = small.for_input(10_000)
        >>> cfg.processes, cfg.n_workers, cfg.threads_per_worker
        (False, 1, 2)
        >>> small.for_input(None).processes
        True
        """
        if self.processes != "auto":
            return self
        threads_ok = (
            self.kind == "cpu"
            and self.threads_below is not None
            and nbytes is not None
            and nbytes < parse_bytes(self.threads_below)
            and not self.security
            and not self.lifetime
            and self.adaptive_minimum is None
            and self.adaptive_maximum is None
        )
        if not threads_ok:
            return dataclasses.replace(self, processes=True)
        workers, threads = self.sized()
        workers = capped_workers(workers)
        return dataclasses.replace(
            self,
            processes=False,
            n_workers=1,
            threads_per_worker=workers * threads,
            memory_limit=_scaled_memory_limit(self.memory_limit, workers),
        )

    def security_object(self) -> Any:
        """Return the :class:`distributed.Security` for ``security`` (or None)."""
        from distributed import Security

        sec = self.security
        if sec is None or sec is False:
            return None
        if sec is True:
            return Security.temporary()
        if isinstance(sec, Mapping):
            return Security(**{str(k).replace("-", "_"): v for k, v in sec.items()})
        return sec

    def worker_kwargs(self) -> dict[str, Any]:
        """Keyword arguments every worker gets (lifetime, spill directory)."""
        kw: dict[str, Any] = {}
        if self.local_directory:
            kw["local_directory"] = str(self.local_directory)
        if self.lifetime:
            kw["lifetime"] = self.lifetime
            if self.lifetime_stagger:
                kw["lifetime_stagger"] = self.lifetime_stagger
            kw["lifetime_restart"] = bool(self.lifetime_restart)
        return kw


def _scaled_memory_limit(limit: str | int | float | None, workers: int) -> str | int | float | None:
    """The memory of ``workers`` workers of ``limit`` each, for one worker."""
    if limit is None or limit == "auto" or workers == 1:
        return limit
    if isinstance(limit, float) and 0 < limit <= 1:  # a fraction of the machine
        return min(1.0, limit * workers)
    nbytes = parse_bytes(limit) if isinstance(limit, str) else int(limit)
    return nbytes * workers if nbytes > 0 else limit


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: The least memory each local worker process is given room for when their number is capped.
MIN_WORKER_MEMORY = 512 * 2**20


def capped_workers(n_workers: int) -> int:
    """``n_workers`` capped for a local CPU cluster, with a one-line warning when capped.

    A local cluster never starts more workers than the machine has cores (each runs at
    least one thread) or than its memory holds at :data:`MIN_WORKER_MEMORY` each: more
    only compete for the same cores and memory (``--n-workers 1000`` started 41
    processes in 30 s on a 2-core machine).
    """
    import psutil

    cpus = _cpu_count()
    memory = psutil.virtual_memory().total
    cap = max(1, min(cpus, memory // MIN_WORKER_MEMORY))
    if n_workers <= cap:
        return n_workers
    logging.getLogger("curator_dask.cluster").warning(
        "%d local workers asked for; starting %d (%d cores, %.1f GiB memory): a local "
        "cluster has at most one worker per core",
        n_workers,
        cap,
        cpus,
        memory / 2**30,
    )
    return int(cap)


def make_cluster(config: ClusterConfig) -> Any:
    """Start and return the local cluster described by ``config`` (kind cpu or gpu).

    The caller owns it and must close it; :func:`get_client` does that for you.
    """
    if config.kind == "cpu":
        cluster = _cpu_cluster(config)
    elif config.kind == "gpu":
        cluster = _gpu_cluster(config)
    else:
        raise ValueError(f"make_cluster starts local clusters only, not kind={config.kind!r}")
    if config.adaptive_minimum is not None or config.adaptive_maximum is not None:
        cluster.adapt(
            minimum=config.adaptive_minimum or 0,
            maximum=config.adaptive_maximum or config.n_workers or config.sized()[0],
        )
    return cluster


def _cpu_cluster(config: ClusterConfig) -> Any:
    from distributed import LocalCluster

    n_workers, threads = config.sized()
    n_workers = capped_workers(n_workers)
    security = config.security_object()
    network: dict[str, Any] = {"host": config.host}
    if security is not None:
        network["protocol"] = "tls://"
    processes = config.processes is not False  # "auto" not decided by for_input: processes
    if security is None and not processes:
        network = {}  # threads in this process talk in-process: no host to listen on
    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=threads,
        processes=processes,
        memory_limit=config.memory_limit,
        dashboard_address=config.dashboard_address,
        scheduler_kwargs={"dashboard": bool(config.dashboard)},
        security=security,
        resources={"CPU": threads},
        **network,
        **config.worker_kwargs(),
    )


def _gpu_cluster(config: ClusterConfig) -> Any:
    from curator_dask._backend import import_rapids

    # Here, not in the workers: a RAPIDS that cannot import (a numpy it does not support)
    # is reported in one line before any worker starts. cudf itself is optional here (a
    # GPU cluster for torch stages needs only dask-cuda).
    import_rapids("cudf", required=False)
    import_rapids("dask_cuda")
    from dask_cuda import LocalCUDACluster
    from dask_cuda.utils import get_device_total_memory

    kw: dict[str, Any] = {}
    if config.device_memory_limit is not None:
        kw["device_memory_limit"] = config.device_memory_limit
    if config.rmm_release_threshold is not None:
        kw["rmm_release_threshold"] = config.rmm_release_threshold
    if config.torch_rmm:
        kw["rmm_allocator_external_lib_list"] = ["torch"]
    security = config.security_object()
    # Every worker gets one GPU; advertise its memory so stages can ask for gpu_memory_gb.
    device_gb = get_device_total_memory(0) / 1e9
    return LocalCUDACluster(
        n_workers=config.n_workers,
        threads_per_worker=config.threads_per_worker or 1,
        memory_limit=config.memory_limit,
        host=config.host,
        dashboard_address=config.dashboard_address,
        scheduler_kwargs={"dashboard": bool(config.dashboard)},
        security=security,
        protocol="tls://" if security is not None else None,
        rmm_pool_size=config.rmm_pool_size,
        rmm_async=config.rmm_async,
        enable_cudf_spill=config.enable_cudf_spill,
        resources={"GPU": 1, "GPU_MEMORY_GB": round(device_gb, 1)},
        **kw,
        **config.worker_kwargs(),
    )


def active_client(client: Any = None) -> Any:
    """``client``, else the active distributed client (``distributed.default_client()``),
    else None (dask's local scheduler): the one lookup pipelines and dedup workflows use."""
    if client is not None:
        return client
    if "distributed" not in sys.modules:  # no client can exist: not worth its import
        return None
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:  # "No clients found"
        return None


def local_directories(client: Any) -> dict[str, str | None]:
    """The scratch and spill directories of ``client``'s workers when they are a local
    cluster's (``Client(LocalCluster(...))``, as the command line starts one), for io's
    overlap rule: ``{"local directory": path}`` (one entry per directory, the worker named
    when there are several); ``{}`` for no client or a scheduler elsewhere, as the command
    line has it when it connects to one."""
    cluster = getattr(client, "cluster", None)
    if cluster is None or "distributed" not in sys.modules:
        return {}
    from distributed import LocalCluster

    if not isinstance(cluster, LocalCluster):
        return {}

    def where(dask_worker: Any) -> str:
        return str(dask_worker.local_directory)

    dirs = sorted(set(client.run(where).values()))
    if len(dirs) == 1:
        return {"local directory": dirs[0]}
    return {f"local directory of worker {i + 1}": d for i, d in enumerate(dirs)}


def dashboard_link(client: Any) -> str | None:
    """The link to ``client``'s dashboard; None when there is none to open.

    A local cluster started without ``dashboard`` serves no dashboard pages (its scheduler
    runs in this process, so that is known); a scheduler elsewhere is taken to serve them.
    """
    if client is None:
        return None
    scheduler = getattr(getattr(client, "cluster", None), "scheduler", None)
    http = getattr(scheduler, "http_application", None)
    if http is not None and not getattr(http, "applications", True):
        return None  # the HTTP server has no bokeh application: no pages at the link
    return getattr(client, "dashboard_link", None)


def connect_timeout(config: ClusterConfig, timeout: str | float | None = None) -> float:
    """Seconds to wait for a scheduler: ``timeout``, else the config's, else 30."""
    value = timeout if timeout is not None else config.connect_timeout
    if value is None:
        value = _config.get("cluster.connect-timeout", None) or "30s"
    seconds = parse_timedelta(value)
    if seconds is None or seconds <= 0:
        raise ValueError(f"connect timeout must be > 0, got {value!r}")
    return float(seconds)


def _tcp_host_port(address: str) -> tuple[str, int] | None:
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme != "tcp":
        return None  # tls, ucx, inproc: left to distributed
    rest = rest.split("/", 1)[0]
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit():
        host, port = rest, "8786"
    return host.strip("[]"), int(port)


def probe_scheduler(address: str, timeout: float) -> None:
    """Fail fast unless a dask scheduler answers at a ``tcp://`` address.

    A scheduler sends its handshake as soon as a connection is accepted; a port that
    accepts and stays silent (a dashboard, another service, a stuck process) would make
    ``distributed.Client`` wait forever, so this waits ``timeout`` seconds at most.
    """
    where = _tcp_host_port(address)
    if where is None:
        return
    deadline = time.monotonic() + timeout
    hint = "check the address and port (a scheduler listens on 8786 by default)"
    try:
        sock = socket.create_connection(where, timeout=timeout)
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise ClusterConnectError(
            f"cannot reach a dask scheduler at {address}: {reason}; {hint} and that "
            "`dask scheduler` is running there"
        ) from None
    with sock:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            answer = sock.recv(1)
        except OSError:
            answer = b""
    if not answer:
        raise ClusterConnectError(
            f"{address} accepted a connection but did not answer as a dask scheduler within "
            f"{timeout:g} s; is it the dashboard (8787) or another service? {hint}; raise "
            "curator.cluster.connect-timeout if the scheduler is just slow"
        )


def _wait_for_scheduler_file(path: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                return str(json.load(f)["address"])
        except FileNotFoundError:
            pass
        except (ValueError, KeyError):  # being written right now
            pass
        if time.monotonic() > deadline:
            if not os.path.exists(path):
                raise ClusterConnectError(
                    f"scheduler file {path} does not exist (waited {timeout:g} s): start "
                    f"`dask scheduler --scheduler-file {path}` or fix the path"
                )
            raise ClusterConnectError(f"scheduler file {path} holds no scheduler address")
        time.sleep(0.2)


@contextlib.contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Worker processes started meanwhile inherit an ignored SIGINT.

    Ctrl-C in a terminal reaches every process of the foreground group: the workers of a
    local cluster would each die with a traceback while this process, which owns them,
    stops the run and shuts them down in order.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def get_client(
    config: ClusterConfig | None = None, *, timeout: str | float | None = None
) -> Iterator[Any]:
    """Yield a :class:`distributed.Client` for ``config``; close what was started on exit.

    Parameters
    ----------
    config : ClusterConfig, optional
        Defaults to :meth:`ClusterConfig.from_dask_config` (``curator.cluster.*``).
    timeout : str or float, optional
        Connecting kinds: how long to wait for the scheduler file, the scheduler's answer
        and its workers (``n_workers`` of them, else at least one); local kinds: how long
        to wait for the workers the cluster starts (one that fails to start is reported
        at once, with its exception, as :class:`ClusterConnectError`); default
        ``config.connect_timeout``, else ``curator.cluster.connect-timeout`` (30 s).
        Past it, :class:`ClusterConnectError` says what to check.

    Examples
    --------
    >>> with get_client(ClusterConfig(n_workers=1, processes=False)) as client:  # doctest: +SKIP
    ...     print(client.dashboard_link)
    """
    from distributed import Client

    config = config if config is not None else ClusterConfig.from_dask_config()
    if config.kind in ("cpu", "gpu"):
        seconds = connect_timeout(config, timeout)
        with _WorkerErrors() as errors:
            try:
                with _children_ignore_sigint():
                    cluster = make_cluster(config)
            except Exception as e:
                if errors.exception() is None and "failed to start" not in str(e):
                    raise  # not a worker's failure (a missing package, a bad setting)
                raise ClusterConnectError(_start_failure(config, errors.cause(e))) from e
            try:
                client = Client(cluster)
                _wait_for_local_workers(client, cluster, config, seconds, errors)
            except BaseException:
                _close_quietly(cluster)
                raise
        try:
            with client:
                yield client
        finally:
            _close_quietly(cluster)
        return
    seconds = connect_timeout(config, timeout)
    kwargs: dict[str, Any] = {"timeout": seconds}
    security = config.security_object()
    if security is not None:
        kwargs["security"] = security
    if config.kind == "address":
        address = str(config.address)
    else:
        address = _wait_for_scheduler_file(str(config.scheduler_file), seconds)
    probe_scheduler(address, seconds)
    try:
        client = Client(address, **kwargs)
    except OSError as e:
        raise ClusterConnectError(
            f"could not connect to the dask scheduler at {address}: {e}"
        ) from None
    try:
        want = config.n_workers or 1
        try:
            client.wait_for_workers(want, timeout=seconds)
        except TimeoutError:
            have = len(client.scheduler_info(n_workers=-1).get("workers", {}))
            raise ClusterConnectError(
                f"the scheduler at {address} has {have} worker(s), {want} wanted, after "
                f"{seconds:g} s: start workers with `dask worker {address}` (or lower "
                "--n-workers)"
            ) from None
        yield client
    finally:
        client.close()


class _WorkerErrors(logging.Handler):
    """Collect the errors ``distributed`` logs while a local cluster's workers start.

    A worker that fails to start (a preload or plugin that raises, e.g. ``import cudf``
    on a machine whose numpy it does not support) is logged by its nanny, in this
    process, with the exception; that exception is the cause a user needs to read.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> _WorkerErrors:
        logging.getLogger("distributed").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("distributed").removeHandler(self)

    def exception(self) -> BaseException | None:
        """The first exception a nanny logged (a worker process that failed to start)."""
        for record in self.records:
            if record.name == "distributed.nanny" and record.exc_info and record.exc_info[1]:
                return record.exc_info[1]
        return None

    def cause(self, err: BaseException | None = None) -> str | None:
        """The first worker exception seen (or ``err``'s root cause), as one line."""
        found = self.exception()
        if found is None and err is not None:
            found = err
            while found.__cause__ is not None:
                found = found.__cause__
        if found is not None:
            text = str(found).strip().splitlines()
            return f"{type(found).__name__}: {text[0] if text else ''}".rstrip(": ")
        if self.records:
            return self.records[0].getMessage().strip().splitlines()[0]
        return None


def _start_failure(config: ClusterConfig, cause: str | None) -> str:
    what = "dask-cuda" if config.kind == "gpu" else "local"
    return (
        f"the {what} cluster's workers failed to start: {cause or 'no error was logged'}; "
        "fix that in the worker environment (see the log above)"
    )


def _wait_for_local_workers(
    client: Any, cluster: Any, config: ClusterConfig, seconds: float, errors: _WorkerErrors
) -> None:
    """Wait until the workers the cluster was asked for are up, or say why they are not.

    dask-cuda's ``LocalCUDACluster`` starts its workers after the constructor returns
    (``scale`` then a background state correction), so a worker that fails to start
    leaves a cluster with no workers and a run that waits for them forever.
    """
    want = len(getattr(cluster, "worker_spec", {}) or {})
    if config.adaptive_minimum is not None or config.adaptive_maximum is not None:
        want = min(want, config.adaptive_minimum or 0)
    if want == 0:
        return
    deadline = time.monotonic() + seconds
    while True:
        have = len(client.scheduler_info(n_workers=-1).get("workers", {}))
        if have >= want:
            return
        failed = errors.exception() is not None
        if failed or time.monotonic() > deadline:
            cause = errors.cause() if failed else None
            if cause is None:
                seen = errors.cause()
                cause = f"{have} of {want} worker(s) up after {seconds:g} s" + (
                    f" (last error: {seen})" if seen else ""
                )
            raise ClusterConnectError(_start_failure(config, cause))
        time.sleep(0.1)


def connect(
    config: ClusterConfig | None = None, *, timeout: str | float | None = None
) -> tuple[Any, Any]:
    """Return ``(client, close)`` for ``config``: :func:`get_client` without a ``with`` block.

    For notebooks, where a cell opens the client and a later cell (or nothing) closes
    it. ``close()`` closes the client and, for the local kinds, shuts down the cluster
    that was started; it may be called more than once. If it is never called, the local
    cluster lives as long as the Python process.

    Parameters
    ----------
    config : ClusterConfig, optional
        Defaults to :meth:`ClusterConfig.from_dask_config` (``curator.cluster.*``).
    timeout : str
        As for :func:`get_client`.

    Returns
    -------
    tuple
        A :class:`distributed.Client` and a function of no arguments that closes it.

    Examples
    --------
    >>> client, close = connect(ClusterConfig(n_workers=1, processes=False))  # doctest: +SKIP
    >>> result = pipeline.run(DaskExecutor(client=client))  # doctest: +SKIP
    >>> close()  # doctest: +SKIP
    """
    context = get_client(config, timeout=timeout)
    client = context.__enter__()
    closed = False

    def close() -> None:
        nonlocal closed
        if not closed:
            closed = True
            context.__exit__(None, None, None)

    return client, close


def worker_hosts(client: Any, resources: Mapping[str, float] | None = None) -> list[str]:
    """Return one worker address per host, among workers that have ``resources``."""
    chosen: dict[str, str] = {}
    for addr, info in sorted(client.scheduler_info(n_workers=-1)["workers"].items()):
        have = info.get("resources") or {}
        if resources and any(have.get(k, 0) < v for k, v in resources.items()):
            continue
        chosen.setdefault(info.get("host", addr), addr)
    return list(chosen.values())


def _close_quietly(cluster: Any) -> None:
    """Close a local cluster without the nanny's "still alive after 4.0 seconds, killing",
    and without the tracebacks of the connections the shutdown closes on the terminal.

    A worker process that takes longer than the nanny's grace period to exit (interpreter
    teardown on a busy machine) is killed, as it should be once the work is written; the
    warning about it says nothing a user can act on, so it is logged at DEBUG instead. A
    heartbeat or a comm that meets the closed scheduler (``StreamClosedError``: after a
    failed task, the shutdown races the workers) is kept off the terminal's handlers of
    ``distributed`` and the root logger; a log file's handler still gets it.
    """
    from curator_dask._task_failures import closed_connection

    nanny = logging.getLogger("distributed.nanny")
    quiet = _DemoteFilter("still alive after")
    nanny.addFilter(quiet)

    def hidden(record: logging.LogRecord) -> bool:  # a handler's filter (a callable)
        return not closed_connection(record)

    terminals = [
        h
        for name in ("distributed", None)
        for h in logging.getLogger(name).handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]
    for h in terminals:
        h.addFilter(hidden)
    try:
        cluster.close()
    finally:
        nanny.removeFilter(quiet)
        for h in terminals:
            h.removeFilter(hidden)


class _DemoteFilter(logging.Filter):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        if self.text in record.getMessage():
            logging.getLogger("curator_dask.cluster").debug(record.getMessage())
            return False
        return True
