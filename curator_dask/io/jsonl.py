"""The JSONL reader: one JSON object per line, local or remote, plain or compressed.

Partitioning, ids, bad-input handling and the quarantine format are described in
``docs/io.md``; the short version is in :class:`JsonlReader`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.json as pj

from curator_dask import config
from curator_dask.io._files import (
    COMPRESSION_SUFFIXES,
    Decompressed,
    FileInfo,
    TruncatedInputError,
    basename,
    compression_of,
    decompress,
    get_fs,
    is_codec_error,
    read_range,
)
from curator_dask.io.base import PartitionSpec
from curator_dask.io.file_reader import (
    STRING_DTYPE,
    BadRecords,
    FileReader,
    arrow_id_is_exact,
    arrow_ids_to_string,
    byte_ranges,
    empty_frame,
    fill_ids,
    finish_frame,
    id_text,
    raise_bad,
)
from curator_dask.io.formats import register_reader

#: File names a directory listing picks up (each also with a compression suffix).
JSONL_SUFFIXES = tuple(
    s + c for s in (".jsonl", ".json", ".ndjson", ".jsonlines") for c in ("", *COMPRESSION_SUFFIXES)
)

_STRING_TYPES = (pa.string(), pa.large_string(), pa.string_view())
_MIN_ARROW_BLOCK = 1 << 20


@dataclass
class _Lines:
    """Line boundaries of a buffer: start and end (newline and CR excluded) of every line."""

    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def of(cls, buf: bytes) -> _Lines:
        arr = np.frombuffer(buf, dtype=np.uint8)
        nl = np.flatnonzero(arr == 10)
        starts = np.concatenate(([0], nl + 1))
        ends = np.concatenate((nl, [len(arr)]))
        if len(buf) == 0 or buf.endswith(b"\n"):
            starts, ends = starts[:-1], ends[:-1]
        if len(ends):
            cr = (ends > starts) & (arr[np.maximum(ends - 1, 0)] == 13)
            ends = ends - cr
        return cls(starts.astype(np.int64), ends.astype(np.int64))


def parse_jsonl_block(
    buf: bytes,
    *,
    file: str,
    offset: int = 0,
    first_line: int | None = 1,
    text_column: str = "text",
    id_column: str = "id",
    max_document_bytes: int | None = None,
    on_error: str = "quarantine",
    mark_generated: bool = False,
    id_name: str | None = None,
) -> tuple[pd.DataFrame, BadRecords]:
    """Parse whole JSONL lines into a pandas frame and the records to quarantine.

    ``offset`` is the file offset of ``buf[0]``; ``first_line`` the 1-based line number of
    the first line in ``buf`` (None when unknown). Blank lines are not records. Ids missing
    from the input become ``"<id_name>:<byte offset>"`` (``id_name``: the file's base name
    unless given).
    """
    bad = BadRecords(file)
    name = id_name or basename(file)
    lines = _Lines.of(buf)
    lengths = lines.ends - lines.starts
    records = lengths > 0
    if max_document_bytes is not None:
        too_big = records & (lengths > max_document_bytes)
        for i in np.flatnonzero(too_big):
            _bad(
                bad,
                on_error,
                first_line,
                i,
                offset,
                lines,
                buf,
                f"document of {lengths[i]} bytes exceeds max_document_bytes={max_document_bytes}",
            )
        records &= ~too_big
        if too_big.any():
            buf, lines, records = _without(buf, lines, records, too_big)
    idx = np.flatnonzero(records)
    if len(idx) == 0:
        return empty_frame(id_column, text_column, False), bad
    ctx = _Block(
        memoryview(buf), lines, lengths, bad, on_error, first_line, offset, text_column, id_column
    )
    pieces = [(p, i) for p, i in _parse_records(ctx, idx) if len(i)]
    if not pieces:  # every line was bad
        return empty_frame(id_column, text_column, False), bad
    frames = [p for p, _ in pieces]
    part = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    idx = np.concatenate([i for _, i in pieces])
    if text_column in part.columns:
        part[text_column] = part[text_column].astype(STRING_DTYPE)
    else:
        part[text_column] = pd.Series([], dtype=STRING_DTYPE)
    part = fill_ids(part, id_column, name, offset + lines.starts[idx], mark=mark_generated)
    return part, bad


@dataclass
class _Block:
    """A buffer being parsed and where its bad records go."""

    buf: memoryview
    lines: _Lines
    lengths: np.ndarray
    bad: BadRecords
    on_error: str
    first_line: int | None
    offset: int
    text_column: str
    id_column: str

    def reject(self, i: int, reason: str) -> None:
        _bad(self.bad, self.on_error, self.first_line, i, self.offset, self.lines, self.buf, reason)

    def raw(self, i: int) -> bytes:
        return bytes(self.buf[self.lines.starts[i] : self.lines.ends[i]])


#: Below this many records a run that pyarrow refuses is examined line by line.
_PER_LINE_RECORDS = 32
_SPLIT_INTO = 8
#: Type conflicts between good records tolerated in a run before going line by line.
_MAX_CONFLICTS = 8
#: pyarrow reports an exact failing row only when the run is one parse block.
_MAX_SINGLE_BLOCK = 1 << 30
_ROW_RE = re.compile(r"in row (\d+)")


def _parse_records(ctx: _Block, idx: np.ndarray) -> list[tuple[pd.DataFrame, np.ndarray]]:
    """Parse the records ``idx`` (line numbers in the block): [(frame, records kept)].

    The whole run of lines is parsed at once by pyarrow (multi-threaded). When pyarrow
    refuses it (a bad line somewhere, or a field whose type differs between records), the
    run is parsed again as one parse block, where pyarrow names the failing row: the rows
    before it are parsed together, only that line is examined on its own, and parsing goes
    on after it. One bad line costs about two vectorised passes, not a Python loop.
    """
    got = _accept(ctx, idx, _arrow_parse(_span(ctx, idx), int(ctx.lengths[idx].max()), len(idx)))
    return [got] if got is not None else _parse_located(ctx, idx)


def _span(ctx: _Block, idx: np.ndarray) -> memoryview:
    # Lines between the records are blank (or blanked out): pyarrow skips them.
    return ctx.buf[int(ctx.lines.starts[idx[0]]) : int(ctx.lines.ends[idx[-1]])]


def _accept(
    ctx: _Block, idx: np.ndarray, table: pa.Table | None
) -> tuple[pd.DataFrame, np.ndarray] | None:
    """Check the text of a parsed run; quarantine rows without a string text."""
    if table is None:
        return None
    try:
        part, keep = _check_text_arrow(table, ctx.text_column, ctx.id_column)
    except (pa.ArrowException, UnicodeDecodeError):
        return None
    col = table.column(ctx.text_column) if ctx.text_column in table.column_names else None
    for j in np.flatnonzero(~keep):
        ctx.reject(idx[j], _text_reason(None if col is None else col[int(j)], ctx.text_column))
    if not arrow_id_is_exact(table, ctx.id_column):
        # e.g. an integer id above 2**63, which pyarrow reads as a double: take it from the
        # line itself (Python's integers are exact).
        ids = [id_text(json.loads(ctx.raw(i)).get(ctx.id_column)) for i in idx[keep]]
        part[ctx.id_column] = pd.Series(ids, index=part.index, dtype=STRING_DTYPE)
    return part, idx[keep]


def _parse_located(ctx: _Block, idx: np.ndarray) -> list[tuple[pd.DataFrame, np.ndarray]]:
    out: list[tuple[pd.DataFrame, np.ndarray]] = []
    conflicts = 0
    while len(idx):
        span = _span(ctx, idx)
        if len(span) >= _MAX_SINGLE_BLOCK or conflicts > _MAX_CONFLICTS:
            return out + _bisect(ctx, idx)
        max_len = int(ctx.lengths[idx].max())
        table, row = _arrow_parse_located(span, len(idx))
        got = _accept(ctx, idx, table)
        if got is not None:
            return [*out, got]
        if row is None or row >= len(idx):
            return out + _bisect(ctx, idx)
        if row:
            head = idx[:row]
            got = _accept(ctx, head, _arrow_parse(_span(ctx, head), max_len, len(head)))
            out.extend([got] if got is not None else _bisect(ctx, head))
        part, kept = _parse_lines(ctx, idx[row : row + 1])
        if len(kept):
            conflicts += 1  # a good record that clashes with the types of earlier ones
            out.append((part, kept))
        idx = idx[row + 1 :]
    return out


def _bisect(ctx: _Block, idx: np.ndarray) -> list[tuple[pd.DataFrame, np.ndarray]]:
    """Cut a refused run into pieces until they parse, or are small enough to go per line."""
    if len(idx) <= _PER_LINE_RECORDS:
        return [_parse_lines(ctx, idx)]
    out = []
    for piece in np.array_split(idx, _SPLIT_INTO):
        if len(piece):
            table = _arrow_parse(_span(ctx, piece), int(ctx.lengths[piece].max()), len(piece))
            got = _accept(ctx, piece, table)
            out.extend([got] if got is not None else _bisect(ctx, piece))
    return out


def _arrow_parse_located(
    buf: bytes | memoryview, n_records: int
) -> tuple[pa.Table | None, int | None]:
    """Parse as a single pyarrow block: the table, or None and the failing row if known."""
    try:
        table = pj.read_json(
            pa.BufferReader(pa.py_buffer(buf)),
            read_options=pj.ReadOptions(block_size=len(buf) + 1, use_threads=False),
        )
        table.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        m = _ROW_RE.search(str(err))
        return None, int(m.group(1)) if m else None
    except UnicodeDecodeError:
        return None, None
    return (table, None) if table.num_rows == n_records else (None, None)


def _without(
    buf: bytes, lines: _Lines, records: np.ndarray, drop: np.ndarray
) -> tuple[bytes, _Lines, np.ndarray]:
    """Blank out dropped lines (replace their bytes by spaces) so positions stay valid."""
    out = bytearray(buf)
    for i in np.flatnonzero(drop):
        out[lines.starts[i] : lines.ends[i]] = b" " * int(lines.ends[i] - lines.starts[i])
    return bytes(out), lines, records


def _bad(
    bad: BadRecords,
    on_error: str,
    first_line: int | None,
    i: int,
    offset: int,
    lines: _Lines,
    buf: bytes | memoryview,
    reason: str,
) -> None:
    line = first_line + int(i) if first_line is not None else -1
    pos = offset + int(lines.starts[i])
    if on_error == "raise":
        raise_bad(bad.file, line, pos, reason)
    bad.add(line, pos, reason, buf[lines.starts[i] : lines.ends[i]])


def _arrow_parse(buf: bytes | memoryview, max_len: int, n_records: int) -> pa.Table | None:
    """Parse with pyarrow's vectorised JSON reader; None when the block needs a closer look."""
    block = max(_MIN_ARROW_BLOCK, max_len + (1 << 16))
    try:
        table = pj.read_json(
            pa.BufferReader(pa.py_buffer(buf)), read_options=pj.ReadOptions(block_size=block)
        )
        # pyarrow does not check UTF-8 while parsing; a full validation does.
        table.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
        return None
    if table.num_rows != n_records:
        # e.g. two objects on one line, or a whitespace-only line: look line by line.
        return None
    return table


