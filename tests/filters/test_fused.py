"""The fused kernels give the same scores as the vectorised kernels they replaced."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curator_dask.text as text_kit
from curator_dask.filters import (
    BoilerPlateStringFilter,
    CommonEnglishWordsFilter,
    RepeatingDuplicateNGramsFilter,
    RepeatingTopNGramsFilter,
    heuristic_filters,
)

FILTERS = [
    *heuristic_filters(),
    BoilerPlateStringFilter(remove_if_at_top_or_bottom=False),
    CommonEnglishWordsFilter(common_words=frozenset({"und", "der", "k"})),
    CommonEnglishWordsFilter(common_words=frozenset({"été", "the"})),  # not ASCII: fallback
    RepeatingTopNGramsFilter(n=1, max_repeating_ngram_ratio=0.5),
    RepeatingDuplicateNGramsFilter(n=12, max_repeating_duplicate_ngram_ratio=0.1),
]


def _scores(text: pd.Series, fused: bool, monkeypatch: pytest.MonkeyPatch) -> list[pd.Series]:
    monkeypatch.setattr(text_kit, "_FUSED", fused)
    text_kit.clear_measures()
    return [f.score(text) for f in FILTERS]


def _assert_identical(text: pd.Series, monkeypatch: pytest.MonkeyPatch) -> None:
    fused = _scores(text, True, monkeypatch)
    vectorised = _scores(text, False, monkeypatch)
    for f, a, b in zip(FILTERS, fused, vectorised, strict=True):
        assert a.index.equals(text.index), f.stage_name
        # Identical, not close: same integers, same float64 divisions.
        np.testing.assert_array_equal(
            a.to_numpy(dtype="float64"), b.to_numpy(dtype="float64"), err_msg=f.stage_name
        )


def test_fused_equals_vectorised_on_the_sample(sample_records, monkeypatch):
    # every fourth document (1,001, from every source of the sample): the vectorised
    # reference takes 15 CPU-s on all 4,004, and the random texts below cover the edges
    text = pd.Series([r["text"] for r in sample_records[::4]])
    _assert_identical(text, monkeypatch)


def test_fused_equals_vectorised_on_the_edge_texts(texts, monkeypatch):
    _assert_identical(texts["text"], monkeypatch)


# Characters chosen to hit every definition: whitespace of every kind, line and paragraph
# breaks, end marks, bullets, URL prefixes, dots, letters and digits beyond ASCII, case
# pairs whose lower case is ASCII (K KELVIN SIGN, I WITH DOT), surrogate-free astral ones.
_ALPHABET = st.sampled_from(
    [*"ab cd\n\n\t.#()[]!?'\"-*+", "...", "…", "•", "\u00a0", "\u3000", "\x1c", "\x85",
    "\u2028", "\r\n", "\n \n", "http://x.y", "https://", "www.", "ftp://a", "The", "the",
    "THE,", "\u212a", "\u0130s", "é", "ß", "東京", "١٢", "½", "\U0001d518", "😀", "\u0301",
    " the the "]
)  # fmt: skip
_DOC = st.lists(_ALPHABET, max_size=60).map("".join)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(docs=st.lists(_DOC, min_size=1, max_size=12))
def test_fused_equals_vectorised_on_random_text(docs, monkeypatch):
    _assert_identical(pd.Series(docs), monkeypatch)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(docs=st.lists(st.text(max_size=80), min_size=1, max_size=8))
def test_fused_equals_vectorised_on_any_unicode(docs, monkeypatch):
    _assert_identical(pd.Series(docs), monkeypatch)


def test_measures_are_reused_for_survivors_and_recomputed_for_new_text():
    text_kit.clear_measures()
    full = pd.Series(["one two three " * 3, "a b a b a b", "x", "a b a b a b"], index=[5, 6, 7, 8])
    first = text_kit.ngram_measures(full)
    # A subset at other byte offsets (as after a filter) finds the same rows.
    sub = full.iloc[[3, 1]]
    pd.testing.assert_frame_equal(text_kit.ngram_measures(sub), first.loc[[8, 6]])
    # Changed text under the same index (as after a modifier) is measured again.
    changed = pd.Series(["x y", "a b a b a b"], index=[8, 6])
    got = text_kit.ngram_measures(changed)
    assert got.loc[8, "word_chars"] == 2
    assert got.loc[6, "top_2"] == first.loc[6, "top_2"]


def test_text_in_many_arrow_chunks_scores_as_in_one(sample_frame, monkeypatch):
    import pyarrow as pa

    # A reader's column holds many Arrow chunks; the kernels take them one at a time.
    one = sample_frame["text"].astype(text_kit.STR_DTYPE)
    arr = pa.array(one)  # one chunk: a ChunkedArray on pandas 3, an Array on pandas 2
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    cuts = [0, 1, 1, 17, 40, len(arr)]  # an empty chunk too
    chunked = pa.chunked_array([arr.slice(a, b - a) for a, b in itertools.pairwise(cuts)])
    many = pd.Series(chunked, dtype=text_kit.STR_DTYPE, index=one.index)
    assert pa.array(many).num_chunks == 5
    monkeypatch.setattr(text_kit, "_FUSED", True)
    for f in FILTERS:
        text_kit.clear_measures()
        want = f.score(one)
        text_kit.clear_measures()
        pd.testing.assert_series_equal(f.score(many), want, check_names=False, obj=f.stage_name)


def test_lines_strip_ascii_and_other_whitespace_at_both_ends():
    # _strip reads an ASCII end in place and decodes any other: both kinds, mixed, at
    # either end, next to 2-, 3- and 4-byte characters; a line of whitespace only is blank.
    pad = ["", " ", "\t", "\u00a0", "\u3000", "\x1c", "\x85", " \u2003\t", "\u2028 "]
    core = ["a", "é", "敏", "\U0001f600", "a b", "é\u00a0敏"]
    docs = [
        "\n".join(f"{p}{c}{q}" for c in core for q in pad) + "\n" + p + "\n" + p + core[1]
        for p in pad
    ]
    got = text_kit.document_measures(pd.Series(docs, dtype=text_kit.STR_DTYPE))
    for d, row in zip(docs, got.itertuples(), strict=True):
        lines = [ln.strip() for ln in d.split("\n") if ln.strip()]
        assert (row.lines, row.line_chars) == (len(lines), sum(map(len, lines)))
        assert (row.unique_lines, row.unique_line_chars) == (
            len(set(lines)),
            sum(map(len, set(lines))),
        )
