"""Every regular expression the package can send to a cudf column is in libcudf's syntax.

Two scans, no GPU: every filter and modifier runs its cudf code path on a stand-in cudf
built on pandas (tests/_cudf_on_pandas.py), which records each pattern sent to a regex
``.str`` method; and a static scan of the package finds the literal patterns passed to
``.str.<regex method>`` anywhere else (classifiers, readers). Each pattern is checked
against the syntax libcudf documents (tests/_libcudf_regex.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest
from _cudf_on_pandas import _REGEX_METHODS, cudf_on_pandas
from _libcudf_regex import libcudf_regex_problems
from filters.reference import EDGE_TEXTS

import curator_dask
from curator_dask import text as textkit
from curator_dask.filters import (
    C4BadWordsFilter,
    HistogramFilter,
    PerExtensionFilter,
)
from curator_dask.filters import (
    __all__ as filter_names,
)
from curator_dask.filters import __dict__ as filter_ns
from curator_dask.modifiers import LineRemover
from curator_dask.modifiers import __all__ as modifier_names
from curator_dask.modifiers import __dict__ as modifier_ns
from curator_dask.nemo import filters as nemo_filters

# Constructors that need arguments; the token filters need a tokenizer and send no regex.
_NEEDS_ARGS = {
    C4BadWordsFilter: lambda: C4BadWordsFilter(bad_words=["badword", "two words"]),
    HistogramFilter: lambda: HistogramFilter(lang="en"),
    LineRemover: lambda: LineRemover(pattern="^Advertisement$"),
    nemo_filters.GeneralCommentToCodeFilter: lambda: nemo_filters.GeneralCommentToCodeFilter(
        "python"
    ),
}
_SKIPPED = {"DocumentFilter", "Filter", "Modifier", "TokenCountFilter", "TokenizerFertilityFilter"}


def _stages(tmp_path):
    meta = tmp_path / "code_meta.csv"
    meta.write_text(
        "language,extension,Include,Long_line_threshold,Alphanum_threshold,Alpha filter\n"
        "python,py,1,30,0.25,0.25\n"
    )
    needs_args = {
        **_NEEDS_ARGS,
        PerExtensionFilter: lambda: PerExtensionFilter(
            lang="Python", extension="py", metadata_file=str(meta)
        ),
    }
    seen = []
    for names, ns in ((filter_names, filter_ns), (modifier_names, modifier_ns)):
        seen += [(n, ns[n]) for n in names if isinstance(ns[n], type)]
    seen += [(n, getattr(nemo_filters, n)) for n in nemo_filters.__all__]
    for name, cls in seen:
        if name in _SKIPPED or not isinstance(cls, type):
            continue
        if (
            name == "GeneralCommentToCodeFilter"
            and cls is not nemo_filters.GeneralCommentToCodeFilter
        ):
            continue  # the NeMo version names its language
        if name == "PerExtensionFilter" and cls.__module__.startswith("curator_dask.nemo"):
            continue  # reads code_meta.csv from the working directory
        yield name, needs_args.get(cls, cls)()


def _texts():
    extra = [
        "• a bullet\n- another\nhttp://example.com/x www.example.org",
        "Some text…\n\nAnother paragraph.\n\nSome text…\n\n",
        "def f():\n    # comment\n    return 1\n<html><script>x</script><p>t</p></html>",
        "a  b\r\n\r\n\r\nc\x00 \u2028 d\u00a0e \x0b\x85 ﬁ ①",
        "<?xml version='1.0'?><a>lorem ipsum {x}</a> javascript privacy policy",
    ]
    return [t for t in EDGE_TEXTS if "\x00" not in t] + extra


def test_every_pattern_sent_to_cudf_is_libcudf_syntax(monkeypatch, tmp_path):
    monkeypatch.setattr(textkit, "_FAST_PANDAS", False)
    with cudf_on_pandas() as rec:
        import cudf

        texts = pd.Series(_texts()).astype(textkit.STR_DTYPE)
        columns = {"text": texts, "src": texts, "tgt": texts[::-1], "url": texts}
        part = cudf.from_pandas(pd.DataFrame(columns))
        assert textkit.is_cudf(part["text"])
        ran = 0
        for _name, stage in _stages(tmp_path):
            if hasattr(stage, "process"):
                out = stage.process(part)
            else:  # NeMo-style DocumentFilter
                out = stage.score_document(part["text"])
            assert textkit.is_cudf(out)
            ran += 1
    assert ran >= 40
    assert len({p for _, p in rec.patterns}) >= 30, "the scan saw too few patterns"
    bad = {p: libcudf_regex_problems(p) for _, p in rec.patterns}
    bad = {p: why for p, why in bad.items() if why}
    assert not bad, "\n".join(f"{p!r}: {why}" for p, why in bad.items())
    # pandas reads a replace pattern literally unless told, cudf as a regex
    assert not rec.implicit, f"say regex= explicitly: {rec.implicit}"


def _literal_patterns():
    """(file:line, pattern) for string literals passed to ``.str.<regex method>``."""
    root = Path(curator_dask.__file__).parent
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        consts = {
            t.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for t in node.targets
            if isinstance(t, ast.Name) and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _REGEX_METHODS
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "str"
                and node.args
            ):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("regex"), ast.Constant) and kw["regex"].value is False:
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                pat = arg.value
            elif isinstance(arg, ast.Name) and arg.id in consts:
                pat = consts[arg.id]
            else:
                continue
            if node.func.attr in ("split", "rsplit") and "regex" not in kw and len(pat) <= 1:
                continue
            yield f"{path.relative_to(root.parent)}:{node.lineno}", pat


def test_literal_patterns_in_the_package_are_libcudf_syntax():
    found = list(_literal_patterns())
    assert len(found) >= 8
    bad = [(where, p, libcudf_regex_problems(p)) for where, p in found]
    bad = [b for b in bad if b[2]]
    assert not bad, "\n".join(f"{w} {p!r}: {why}" for w, p, why in bad)


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("[^\x00-\x7f]", "literal NUL"),
        (r"[^\x00-\x7f]", "range end written as an escape"),
        (r"[\x00-\x08]", "range end written as an escape"),
        (r"\x85", "escape for U+0085"),
        (r"[\x86" + "-\x9f]", "escape for U+0086"),
        (r"\205", "escape for U+0085"),
        (r"\v", "escape \\v"),
        (r"\pL", "escape \\p"),
        (r"(?=a)", "group syntax"),
        (r"[-*+]", "incomplete range"),
        (r"[a-]", "incomplete range"),
        (r"*a", "nothing to repeat"),
        (r"^*", "nothing to repeat"),
        (r"a{1000}", "over 999"),
        (r"(a", "unclosed"),
        (r"[]", "unterminated"),
        (r"\x4", "two hex digits"),
        (r"[\v]", "escape \\v"),
    ],
)
def test_checker_rejects(pattern, problem):
    assert any(problem in p for p in libcudf_regex_problems(pattern)), libcudf_regex_problems(
        pattern
    )


@pytest.mark.parametrize(
    "pattern",
    [
        "[^\\x00-\x7f]",
        "a\tb",
        r"[\.]",
        "\\r\\n|[\\r\x0b\x0c\x1c\x1d\x1e\x85\u2028]",
        r"[\-*+]",
        r"(?:https?|ftp)://[^\t\n ]+",
        r"\n{3,}",
        r"([^ \t\n])[ \t]{2,}",
        "[.!?]+[\"')\\]]*(?:\\s|$)",
        r"\b\w+\b|\d{1,3}?",
        "{literal}",
    ],
)
def test_checker_accepts(pattern):
    assert libcudf_regex_problems(pattern) == []


def _multilingual():
    return [
        *EDGE_TEXTS,
        "Ünïcödé wörds, 123 and ١٢٣ and ½ ² Ⅻ; 日本語のテキスト 和 中文 \uff46\uff55\uff4c\uff4c",
        "Ελληνικά κείμενα και Кириллица, עברית ועוד, हिन्दी ३४५ 😀 \U0001f600x",
        "ǅungla ǈ ﬁ ŉ ß ẞ \u02c6 ʰ ᵃ ª º",
        "",
    ]


@pytest.mark.parametrize("name", ["letter", "alnum", "digit"])
def test_class_counts_on_cudf_equal_re2(name):
    """The cudf path counts a class through code points and RE2's table: same counts."""
    texts = pd.Series(_multilingual()).astype(textkit.STR_DTYPE)
    want = textkit.count(texts, textkit.char_class(texts, name)).tolist()
    with cudf_on_pandas():
        import cudf

        got = textkit.count_class(cudf.from_pandas(texts), name)
        assert textkit.is_cudf(got)
    assert got.tolist() == want
    assert sum(want) > 0


