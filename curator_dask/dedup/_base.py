"""The skeleton every dedup workflow stands on.

One input (the io readers' listing and format choice, or a dask frame), one fingerprint of it
per run, one step-cache convention (a step directory named by a hash of what the step depends
on, a ``_DONE`` marker, resume), one way to write a frame (a Parquet file per partition,
written atomically, with a progress line), one result type and one progress reporter. Every
path is resolved on the client to an absolute path or a URL, and every file goes through
fsspec with the workflow's ``storage_options``, so local disks and ``s3://`` behave the same.
"""

from __future__ import annotations

import contextlib
import html
import json
import logging
import os
import posixpath
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from dask.base import tokenize
from dask.callbacks import Callback
from fsspec.core import url_to_fs

from curator_dask import config, sizing
from curator_dask.errors import check_columns
from curator_dask.io import formats
from curator_dask.io.layout import RunLayout
from curator_dask.io.layout import join as join  # io's path rules, for the workflows
from curator_dask.io.layout import resolve_path as resolve_path
from curator_dask.progress import say

_OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "abfs", "az", "adl", "oss"}
_COMPRESSION = (".gz", ".zst", ".zstd", ".bz2", ".xz")


# -- paths and files -------------------------------------------------------------------------
def get_fs(path: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """``(filesystem, path within it)``."""
    return url_to_fs(path, **(storage_options or {}))


def _is_object_store(fs: Any) -> bool:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return bool(protocols & _OBJECT_STORES)


def _full(fs: Any, name: str, like: str) -> str:
    return fs.unstrip_protocol(name) if "://" in like else name


def layout(directory: str, storage_options: dict[str, Any] | None = None) -> RunLayout:
    """The io run layout of a dedup output or step directory (Parquet part files)."""
    return RunLayout(directory, ".parquet", storage_options)


def write_bytes_atomic(data: bytes, path: str, storage_options: dict[str, Any] | None) -> None:
    """Write ``data`` to ``path`` so that it appears whole or not at all (io's atomic write:
    a temporary name and a rename on disks, a direct write on object stores)."""
    RunLayout(path, storage_options=storage_options).write_bytes(path, data)


def write_parquet_atomic(
    frame: pd.DataFrame,
    path: str,
    storage_options: dict[str, Any] | None = None,
    schema: pa.Schema | None = None,
    row_group_size: int | None = None,
) -> str:
    """Write ``frame`` as one Parquet file at ``path``, atomically (see above)."""
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=row_group_size)
    write_bytes_atomic(sink.getvalue().to_pybytes(), path, storage_options)
    return path


def parquet_files(directory: str, storage_options: dict[str, Any] | None) -> list[str]:
    """The ``*.parquet`` files directly in ``directory`` (not hidden, not temporary), sorted."""
    fs, d = get_fs(directory, storage_options)
    if not fs.isdir(d):
        return []
    names = [
        n
        for n in fs.ls(d, detail=False)
        if n.endswith(".parquet") and not posixpath.basename(n).startswith(("_", "."))
    ]
    return sorted(_full(fs, n, directory) for n in names)


def rows_per_file(files: Sequence[str], storage_options: dict[str, Any] | None) -> list[int]:
    """Rows in each of the Parquet ``files`` (from their footers)."""
    out = []
    for f in files:
        fs, p = get_fs(f, storage_options)
        with fs.open(p, "rb") as fh:
            out.append(pq.ParquetFile(fh).metadata.num_rows)
    return out


def count_rows(files: Sequence[str], storage_options: dict[str, Any] | None) -> int:
    """Rows in Parquet ``files`` (from their footers)."""
    return sum(rows_per_file(files, storage_options))


