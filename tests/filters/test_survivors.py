"""A pipeline of filters measures only what it still keeps, and keeps what scoring all keeps.

Each filter of a pipeline sees the survivors of the filters before it; the measures it
reads are computed for those documents only (a cheap word count first), and found again
without re-reading the text. The documents kept, and every kept document's scores, must
be those of scoring every filter on every document with nothing cached.
"""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import curator_dask.text as text_kit
from curator_dask import _ckernels
from curator_dask.executor import SequentialExecutor, _tasks
from curator_dask.filters import heuristic_filters
from curator_dask.io import JsonlWriter
from curator_dask.pipeline import Pipeline
from curator_dask.stage import StageStats, run_stage

#: Documents in several scripts that the English set mostly drops early, with duplicates.
OTHER = [
    "Der schnelle braune Fuchs springt über den faulen Hund. " * 12,
    "敏捷的棕色狐狸跳过了懒狗。" * 20,
    "Быстрая коричневая лиса прыгает через ленивую собаку. " * 15,
    "El rápido zorro marrón salta sobre el perro perezoso y the end of the story. " * 9,
    "",
    "short",
]


@pytest.fixture(scope="module")
def corpus(sample_records) -> pd.DataFrame:
    texts = [r["text"] for r in sample_records[:500]] + OTHER * 20
    # Several Arrow chunks, as a reader's column holds, and a non-default index.
    arr = pa.chunked_array([pa.array(texts[i : i + 97]) for i in range(0, len(texts), 97)])
    return pd.DataFrame(
        {"text": pd.Series(arr, dtype=text_kit.STR_DTYPE), "n": np.arange(len(texts))},
        index=pd.RangeIndex(7, 7 + 3 * len(texts), 3),
    )


def _scored_filters(order: slice = slice(None)) -> list:
    filters = heuristic_filters()[order]
    for f in filters:
        f.score_column = f"{f.stage_name}_score"
    return filters


def _every_filter_on_every_document(part: pd.DataFrame) -> tuple[pd.Series, dict]:
    keep = pd.Series(True, index=part.index)
    scores = {}
    for f in _scored_filters():
        text_kit.clear_measures()  # nothing shared between filters
        scores[f.stage_name] = f.score(part["text"])
        keep &= f.keep_score(scores[f.stage_name]).astype(bool)
    text_kit.clear_measures()
    return keep, scores


@pytest.mark.parametrize("order", [slice(None), slice(None, None, -1)], ids=["default", "reversed"])
def test_pipeline_keeps_what_scoring_every_filter_keeps(corpus, order):
    keep, scores = _every_filter_on_every_document(corpus)
    assert 0 < keep.sum() < len(corpus)
    part = corpus
    for f in _scored_filters(order):
        part = f.process(part)
    text_kit.clear_measures()
    assert part.index.equals(corpus.index[keep.to_numpy()])
    assert part["text"].tolist() == corpus["text"][keep].tolist()
    for name, score in scores.items():
        np.testing.assert_array_equal(
            part[f"{name}_score"].to_numpy(dtype="float64"),
            score[keep].to_numpy(dtype="float64"),
            err_msg=name,
        )


def _count_documents_measured(monkeypatch, *names):
    """Wrap the named text kernels (numba's or their C twins, as ``_ckernels.kernel`` gives
    them) so that each counts the documents it is called on."""
    measured = dict.fromkeys(names, 0)
    kernel = _ckernels.kernel

    def counting(name):
        run = kernel(name)
        if name not in measured:
            return run

        def counted(offsets, *args):
            measured[name] += len(offsets) - 1
            return run(offsets, *args)

        return counted

    monkeypatch.setattr(_ckernels, "kernel", counting)
    return measured


