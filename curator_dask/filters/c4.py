"""C4's cleaning rules (Raffel et al., 2020, "Exploring the Limits of Transfer Learning").

C4 keeps only lines that end in terminal punctuation and have at least five words, drops
lines mentioning "javascript" or site policies, and then drops pages with fewer than three
sentences, any "lorem ipsum", any curly bracket, or a word longer than 1000 characters.
Here the line rules are :func:`c4_line_keep` (used by
:class:`~curator_dask.modifiers.C4LineModifier`, which rewrites the text) and the page
rules are :class:`C4QualityFilter` (which keeps or drops whole documents, counting
sentences in the lines the line rules would keep). C4's bad-words rule is
:class:`C4BadWordsFilter`, with a list the user gives (none ships).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curator_dask import text as textkit
from curator_dask.filters._rules import RuleSetFilter
from curator_dask.stage import Filter

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
SENTENCE_END = f"[.!?]+[\"'\u201d\u2019)\\]]*(?:{textkit.WS}|$)"


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
    keep = keep & (textkit.count(lines, textkit.WORD) >= min_words_per_line)
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
        t = textkit.as_text(text)
        n = len(t)
        rows = textkit.split_rows(t, "\n", strip=True)
        kept = c4_line_keep(
            rows["piece"],
            min_words_per_line=self.min_words_per_line,
            remove_javascript_lines=self.remove_javascript_lines,
            remove_policy_lines=self.remove_policy_lines,
        )
        rows["sentences"] = textkit.count(rows["piece"], SENTENCE_END).where(kept, 0)
        words = textkit.split_rows(t)
        words["len"] = textkit.nchars(words["piece"])
        lower = t.str.lower()
        frame = textkit.frame_of(
            t,
            num_sentences=textkit.per_doc(rows, "sentences", "sum", n).astype("int64"),
            max_word_length=textkit.per_doc(words, "len", "max", n).astype("int64"),
            lorem_ipsum=lower.str.contains("lorem ipsum", regex=False),
            curly_bracket=t.str.contains("{", regex=False),
        )
        return textkit.restore_index(frame, text.index)

    def rule_failures(self, scores: Any) -> Any:
        fails = textkit.frame_of(
            scores,
            num_sentences=scores["num_sentences"] < self.min_sentences,
            max_word_length=scores["max_word_length"] > self.max_word_length,
            lorem_ipsum=scores["lorem_ipsum"] & self.remove_lorem_ipsum,
            curly_bracket=scores["curly_bracket"] & self.remove_curly_bracket,
        )
        return fails


def _escape(phrase: str) -> str:
    return "".join("\\" + c if c in r".^$*+?()[]{}|\/" else c for c in phrase)


@dataclass(kw_only=True)
class C4BadWordsFilter(Filter):
    """Drop documents containing a word or phrase of a bad-words list (C4's last rule).

    C4 dropped every page holding a word of the "List of Dirty, Naughty, Obscene, and
    Otherwise Bad Words" (LDNOOBW). No list ships with curator_dask: give one, e.g. the
    LDNOOBW ``en`` file (one entry per line) as ``bad_words_path``.

    Parameters
    ----------
    bad_words : iterable of str, optional
        The entries (words or phrases).
    bad_words_path : str, optional
        Instead of ``bad_words``: a UTF-8 text file with one entry per line (blank lines
        skipped). Read once, on the client, when the filter is built.

    An entry matches case-insensitively (both sides lower-cased) where it is not part of
    a longer word: the characters around it are not letters, numbers or ``_``.

    Score: 1 when the document holds an entry, else 0; kept when 0.

    Examples
    --------
    >>> import pandas as pd
    >>> f = C4BadWordsFilter(bad_words=["darn", "heck no"])
    >>> f.score(pd.Series(["Darn!", "darning", "oh HECK  no", "heck no."])).tolist()
    [1, 0, 0, 1]
    """

    bad_words: tuple[str, ...] | frozenset[str] | list[str] | None = None
    bad_words_path: str | None = None

    def __post_init__(self) -> None:
        if (self.bad_words is None) == (self.bad_words_path is None):
            raise ValueError("give exactly one of bad_words or bad_words_path")
        if self.bad_words_path is not None:
            with open(self.bad_words_path, encoding="utf-8") as f:
                self.bad_words = tuple(line.strip() for line in f if line.strip())
            self.bad_words_path = None  # resolved: the words travel, not the path
        words = sorted({w.strip().lower() for w in self.bad_words or () if w.strip()})
        if not words:
            raise ValueError("the bad-words list is empty")
        self.bad_words = tuple(words)

    def score(self, text: Any) -> Any:
        t = textkit.as_text(text)
        # Not a letter, number or "_" (RE2 has Unicode classes; libcudf's \W is Unicode).
        not_word = r"\W" if textkit.is_cudf(t) else r"[^\pL\pN_]"
        body = "|".join(_escape(w) for w in self.bad_words or ())
        pattern = f"(?:^|{not_word})(?:{body})(?:$|{not_word})"
        if textkit.is_cudf(t):
            hit = t.str.lower().str.contains(pattern, regex=True)
        else:
            # RE2 through pyarrow itself: pandas 2's str.contains first compiles the pattern
            # with Python's re (to look for groups), which has no \p classes.
            import pandas as pd
            import pyarrow as pa
            import pyarrow.compute as pc

            found = pc.match_substring_regex(pc.utf8_lower(pa.array(t)), pattern)
            hit = pd.Series(found.to_numpy(zero_copy_only=False), index=t.index)
        return textkit.restore_index(hit.fillna(False).astype("int64"), text.index)

    def keep_score(self, score: Any) -> Any:
        return score == 0
