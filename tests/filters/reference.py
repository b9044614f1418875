"""Plain-Python, one-document-at-a-time reference definitions of the filters' scores.

Written independently of the vectorised code (no regex classes shared with it), from the
definitions in the filters' docstrings.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from curator_dask.filters.c4 import C4_END_MARKS, C4_POLICY_STRINGS
from curator_dask.filters.heuristics import (
    BOILERPLATE_STRINGS,
    BULLETS,
    COMMON_ENGLISH_WORDS,
    WORD_PUNCTUATION,
)

#: Hand-built texts: edge cases for every definition the filters use.
EDGE_TEXTS: list[str] = [
    "",
    "   \n\t  ",
    "\n\n\n",
    "word",
    "Hello world. This is a test!",
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat.",
    "Café naïve façade — 東京は大きい都市です。 ١٢٣ ① ½ ß Ǆ x\u0301",
    "a\u00a0b\u2003c\u3000d\x1ce\x85f\u2028g\u200bh",
    "x" * 1500 + " tail and the end",
    "see https://example.com/path?q=1 and www.test.org or ftp://f.io\u00a0for (more) [info]",
    "# Title\n## sub\n### more... wait… #tag ....",
    "• one\n- two\n* three\n-notbullet\n+ four\n*\n\n",
    "a line\na line\n a line \nother\n\nother\n",
    "para one\n\npara one\n \t\npara two\n\n\npara one",
    "This site uses cookies.\n\nA real paragraph about things.\n\nMore text here.",
    "Intro text.\n\nRead our Privacy Policy now.\n\nMiddle.\n\nEnd text.",
    "Intro text.\n\nMiddle one.\n\nAll Rights Reserved\n\nMiddle two.\n\nEnd text.",
    "12345 67890 abc 3.14",
    "wait...\nmore…\nend.\n“quoted”\nfin'",
    "line one.\r\nline two\r\n\r\nline three!",
    "to be or not to be that is the question to be or not to be that is it",
    "a a a a a a a a a a a a a a",
    "one two three four five six seven eight nine ten one two three four five six seven "
    "eight nine ten eleven",
    "The, (of) and! IS to-day 'the' “The” of— with",
    "(((([[[[]]]]))))",
    "1 2 3 4 5 6 7 8 9 0 - -- --- ... … # ##",
    "lorem ipsum dolor sit amet. Lorem Ipsum again.",
    "def f(x):\n    return {x: 1}\n",
]


END_MARKS = tuple(".!?\u2026\"'\u201d\u2019\u3002\uff01\uff1f")


def ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def words(t: str) -> list[str]:
    return t.split()


def lines(t: str) -> list[str]:
    return [x.strip() for x in t.split("\n") if x.strip()]


def paragraphs(t: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n(?:[^\S\n]*\n)+", t) if p.strip()]


def word_count(t: str) -> int:
    return len(words(t))


def non_alnum(t: str) -> float:
    return ratio(sum(not c.isalnum() for c in t), len(t))


def symbols(t: str) -> float:
    return ratio(t.count("#") + t.count("...") + t.count("\u2026"), len(words(t)))


def numbers(t: str) -> float:
    return ratio(sum(c.isdecimal() for c in t), len(t))


def urls(t: str) -> float:
    found = re.findall(r"(?:https?|ftp)://\S+|www\.\S+", t)
    return ratio(sum(len(u) for u in found), len(t))


def whitespace(t: str) -> float:
    return ratio(sum(c.isspace() for c in t), len(t))


def parentheses(t: str) -> float:
    return ratio(sum(c in "()[]" for c in t), len(t))


def boilerplate(t: str, top_or_bottom: bool = True) -> float:
    ps = paragraphs(t)
    bp = [any(s in p.lower() for s in BOILERPLATE_STRINGS) for p in ps]
    if top_or_bottom and ps and (bp[0] or bp[-1]):
        return math.inf
    return ratio(sum(bp), len(ps))


def mean_word_length(t: str) -> float:
    ws = words(t)
    return ratio(sum(len(w) for w in ws), len(ws))


def longest_word(t: str) -> int:
    return max((len(w) for w in words(t)), default=0)


def common_words(t: str) -> int:
    return sum(w.lower().strip(WORD_PUNCTUATION) in COMMON_ENGLISH_WORDS for w in words(t))


def words_with_alpha(t: str) -> float:
    ws = words(t)
    return ratio(sum(any(c.isalpha() for c in w) for w in ws), len(ws))


def unique_fraction(pieces: list[str]) -> float:
    return len(set(pieces)) / len(pieces) if pieces else 1.0


def unique_char_fraction(pieces: list[str]) -> float:
    total = sum(len(p) for p in pieces)
    return sum(len(p) for p in set(pieces)) / total if total else 1.0


def no_endmark(t: str) -> float:
    ls = lines(t)
    return ratio(sum(not x.endswith(END_MARKS) for x in ls), len(ls))


def ellipsis_lines(t: str) -> float:
    ls = lines(t)
    return ratio(sum(x.endswith(("...", "\u2026")) for x in ls), len(ls))


def bullet_lines(t: str) -> float:
    ls = lines(t)

    def is_bullet(x: str) -> bool:
        return x[0] in BULLETS or (x[0] in "-*+" and (len(x) == 1 or x[1].isspace()))

    return ratio(sum(is_bullet(x) for x in ls), len(ls))


def _ngrams(ws: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)]


def top_ngram(t: str, n: int) -> float:
    ws = words(t)
    counts = Counter(_ngrams(ws, n))
    best = (0, 0)  # (count, chars)
    for gram, c in counts.items():
        if c >= 2:
            best = max(best, (c, sum(len(w) for w in gram)))
    return ratio(best[0] * best[1], sum(len(w) for w in ws))


def duplicate_ngrams(t: str, n: int) -> float:
    ws = words(t)
    grams = _ngrams(ws, n)
    counts = Counter(grams)
    covered = [False] * len(ws)
    for i, g in enumerate(grams):
        if counts[g] >= 2:
            for j in range(i, i + n):
                covered[j] = True
    return ratio(
        sum(len(w) for w, c in zip(ws, covered, strict=True) if c), sum(len(w) for w in ws)
    )


# -- C4 and FineWeb ----------------------------------------------------------------------
def c4_line_ok(line: str, min_words: int = 5) -> bool:
    low = line.lower()
    return (
        line.endswith(tuple(C4_END_MARKS))
        and not line.endswith("...")
        and len(line.split()) >= min_words
        and "javascript" not in low
        and not any(p in low for p in C4_POLICY_STRINGS)
    )


def c4_sentences(line: str) -> int:
    # A word ends a sentence when, after stripping closing quotes/brackets, it ends in . ! ?
    n = 0
    for w in line.split():
        core = w.rstrip("\"'\u201d\u2019)]")
        if core and core[-1] in ".!?":
            n += 1
    return n


def c4_failures(t: str) -> int:
    kept = [x for x in lines(t) if c4_line_ok(x)]
    sentences = sum(c4_sentences(x) for x in kept)
    return (sentences < 3) + (longest_word(t) > 1000) + ("lorem ipsum" in t.lower()) + ("{" in t)


def c4_clean(t: str) -> str:
    return "\n".join(x for x in lines(t) if c4_line_ok(x))


def fineweb_failures(t: str) -> int:
    ls = lines(t)
    punct = ratio(sum(x.endswith(END_MARKS) for x in ls), len(ls))
    short = ratio(sum(len(x) <= 30 for x in ls), len(ls))
    dup = 1.0 - unique_char_fraction(ls)
    newline = ratio(t.count("\n"), len(words(t)))
    return (punct < 0.12) + (short > 0.67) + (dup > 0.01) + (newline > 0.3)
