"""The Parquet reader: files or row-group ranges of files as partitions of documents."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curator_dask.io._files import FileInfo, get_fs
from curator_dask.io.base import PartitionSpec
from curator_dask.io.file_reader import (
    STRING_DTYPE,
    BadRecords,
    FileReader,
    MalformedInputError,
    arrow_ids_to_string,
    empty_frame,
    fill_ids,
    finish_frame,
    raise_bad,
)
from curator_dask.io.formats import register_reader

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _row_group_ranges(
    f: FileInfo, blocksize: int, storage_options: dict[str, Any] | None
) -> list[tuple[int, int]] | None:
    """Consecutive row groups of a large file grouped up to ``blocksize`` compressed bytes."""
    fs, path = get_fs(f.path, storage_options)
    with fs.open(path, "rb") as fh:
        md = pq.ParquetFile(fh).metadata
    if md.num_row_groups <= 1:
        return None
    ranges: list[tuple[int, int]] = []
    start, size = 0, 0
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        nbytes = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        if i > start and size + nbytes > blocksize:
            ranges.append((start, i))
            start, size = i, 0
        size += nbytes
    ranges.append((start, md.num_row_groups))
    return ranges


@register_reader
@dataclass
class ParquetReader(FileReader):
    """Read Parquet files as partitions of documents.

    Parameters
    ----------
    paths : str or list of str
        A file, a directory (searched recursively for ``.parquet``/``.parq``/``.pq``; names
        starting with ``.`` or ``_`` are skipped), a glob, or a list of these; local or any
        fsspec URL.
    columns : list of str, optional
        Columns to read; the id and text columns are always read.
    add_filename : bool
        Add a ``file_name`` column with the input file's base name.
    text_column, id_column : str
        Names of the text and id columns. Ids missing from the input (no column, or a null)
        become ``"<basename>:<row number>"`` (0-based row in the file).
    blocksize : int or str, optional
        Target compressed bytes per partition; default ``curator.io.blocksize``. Small files
        are grouped up to it; a larger file with several row groups is split into ranges of
        consecutive row groups (``PartitionSpec.start``/``end`` are then row-group indices).
    files_per_partition : int, optional
        Instead of ``blocksize``: this many whole files per partition.
    on_error : {"quarantine", "raise"}
        Rows whose text is null or not a string are quarantined (``line`` = row number,
        ``byte_offset`` = -1, ``raw`` = the row as JSON) or raise
        :class:`~curator_dask.io.MalformedInputError`.
    quarantine_path : str, optional
        Where :meth:`to_dask` writes quarantined rows (as for :class:`JsonlReader`).
    storage_options : dict, optional
        Passed to fsspec.
    """

    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
    columns: Sequence[str] | None = None
    add_filename: bool = False
    text_column: str = "text"
    id_column: str = "id"
    blocksize: int | str | None = None
    files_per_partition: int | None = None
    on_error: str = "quarantine"
    quarantine_path: str | None = None
    storage_options: dict[str, Any] | None = field(default=None, repr=False)

    suffixes = PARQUET_SUFFIXES
    format_name = "parquet"
    range_unit = "row_groups"
    expansion = 3.0  # compressed columns decoded into a frame

    def __post_init__(self) -> None:
        self._check_arguments()

    # -- internals -------------------------------------------------------------------------
    def split_file(self, f: FileInfo, blocksize: int) -> list[tuple[int, int]] | None:
        # Only a file larger than ``blocksize`` has its footer read.
        return _row_group_ranges(f, blocksize, self.storage_options)

    def _columns_to_read(self, schema: pa.Schema) -> list[str] | None:
        if self.columns is None:
            return None
        wanted = [self.id_column, self.text_column, *self.columns]
        return [c for c in dict.fromkeys(wanted) if c in schema.names]

    def read_file(
        self, path: str, start: int | None, end: int | None
    ) -> tuple[pd.DataFrame, BadRecords]:
        fs, fpath = get_fs(path, self.storage_options)
        try:
            with fs.open(fpath, "rb") as fh:
                pf = pq.ParquetFile(fh)
                cols = self._columns_to_read(pf.schema_arrow)
                if start is None:
                    table = pf.read(columns=cols)
                    first_row = 0
                else:
                    stop = pf.metadata.num_row_groups if end is None else end
                    table = pf.read_row_groups(list(range(start, stop)), columns=cols)
                    first_row = sum(pf.metadata.row_group(i).num_rows for i in range(start))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError) as err:
            if isinstance(err, (FileNotFoundError, PermissionError)):
                raise
            # Not Parquet, or corrupt: the file's rows cannot be counted, so the whole file
            # is one quarantine row naming it (the run goes on).
            reason = f"unreadable Parquet file {path}: {err}"
            if self.on_error == "raise":
                raise MalformedInputError(reason) from err
            bad = BadRecords(path)
            bad.add(-1 if start is None else start, -1, reason, b"")
            return empty_frame(self.id_column, self.text_column, False), bad
        return self._check(table, path, first_row)

    def _check(self, table: pa.Table, path: str, first_row: int) -> tuple[pd.DataFrame, BadRecords]:
        bad = BadRecords(path)
        rows = np.arange(first_row, first_row + table.num_rows, dtype=np.int64)
        keep = self._text_ok(table)
        if not keep.all():
            for j in np.flatnonzero(~keep):
                row = table.slice(int(j), 1).to_pylist()[0]
                value = row.get(self.text_column)
                reason = (
                    f"missing or null text field {self.text_column!r}"
                    if value is None
                    else f"text field {self.text_column!r} is not a string ({type(value).__name__})"
                )
                if self.on_error == "raise":
                    raise_bad(path, int(rows[j]), -1, reason)
                raw = json.dumps(row, default=str, ensure_ascii=False).encode(
                    "utf-8", errors="backslashreplace"
                )
                bad.add(int(rows[j]), -1, reason, raw)
            table = table.filter(pa.array(keep))
            rows = rows[keep]
        if self.text_column in table.column_names:
            col = table.column(self.text_column)
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            if not _is_string(col.type):  # every row was quarantined: nothing left
                col = pa.chunked_array([], pa.string())
            table = table.set_column(
                table.column_names.index(self.text_column), self.text_column, col
            )
        part = arrow_ids_to_string(table, self.id_column).to_pandas()
        if self.text_column in part.columns:
            part[self.text_column] = part[self.text_column].astype(STRING_DTYPE)
        else:
            part[self.text_column] = pd.Series([], dtype=STRING_DTYPE)
        part = fill_ids(part, self.id_column, self.id_name(path), rows, mark=True)
        return part, bad

    def _text_ok(self, table: pa.Table) -> np.ndarray:
        if self.text_column not in table.column_names:
            return np.zeros(table.num_rows, dtype=bool)
        col = table.column(self.text_column)
        value_type = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        if not _is_string(value_type):
            return np.zeros(table.num_rows, dtype=bool)
        return np.asarray(pc.is_valid(col).to_numpy(zero_copy_only=False), dtype=bool)

    def input_columns(self, specs: list[PartitionSpec]) -> tuple[str, list[str]] | None:
        """The columns in the schema of the first readable file that has the text column,
        else of the first readable one (of up to 8 files)."""
        first: tuple[str, list[str]] | None = None
        for path in [p for spec in specs for p in spec.paths][:8]:
            fs, fpath = get_fs(path, self.storage_options)
            try:
                with fs.open(fpath, "rb") as fh:
                    names = list(pq.ParquetFile(fh).schema_arrow.names)
            except (pa.ArrowInvalid, EOFError):
                continue  # an unreadable file: read_file quarantines it
            if self.text_column in names:
                return path, names
            first = first or (path, names)
        return first

    def meta(self, specs: list[PartitionSpec]) -> pd.DataFrame:
        schema = None
        for path in [p for spec in specs for p in spec.paths][:8]:
            fs, fpath = get_fs(path, self.storage_options)
            try:
                with fs.open(fpath, "rb") as fh:
                    schema = pq.ParquetFile(fh).schema_arrow
                break
            except (pa.ArrowInvalid, EOFError):
                continue  # an unreadable file: read_file quarantines it
        if schema is None:
            return empty_frame(self.id_column, self.text_column, self.add_filename)
        cols = self._columns_to_read(schema)
        if cols is not None:
            schema = pa.schema([schema.field(c) for c in cols])
        part = schema.empty_table().to_pandas()
        part[self.text_column] = pd.Series([], dtype=STRING_DTYPE)
        part = fill_ids(part, self.id_column, "", np.zeros(0, dtype=np.int64))
        if self.add_filename:
            part["file_name"] = pd.Series([], dtype=STRING_DTYPE)
        return finish_frame(
            [part],
            id_column=self.id_column,
            text_column=self.text_column,
            columns=self.columns,
            add_filename=self.add_filename,
        ).iloc[:0]


def read_parquet(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    columns: Sequence[str] | None = None,
    *,
    add_filename: bool = False,
    text_column: str = "text",
    id_column: str = "id",
    blocksize: int | str | None = None,
    files_per_partition: int | None = None,
    on_error: str = "quarantine",
    quarantine_path: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Any:
    """Read Parquet files into a lazy dask dataframe (see :class:`ParquetReader`).

    Returns
    -------
    dask.dataframe.DataFrame
        String ``id`` and ``text`` columns first; pandas or cudf partitions.
    """
    return ParquetReader(
        paths,
        columns=columns,
        add_filename=add_filename,
        text_column=text_column,
        id_column=id_column,
        blocksize=blocksize,
        files_per_partition=files_per_partition,
        on_error=on_error,
        quarantine_path=quarantine_path,
        storage_options=storage_options,
    ).to_dask()
