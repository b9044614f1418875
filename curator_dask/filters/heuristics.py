"""Heuristic document filters (Gopher, C4, and the filters of NeMo Curator's heuristic set).

Each filter measures one property of a document as a score (:meth:`score`) and keeps the
document when the score is on the right side of a threshold (:meth:`keep_score`). The
threshold's name says its direction and unit (``max_..._ratio``, ``min_words``). The
definitions of *word*, *line*, *paragraph* and *whitespace* are in
:mod:`curator_dask.text`; an empty document scores 0 on every ratio (no
measured characters) and 1 on the unique fractions (nothing repeated), so empty documents
are left to :class:`WordCountFilter`.

All scores are computed per partition with vectorised string kernels (pyarrow on pandas,
libcudf on cudf); no filter here loops over documents in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from curator_dask import text as textkit
from curator_dask.stage import Filter

#: Phrases that mark web boilerplate (cookie banners, legal footers). Our own list;
#: matched case-insensitively as substrings of a paragraph.
BOILERPLATE_STRINGS: tuple[str, ...] = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "accept cookies",
    "all rights reserved",
    "subscribe to our newsletter",
)

#: Very frequent English function words (our own list, in the spirit of Gopher's
#: stop-word rule). A word counts when, lower-cased and stripped of surrounding
#: punctuation, it is in this set.
COMMON_ENGLISH_WORDS: frozenset[str] = frozenset(
    {
        "the", "be", "is", "are", "was", "to", "of", "and", "that", "have",
        "has", "with", "in", "for", "on", "it", "this", "not", "by", "from",
    }
)  # fmt: skip

#: Characters stripped from both ends of a word before it is looked up in
#: :data:`COMMON_ENGLISH_WORDS`.
WORD_PUNCTUATION = (
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\u201c\u201d\u2018\u2019\xab\xbb\u2026\u2014\u2013"
)

#: Characters that start a bulleted line: these symbols, or ``-``, ``*``, ``+`` followed
#: by whitespace (Markdown lists). Our own list.
BULLETS = textkit.BULLET_CHARS

_BULLET_LINE = f"^(?:[{BULLETS}]|[\\-*+](?:{textkit.WS}|$))"
_END_MARK_LINE = f"[{textkit.END_MARKS}]$"
_ELLIPSIS_LINE = r"(?:\.\.\.|…)$"
_SYMBOLS = r"#|\.\.\.|…"
_URL = f"(?:https?|ftp)://[^{textkit.WHITESPACE}]+|www\\.[^{textkit.WHITESPACE}]+"
_PARENTHESES = r"[()[\]]"
#: Languages whose words :class:`WordCountFilter` counts per character.
CJK_LANGS = ("zh", "ja")
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}"
_CJK_WORD = f"[{_CJK}]|[^{textkit.WHITESPACE}{_CJK}]+"


def _regex_alternation(phrases: tuple[str, ...]) -> str:
    escaped = []
    for p in phrases:
        escaped.append("".join("\\" + c if c in r".^$*+?()[]{}|\\" else c for c in p))
    return "|".join(escaped)


@dataclass(kw_only=True)
class _ThresholdFilter(Filter):
    """A filter with one threshold, named by ``_threshold``; it must be a number >= 0."""

    _threshold: ClassVar[str]

    def __post_init__(self) -> None:
        value = getattr(self, self._threshold)
        if not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{self._threshold} must be a number >= 0, got {value!r}")


@dataclass(kw_only=True)
class _MaxScoreFilter(_ThresholdFilter):
    """Keep documents whose score is at most the threshold in ``_threshold``."""

    _threshold: ClassVar[str]

    def keep_score(self, score: Any) -> Any:
        return score <= getattr(self, self._threshold)


@dataclass(kw_only=True)
class _MinScoreFilter(_ThresholdFilter):
    """Keep documents whose score is at least the threshold in ``_threshold``."""

    _threshold: ClassVar[str]

    def keep_score(self, score: Any) -> Any:
        return score >= getattr(self, self._threshold)


# -- character-level ratios ----------------------------------------------------------------
@dataclass
class WordCountFilter(Filter):
    """Keep documents with between ``min_words`` and ``max_words`` words.

    Parameters
    ----------
    min_words : int
        Fewest words a kept document has.
    max_words : int
        Most words a kept document has.

    lang : str
        ``"zh"`` or ``"ja"``: every Han, Hiragana or Katakana character is a word, and so
        is every run of other non-whitespace characters (no segmenter needed); any other
        value: whitespace-separated tokens.

    Score: the number of words.

    Examples
    --------
    >>> import pandas as pd
    >>> f = WordCountFilter(min_words=2)
    >>> f.process(pd.DataFrame({"text": ["one", "one two"]}))["text"].tolist()
    ['one two']
    """

    min_words: int = 50
    max_words: int = 100_000
    lang: str = "en"

    def __post_init__(self) -> None:
        if not 0 <= self.min_words <= self.max_words:
            raise ValueError(
                f"need 0 <= min_words <= max_words, got {self.min_words}, {self.max_words}"
            )

    def score(self, text: Any) -> Any:
        if self.lang in CJK_LANGS:
            t = textkit.as_text(text)
            return textkit.restore_index(textkit.count(t, _CJK_WORD), text.index)
        if textkit.fused(text):
            return textkit.word_counts(text)
        t = textkit.as_text(text)
        return textkit.restore_index(textkit.count(t, textkit.WORD), text.index)

    def keep_score(self, score: Any) -> Any:
        return (score >= self.min_words) & (score <= self.max_words)


@dataclass
class NonAlphaNumericFilter(_MaxScoreFilter):
    """Drop documents where too many characters are not letters or digits.

    Parameters
    ----------
    max_non_alpha_numeric_to_text_ratio : float
        Largest kept share of characters (whitespace and punctuation included) that are
        neither Unicode letters nor numbers.

    Score: non-alphanumeric characters / characters.
    """

    max_non_alpha_numeric_to_text_ratio: float = 0.25
    _threshold: ClassVar[str] = "max_non_alpha_numeric_to_text_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["chars"] - m["alnum"], m["chars"])
        t = textkit.as_text(text)
        n = textkit.nchars(t)
        alnum = textkit.count_class(t, "alnum")
        return textkit.restore_index(textkit.ratio(n - alnum, n), text.index)


@dataclass
class SymbolsToWordsFilter(_MaxScoreFilter):
    """Drop documents with too many hash symbols and ellipses per word (Gopher).

    Parameters
    ----------
    max_symbol_to_word_ratio : float
        Largest kept number of ``#``, ``...`` and ``…`` per word.

    Score: (``#`` + ``...`` + ``…`` occurrences) / words.
    """

    max_symbol_to_word_ratio: float = 0.1
    _threshold: ClassVar[str] = "max_symbol_to_word_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["symbols"], m["words"])
        t = textkit.as_text(text)
        return textkit.restore_index(
            textkit.ratio(textkit.count(t, _SYMBOLS), textkit.count(t, textkit.WORD)), text.index
        )


@dataclass
class NumbersFilter(_MaxScoreFilter):
    """Drop documents where too many characters are digits.

    Parameters
    ----------
    max_number_to_text_ratio : float
        Largest kept share of characters that are decimal digits (Unicode Nd).

    Score: digits / characters.
    """

    max_number_to_text_ratio: float = 0.15
    _threshold: ClassVar[str] = "max_number_to_text_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["digits"], m["chars"])
        t = textkit.as_text(text)
        digits = textkit.count_class(t, "digit")
        return textkit.restore_index(textkit.ratio(digits, textkit.nchars(t)), text.index)


@dataclass
class UrlsFilter(_MaxScoreFilter):
    """Drop documents where too much of the text is URLs.

    Parameters
    ----------
    max_url_to_text_ratio : float
        Largest kept share of characters inside URLs. A URL starts with ``http://``,
        ``https://``, ``ftp://`` or ``www.`` and runs to the next whitespace.

    Score: characters in URLs / characters.
    """

    max_url_to_text_ratio: float = 0.2
    _threshold: ClassVar[str] = "max_url_to_text_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["url_chars"], m["chars"])
        t = textkit.as_text(text)
        n = textkit.nchars(t)
        url_chars = n - textkit.nchars(t.str.replace(_URL, "", regex=True))
        return textkit.restore_index(textkit.ratio(url_chars, n), text.index)


@dataclass
class WhiteSpaceFilter(_MaxScoreFilter):
    """Drop documents where too many characters are whitespace.

    Parameters
    ----------
    max_white_space_ratio : float
        Largest kept share of whitespace characters (newlines included).

    Score: whitespace characters / characters.
    """

    max_white_space_ratio: float = 0.25
    _threshold: ClassVar[str] = "max_white_space_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["whitespace"], m["chars"])
        t = textkit.as_text(text)
        return textkit.restore_index(
            textkit.ratio(textkit.count(t, textkit.WS), textkit.nchars(t)), text.index
        )


@dataclass
class ParenthesesFilter(_MaxScoreFilter):
    """Drop documents with too many parentheses and square brackets.

    Parameters
    ----------
    max_parentheses_ratio : float
        Largest kept share of characters that are ``(``, ``)``, ``[`` or ``]``.

    Score: parentheses / characters.
    """

    max_parentheses_ratio: float = 0.1
    _threshold: ClassVar[str] = "max_parentheses_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["parentheses"], m["chars"])
        t = textkit.as_text(text)
        return textkit.restore_index(
            textkit.ratio(textkit.count(t, _PARENTHESES), textkit.nchars(t)), text.index
        )


@dataclass
class BoilerPlateStringFilter(_MaxScoreFilter):
    """Drop documents made of boilerplate paragraphs (cookie banners, legal footers).

    A paragraph is boilerplate when it contains one of :data:`BOILERPLATE_STRINGS`
    (case-insensitive).

    Parameters
    ----------
    remove_if_at_top_or_bottom : bool
        Drop the document when its first or last paragraph is boilerplate.
    max_boilerplate_string_ratio : float
        Largest kept share of paragraphs that are boilerplate.
    boilerplate_strings : tuple of str
        The phrases to look for (lower case).

    Score: boilerplate paragraphs / paragraphs, or ``inf`` when
    ``remove_if_at_top_or_bottom`` and the first or last paragraph is boilerplate.
    """

    remove_if_at_top_or_bottom: bool = True
    max_boilerplate_string_ratio: float = 0.4
    boilerplate_strings: tuple[str, ...] = BOILERPLATE_STRINGS
    _threshold: ClassVar[str] = "max_boilerplate_string_ratio"

    def score(self, text: Any) -> Any:
        if not textkit.fused(text):
            return self._vectorised_score(text)
        pattern = _regex_alternation(tuple(s.lower() for s in self.boilerplate_strings))

        def compute(t: Any) -> Any:
            # Only documents whose lower-cased text holds a phrase can have a boilerplate
            # paragraph (lower-casing is per code point): score just those.
            # In slices of about 16 MB: the lower-cased copy stays small.
            step = max(1, int(16e6 * len(t) / max(1, int(textkit.nchars(t).sum()))))
            hit = np.concatenate(
                [
                    t.iloc[i : i + step].str.lower().str.contains(pattern).to_numpy(dtype=bool)
                    for i in range(0, len(t), step)
                ]
                or [np.zeros(0, bool)]
            )
            score = np.zeros(len(t))
            if hit.any():
                score[hit] = self._vectorised_score(t[hit]).to_numpy(dtype="float64")
            return pd.DataFrame({"score": score})

        key = ("boilerplate", pattern, self.remove_if_at_top_or_bottom)
        return textkit.cached_measures(text, key, compute)["score"]

    def _vectorised_score(self, text: Any) -> Any:
        t = textkit.as_text(text)
        n = len(t)
        rows = textkit.split_rows(t, textkit.PARAGRAPH_SEPARATOR, regex=True, strip=True)
        pattern = _regex_alternation(tuple(s.lower() for s in self.boilerplate_strings))
        rows["bp"] = rows["piece"].str.lower().str.contains(pattern).astype("int64")
        paragraphs = textkit.per_doc(rows, "bp", "size", n)
        bp = textkit.per_doc(rows, "bp", "sum", n)
        score = textkit.ratio(bp, paragraphs)
        if self.remove_if_at_top_or_bottom:
            pos = textkit.position_in_doc(rows)
            last = rows["doc"].map(paragraphs) - 1
            rows["edge"] = (rows["bp"] > 0) & ((pos == 0) | (pos == last))
            edge = textkit.per_doc(rows, "edge", "any", n, fill=False)
            score = score.mask(edge.astype(bool), float("inf"))
        return textkit.restore_index(score, text.index)


# -- word-level --------------------------------------------------------------------------
@dataclass
class MeanWordLengthFilter(Filter):
    """Keep documents whose mean word length is within bounds (Gopher).

    Parameters
    ----------
    min_mean_word_length : float
        Smallest kept mean number of characters per word.
    max_mean_word_length : float
        Largest kept mean number of characters per word.

    Score: non-whitespace characters / words (0 for a document without words).
    """

    min_mean_word_length: float = 3
    max_mean_word_length: float = 10

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["chars"] - m["whitespace"], m["words"])
        t = textkit.as_text(text)
        word_chars = textkit.nchars(t) - textkit.count(t, textkit.WS)
        return textkit.restore_index(
            textkit.ratio(word_chars, textkit.count(t, textkit.WORD)), text.index
        )

    def keep_score(self, score: Any) -> Any:
        return (score >= self.min_mean_word_length) & (score <= self.max_mean_word_length)


@dataclass
class LongWordFilter(_MaxScoreFilter):
    """Drop documents containing a very long word (C4).

    Parameters
    ----------
    max_word_length : int
        Longest kept word, in characters.

    Score: the length of the longest word.
    """

    max_word_length: int = 1000
    _threshold: ClassVar[str] = "max_word_length"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            return textkit.document_measures(text)["longest_word"]
        t = textkit.as_text(text)
        rows = textkit.split_rows(t)
        rows["len"] = textkit.nchars(rows["piece"])
        longest = textkit.per_doc(rows, "len", "max", len(t)).astype("int64")
        return textkit.restore_index(longest, text.index)


@dataclass
class CommonEnglishWordsFilter(_MinScoreFilter):
    """Keep documents that use common English function words (Gopher's stop-word rule).

    Parameters
    ----------
    min_num_common_words : int
        Fewest occurrences of :data:`COMMON_ENGLISH_WORDS` a kept document has.
    common_words : frozenset of str
        The words to count (lower case).

    Score: occurrences of common words (lower-cased, surrounding punctuation stripped).
    """

    min_num_common_words: int = 2
    common_words: frozenset[str] = COMMON_ENGLISH_WORDS
    _threshold: ClassVar[str] = "min_num_common_words"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            counts = textkit.word_list_counts(text, self.common_words, WORD_PUNCTUATION)
            if counts is not None:
                return counts
        t = textkit.as_text(text)
        rows = textkit.split_rows(t)
        words = rows["piece"].str.lower().str.strip(WORD_PUNCTUATION)
        rows["common"] = words.isin(sorted(self.common_words)).astype("int64")
        return textkit.restore_index(textkit.per_doc(rows, "common", "sum", len(t)), text.index)


@dataclass
class WordsWithoutAlphabetsFilter(_MinScoreFilter):
    """Keep documents where most words contain a letter (Gopher).

    Parameters
    ----------
    min_words_with_alphabets : float
        Smallest kept share of words that contain at least one Unicode letter.

    Score: words with a letter / words.
    """

    min_words_with_alphabets: float = 0.8
    _threshold: ClassVar[str] = "min_words_with_alphabets"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["letter_words"], m["words"])
        t = textkit.as_text(text)
        letter_words = textkit.count_words_with(t, "letter")
        return textkit.restore_index(
            textkit.ratio(letter_words, textkit.count(t, textkit.WORD)), text.index
        )


# -- line- and paragraph-level -----------------------------------------------------------
def _lines(t: Any) -> Any:
    return textkit.split_rows(t, "\n", strip=True)


def _paragraphs(t: Any) -> Any:
    return textkit.split_rows(t, textkit.PARAGRAPH_SEPARATOR, regex=True, strip=True)


def _unique_share(
    text: Any, unique: str, total: str, pieces: Callable[[Any], Any], by_chars: bool
) -> Any:
    """Share of a document's pieces (lines or paragraphs), or of their characters, that
    repeat no earlier piece; 1.0 for a document with none."""
    if textkit.fused(text):
        m = textkit.document_measures(text)
        return textkit.ratio(m[unique], m[total]).mask(m[total] == 0, 1.0)
    t = textkit.as_text(text)
    return textkit.restore_index(_unique_fraction(pieces(t), len(t), by_chars), text.index)


def _unique_fraction(rows: Any, n: int, by_char: bool) -> Any:
    """Share of pieces (or of their characters) left after dropping repeats, per doc."""
    rows["dup"] = rows.duplicated(["doc", "piece"])
    if by_char:
        rows["len"] = textkit.nchars(rows["piece"])
        rows["unique_len"] = rows["len"].where(~rows["dup"], 0)
        total = textkit.per_doc(rows, "len", "sum", n)
        unique = textkit.per_doc(rows, "unique_len", "sum", n)
    else:
        rows["unique"] = (~rows["dup"]).astype("int64")
        total = textkit.per_doc(rows, "unique", "size", n)
        unique = textkit.per_doc(rows, "unique", "sum", n)
    return textkit.ratio(unique, total).mask(total == 0, 1.0)


@dataclass
class RepeatedLinesFilter(_MinScoreFilter):
    """Drop documents with many repeated lines (Gopher: duplicate line fraction 0.3).

    Parameters
    ----------
    min_unique_line_fraction : float
        Smallest kept share of lines that are not a repeat of an earlier line.
        NeMo Curator calls this cut ``max_repeated_line_fraction=0.7``; it is the same
        rule (a document may shrink by at most 30% when repeated lines are removed).

    Score: distinct lines / lines.
    """

    min_unique_line_fraction: float = 0.7
    _threshold: ClassVar[str] = "min_unique_line_fraction"

    def score(self, text: Any) -> Any:
        return _unique_share(text, "unique_lines", "lines", _lines, by_chars=False)


@dataclass
class RepeatedParagraphsFilter(_MinScoreFilter):
    """Drop documents with many repeated paragraphs (Gopher).

    Parameters
    ----------
    min_unique_paragraph_fraction : float
        Smallest kept share of paragraphs that are not a repeat of an earlier one
        (NeMo Curator's ``max_repeated_paragraphs_ratio=0.7``).

    Score: distinct paragraphs / paragraphs.
    """

    min_unique_paragraph_fraction: float = 0.7
    _threshold: ClassVar[str] = "min_unique_paragraph_fraction"

    def score(self, text: Any) -> Any:
        return _unique_share(text, "unique_paragraphs", "paragraphs", _paragraphs, by_chars=False)


@dataclass
class RepeatedLinesByCharFilter(_MinScoreFilter):
    """Drop documents whose characters are mostly in repeated lines (Gopher).

    Parameters
    ----------
    min_unique_line_char_fraction : float
        Smallest kept share of line characters outside repeats of earlier lines
        (NeMo Curator's ``max_repeated_lines_char_ratio=0.8``).

    Score: characters of distinct lines / characters of all lines.
    """

    min_unique_line_char_fraction: float = 0.8
    _threshold: ClassVar[str] = "min_unique_line_char_fraction"

    def score(self, text: Any) -> Any:
        return _unique_share(text, "unique_line_chars", "line_chars", _lines, by_chars=True)


@dataclass
class RepeatedParagraphsByCharFilter(_MinScoreFilter):
    """Drop documents whose characters are mostly in repeated paragraphs (Gopher).

    Parameters
    ----------
    min_unique_paragraph_char_fraction : float
        Smallest kept share of paragraph characters outside repeats of earlier paragraphs
        (NeMo Curator's ``max_repeated_paragraphs_char_ratio=0.8``).

    Score: characters of distinct paragraphs / characters of all paragraphs.
    """

    min_unique_paragraph_char_fraction: float = 0.8
    _threshold: ClassVar[str] = "min_unique_paragraph_char_fraction"

    def score(self, text: Any) -> Any:
        return _unique_share(
            text, "unique_paragraph_chars", "paragraph_chars", _paragraphs, by_chars=True
        )


def _line_share(text: Any, pattern: str, negate: bool = False) -> Any:
    """Share of lines matching ``pattern`` (not matching, if ``negate``), per document."""
    t = textkit.as_text(text)
    rows = _lines(t)
    hit = rows["piece"].str.contains(pattern)
    rows["hit"] = (~hit if negate else hit).astype("int64")
    lines = textkit.per_doc(rows, "hit", "size", len(t))
    hits = textkit.per_doc(rows, "hit", "sum", len(t))
    return textkit.restore_index(textkit.ratio(hits, lines), text.index)


@dataclass
class PunctuationFilter(_MaxScoreFilter):
    """Drop documents whose lines mostly lack end-of-sentence punctuation.

    Parameters
    ----------
    max_num_sentences_without_endmark_ratio : float
        Largest kept share of lines that do not end with one of
        :data:`~curator_dask.text.END_MARKS` (ASCII ``. ! ? " '``, the
        ellipsis, curly closing quotes, CJK full stops).

    Score: lines without an end mark / lines.
    """

    max_num_sentences_without_endmark_ratio: float = 0.85
    _threshold: ClassVar[str] = "max_num_sentences_without_endmark_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["lines_without_endmark"], m["lines"])
        return _line_share(text, _END_MARK_LINE, negate=True)


@dataclass
class EllipsisFilter(_MaxScoreFilter):
    """Drop documents where many lines end with an ellipsis (Gopher).

    Parameters
    ----------
    max_num_lines_ending_with_ellipsis_ratio : float
        Largest kept share of lines ending with ``...`` or ``…``.

    Score: lines ending with an ellipsis / lines.
    """

    max_num_lines_ending_with_ellipsis_ratio: float = 0.3
    _threshold: ClassVar[str] = "max_num_lines_ending_with_ellipsis_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["lines_with_ellipsis"], m["lines"])
        return _line_share(text, _ELLIPSIS_LINE)


@dataclass
class BulletsFilter(_MaxScoreFilter):
    """Drop documents that are mostly bulleted lines (Gopher).

    Parameters
    ----------
    max_bullet_lines_ratio : float
        Largest kept share of lines starting with a bullet: one of :data:`BULLETS`, or
        ``-``, ``*``, ``+`` followed by whitespace.

    Score: bulleted lines / lines.
    """

    max_bullet_lines_ratio: float = 0.9
    _threshold: ClassVar[str] = "max_bullet_lines_ratio"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.document_measures(text)
            return textkit.ratio(m["bullet_lines"], m["lines"])
        return _line_share(text, _BULLET_LINE)


# -- n-gram repetition (Gopher) ----------------------------------------------------------
#: Gopher's thresholds for the character share of the most frequent n-gram.
TOP_NGRAM_MAX_RATIO: dict[int, float] = {2: 0.20, 3: 0.18, 4: 0.16}
#: Gopher's thresholds for the character share of duplicated n-grams.
DUPLICATE_NGRAM_MAX_RATIO: dict[int, float] = {
    5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10,
}  # fmt: skip


def _combine(left: Any, right: Any, shift: int) -> Any:
    """Exact key of the sequence ``left[i]`` then ``right[i + shift]`` (both int codes)."""
    width = int(right.max()) + 1 if len(right) else 1
    return textkit.factorize(left * width + right.shift(-shift, fill_value=0))


def _ngram_rows(t: Any, n: int) -> Any:
    """Words with an exact key for the n-gram starting at each word.

    ``key`` is equal for equal word sequences (built by factorising pairs of codes, so
    there are no hash collisions); ``valid`` is False where fewer than ``n`` words remain
    in the document (``key`` is -1 there); ``ngram_chars`` is the n-gram's characters
    (without separators). Keys of 1, 2, 4, 8.. words are built by doubling, then joined
    along the binary digits of ``n``: about log2(n) factorisations instead of n.
    """
    rows = textkit.split_rows(t)
    rows["len"] = textkit.nchars(rows["piece"])
    # Shifts cross document boundaries; those n-grams are marked invalid below.
    powers = {1: textkit.factorize(rows["piece"])}
    m = 1
    while 2 * m <= n:
        powers[2 * m] = _combine(powers[m], powers[m], m)
        m *= 2
    key, length = None, 0
    for m in sorted(powers, reverse=True):
        if length + m <= n:
            key = powers[m] if key is None else _combine(key, powers[m], length)
            length += m
    cum = rows["len"].cumsum()
    chars = cum.shift(-(n - 1), fill_value=0) - cum + rows["len"]
    size = rows.groupby("doc")["doc"].transform("size")
    rows["valid"] = textkit.position_in_doc(rows) + n <= size
    assert key is not None  # n >= 1: the loop above ran
    rows["key"] = key.where(rows["valid"], -1)
    rows["ngram_chars"] = chars
    return rows


@dataclass
class RepeatingTopNGramsFilter(_MaxScoreFilter):
    """Drop documents where the most frequent word n-gram covers too much text (Gopher).

    Parameters
    ----------
    n : int
        The n-gram size (in words).
    max_repeating_ngram_ratio : float, optional
        Largest kept share of word characters taken by the most frequent repeated
        n-gram; defaults to Gopher's 0.20 / 0.18 / 0.16 for n = 2 / 3 / 4.

    Score: count x characters of the most frequent n-gram occurring at least twice
    (ties: the longer one) / characters in words; 0 when no n-gram repeats. Occurrences
    may overlap; words are compared exactly (case-sensitive).
    """

    n: int = 2
    max_repeating_ngram_ratio: float | None = None
    _threshold: ClassVar[str] = "max_repeating_ngram_ratio"

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.max_repeating_ngram_ratio is None:
            if self.n not in TOP_NGRAM_MAX_RATIO:
                raise ValueError(f"no default max_repeating_ngram_ratio for n={self.n}; pass one")
            self.max_repeating_ngram_ratio = TOP_NGRAM_MAX_RATIO[self.n]
        super().__post_init__()

    @property
    def stage_name(self) -> str:
        return self.name or f"{type(self).__name__}_{self.n}"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.ngram_measures(text, self.n)
            return textkit.ratio(m[f"top_{self.n}"], m["word_chars"])
        t = textkit.as_text(text)
        rows = _ngram_rows(t, self.n)
        valid = rows[rows["valid"]]
        groups = valid.groupby(["doc", "key"])
        top = groups["ngram_chars"].max().to_frame("chars")
        top["count"] = groups["ngram_chars"].size()
        top = top[top["count"] >= 2].reset_index()
        top["covered"] = top["count"] * top["chars"]
        top = top.sort_values(["doc", "count", "chars"]).drop_duplicates("doc", keep="last")
        covered = top.set_index("doc")["covered"].reindex(range(len(t)), fill_value=0)
        total = textkit.per_doc(rows, "len", "sum", len(t))
        return textkit.restore_index(textkit.ratio(covered, total), text.index)


@dataclass
class RepeatingDuplicateNGramsFilter(_MaxScoreFilter):
    """Drop documents where duplicated word n-grams cover too much text (Gopher).

    Parameters
    ----------
    n : int
        The n-gram size (in words).
    max_repeating_duplicate_ngram_ratio : float, optional
        Largest kept share of word characters inside n-grams that occur more than once;
        defaults to Gopher's 0.15 .. 0.10 for n = 5 .. 10.

    Score: characters of the words covered by any occurrence of a repeated n-gram (each
    word counted once, however many n-grams cover it) / characters in words.
    """

    n: int = 5
    max_repeating_duplicate_ngram_ratio: float | None = None
    _threshold: ClassVar[str] = "max_repeating_duplicate_ngram_ratio"

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.max_repeating_duplicate_ngram_ratio is None:
            if self.n not in DUPLICATE_NGRAM_MAX_RATIO:
                raise ValueError(
                    f"no default max_repeating_duplicate_ngram_ratio for n={self.n}; pass one"
                )
            self.max_repeating_duplicate_ngram_ratio = DUPLICATE_NGRAM_MAX_RATIO[self.n]
        super().__post_init__()

    @property
    def stage_name(self) -> str:
        return self.name or f"{type(self).__name__}_{self.n}"

    def score(self, text: Any) -> Any:
        if textkit.fused(text):
            m = textkit.ngram_measures(text, self.n)
            return textkit.ratio(m[f"duplicate_{self.n}"], m["word_chars"])
        t = textkit.as_text(text)
        rows = _ngram_rows(t, self.n)
        count = rows.groupby(["doc", "key"])["key"].transform("size")
        starts = rows["valid"] & (count >= 2)
        covered = starts
        # A repeated n-gram starting at word i covers words i .. i+n-1. An n-gram that
        # starts in an earlier document is never valid here, so global shifts are safe.
        for k in range(1, self.n):
            covered = covered | starts.shift(k, fill_value=False)
        rows["covered_len"] = rows["len"].where(covered, 0)
        num = textkit.per_doc(rows, "covered_len", "sum", len(t))
        total = textkit.per_doc(rows, "len", "sum", len(t))
        return textkit.restore_index(textkit.ratio(num, total), text.index)


def heuristic_filters(text_column: str = "text", score_only: bool = False) -> list[Filter]:
    """Return the default heuristic filter set: NeMo Curator's filters and thresholds.

    The filters and thresholds are those of NeMo Curator's English heuristic set; the
    definitions (words, character classes, word lists) are this project's, so scores
    differ from NeMo's where the definitions do: docs/filters.md lists each difference
    and its effect on the shipped sample.

    Parameters
    ----------
    text_column : str
        Column holding the text, for every filter.
    score_only : bool
        Build every filter in score-only mode: nothing is dropped, each writes
        ``<name>_score`` and ``<name>_keep`` (see :attr:`Filter.score_only`).

    Returns
    -------
    list of Filter
        Cheapest and most selective first: word count and common English words (each a
        cheap pass of its own, and together they drop most text that is not English
        prose), boilerplate, character ratios, word lengths, repetition, line-level
        rules, n-gram repetition. A pipeline computes each measure only for the documents
        the filters before it kept, so the order changes the cost and which filter a
        removal is counted against, never the documents kept.

    Examples
    --------
    >>> [f.stage_name for f in heuristic_filters()][:3]
    ['WordCountFilter', 'CommonEnglishWordsFilter', 'BoilerPlateStringFilter']
    >>> heuristic_filters(score_only=True)[0].score_output_column
    'WordCountFilter_score'
    """
    filters: list[Filter] = [
        WordCountFilter(),
        CommonEnglishWordsFilter(),
        BoilerPlateStringFilter(),
        NonAlphaNumericFilter(),
        SymbolsToWordsFilter(),
        NumbersFilter(),
        UrlsFilter(),
        WhiteSpaceFilter(),
        ParenthesesFilter(),
        MeanWordLengthFilter(),
        LongWordFilter(),
        RepeatedLinesFilter(),
        RepeatedParagraphsFilter(),
        RepeatedLinesByCharFilter(),
        RepeatedParagraphsByCharFilter(),
        PunctuationFilter(),
        EllipsisFilter(),
        WordsWithoutAlphabetsFilter(),
        BulletsFilter(),
        *(RepeatingTopNGramsFilter(n=n) for n in sorted(TOP_NGRAM_MAX_RATIO)),
        *(RepeatingDuplicateNGramsFilter(n=n) for n in sorted(DUPLICATE_NGRAM_MAX_RATIO)),
    ]
    for f in filters:
        f.text_column = text_column
        f.score_only = score_only
    return filters
