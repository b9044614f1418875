"""Writers: one file per partition, atomic, resumable, with a completion marker.

Files in the output directory (the documents only; the rest goes to the metadata folder
beside it, ``<output>.curator/``, see :mod:`curator_dask.io.layout`):

- ``part-<index:05d>.jsonl`` / ``.parquet``: partition ``index``, written to
  ``<name>.tmp-<uuid>`` in the same directory and renamed, so a final name never holds a
  partial file (on S3 and other object stores the object is written directly: it becomes
  visible only when its upload completes);
- ``<output>.curator/_SUCCESS``: JSON of the run summary, written by :meth:`Writer.finish`;
- ``<output>.curator/_quarantine/part-<index:05d>.jsonl``: see
  :func:`~curator_dask.io.write_quarantine`.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from curator_dask import _backend
from curator_dask.io._files import atomic_output, is_object_store, part_name, path_error
from curator_dask.io.base import Writer, WriteResult
from curator_dask.io.layout import LEGACY_META_DIR, TMP_SUFFIX, RunLayout, join, part_index

MODES = ("overwrite", "resume", "error")
_JSONL_ROWS_PER_CHUNK = 20_000


@dataclass
class _FileWriter(Writer):
    """Shared logic of the JSONL and Parquet writers."""

    path: str
    mode: str = "overwrite"
    storage_options: dict[str, Any] | None = field(default=None, repr=False)
    per_input_file: bool = False

    suffix: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        self.path = str(self.path)
        self._layout: RunLayout | None = None
        self._names: tuple[str, ...] | None = None

    def name_partitions(self, names: list[str]) -> None:
        """Name the document files after the input files (``per_input_file=True``)."""
        self._names = tuple(names)
        self._layout = None

    # -- names -----------------------------------------------------------------------------
    def part_name(self, index: int) -> str:
        """The file name of partition ``index``, e.g. ``part-00042.jsonl``."""
        return part_name(index, self.suffix)

    @property
    def layout(self) -> RunLayout:
        """Where this writer's files go (resolved by :meth:`begin`, on the client)."""
        if self._layout is None:
            layout = RunLayout.for_output(self.path, self.suffix, self.storage_options)
            self._layout = replace(layout, names=self._names)
        return self._layout

    # -- the Writer contract ---------------------------------------------------------------
    def begin(self) -> None:
        """Prepare the output directory according to ``mode``.

        Resolves the output path (relative to this process' directory) for every task that
        follows. ``overwrite`` deletes part files, temporary files, the completion marker and
        quarantine files of an earlier run (other files are left alone); ``resume`` keeps
        finished part files and deletes temporary files and the marker; ``error`` raises
        :class:`FileExistsError` if the directory exists and is not empty.
        """
        self._layout = None
        layout = self.layout
        fs, root = layout.fs()
        layout.check_bucket()
        try:
            exists = fs.exists(root)
            if self.mode == "error" and exists and self._holds_files(layout):
                raise FileExistsError(
                    f"output directory {self.path} is not empty (mode='error'); use "
                    "mode='overwrite' to replace it or mode='resume' to continue it"
                )
            if exists:
                stale = self._stale(layout)
                if stale:
                    fs.rm(stale)
                legacy = join(root, LEGACY_META_DIR)  # an older version's metadata folder
                if self.mode == "overwrite" and fs.isdir(legacy):
                    fs.rm(legacy, recursive=True)
            fs.makedirs(root, exist_ok=True)
        except FileExistsError:
            raise
        except OSError as err:
            raise path_error(err, "prepare output directory", self.path) from err

    @staticmethod
    def _holds_files(layout: RunLayout) -> bool:
        # anything in the output, or in its metadata folder but this run's own lease
        fs, root = layout.fs()
        meta, lease = layout.fs(layout.meta_dir)[1], layout.fs(layout.lease_path)[1]
        others = list(fs.ls(root, detail=False))
        if fs.isdir(meta):
            others += [n for n in fs.ls(meta, detail=False) if n != lease]
        return bool(others)

    def _stale(self, layout: RunLayout) -> list[str]:
        fs, root = layout.fs()
        names = fs.ls(root, detail=False)
        out = [n for n in names if TMP_SUFFIX.search(n)]
        marker = layout.fs(layout.success_path)[1]
        if fs.exists(marker):
            out.append(marker)
        if self.mode == "overwrite":
            out += [
                n
                for n in names
                if part_index(n) is not None and posixpath.basename(n).endswith(self.suffix)
            ]
            qdir = layout.fs(layout.quarantine_dir)[1]
            if fs.isdir(qdir):
                out += [
                    n
                    for n in fs.ls(qdir, detail=False)
                    if (part_index(n) is not None and n.endswith(".jsonl")) or TMP_SUFFIX.search(n)
                ]
            removed = layout.fs(layout.removed_path(0))[1].rsplit("/", 1)[0]
            if fs.isdir(removed):  # what an earlier run's stages removed (keep_removed)
                out += [n for n in fs.ls(removed, detail=False) if part_index(n) is not None]
        return sorted(set(out))

    def is_done(self, index: int) -> bool:
        """True in ``resume`` mode when partition ``index`` was written by an earlier run.

        A part file exists only once it is complete (it is renamed into place), so its
        existence is enough; an empty partition has no file, and is done when its
        statistics record says it wrote 0 rows.
        """
        if self.mode != "resume":
            return False
        if self.layout.exists(self.layout.part_path(index)):
            return True
        record = self.layout.read_json(self.layout.partition_stats_path(index))
        return isinstance(record, dict) and record.get("rows") == 0

    def write_partition(self, part: Any, index: int) -> WriteResult:
        """Write one partition (pandas or cudf) to ``part-<index:05d>``, atomically.

        An empty partition leaves no file (and removes one of an earlier run): an empty
        Parquet file breaks HF ``datasets.load_dataset`` and an empty JSONL file has no
        columns for ``dask.dataframe.read_json``. Its schema is still returned, so its
        columns count in the run's schema.
        """
        final = self.layout.part_path(index)
        fs, path = self.layout.fs(final)
        if not len(part):
            if fs.exists(path):
                fs.rm(path)
            return WriteResult(index, final, 0, frame_schema(part).serialize().to_pybytes())
        if self._names is not None and not is_object_store(fs):  # names may hold folders
            fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with atomic_output(fs, path) as f:
            schema = self._encode(part, f)
        return WriteResult(index, final, len(part), schema.serialize().to_pybytes())

    def conform(self, index: int, schema: pa.Schema) -> bytes | None:
        """Rewrite ``part-<index:05d>`` with ``schema``'s columns, in its order (atomically).

        A missing column becomes nulls; values are unchanged (Parquet columns are cast to
        the unified type, see :func:`unify_schemas`).
        """
        final = self.layout.part_path(index)
        fs, path = self.layout.fs(final)
        with fs.open(path, "rb") as f:
            data = f.read()
        with atomic_output(fs, path) as f:
            self._conform(data, schema, f, final)
        return schema.serialize().to_pybytes()

    def finish(self, summary: dict[str, Any]) -> None:
        """Write the completion marker holding ``summary`` as JSON (atomically).

        First removes the temporary files of attempts that never renamed theirs: a worker
        killed while writing leaves ``<name>.tmp-<uuid>`` behind, and the partition was
        written again by another worker. Every partition is final when this runs, and the
        run's lease keeps other jobs out, so no live write owns such a file.
        """
        fs, root = self.layout.fs()
        if not is_object_store(fs):
            for folder in (root, self.layout.fs(self.layout.meta_dir)[1]):
                if not fs.exists(folder):
                    continue
                leftovers = [n for n in fs.find(folder) if TMP_SUFFIX.search(n)]
                if leftovers:
                    fs.rm(leftovers)
        data = json.dumps(summary, indent=2, sort_keys=True, default=str).encode()
        self.layout.write_bytes(self.layout.success_path, data)

    def _encode(self, part: Any, f: Any) -> pa.Schema:
        raise NotImplementedError

    def _conform(self, data: bytes, schema: pa.Schema, f: Any, name: str) -> None:
        raise NotImplementedError


