"""Modifiers against plain-Python references, on pandas and on dask."""

from __future__ import annotations

import doctest
import re
import unicodedata

import dask
import dask.dataframe as dd
import ftfy
import numpy as np
import pandas as pd
import pytest
from filters.reference import EDGE_TEXTS, c4_clean

import curator_dask.modifiers.lines
import curator_dask.modifiers.normalizers
from curator_dask.modifiers import (
    C4LineModifier,
    LineRemover,
    MojibakeFixer,
    UnicodeNormalizer,
    WhitespaceNormalizer,
)

TEXTS = [
    *EDGE_TEXTS,
    "cafÃ© rÃ©sumÃ© â€œquotedâ€\x9d",
    "\ufb01ne \u2460 \uff21\uff22\uff23 e\u0301 \u212b",
    "  indented  code\tkeep\t\tthis   \n\n\n\n\nnext\x00line\x7f\x9b end  ",
    "a\r\nb\rc\x0cd\x0be\u2028f\u2029g\x85h\x1ei",
    "tab\tsingle  and\u00a0\u00a0nbsp\u3000ideo",
    "Advertisement\nreal text\nADVERTISEMENT\n\nmore",
    "This line has enough words to stay.\nshort line.\nPlease enable JavaScript now ok.\n"
    "We use cookies to make this better.\nAnother long enough line ends here!\n"
    'Wait for it, wait for it...\nA quoted line that ends with a quote."',
]


def _whitespace_reference(t: str) -> str:
    t = re.sub("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]", "\n", t)
    t = "".join(c for c in t if unicodedata.category(c) != "Cc" or c in "\t\n")
    t = "".join(" " if unicodedata.category(c) == "Zs" else c for c in t)
    out = []
    for line in t.split("\n"):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        rest = re.sub("[ \t]{2,}", " ", line[len(indent) :])
        out.append((indent + rest).rstrip(" \t"))
    return re.sub("\n{3,}", "\n\n", "\n".join(out)).strip()


def _mojibake_reference(t: str) -> str:
    return ftfy.fix_text(t, MojibakeFixer()._config())


CASES = [
    (UnicodeNormalizer(), lambda t: unicodedata.normalize("NFC", t)),
    (UnicodeNormalizer(form="NFKC"), lambda t: unicodedata.normalize("NFKC", t)),
    (WhitespaceNormalizer(), _whitespace_reference),
    (
        WhitespaceNormalizer(max_consecutive_newlines=1),
        lambda t: re.sub("\n+", "\n", _whitespace_reference(t)),
    ),
    (MojibakeFixer(), _mojibake_reference),
    (MojibakeFixer(encoding_only=False), ftfy.fix_text),
    (
        LineRemover(pattern="(?i)^advertisement$"),
        lambda t: "\n".join(x for x in t.split("\n") if x.lower() != "advertisement"),
    ),
    (
        LineRemover(pattern="^advertisement$", case_sensitive=False),
        lambda t: "\n".join(x for x in t.split("\n") if x.lower() != "advertisement"),
    ),
    (C4LineModifier(), c4_clean),
]
IDS = [f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"text": TEXTS, "n": range(len(TEXTS))}, index=pd.RangeIndex(7, 7 + 3 * len(TEXTS), 3)
    )


@pytest.mark.parametrize(("mod", "reference"), CASES, ids=IDS)
def test_modifier_matches_reference(mod, reference, frame):
    got = mod.process(frame)
    assert got.index.equals(frame.index)
    assert got["n"].tolist() == frame["n"].tolist()
    assert got["text"].tolist() == [reference(t) for t in frame["text"]]


@pytest.mark.parametrize(("mod", "reference"), CASES, ids=IDS)
def test_dask_equals_pandas(mod, reference, frame):
    ddf = dd.from_pandas(frame, npartitions=3, sort=False)
    assert ddf.npartitions == 3
    with dask.config.set(scheduler="sync"):
        got = mod(ddf).compute()
    want = mod.process(frame)
    assert got.index.equals(want.index)
    assert got["text"].tolist() == want["text"].tolist()


def test_missing_values():
    s = pd.Series(["a  b", None, np.nan], dtype=object)
    for mod in (UnicodeNormalizer(), WhitespaceNormalizer(), MojibakeFixer()):
        out = mod.modify(s)
        assert out.iloc[0] in ("a  b", "a b")
        assert out.iloc[1:].isna().all()
    assert LineRemover(pattern="x").modify(s).tolist() == ["a  b", "", ""]


def test_modifiers_are_idempotent(frame):
    for mod in (UnicodeNormalizer(form="NFKC"), WhitespaceNormalizer(), C4LineModifier()):
        once = mod.modify(frame["text"])
        assert mod.modify(once).tolist() == once.tolist()


def test_validation():
    with pytest.raises(ValueError, match="form"):
        UnicodeNormalizer(form="NFX")
    with pytest.raises(ValueError, match="pattern"):
        LineRemover()
    with pytest.raises(ValueError, match="max_consecutive_newlines"):
        WhitespaceNormalizer(max_consecutive_newlines=0)


def test_doctests():
    for m in (curator_dask.modifiers.normalizers, curator_dask.modifiers.lines):
        result = doctest.testmod(m)
        assert result.attempted > 0
        assert result.failed == 0


def test_citation_remover_matches_a_python_reference():
    from curator_dask.modifiers import CitationRemover

    texts = [
        *TEXTS,
        "Paris[1] is big.[citation needed][Edit] [12, 13] [4\u20136] [b] [B] [x1] [] [ 1 ]",
        "[1][2]\n[citation  needed] keep [1",
        "[1,\u00a02] [1 ,2] [1,\t2]",
    ]
    ref = re.compile(r"\[(?:\d+(?: *[,\u2013-] *\d+)*|[a-z]|(?i:citation needed|edit))\]")
    want = [ref.sub("", t) for t in texts]
    frame = pd.DataFrame({"text": texts}, index=range(3, 3 + len(texts)))
    got = dd.from_pandas(frame, npartitions=3).map_partitions(CitationRemover().process)
    with dask.config.set(scheduler="sync"):
        assert got.compute()["text"].tolist() == want
    assert want[-3].startswith("Paris is big. ")
