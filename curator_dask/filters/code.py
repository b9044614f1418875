"""Filters for source code and markup (the code filters of NeMo Curator's set).

Definitions (this project's):

- a *comment line* is a line (as in :mod:`curator_dask.text`: stripped, non-empty) that
  starts with one of the language's line-comment markers; block comments (``/* ... */``,
  Python's triple-quoted strings on their own lines count as code) are matched as
  spans of characters;
- comment characters are the characters of comment lines, plus the characters inside
  block comments found in the other lines (stripped, joined by newlines); the ratio is
  over all characters of the document.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from typing import Any

from curator_dask import text as textkit
from curator_dask.stage import Filter

#: Line-comment markers and block-comment regexes by language (``language=`` values).
#: ``(?:.|\n)`` is any character: libcudf has no ``(?s)`` flag group.
COMMENT_SYNTAX: dict[str, tuple[tuple[str, ...], str | None]] = {
    "python": (("#",), None),
    "shell": (("#",), None),
    "ruby": (("#",), None),
    "r": (("#",), None),
    "c": (("//",), r"/\*(?:.|\n)*?\*/"),
    "cpp": (("//",), r"/\*(?:.|\n)*?\*/"),
    "java": (("//",), r"/\*(?:.|\n)*?\*/"),
    "javascript": (("//",), r"/\*(?:.|\n)*?\*/"),
    "go": (("//",), r"/\*(?:.|\n)*?\*/"),
    "rust": (("//",), r"/\*(?:.|\n)*?\*/"),
    "sql": (("--",), r"/\*(?:.|\n)*?\*/"),
    "lua": (("--",), None),
    "haskell": (("--",), r"\{-(?:.|\n)*?-\}"),
}


def _comment_chars(text: Any, markers: tuple[str, ...], block: str | None) -> Any:
    t = textkit.as_text(text)
    rows = textkit.split_rows(t, "\n", strip=True)
    hit = rows["piece"].str.startswith(markers) if markers else rows["piece"].str.len() < 0
    rows["chars"] = textkit.nchars(rows["piece"]).where(hit, 0)
    line_chars = textkit.per_doc(rows, "chars", "sum", len(t))
    if block is not None:
        # Characters inside block comments; lines wholly inside one are counted once.
        without_lines = textkit.join_rows(rows[~hit], len(t))
        block_chars = textkit.nchars(without_lines) - textkit.nchars(
            without_lines.str.replace(block, "", regex=True)
        )
        line_chars = line_chars + block_chars
    return t, line_chars


@dataclass(kw_only=True)
class _CommentRatioFilter(Filter):
    min_comment_to_code_ratio: float = 0.01
    max_comment_to_code_ratio: float = 0.85

    def _syntax(self) -> tuple[tuple[str, ...], str | None]:
        raise NotImplementedError

    def score(self, text: Any) -> Any:
        markers, block = self._syntax()
        t, chars = _comment_chars(text, markers, block)
        return textkit.restore_index(textkit.ratio(chars, textkit.nchars(t)), text.index)

    def keep_score(self, score: Any) -> Any:
        return (score >= self.min_comment_to_code_ratio) & (score <= self.max_comment_to_code_ratio)


@dataclass(kw_only=True)
class PythonCommentToCodeFilter(_CommentRatioFilter):
    """Keep Python files whose share of comment characters is within bounds.

    Parameters
    ----------
    min_comment_to_code_ratio, max_comment_to_code_ratio : float
        Bounds of comment characters (``#`` lines) / characters.
    """

    def _syntax(self) -> tuple[tuple[str, ...], str | None]:
        return COMMENT_SYNTAX["python"]


@dataclass(kw_only=True)
class GeneralCommentToCodeFilter(_CommentRatioFilter):
    """Keep source files whose share of comment characters is within bounds.

    Parameters
    ----------
    language : str
        A key of :data:`COMMENT_SYNTAX` (``"c"``, ``"java"``, ``"sql"``, ...).
    min_comment_to_code_ratio, max_comment_to_code_ratio : float
        Bounds of comment characters (line and block comments) / characters.
    """

    language: str = "c"

    def __post_init__(self) -> None:
        if self.language not in COMMENT_SYNTAX:
            raise ValueError(
                f"language must be one of {sorted(COMMENT_SYNTAX)}, got {self.language!r}"
            )

    def _syntax(self) -> tuple[tuple[str, ...], str | None]:
        return COMMENT_SYNTAX[self.language]


@dataclass(kw_only=True)
class NumberOfLinesOfCodeFilter(Filter):
    """Keep files with between ``min_lines`` and ``max_lines`` lines (non-empty, stripped)."""

    min_lines: int = 10
    max_lines: int = 20_000

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            return textkit.document_measures(text)["lines"]
        t = textkit.as_text(text)
        rows = textkit.split_rows(t, "\n", strip=True)
        return textkit.restore_index(textkit.per_doc(rows, "piece", "size", len(t)), text.index)

    def keep_score(self, score: Any) -> Any:
        return (score >= self.min_lines) & (score <= self.max_lines)


@dataclass(kw_only=True)
class XMLHeaderFilter(Filter):
    """Drop documents with an XML declaration (``<?xml version=``) in their first characters.

    Parameters
    ----------
    char_prefix_search_length : int
        How many leading characters are searched.

    Score: 1 when the declaration is found, else 0.
    """

    char_prefix_search_length: int = 100

    def score(self, text: Any) -> Any:
        t = textkit.as_text(text)
        head = t.str.slice(0, self.char_prefix_search_length)
        return textkit.restore_index(
            head.str.contains("<?xml version=", regex=False).astype("int64"), text.index
        )

    def keep_score(self, score: Any) -> Any:
        return score == 0


@dataclass(kw_only=True)
class AlphaFilter(Filter):
    """Keep documents where at least ``min_alpha_ratio`` of the characters are letters."""

    min_alpha_ratio: float = 0.25

    def score(self, text: Any) -> Any:
        t = textkit.as_text(text)
        letters = textkit.count_class(t, "letter")
        return textkit.restore_index(textkit.ratio(letters, textkit.nchars(t)), text.index)

    def keep_score(self, score: Any) -> Any:
        return score >= self.min_alpha_ratio


_TAG = r"<[^<>]*>"
# ASCII case folding by classes and "any character" as [\s\S]: libcudf's regex engine has
# no inline flags (``(?is)``) and cudf's ``str.replace`` takes no ``flags``.
_SCRIPT_OR_STYLE = f"(?:{textkit.ascii_nocase('script')}|{textkit.ascii_nocase('style')})"
_SCRIPT = rf"<{_SCRIPT_OR_STYLE}\b[^>]*>[\s\S]*?</{_SCRIPT_OR_STYLE}\s*>"


@dataclass(kw_only=True)
class HTMLBoilerplateFilter(Filter):
    """Keep HTML whose visible text is at least ``min_lang_chars_ratio`` of its characters.

    Visible text: the document without ``<script>``/``<style>`` elements and tags, and
    without whitespace. Score: its characters / characters.
    """

    min_lang_chars_ratio: float = 0.2

    def score(self, text: Any) -> Any:
        t = textkit.as_text(text)
        visible = t.str.replace(_SCRIPT, "", regex=True).str.replace(_TAG, "", regex=True)
        visible_chars = textkit.nchars(visible) - textkit.count(visible, textkit.WS)
        return textkit.restore_index(textkit.ratio(visible_chars, textkit.nchars(t)), text.index)

    def keep_score(self, score: Any) -> Any:
        return score >= self.min_lang_chars_ratio


def _metadata_language(lang: str) -> str:
    """A dataset's language name as the metadata file spells it (``C#`` -> ``c-sharp``)."""
    return {"C#": "c-sharp", "F#": "f-sharp"}.get(lang, lang.lower().replace(" ", "-"))


def _optional_number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


@dataclass(kw_only=True)
class PerExtensionFilter(Filter):
    """Keep code files that pass the rules of their language and extension.

    The rules come from ``metadata_file``, a CSV with one row per (``language``,
    ``extension``) and the columns NeMo Curator's ``PerExtensionFilter`` reads:
    ``Include`` (1 to keep files of this kind at all), ``Long_line_threshold`` (longest
    kept line, characters; when set, the mean line length must also be at most
    ``max_mean_line_length``), ``Alphanum_threshold`` (smallest kept share of letters
    and numbers) and ``Alpha filter`` (smallest kept share of letters); an empty cell
    means no rule. No metadata file ships with curator_dask. The file is read once, on
    the client, when the filter is built.

    Here a line is a piece of ``text.split("\\n")`` (empty lines included, not
    stripped); letters and numbers are Unicode categories L and N.

    Parameters
    ----------
    lang : str
        The files' language as a dataset names it (``"Python"``, ``"C#"``); lower-cased,
        spaces to ``-``, ``C#``/``F#`` to ``c-sharp``/``f-sharp`` to find its rows.
    extension : str
        The files' extension as the metadata file spells it (``""`` for none).
    metadata_file : str
        The CSV.
    max_mean_line_length : float
        The mean-line-length bound that comes with a long-line threshold (100).

    Score: 1 when the document passes every rule, 0 otherwise (and for a language and
    extension that the file does not list, or does not include).

    Examples
    --------
    >>> import pandas as pd, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "meta.csv")
    >>> with open(path, "w") as out:
    ...     _ = out.write(
    ...         "language,extension,Include,Long_line_threshold,Alphanum_threshold,Alpha filter\\n"
    ...         "python,py,1,20,0.5,\\n"
    ...     )
    >>> f = PerExtensionFilter(lang="Python", extension="py", metadata_file=path)
    >>> code = ["total = value1\\nother = value2", "s = '" + "a" * 30 + "'", "+-*/ (x)"]
    >>> f.score(pd.Series(code)).tolist()
    [1, 0, 0]
    """

    lang: str = ""
    extension: str = ""
    metadata_file: str = ""
    max_mean_line_length: float = 100
    #: The rule read from ``metadata_file``: (include, long line, alphanumeric, alphabetic).
    rule: tuple[bool, float | None, float | None, float | None] = field(
        init=False, default=(False, None, None, None)
    )

    def __post_init__(self) -> None:
        if not self.metadata_file:
            raise ValueError("metadata_file: give the per-extension rules (a CSV)")
        language = _metadata_language(self.lang)
        rows = {}
        with open(self.metadata_file, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                rows[(row.get("language", ""), row.get("extension", ""))] = row
        if not any(lang == language for lang, _ in rows):
            raise ValueError(f"{self.metadata_file} has no rows for language {language!r}")
        found = rows.get((language, self.extension or ""))
        if found is not None:
            self.rule = (
                str(found.get("Include", "")).strip() == "1",
                _optional_number(found.get("Long_line_threshold")),
                _optional_number(found.get("Alphanum_threshold")),
                _optional_number(found.get("Alpha filter")),
            )

    def score(self, text: Any) -> Any:
        t = textkit.as_text(text)
        include, long_line, alnum_min, alpha_min = self.rule
        ok = textkit.nchars(t) * 0 == 0
        if not include:
            return textkit.restore_index((~ok).astype("int64"), text.index)
        n = textkit.nchars(t)
        if long_line is not None:
            rows = textkit.split_rows(t, "\n", drop_empty=False)
            rows["len"] = textkit.nchars(rows["piece"])
            longest = textkit.per_doc(rows, "len", "max", len(t))
            pieces = textkit.per_doc(rows, "len", "size", len(t)).clip(lower=1)
            mean = (n - (pieces - 1)).astype("float64") / pieces
            ok &= (longest <= long_line) & (mean <= self.max_mean_line_length)
        if alnum_min is not None:
            ok &= textkit.ratio(textkit.count_class(t, "alnum"), n) >= alnum_min
        if alpha_min is not None:
            ok &= textkit.ratio(textkit.count_class(t, "letter"), n) >= alpha_min
        return textkit.restore_index(ok.astype("int64"), text.index)

    def keep_score(self, score: Any) -> Any:
        return score == 1
