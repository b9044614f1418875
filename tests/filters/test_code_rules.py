"""PerExtensionFilter and C4BadWordsFilter against plain-Python references, on partitions."""

from __future__ import annotations

import re

import dask.dataframe as dd
import pandas as pd
import pytest

from curator_dask.filters import C4BadWordsFilter, PerExtensionFilter

from .reference import EDGE_TEXTS

META = (
    "language,extension,Include,Long_line_threshold,Alphanum_threshold,Alpha filter\n"
    "python,py,1,40,0.4,\n"
    "python,pyx,1,,,0.5\n"
    "c-sharp,cs,1,1000,0.25,0.2\n"
    "python,pyc,0,,,\n"
)
CODE = [
    "def f(x):\n    return x + 1\n",
    "x = '" + "a" * 60 + "'\n",
    "+-*/ (x) {}\n[] ;;\n",
    "",
    "\n\n\n",
    "naïve = 'ünïcode'\nπ = 3\n",
    "short\n" * 50,
    *EDGE_TEXTS,
]


def _reference(text: str, rule: tuple) -> int:
    include, long_line, alnum_min, alpha_min = rule
    if not include:
        return 0
    n = len(text)
    lengths = [len(piece) for piece in text.split("\n")]
    ok = True
    if long_line is not None:
        mean = (n + 1) / len(lengths) - 1
        ok &= max(lengths) <= long_line and mean <= 100
    if alnum_min is not None:
        ok &= (sum(c.isalnum() for c in text) / n if n else 0) >= alnum_min
    if alpha_min is not None:
        ok &= (sum(c.isalpha() for c in text) / n if n else 0) >= alpha_min
    return int(ok)


@pytest.mark.parametrize(
    ("lang", "extension", "rule"),
    [
        ("Python", "py", (True, 40, 0.4, None)),
        ("python", "pyx", (True, None, None, 0.5)),
        ("C#", "cs", (True, 1000, 0.25, 0.2)),
        ("Python", "pyc", (False, None, None, None)),  # not included
        ("Python", "ipynb", (False, None, None, None)),  # not listed
    ],
)
def test_per_extension_filter_equals_the_reference(tmp_path, lang, extension, rule):
    path = tmp_path / "meta.csv"
    path.write_text(META)
    f = PerExtensionFilter(lang=lang, extension=extension, metadata_file=str(path))
    assert f.rule == rule
    path.unlink()  # read once, on the client: the workers never open it
    frame = pd.DataFrame({"text": CODE, "n": range(len(CODE))})
    want = [_reference(t, rule) for t in CODE]
    got = f(dd.from_pandas(frame, npartitions=3)).compute()
    assert got["n"].tolist() == [i for i, w in enumerate(want) if w]
    assert f.score(frame["text"]).tolist() == want


def test_per_extension_filter_refuses_an_unknown_language(tmp_path):
    path = tmp_path / "meta.csv"
    path.write_text(META)
    with pytest.raises(ValueError, match="no rows for language 'rust'"):
        PerExtensionFilter(lang="Rust", extension="rs", metadata_file=str(path))


WORDS = ["darn", "heck no", "c++", "ärger"]
TEXTS = [
    "Darn it.",
    "darning socks",
    "well, heck no!",
    "heck  no",
    "I like C++ a lot",
    "c+++",  # "+" is not a word character: a match
    "Ärger im Büro",
    "xärger",
    "darn_it",
    "",
    None,
    *EDGE_TEXTS,
]


def _has_bad_word(text: str | None) -> bool:
    low = (text or "").lower()
    for w in WORDS:
        for m in re.finditer(re.escape(w), low):
            before = low[m.start() - 1] if m.start() else " "
            after = low[m.end()] if m.end() < len(low) else " "
            if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
                return True
    return False


def test_c4_bad_words_filter_equals_the_reference(tmp_path):
    path = tmp_path / "en"
    path.write_text("\n".join(["Darn", "", "heck no", "c++", "ärger"]) + "\n")
    for f in (C4BadWordsFilter(bad_words=WORDS), C4BadWordsFilter(bad_words_path=str(path))):
        frame = pd.DataFrame({"text": TEXTS, "n": range(len(TEXTS))})
        got = f(dd.from_pandas(frame, npartitions=3)).compute()
        assert got["n"].tolist() == [i for i, t in enumerate(TEXTS) if not _has_bad_word(t)]
    assert [_has_bad_word(t) for t in TEXTS[:9]] == [1, 0, 1, 0, 1, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="exactly one"):
        C4BadWordsFilter()
