"""The run layout: the one place that names and writes every file a run leaves.

An output directory holds the documents and nothing else; the run's metadata goes to a
folder beside it, named after it with :data:`META_SUFFIX`::

    <output>/part-00000.jsonl          the documents, one file per partition
    <output>/part-00001.jsonl
    <output>.curator/_SUCCESS          the completion marker (JSON of the run summary)
    <output>.curator/_stats.json       the run's statistics
    <output>.curator/_stats/           one statistics record per written partition
    <output>.curator/_quarantine/      the quarantined input records, one file per partition
    <output>.curator/_work/            batch mode's intermediate Parquet files
    <output>.curator/_removed/         what each stage removed, with the stage (keep_removed)
    <output>.curator/_report.html      the HTML report, and _timeline.pqt (monitoring)
    <output>.curator/_runs.json        the runs that wrote partitions (monitoring)

Nothing but document files lies under ``<output>``, because the readers of datasets do not
agree on what to skip: dask, pandas and pyarrow skip names starting with ``.`` or ``_``, HF
``datasets`` ``.`` and ``__`` (a ``_SUCCESS`` file breaks ``load_dataset``), while polars
lists a directory with its hidden folders (and refuses mixed suffixes) and ``**`` globs in
polars, duckdb and fsspec descend into hidden folders. The readers of this package skip a
``*.curator`` folder when they list a directory.

Writers, executors and workflows ask a :class:`RunLayout` for these names and write through
it (atomically, on local disks and object stores alike); none formats a path of its own.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import posixpath
import re
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from curator_dask import config
from curator_dask.errors import OutputInUseError
from curator_dask.io._files import (
    META_SUFFIX,
    get_fs,
    is_object_store,
    part_name,
    split_protocol,
    write_bytes,
)
from curator_dask.io.quarantine import empty_quarantine, read_quarantine, write_quarantine_file

logger = logging.getLogger("curator_dask.io")

#: The folder that held the metadata inside the output directory before it moved beside it;
#: a run in ``"overwrite"`` mode removes it (it broke polars and ``**`` globs).
LEGACY_META_DIR = ".curator"
#: Names of the metadata files and folders inside the metadata folder.
SUCCESS = "_SUCCESS"
RUN_STATS = "_stats.json"
STATS_DIR = "_stats"
QUARANTINE_DIR = "_quarantine"
WORK_DIR = "_work"
REPORT = "_report.html"
#: The suffix of Parquet files among a run's metadata. ``dd.read_parquet(output)`` lists every
#: ``*.parquet``/``*.parq``/``*.pq`` below ``output``, hidden folders included (``fs.find``), so
#: a metadata table named ``.parquet`` would be read as documents; pandas, pyarrow and HF
#: ``datasets`` open any name given to them.
META_PARQUET = ".pqt"
TIMELINE = "_timeline" + META_PARQUET
LEASE = "_lease.json"
REMOVED_DIR = "_removed"

_PART = re.compile(r"^part-(\d{5,})(\.[A-Za-z0-9.]+)$")
TMP_SUFFIX = re.compile(r"\.tmp-[0-9a-f]{32}$")


def part_index(name: str) -> int | None:
    """The partition index in a :func:`part_name` (base name), or None for other names.

    >>> part_index("part-00042.jsonl"), part_index("notes.txt")
    (42, None)
    """
    m = _PART.match(name.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def resolve_path(path: str | os.PathLike[str]) -> str:
    """An absolute local path, or the URL unchanged: what a path means on every worker.

    Relative local paths are relative to the current directory of the process that calls
    this (the client), never to a worker's.
    """
    path = os.fspath(path)
    if "://" in path:
        return path.rstrip("/") if not path.endswith(":///") else path
    return os.path.abspath(os.path.expanduser(path))


def meta_dir_of(root: str) -> str:
    """The metadata folder of output ``root``: its sibling ``<root>.curator``.

    >>> meta_dir_of("/data/out"), meta_dir_of("s3://bucket/clean/")
    ('/data/out.curator', 's3://bucket/clean.curator')
    """
    root = root.rstrip("/")
    _, inner = split_protocol(root)
    if ("://" in root and "/" not in inner.strip("/")) or not inner.strip("/"):
        raise ValueError(
            f"output {root or '/'} is the top of a filesystem or bucket: its metadata folder "
            "goes beside it, so write to a folder inside it (e.g. s3://bucket/clean)"
        )
    return root + META_SUFFIX


def run_metadata_dir(path: str | os.PathLike[str]) -> str:
    """The folder holding a run's statistics: ``<path>.curator`` if it has them, else ``path``.

    Lets a command given either the output directory or its metadata folder find the files.
    """
    path = os.fspath(path)
    for meta in (meta_dir_of(path), join(path, LEGACY_META_DIR)):
        fs, p = get_fs(join(meta, RUN_STATS), None)
        if fs.exists(p):
            return meta
    return path


def _glob_folder(path: str) -> tuple[str, bool] | None:
    """For a glob: the folder it starts in, and whether it can match below that folder's
    top (``**`` or a wildcard in a folder name). None for a plain path."""
    cut = min((path.find(c) for c in "*?[" if c in path), default=-1)
    if cut < 0:
        return None
    folder = path[:cut].rsplit("/", 1)[0] or "/"
    deep = "**" in path or "/" in path[cut:]
    return folder, deep


def _location_key(path: str) -> tuple[str, str]:
    """``(protocol, absolute path)`` of a file, directory or glob (a glob by its folder)."""
    path = os.fspath(path)
    glob = _glob_folder(path)
    if glob is not None:
        path = glob[0]
    protocol, p = split_protocol(path)
    if protocol in (None, "file", "local"):
        return "file", os.path.realpath(os.path.expanduser(p)).rstrip("/") or "/"
    protocol = {"s3a": "s3", "gcs": "gs"}.get(protocol, protocol)
    return protocol, "/" + p.strip("/")


def overlap(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` are the same location or one lies inside the other.

    >>> overlap("/data/in", "/data/in/out"), overlap("/data/in", "/data/input")
    (True, False)
    >>> overlap("s3://b/x", "s3://b/x/"), overlap("s3://b/x/*.jsonl", "s3://b/x")
    (True, True)
    >>> overlap("/d/*.jsonl", "/d/out"), overlap("/d/**/*.jsonl", "/d/out")
    (False, True)
    """
    (pa_, ka), (pb, kb) = _location_key(a), _location_key(b)
    if pa_ != pb:
        return False
    a_in_b, b_in_a = ka.startswith(kb.rstrip("/") + "/"), kb.startswith(ka.rstrip("/") + "/")
    # a glob over a folder's top files (``d/*.jsonl``) does not reach into its sub-folders
    shallow_a = (g := _glob_folder(os.fspath(a))) is not None and not g[1]
    shallow_b = (g := _glob_folder(os.fspath(b))) is not None and not g[1]
    return ka == kb or (a_in_b and not shallow_b) or (b_in_a and not shallow_a)


