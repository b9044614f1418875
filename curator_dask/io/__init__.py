"""Readers and writers: JSONL and Parquet, local and remote (fsspec), with a quarantine.

See ``docs/io.md`` for partitioning, ids, the quarantine format and the writers' files.
"""

from __future__ import annotations

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
