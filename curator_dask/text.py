"""The string kit shared by the filters and modifiers: definitions, primitives, measures.

Everything here works on a pandas Series (arrow-backed strings; regular expressions run in
pyarrow's RE2) or on a cudf Series (libcudf's regex engine), through the pandas ``.str``
API both libraries share. Two things differ between the engines and are kept here, in one
place:

- regular-expression dialect: RE2 has Unicode classes (``\\pL``) whose ``\\w``/``\\d`` are
  ASCII-only; libcudf has Unicode-aware ``\\w``/``\\d`` but no ``\\p{..}``
  (:func:`char_class`);
- splitting a text into rows (words, lines, paragraphs): pandas goes through pyarrow
  list kernels without building Python lists, cudf through ``str.split().explode()``
  (:func:`split_rows`). The second, generic path also runs on pandas
  (``_FAST_PANDAS = False``), which is how the tests check the cudf code path on a CPU.

On pandas, the heuristic filters read per-document measures (:func:`document_measures`,
:func:`ngram_measures`, :func:`word_list_counts`) computed by fused numba kernels in one
pass over the Arrow UTF-8 buffer. A partition's measures are computed once and reused by
every later filter of the pipeline (see :func:`cached_measures`); with ``_FUSED = False``
the filters use the vectorised kernels instead, which is how the tests hold the two to
identical scores.

Definitions used by every filter:

- *whitespace* is what Python's :meth:`str.isspace` accepts (:data:`WHITESPACE`);
- a *word* is a maximal run of non-whitespace characters (Python's ``str.split()``);
- a *line* is a piece of ``text.split("\\n")`` with surrounding whitespace stripped;
  empty lines are not lines;
- a *paragraph* is a block separated by one or more blank lines, stripped; empty blocks
  are not paragraphs.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask import _ckernels, _text_kernels
from curator_dask._backend import array_module, frame_module

#: The characters for which Python's ``str.isspace()`` is True, as a regex class body.
#: ASCII control characters are escapes (``\\t``, ``\\x0b``); the others are the characters
#: themselves: libcudf's regex parser packs each pattern character into its UTF-8 bytes,
#: as it does the text, but reads ``\\x85`` as the number 0x85, which no character of a
#: text is (U+0085 is 0xC285 there). tests/_libcudf_regex.py has the rules.
WHITESPACE = r"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f " + (
    "\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
)
#: Every whitespace character, as a plain string (for ``str.strip``).
WHITESPACE_CHARS = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())
#: Whitespace without the line feed (horizontal whitespace and other separators).
HSPACE = WHITESPACE.replace(r"\n", "")
#: One whitespace character.
WS = f"[{WHITESPACE}]"
#: A word: a maximal run of non-whitespace characters.
WORD = f"[^{WHITESPACE}]+"
#: Separator of paragraphs: a line break, then one or more (possibly blank) empty lines.
PARAGRAPH_SEPARATOR = f"\\n(?:[{HSPACE}]*\\n)+"
#: Characters that end a sentence or a line of prose: ASCII ``. ! ? " '``, the ellipsis,
#: curly closing quotes, and the CJK full stop, exclamation and question marks.
END_MARKS = ".!?\u2026\"'\u201d\u2019\u3002\uff01\uff1f"

# pandas' string dtype backed by pyarrow (pandas 3's default ``str``); pandas < 2.3 spells
# it "pyarrow_numpy" and has no ``na_value`` argument.
try:
    STR_DTYPE = pd.StringDtype("pyarrow", na_value=np.nan)
except TypeError:  # pragma: no cover - pandas 2.2
    STR_DTYPE = pd.StringDtype("pyarrow_numpy")

# Set False (tests) to run the generic, cudf-compatible path on pandas too.
_FAST_PANDAS = True
# Set False (tests) to score with the vectorised kernels instead of the fused ones.
_FUSED = True

#: Character classes by Unicode general category, in RE2's syntax (pyarrow). libcudf has
#: no ``\p{..}`` and its ``\w``/``\d`` are other sets (on an H200, ``[^\W\d_]`` counted
#: 311 of 328 texts differently from ``\pL``), so on cudf these classes are counted
#: through a table of every code point built with RE2 (:func:`count_class`).
_CLASSES = {"letter": r"\pL", "alnum": r"[\pL\pN]", "digit": r"\p{Nd}"}


def is_cudf(obj: Any) -> bool:
    """True for cudf objects."""
    return type(obj).__module__.split(".")[0] == "cudf"


def ascii_nocase(word: str) -> str:
    """Return a regex matching ``word`` with any ASCII letter in either case.

    libcudf's regex engine has no ``(?i)``; each letter becomes a two-letter class.

    >>> ascii_nocase("Edit 2")
    '[eE][dD][iI][tT] 2'
    """
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isascii() and c.isalpha() else c for c in word)


def char_class(text: Any, name: str) -> str:
    """Return the RE2 regex for one ``letter``, ``alnum`` or ``digit`` character.

    Letters are Unicode category L (Python ``str.isalpha``), alphanumerics L or N
    (``str.isalnum``), digits category Nd (``str.isdecimal``). libcudf's regex engine has
    no such classes: on cudf, count with :func:`count_class` or :func:`count_words_with`.
    """
    if is_cudf(text):
        raise TypeError(f"no libcudf regex for the {name!r} class: use count_class")
    return _CLASSES[name]


@functools.cache
def class_table(name: str) -> np.ndarray:
    """``bool[0x110000]``: which code points RE2 puts in class ``name`` (surrogates: no).

    Built once per process with the CPU path's own engine, so both backends count the
    same characters.
    """
    cps = np.arange(0x110000, dtype=np.uint32)
    cps = cps[(cps < 0xD800) | (cps > 0xDFFF)]
    widths = np.select([cps < 0x80, cps < 0x800, cps < 0x10000], [1, 2, 3], 4).astype(np.int32)
    offsets = np.zeros(len(cps) + 1, dtype=np.int32)
    np.cumsum(widths, out=offsets[1:])
    data = cps.astype("<u4").tobytes().decode("utf-32-le").encode("utf-8")
    chars = pa.StringArray.from_buffers(len(cps), pa.py_buffer(offsets), pa.py_buffer(data))
    hit = pc.match_substring_regex(chars, _CLASSES[name]).to_numpy(zero_copy_only=False)
    table = np.zeros(0x110000, dtype=bool)
    table[cps] = hit
    return table


_DEVICE_TABLES: dict[str, Any] = {}


def _table_on(xp: Any, name: str) -> Any:
    """:func:`class_table` in ``xp``'s memory: copied to the device once per process."""
    if xp is np:
        return class_table(name)
    if name not in _DEVICE_TABLES:
        _DEVICE_TABLES[name] = xp.asarray(class_table(name))
    return _DEVICE_TABLES[name]