def check_apart(inputs: Sequence[str], written: Mapping[str, str | None]) -> None:
    """The overlap rule of every command, checked before anything is written or deleted.

    ``written`` names the locations a command writes (its output, a cache, work or
    quarantine directory; ``None``: not set). Raise ``ValueError`` when one of them is,
    contains or lies inside one of ``inputs`` (a later run would read its files as input,
    an overwrite would delete input files), or two of them overlap (one command's files
    would replace or be read as the other's). What a command nests inside its own output
    (``.curator/``) is not named here.

    >>> check_apart(["/d/in"], {"output": "/d/out", "cache": "/d/in/cache"})
    Traceback (most recent call last):
    ...
    ValueError: cache /d/in/cache overlaps the input /d/in: ...
    """
    given = [(name, os.fspath(path)) for name, path in written.items() if path]
    for name, path in given:
        for location in inputs:
            if overlap(path, location):
                raise ValueError(
                    f"{name} {path} overlaps the input {location}: the run would read its "
                    "own files or overwrite its input. Use a directory outside the input "
                    "(and not containing it)."
                )
    for i, (name, path) in enumerate(given):
        for other, where in given[i + 1 :]:
            if overlap(path, where):
                raise ValueError(
                    f"{name} {path} overlaps the {other} {where}: give each its own "
                    "directory, neither inside the other."
                )


