"""The run layout: the one place that names and writes every file a run leaves.

An output directory holds the documents and, apart from them, the run's metadata::

    <output>/part-00000.jsonl          the documents, one file per partition
    <output>/part-00001.jsonl
    <output>/<META_DIR>/_SUCCESS       the completion marker (JSON of the run summary)
    <output>/<META_DIR>/_stats.json    the run's statistics
    <output>/<META_DIR>/_stats/        one statistics record per written partition
    <output>/<META_DIR>/_quarantine/   the quarantined input records, one file per partition
    <output>/<META_DIR>/_work/         batch mode's intermediate Parquet files
    <output>/<META_DIR>/_report.html   the HTML report, and _timeline.parquet (monitoring)
    <output>/<META_DIR>/_runs.json     the runs that wrote partitions (monitoring)

with ``META_DIR = ".curator"``: only document files sit at the top, and every reader of
datasets (dask, pandas, pyarrow, HF ``datasets``, Spark) skips the metadata folder.

Writers, executors and workflows ask a :class:`RunLayout` for these names and write through
it (atomically, on local disks and object stores alike); none formats a path of its own.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from curator_dask import config
from curator_dask.io._files import get_fs, is_object_store, part_name, write_bytes
from curator_dask.io.base import empty_quarantine
from curator_dask.io.quarantine import write_quarantine_file

#: The folder, under an output directory, that holds everything but the documents. A leading
#: ``.`` is the one convention dask, pandas and pyarrow (``.``/``_``), Spark (``.``/``_``),
#: HF ``datasets`` (``.`` and ``__``; a ``_SUCCESS`` file or ``_x/`` folder breaks
#: ``load_dataset``) and shell globs all skip, so the output reads back as the documents alone.
META_DIR = ".curator"
#: Names of the metadata files and folders inside :data:`META_DIR`.
SUCCESS = "_SUCCESS"
RUN_STATS = "_stats.json"
STATS_DIR = "_stats"
QUARANTINE_DIR = "_quarantine"
WORK_DIR = "_work"
REPORT = "_report.html"
TIMELINE = "_timeline.parquet"

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


def run_metadata_dir(path: str | os.PathLike[str]) -> str:
    """The folder holding a run's statistics: ``<path>/.curator`` if it has them, else ``path``.

    Lets a command given either the output directory or its metadata folder find the files.
    """
    path = os.fspath(path)
    meta = join(path, META_DIR)
    fs, p = get_fs(join(meta, RUN_STATS), None)
    return meta if fs.exists(p) else path


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
        """The folder holding everything but the documents."""
        return join(self.root, META_DIR)

    def part_path(self, index: int) -> str:
        """The document file of partition ``index``."""
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

    def write_quarantine(self, frame: pd.DataFrame | None, index: int) -> str | None:
        """Write partition ``index``'s quarantine records (an empty frame removes a stale file).

        Returns the file written, or None when there was nothing to quarantine.
        """
        if frame is None:
            frame = empty_quarantine()
        return write_quarantine_file(frame, self.quarantine_dir, index, self.storage_options)


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
        Rows with the columns of :data:`~curator_dask.io.base.QUARANTINE_COLUMNS`, as in
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
