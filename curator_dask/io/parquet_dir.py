"""Directories of Parquet part files: list, count, read, write and publish them.

What the dedup workflows keep between steps and leave as outputs is a directory of
``part-<i>.parquet`` files (one a partition), written atomically through the directory's
:class:`~curator_dask.io.layout.RunLayout`. :func:`write_frame` writes a dask frame so, with
the run's one schema; :func:`stage` and :func:`commit` publish a directory whole (a hidden
temporary directory renamed into place on a disk, objects that each appear whole on an object
store; ``<dir>.curator/_SUCCESS`` last). :func:`read_parts` and :func:`read_row_groups_by`
read such a directory back with one partition per file or per row group. Every path goes
through :func:`get_fs` with the caller's ``storage_options``: local disks and ``s3://`` alike.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import dask
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from curator_dask.io._files import atomic_target, get_fs, is_object_store
from curator_dask.io.layout import RunLayout, join
from curator_dask.stage import release_arrow_memory  # the one release (pipelines' stages too)


class Progress(Protocol):
    """What computes a write's tasks while showing them (a dedup workflow's reporter)."""

    def compute(self, tasks: Sequence[Any], label: str) -> list[Any]:
        """Compute ``tasks`` (dask delayed objects); their results in order."""
        ...


# -- files -------------------------------------------------------------------------------------
def _full(fs: Any, name: str, like: str) -> str:
    return fs.unstrip_protocol(name) if "://" in like else name


def layout(directory: str, storage_options: dict[str, Any] | None = None) -> RunLayout:
    """The run layout of a directory of Parquet part files (its names and atomic writes)."""
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
    return write_table_atomic(table, path, storage_options, row_group_size=row_group_size)


def write_table_atomic(
    table: pa.Table, path: str, storage_options: dict[str, Any] | None = None, **options: Any
) -> str:
    """Write ``table`` as one Parquet file at ``path`` (``options``: ``pq.write_table``'s),
    atomically, straight to the file: never the whole file in memory (before, a buffer and
    a copy of it as bytes)."""
    fs, p = get_fs(path, storage_options)
    if not is_object_store(fs):  # object stores have no folders to create
        fs.makedirs(posixpath.dirname(p), exist_ok=True)
    with atomic_target(fs, p) as target:
        pq.write_table(table, target, **options)
    return path


def read_table(source: Any, columns: Sequence[str] | None = None) -> pa.Table:
    """One Parquet file (an open file or a path) as an Arrow table, ``columns`` only.

    ``pyarrow.parquet.read_table`` reads even one file through ``pyarrow.dataset``, whose
    import alone costs a small dedup run about 0.02 CPU-s and 3 MB; for one file without
    filters it reads what ``ParquetFile.read`` does (pyarrow itself falls back to it).
    """
    return pq.ParquetFile(source).read(columns=None if columns is None else list(columns))


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
            frame = read_table(fh, self.columns).to_pandas()
        release_arrow_memory()  # the file's pages and decoded buffers, freed by now
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
    import dask.dataframe as dd

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
    import dask.dataframe as dd

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
    return read_parts(files, _first_schema(files, meta, storage_options), storage_options, columns)


def _first_schema(
    files: Sequence[str], meta: pd.DataFrame, storage_options: dict[str, Any] | None
) -> pd.DataFrame:
    if files:
        fs, p = get_fs(files[0], storage_options)
        with fs.open(p, "rb") as fh:
            meta = pq.read_schema(fh).empty_table().to_pandas()
    return meta


def read_frames(
    directory: str,
    storage_options: dict[str, Any] | None,
    meta: pd.DataFrame,
    columns: list[str] | None = None,
) -> list[pd.DataFrame]:
    """What :func:`read_parquet_dir` reads, read now: one pandas frame per part file (one
    empty frame if none), typed alike (a dedup workflow's in-memory run)."""
    files = parquet_files(directory, storage_options)
    return read_part_frames(
        files, _first_schema(files, meta, storage_options), storage_options, columns
    )


def read_part_frames(
    files: Sequence[str],
    meta: pd.DataFrame,
    storage_options: dict[str, Any] | None = None,
    columns: list[str] | None = None,
) -> list[pd.DataFrame]:
    """What :func:`read_parts` reads, read now: one pandas frame per file, typed as
    ``meta`` (one empty frame if none)."""
    if columns is not None:
        meta = meta[columns]
    if not files:
        return [meta]
    read = _ReadPart(meta, columns, storage_options)
    return [read(f) for f in files]


def remove_tree(path: str, storage_options: dict[str, Any] | None) -> None:
    """Delete a directory (or object prefix) if it exists."""
    fs, p = get_fs(path, storage_options)
    if fs.exists(p):
        fs.rm(p, recursive=True)


# -- writing and publishing --------------------------------------------------------------------
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
        table = read_table(fh)
    write_table_atomic(conform_table(table, schema, path), path, storage_options)


def write_frame(
    df: Any,
    directory: str,
    progress: Progress | None,
    label: str,
    storage_options: dict[str, Any] | None = None,
    schema: pa.Schema | None = None,
    unify: bool = False,
) -> int:
    """Write ``df`` as ``<directory>/part-<i>.parquet`` (one file a partition, each atomic).

    ``df`` is a dask frame, or a list of pandas frames (its partitions, written in this
    process: a dedup workflow's in-memory run).

    Every file has ``schema``, by default that of ``df``'s meta (empty partitions included).
    With ``unify``, each partition is written with its own types and the files whose schema
    differs from the union of all (io's rule for a run's one schema,
    :func:`~curator_dask.io.writers.unify_schemas`) are rewritten with it: documents whose
    column types differ between input files. Part files left by an earlier attempt are
    removed first. Returns the number of rows written. ``progress`` computes the tasks
    (one per partition) and shows them under ``label``; None: ``dask.compute``.
    """
    from curator_dask import _backend
    from curator_dask.io.writers import unify_schemas

    remove_tree(directory, storage_options)
    in_memory = isinstance(df, list)
    if schema is None and not unify:
        meta = _backend.to_pandas(df[0].iloc[:0] if in_memory else df._meta)
        schema = pa.Schema.from_pandas(meta, preserve_index=False)
    if in_memory:  # pandas frames in this process: the same part files, no graph
        parts = [
            _write_part(part, directory, storage_options, schema, {"number": i})
            for i, part in enumerate(df)
        ]
    else:
        counts = df.map_partitions(
            _write_part, directory, storage_options, schema,
            meta=pd.DataFrame({"rows": pd.Series([], dtype="int64"), "schema": []}),
        )  # fmt: skip
        tasks = counts.to_delayed()
        parts = list(dask.compute(*tasks)) if progress is None else progress.compute(tasks, label)
    if unify:
        schemas = [pa.ipc.read_schema(pa.py_buffer(p["schema"].iloc[0])) for p in parts]
        one = unify_schemas(schemas)
        paths = [layout(directory).part_path(i) for i in range(len(parts))]
        todo = [
            path
            for path, s in zip(paths, schemas, strict=True)
            if not s.remove_metadata().equals(one)
        ]
        if in_memory:
            for path in todo:
                _conform_part(path, one, storage_options)
        else:
            dask.compute(*(dask.delayed(_conform_part)(p, one, storage_options) for p in todo))
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
    progress: Progress | None,
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
    if is_object_store(fs):
        rows = write_frame(df, final, progress, f"write {name}", storage_options, unify=unify)
        return Staged(final, None, rows)
    tmp = join(output_path, f".{name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        rows = write_frame(df, tmp, progress, f"write {name}", storage_options, unify=unify)
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


__all__ = [
    "Progress",
    "Staged",
    "commit",
    "count_rows",
    "discard",
    "get_fs",
    "is_object_store",
    "layout",
    "parquet_files",
    "read_frames",
    "read_parquet_dir",
    "read_part_frames",
    "read_parts",
    "read_row_groups_by",
    "release_arrow_memory",
    "remove_tree",
    "rows_per_file",
    "stage",
    "write_bytes_atomic",
    "write_frame",
    "write_parquet_atomic",
]