def test_words_with_a_letter_on_cudf_equal_re2():
    texts = pd.Series(_multilingual()).astype(textkit.STR_DTYPE)
    want = textkit.count_words_with(texts, "letter").tolist()
    with cudf_on_pandas():
        import cudf

        got = textkit.count_words_with(cudf.from_pandas(texts), "letter").tolist()
    assert got == want


def test_unpack_utf8_gives_every_code_point():
    import numpy as np

    cps = np.array([0, 0x41, 0x7F, 0x80, 0xE9, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF])
    units = [int.from_bytes(chr(c).encode(), "big") for c in cps]
    packed = np.array(units, dtype=np.uint32).view(np.int32)  # cudf gives int32
    assert textkit.unpack_utf8(np, packed).tolist() == cps.tolist()


@pytest.mark.parametrize("form", ["NFC", "NFKC", "NFD"])
def test_unicode_normalizer_patches_cudf_rows_by_position(form):
    """cudf's ``where`` does not align by index: the patch must cover every row."""
    from curator_dask.modifiers import MojibakeFixer, UnicodeNormalizer

    texts = pd.Series(
        ["plain", "ﬁne ①", "ascii", "\uff26\uff55\uff4c\uff4c", "café"], index=[7, 3, 9, 1, 4]
    )
    texts = texts.astype(textkit.STR_DTYPE)
    for m in (UnicodeNormalizer(form=form), MojibakeFixer()):
        want = m.modify(texts)
        with cudf_on_pandas():
            import cudf

            got = m.modify(cudf.from_pandas(texts))
        assert got.tolist() == want.tolist()
        assert list(got.index) == list(want.index)