def unpack_utf8(xp: Any, units: Any) -> Any:
    """Code points from cudf's ``str.code_points()`` units (a character's UTF-8 bytes,
    packed big-endian into one integer: "é" is 0xC3A9)."""
    u = units.astype(xp.uint32)
    b0, b1, b2 = u >> 24, (u >> 16) & 0xFF, (u >> 8) & 0xFF
    last = u & 0x3F
    two = ((b2 & 0x1F) << 6) | last
    three = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | last
    four = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | last
    return xp.where(u < 0x80, u, xp.where(u < 0x10000, two, xp.where(u < 0x1000000, three, four)))


def count_class(text: Any, name: str) -> Any:
    """Number of characters of class ``name`` (``letter``, ``alnum``, ``digit``) per
    document (int64); on cudf through :func:`class_table`, equal to RE2's count."""
    if not is_cudf(text):
        return count(text, _CLASSES[name])
    units = text.str.code_points().values
    xp = array_module(units)
    hit = _table_on(xp, name)[unpack_utf8(xp, units)].astype(xp.int64)
    running = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(hit)])
    ends = xp.cumsum(xp.asarray(text.str.len().values).astype(xp.int64))
    starts = xp.concatenate([xp.zeros(1, dtype=xp.int64), ends[:-1]])
    counts = running[ends] - running[starts]
    return type(text)(counts, index=text.index).astype("int64")


def count_words_with(text: Any, name: str) -> Any:
    """Number of words (runs of non-whitespace) holding a character of class ``name``."""
    if not is_cudf(text):
        return count(text, f"[^{WHITESPACE}]*{_CLASSES[name]}[^{WHITESPACE}]*")
    rows = split_rows(text, WS, regex=True)
    rows["has"] = (count_class(rows["piece"], name) > 0).astype("int64")
    out = per_doc(rows, "has", "sum", len(text)).astype("int64")
    out.index = text.index
    return out


def _is_arrow_string(dtype: Any) -> bool:
    if isinstance(dtype, pd.StringDtype):
        return dtype.storage in ("pyarrow", "pyarrow_numpy")
    if isinstance(dtype, pd.ArrowDtype):
        return pa.types.is_string(dtype.pyarrow_dtype) or pa.types.is_large_string(
            dtype.pyarrow_dtype
        )
    return False


def as_text(text: Any) -> Any:
    """Return ``text`` with missing values as ``""``, a 0..n-1 index, arrow-backed on pandas.

    Object-dtype or python-backed strings would send regexes to Python's ``re`` instead
    of RE2, with other Unicode semantics, and ``string[pyarrow]`` (dask's default) gives
    nullable result dtypes; converting to pandas' ``str`` keeps one dialect and one set
    of result dtypes per backend.
    """
    if not is_cudf(text) and text.dtype != STR_DTYPE:
        # Arrow-backed variants convert without copying the characters.
        text = text.astype(STR_DTYPE)
    return text.fillna("").reset_index(drop=True)


def restore_index(values: Any, index: Any) -> Any:
    """Give per-document ``values`` (0..n-1 index) the original ``index``."""
    values = values.reset_index(drop=True)
    values.index = index
    return values


def count(text: Any, pattern: str) -> Any:
    """Number of non-overlapping matches of ``pattern`` per document (int64)."""
    return text.str.count(pattern).astype("int64")


def nchars(text: Any) -> Any:
    """Number of characters (code points) per document (int64)."""
    return text.str.len().astype("int64")