def frame_schema(part: Any) -> pa.Schema:
    """The arrow schema of a pandas or cudf frame (columns of unknown type as ``null``)."""
    if hasattr(part, "to_arrow") and not isinstance(part, pd.DataFrame):
        return part.head(0).to_arrow(preserve_index=False).schema.remove_metadata()
    try:
        return pa.Schema.from_pandas(part, preserve_index=False).remove_metadata()
    except (pa.ArrowException, ValueError, TypeError):  # mixed Python objects in a column
        fields = []
        for name in part.columns:
            try:
                fields.append(pa.Schema.from_pandas(part[[name]], preserve_index=False).field(0))
            except (pa.ArrowException, ValueError, TypeError):
                fields.append(pa.field(str(name), pa.null()))
        return pa.schema(fields)


def unify_schemas(schemas: list[pa.Schema]) -> pa.Schema:
    """One schema for all files of a run: the union of their columns, in order of appearance.

    A column's type is the arrow promotion of its types (``null`` gives way to any type,
    ``int64`` with ``double`` becomes ``double``, ``string`` with ``large_string`` becomes
    ``large_string``); types that do not promote (``int64`` and ``string``) become
    ``large_string``.

    >>> s = unify_schemas([pa.schema([("a", pa.int64())]),
    ...                    pa.schema([("a", pa.float64()), ("b", pa.string())])])
    >>> [(f.name, str(f.type)) for f in s]
    [('a', 'double'), ('b', 'string')]
    """
    names: dict[str, list[pa.DataType]] = {}
    for schema in schemas:
        for fld in schema:
            names.setdefault(fld.name, []).append(fld.type)
    fields = []
    for name, types in names.items():
        known = [t for t in types if t != pa.null()]
        if not known:
            fields.append(pa.field(name, pa.null()))
            continue
        try:
            merged = pa.unify_schemas(
                [pa.schema([(name, t)]) for t in known], promote_options="permissive"
            )
            fields.append(merged.field(name))
        except (pa.ArrowException, TypeError):
            fields.append(pa.field(name, pa.large_string()))
    return pa.schema(fields)