@dataclass(frozen=True)
class _ReadPart:
    meta: pd.DataFrame
    columns: list[str] | None
    storage_options: dict[str, Any] | None

    def __call__(self, path: str) -> pd.DataFrame:
        fs, p = get_fs(path, self.storage_options)
        with fs.open(p, "rb") as fh:
            frame = pq.read_table(fh, columns=self.columns).to_pandas()
        return self.conform(frame)

    def conform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with ``meta``'s columns, in its order and types."""
        out = {}
        for name, dtype in self.meta.dtypes.items():
            col = frame[name] if name in frame else pd.Series(None, index=frame.index)
            with contextlib.suppress(TypeError, ValueError):
                col = col.astype(dtype)
            out[name] = col
        return pd.DataFrame(out, index=frame.index)


@dataclass(frozen=True)
class _ReadRowGroup:
    meta: pd.DataFrame
    columns: list[str] | None
    key: str
    storage_options: dict[str, Any] | None

    def __call__(self, piece: tuple[str, int]) -> pd.DataFrame:
        path, group = piece
        fs, p = get_fs(path, self.storage_options)
        with fs.open(p, "rb") as fh:
            frame = pq.ParquetFile(fh).read_row_group(group, columns=self.columns).to_pandas()
        frame = _ReadPart(self.meta, self.columns, self.storage_options).conform(frame)
        return frame.set_index(self.key)


def read_row_groups_by(
    files: Sequence[str],
    key: str,
    meta: pd.DataFrame,
    storage_options: dict[str, Any] | None = None,
    columns: list[str] | None = None,
) -> Any:
    """A lazy frame with one partition per row group of ``files``, indexed by the int64
    column ``key``, with divisions from the row groups' statistics, so that rows can be
    routed to the piece that holds a key (``set_index(key, divisions=df.divisions)``). The
    files' ``key`` must increase from row group to row group, file after file."""
    pieces: list[tuple[str, int]] = []
    lows: list[int] = []
    high = 0
    for f in files:
        fs, p = get_fs(f, storage_options)
        with fs.open(p, "rb") as fh:
            md = pq.ParquetFile(fh).metadata
        col = md.schema.to_arrow_schema().get_field_index(key)
        for g in range(md.num_row_groups):
            stats = md.row_group(g).column(col).statistics
            if md.row_group(g).num_rows == 0 or stats is None or not stats.has_min_max:
                continue
            pieces.append((f, g))
            lows.append(int(stats.min))
            high = int(stats.max)
    cols = None if columns is None else list(dict.fromkeys([*columns, key]))
    if cols is not None:
        meta = meta[cols]
    if not pieces:
        return dd.from_pandas(meta.set_index(key), npartitions=1)
    return dd.from_map(
        _ReadRowGroup(meta, cols, key, storage_options),
        pieces,
        meta=meta.set_index(key),
        divisions=(*lows, high),
        enforce_metadata=False,
    )


def read_parts(
    files: Sequence[str],
    meta: pd.DataFrame,
    storage_options: dict[str, Any] | None = None,
    columns: list[str] | None = None,
) -> Any:
    """A lazy frame with exactly one partition per file of ``files``, in their order, typed
    as ``meta`` (so that partition ``i`` is the step's partition ``i``, whatever the row
    groups)."""
    if columns is not None:
        meta = meta[columns]
    if not files:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(
        _ReadPart(meta, columns, storage_options), list(files), meta=meta, enforce_metadata=False
    )


def read_parquet_dir(
    directory: str,
    storage_options: dict[str, Any] | None,
    meta: pd.DataFrame,
    columns: list[str] | None = None,
) -> Any:
    """A lazy frame over the part files of ``directory``, one partition per file, typed as
    ``meta`` (one empty partition if none). A step's partitions stay the size it wrote them
    (``dd.read_parquet`` would join small files into larger partitions). With files, the
    types are those of the first file's schema, as ``dd.read_parquet`` gives them."""
    files = parquet_files(directory, storage_options)
    if files:
        fs, p = get_fs(files[0], storage_options)
        with fs.open(p, "rb") as fh:
            meta = pq.read_schema(fh).empty_table().to_pandas()
    return read_parts(files, meta, storage_options, columns)