def ratio(num: Any, den: Any) -> Any:
    """``num / den`` as float64, and 0 where ``den`` is 0."""
    if (
        not is_cudf(num)
        and isinstance(num, pd.Series)
        and isinstance(den, pd.Series)
        and isinstance(num.dtype, np.dtype)
        and isinstance(den.dtype, np.dtype)
        and num.dtype.kind in "iuf"
        and den.dtype.kind in "iuf"
        and num.index.equals(den.index)
    ):
        n = num.to_numpy(dtype="float64")
        d = den.to_numpy(dtype="float64")
        out = np.divide(n, d, out=np.zeros(len(n)), where=d > 0)
        return pd.Series(out, index=num.index, copy=False)
    out = num.astype("float64") / den.clip(lower=1).astype("float64")
    return out.where(den > 0, 0.0)


def _arrow(text: Any) -> pa.Array:
    arr = pa.array(text)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr


def split_rows(
    text: Any,
    sep: str | None = None,
    *,
    regex: bool = False,
    strip: bool = False,
    drop_empty: bool = True,
) -> Any:
    """Split every document into rows: a frame with ``doc`` (position) and ``piece``.

    Parameters
    ----------
    text : Series
        Output of :func:`as_text` (0..n-1 index, no missing values).
    sep : str, optional
        Separator; ``None`` splits on runs of whitespace (words).
    regex : bool
        Whether ``sep`` is a regular expression.
    strip : bool
        Strip surrounding whitespace from every piece.
    drop_empty : bool
        Drop empty pieces (after stripping).

    Returns
    -------
    DataFrame
        One row per piece, in document order then piece order.
    """
    if not is_cudf(text) and _FAST_PANDAS:
        arr = _arrow(text)
        if sep is None:
            # not pc.utf8_split_whitespace: in pyarrow 22 it sometimes leaves the whitespace
            # that ends the array's last string on its last piece ("the " for "... the "),
            # as if it read past the data (a third of the calls on one input), so the same
            # documents got different word counts; the same set of characters (utf8_is_space
            # is WHITESPACE_CHARS), split by RE2, gives the same pieces every time
            lists = pc.split_pattern_regex(arr, f"[{WHITESPACE}]+")
        elif regex:
            lists = pc.split_pattern_regex(arr, sep)
        else:
            lists = pc.split_pattern(arr, sep)
        parent = pc.list_parent_indices(lists)
        flat = pc.list_flatten(lists)
        if strip:
            flat = pc.utf8_trim(flat, WHITESPACE_CHARS)
        if drop_empty or sep is None:
            keep = pc.greater(pc.utf8_length(flat), 0)
            flat = pc.filter(flat, keep)
            parent = pc.filter(parent, keep)
        return pd.DataFrame(
            {
                "doc": parent.to_numpy(zero_copy_only=False).astype("int64"),
                "piece": pd.Series(flat, dtype=STR_DTYPE),
            }
        )
    # Generic path (cudf, or pandas in tests): explode the list column.
    if sep is None:
        # Python's whitespace (no-break and other Unicode spaces too): cudf's own
        # ``str.split()`` splits on ASCII whitespace only
        lists = text.str.split(f"[{WHITESPACE}]+", regex=True)
    elif regex:
        lists = text.str.split(sep, regex=True)
    else:
        lists = text.str.split(sep)
    piece = lists.explode().rename("piece")
    if not is_cudf(piece):
        piece = piece.astype(STR_DTYPE)
    frame = piece.reset_index().rename(columns={"index": "doc"})
    frame["doc"] = frame["doc"].astype("int64")
    frame = frame[frame["piece"].notna()]
    if strip:
        frame["piece"] = frame["piece"].str.strip(WHITESPACE_CHARS)
    if drop_empty or sep is None:
        frame = frame[frame["piece"].str.len() > 0]
    return frame.reset_index(drop=True)


def per_doc(rows: Any, column: str, how: str, n: int, fill: Any = 0) -> Any:
    """Aggregate ``rows[column]`` by ``rows["doc"]`` over all ``n`` documents."""
    if how in ("any", "all"):
        # libcudf's groupby has no ANY/ALL aggregation: the max/min of 0/1 says the same
        agg = rows[column].astype("int8").groupby(rows["doc"]).agg("max" if how == "any" else "min")
        return agg.astype(bool).reindex(range(n), fill_value=fill)
    # "size": rows per document, whatever the column holds (cudf has no size of strings)
    by_doc = rows.groupby("doc")
    agg = by_doc.size() if how == "size" else by_doc[column].agg(how)
    return agg.reindex(range(n), fill_value=fill)


def position_in_doc(rows: Any) -> Any:
    """0-based position of every row within its document."""
    return rows.groupby("doc").cumcount().astype("int64")


