"""FileReader, the base of file formats, with what it shares with them: partitioning, quarantine
rows, ids, column order, meta.

The public extension point for a new file format (``docs/io.md``, "Writing a reader");
``curator_dask.io._common`` is its old name and still works.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from curator_dask import _backend, config, sizing
from curator_dask.errors import MalformedInputError, QuarantineWarning, check_columns
from curator_dask.io._files import (
    FileInfo,
    basename,
    compression_of,
    get_fs,
    list_files,
)
from curator_dask.io.base import (
    QUARANTINE_COLUMNS,
    PartitionSpec,
    Reader,
    ReadResult,
    empty_quarantine,
)
from curator_dask.io.quarantine import write_quarantine_file

#: The dtype of the id and text columns: pandas' arrow-backed string dtype, the one dask
#: converts string columns to (``dataframe.convert-string``), so partitions read directly
#: and through ``to_dask()`` agree.
STRING_DTYPE = pd.StringDtype("pyarrow")

ON_ERROR = ("quarantine", "raise")

#: In-memory bytes per stored byte of a compressed file (a rough guess).
COMPRESSED_EXPANSION = 4.0
#: In-memory bytes per decompressed byte while a task runs: the frame and a stage's output.
IN_MEMORY = 2.0


@dataclass
class BadRecords:
    """Quarantine rows collected while reading one file."""

    file: str
    lines: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    raws: list[bytes] = field(default_factory=list)

    def add(self, line: int, offset: int, reason: str, raw: bytes | memoryview) -> None:
        self.lines.append(int(line))
        self.offsets.append(int(offset))
        self.reasons.append(reason)
        self.raws.append(bytes(raw))

    def __len__(self) -> int:
        return len(self.reasons)

    def frame(self) -> pd.DataFrame:
        if not self.reasons:
            return empty_quarantine()
        frame = pd.DataFrame(
            {
                "file": pd.Series([self.file] * len(self), dtype="string"),
                "line": pd.Series(self.lines, dtype="int64"),
                "byte_offset": pd.Series(self.offsets, dtype="int64"),
                "reason": pd.Series(self.reasons, dtype="string"),
                "raw": pd.Series(self.raws, dtype="object"),
            }
        )
        # Records are found out of order (oversized lines first, then piece by piece).
        order = np.lexsort((frame["line"].to_numpy(), frame["byte_offset"].to_numpy()))
        return frame.iloc[order].reset_index(drop=True)


def raise_bad(file: str, line: int, offset: int, reason: str) -> None:
    """Raise :class:`MalformedInputError` for one bad record."""
    where = f"line {line}" if line >= 0 else "line unknown"
    if offset >= 0:
        where += f", byte offset {offset}"
    raise MalformedInputError(f"{file}: {where}: {reason}")


def concat_quarantine(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate quarantine frames, keeping the standard dtypes."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_quarantine()
    out = pd.concat(frames, ignore_index=True)
    return out[list(QUARANTINE_COLUMNS)]


def id_text(value: Any) -> str | None:
    """The string an input id becomes: the id itself if a string, else its compact JSON.

    Integers of any size keep every digit (``18446744073709551617``), floats their shortest
    form (``1.5``, ``1000.0``), booleans ``true``/``false``, arrays and objects their
    compact JSON (``[1,2]``). None and NaN are missing ids (None).
    """
    if value is None or value is pd.NA:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


#: A column :func:`fill_ids` adds with ``mark=True``: True where the id was generated.
GENERATED_MARK = "\x00generated_id"


def id_names(paths: Sequence[str]) -> dict[str, str]:
    """The name each input file gives its generated ids: its base name, or, when other
    listed files share that base name, its shortest trailing path that is unique.

    >>> names = id_names(["/d/2023/part-0.jsonl", "/d/2024/part-0.jsonl", "/d/x.jsonl"])
    >>> [names[p] for p in sorted(names)]
    ['2023/part-0.jsonl', '2024/part-0.jsonl', 'x.jsonl']
    """
    parts = {p: [x for x in p.rstrip("/").split("/") if x] for p in paths}
    out: dict[str, str] = {}
    depth = 1
    pending = list(paths)
    while pending:
        names: dict[str, list[str]] = {}
        for p in pending:
            names.setdefault("/".join(parts[p][-depth:]), []).append(p)
        pending = []
        for name, owners in names.items():
            if len(owners) == 1 or all(len(parts[p]) <= depth for p in owners):
                for p in owners:
                    out[p] = name
            else:
                pending += owners
        depth += 1
    return out


def fill_ids(
    part: pd.DataFrame, id_column: str, name: str, positions: np.ndarray, mark: bool = False
) -> pd.DataFrame:
    """Set ``id_column`` to strings, generating ``"<name>:<position>"`` where it is missing.

    A generated id never equals an id given in the same frame: on a clash it becomes
    ``"<name>:<position>:<k>"`` with the smallest ``k >= 1`` that is free. ``mark`` adds
    the :data:`GENERATED_MARK` column, so that a reader can do the same over a partition
    of several files (:func:`distinct_generated_ids`).
    """
    generated = None
    if id_column not in part.columns or part[id_column].isna().any():
        pos = pd.Series(positions, index=part.index).astype(STRING_DTYPE)
        generated = (name + ":") + pos
    if id_column not in part.columns:
        ids = generated
    else:
        ids = _as_string(part[id_column])
        if generated is not None:
            missing = ids.isna()
            generated = _avoid(generated[missing], ids[~missing])
            ids = ids.where(~missing, generated.reindex(ids.index))
    out = part.assign(**{id_column: ids})
    if mark:
        was_missing = (
            pd.Series(True, index=part.index)
            if id_column not in part.columns
            else part[id_column].isna()
        )
        out[GENERATED_MARK] = was_missing.to_numpy(dtype=bool)
    return out


def distinct_generated_ids(frames: list[pd.DataFrame], id_column: str) -> list[pd.DataFrame]:
    """Drop the :data:`GENERATED_MARK` columns; rename generated ids that equal a given id."""
    marks = [
        f[GENERATED_MARK].to_numpy(dtype=bool)
        if GENERATED_MARK in f.columns
        else np.zeros(len(f), dtype=bool)
        for f in frames
    ]
    frames = [f.drop(columns=[GENERATED_MARK], errors="ignore") for f in frames]
    if len(frames) < 2 or not any(m.any() for m in marks):
        return frames
    given = pd.concat(
        [f[id_column][~m] for f, m in zip(frames, marks, strict=True) if id_column in f.columns]
    )
    out = []
    for f, m in zip(frames, marks, strict=True):
        if m.any():
            ids = f[id_column].copy()
            ids[m] = _avoid(ids[m], given).to_numpy()
            f = f.assign(**{id_column: ids})
            given = pd.concat([given, ids[m]])
        out.append(f)
    return out


def _avoid(generated: pd.Series, given: pd.Series) -> pd.Series:
    """``generated`` with the ids that are also ``given`` made distinct from every given id."""
    taken = set(given.dropna().tolist())
    clash = generated.isin(taken) if taken else pd.Series(False, index=generated.index)
    if not clash.any():
        return generated
    out = generated.copy()
    for i in np.flatnonzero(clash.to_numpy()):
        k = 1
        while f"{generated.iloc[i]}:{k}" in taken:
            k += 1
        out.iloc[i] = f"{generated.iloc[i]}:{k}"
        taken.add(out.iloc[i])
    return out


#: Id types pyarrow converts to strings exactly (as their JSON text); other types
#: (floating point: an integer above 2**63 parses as a double; nested) go through Python.
def _exact_arrow_id(t: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_null(t)
    )


def arrow_ids_to_string(table: Any, id_column: str) -> Any:
    """Turn the id column of a pyarrow table into strings by :func:`id_text`'s rule.

    Done in arrow where exact (strings, integers, booleans) because pandas would turn
    integer ids with nulls into floats (``"7.0"``); other types through Python values.
    """
    import pyarrow as pa

    if id_column not in table.column_names:
        return table
    col = table.column(id_column)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return table
    if _exact_arrow_id(col.type):
        col = col.cast(pa.string())
    else:
        col = pa.array([id_text(v) for v in col.to_pylist()], type=pa.string())
    return table.set_column(table.column_names.index(id_column), id_column, col)


def arrow_id_is_exact(table: Any, id_column: str) -> bool:
    """False when the id column's values may not be the input's (e.g. big ints as doubles)."""
    if id_column not in table.column_names:
        return True
    return _exact_arrow_id(table.column(id_column).type)


def _as_string(s: pd.Series) -> pd.Series:
    if s.dtype == STRING_DTYPE:
        return s
    if s.dtype == object or s.dtype.kind in "fb":
        return s.map(id_text).astype(STRING_DTYPE)
    return s.astype(STRING_DTYPE)


def unify_types(part: pd.DataFrame, skip: Sequence[str] = ()) -> pd.DataFrame:
    """Make every mixed-type field of a partition a string column (the documented rule).

    A field whose values are of more than one JSON kind (string, number, boolean, array,
    object) in a partition, e.g. ``score`` 0.5 in one file and ``"high"`` in another,
    becomes a string column: strings stay as they are, other values become their compact
    JSON text (``"0.5"``), nulls stay null. Only object columns can be mixed.
    """
    import pyarrow as pa

    changes = {}
    for name in part.columns:
        if name in skip or part[name].dtype != object:
            continue
        col = part[name]
        try:  # vectorised: pyarrow refuses a column of mixed kinds
            pa.array(col.to_numpy(), from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            changes[name] = col.map(id_text).astype(STRING_DTYPE)
    return part.assign(**changes) if changes else part


def order_columns(part: pd.DataFrame, id_column: str, text_column: str) -> pd.DataFrame:
    """Put the id and text columns first, the others after in their input order."""
    first = [c for c in (id_column, text_column) if c in part.columns]
    rest = [c for c in part.columns if c not in first]
    return part[first + rest]


def finish_frame(
    frames: list[pd.DataFrame],
    *,
    id_column: str,
    text_column: str,
    columns: Sequence[str] | None,
    add_filename: bool,
) -> pd.DataFrame:
    """Concatenate per-file frames, select columns, order them, reset the index."""
    frames = [f for f in frames if len(f.columns)]
    if not frames:
        part = empty_frame(id_column, text_column, add_filename)
    elif len(frames) == 1:
        part = frames[0].reset_index(drop=True)
    else:
        part = pd.concat(frames, ignore_index=True)
    part = order_columns(part, id_column, text_column)
    if columns is not None:
        keep = [id_column, text_column]
        keep += [c for c in columns if c not in keep and c in part.columns]
        if add_filename and "file_name" in part.columns:
            keep.append("file_name")
        part = part[[c for c in keep if c in part.columns]]
    if add_filename and "file_name" in part.columns:
        part = part[[c for c in part.columns if c != "file_name"] + ["file_name"]]
    return part


def empty_frame(id_column: str, text_column: str, add_filename: bool) -> pd.DataFrame:
    """A frame with no rows and just the id and text (and file_name) columns."""
    cols = {id_column: pd.Series([], dtype=STRING_DTYPE)}
    cols[text_column] = pd.Series([], dtype=STRING_DTYPE)
    if add_filename:
        cols["file_name"] = pd.Series([], dtype=STRING_DTYPE)
    return pd.DataFrame(cols)


def conform(part: pd.DataFrame, meta: pd.DataFrame) -> pd.DataFrame:
    """Give ``part`` exactly ``meta``'s columns: add missing ones as nulls, cast where possible.

    Columns absent from ``meta`` are dropped (``meta`` comes from the first records of the
    input; pass ``columns=`` to a reader to choose them explicitly).
    """
    out = {}
    for name, dtype in meta.dtypes.items():
        if name in part.columns:
            col = part[name]
            if col.dtype != dtype:
                # e.g. int64 meta but nulls here: keep the partition's dtype
                with contextlib.suppress(TypeError, ValueError):
                    col = col.astype(dtype)
        else:
            col = pd.Series(None, index=part.index, dtype=dtype)
        out[name] = col
    return pd.DataFrame(out, index=part.index)


def resolve_quarantine_dir(path: str | None) -> str:
    """The directory where ``to_dask()`` reads write quarantined records."""
    path = path or config.get("io.quarantine-dir") or "./curator_quarantine"
    if "://" not in path:
        path = os.path.abspath(path)
    return path


def check_partitioning(blocksize: int | str | None, files_per_partition: int | None) -> int | None:
    """Validate the two partitioning arguments; return the given blocksize in bytes or None.

    None for no blocksize: its default is chosen on the client when the partitions are
    listed (:func:`curator_dask.sizing.resolve_blocksize`).
    """
    if blocksize is not None and files_per_partition is not None:
        raise ValueError(
            "give either blocksize or files_per_partition, not both "
            f"(got blocksize={blocksize!r}, files_per_partition={files_per_partition!r})"
        )
    if files_per_partition is not None:
        if int(files_per_partition) < 1:
            raise ValueError(f"files_per_partition must be >= 1, got {files_per_partition}")
        return None
    return sizing.resolve_blocksize(blocksize) if blocksize is not None else None


def check_on_error(on_error: str) -> None:
    """Validate ``on_error``."""
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")


def group_files(
    files: list[FileInfo],
    blocksize: int | None,
    files_per_partition: int | None,
    split: Any = None,
) -> list[PartitionSpec]:
    """Group sorted files into partitions.

    With ``files_per_partition``: that many whole files each. With ``blocksize``:
    consecutive files up to ``blocksize`` bytes together; a file larger than ``blocksize``
    is given to ``split(file) -> [(start, end), ...]`` (None: keep it whole) and each range
    becomes a partition of its own.
    """
    specs: list[PartitionSpec] = []

    def add(paths: list[str], start: int | None = None, end: int | None = None) -> None:
        specs.append(PartitionSpec(len(specs), tuple(paths), start, end))

    if files_per_partition is not None:
        for i in range(0, len(files), files_per_partition):
            add([f.path for f in files[i : i + files_per_partition]])
        return specs
    assert blocksize is not None
    group: list[str] = []
    size = 0
    for f in files:
        ranges = split(f) if (split is not None and f.size > blocksize) else None
        if ranges:
            if group:
                add(group)
                group, size = [], 0
            for start, end in ranges:
                add([f.path], start, end)
            continue
        if group and size + f.size > blocksize:
            add(group)
            group, size = [], 0
        group.append(f.path)
        size += f.size
    if group:
        add(group)
    return specs


def byte_ranges(f: FileInfo, blocksize: int) -> list[tuple[int, int]] | None:
    """Byte ranges of at most ``blocksize`` covering an uncompressed file (None when
    compressed): as few as that allows, of equal length (give or take a byte), so a file a
    little larger than ``blocksize`` is not read as a partition and a sliver."""
    if compression_of(f.path):
        return None
    n = max(1, -(-f.size // blocksize))
    bounds = [f.size * k // n for k in range(n + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(n) if bounds[k + 1] > bounds[k]]


def warn_quarantined(label: str, spec: PartitionSpec, n: int, where: str) -> None:
    """Warn that ``n`` records of a partition were quarantined and where they went."""
    files = ", ".join(os.path.basename(p) for p in spec.paths[:3])
    if len(spec.paths) > 3:
        files += f", ... ({len(spec.paths)} files)"
    warnings.warn(
        f"{label}: {n} bad record(s) quarantined from partition {spec.index} ({files}); "
        f"written to {where}",
        QuarantineWarning,
        stacklevel=3,
    )


def backend_meta(meta: pd.DataFrame, backend: str) -> Any:
    """``meta`` converted to the backend that partitions will be in."""
    return _backend.to_backend(meta, backend)


class FileReader(Reader):
    """The base of file readers: partitions from a file listing, reads, ``to_dask()``.

    A subclass is a dataclass with the fields annotated here, and gives the file suffixes
    a directory listing picks up (``suffixes``), its name for labels (``format_name``:
    tasks are labelled ``read-<name>``, warnings ``read_<name>``), how one file is read
    (:meth:`read_file`), the empty frame of the output (:meth:`meta`) and, optionally, how
    a file larger than ``blocksize`` is cut into ranges (:meth:`split_file`; by default
    files are read whole). Partitioning, out-of-memory splitting, size estimates, resume
    and quarantine come with it (see ``docs/io.md``, "Writing a reader").
    """

    suffixes: ClassVar[tuple[str, ...]] = ()
    format_name: ClassVar[str] = ""
    #: What ``PartitionSpec.start``/``end`` count: ``"bytes"`` or e.g. ``"row_groups"``.
    range_unit: ClassVar[str] = "bytes"
    #: In-memory bytes per stored byte of an uncompressed file of this format (a rough guess).
    expansion: ClassVar[float] = 1.0

    paths: Any
    columns: Sequence[str] | None
    add_filename: bool
    blocksize: int | str | None
    files_per_partition: int | None
    on_error: str
    quarantine_path: str | None
    storage_options: dict[str, Any] | None

    def _check_arguments(self) -> None:
        """Validate the shared arguments (called first by the subclass' ``__post_init__``)."""
        check_on_error(self.on_error)
        check_partitioning(self.blocksize, self.files_per_partition)
        if isinstance(self.paths, os.PathLike):
            self.paths = os.fspath(self.paths)

    # -- the Reader contract ---------------------------------------------------------------
    def partitions(self, workers: sizing.Workers | None = None) -> list[PartitionSpec]:
        """List the partitions, in sorted path order.

        Mostly file listing and sizes; only a file larger than ``blocksize`` may be opened,
        to find where it splits. Without a ``blocksize``, the partitions are sized for
        ``workers`` (else for the active client's workers).
        """
        files = list_files(self.paths, self.suffixes, self.storage_options)
        # Resolved here, on the client, from the whole listing; travels with the reader.
        self._id_names = id_names([f.path for f in files])
        bs = self._resolve_blocksize(sum(f.size or 0 for f in files), workers)
        self._listed_blocksize = bs
        specs = group_files(
            files,
            bs,
            self.files_per_partition,
            split=(lambda f: self.split_file(f, bs)) if bs else None,
        )
        # each file's identity (size, modification time or etag) goes with its partitions,
        # so a resumed run redoes a partition whose input changed (Reader.fingerprint)
        ident = {f.path: (f.size, f.version) for f in files}
        return [replace(s, extra={**s.extra, "inputs": [ident[p] for p in s.paths]}) for s in specs]

    def source_name(self, spec: PartitionSpec) -> str | None:
        """The file's path relative to the input directory it was found in (its base name
        for a file or glob given directly), without format and compression suffixes."""
        if len(spec.paths) != 1 or spec.start is not None:
            return None
        path = spec.paths[0]
        name = basename(path)
        for location in self.input_locations():
            if "://" not in location and not any(c in location for c in "*?["):
                location = os.path.abspath(location)
            top = location.rstrip("/") + "/"
            if path.startswith(top):
                name = path[len(top) :]
                break
        lower = name.lower()
        for suffix in sorted(self.suffixes, key=len, reverse=True):
            if lower.endswith(suffix.lower()):
                return name[: -len(suffix)]
        return name

    def input_locations(self) -> list[str]:
        """The given paths (a glob by the folder it starts in)."""
        items = [self.paths] if isinstance(self.paths, (str, os.PathLike)) else self.paths
        return [os.fspath(p) for p in items]

    def read_partition(self, spec: PartitionSpec) -> ReadResult:
        """Read one partition: the good documents and the quarantined records."""
        result = self._read_pandas(spec)
        return ReadResult(_backend.to_backend(result.data), result.quarantine, result.docs_read)

    def split(self, spec: PartitionSpec) -> tuple[PartitionSpec, PartitionSpec] | None:
        """Halve a range partition (a line or row group belongs to the half it starts in).

        Whole files cannot be read in part: None, and the executor keeps row slices.
        """
        if spec.start is None or spec.end is None or spec.end - spec.start < 2:
            return None
        mid = (spec.start + spec.end) // 2
        return replace(spec, end=mid), replace(spec, start=mid)

    def estimated_bytes(self, spec: PartitionSpec) -> float | None:
        """Stored bytes (a byte range's length, else the files' sizes) times the expansion.

        Compressed files count :data:`COMPRESSED_EXPANSION` times their size, others
        :attr:`expansion` times, and the whole :data:`IN_MEMORY` times (the frame and a
        stage's output from it).
        """
        if self.range_unit == "bytes" and spec.start is not None and spec.end is not None:
            return float(spec.end - spec.start) * self.expansion * IN_MEMORY
        nbytes = 0.0
        for path in spec.paths:
            try:
                fs, fpath = get_fs(path, self.storage_options)
                size = int(fs.size(fpath) or 0)
            except Exception:  # a size we cannot get is no reason to stop a run
                size = 0
            factor = COMPRESSED_EXPANSION if compression_of(path) else self.expansion
            nbytes += size * factor
        return nbytes * IN_MEMORY

    @property
    def partition_bytes(self) -> int | None:
        """The blocksize in bytes (None with ``files_per_partition``): the one the last
        listing used, else what one would use now."""
        return getattr(self, "_listed_blocksize", None) or self._resolve_blocksize()

    def _resolve_blocksize(
        self, input_bytes: float | None = None, workers: sizing.Workers | None = None
    ) -> int | None:
        return sizing.resolve_blocksize(
            self.blocksize,
            self.files_per_partition,
            expansion=self.expansion,
            input_bytes=input_bytes,
            workers=workers,
        )

    def check_columns(self, specs: list[PartitionSpec] | None = None) -> None:
        """Raise :class:`~curator_dask.errors.ColumnError` when the first readable file
        (:meth:`input_columns`) lacks the text column, or a named id column."""
        found = self.input_columns(self.partitions() if specs is None else specs)
        if found is None:
            return
        path, names = found
        ident = None if self.id_column == "id" else self.id_column
        check_columns(names, path, self.text_column, ident)

    def input_columns(self, specs: list[PartitionSpec]) -> tuple[str, list[str]] | None:
        """``(file, its columns)`` of the first file that has records, from its metadata or
        first records; None when unknown (the default: nothing is checked)."""
        return None

    def to_dask(self, workers: sizing.Workers | None = None) -> Any:
        """Return a lazy dask dataframe with one partition per :meth:`partitions` entry
        (listed for ``workers``).

        Raises :class:`~curator_dask.errors.ColumnError` now if the input lacks the text
        column (:meth:`check_columns`).
        Nothing is read now except the start of the first file (for ``meta``). When a
        partition is computed, its quarantined records are written to
        ``<quarantine_path>/part-<index:05d>.jsonl`` (overwritten by recomputes) and a
        :class:`~curator_dask.io.QuarantineWarning` gives their number.
        """
        import dask.dataframe as dd

        specs = self.partitions(workers)
        task = self.read_task(specs)
        return dd.from_map(
            task,
            specs,
            meta=backend_meta(task.meta, task.backend),
            label=f"read-{self.format_name}",
            enforce_metadata=False,
        )

    def read_task(self, specs: list[PartitionSpec]) -> _ReadTask:
        """What reads each partition of :meth:`to_dask` (called with a spec of ``specs``:
        the partition, conformed to ``.meta``, its quarantined records written and warned
        of); for a run that reads its partitions without a dask frame (a dedup workflow's
        in-memory run). Checks the columns first (:meth:`check_columns`)."""
        self.check_columns(specs)
        return _ReadTask(
            self,
            self.meta(specs),
            resolve_quarantine_dir(self.quarantine_path),
            _backend.backend_name(),
            f"read_{self.format_name}",
        )

    def id_name(self, path: str) -> str:
        """The file name that generated ids of ``path`` start with (see :func:`id_names`)."""
        names: dict[str, str] = getattr(self, "_id_names", None) or {}
        return names.get(path) or basename(path)

    # -- what a subclass gives -------------------------------------------------------------
    def split_file(self, f: FileInfo, blocksize: int) -> list[tuple[int, int]] | None:
        """Ranges (``PartitionSpec.start``/``end``) of a file larger than ``blocksize``.

        None (the default) reads the file whole, as one partition.
        """
        return None

    def read_file(
        self, path: str, start: int | None, end: int | None
    ) -> tuple[pd.DataFrame, BadRecords]:
        """Read one file (or the ``start``/``end`` range of it) into a frame and bad records.

        Ids are strings (:func:`id_text`); a frame made by :func:`fill_ids` with ``mark=True``
        carries :data:`GENERATED_MARK`, which :meth:`read_partition` uses and drops.
        """
        raise NotImplementedError

    def meta(self, specs: list[PartitionSpec]) -> pd.DataFrame:
        """An empty frame with the columns and dtypes of the output."""
        raise NotImplementedError

    # -- internals -------------------------------------------------------------------------
    def _read_pandas(self, spec: PartitionSpec) -> ReadResult:
        frames, quarantines = [], []
        docs = 0
        for path in spec.paths:
            part, bad = self.read_file(path, spec.start, spec.end)
            docs += len(part) + len(bad)
            if self.add_filename:
                part = part.assign(
                    file_name=pd.Series(basename(path), index=part.index, dtype=STRING_DTYPE)
                )
            frames.append(part)
            quarantines.append(bad.frame())
        frames = distinct_generated_ids(frames, self.id_column)
        data = finish_frame(
            frames,
            id_column=self.id_column,
            text_column=self.text_column,
            columns=self.columns,
            add_filename=self.add_filename,
        )
        data = unify_types(data, skip=(self.id_column, self.text_column))
        return ReadResult(data, concat_quarantine(quarantines), docs)


@dataclass
class _ReadTask:
    """What a ``to_dask()`` partition runs: read, write the quarantine, conform to meta."""

    reader: FileReader
    meta: pd.DataFrame
    quarantine_dir: str
    backend: str
    label: str

    def __call__(self, spec: PartitionSpec) -> Any:
        result = self.reader._read_pandas(spec)
        where = write_quarantine_file(
            result.quarantine, self.quarantine_dir, spec.index, self.reader.storage_options
        )
        if where is not None:
            warn_quarantined(self.label, spec, len(result.quarantine), where)
        return _backend.to_backend(conform(result.data, self.meta), self.backend)
