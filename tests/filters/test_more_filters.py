"""Code, content, token and bitext filters against plain-Python references."""

from __future__ import annotations

import math
import re
import unicodedata

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curator_dask.filters import (
    AlphaFilter,
    GeneralCommentToCodeFilter,
    HTMLBoilerplateFilter,
    LengthRatioFilter,
    NumberOfLinesOfCodeFilter,
    PornographicUrlsFilter,
    PythonCommentToCodeFilter,
    SubstringFilter,
    TokenCountFilter,
    TokenizerFertilityFilter,
    WordCountFilter,
    XMLHeaderFilter,
)

from .reference import EDGE_TEXTS, lines

CODE = [
    "# a comment\nx = 1\n# another\n\ny = 2  # trailing\n",
    "int main() {\n  // line\n  /* block\n  comment */ return 0;\n}\n",
    "/* only */",
    "-- sql comment\nSELECT 1;\n",
    "no comments here\nat all\n",
    "",
    "#\n#\n#",
    '<?xml version="1.0"?>\n<root/>',
    " " * 120 + '<?xml version="1.0"?>',
    "<html><head><style>p {color: red}</style><script>var x = 1;</script></head>"
    "<body><p>Visible words here.</p></body></html>",
    "<<not a tag>> and <b>bold</b>",
]
TEXTS = EDGE_TEXTS + CODE


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def ref_comments(t: str, markers: tuple[str, ...], block: str | None) -> float:
    ls = lines(t)
    comment = [x for x in ls if x.startswith(markers)]
    chars = sum(len(x) for x in comment)
    if block:
        rest = "\n".join(x for x in ls if not x.startswith(markers))
        chars += len(rest) - len(re.sub(block, "", rest, flags=re.S))
    return _ratio(chars, len(t))


def ref_html(t: str) -> float:
    v = re.sub(r"<(script|style)\b[^>]*>.*?</(?:script|style)\s*>", "", t, flags=re.S | re.I)
    v = re.sub(r"<[^<>]*>", "", v)
    return _ratio(sum(not c.isspace() for c in v), len(t))


def ref_cjk_words(t: str) -> int:
    n, run = 0, False
    for c in t:
        name = unicodedata.name(c, "")
        cjk = name.startswith(("CJK UNIFIED", "HIRAGANA", "KATAKANA")) and "MARK" not in name
        if c.isspace():
            run = False
        elif cjk:
            n, run = n + 1, False
        elif not run:
            n, run = n + 1, True
    return n


CASES = [
    (
        PythonCommentToCodeFilter(),
        lambda t: ref_comments(t, ("#",), None),
        lambda s: 0.01 <= s <= 0.85,
    ),
    (
        GeneralCommentToCodeFilter(language="c"),
        lambda t: ref_comments(t, ("//",), r"/\*.*?\*/"),
        lambda s: 0.01 <= s <= 0.85,
    ),
    (
        GeneralCommentToCodeFilter(language="sql", max_comment_to_code_ratio=0.5),
        lambda t: ref_comments(t, ("--",), r"/\*.*?\*/"),
        lambda s: 0.01 <= s <= 0.5,
    ),
    (
        NumberOfLinesOfCodeFilter(min_lines=2, max_lines=4),
        lambda t: len(lines(t)),
        lambda s: 2 <= s <= 4,
    ),
    (XMLHeaderFilter(), lambda t: int("<?xml version=" in t[:100]), lambda s: s == 0),
    (AlphaFilter(), lambda t: _ratio(sum(c.isalpha() for c in t), len(t)), lambda s: s >= 0.25),
    (HTMLBoilerplateFilter(min_lang_chars_ratio=0.3), ref_html, lambda s: s >= 0.3),
    (WordCountFilter(min_words=3, lang="zh"), ref_cjk_words, lambda s: 3 <= s <= 100_000),
]