@dataclass
class JsonlWriter(_FileWriter):
    """Write partitions as JSONL files ``part-<index:05d>.jsonl`` (UTF-8, one object a line).

    Parameters
    ----------
    path : str
        Output directory, local or an fsspec URL (``s3://bucket/out``).
    mode : {"overwrite", "resume", "error"}
        ``overwrite`` (default) clears the part files of an earlier run in :meth:`begin`;
        ``resume`` keeps them and :meth:`is_done` says which partitions to skip; ``error``
        refuses a non-empty directory.
    storage_options : dict, optional
        Passed to fsspec.

    Notes
    -----
    Rows are written with pandas' JSON encoder: missing values become ``null``, floats keep
    15 significant digits, datetimes are ISO 8601, the index is not written.
    """

    suffix: ClassVar[str] = ".jsonl"

    def _encode(self, part: Any, f: Any) -> pa.Schema:
        part = _backend.to_pandas(part)
        for start in range(0, len(part), _JSONL_ROWS_PER_CHUNK):
            f.write(encode_jsonl(part.iloc[start : start + _JSONL_ROWS_PER_CHUNK]))
        return frame_schema(part)

    def _conform(self, data: bytes, schema: pa.Schema, f: Any, name: str) -> None:
        # Each record gets every column of the run (null where it had none), in the run's
        # order; values are parsed and written back by the json module, unchanged.
        columns = schema.names
        out = []
        for line in data.decode("utf-8", errors="surrogatepass").splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            full = {c: rec.get(c) for c in columns}
            full.update((k, v) for k, v in rec.items() if k not in full)
            out.append(json.dumps(full, ensure_ascii=False, separators=(",", ":")))
        if out:
            f.write(("\n".join(out) + "\n").encode("utf-8", errors="surrogatepass"))


def encode_jsonl(part: pd.DataFrame) -> bytes:
    """Encode a pandas frame as JSONL bytes (records, no index, UTF-8, newline-terminated)."""
    if not len(part):
        return b""
    text = part.to_json(
        orient="records", lines=True, force_ascii=False, date_format="iso", double_precision=15
    )
    if not text.endswith("\n"):
        text += "\n"
    # pandas escapes "/" as "\/"; every "/" is escaped, so "\/" can only be such an escape.
    return text.replace("\\/", "/").encode("utf-8", errors="surrogatepass")


@dataclass
class ParquetWriter(_FileWriter):
    """Write partitions as Parquet files ``part-<index:05d>.parquet``.

    Parameters
    ----------
    path : str
        Output directory, local or an fsspec URL.
    mode : {"overwrite", "resume", "error"}
        As for :class:`JsonlWriter`.
    storage_options : dict, optional
        Passed to fsspec.
    compression : str
        Parquet codec (``"zstd"``, ``"snappy"``, ...).
    row_group_size : int, optional
        Rows per row group (pyarrow's default if None).
    """

    compression: str = "zstd"
    row_group_size: int | None = None

    suffix: ClassVar[str] = ".parquet"

    def _encode(self, part: Any, f: Any) -> pa.Schema:
        if hasattr(part, "to_arrow") and not isinstance(part, pd.DataFrame):
            table = part.to_arrow(preserve_index=False)  # cudf: straight to arrow
        else:
            table = pa.Table.from_pandas(part, preserve_index=False)
        pq.write_table(table, f, compression=self.compression, row_group_size=self.row_group_size)
        return table.schema.remove_metadata()

    def _conform(self, data: bytes, schema: pa.Schema, f: Any, name: str) -> None:
        out = conform_table(pq.read_table(pa.BufferReader(data)), schema, name)
        pq.write_table(out, f, compression=self.compression, row_group_size=self.row_group_size)