def remove_tree(path: str, storage_options: dict[str, Any] | None) -> None:
    """Delete a directory (or object prefix) if it exists."""
    fs, p = get_fs(path, storage_options)
    if fs.exists(p):
        fs.rm(p, recursive=True)


# -- the input --------------------------------------------------------------------------------
@dataclass
class DedupInput:
    """A workflow's input, resolved once on the client: a reader over files, or a dask frame.

    ``quarantine_path`` is where the reader sets aside bad records (under the run's cache or
    output directory, never the working directory).
    """

    paths: list[str] | None
    df: Any
    text_column: str
    id_column: str
    blocksize: int | str | None
    input_format: str | None
    storage_options: dict[str, Any] | None
    quarantine_path: str | None = None
    client: Any = field(default=None, repr=False)
    # the column a frame input must have in place of the text (semantic dedup's given
    # embeddings: the text is then never read)
    content_column: str | None = None
    _reader: Any = field(default=None, init=False, repr=False)
    _frame: Any = field(default=None, init=False, repr=False)
    _fingerprint: str | None = field(default=None, init=False, repr=False)

    @classmethod
    def of(cls, workflow: Any, quarantine_path: str | None = None) -> DedupInput:
        """The input of a workflow (its ``input_path``/``df`` and reader fields)."""
        df = getattr(workflow, "df", None)
        raw = getattr(workflow, "input_path", None)
        if df is None and raw is None:
            raise ValueError("give input_path or df")
        paths = None
        if df is None:
            assert raw is not None
            items = [raw] if isinstance(raw, (str, os.PathLike)) else list(raw)
            paths = [resolve_path(p) for p in items]
        fmt = getattr(workflow, "input_format", None)
        if fmt is not None:
            formats.reader_class(fmt)  # a registered format (ValueError naming them)
        return cls(
            paths,
            df,
            workflow.text_column,
            workflow.id_column,
            getattr(workflow, "blocksize", None),
            fmt,
            getattr(workflow, "storage_options", None),
            quarantine_path,
            active_client(getattr(workflow, "client", None)),
            getattr(workflow, "embedding_column", None),
        )

    def reader(self) -> Any:
        """The io reader of the files (None for a dask frame input); made once.

        Without ``blocksize`` the partitions follow the workers' memory limit and number
        (:func:`curator_dask.sizing.default_blocksize`), decided on the client when the
        reader lists the input (within :func:`curator_dask.sizing.workers_of` this input's
        client).
        """
        if self.paths is None:
            return None
        if self._reader is not None and self._reader.quarantine_path == self.quarantine_path:
            return self._reader
        fmt = self.input_format or formats.choose_format(self.paths, self.storage_options)
        self.input_format = fmt
        self._reader = formats.open_reader(
            self.paths,
            fmt,
            text_column=self.text_column,
            id_column=self.id_column,
            blocksize=self.blocksize,
            quarantine_path=self.quarantine_path,
            storage_options=self.storage_options,
        )
        return self._reader

    def check_columns(self) -> None:
        """Raise :class:`~curator_dask.errors.ColumnError` when the input lacks the text or id
        column (a named id column; the default ``"id"`` may be absent in files)."""
        if self.df is not None:
            needed = self.content_column or self.text_column
            check_columns(list(self.df.columns), "the dataframe", needed, self.id_column)
        else:
            with sizing.workers_of(self.client):
                self.reader().check_columns()

    def frame(self) -> Any:
        """The input as a lazy dask frame (built once)."""
        if self._frame is None:
            if self.df is not None:
                self.check_columns()
                self._frame = self.df
            else:
                with sizing.workers_of(self.client):
                    self._frame = self.reader().to_dask()
        return self._frame

    def fingerprint(self) -> str:
        """A key of the input, computed once: the frame's dask token, or each partition's
        :meth:`~curator_dask.io.base.Reader.fingerprint` (io's one rule of "has this input
        changed", the one a resumed pipeline follows: paths, range, and each file's size and
        etag or modification time as listed) with the format and columns."""
        if self._fingerprint is None:
            if self.df is not None:
                self._fingerprint = tokenize(self.df)
            else:
                reader = self.reader()
                with sizing.workers_of(self.client):
                    specs = reader.partitions()
                self._fingerprint = tokenize(
                    [(spec.index, reader.fingerprint(spec)) for spec in specs],
                    self.input_format,
                    self.text_column,
                    self.id_column,
                )
        return self._fingerprint

    def input_locations(self) -> list[str]:
        """The files and directories read (as a reader gives them: the paths, resolved);
        none for a frame."""
        return list(self.paths or [])

    def describe(self) -> Any:
        """What to write in a manifest: the paths, or ``"<dask dataframe>"``."""
        return self.paths if self.paths is not None else "<dask dataframe>"


