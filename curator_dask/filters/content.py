"""Simple content filters: a substring at a position, pornographic URLs, character histograms."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from curator_dask import text as textkit
from curator_dask.stage import Filter

_POSITIONS = ("any", "prefix", "suffix")


@dataclass(kw_only=True)
class SubstringFilter(Filter):
    """Keep documents containing ``substring`` (anywhere, at the start or at the end).

    Parameters
    ----------
    substring : str
        Matched literally and case-sensitively.
    position : {"any", "prefix", "suffix"}
        Where it must be.

    Examples
    --------
    >>> import pandas as pd
    >>> f = SubstringFilter(substring="ab", position="prefix")
    >>> f.process(pd.DataFrame({"text": ["abc", "cab"]}))["text"].tolist()
    ['abc']
    """

    substring: str = ""
    position: str = "any"

    def __post_init__(self) -> None:
        if self.position not in _POSITIONS:
            raise ValueError(f"position must be one of {_POSITIONS}, got {self.position!r}")

    def keep(self, text: Any) -> Any:
        t = textkit.as_text(text)
        if self.position == "prefix":
            hit = t.str.startswith(self.substring)
        elif self.position == "suffix":
            hit = t.str.endswith(self.substring)
        else:
            hit = t.str.contains(self.substring, regex=False)
        return textkit.restore_index(hit.astype(bool), text.index)


@dataclass(kw_only=True)
class PornographicUrlsFilter(Filter):
    """Drop documents whose URL column contains ``porn`` (case-insensitive).

    Set ``text_column`` to the column holding the URL (default ``"url"``).
    """

    text_column: str = "url"

    def keep(self, text: Any) -> Any:
        t = textkit.as_text(text)
        return textkit.restore_index(~t.str.lower().str.contains("porn", regex=False), text.index)


@dataclass(kw_only=True)
class HistogramFilter(Filter):
    """Keep documents written mostly in a language's characters.

    Give the language's characters as ``histogram`` (any iterable of characters), as
    ``histogram_path``: a text file with one character at the start of each line, most
    frequent first, read up to the line that starts with ``threshold_char`` (the layout
    of the per-language histograms used for CCMatrix/NLLB cleaning), or as ``lang`` for
    a bundled histogram: ``"en"``, the characters making up 99.9% of the non-whitespace
    characters of the public-domain English of the shipped sample (Jane Austen's novels
    and State of the Union addresses), made by ``scripts/make_histogram.py``
    (:func:`character_histogram`). A file is read once, on the client.

    Parameters
    ----------
    threshold : float
        Smallest kept share of non-whitespace characters that are in the histogram.

    Score: non-whitespace characters in the histogram / non-whitespace characters (1 for
    a document without any).

    Examples
    --------
    >>> import pandas as pd
    >>> f = HistogramFilter(histogram="abcdefghijklmnopqrstuvwxyz", threshold=0.8)
    >>> f.score(pd.Series(["hello wörld", "ééé"])).round(2).tolist()
    [0.9, 0.0]
    """

    histogram: str | frozenset[str] | tuple[str, ...] | None = None
    histogram_path: str | None = None
    lang: str | None = None
    threshold_char: str = "]"
    threshold: float = 0.8

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.histogram, self.histogram_path, self.lang)]
        if sum(given) != 1:
            raise ValueError("give exactly one of histogram, histogram_path or lang")
        if self.lang is not None:
            if self.lang not in BUNDLED_HISTOGRAMS:
                raise ValueError(
                    f"no bundled histogram for lang={self.lang!r} (have {BUNDLED_HISTOGRAMS})"
                )
            data = resources.files("curator_dask") / "data" / f"histogram_{self.lang}.txt"
            self.histogram = "".join(line[0] for line in data.read_text("utf-8").splitlines())
        if self.histogram_path is not None:
            chars: list[str] = []
            with open(self.histogram_path, encoding="utf-8") as f:
                for line in f:
                    if not line.strip("\n"):
                        continue
                    if line[0] == self.threshold_char:
                        break
                    chars.append(line[0])
            self.histogram = "".join(chars)
        self.histogram = "".join(sorted(set(self.histogram or "") - set(textkit.WHITESPACE_CHARS)))

    def score(self, text: Any) -> Any:
        t = textkit.as_text(text)
        visible = textkit.nchars(t) - textkit.count(t, textkit.WS)
        if self.histogram:
            body = "".join("\\" + c if c in "\\]^-[" else c for c in str(self.histogram))
            inside = textkit.count(t, f"[{body}]")
        else:
            inside = visible * 0
        score = textkit.ratio(inside, visible).mask(visible == 0, 1.0)
        return textkit.restore_index(score, text.index)

    def keep_score(self, score: Any) -> Any:
        return score >= self.threshold


#: Languages with a histogram in ``curator_dask/data`` (``HistogramFilter(lang=...)``).
BUNDLED_HISTOGRAMS = ("en",)


def character_histogram(texts: Iterable[str], coverage: float = 0.999) -> str:
    """The most frequent characters of ``texts`` that together make up ``coverage`` of them.

    Whitespace is not counted. Most frequent first (ties by code point).

    Examples
    --------
    >>> character_histogram(["aaab", "a c"], coverage=0.8)
    'ab'
    """
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(c for c in t if not c.isspace())
    total, covered, out = sum(counts.values()), 0, []
    for char, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if covered >= coverage * total:
            break
        out.append(char)
        covered += n
    return "".join(out)
