"""The contracts between readers, writers and the executor.

A reader knows its partitions before anything is read (:meth:`Reader.partitions`) and reads
one of them at a time (:meth:`Reader.read_partition`), returning the good documents and the
quarantined records separately. It can estimate a partition's size in memory
(:meth:`Reader.estimated_bytes`) and cut a partition in two narrower ones
(:meth:`Reader.split`, used when a partition runs out of memory). A writer writes one
partition at a time under a deterministic name (:meth:`Writer.write_partition`), can tell
whether a partition is already written (:meth:`Writer.is_done`, for resuming), marks the
dataset complete (:meth:`Writer.finish`), and tells where every file of the run goes
(:attr:`Writer.layout`, a :class:`~curator_dask.io.layout.RunLayout`).

Everything the executor needs from a reader or writer is a method or attribute here, with a
default: a new reader format gets splitting, resume and quarantine without touching the
executor (see ``docs/io.md``, "Writing a reader").

The executor streams partitions through ``read_partition -> stages -> write_partition``;
:meth:`Reader.to_dask` builds the same reads as a lazy dask dataframe for notebook use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from curator_dask.io.layout import RunLayout
from curator_dask.io.quarantine import QUARANTINE_COLUMNS, empty_quarantine

if TYPE_CHECKING:
    from curator_dask.sizing import Workers

__all__ = [
    "QUARANTINE_COLUMNS",
    "PartitionSpec",
    "ReadResult",
    "Reader",
    "WriteResult",
    "Writer",
    "empty_quarantine",
]


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

    def partitions(self, workers: Workers | None = None) -> list[PartitionSpec]:
        """List the partitions (cheap: file listing and sizes only).

        ``workers``: the workers the partitions are for (the executor gives those the run
        will have); a reader without a given partition size sizes them for these
        (:func:`curator_dask.sizing.resolve_blocksize`), else for the active client's.
        """
        raise NotImplementedError

    def read_partition(self, spec: PartitionSpec) -> ReadResult:
        """Read one partition."""
        raise NotImplementedError

    def to_dask(self, workers: Workers | None = None) -> Any:
        """Return a lazy dask dataframe over :meth:`partitions` (listed for ``workers``)."""
        raise NotImplementedError

    def split(self, spec: PartitionSpec) -> tuple[PartitionSpec, PartitionSpec] | None:
        """Two partitions that together read exactly what ``spec`` reads, or None.

        Used when a partition runs out of memory. None (the default) means the reader
        cannot read less than ``spec``: the executor then reads ``spec`` and keeps row
        slices of it. The halves keep ``spec.index``.
        """
        return None

    def estimated_bytes(self, spec: PartitionSpec) -> float | None:
        """Estimated in-memory bytes of partition ``spec`` once read, or None if unknown."""
        return None

    def check_columns(self, specs: list[PartitionSpec] | None = None) -> None:
        """Raise :class:`~curator_dask.errors.ColumnError` if the input lacks the text column,
        or an id column other than the default ``"id"`` (which may be absent: ids are then
        generated). Called on the client before any work; default: nothing is checked."""

    @property
    def partition_bytes(self) -> int | None:
        """The target size in bytes this reader cuts its input by (a blocksize), or None."""
        return None

    def source_name(self, spec: PartitionSpec) -> str | None:
        """The name, relative to the input, of the one whole file ``spec`` reads, without its
        suffixes (``2023/a`` for ``<input>/2023/a.jsonl.gz``); None when ``spec`` is not one
        whole file. Used to write one output file per input file."""
        return None

    def input_locations(self) -> list[str]:
        """The files and directories this reader reads (the executor refuses an output that
        overlaps any of them). Default: none known."""
        return []

    def fingerprint(self, spec: PartitionSpec) -> Any:
        """What identifies the input of ``spec``: a resumed run redoes a partition whose
        fingerprint changed. Default: its paths and range, plus ``spec.extra["inputs"]``
        (e.g. sizes and modification times) when the reader put it there."""
        return (spec.paths, spec.start, spec.end, spec.extra.get("inputs"))


@dataclass(frozen=True)
class WriteResult:
    """What :meth:`Writer.write_partition` wrote.

    ``schema`` is the written file's arrow schema, serialised
    (``pyarrow.Schema.serialize()``), or None; the executor unifies the schemas of a run's
    files and has the writer :meth:`~Writer.conform` the ones that differ.
    """

    index: int
    path: str
    rows: int
    schema: bytes | None = None


class Writer:
    """Base of writers: one file per partition, atomic, resumable."""

    path: str
    #: Passed to fsspec for every file of the run.
    storage_options: dict[str, Any] | None = None
    #: The suffix of the document files (``".jsonl"``).
    suffix: ClassVar[str] = ""
    #: Write one output file per input file, under the input file's relative name
    #: (:meth:`Reader.source_name`) instead of ``part-<index>``.
    per_input_file: bool = False

    def name_partitions(self, names: list[str]) -> None:
        """Use ``names`` (one per partition, without suffix) for the document files."""
        raise NotImplementedError(f"{type(self).__name__} cannot name its files per input file")

    @property
    def layout(self) -> RunLayout:
        """Where every file of the run goes (resolved on the client)."""
        return RunLayout.for_output(self.path, self.suffix, self.storage_options)

    def begin(self) -> None:
        """Prepare the output location (called once, on the client, before writing)."""

    def is_done(self, index: int) -> bool:
        """True if partition ``index`` is already fully written (resume mode)."""
        return False

    def write_partition(self, part: Any, index: int) -> WriteResult:
        """Write one partition under its deterministic name; atomic."""
        raise NotImplementedError

    def conform(self, index: int, schema: Any) -> bytes | None:
        """Rewrite partition ``index``'s file to the run's ``schema`` (a ``pyarrow.Schema``).

        Missing columns become nulls, types are cast, columns are put in ``schema``'s
        order; documents and their values are unchanged. Returns the new serialised schema,
        or None when the writer's files have no schema to conform (the default).
        """
        return None

    def finish(self, summary: dict[str, Any]) -> None:
        """Mark the dataset complete (writes the completion marker)."""
