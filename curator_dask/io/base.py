"""The contracts between readers, writers and the executor.

A reader knows its partitions before anything is read (:meth:`Reader.partitions`) and reads
one of them at a time (:meth:`Reader.read_partition`), returning the good documents and the
quarantined records separately. A writer writes one partition at a time under a
deterministic name (:meth:`Writer.write_partition`), can tell whether a partition is already
written (:meth:`Writer.is_done`, for resuming), and marks the dataset complete
(:meth:`Writer.finish`).

The executor streams partitions through ``read_partition -> stages -> write_partition``;
:meth:`Reader.to_dask` builds the same reads as a lazy dask dataframe for notebook use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

#: Columns of a quarantine record (one row per rejected input record).
QUARANTINE_COLUMNS = ("file", "line", "byte_offset", "reason", "raw")


def empty_quarantine() -> pd.DataFrame:
    """Return an empty quarantine frame with the standard columns."""
    return pd.DataFrame(
        {
            "file": pd.Series([], dtype="string"),
            "line": pd.Series([], dtype="int64"),
            "byte_offset": pd.Series([], dtype="int64"),
            "reason": pd.Series([], dtype="string"),
            "raw": pd.Series([], dtype="object"),
        }
    )


@dataclass(frozen=True)
class PartitionSpec:
    """One partition of input: whole files, or a byte range of one file.

    ``index`` is the partition's position (0..n-1) and names its output file.
    ``start``/``end`` are a byte range for a split uncompressed file, else None.
    """

    index: int
    paths: tuple[str, ...]
    start: int | None = None
    end: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class ReadResult:
    """The documents read from one partition, and what was quarantined."""

    data: Any  # pandas or cudf frame
    quarantine: pd.DataFrame
    docs_read: int  # records seen = len(data) + len(quarantine)


class Reader:
    """Base of readers. Subclasses implement :meth:`partitions` and :meth:`read_partition`."""

    text_column: str = "text"
    id_column: str = "id"

    def partitions(self) -> list[PartitionSpec]:
        """List the partitions (cheap: file listing and sizes only)."""
        raise NotImplementedError

    def read_partition(self, spec: PartitionSpec) -> ReadResult:
        """Read one partition."""
        raise NotImplementedError

    def to_dask(self) -> Any:
        """Return a lazy dask dataframe over :meth:`partitions`."""
        raise NotImplementedError


@dataclass(frozen=True)
class WriteResult:
    """What :meth:`Writer.write_partition` wrote."""

    index: int
    path: str
    rows: int


class Writer:
    """Base of writers: one file per partition, atomic, resumable."""

    path: str

    def begin(self) -> None:
        """Prepare the output location (called once, on the client, before writing)."""

    def is_done(self, index: int) -> bool:
        """True if partition ``index`` is already fully written (resume mode)."""
        return False

    def write_partition(self, part: Any, index: int) -> WriteResult:
        """Write one partition under its deterministic name; atomic."""
        raise NotImplementedError

    def finish(self, summary: dict[str, Any]) -> None:
        """Mark the dataset complete (writes the completion marker)."""
