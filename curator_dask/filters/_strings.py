"""Vectorised string primitives shared by the filters and modifiers.

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

Definitions used by every filter:

- *whitespace* is what Python's :meth:`str.isspace` accepts (:data:`WHITESPACE`);
- a *word* is a maximal run of non-whitespace characters (Python's ``str.split()``);
- a *line* is a piece of ``text.split("\\n")`` with surrounding whitespace stripped;
  empty lines are not lines;
- a *paragraph* is a block separated by one or more blank lines, stripped; empty blocks
  are not paragraphs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask._backend import frame_module

#: The characters for which Python's ``str.isspace()`` is True, as a regex class body.
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
)
#: Every whitespace character, as a plain string (for ``str.strip``).
WHITESPACE_CHARS = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())
#: Whitespace without the line feed (horizontal whitespace and other separators).
HSPACE = WHITESPACE.replace("\n", "")
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

_CLASSES = {
    # pyarrow / RE2: Unicode general categories.
    "re2": {"letter": r"\pL", "alnum": r"[\pL\pN]", "digit": r"\p{Nd}"},
    # libcudf: \w and \d are Unicode-aware, \p{..} is not supported.
    "cudf": {"letter": r"[^\W\d_]", "alnum": r"[^\W_]", "digit": r"\d"},
}


def is_cudf(obj: Any) -> bool:
    """True for cudf objects."""
    return type(obj).__module__.split(".")[0] == "cudf"


def char_class(text: Any, name: str) -> str:
    """Return the regex for one ``letter``, ``alnum`` or ``digit`` character.

    Letters are Unicode category L (Python ``str.isalpha``), alphanumerics L or N
    (``str.isalnum``), digits category Nd (``str.isdecimal``).
    """
    return _CLASSES["cudf" if is_cudf(text) else "re2"][name]


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
            lists = pc.utf8_split_whitespace(arr)
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
        lists = text.str.split()
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
    agg = rows.groupby("doc")[column].agg(how)
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