# -- steps ------------------------------------------------------------------------------------
@dataclass
class StepCache:
    """Step directories under a root: ``<root>/<name>-<key>/``, finished when ``_DONE`` exists.

    A step directory without its marker holds a partial result and is cleared before the step
    runs again; one with it is reused as is (resume).
    """

    root: str
    storage_options: dict[str, Any] | None = None

    def dir(self, name: str, *depends_on: Any) -> str:
        """The directory of step ``name`` for what it ``depends_on``."""
        return join(self.root, f"{name}-{tokenize(*depends_on)[:16]}")

    def is_done(self, directory: str) -> bool:
        """True when ``directory`` holds the marker."""
        fs, d = get_fs(directory, self.storage_options)
        return bool(fs.exists(join(d, "_DONE")))

    def read_done(self, directory: str) -> dict[str, Any]:
        """The JSON of the marker."""
        fs, d = get_fs(directory, self.storage_options)
        return dict(json.loads(fs.cat_file(join(d, "_DONE"))))

    def mark_done(self, directory: str, info: dict[str, Any] | None = None) -> None:
        """Write the marker (atomically)."""
        write_bytes_atomic(
            json.dumps(info or {}, default=str).encode(), join(directory, "_DONE"),
            self.storage_options,
        )  # fmt: skip

    def clear(self, directory: str) -> None:
        """Delete a partial step directory."""
        remove_tree(directory, self.storage_options)


