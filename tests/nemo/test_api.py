"""The NeMo-named modules and filters against curator_dask's API, on a few partitions."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

import curator_dask.filters as native
from curator_dask.nemo import AddId, Filter, Modify, Score, ScoreFilter, Sequential
from curator_dask.nemo import filters as nemo_filters
from curator_dask.nemo.datasets import DocumentDataset
from curator_dask.nemo.modifiers import DocumentModifier
from curator_dask.nemo.utils.decorators import batched

# NeMo's constructor -> the native filter it must equal
PAIRS = [
    (nemo_filters.WordCountFilter(min_words=80, lang="en"), native.WordCountFilter(min_words=80)),
    (
        nemo_filters.RepeatedLinesFilter(max_repeated_line_fraction=0.6),
        native.RepeatedLinesFilter(min_unique_line_fraction=0.6),
    ),
    (
        nemo_filters.RepeatedParagraphsFilter(max_repeated_paragraphs_ratio=0.6),
        native.RepeatedParagraphsFilter(min_unique_paragraph_fraction=0.6),
    ),
    (
        nemo_filters.RepeatedLinesByCharFilter(max_repeated_lines_char_ratio=0.7),
        native.RepeatedLinesByCharFilter(min_unique_line_char_fraction=0.7),
    ),
    (
        nemo_filters.RepeatedParagraphsByCharFilter(max_repeated_paragraphs_char_ratio=0.7),
        native.RepeatedParagraphsByCharFilter(min_unique_paragraph_char_fraction=0.7),
    ),
    (
        nemo_filters.RepeatingTopNGramsFilter(n=3),  # NeMo's default ratio is 0.2 for any n
        native.RepeatingTopNGramsFilter(n=3, max_repeating_ngram_ratio=0.2),
    ),
    (
        nemo_filters.RepeatingDuplicateNGramsFilter(n=5, max_repeating_duplicate_ngram_ratio=0.15),
        native.RepeatingDuplicateNGramsFilter(n=5),
    ),
    (
        nemo_filters.CommonEnglishWordsFilter(min_num_common_words=2, stop_at_false=True),
        native.CommonEnglishWordsFilter(),
    ),
    (nemo_filters.BoilerPlateStringFilter(), native.BoilerPlateStringFilter()),
]


@pytest.fixture(scope="module")
def sample_frame(sample_records: list[dict]) -> pd.DataFrame:
    """A few hundred documents of every source, with a 0..n-1 index."""
    df = pd.DataFrame(sample_records)
    return pd.concat(g.head(40) for _, g in df.groupby("source", sort=True)).reset_index(drop=True)


@pytest.fixture
def dataset(sample_frame: pd.DataFrame) -> DocumentDataset:
    return DocumentDataset(dd.from_pandas(sample_frame, npartitions=3))


@pytest.mark.parametrize(("nemo", "ours"), PAIRS, ids=[type(p[1]).__name__ for p in PAIRS])
def test_nemo_filter_keeps_what_the_native_filter_keeps(nemo, ours, dataset, sample_frame):
    with dask.config.set(scheduler="sync"):
        got = ScoreFilter(nemo, score_field="s")(dataset).df.compute()
        inverted = ScoreFilter(nemo, invert=True)(dataset).df.compute()
    want = ours.process(sample_frame)
    assert got["id"].tolist() == want["id"].tolist()
    pd.testing.assert_series_equal(
        got["s"], ours.score(sample_frame["text"]).loc[got.index], check_names=False
    )
    assert sorted(got["id"].tolist() + inverted["id"].tolist()) == sorted(sample_frame["id"])


def test_score_filter_modify_sequential_and_add_id(dataset, sample_frame):
    class Upper(DocumentModifier):
        def modify_document(self, text):
            return text.upper()

    class BatchedLength(DocumentModifier):
        @batched
        def modify_document(self, text):
            return text.str.slice(0, 10)

    pipeline = Sequential(
        [
            Score(len, score_field="chars", score_type=int),
            Filter(lambda n: n > 500, filter_field="chars"),
            Modify(Upper()),
            Modify(BatchedLength()),
            AddId("nid", id_prefix="x", start_index=5),
        ]
    )
    with dask.config.set(scheduler="sync"):
        got = pipeline(dataset).df.compute()
    want = sample_frame[sample_frame["text"].str.len() > 500]
    assert got["id"].tolist() == want["id"].tolist()
    assert got["text"].tolist() == want["text"].str.upper().str.slice(0, 10).tolist()
    assert got["nid"].tolist() == [f"x-{i:010d}" for i in range(5, 5 + len(want))]
    assert (got["chars"] == want["text"].str.len()).all()


def test_nemo_code_and_keep_rule_filters():
    from curator_dask.nemo.filters import (
        GeneralCommentToCodeFilter,
        PornographicUrlsFilter,
        SubstringFilter,
    )

    frame = pd.DataFrame(
        {"text": ["// c\nint x;", "int y;", "abc", "ab"], "url": ["a", "x.PORN.y", "b", "c"]}
    )
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=2))
    with dask.config.set(scheduler="sync"):
        c = ScoreFilter(GeneralCommentToCodeFilter("text/x-c"), score_field="s")(ds).df.compute()
        porn = ScoreFilter(PornographicUrlsFilter(), text_field="url")(ds).df.compute()
        sub = ScoreFilter(SubstringFilter(substring="ab", position="prefix"))(ds).df.compute()
    assert c["text"].tolist() == ["// c\nint x;"]
    assert c["s"].tolist() == [4 / 11]
    assert porn["text"].tolist() == ["// c\nint x;", "abc", "ab"]
    assert sub["text"].tolist() == ["abc", "ab"]


@pytest.fixture(scope="module")
def saved_tokenizer(tmp_path_factory):
    """A word-level tokenizer trained on a tiny corpus, with BOS/EOS added on encoding."""
    pytest.importorskip("tokenizers")  # the models extra
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"])
    tok.train_from_iterator(["the cat sat on the mat", "a dog ran"], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    d = tmp_path_factory.mktemp("tokenizer")
    tok.save(str(d / "tokenizer.json"))
    return tok, d


def test_token_count_filter_from_a_local_directory_or_a_tokenizer(saved_tokenizer, tmp_path):
    from curator_dask.nemo.filters import TokenCountFilter

    tok, directory = saved_tokenizer
    texts = ["the cat", "a dog ran on the mat today", "", "zebra", "the cat sat on the mat"]
    frame = pd.DataFrame({"id": range(len(texts)), "text": texts})
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=3))
    counts = [len(tok.encode(t).ids) for t in texts]  # NeMo counts tokenizer.encode(text)
    assert counts[2] == 2  # BOS and EOS only
    for f in (
        TokenCountFilter(hf_model_name=str(directory), min_tokens=4, max_tokens=8),
        TokenCountFilter(tokenizer=tok, min_tokens=4, max_tokens=8),
    ):
        with dask.config.set(scheduler="sync"):
            got = ScoreFilter(f, score_field="tokens")(ds).df.compute()
        assert got["tokens"].tolist() == [c for c in counts if 4 <= c <= 8]
        kept = [t for t, c in zip(texts, counts, strict=True) if 4 <= c <= 8]
        assert got["text"].tolist() == kept
    with pytest.raises(ValueError, match="local directory"):
        TokenCountFilter(hf_model_name=str(tmp_path / "meta-llama"))
    with pytest.raises(ValueError, match="local files"):
        TokenCountFilter(hf_model_name=str(directory), hf_token="hf_x")


def test_per_extension_filter_with_nemo_positional_arguments(tmp_path, monkeypatch):
    from curator_dask.nemo.filters import PerExtensionFilter

    (tmp_path / "code_meta.csv").write_text(
        "language,extension,Include,Long_line_threshold,Alphanum_threshold,Alpha filter\n"
        "python,py,1,30,,\n"
    )
    monkeypatch.chdir(tmp_path)
    frame = pd.DataFrame({"text": ["x = 1\n", "y = '" + "z" * 40 + "'\n", "ok\n"]})
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=2))
    with dask.config.set(scheduler="sync"):
        got = ScoreFilter(PerExtensionFilter("Python", "py"))(ds).df.compute()
    assert got["text"].tolist() == ["x = 1\n", "ok\n"]


def test_histogram_filter_reads_nemo_cache_layout_and_names_missing_files(tmp_path):
    import pandas as pd

    from curator_dask.nemo.filters import HistogramFilter

    (tmp_path / "histograms").mkdir()
    (tmp_path / "histograms" / "zz").write_text("a\nb\n]\nc\n")
    f = HistogramFilter(lang="zz", threshold=0.5, cache_dir=str(tmp_path))
    assert f.histogram == "ab"
    text = pd.Series([" abc ", "a c", "", "ab"], index=[7, 8, 9, 10])
    score = f.score_document(text)
    assert score.index.tolist() == [7, 8, 9, 10]
    assert score.round(3).tolist() == [0.667, 0.333, 0.0, 1.0]
    assert f.keep_document(score).tolist() == [True, False, False, True]
    with pytest.raises(FileNotFoundError, match="downloads nothing"):
        HistogramFilter(lang="fr", cache_dir=str(tmp_path))