def test_measures_are_computed_for_survivors_only_and_text_hashed_once(corpus, monkeypatch):
    measured = _count_documents_measured(monkeypatch, "doc_hashes", "document_stats", "ngram_stats")
    text_kit.clear_measures()
    part, entering = corpus, {}
    for f in heuristic_filters():
        entering[f.stage_name] = len(part)
        part = f.process(part)
    text_kit.clear_measures()
    # The word count and the common words drop most of the non-English text before any
    # character, line or n-gram measure is computed, and each of those is computed once,
    # for the documents still kept where a filter first needs it.
    assert entering["BoilerPlateStringFilter"] < len(corpus) * 0.7
    assert measured["document_stats"] == entering["NonAlphaNumericFilter"]
    assert measured["ngram_stats"] == entering["RepeatingTopNGramsFilter_2"]
    # The partition's text is hashed once; its survivors are known without re-reading them.
    assert measured["doc_hashes"] == len(corpus)


def test_a_rewritten_or_rebuilt_text_is_measured_again_or_found_by_content(corpus):
    wc = heuristic_filters()[0]
    text_kit.clear_measures()
    first = wc.score(corpus["text"])
    # The same documents in another Arrow array (a copy, as after pickling): found by content.
    copy = pd.Series(corpus["text"].tolist(), dtype=text_kit.STR_DTYPE)
    np.testing.assert_array_equal(wc.score(copy).to_numpy(), first.to_numpy())
    # A modifier's output: new documents, new measures.
    upper = corpus["text"].str.replace(" ", "  x ", regex=False)
    np.testing.assert_array_equal(
        wc.score(upper).to_numpy(),
        (first + corpus["text"].fillna("").str.count(" ")).to_numpy(),
    )
    text_kit.clear_measures()


def test_removals_by_the_early_rules_are_accounted_for_per_stage(corpus, tmp_path):
    frame = corpus.assign(id=[f"d{i}" for i in corpus["n"]])
    df = dd.from_pandas(frame, npartitions=2)
    filters = heuristic_filters()
    out = tmp_path / "out"
    result = Pipeline.from_dataframe(df, [*filters, JsonlWriter(str(out))]).run(
        SequentialExecutor(progress=False)
    )
    text_kit.clear_measures()
    kept = pd.concat(pd.read_json(f, lines=True) for f in sorted(out.glob("*.jsonl")))
    keep, _ = _every_filter_on_every_document(corpus)
    assert sorted(kept["id"]) == sorted(frame["id"][keep])
    assert result.read == len(corpus) == result.kept + result.removed
    stats = {s.name: s for s in result.stages}
    assert stats["WordCountFilter"].docs_in == len(corpus)
    assert stats["WordCountFilter"].removed > 0
    assert stats["CommonEnglishWordsFilter"].removed > 0
    assert sum(stats[f.stage_name].removed for f in filters) == result.removed


def _stage_by_stage(part: pd.DataFrame, filters: list) -> tuple[pd.DataFrame, list, list]:
    """Each filter on the survivors of the one before, as a copy (filter_rows) per filter."""
    stats, removed = [], []
    for f in filters:
        out, s = run_stage(f, part)
        stats.append(s)
        if s.removed:
            removed.append(part[~part.index.isin(out.index)].assign(removed_by=f.stage_name))
        part = out
    return part, stats, removed