def conform_table(table: pa.Table, schema: pa.Schema, name: str) -> pa.Table:
    """``table`` with ``schema``'s columns in its order: a missing column becomes nulls, the
    others are cast to the unified type (:func:`unify_schemas`); ``name`` is for errors."""
    columns = []
    for fld in schema:
        if fld.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, fld.type))
            continue
        col = table.column(fld.name)
        if col.type != fld.type:
            try:
                col = col.cast(fld.type)
            except pa.ArrowException as err:
                raise TypeError(
                    f"{name}: column {fld.name!r} of type {col.type} cannot be cast to "
                    f"the run's type {fld.type}: {err}"
                ) from err
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def conform_partitions(writer: Writer, results: list[WriteResult]) -> pa.Schema | None:
    """Unify the schemas of ``results`` and rewrite the files that differ (in dask tasks)."""
    import dask

    results = [r for r in results if r.schema]
    schemas = [pa.ipc.read_schema(pa.py_buffer(r.schema)) for r in results]
    if not schemas:
        return None
    schema = unify_schemas(schemas)
    todo = [
        r.index for r, s in zip(results, schemas, strict=True) if r.rows and not s.equals(schema)
    ]
    dask.compute(*(dask.delayed(writer.conform)(i, schema) for i in todo))
    return schema


def _write_recorded(writer: _FileWriter, part: Any, index: int, token: str) -> WriteResult:
    result = writer.write_partition(part, index)
    record = {"index": index, "rows": result.rows, "token": token}
    writer.layout.write_json(writer.layout.partition_stats_path(index), record)
    return result


def _written(writer: _FileWriter, index: int, token: str) -> bool:
    """In ``resume`` mode: partition ``index`` was written from the same computation."""
    if not writer.is_done(index):
        return False
    record = writer.layout.read_json(writer.layout.partition_stats_path(index))
    return isinstance(record, dict) and record.get("token") == token


def _write(df: Any, writer: _FileWriter) -> list[WriteResult]:
    import dask
    import dask.dataframe as dd

    if isinstance(df, pd.DataFrame):
        df = dd.from_pandas(df, npartitions=1)
    writer.begin()
    parts = df.to_delayed()
    # The collection's name is dask's token of its whole graph, readers' file sizes and
    # modification times included: in resume mode a partition counts as written only if it
    # was written from the same one, so a document appended to an input is picked up.
    token = str(df._name)
    todo = [i for i in range(len(parts)) if not _written(writer, i, token)]
    tasks = [dask.delayed(_write_recorded)(writer, parts[i], i, token) for i in todo]
    results = list(dask.compute(*tasks))
    conform_partitions(writer, results)
    summary = {
        "partitions": len(parts),
        "written": len(results),
        "skipped": len(parts) - len(results),
        "rows_written": sum(r.rows for r in results),
        "files": [posixpath.basename(r.path) for r in results],
    }
    writer.finish(summary)
    return results


def write_jsonl(
    df: Any,
    path: str,
    *,
    mode: str = "overwrite",
    storage_options: dict[str, Any] | None = None,
) -> list[WriteResult]:
    """Write a dask dataframe as one JSONL file per partition. This computes ``df``.

    Writes ``<path>/part-<index:05d>.jsonl`` for every partition (atomically), then
    ``<path>/_SUCCESS`` with a JSON summary. See :class:`JsonlWriter` for ``mode``.

    Returns
    -------
    list of WriteResult
        The partitions written by this call (in ``resume`` mode, not the skipped ones).

    Examples
    --------
    >>> import tempfile, pandas as pd, dask.dataframe as dd
    >>> df = dd.from_pandas(pd.DataFrame({"id": ["a", "b"], "text": ["x", "y"]}), npartitions=2)
    >>> out = tempfile.mkdtemp()
    >>> [r.rows for r in write_jsonl(df, out)]
    [1, 1]
    """
    return _write(df, JsonlWriter(path, mode=mode, storage_options=storage_options))


def write_parquet(
    df: Any,
    path: str,
    *,
    mode: str = "overwrite",
    storage_options: dict[str, Any] | None = None,
    compression: str = "zstd",
) -> list[WriteResult]:
    """Write a dask dataframe as one Parquet file per partition. This computes ``df``.

    Writes ``<path>/part-<index:05d>.parquet`` for every partition (atomically), then
    ``<path>/_SUCCESS``. See :class:`ParquetWriter`.

    Returns
    -------
    list of WriteResult
        The partitions written by this call.
    """
    writer = ParquetWriter(
        path, mode=mode, storage_options=storage_options, compression=compression
    )
    return _write(df, writer)