def test_comment_blocks_of_every_language_are_libcudf_syntax():
    from curator_dask.filters.code import COMMENT_SYNTAX

    blocks = {lang: b for lang, (_, b) in COMMENT_SYNTAX.items() if b}
    assert blocks
    bad = {lang: libcudf_regex_problems(b) for lang, b in blocks.items()}
    assert not any(bad.values()), bad


def test_every_filter_scores_on_the_cudf_path_like_pandas(monkeypatch, tmp_path):
    """Each filter's cudf code path (on the stand-in, with cudf's whitespace split and
    ``where``) scores the texts as the pandas path does: Unicode spaces, classes, lines."""
    import numpy as np

    monkeypatch.setattr(textkit, "_FAST_PANDAS", False)
    texts = pd.Series(_texts() + _multilingual()).astype(textkit.STR_DTYPE)
    wrong = []
    with cudf_on_pandas():
        import cudf

        gpu = cudf.from_pandas(texts)
        for name, stage in _stages(tmp_path):
            if not hasattr(stage, "score") or not getattr(stage, "has_score", lambda: 0)():
                continue
            if name in ("LengthRatioFilter",):
                continue  # two columns
            want = np.asarray(stage.score(texts), dtype="float64")
            got = np.asarray(stage.score(gpu), dtype="float64")
            if not np.allclose(got, want, rtol=0, atol=1e-9, equal_nan=True):
                i = int(np.flatnonzero(~np.isclose(got, want, rtol=0, atol=1e-9))[0])
                wrong.append(f"{name}: {texts[i][:40]!r} cudf path {got[i]} pandas {want[i]}")
    assert not wrong, "\n".join(wrong)