# -- progress ---------------------------------------------------------------------------------
class Reporter:
    """Progress a person can follow on stderr: steps, a line per step, a summary table.

    Lines are printed when ``curator.dedup.progress`` is true (default), at most one
    progress line a second per step.
    """

    def __init__(self, name: str, client: Any = None, stream: TextIO | None = None) -> None:
        self.name = name
        self.client = client
        self.enabled = bool(config.get("dedup.progress", True))
        self.stream = stream or sys.stderr
        self.seconds: dict[str, float] = {}
        self.t0 = time.perf_counter()

    def say(self, text: str) -> None:
        """Say one line, as pipelines do (:func:`curator_dask.progress.say`)."""
        if self.enabled:
            say(f"{self.name}: {text}", self.stream)

    def start(self) -> None:
        """Announce the run (with the dashboard link of a distributed client)."""
        from curator_dask.cluster import dashboard_link

        link = dashboard_link(self.client)
        self.say(f"started{f'; dashboard {link}' if link else ''}")

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time a step, printing its name as it starts and its time as it ends."""
        self.say(f"step {name} ...")
        t = time.perf_counter()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t
        self.say(f"step {name} done in {self.seconds[name]:.1f}s")

    def counter(self, label: str, total: int, unit: str) -> _Counter:
        """A done/total counter printing rate and ETA."""
        return _Counter(self, label, total, unit)

    def compute(
        self, tasks: Sequence[Any], label: str, unit: str = "partitions", docs: bool = False
    ) -> list[Any]:
        """Compute dask ``tasks`` (delayed objects), printing ``done/total`` as they finish.

        With ``docs``, each task's result is a frame with a ``rows`` column, and the line
        also counts the documents done and their rate.
        """
        tasks = list(tasks)
        counter = self.counter(label, len(tasks), unit)
        if not tasks:
            return []
        client = self.client
        if client is not None:
            from distributed import as_completed

            futures = client.compute(tasks)
            for done in as_completed(futures):
                counter.tick(rows=_rows(done.result()) if docs else None)
            return list(client.gather(futures))
        keys = {t.key for t in tasks}
        with _LocalProgress(keys, counter, docs):
            return list(dask.compute(*tasks))

    def total(self) -> float:
        """Seconds since :meth:`start`."""
        return time.perf_counter() - self.t0


def monitor(hook: str, *args: Any) -> None:
    """Call ``curator_dask.monitoring.hooks.<hook>(*args)`` (live metrics); never fails a run."""
    try:
        from curator_dask.monitoring import hooks

        getattr(hooks, hook)(*args)
    except Exception:
        logging.getLogger("curator_dask.dedup").debug("hook %s failed", hook, exc_info=True)


class _Counter:
    def __init__(self, reporter: Reporter, label: str, total: int, unit: str) -> None:
        self.r, self.label, self.total, self.unit = reporter, label, total, unit
        self.done = 0
        self.t0 = time.perf_counter()
        self.last = 0.0
        monitor("on_dedup_progress", reporter.name, label, unit, 0)

    def tick(self, n: int = 1, rows: int | None = None) -> None:
        self.done += n
        if rows is not None:
            self.rows = getattr(self, "rows", 0) + rows
        monitor("on_dedup_progress", self.r.name, self.label, self.unit, n)
        now = time.perf_counter()
        if now - self.last < 1.0 and self.done < self.total:
            return
        self.last = now
        elapsed = max(now - self.t0, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        docs = getattr(self, "rows", None)
        said = "" if docs is None else f", {docs:,} docs ({docs / elapsed:,.1f} docs/s)"
        self.r.say(
            f"  {self.label}: {self.done}/{self.total} {self.unit}{said}, "
            f"{rate:.2f}/s, elapsed {elapsed:.0f}s, eta {eta:.0f}s"
        )


class _LocalProgress(Callback):
    """Counts finished output tasks under the local (threaded / synchronous) schedulers."""

    def __init__(self, keys: set[Any], counter: _Counter, docs: bool = False) -> None:
        super().__init__()
        self.keys = keys
        self.counter = counter
        self.docs = docs

    def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, id: Any) -> None:
        if key in self.keys:
            self.counter.tick(rows=_rows(result) if self.docs else None)


def _rows(result: Any) -> int | None:
    """The ``rows`` a task's result frame says it wrote (None when it says nothing)."""
    try:
        return int(result["rows"].sum())
    except Exception:  # not such a frame: the line counts partitions only
        return None


def active_client(client: Any = None) -> Any:
    """``client``, else the active distributed client, else None (local scheduler)."""
    if client is not None:
        return client
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def release_arrow_memory() -> None:
    """Give the pages Arrow's allocator freed back to the system (it keeps them for reuse,
    which makes a worker's RSS creep up over many partitions)."""
    pa.default_memory_pool().release_unused()


# -- writing frames ---------------------------------------------------------------------------
def _write_part(
    part: Any, directory: str, storage_options: dict[str, Any] | None, schema: pa.Schema | None,
    partition_info: dict[str, Any] | None = None,
) -> pd.DataFrame:  # fmt: skip
    from curator_dask import _backend
    from curator_dask.io.writers import frame_schema

    part = _backend.to_pandas(part)
    i = (partition_info or {}).get("number", 0)
    if schema is None:  # the partition's own types; write_frame unifies the files after
        schema = frame_schema(part)
    write_parquet_atomic(part, layout(directory).part_path(i), storage_options, schema)
    release_arrow_memory()
    return pd.DataFrame({"rows": [len(part)], "schema": [schema.serialize().to_pybytes()]})


