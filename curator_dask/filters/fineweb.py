"""FineWeb's quality rules (Penedo et al., 2024, "The FineWeb Datasets").

FineWeb added three line-level rules to C4's and Gopher's, chosen on ablations: enough
lines end in punctuation, not too many short lines, few characters in duplicated lines;
plus a rule against list-like documents (many line breaks per word).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curator_dask import text as textkit
from curator_dask.filters._rules import RuleSetFilter
from curator_dask.filters.heuristics import _unique_fraction

_END_MARK_LINE = f"[{textkit.END_MARKS}]$"


@dataclass
class FineWebQualityFilter(RuleSetFilter):
    """Keep the documents FineWeb's quality rules keep (published thresholds).

    Parameters
    ----------
    min_line_punct_ratio : float
        Smallest kept share of lines ending with an end mark
        (:data:`~curator_dask.text.END_MARKS`).
    max_short_line_ratio : float
        Largest kept share of lines with at most ``short_line_length`` characters.
    short_line_length : int
        Characters (after stripping) up to which a line is short.
    max_duplicate_line_char_ratio : float
        Largest kept share of line characters in lines that repeat an earlier line.
    max_newline_to_word_ratio : float
        Largest kept number of line breaks per word (list-like documents).

    Score: the number of rules the document fails (0 = kept). The measurements are
    :meth:`rule_scores`: ``line_punct_ratio``, ``short_line_ratio``,
    ``duplicate_line_char_ratio``, ``newline_to_word_ratio``.

    Examples
    --------
    >>> import pandas as pd
    >>> FineWebQualityFilter().score(pd.Series(["A fine sentence that ends well."])).tolist()
    [0]
    """

    min_line_punct_ratio: float = 0.12
    max_short_line_ratio: float = 0.67
    short_line_length: int = 30
    max_duplicate_line_char_ratio: float = 0.01
    max_newline_to_word_ratio: float = 0.3

    def rule_scores(self, text: Any) -> Any:
        t = textkit.as_text(text)
        n = len(t)
        rows = textkit.split_rows(t, "\n", strip=True)
        rows["punct"] = rows["piece"].str.contains(_END_MARK_LINE).astype("int64")
        rows["short"] = (textkit.nchars(rows["piece"]) <= self.short_line_length).astype("int64")
        lines = textkit.per_doc(rows, "punct", "size", n)
        frame = textkit.frame_of(
            t,
            line_punct_ratio=textkit.ratio(textkit.per_doc(rows, "punct", "sum", n), lines),
            short_line_ratio=textkit.ratio(textkit.per_doc(rows, "short", "sum", n), lines),
            duplicate_line_char_ratio=1.0 - _unique_fraction(rows, n, by_char=True),
            newline_to_word_ratio=textkit.ratio(
                textkit.count(t, r"\n"), textkit.count(t, textkit.WORD)
            ),
        )
        return textkit.restore_index(frame, text.index)

    def rule_failures(self, scores: Any) -> Any:
        return textkit.frame_of(
            scores,
            line_punct_ratio=scores["line_punct_ratio"] < self.min_line_punct_ratio,
            short_line_ratio=scores["short_line_ratio"] > self.max_short_line_ratio,
            duplicate_line_char_ratio=scores["duplicate_line_char_ratio"]
            > self.max_duplicate_line_char_ratio,
            newline_to_word_ratio=scores["newline_to_word_ratio"] > self.max_newline_to_word_ratio,
        )
