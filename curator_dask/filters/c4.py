"""C4's cleaning rules (Raffel et al., 2020, "Exploring the Limits of Transfer Learning").

C4 keeps only lines that end in terminal punctuation and have at least five words, drops
lines mentioning "javascript" or site policies, and then drops pages with fewer than three
sentences, any "lorem ipsum", any curly bracket, or a word longer than 1000 characters.
Here the line rules are :func:`c4_line_keep` (used by
:class:`~curator_dask.modifiers.C4LineModifier`, which rewrites the text) and the page
rules are :class:`C4QualityFilter` (which keeps or drops whole documents, counting
sentences in the lines the line rules would keep). C4's bad-words list is not applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curator_dask import text as S
from curator_dask.filters._rules import RuleSetFilter

#: Lines containing any of these (case-insensitive) are removed, as in C4. Our own list.
C4_POLICY_STRINGS: tuple[str, ...] = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)

#: C4's terminal punctuation (``. ! ? "``) and the typographic closing quote.
C4_END_MARKS = '.!?"”'

_C4_END = f"[{C4_END_MARKS}]$"
_ELLIPSIS_END = r"\.\.\.$"
#: A sentence ends with a run of ``. ! ?``, optional closing quotes or brackets, then
#: whitespace or the end of the text ("e.g. " also counts: an approximation).
SENTENCE_END = f"[.!?]+[\"'\u201d\u2019)\\]]*(?:{S.WS}|$)"


def c4_line_keep(
    lines: Any,
    *,
    min_words_per_line: int = 5,
    remove_javascript_lines: bool = True,
    remove_policy_lines: bool = True,
) -> Any:
    """Return the C4 keep mask for stripped, non-empty ``lines`` (a string Series).

    A line is kept when it ends in terminal punctuation (not an ellipsis), has at least
    ``min_words_per_line`` words, and (optionally) mentions neither "javascript" nor one
    of :data:`C4_POLICY_STRINGS`.
    """
    keep = lines.str.contains(_C4_END) & ~lines.str.contains(_ELLIPSIS_END)
    keep = keep & (S.count(lines, S.WORD) >= min_words_per_line)
    if remove_javascript_lines or remove_policy_lines:
        lower = lines.str.lower()
        if remove_javascript_lines:
            keep = keep & ~lower.str.contains("javascript", regex=False)
        if remove_policy_lines:
            keep = keep & ~lower.str.contains("|".join(C4_POLICY_STRINGS))
    return keep


@dataclass
class C4QualityFilter(RuleSetFilter):
    """Keep the documents C4's page rules keep.

    Parameters
    ----------
    min_sentences : int
        Fewest sentences a kept document has, counted in the lines C4's line rules keep.
    min_words_per_line : int
        Line rule: fewest words in a kept line.
    max_word_length : int
        Longest word (characters) a kept document may contain.
    remove_lorem_ipsum : bool
        Drop documents containing "lorem ipsum" (case-insensitive).
    remove_curly_bracket : bool
        Drop documents containing ``{`` (C4's guard against code).
    remove_javascript_lines, remove_policy_lines : bool
        Line rules, as in :func:`c4_line_keep`.

    Score: the number of page rules the document fails (0 = kept). The measurements are
    :meth:`rule_scores`: ``num_sentences``, ``max_word_length``, ``lorem_ipsum``,
    ``curly_bracket``.

    Examples
    --------
    >>> import pandas as pd
    >>> good = "One sentence is here. Another one is here. And a third one now."
    >>> C4QualityFilter().score(pd.Series([good, "lorem ipsum {"])).tolist()
    [0, 3]
    """

    min_sentences: int = 3
    min_words_per_line: int = 5
    max_word_length: int = 1000
    remove_lorem_ipsum: bool = True
    remove_curly_bracket: bool = True
    remove_javascript_lines: bool = True
    remove_policy_lines: bool = True

    def rule_scores(self, text: Any) -> Any:
        t = S.as_text(text)
        n = len(t)
        rows = S.split_rows(t, "\n", strip=True)
        kept = c4_line_keep(
            rows["piece"],
            min_words_per_line=self.min_words_per_line,
            remove_javascript_lines=self.remove_javascript_lines,
            remove_policy_lines=self.remove_policy_lines,
        )
        rows["sentences"] = S.count(rows["piece"], SENTENCE_END).where(kept, 0)
        words = S.split_rows(t)
        words["len"] = S.nchars(words["piece"])
        lower = t.str.lower()
        frame = S.frame_of(
            t,
            num_sentences=S.per_doc(rows, "sentences", "sum", n).astype("int64"),
            max_word_length=S.per_doc(words, "len", "max", n).astype("int64"),
            lorem_ipsum=lower.str.contains("lorem ipsum", regex=False),
            curly_bracket=t.str.contains("{", regex=False),
        )
        return S.restore_index(frame, text.index)

    def rule_failures(self, scores: Any) -> Any:
        fails = S.frame_of(
            scores,
            num_sentences=scores["num_sentences"] < self.min_sentences,
            max_word_length=scores["max_word_length"] > self.max_word_length,
            lorem_ipsum=scores["lorem_ipsum"] & self.remove_lorem_ipsum,
            curly_bracket=scores["curly_bracket"] & self.remove_curly_bracket,
        )
        return fails