def _conform_part(path: str, schema: pa.Schema, storage_options: dict[str, Any] | None) -> None:
    from curator_dask.io.writers import conform_table

    fs, f = get_fs(path, storage_options)
    with fs.open(f, "rb") as fh:
        table = pq.read_table(fh)
    sink = pa.BufferOutputStream()
    pq.write_table(conform_table(table, schema, path), sink)
    write_bytes_atomic(sink.getvalue().to_pybytes(), path, storage_options)


def write_frame(
    df: Any,
    directory: str,
    reporter: Reporter,
    label: str,
    storage_options: dict[str, Any] | None = None,
    schema: pa.Schema | None = None,
    unify: bool = False,
) -> int:
    """Write ``df`` as ``<directory>/part-<i>.parquet`` (one file a partition, each atomic).

    Every file has ``schema``, by default that of ``df``'s meta (empty partitions included).
    With ``unify``, each partition is written with its own types and the files whose schema
    differs from the union of all (io's rule for a run's one schema,
    :func:`~curator_dask.io.writers.unify_schemas`) are rewritten with it: documents whose
    column types differ between input files. Part files left by an earlier attempt are
    removed first. Returns the number of rows written.
    """
    from curator_dask import _backend
    from curator_dask.io.writers import unify_schemas

    remove_tree(directory, storage_options)
    if schema is None and not unify:
        meta = _backend.to_pandas(df._meta)
        schema = pa.Schema.from_pandas(meta, preserve_index=False)
    counts = df.map_partitions(
        _write_part, directory, storage_options, schema,
        meta=pd.DataFrame({"rows": pd.Series([], dtype="int64"), "schema": []}),
    )  # fmt: skip
    parts = reporter.compute(counts.to_delayed(), label)
    if unify:
        schemas = [pa.ipc.read_schema(pa.py_buffer(p["schema"].iloc[0])) for p in parts]
        one = unify_schemas(schemas)
        paths = [layout(directory).part_path(i) for i in range(len(parts))]
        todo = [
            dask.delayed(_conform_part)(path, one, storage_options)
            for path, s in zip(paths, schemas, strict=True)
            if not s.remove_metadata().equals(one)
        ]
        dask.compute(*todo)
    return int(sum(int(p["rows"].sum()) for p in parts))


@dataclass
class Staged:
    """An output directory written but not yet in place (see :func:`stage`)."""

    final: str
    tmp: str | None
    rows: int