def _check_text_arrow(
    table: pa.Table, text_column: str, id_column: str
) -> tuple[pd.DataFrame, np.ndarray]:
    """Convert to pandas keeping rows whose text is a string; return (frame, keep mask)."""
    if text_column not in table.column_names:
        keep = np.zeros(table.num_rows, dtype=bool)
    else:
        col = table.column(text_column)
        if col.type in _STRING_TYPES:
            keep = ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        else:
            keep = np.zeros(table.num_rows, dtype=bool)
    if not keep.all():
        table = table.filter(pa.array(keep))
    part = arrow_ids_to_string(table, id_column).to_pandas()
    if text_column in part.columns:
        part[text_column] = part[text_column].astype(STRING_DTYPE)
    else:
        part[text_column] = pd.Series([], dtype=STRING_DTYPE)
    return part, keep


def _text_reason(value: Any, text_column: str) -> str:
    if value is None or (isinstance(value, pa.Scalar) and not value.is_valid):
        return f"missing or null text field {text_column!r}"
    type_name = type(value.as_py()).__name__ if isinstance(value, pa.Scalar) else "?"
    return f"text field {text_column!r} is not a string ({type_name})"


def _parse_lines(ctx: _Block, idx: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """Slow path for a few lines: decode each to find the bad records, then build the frame."""
    text_column = ctx.text_column
    good: list[int] = []
    recs: list[dict[str, Any]] = []
    for i in idx:
        raw = ctx.raw(i)
        if not raw.strip():
            continue  # whitespace-only: a blank line, not a record
        reason = None
        try:
            rec = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            reason = f"invalid UTF-8: {err.reason} at byte {err.start}"
        except ValueError as err:
            reason = f"malformed JSON: {err}"
        else:
            if not isinstance(rec, dict):
                reason = f"not a JSON object ({type(rec).__name__})"
            else:
                text = rec.get(text_column)
                if text is None:
                    reason = f"missing or null text field {text_column!r}"
                elif not isinstance(text, str):
                    reason = f"text field {text_column!r} is not a string ({type(text).__name__})"
                elif not _encodable(text):
                    reason = f"text field {text_column!r} holds an unpaired surrogate escape"
                else:
                    key = _unencodable_field(rec)
                    if key is not None:
                        # it could not be written as UTF-8 by any writer
                        reason = f"field {key!r} holds an unpaired surrogate escape"
        if reason is not None:
            ctx.reject(i, reason)
            continue
        good.append(int(i))
        recs.append(rec)
    good_idx = np.asarray(good, dtype=np.int64)
    if not good:
        return pd.DataFrame({text_column: pd.Series([], dtype=STRING_DTYPE)}), good_idx
    # Parse the good lines again with pyarrow so the column types match the fast path;
    # records that pyarrow still refuses (duplicate keys, a field both number and string)
    # are built from the decoded objects.
    joined = b"\n".join(ctx.raw(i) for i in good)
    table = _arrow_parse(joined, int(ctx.lengths[good_idx].max()), len(good))
    ids = [id_text(rec.get(ctx.id_column)) for rec in recs]
    if table is not None:
        part = arrow_ids_to_string(table, ctx.id_column).to_pandas()
    else:
        part = pd.DataFrame.from_records(recs)
    if ctx.id_column in part.columns:
        part[ctx.id_column] = pd.Series(ids, index=part.index, dtype=STRING_DTYPE)
    return part, good_idx


def _unencodable_field(rec: dict[str, Any]) -> str | None:
    """The first top-level key whose value (or a string inside it) is not valid UTF-8."""
    for key, value in rec.items():
        if not _encodable(key) or not _all_encodable(value):
            return key.encode("utf-8", "backslashreplace").decode() if isinstance(key, str) else key
    return None


def _all_encodable(value: Any) -> bool:
    if isinstance(value, str):
        return _encodable(value)
    if isinstance(value, list):
        return all(_all_encodable(v) for v in value)
    if isinstance(value, dict):
        return all(_encodable(k) and _all_encodable(v) for k, v in value.items())
    return True


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@register_reader
@dataclass
class JsonlReader(FileReader):
    """Read JSONL files (one JSON object a line) as partitions of documents.

    Parameters
    ----------
    paths : str or list of str
        A file, a directory (searched recursively for ``.jsonl``/``.json``/``.ndjson``
        files, plain or ``.gz``/``.zst``/``.bz2``/``.xz``; names starting with ``.`` or
        ``_`` are skipped), a glob, or a list of these; local or any fsspec URL
        (``s3://bucket/prefix``).
    columns : list of str, optional
        Columns to keep; the id and text columns are always kept.
    add_filename : bool
        Add a ``file_name`` column with the input file's base name.
    text_column, id_column : str
        Names of the text and id fields.
    blocksize : int or str, optional
        Target bytes per partition (``"256MB"``); default ``curator.io.blocksize``. Small
        files are grouped up to it; an uncompressed file larger than it is split into byte
        ranges at line boundaries (a line belongs to the range it starts in). Compressed
        files are always read whole.
    files_per_partition : int, optional
        Instead of ``blocksize``: this many whole files per partition.
    on_error : {"quarantine", "raise"}
        What to do with a bad record (malformed JSON, invalid UTF-8, not an object, text
        missing / null / not a string, longer than ``max_document_bytes``, the unreadable
        tail of a truncated or corrupt compressed file): set it aside in the quarantine, or
        raise :class:`~curator_dask.io.MalformedInputError` naming file and line.
    quarantine_path : str, optional
        Where :meth:`to_dask` writes quarantined records; default
        ``curator.io.quarantine-dir``, else ``./curator_quarantine``.
    max_document_bytes : int, optional
        Quarantine lines longer than this; default ``curator.io.max-document-bytes`` (None:
        no limit).
    storage_options : dict, optional
        Passed to fsspec (for S3: ``key``, ``secret``, ``endpoint_url``, ...).

    Examples
    --------
    >>> from curator_dask.io import JsonlReader
    >>> from importlib.resources import files
    >>> reader = JsonlReader(str(files("curator_dask") / "data" / "sample.jsonl.gz"))
    >>> [spec.index for spec in reader.partitions()]
    [0]
    >>> reader.read_partition(reader.partitions()[0]).docs_read
    4000
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
    max_document_bytes: int | None = None
    storage_options: dict[str, Any] | None = field(default=None, repr=False)

    suffixes = JSONL_SUFFIXES
    format_name = "jsonl"

    def __post_init__(self) -> None:
        self._check_arguments()
        if self.max_document_bytes is None:
            self.max_document_bytes = config.get("io.max-document-bytes")
        if self.max_document_bytes is not None and int(self.max_document_bytes) < 1:
            raise ValueError(f"max_document_bytes must be >= 1, got {self.max_document_bytes}")

    # -- internals -------------------------------------------------------------------------
    def split_file(self, f: FileInfo, blocksize: int) -> list[tuple[int, int]] | None:
        return byte_ranges(f, blocksize)

    def read_file(
        self, path: str, start: int | None, end: int | None
    ) -> tuple[pd.DataFrame, BadRecords]:
        fs, fpath = get_fs(path, self.storage_options)
        kind = compression_of(path)
        if kind is not None:
            return self._read_compressed(path, decompress(fs.cat_file(fpath), kind, path))
        if start is not None:
            buf, offset = read_range(fs, fpath, start, int(end if end is not None else 0))
        else:
            buf, offset = fs.cat_file(fpath), 0
        return self._parse(buf, path, offset)

    def _parse(self, buf: bytes, path: str, offset: int) -> tuple[pd.DataFrame, BadRecords]:
        return parse_jsonl_block(
            buf,
            file=path,
            offset=offset,
            first_line=1 if offset == 0 else None,
            text_column=self.text_column,
            id_column=self.id_column,
            max_document_bytes=self.max_document_bytes,
            on_error=self.on_error,
            mark_generated=True,
            id_name=self.id_name(path),
        )

    def _read_compressed(self, path: str, dec: Decompressed) -> tuple[pd.DataFrame, BadRecords]:
        """Parse a decompressed file; quarantine what a corrupt stream leaves in doubt.

        The whole lines of the intact prefix are parsed as usual. Whole lines decoded after
        it (a corrupt stream may have decoded them wrongly) are quarantined one row each,
        and what could not be decoded at all (a partial last line, compressed bytes beyond
        the failing checksum) is one more row, at the offset where decoding stopped.
        """
        if dec.problem is not None and self.on_error == "raise":
            raise TruncatedInputError(dec.problem)
        buf = dec.data
        cut = buf.rfind(b"\n", 0, dec.intact) + 1 if dec.intact < len(buf) else len(buf)
        if dec.problem is not None and cut == len(buf):
            cut = buf.rfind(b"\n") + 1
        if dec.problem is None:
            return self._parse(buf, path, 0)
        part, bad = self._parse(buf[:cut], path, 0)
        line = buf.count(b"\n", 0, cut) + 1
        pos = cut
        doubt = f"{dec.problem} (decoded after the last intact point, may be altered)"
        while True:
            nl = buf.find(b"\n", pos)
            if nl < 0:
                break
            raw = buf[pos:nl].rstrip(b"\r")
            if raw.strip():
                bad.add(line, pos, doubt, raw)
            line, pos = line + 1, nl + 1
        left = dec.size - dec.stopped_at
        tail = buf[pos:]
        if tail or left > dec.trailer:
            where = f"; {left} compressed bytes not decoded" if left else ""
            bad.add(line, pos, f"{dec.problem} (unreadable tail{where})", tail)
        return part, bad

    def meta(self, specs: list[PartitionSpec]) -> pd.DataFrame:
        """An empty frame with the columns and dtypes of the first records of the input."""
        for spec in specs[:8]:
            for path in spec.paths[:1]:
                head = self._head(path)
                if not head:
                    continue
                part, _ = parse_jsonl_block(
                    head,
                    file=path,
                    text_column=self.text_column,
                    id_column=self.id_column,
                    max_document_bytes=self.max_document_bytes,
                )
                if len(part):
                    if self.add_filename:
                        part = part.assign(
                            file_name=pd.Series("", index=part.index, dtype=STRING_DTYPE)
                        )
                    part = finish_frame(
                        [part],
                        id_column=self.id_column,
                        text_column=self.text_column,
                        columns=self.columns,
                        add_filename=self.add_filename,
                    )
                    return part.iloc[:0]
        return empty_frame(self.id_column, self.text_column, self.add_filename)

    def input_columns(self, specs: list[PartitionSpec]) -> tuple[str, list[str]] | None:
        """The fields of the first JSON objects (up to 1,000 lines) of the first files.

        Files are looked at in order until one has the text column (a first file of broken
        records says nothing about the others); the fields of the first one with records
        are returned when none has it.
        """
        first: tuple[str, list[str]] | None = None
        for spec in specs[:8]:
            for path in spec.paths[:8]:
                names: dict[str, None] = {}
                for line in self._head(path).splitlines()[:1000]:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict):
                        names.update(dict.fromkeys(record))
                if self.text_column in names:
                    return path, list(names)
                if names and first is None:
                    first = path, list(names)
        return first

    def _head(self, path: str, nbytes: int = 1 << 20) -> bytes:
        """The first whole lines (about ``nbytes``) of a file, decompressed."""
        fs, fpath = get_fs(path, self.storage_options)
        kind = compression_of(path)
        if kind is None:
            buf, _ = read_range(fs, fpath, 0, nbytes)
            return buf
        import fsspec

        name = {"gzip": "gzip", "bz2": "bz2", "xz": "xz", "zstd": "zstd"}[kind]
        chunks: list[bytes] = []
        try:
            with fsspec.open(path, "rb", compression=name, **(self.storage_options or {})) as f:
                while True:
                    chunk = f.read(nbytes)
                    chunks.append(chunk)
                    if not chunk or b"\n" in chunk:
                        break
        except Exception as err:  # zstd and lzma errors are no OSError
            if not is_codec_error(err):
                raise
            # a broken file: read_partition reports it (quarantine or an error naming it)
        head = b"".join(chunks)
        return head[: head.rfind(b"\n") + 1]


def read_jsonl(
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
    max_document_bytes: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Any:
    """Read JSONL files into a lazy dask dataframe (see :class:`JsonlReader` for arguments).

    Returns
    -------
    dask.dataframe.DataFrame
        One partition per :meth:`JsonlReader.partitions` entry, with string ``id`` and
        ``text`` columns first; pandas partitions, or cudf with the cudf backend.

    Examples
    --------
    >>> from importlib.resources import files
    >>> df = read_jsonl(str(files("curator_dask") / "data" / "sample.jsonl.gz"))
    >>> list(df.columns)
    ['id', 'text', 'source']
    >>> len(df)
    4000
    """
    return JsonlReader(
        paths,
        columns=columns,
        add_filename=add_filename,
        text_column=text_column,
        id_column=id_column,
        blocksize=blocksize,
        files_per_partition=files_per_partition,
        on_error=on_error,
        quarantine_path=quarantine_path,
        max_document_bytes=max_document_bytes,
        storage_options=storage_options,
    ).to_dask()