def join_rows(rows: Any, n: int, sep: str = "\n") -> Any:
    """Join the ``piece`` rows of every document with ``sep``; ``""`` for no rows."""
    if not is_cudf(rows) and _FAST_PANDAS:
        counts = np.bincount(rows["doc"].to_numpy(), minlength=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        values = pa.array(rows["piece"], type=pa.large_string())
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        lists = pa.LargeListArray.from_arrays(pa.array(offsets), values)
        return pd.Series(pc.binary_join(lists, pa.scalar(sep, pa.large_string())), dtype=STR_DTYPE)
    joined = rows.groupby("doc", sort=True)["piece"].agg(list).str.join(sep)
    joined = joined.reindex(range(n), fill_value="").rename(None)
    joined.index.name = None
    if not is_cudf(joined):
        joined = joined.astype(STR_DTYPE)
    return joined


def factorize(values: Any) -> Any:
    """Integer codes (int64 Series) of ``values``: equal values get equal codes."""
    codes, _ = values.factorize()
    mod = frame_module("cudf") if is_cudf(values) else pd
    return mod.Series(codes, index=values.index).astype("int64")


def frame_of(like: Any, **columns: Any) -> Any:
    """Build a frame (pandas or cudf, like ``like``) from equally indexed columns."""
    mod = frame_module("cudf") if is_cudf(like) else pd
    return mod.DataFrame(columns)


# -- fused per-document measures (pandas) ---------------------------------------------------
#: Characters that start a bulleted line (:class:`~curator_dask.filters.BulletsFilter`).
BULLET_CHARS = "\u2022\u2023\u25e6\u2043\u25cf\u25cb\u25a0\u25a1\u25aa\u25ab\u27a2\u27a4\u25ba\xb7"

_TABLES: dict[str, np.ndarray] = {}
_TABLES_LOCK = threading.Lock()


def fused(text: Any) -> bool:
    """True when ``text``'s measures come from the fused kernels (pandas, not cudf)."""
    return _FUSED and _FAST_PANDAS and not is_cudf(text)


def _every_code_point() -> pa.Array:
    """Every Unicode scalar value as a one-character string, built without Python lists."""
    cps = np.concatenate([np.arange(0xD800), np.arange(0xE000, 0x110000)])
    data = "".join(map(chr, cps.tolist())).encode("utf-8")
    widths = np.select([cps < 0x80, cps < 0x800, cps < 0x10000], [1, 2, 3], 4)
    offsets = np.zeros(len(cps) + 1, np.int32)
    np.cumsum(widths, out=offsets[1:])
    arr = pa.StringArray.from_buffers(len(cps), pa.py_buffer(offsets), pa.py_buffer(data))
    _TABLES["cps"] = cps
    return arr


def _tables() -> dict[str, np.ndarray]:
    """Per-code-point tables, from the engines the vectorised kernels use (built once)."""
    if "flags" in _TABLES:
        return _TABLES
    with _TABLES_LOCK:
        if "flags" in _TABLES:
            return _TABLES
        arr = _every_code_point()
        cps = _TABLES["cps"]
        flags = np.zeros(_text_kernels.NUM_FLAGS_CP, np.uint8)

        def mark(bit: int, pattern: str) -> None:
            hit = pc.match_substring_regex(arr, f"^{pattern}$").to_numpy(zero_copy_only=False)
            flags[cps[hit]] |= bit

        mark(_text_kernels.LETTER, _CLASSES["letter"])
        mark(_text_kernels.ALNUM, _CLASSES["alnum"])
        mark(_text_kernels.DIGIT, _CLASSES["digit"])
        for chars, bit in (
            (WHITESPACE_CHARS, _text_kernels.WS),
            (END_MARKS, _text_kernels.ENDMARK),
            (BULLET_CHARS, _text_kernels.BULLET),
            ("()[]", _text_kernels.PAREN),
        ):
            flags[[ord(c) for c in chars]] |= bit
        # What utf8_lower maps each code point to, when that is one printable ASCII byte.
        lowered = pc.utf8_lower(arr)
        low_len = pc.binary_length(lowered).to_numpy(zero_copy_only=False)
        low_off = np.asarray(lowered.buffers()[1]).view(np.int32)[: len(cps)]
        low_data = np.frombuffer(lowered.buffers()[2], np.uint8)
        first = low_data[low_off]
        ascii_lower = np.zeros(_text_kernels.NUM_FLAGS_CP, np.uint8)
        ok = (low_len == 1) & (first > 0x20) & (first < 0x7F)
        ascii_lower[cps[ok]] = first[ok]
        ascii_lower[[ord(c) for c in WHITESPACE_CHARS]] = 255
        _TABLES["ascii_lower"] = ascii_lower
        _TABLES["lowered"] = lowered  # type: ignore[assignment]
        _TABLES["flags"] = flags
    return _TABLES


def _chunk_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.large_string())
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], width)[arr.offset : arr.offset + len(arr) + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    if data.ctypes.data % 8:
        data = data.copy()
    return offsets.astype(np.int64), data, data[: len(data) // 8 * 8].view(np.uint64)


def utf8_buffers(t: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The int64 byte offsets, UTF-8 bytes and those bytes as uint64 of an :func:`as_text` Series.

    The bytes are not copied unless the buffer is not 8-byte aligned (Arrow aligns to 64)
    or the Series holds several Arrow chunks (:func:`cached_measures` hands its
    ``compute`` one chunk at a time, so the kernels never need that copy).
    """
    return _chunk_buffers(_arrow(t))


def _chunk_series(t: Any) -> list[Any]:
    """``t`` (an :func:`as_text` Series) as one Series per Arrow chunk, without copying."""
    arr = pa.array(t)
    if not isinstance(arr, pa.ChunkedArray) or arr.num_chunks <= 1:
        return [t]
    chunks = [c for c in arr.chunks if len(c)]
    return [pd.Series(c, dtype=STR_DTYPE) for c in chunks] or [t]


class _Cache(threading.local):
    """One thread's measures: those of its current *base* text and of texts derived from it.

    The base is the last text measured that was not found in the cache (a partition as a
    reader made it). A text derived from it by :func:`filter_rows` is known by identity
    (its Arrow array, held by a weak reference) and maps to base rows without reading its
    bytes; any other text is looked up by two 64-bit hashes of each document's bytes.
    Each key holds its measures for the base rows they were last computed for.
    """

    def __init__(self) -> None:
        self.h1: np.ndarray | None = None  # the base's document hashes
        self.h2: np.ndarray | None = None
        self.lookup: tuple[np.ndarray, np.ndarray] | None = None  # sorted h1, base row
        self.derived: dict[int, tuple[Any, np.ndarray]] = {}  # id -> (weakref, base rows)
        self.entries: dict[Any, tuple[np.ndarray, np.ndarray, pd.Index]] = {}
        # (weakref to a text's Arrow array, positions of its rows still kept): see only_rows
        self.wanted: tuple[Any, np.ndarray] | None = None

    def clear(self) -> None:
        self.h1 = self.h2 = self.lookup = None
        self.derived.clear()
        self.entries.clear()


_CACHE = _Cache()
#: Texts remembered by identity per thread (a pipeline's chain needs one or two).
_DERIVED_MAX = 8


def _arrow_identity(text: Any) -> pa.ChunkedArray | None:
    """The Arrow array a pandas Series holds (the same object for as long as it lives)."""
    arr = getattr(getattr(text, "array", None), "_pa_array", None)
    return arr if isinstance(arr, pa.ChunkedArray) else None


def _remember(arr: pa.ChunkedArray | None, rows: np.ndarray) -> None:
    if arr is None:
        return
    derived = _CACHE.derived
    for k in [k for k, (ref, _) in derived.items() if ref() is None]:
        del derived[k]
    while len(derived) >= _DERIVED_MAX:
        del derived[next(iter(derived))]
    derived[id(arr)] = (weakref.ref(arr), rows)


def _known_rows(arr: pa.ChunkedArray | None) -> np.ndarray | None:
    """Base rows of a text known by identity, else None."""
    if arr is None:
        return None
    hit = _CACHE.derived.get(id(arr))
    if hit is None or hit[0]() is not arr:
        return None
    return hit[1]


def note_rows(before: Any, after: Any, rows: np.ndarray) -> None:
    """Record that string column ``after`` holds rows ``rows`` of ``before`` (unchanged).

    Called by :func:`filter_rows`, so that a filter that sees the survivors of an earlier
    one finds their measures without hashing them again.
    """
    known = _known_rows(_arrow_identity(before))
    if known is not None:
        _remember(_arrow_identity(after), known[rows])


@contextlib.contextmanager
def only_rows(text: Any, keep: np.ndarray | None) -> Iterator[None]:
    """Within the block, measures of ``text`` are computed for the rows where ``keep``.

    A chain of filters evaluates each filter on the same partition with a running mask
    (:func:`curator_dask.stage.run_masked`) instead of copying the kept rows after each
    one; here the measures a filter reads (:func:`cached_measures`) are looked up, and
    when missing computed, for the rows still kept only, so a measure first needed late
    in the chain costs what it costs on the survivors. The other rows get zeros: their
    scores are never used, those rows are gone already. ``keep`` is a boolean array with
    one entry per row of ``text``; None (or all True) changes nothing. Only a pandas
    Arrow string ``text`` is concerned (others are measured whole, as always).
    """
    arr = _arrow_identity(text)
    if keep is None or arr is None or len(keep) != len(text) or bool(np.all(keep)):
        yield
        return
    before = _CACHE.wanted
    _CACHE.wanted = (weakref.ref(arr), np.flatnonzero(keep))
    try:
        yield
    finally:
        _CACHE.wanted = before


def _selected(arr: pa.ChunkedArray | None) -> np.ndarray | None:
    """Positions of the rows still kept of the text whose Arrow array is ``arr`` (only_rows)."""
    wanted = _CACHE.wanted
    if wanted is None or arr is None or wanted[0]() is not arr:
        return None
    return wanted[1]


def _spread(values: np.ndarray, columns: pd.Index, sel: np.ndarray, text: Any) -> pd.DataFrame:
    """Measures of rows ``sel`` of ``text`` as a frame of every row (zeros elsewhere)."""
    full = np.zeros((len(text), values.shape[1]), values.dtype)
    full[sel] = values
    return _frame(full, columns, text.index)


def _base_rows(text: Any, t: Any) -> np.ndarray:
    """Rows of the base holding ``text``'s documents; ``text`` becomes the base if needed."""
    pieces = _chunk_series(t)
    doc_hashes = _ckernels.kernel("doc_hashes")
    hashes = [doc_hashes(*utf8_buffers(p)) for p in pieces]
    h1 = np.concatenate([h[0] for h in hashes])
    h2 = np.concatenate([h[1] for h in hashes])
    c = _CACHE
    if c.h1 is not None and c.h2 is not None:
        if c.lookup is None:
            uniq, first = np.unique(c.h1, return_index=True)
            c.lookup = (uniq, first)
        keys, first = c.lookup
        if len(keys):
            pos = np.searchsorted(keys, h1)
            pos[pos == len(keys)] = 0
            rows = first[pos]
            if np.array_equal(keys[pos], h1) and np.array_equal(c.h2[rows], h2):
                return rows
    c.clear()
    c.h1, c.h2 = h1, h2
    return np.arange(len(h1))


def _frame(values: np.ndarray, columns: pd.Index, index: Any) -> pd.DataFrame:
    return pd.DataFrame(values, columns=columns, index=index, copy=False)


def _lookup(key: Any, rows: np.ndarray) -> tuple[np.ndarray, pd.Index] | None:
    entry = _CACHE.entries.get(key)
    if entry is None:
        return None
    have, values, columns = entry
    if not len(have):
        return (values[:0], columns) if not len(rows) else None
    pos = np.searchsorted(have, rows)
    pos[pos == len(have)] = 0
    if not np.array_equal(have[pos], rows):
        return None
    return values[pos], columns


def cached_measures(text: Any, key: Any, compute: Callable[[Any], pd.DataFrame]) -> pd.DataFrame:
    """Per-document measures of ``text``, computed once per partition and reused.

    The measures are a pure function of each document's bytes. A filter that sees the
    survivors of an earlier filter finds them in the measures computed before; a text
    :func:`filter_rows` made is known by identity (no bytes read), any other text is
    looked up by two 64-bit hashes of every document. Measures missing for any document
    are computed for the documents of ``text`` only (so a measure first needed late in a
    pipeline is computed for the survivors alone). One set per ``key`` and thread is kept
    (a dask worker's threads work on different partitions).

    Parameters
    ----------
    text : Series
        Documents (pandas).
    key : hashable
        Names the measures and every parameter they depend on.
    compute : callable
        ``compute(t) -> DataFrame`` of one dtype, one row per document of ``t`` (``text``
        after :func:`as_text`, one Arrow chunk of it at a time); :func:`utf8_buffers`
        gives a kernel its bytes.

    Returns
    -------
    DataFrame
        One row per document of ``text``, with ``text``'s index.
    """
    arr = _arrow_identity(text)
    rows = _known_rows(arr)
    t = None
    if rows is None:
        t = as_text(text)
        rows = _base_rows(text, t)
        _remember(arr, rows)
    sel = _selected(arr)
    if sel is not None:
        hit = _lookup(key, rows[sel])
        if hit is None:  # measure the rows still kept, and only those
            sub = _gather_column(text, sel, text.index[sel])
            _remember(_arrow_identity(sub), rows[sel])
            frame = cached_measures(sub, key, compute)
            hit = (frame.to_numpy(), frame.columns)
        return _spread(hit[0], hit[1], sel, text)
    hit = _lookup(key, rows)
    if hit is not None:
        return _frame(hit[0], hit[1], text.index)
    if t is None:
        t = as_text(text)
    # Chunk by chunk: a reader's column holds many Arrow chunks, and joining them would
    # copy the partition's text on every call.
    pieces = _chunk_series(t)
    if len(pieces) == 1:
        frame = compute(t)
    else:
        frame = pd.concat([compute(p) for p in pieces], ignore_index=True)
    values = frame.to_numpy()
    # The same Index object for every frame of these measures: pandas builds an Index's
    # lookup table once, and a filter reads a column or two of a cached frame.
    columns = frame.columns
    order = np.argsort(rows, kind="stable")
    _CACHE.entries[key] = (rows[order], values[order], columns)
    return _frame(values, columns, text.index)


def cached_rows(text: Any, key: Any) -> pd.DataFrame | None:
    """The measures under ``key`` of every document of ``text`` if all are cached, else None."""
    arr = _arrow_identity(text)
    rows = _known_rows(arr)
    if rows is None:
        return None
    sel = _selected(arr)
    if sel is not None:
        hit = _lookup(key, rows[sel])
        return None if hit is None else _spread(hit[0], hit[1], sel, text)
    hit = _lookup(key, rows)
    return None if hit is None else _frame(hit[0], hit[1], text.index)


def clear_measures() -> None:
    """Forget this thread's cached measures."""
    _CACHE.clear()


def document_measures(text: Any) -> pd.DataFrame:
    """Character, word, line and paragraph counts per document (int64 columns).

    ``chars``, ``whitespace``, ``alnum``, ``digits``: code points of each kind;
    ``words``, ``letter_words`` (holding a letter), ``longest_word``; ``parentheses``;
    ``symbols`` (``#``, ``...``, ``…``); ``url_chars``; ``lines``, ``unique_lines``,
    ``line_chars``, ``unique_line_chars``, ``lines_without_endmark``,
    ``lines_with_ellipsis``, ``bullet_lines``; ``paragraphs``, ``unique_paragraphs``,
    ``paragraph_chars``, ``unique_paragraph_chars``. Definitions: the module docstring.

    Examples
    --------
    >>> m = document_measures(pd.Series(["a b\\n\\na b", "www.x.org"]))
    >>> m[["words", "paragraphs", "unique_paragraphs", "url_chars"]].values.tolist()
    [[4, 2, 1, 0], [1, 1, 1, 9]]
    """
    flags = _tables()["flags"]

    def compute(t: Any) -> pd.DataFrame:
        columns = list(_text_kernels.DOC_COLUMNS)
        stats = _ckernels.kernel("document_stats")(*utf8_buffers(t), flags)
        return pd.DataFrame(stats.reshape(-1, len(columns)), columns=columns)

    return cached_measures(text, "document", compute)


def word_counts(text: Any) -> pd.Series:
    """Words per document (int64): the ``words`` of :func:`document_measures`, cheaply.

    The first rule of a pipeline (:class:`~curator_dask.filters.WordCountFilter`) needs
    only this; the full measures are then computed for the documents it keeps. Taken
    from :func:`document_measures` when those are cached for every document.

    Examples
    --------
    >>> word_counts(pd.Series(["a b\\n\\na b", " x "])).tolist()
    [4, 1]
    """
    known = cached_rows(text, "document")
    if known is not None:
        return known["words"]
    flags = _tables()["flags"]

    def compute(t: Any) -> pd.DataFrame:
        offsets, data, _ = utf8_buffers(t)
        return pd.DataFrame({"words": _ckernels.kernel("word_counts")(offsets, data, flags)})

    return cached_measures(text, "words", compute)["words"]


#: N-gram sizes :func:`ngram_measures` computes at least (Gopher's 2 .. 10).
NGRAM_MAX_N = 10


def ngram_measures(text: Any, max_n: int = NGRAM_MAX_N) -> pd.DataFrame:
    """Word n-gram repetition per document, for n = 1 .. ``max(max_n, 10)``.

    Columns: ``word_chars`` (characters in words); ``top_<n>``: count x characters of the
    most frequent n-gram occurring at least twice (ties: the longer; 0 if none);
    ``duplicate_<n>``: characters of the words covered by n-grams occurring at least
    twice. Words are compared exactly.

    Examples
    --------
    >>> m = ngram_measures(pd.Series(["a b a b c", "x y z"]))
    >>> m[["word_chars", "top_2", "duplicate_2"]].values.tolist()
    [[5, 4, 4], [3, 0, 0]]
    """
    levels = max(max_n, NGRAM_MAX_N)
    flags = _tables()["flags"]
    columns = ["word_chars"]
    for n in range(1, levels + 1):
        columns += [f"top_{n}", f"duplicate_{n}"]

    def compute(t: Any) -> pd.DataFrame:
        stats = _ckernels.kernel("ngram_stats")(*utf8_buffers(t), flags, levels)
        return pd.DataFrame(stats.reshape(-1, len(columns)), columns=columns)

    return cached_measures(text, ("ngram", levels), compute)


def _pack_words(words: Iterable[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Sorted little-endian packs of printable-ASCII words of at most 16 bytes, else None."""
    packs = []
    for w in words:
        raw = w.encode("utf-8")
        if len(raw) > 16 or not all(0x20 < b < 0x7F for b in raw):
            return None
        raw = raw.ljust(16, b"\0")
        packs.append((int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")))
    packs.sort()
    return (
        np.array([p[0] for p in packs], np.uint64),
        np.array([p[1] for p in packs], np.uint64),
    )


def _strip_table(strip_chars: str) -> np.ndarray:
    """Per code point: whether it lower-cases to one of ``strip_chars`` (built once each)."""
    tables = _tables()
    strip_key = ("strip", strip_chars)
    if strip_key not in tables:
        lowered, cps = tables["lowered"], tables["cps"]
        chars = pa.array(list(strip_chars), pa.string())
        hit = pc.is_in(lowered, chars).to_numpy(zero_copy_only=False)
        strip = np.zeros(_text_kernels.NUM_FLAGS_CP, np.bool_)
        strip[cps[hit]] = True
        tables[strip_key] = strip  # type: ignore[index]
    return tables[strip_key]  # type: ignore[index]


def word_list_counts(text: Any, words: Iterable[str], strip_chars: str) -> pd.Series | None:
    """Occurrences per document of ``words`` (words lower-cased, ``strip_chars`` stripped).

    Lower-casing is pyarrow's ``utf8_lower``; a word is stripped of ``strip_chars`` from
    both ends after lower-casing. Returns ``None`` when a word of the list is not
    printable ASCII of at most 16 bytes (the caller then uses the vectorised path).

    Examples
    --------
    >>> word_list_counts(pd.Series(["The cat, THE end.", "none"]), {"the", "end"}, ".,").tolist()
    [3, 0]
    """
    packed = _pack_words(words)
    if packed is None:
        return None
    strip = _strip_table(strip_chars)
    k1s, k2s = packed
    lower = _tables()["ascii_lower"]

    def compute(t: Any) -> pd.DataFrame:
        counts = _ckernels.kernel("word_list_counts")(*utf8_buffers(t)[:2], strip, lower, k1s, k2s)
        return pd.DataFrame({"count": counts})

    key = ("words", tuple(sorted(words)), strip_chars)
    return cached_measures(text, key, compute)["count"]


# -- keeping rows without a transient second copy ------------------------------------------
def _gather_chunk(arr: pa.Array, rows: np.ndarray) -> pa.Array:
    """Strings ``rows`` of one Arrow string array, copied into buffers of the exact size."""
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], width)[arr.offset : arr.offset + len(arr) + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    new_offsets, new_data = _ckernels.kernel("gather_strings")(offsets, data, rows)
    bitmap, nulls = None, 0
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False)[rows]
        nulls = int(len(rows) - valid.sum())
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    buffers = [bitmap, pa.py_buffer(new_offsets.astype(width, copy=False)), pa.py_buffer(new_data)]
    return pa.Array.from_buffers(arr.type, len(rows), buffers, null_count=nulls)


def _gather_column(values: Any, rows: np.ndarray, index: Any) -> pd.Series:
    chunks = values.array._pa_array
    if isinstance(chunks, pa.Array):
        chunks = pa.chunked_array([chunks])
    pieces, start = [], 0
    for chunk in chunks.chunks:
        lo, hi = np.searchsorted(rows, [start, start + len(chunk)])
        if hi > lo:
            pieces.append(_gather_chunk(chunk, rows[lo:hi] - start))
        start += len(chunk)
    gathered = pa.chunked_array(pieces, type=chunks.type)
    return pd.Series(gathered, dtype=values.dtype, index=index, name=values.name)


def filter_rows(part: Any, keep: Any) -> Any:
    """``part[keep]`` for a boolean ``keep``, holding at most the kept bytes on top of ``part``.

    pandas' boolean indexing of an Arrow string column goes through Arrow's filter, whose
    output buffer grows by doubling: on a large partition it briefly needs up to twice
    the bytes it keeps. Here every Arrow string column is copied with one exact-size
    allocation, and nothing is copied when every row is kept (``part`` itself is
    returned). Other columns, frames and cudf go through ``part[keep]``.

    Examples
    --------
    >>> part = pd.DataFrame({"text": pd.Series(["a", "b", "c"], dtype=STR_DTYPE), "n": [1, 2, 3]})
    >>> filter_rows(part, pd.Series([True, False, True])).values.tolist()
    [['a', 1], ['c', 3]]
    """
    if is_cudf(part) or not isinstance(part, pd.DataFrame) or not part.columns.is_unique:
        return part[keep]
    if isinstance(keep, pd.Series) and not (
        keep.index is part.index or keep.index.equals(part.index)
    ):
        return part[keep]  # aligned on the index, as pandas does
    mask = np.asarray(keep, dtype=bool)
    if len(mask) and mask.all():
        return part
    strings = [c for c in part.columns if _is_arrow_string(part[c].dtype)]
    if not strings:
        return part[keep]
    rows = np.flatnonzero(mask)
    index = part.index[rows]
    columns = {}
    for column in part.columns:
        values = part[column]
        if column in strings:
            columns[column] = _gather_column(values, rows, index).array
        else:
            columns[column] = values.array.take(rows)
    # One frame from the columns (inserting them one by one into a frame cost more than
    # the copy of the text).
    out = pd.DataFrame(columns, index=index, copy=False)
    out.attrs = dict(part.attrs)
    for column in strings:
        note_rows(part[column], out[column], rows)
    return out


#: Bytes of text a modifier rewrites at a time (:func:`map_pieces`).
PIECE_BYTES = 16 * 2**20


def map_pieces(text: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn(text)``, computed on pieces of about :data:`PIECE_BYTES` and put back together.

    A modifier that chains several string kernels makes a full copy of the text per
    kernel; run on pieces, only one piece's copies exist at a time, and the pieces become
    the chunks of the result (no copy). pandas Arrow strings only; otherwise ``fn(text)``.

    Examples
    --------
    >>> t = pd.Series(["a", "b", None], dtype=STR_DTYPE)
    >>> map_pieces(t, lambda s: s.str.upper()).tolist()
    ['A', 'B', nan]
    """
    if is_cudf(text) or not _is_arrow_string(text.dtype) or len(text) == 0:
        return fn(text)
    arr = pa.array(text)
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    if len(chunks) == 1 and chunks[0].nbytes <= PIECE_BYTES:
        return fn(text)
    pieces = []
    for chunk in chunks:
        step = max(1, int(len(chunk) * PIECE_BYTES / max(1, chunk.nbytes)))
        pieces += [chunk.slice(i, step) for i in range(0, len(chunk), step)]
    outs: list[pa.Array] = []
    dtype = None
    for piece in pieces:
        out = fn(pd.Series(piece, dtype=text.dtype))
        dtype = out.dtype
        got = pa.array(out)
        outs += got.chunks if isinstance(got, pa.ChunkedArray) else [got]
    joined = pa.chunked_array(outs)
    return pd.Series(joined, dtype=dtype, index=text.index, name=text.name)