def stage(
    df: Any,
    output_path: str,
    name: str,
    reporter: Reporter,
    storage_options: dict[str, Any] | None = None,
    unify: bool = False,
) -> Staged:
    """Write ``df`` for ``<output_path>/<name>/`` without putting it in place yet.

    On a local disk the part files go to a hidden temporary directory, which
    :func:`commit` moves to ``<name>/``. On an object store (no rename) the old objects go
    first and each new part object appears whole; an earlier run's ``<name>.curator/_SUCCESS``
    (beside it) is removed now. ``unify``: see :func:`write_frame`.
    """
    final = join(output_path, name)
    fs, _ = get_fs(final, storage_options)
    remove_tree(layout(final).success_path, storage_options)  # an earlier run's marker
    if _is_object_store(fs):
        rows = write_frame(df, final, reporter, f"write {name}", storage_options, unify=unify)
        return Staged(final, None, rows)
    tmp = join(output_path, f".{name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        rows = write_frame(df, tmp, reporter, f"write {name}", storage_options, unify=unify)
    except BaseException:
        remove_tree(tmp, storage_options)
        raise
    return Staged(final, tmp, rows)


def commit(staged: Staged, storage_options: dict[str, Any] | None = None) -> tuple[str, int]:
    """Put a staged directory in place, ``<name>.curator/_SUCCESS`` last; (directory, rows)."""
    final = staged.final
    if staged.tmp is not None:
        fs, f = get_fs(final, storage_options)
        try:
            remove_tree(final, storage_options)
            _, t = get_fs(staged.tmp, storage_options)
            fs.mv(t, f, recursive=True)
        finally:
            remove_tree(staged.tmp, storage_options)
    write_bytes_atomic(
        json.dumps({"rows": staged.rows}).encode(), layout(final).success_path, storage_options
    )
    return final, staged.rows


def discard(staged: Staged, storage_options: dict[str, Any] | None = None) -> None:
    """Remove a staged directory that will not be put in place."""
    if staged.tmp is not None:
        remove_tree(staged.tmp, storage_options)


# -- the result -------------------------------------------------------------------------------
@dataclass
class DedupResult:
    """What a dedup workflow's ``run()`` found and wrote.

    ``documents`` were deduplicated (read and valid); ``quarantined`` records were set aside
    by the reader (see ``paths["quarantine"]``); ``removed`` documents are listed in
    ``paths["removed_ids"]``, so ``documents + quarantined == kept + removed + quarantined``
    accounts for every record read. ``seconds`` holds each step's time and ``total``.
    ``result["removed"]`` works like the summary dict of earlier versions.
    """

    method: str
    documents: int
    removed: int
    duplicate_groups: int
    quarantined: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        """Documents that remain."""
        return self.documents - self.removed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: counts, ``seconds``, ``paths``, ``stats``, and each path and
        detail also at the top level (``removed_ids``, ``cache_dir``, ...)."""
        out: dict[str, Any] = {
            "method": self.method,
            "documents": self.documents,
            "quarantined": self.quarantined,
            "removed": self.removed,
            "kept": self.kept,
            "duplicate_groups": self.duplicate_groups,
            "seconds": dict(self.seconds),
            "paths": dict(self.paths),
            "stats": dict(self.stats),
        }
        for k, v in {**self.paths, **self.details}.items():
            out.setdefault(k, v)
        return out

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def get(self, key: str, default: Any = None) -> Any:
        """``to_dict().get(key, default)``."""
        return self.to_dict().get(key, default)

    def _rows(self) -> list[tuple[str, str]]:
        rows = [
            ("documents read", f"{self.documents + self.quarantined:,}"),
            ("quarantined", f"{self.quarantined:,}"),
            ("duplicate groups", f"{self.duplicate_groups:,}"),
            ("removed", f"{self.removed:,}"),
            ("kept", f"{self.kept:,}"),
        ]
        rows += [(k, str(v)) for k, v in self.details.items()]
        rows += [(f"{k} (s)", f"{v:.1f}") for k, v in self.seconds.items()]
        rows += [(k, v) for k, v in self.paths.items()]
        return rows

    def __repr__(self) -> str:
        rows = self._rows()
        w = max(len(k) for k, _ in rows)
        lines = [f"DedupResult ({self.method})"] + [f"  {k:<{w}}  {v}" for k, v in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self._rows()
        )
        return f"<b>DedupResult ({html.escape(self.method)})</b><table>{cells}</table>"


def count_quarantine(path: str | None, storage_options: dict[str, Any] | None) -> int:
    """Records in the quarantine files under ``path`` (0 if none)."""
    if path is None:
        return 0
    from curator_dask.io import read_quarantine

    return len(read_quarantine(path, storage_options))


def copy_quarantine(
    source: str | None, output_path: str, storage_options: dict[str, Any] | None
) -> tuple[str | None, int]:
    """Copy the quarantine files of ``source`` to ``<output_path>/_quarantine/``.

    Returns that directory (None when nothing was quarantined) and the number of records.
    """
    dest = RunLayout.for_output(output_path, storage_options=storage_options).quarantine_dir
    fs, d = get_fs(dest, storage_options)
    for stale in fs.glob(join(d, "part-*.jsonl")) if fs.isdir(d) else []:
        fs.rm(stale)  # an earlier run's quarantine files (only those names)
    n = count_quarantine(source, storage_options)
    if not n or source is None:
        return None, 0
    fs, s = get_fs(source, storage_options)
    for name in sorted(fs.glob(join(s, "part-*.jsonl"))):
        data = fs.cat_file(name)
        write_bytes_atomic(data, join(dest, posixpath.basename(name)), storage_options)
    return dest, n
