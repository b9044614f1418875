"""Readers and writers: JSONL and Parquet, local and remote (fsspec), with a quarantine.

See ``docs/io.md`` for partitioning, ids, the quarantine format and the writers' files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from curator_dask._lazy import lazy_exports

# Imported on first use (PEP 562): ``curator_dask.io.formats`` and the other small modules
# load without pandas and pyarrow, so the CLI's --help stays light.
_EXPORTS = {
    "FileInfo": "curator_dask.io._files",
    "QUARANTINE_COLUMNS": "curator_dask.io.base",
    "PartitionSpec": "curator_dask.io.base",
    "Reader": "curator_dask.io.base",
    "ReadResult": "curator_dask.io.base",
    "Writer": "curator_dask.io.base",
    "WriteResult": "curator_dask.io.base",
    "empty_quarantine": "curator_dask.io.base",
    "DataFrameReader": "curator_dask.io.dataframe",
    "BadRecords": "curator_dask.io.file_reader",
    "FileReader": "curator_dask.io.file_reader",
    "MalformedInputError": "curator_dask.io.file_reader",
    "QuarantineWarning": "curator_dask.io.file_reader",
    "JsonlReader": "curator_dask.io.jsonl",
    "read_jsonl": "curator_dask.io.jsonl",
    "RunLayout": "curator_dask.io.layout",
    "write_quarantine": "curator_dask.io.layout",
    "ParquetReader": "curator_dask.io.parquet",
    "read_parquet": "curator_dask.io.parquet",
    "read_quarantine": "curator_dask.io.quarantine",
    "JsonlWriter": "curator_dask.io.writers",
    "ParquetWriter": "curator_dask.io.writers",
    "write_jsonl": "curator_dask.io.writers",
    "write_parquet": "curator_dask.io.writers",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from curator_dask.io._files import FileInfo
    from curator_dask.io.base import (
        QUARANTINE_COLUMNS,
        PartitionSpec,
        Reader,
        ReadResult,
        Writer,
        WriteResult,
        empty_quarantine,
    )
    from curator_dask.io.dataframe import DataFrameReader
    from curator_dask.io.file_reader import (
        BadRecords,
        FileReader,
        MalformedInputError,
        QuarantineWarning,
    )
    from curator_dask.io.jsonl import JsonlReader, read_jsonl
    from curator_dask.io.layout import RunLayout, write_quarantine
    from curator_dask.io.parquet import ParquetReader, read_parquet
    from curator_dask.io.quarantine import read_quarantine
    from curator_dask.io.writers import JsonlWriter, ParquetWriter, write_jsonl, write_parquet

__all__ = [
    "QUARANTINE_COLUMNS",
    "BadRecords",
    "DataFrameReader",
    "FileInfo",
    "FileReader",
    "JsonlReader",
    "JsonlWriter",
    "MalformedInputError",
    "ParquetReader",
    "ParquetWriter",
    "PartitionSpec",
    "QuarantineWarning",
    "ReadResult",
    "Reader",
    "RunLayout",
    "WriteResult",
    "Writer",
    "empty_quarantine",
    "read_jsonl",
    "read_parquet",
    "read_quarantine",
    "write_jsonl",
    "write_parquet",
    "write_quarantine",
]