def join(root: str, *names: str) -> str:
    """Join path components with ``/`` (local paths and URLs alike)."""
    return "/".join([root.rstrip("/"), *(n.strip("/") for n in names if n)])


@dataclass(frozen=True)
class RunLayout:
    """Names and atomic writes of every file under one run's output directory.

    Build it on the client with :meth:`for_output` (which resolves the path and the
    ``curator.io.quarantine-dir`` setting once); it travels to workers as is.

    Parameters
    ----------
    root : str
        The output directory: an absolute local path or a URL (``s3://bucket/out``).
    suffix : str
        The documents' file suffix (``".jsonl"``, ``".parquet"``).
    storage_options : dict, optional
        Passed to fsspec.
    quarantine_root : str, optional
        Where quarantine files go instead of ``<meta>/_quarantine``.

    Examples
    --------
    >>> layout = RunLayout("/data/out", ".jsonl")
    >>> layout.part_path(3)
    '/data/out/part-00003.jsonl'
    """

    root: str
    suffix: str = ""
    storage_options: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    quarantine_root: str | None = None
    #: Per partition, the document file's name without suffix (write-back per input file);
    #: None: ``part-<index>``.
    names: tuple[str, ...] | None = None

    @classmethod
    def for_output(
        cls,
        path: str | os.PathLike[str],
        suffix: str = "",
        storage_options: dict[str, Any] | None = None,
    ) -> RunLayout:
        """The layout of output ``path``, resolved here (on the client)."""
        qdir = config.get("io.quarantine-dir")
        return cls(
            resolve_path(path),
            suffix,
            storage_options,
            resolve_path(qdir) if qdir else None,
        )

    # -- names --------------------------------------------------------------------------
    @property
    def meta_dir(self) -> str:
        """The folder holding everything but the documents: ``<root>.curator``, beside it."""
        return meta_dir_of(self.root)

    def part_path(self, index: int) -> str:
        """The document file of partition ``index``."""
        if self.names is not None:
            return join(self.root, self.names[index] + self.suffix)
        return join(self.root, part_name(index, self.suffix))

    @property
    def success_path(self) -> str:
        """The completion marker, written last."""
        return join(self.meta_dir, SUCCESS)

    @property
    def stats_path(self) -> str:
        """The run's statistics (``PipelineResult.to_json()``)."""
        return join(self.meta_dir, RUN_STATS)

    def partition_stats_path(self, index: int) -> str:
        """The statistics record of partition ``index`` (what a resumed run reads)."""
        return join(self.meta_dir, STATS_DIR, part_name(index, ".json"))

    @property
    def quarantine_dir(self) -> str:
        """Where the quarantined records of each partition go."""
        return self.quarantine_root or join(self.meta_dir, QUARANTINE_DIR)

    def quarantine_path(self, index: int) -> str:
        """The quarantine file of partition ``index``."""
        return join(self.quarantine_dir, part_name(index, ".jsonl"))

    def work_dir(self, *names: str) -> str:
        """Intermediate files (batch steps, workflows' caches): ``<meta>/_work/<names>``."""
        return join(self.meta_dir, WORK_DIR, *names)

    @property
    def report_path(self) -> str:
        """The HTML report."""
        return join(self.meta_dir, REPORT)

    def removed_path(self, index: int) -> str:
        """What the stages removed from partition ``index`` (``Pipeline(keep_removed=True)``)."""
        return join(self.meta_dir, REMOVED_DIR, part_name(index, META_PARQUET))

    def write_removed(self, frame: Any, index: int) -> str | None:
        """Write the removed documents of partition ``index`` (None or empty: remove a stale
        file); return the path written."""
        path = self.removed_path(index)
        if frame is None or not len(frame):
            self.remove(path)
            return None
        return self.write_frame(path, frame)

    @property
    def lease_path(self) -> str:
        """The lease a running job holds on the output (see :class:`OutputLease`)."""
        return join(self.meta_dir, LEASE)

    # -- files ----------------------------------------------------------------------------
    def fs(self, path: str | None = None) -> tuple[Any, str]:
        """``(filesystem, path within it)`` of ``path`` (default: the root)."""
        return get_fs(path or self.root, self.storage_options)

    def exists(self, path: str) -> bool:
        """True if ``path`` exists."""
        fs, p = self.fs(path)
        return bool(fs.exists(p))

    def remove(self, path: str, recursive: bool = False) -> None:
        """Remove ``path`` if it exists."""
        fs, p = self.fs(path)
        if fs.exists(p):
            fs.rm(p, recursive=recursive)

    def write_bytes(self, path: str, data: bytes) -> str:
        """Write ``data`` to ``path`` atomically (parent folders created); return ``path``."""
        fs, p = self.fs(path)
        if not is_object_store(fs):  # object stores have no folders to create
            fs.makedirs(p.rsplit("/", 1)[0], exist_ok=True)
        write_bytes(fs, p, data)
        return path

    def write_json(self, path: str, obj: Any) -> str:
        """Write ``obj`` as indented JSON to ``path``, atomically."""
        text = json.dumps(obj, indent=1, sort_keys=True, default=str)
        return self.write_bytes(path, text.encode("utf-8"))

    def read_json(self, path: str) -> Any:
        """The JSON object at ``path``, or None if it is missing or unreadable."""
        fs, p = self.fs(path)
        try:
            with fs.open(p, "rb") as f:
                return json.loads(f.read())
        except (FileNotFoundError, ValueError):
            return None

    def write_frame(self, path: str, part: Any) -> str:
        """Write a pandas or cudf frame as one Parquet file, atomically."""
        buf = io.BytesIO()
        part.to_parquet(buf)
        return self.write_bytes(path, buf.getvalue())

    def read_frame(self, path: str, frame_module: Any = pd) -> Any:
        """Read a Parquet file written by :meth:`write_frame` (with ``frame_module``)."""
        fs, p = self.fs(path)
        with fs.open(p, "rb") as f:
            data = f.read()
        return frame_module.read_parquet(io.BytesIO(data))

    def check_bucket(self) -> None:
        """On an object store the output's bucket must exist: a run never creates one."""
        fs, root = self.fs()
        if not is_object_store(fs):
            return
        bucket = root.strip("/").split("/", 1)[0]
        if not fs.exists(bucket):
            raise FileNotFoundError(
                f"the bucket {bucket!r} of output {self.root} does not exist (or is not visible "
                "with these credentials); create it first: a run never creates buckets"
            )

    def check_not_overlapping(
        self, inputs: Sequence[str], others: Mapping[str, str | None] | None = None
    ) -> None:
        """Raise ``ValueError`` if the output, the quarantine directory or one of ``others``
        (a workflow's cache directory: name -> location) is, contains or lies inside one of
        ``inputs``, or two of them overlap (:func:`check_apart`).

        The one overlap check of pipelines and dedup workflows, called before anything is
        written or deleted: an overwrite would delete input files, and a reader would read
        the run's own output.
        """
        written = {"output": self.root, "quarantine directory": self.quarantine_root}
        check_apart(inputs, {**written, **(others or {})})

    def prune(self, keep: int) -> list[str]:
        """Remove the document files, statistics and quarantine of partitions ``>= keep``.

        A resumed run whose input lost files has fewer partitions; what was written for
        the missing ones no longer has an input. Returns the paths removed.
        """
        removed: list[str] = []
        # document files named after input files (per_input_file) that no partition writes
        # now: the statistics records say which files earlier runs wrote
        current = {self.part_path(i) for i in range(keep)}
        fs, stats_dir = self.fs(join(self.meta_dir, STATS_DIR))
        if self.names is not None and fs.isdir(stats_dir):
            for name in fs.ls(stats_dir, detail=False):
                full = name if "://" not in self.root else fs.unstrip_protocol(name)
                record = self.read_json(full)
                path = str(record.get("path") or "") if isinstance(record, dict) else ""
                inside = path.startswith(self.root.rstrip("/") + "/")
                if inside and path not in current and self.exists(path):
                    self.remove(path)
                    removed.append(path)
        for folder in (self.root, join(self.meta_dir, STATS_DIR), self.quarantine_dir):
            fs, p = self.fs(folder)
            if not fs.isdir(p):
                continue
            for name in fs.ls(p, detail=False):
                index = part_index(name)
                if index is not None and index >= keep:
                    fs.rm(name)
                    removed.append(name)
        return removed

    def write_quarantine(self, frame: pd.DataFrame | None, index: int) -> str | None:
        """Write partition ``index``'s quarantine records (an empty frame removes a stale file).

        Returns the file written, or None when there was nothing to quarantine.
        """
        if frame is None:
            frame = empty_quarantine()
        return write_quarantine_file(frame, self.quarantine_dir, index, self.storage_options)

    def copy_quarantine(self, source: str | None) -> tuple[str | None, int]:
        """Put the quarantine files of directory ``source`` (written by a reader's
        ``to_dask()`` under a workflow's cache) in this run's :attr:`quarantine_dir`.

        An earlier run's quarantine files there are removed first (only ``part-*.jsonl``).
        Returns the directory (None when nothing was quarantined) and the number of records.
        """
        dest = self.quarantine_dir
        fs, d = self.fs(dest)
        for stale in fs.glob(join(d, "part-*.jsonl")) if fs.isdir(d) else []:
            fs.rm(stale)
        n = 0 if source is None else len(read_quarantine(source, self.storage_options))
        if not n or source is None:
            return None, 0
        fs, s = get_fs(source, self.storage_options)
        for name in sorted(fs.glob(join(s, "part-*.jsonl"))):
            self.write_bytes(join(dest, posixpath.basename(name)), fs.cat_file(name))
        return dest, n