@pytest.mark.parametrize("order", [slice(None), slice(None, None, -1)], ids=["default", "reversed"])
def test_a_chain_of_filters_copies_the_kept_rows_once_and_keeps_the_same(
    corpus, order, monkeypatch
):
    """The executor's stage tasks pass a running mask from filter to filter: the text is
    copied where a measure is computed for the rows still kept and once at the write (not
    after every filter that removes some), and the kept rows, their scores, every stage's
    counts and examples and the removed rows are those of copying the survivors after
    each filter."""
    text_kit.clear_measures()
    expected, expected_stats, expected_removed = _stage_by_stage(corpus, _scored_filters(order))
    text_kit.clear_measures()
    keep, _ = _every_filter_on_every_document(corpus)
    assert expected.index.equals(corpus.index[keep.to_numpy()])

    gathered = []
    gather = _ckernels.kernel("gather_strings")  # numba's or its C twin

    def counting(offsets, data, rows):
        gathered.append(len(rows))
        return gather(offsets, data, rows)

    kernel = _ckernels.kernel
    monkeypatch.setattr(
        _ckernels, "kernel", lambda name: counting if name == "gather_strings" else kernel(name)
    )
    carry = _tasks.Carry(0, corpus, None)
    for f in _scored_filters(order):
        carry = _tasks.stage_task(f, carry, keep_removed=True)
    # Copies of the rows still kept where the words, the common words, the character
    # and line measures and the n-grams are first computed; none per removing filter.
    assert len(gathered) <= 4 < len(expected_removed)
    out = carry.materialised().part
    text_kit.clear_measures()
    assert gathered[-1] == len(expected)  # the kept rows, once
    pd.testing.assert_frame_equal(out, expected)
    stats = [StageStats.from_dict(d) for d in carry.stats]
    assert [s.to_dict() | {"seconds": 0} for s in stats] == [
        s.to_dict() | {"seconds": 0} for s in expected_stats
    ]
    pd.testing.assert_frame_equal(pd.concat(carry.removed), pd.concat(expected_removed))


def test_a_chain_of_filters_measures_the_rows_it_still_keeps_only(corpus, monkeypatch):
    measured = _count_documents_measured(
        monkeypatch, "document_stats", "ngram_stats", "word_list_counts"
    )
    text_kit.clear_measures()
    carry, entering = _tasks.Carry(0, corpus, None), {}
    for f in heuristic_filters():
        entering[f.stage_name] = carry.stats[-1]["docs_out"] if carry.stats else len(corpus)
        carry = _tasks.stage_task(f, carry)
    text_kit.clear_measures()
    assert entering["CommonEnglishWordsFilter"] < len(corpus)
    assert measured["word_list_counts"] == entering["CommonEnglishWordsFilter"]
    assert measured["document_stats"] == entering["NonAlphaNumericFilter"]
    assert measured["ngram_stats"] == entering["RepeatingTopNGramsFilter_2"]


def test_a_run_with_a_modifier_between_filters_writes_and_counts_what_stage_by_stage_does(
    corpus, tmp_path
):
    """The running mask stops at a stage that is not a plain filter: the kept rows are
    copied before it, and the filters after it start a new mask on its output."""
    from curator_dask.modifiers import WhitespaceNormalizer

    frame = corpus.assign(id=[f"d{i}" for i in corpus["n"]])
    filters = heuristic_filters()
    stages = [*filters[:6], WhitespaceNormalizer(), *filters[6:]]
    text_kit.clear_measures()
    expected, expected_stats, expected_removed = _stage_by_stage(frame, stages)
    text_kit.clear_measures()
    out = tmp_path / "out"
    df = dd.from_pandas(frame, npartitions=1)
    pipeline = Pipeline.from_dataframe(df, [*stages, JsonlWriter(str(out))])
    pipeline.keep_removed = True
    result = pipeline.run(SequentialExecutor(progress=False))
    text_kit.clear_measures()
    kept = pd.concat(pd.read_json(f, lines=True) for f in sorted(out.glob("*.jsonl")))
    assert kept["id"].tolist() == expected["id"].tolist()
    assert kept["text"].tolist() == expected["text"].tolist()
    got = {s.name: (s.docs_in, s.docs_out) for s in result.stages}
    assert got == {
        "DataFrameReader": (len(frame), len(frame)),
        **{s.name: (s.docs_in, s.docs_out) for s in expected_stats},
        "JsonlWriter": (len(expected), len(expected)),
    }
    removed = pd.read_parquet(str(out) + ".curator/_removed")
    want = pd.concat(expected_removed)
    assert sorted(zip(removed["id"], removed["removed_by"], strict=True)) == sorted(
        zip(want["id"], want["removed_by"], strict=True)
    )