@pytest.mark.parametrize(("flt", "ref", "keep"), CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_scores_and_keeps_match_the_reference(flt, ref, keep):
    frame = pd.DataFrame({"text": TEXTS, "n": range(len(TEXTS))}, index=range(7, 7 + len(TEXTS)))
    got = flt.score(frame["text"])
    want = [ref(t) for t in TEXTS]
    assert got.index.equals(frame.index)
    np.testing.assert_allclose(got.to_numpy(dtype="float64"), np.array(want, dtype="float64"))
    kept = dd.from_pandas(frame, npartitions=3).map_partitions(flt.process).compute()
    assert kept["n"].tolist() == [n for n, s in zip(frame["n"], want, strict=True) if keep(s)]


@pytest.mark.parametrize("position", ["any", "prefix", "suffix"])
def test_substring_filter(position):
    texts = ["abc", "cab", "xaby", "ab", "", "a b"]
    got = SubstringFilter(substring="ab", position=position).process(pd.DataFrame({"text": texts}))
    test = {"any": str.__contains__, "prefix": str.startswith, "suffix": str.endswith}[position]
    assert got["text"].tolist() == [t for t in texts if test(t, "ab")]


def test_pornographic_urls_filter_reads_the_url_column():
    frame = pd.DataFrame({"text": ["porn", "a", "b"], "url": ["x.com", "PoRnhub.example", "y.org"]})
    assert PornographicUrlsFilter().process(frame)["text"].tolist() == ["porn", "b"]


def test_length_ratio_filter():
    frame = pd.DataFrame(
        {"src": ["a b c", "a", "", "a b c d e f g", ""], "tgt": ["x y", "x y z w", "", "x y", "q"]}
    )

    def ref(s: str, t: str) -> float:
        a, b = len(s.split()), len(t.split())
        if not a and not b:
            return 1.0
        return math.inf if not min(a, b) else max(a / b, b / a)

    want = [
        i for i, (s, t) in enumerate(zip(frame["src"], frame["tgt"], strict=True)) if ref(s, t) < 3
    ]
    assert LengthRatioFilter(max_ratio=3).process(frame).index.tolist() == want
    scored = LengthRatioFilter(score_only=True).process(frame)
    assert scored["LengthRatioFilter_score"].tolist() == [
        ref(s, t) for s, t in zip(frame["src"], frame["tgt"], strict=True)
    ]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A tiny word-level tokenizer, saved the way save_pretrained saves one."""
    pytest.importorskip("tokenizers")  # the models extra
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        ["the cat sat on the mat", "a dog"], trainers.WordLevelTrainer(special_tokens=["[UNK]"])
    )
    d = tmp_path_factory.mktemp("tok")
    tok.save(str(d / "tokenizer.json"))
    return str(d)


def test_token_filters_count_with_the_local_tokenizer(tokenizer_dir):
    texts = ["the cat sat", "zebra!", "", "the mat, the dog."]
    # The Whitespace pre-tokenizer splits on \w+|[^\w\s]+: one token per piece.
    want = [len(re.findall(r"\w+|[^\w\s]+", t)) for t in texts]
    frame = pd.DataFrame({"text": texts})
    f = TokenCountFilter(tokenizer_path=tokenizer_dir, min_tokens=1, max_tokens=3)
    assert f.score(frame["text"]).tolist() == want
    assert f.process(frame)["text"].tolist() == [
        t for t, n in zip(texts, want, strict=True) if 1 <= n <= 3
    ]
    fert = TokenizerFertilityFilter(tokenizer_path=tokenizer_dir, min_char_to_token_ratio=3)
    np.testing.assert_allclose(
        fert.score(frame["text"]).to_numpy(),
        [_ratio(len(t), n) for t, n in zip(texts, want, strict=True)],
    )
    # The tokenizer is per-process state: it is not pickled with the stage.
    f.setup()
    assert "_tokenizer" not in f.__getstate__()


def test_histogram_filter_from_characters_and_from_a_file(tmp_path):
    from curator_dask.filters import HistogramFilter

    chars = "abcdefghijklmnopqrstuvwxyz.-]^\\"
    texts = ["hello wörld", "ééé", "", "   ", "a-b]c^d\\e", "東京 abc"]

    def ref(t: str) -> float:
        visible = [c for c in t if not c.isspace()]
        return sum(c in chars for c in visible) / len(visible) if visible else 1.0

    f = HistogramFilter(histogram=chars, threshold=0.7)
    np.testing.assert_allclose(f.score(pd.Series(texts)).to_numpy(), [ref(t) for t in texts])
    kept = f.process(pd.DataFrame({"text": texts}))["text"].tolist()
    assert kept == [t for t in texts if ref(t) >= 0.7]
    # The file form stops at the threshold character's line.
    path = tmp_path / "en"
    path.write_text("e 100\nt 90\n] 50\nz 1\n", encoding="utf-8")
    g = HistogramFilter(histogram_path=str(path))
    assert g.histogram == "et"
    assert g.score(pd.Series(["tee z"])).tolist() == [0.75]
    with pytest.raises(ValueError, match="exactly one"):
        HistogramFilter()


def test_bundled_english_histogram_is_the_scripts_output_on_the_sample(sample_records):
    from curator_dask.filters import HistogramFilter
    from curator_dask.filters.content import character_histogram

    english = [r["text"] for r in sample_records if r["source"] in ("janeausten", "sotu")]
    f = HistogramFilter(lang="en")
    assert f.histogram == "".join(sorted(character_histogram(english)))
    texts = [english[0][:2000], "东京是日本的首都。", "Ünïcödé ñ ß", ""]
    chars = set(f.histogram)

    def ref(t: str) -> float:
        visible = [c for c in t if not c.isspace()]
        return sum(c in chars for c in visible) / len(visible) if visible else 1.0

    np.testing.assert_allclose(f.score(pd.Series(texts)).to_numpy(), [ref(t) for t in texts])
    assert ref(texts[0]) > 0.99
    assert ref(texts[1]) == 0
    with pytest.raises(ValueError, match="no bundled histogram"):
        HistogramFilter(lang="xx")