def write_quarantine(
    frame: pd.DataFrame,
    path: str,
    index: int,
    storage_options: dict[str, Any] | None = None,
) -> str | None:
    """Write the quarantine rows of partition ``index`` under an output directory.

    This writes to disk now, to :meth:`RunLayout.quarantine_path` of output ``path``,
    atomically (temporary name then rename; a direct write on object stores). An empty
    ``frame`` writes nothing and removes a file left at that name by an earlier run.

    Parameters
    ----------
    frame : pandas.DataFrame
        Rows with the columns of :data:`~curator_dask.io.quarantine.QUARANTINE_COLUMNS`, as in
        :attr:`~curator_dask.io.base.ReadResult.quarantine`.
    path : str
        The output directory of the run (local or ``s3://...``).
    index : int
        The partition index.
    storage_options : dict, optional
        Passed to fsspec.

    Returns
    -------
    str or None
        The file written, or None when ``frame`` is empty.
    """
    return RunLayout.for_output(path, storage_options=storage_options).write_quarantine(
        frame, index
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def lease_timeout() -> float:
    """``curator.execution.lease-timeout``: how long a silent lease holder counts as alive."""
    from dask.utils import parse_timedelta

    return float(parse_timedelta(config.get("execution.lease-timeout", "300s"), default="s"))


class OutputLease:
    """An exclusive lease on an output directory, held for the length of one run.

    The lease is ``<meta>/_lease.json``: the run id, host, process id, start time and a
    heartbeat refreshed every ``timeout_s / 4`` seconds by a thread. A second job finding a
    live lease refuses with :class:`OutputInUseError` naming the holder. A lease is stale,
    and taken over with a warning, when its process is gone (same host) or its heartbeat is
    older than ``timeout_s`` (a killed job elsewhere).

    Use as a context manager::

        with OutputLease(layout, run_id, timeout_s=300):
            ...  # write the run's files
    """

    def __init__(
        self, layout: RunLayout, run_id: str, timeout_s: float = 300.0, what: str = "output"
    ) -> None:
        self.layout = layout
        self.run_id = run_id
        self.timeout_s = float(timeout_s)
        self.what = what  # the directory's role, in messages (a dedup cache holds one too)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self, started: float) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": started,
            "heartbeat": time.time(),
        }

    def stale_reason(self, holder: dict[str, Any]) -> str | None:
        """Why the lease ``holder`` is stale, or None if its job may still be running."""
        pid = holder.get("pid")
        here = holder.get("host") == socket.gethostname()
        if here and isinstance(pid, int) and not _pid_alive(pid):
            return f"its process {pid} on {holder.get('host')} is gone"
        age = time.time() - float(holder.get("heartbeat") or 0)
        if age > self.timeout_s:
            return f"no heartbeat for {age:.0f} s (lease timeout {self.timeout_s:.0f} s)"
        return None

    def _refuse(self, holder: dict[str, Any]) -> OutputInUseError:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder["started"])))
        return OutputInUseError(
            f"{self.what} {self.layout.root} is in use by run {holder.get('run_id')} "
            f"(host {holder.get('host')}, pid {holder.get('pid')}, since {since}); wait for "
            f"it to finish, or write elsewhere. If that job is dead, its lease expires after "
            f"{self.timeout_s:.0f} s without heartbeat, or remove {self.layout.lease_path}"
        )

    def acquire(self) -> OutputLease:
        """Take the lease or raise :class:`OutputInUseError`."""
        path = self.layout.lease_path
        holder = self.layout.read_json(path)
        if isinstance(holder, dict) and holder.get("run_id") != self.run_id:
            reason = self.stale_reason(holder)
            if reason is None:
                raise self._refuse(holder)
            logger.warning(
                "taking over the lease on %s of run %s: %s",
                self.layout.root,
                holder.get("run_id"),
                reason,
            )
            self.layout.remove(path)
        self.layout.check_bucket()
        record = self._record(time.time())
        fs, p = self.layout.fs(path)
        data = json.dumps(record).encode("utf-8")
        if is_object_store(fs):
            try:  # no exclusive create on object stores: write, then check who won below
                fs.pipe_file(p, data)
            except FileNotFoundError as err:  # s3fs: no bucket, and no name in the message
                raise FileNotFoundError(
                    errno.ENOENT, f"could not write {path}: {err} (does the bucket exist?)"
                ) from err
        else:
            fs.makedirs(p.rsplit("/", 1)[0], exist_ok=True)
            try:
                fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self.layout.read_json(path) or {}
                raise self._refuse({"started": time.time(), **holder}) from None
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        holder = self.layout.read_json(path) or {}
        if holder.get("run_id") != self.run_id:
            raise self._refuse({"started": time.time(), **holder})
        self._thread = threading.Thread(
            target=self._beat, args=(record["started"],), name="curator-lease", daemon=True
        )
        self._thread.start()
        return self

    def _beat(self, started: float) -> None:
        while not self._stop.wait(self.timeout_s / 4):
            try:
                self.layout.write_json(self.layout.lease_path, self._record(started))
            except Exception:  # a missed beat is retried; the lease lasts timeout_s
                logger.debug("lease heartbeat failed", exc_info=True)

    def release(self) -> None:
        """Stop the heartbeat and remove the lease if it is still this run's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        holder = self.layout.read_json(self.layout.lease_path)
        if isinstance(holder, dict) and holder.get("run_id") == self.run_id:
            self.layout.remove(self.layout.lease_path)

    def __enter__(self) -> OutputLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
