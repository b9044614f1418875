"""NeMo v0.7-0.8 names and behaviours that scripts rely on, checked as a user checks them."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curator_dask.nemo.datasets import DocumentDataset

# module -> names a NeMo script imports from it
NAMES = {
    "curator_dask.nemo": ["LSH", "MinHash", "JointScoreFilter", "ParallelScoreFilter", "Modify"],
    "curator_dask.nemo.modules": ["ExactDuplicates", "FuzzyDuplicates", "LSH", "MinHash"],
    "curator_dask.nemo.modules.modify": ["Modify"],
    "curator_dask.nemo.modules.filter": ["ScoreFilter", "Score", "Filter", "JointScoreFilter"],
    "curator_dask.nemo.modules.meta": ["Sequential"],
    "curator_dask.nemo.modules.add_id": ["AddId"],
    "curator_dask.nemo.modules.config": ["FuzzyDuplicatesConfig"],
    "curator_dask.nemo.modules.exact_dedup": ["ExactDuplicates"],
    "curator_dask.nemo.modules.fuzzy_dedup": ["FuzzyDuplicates", "LSH", "MinHash"],
    "curator_dask.nemo.modifiers": ["DocumentModifier", "UnicodeReformatter", "PiiModifier"],
    "curator_dask.nemo.modifiers.unicode_reformatter": ["UnicodeReformatter"],
    "curator_dask.nemo.modifiers.newline_normalizer": ["NewlineNormalizer"],
    "curator_dask.nemo.modifiers.doc_modifier": ["DocumentModifier"],
    "curator_dask.nemo.utils.script_utils": ["ArgumentHelper"],
    "curator_dask.nemo.utils.file_utils": [
        "get_all_files_paths_under",
        "expand_outdir_and_mkdir",
        "separate_by_metadata",
    ],
    "curator_dask.nemo.utils.duplicates_removal": ["remove_duplicates"],
    "curator_dask.nemo.utils.distributed_utils": [
        "read_data",
        "write_to_disk",
        "single_partition_write_with_filename",
        "load_object_on_worker",
    ],
}


@pytest.mark.parametrize("module", sorted(NAMES))
def test_nemo_script_imports(module):
    if module.endswith("modifiers"):
        pytest.importorskip("presidio_analyzer")  # PiiModifier: the pii extra
    mod = importlib.import_module(module)
    missing = [n for n in NAMES[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"
    assert hasattr(DocumentDataset, "read_custom")


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


@pytest.fixture
def dup_frame() -> pd.DataFrame:
    """12 documents, 3 duplicate groups straddling the partitions of a 3-partition frame."""
    texts = ["alpha", "beta", "gamma", "alpha", "delta", "beta",
             "eps", "alpha", "zeta", "eta", "gamma", "theta"]  # fmt: skip
    return pd.DataFrame({"id": [f"d{i:02d}" for i in range(len(texts))], "text": texts})


def test_exact_duplicates_identify_then_remove(dup_frame, tmp_path):
    from curator_dask.nemo import ExactDuplicates

    ds = DocumentDataset(dd.from_pandas(dup_frame, npartitions=3))
    for cache_dir in (None, str(tmp_path / "cache")):
        exact = ExactDuplicates(id_field="id", text_field="text", cache_dir=cache_dir)
        with dask.config.set(scheduler="sync"):
            dups = exact.identify_duplicates(ds)
            parts = list(dups.df.to_delayed())
            groups_per_part = [set(p.compute()["_hashes"]) for p in parts]
            got = dups.df.compute()
            kept = exact.remove(ds, dups).df.compute()
        # NeMo's hash column: the md5 hex digest of the text
        want = dup_frame[dup_frame["text"].duplicated(keep=False)]
        assert sorted(got["id"]) == sorted(want["id"])
        by_id = dict(zip(dup_frame["id"], dup_frame["text"], strict=True))
        assert all(h == md5(by_id[i]) for i, h in zip(got["id"], got["_hashes"], strict=True))
        # every group sits in one partition
        for a in range(len(groups_per_part)):
            for b in range(a + 1, len(groups_per_part)):
                assert not groups_per_part[a] & groups_per_part[b]
        assert len(kept) == dup_frame["text"].nunique()
        assert sorted(kept["text"]) == sorted(set(dup_frame["text"]))
    removal = ExactDuplicates(perform_removal=True)
    with dask.config.set(scheduler="sync"):
        assert len(removal(ds).df.compute()) == dup_frame["text"].nunique()
    with pytest.raises(ValueError, match="md5"):
        ExactDuplicates(hash_method="sha1")


def test_remove_duplicates_keeps_the_first_of_each_group_as_nemo(dup_frame):
    from curator_dask.nemo.utils.duplicates_removal import remove_duplicates

    ds = dd.from_pandas(dup_frame, npartitions=3)
    table = dup_frame.assign(g=dup_frame["text"])[["id", "g"]]
    table = table[table["g"].duplicated(keep=False)]
    straddling = dd.from_pandas(table, npartitions=2)
    with dask.config.set(scheduler="sync"):
        out = remove_duplicates(ds, straddling, "id", "g", perform_shuffle=True).compute()
        per_part = remove_duplicates(ds, straddling, "id", "g").compute()
    assert sorted(out["text"]) == sorted(set(dup_frame["text"]))
    # without the shuffle a group split over two partitions keeps one member in each
    assert len(per_part) > len(out)
    assert set(per_part["text"]) == set(dup_frame["text"])


def test_fuzzy_duplicates_identify_remove_and_none(tmp_path, sample_records):
    from curator_dask.nemo import FuzzyDuplicates, FuzzyDuplicatesConfig

    frame = pd.DataFrame(sample_records[:600])[["id", "text"]]
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=3))
    config = FuzzyDuplicatesConfig(
        cache_dir=str(tmp_path / "fz"),
        false_positive_check=True,
        num_buckets=20,
        hashes_per_bucket=13,
        char_ngrams=24,
    )
    fuzzy = FuzzyDuplicates(config=config)
    dups = fuzzy.identify_duplicates(ds)
    assert dups is not None
    got = dups.df.compute()
    assert list(got.columns) == ["id", "group"]
    kept = fuzzy.remove(ds, dups).df.compute()
    assert len(kept) == len(frame) - (len(got) - got["group"].nunique())
    assert set(kept["id"]) <= set(frame["id"])
    # no two documents alike: None, and remove(ds, None) is the dataset
    unique = pd.DataFrame({"id": ["a", "b", "c"], "text": [
        "the quick brown fox jumps over the lazy dog " * 3,
        "completely different words appear in this second document here " * 3,
        "a third text about unrelated matters such as tea and biscuits " * 3,
    ]})  # fmt: skip
    lone = DocumentDataset(dd.from_pandas(unique, npartitions=1))
    config2 = FuzzyDuplicatesConfig(cache_dir=str(tmp_path / "fz2"), false_positive_check=True)
    assert FuzzyDuplicates(config2).identify_duplicates(lone) is None
    assert FuzzyDuplicates(config2).remove(lone, None) is lone
    removal = FuzzyDuplicatesConfig(
        cache_dir=str(tmp_path / "fz3"), false_positive_check=True, perform_removal=True
    )
    assert len(FuzzyDuplicates(removal)(lone).df.compute()) == 3


def test_fuzzy_config_is_checked_and_passed_on(tmp_path, monkeypatch):
    from curator_dask.dedup import FuzzyDeduplicationWorkflow
    from curator_dask.nemo import FuzzyDuplicates, FuzzyDuplicatesConfig

    with pytest.raises(ValueError, match="num_anchors"):
        FuzzyDuplicatesConfig(cache_dir=str(tmp_path), false_positive_check=True, num_anchors=0)
    with pytest.raises(ValueError, match="jaccard_threshold"):
        FuzzyDuplicatesConfig(cache_dir=str(tmp_path), false_positive_check=True,
                              jaccard_threshold=1.5)  # fmt: skip
    with pytest.raises(ValueError, match="buckets_per_shuffle"):
        FuzzyDuplicatesConfig(cache_dir=str(tmp_path), buckets_per_shuffle=21)
    with pytest.raises(ValueError, match="cache_dir"):
        FuzzyDuplicatesConfig(cache_dir=None)
    with pytest.warns(UserWarning, match="not used"):
        FuzzyDuplicatesConfig(cache_dir=str(tmp_path), num_anchors=2)
    seen = {}

    class Recorder(FuzzyDeduplicationWorkflow):
        def run(self):
            seen.update(use_64_bit_hash=self.use_64_bit_hash, num_anchors=self.num_anchors)
            raise RuntimeError("stop")

    monkeypatch.setattr("curator_dask.dedup.FuzzyDeduplicationWorkflow", Recorder)
    config = FuzzyDuplicatesConfig(
        cache_dir=str(tmp_path), use_64_bit_hash=True, false_positive_check=True, num_anchors=3
    )
    ds = DocumentDataset(dd.from_pandas(pd.DataFrame({"id": ["a"], "text": ["x"]}), 1))
    with pytest.raises(RuntimeError, match="stop"):
        FuzzyDuplicates(config).identify_duplicates(ds)
    assert seen == {"use_64_bit_hash": True, "num_anchors": 3}


def test_minhash_and_lsh(tmp_path):
    from curator_dask.dedup import minhash_permutations, minhash_signatures, shingle_hashes
    from curator_dask.nemo import LSH, MinHash
    from curator_dask.nemo.modules.fuzzy_dedup.minhash import signature_matrix

    base = "the committee met on tuesday to discuss the budget for the coming year " * 2
    frame = pd.DataFrame({
        "id": ["a", "b", "c"],
        "text": [base, base.replace("tuesday", "wednesday"), "nothing alike here at all " * 6],
    })  # fmt: skip
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=2))
    for wide in (False, True):
        sigs = MinHash(num_hashes=40, char_ngrams=5, use_64bit_hash=wide)(ds).df.compute()
        h, off = shingle_hashes(frame["text"], 5, kind="char")
        want = minhash_signatures(h, off, minhash_permutations(40, 42, wide), wide)
        got = signature_matrix(sigs["_minhash_signature"])
        assert got.dtype == (np.uint64 if wide else np.uint32)
        assert (got == want).all()
    cached = MinHash(num_hashes=40, char_ngrams=5, cache_dir=str(tmp_path / "mh"))(ds)
    assert os.path.isdir(tmp_path / "mh" / "_minhashes.parquet")
    buckets = LSH(cache_dir=str(tmp_path / "lsh"), num_hashes=40, num_buckets=20)(cached)
    rows = buckets.df.compute()
    assert set(rows["id"]) == {"a", "b"}  # c shares no bucket
    assert rows.groupby("_bucket_id")["id"].nunique().eq(2).all()
    alone = DocumentDataset(cached.df[cached.df["id"] == "c"])
    assert LSH(cache_dir=str(tmp_path / "lsh2"), num_hashes=40, num_buckets=20)(alone) is None


def _jsonl(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def test_add_filename_column_name_and_write_to_filename(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _jsonl(src / "a.jsonl", [{"id": f"a{i}", "text": f"doc a{i}", "n": i} for i in range(5)])
    _jsonl(src / "b.jsonl", [{"id": f"b{i}", "text": f"doc b{i}", "n": i} for i in range(3)])
    ds = DocumentDataset.read_json(str(src), add_filename="some_filename", blocksize=64)
    assert "some_filename" in ds.df.columns
    assert "file_name" not in ds.df.columns
    assert ds.df.npartitions > 2  # files split over partitions are still written whole
    ds.to_json(str(tmp_path / "js"), write_to_filename="some_filename")
    ds.to_parquet(str(tmp_path / "pq"), write_to_filename="some_filename")
    assert sorted(os.listdir(tmp_path / "js")) == ["a.jsonl", "b.jsonl"]
    assert sorted(os.listdir(tmp_path / "pq")) == ["a.parquet", "b.parquet"]
    for name, n in (("a", 5), ("b", 3)):
        js = pd.read_json(tmp_path / "js" / f"{name}.jsonl", lines=True)
        pq = pd.read_parquet(tmp_path / "pq" / f"{name}.parquet")
        assert sorted(js["id"]) == sorted(pq["id"]) == [f"{name}{i}" for i in range(n)]
        assert "some_filename" not in js.columns
        assert "some_filename" not in pq.columns
    with pytest.raises(ValueError, match="'other'"):
        ds.to_json(str(tmp_path / "x"), write_to_filename="other")


def test_input_meta_and_missing_text_field(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _jsonl(src / "a.jsonl", [{"id": "1", "text": "hello", "n": 7}])
    ds = DocumentDataset.read_json(str(src), input_meta='{"n": "int32"}')
    assert ds.df.dtypes["n"] == np.int32
    assert ds.df.compute()["n"].tolist() == [7]
    with pytest.raises(ValueError, match="missing"):
        DocumentDataset.read_json(str(src), input_meta={"missing": "str"})
    other = tmp_path / "other"
    other.mkdir()
    _jsonl(other / "a.jsonl", [{"id": "1", "content": "hello"}])
    with pytest.raises(ValueError, match="no 'text' field"):
        DocumentDataset.read_json(str(other))
    got = DocumentDataset.read_json(str(other), text_field="content").df.compute()
    assert got["content"].tolist() == ["hello"]


def test_read_custom(tmp_path):
    for i in range(3):
        pd.DataFrame({"id": [f"f{i}-{j}" for j in range(4)], "text": ["t"] * 4, "x": range(4)}
                     ).to_csv(tmp_path / f"part{i}.csv", index=False)  # fmt: skip
    (tmp_path / "notes.txt").write_text("not data")
    calls = []

    def read_csvs(files, backend, add_filename, input_meta=None, **kwargs):
        calls.append((tuple(files), backend, add_filename, input_meta, kwargs))
        frames = [pd.read_csv(f, dtype={"id": str}).assign(**(
            {add_filename if isinstance(add_filename, str) else "file_name": os.path.basename(f)}
            if add_filename else {})) for f in files]  # fmt: skip
        return pd.concat(frames, ignore_index=True)

    with pytest.warns(UserWarning, match="skipped 1"):  # notes.txt, as NeMo warns
        ds = DocumentDataset.read_custom(
            str(tmp_path), file_type="csv", read_func_single_partition=read_csvs,
            files_per_partition=2, add_filename="src", columns=["id", "text"], sep=",",
        )  # fmt: skip
    assert ds.df.npartitions == 2
    with dask.config.set(scheduler="sync"):
        out = ds.df.compute()
    assert list(out.columns) == ["id", "text", "src"]
    assert len(out) == 12
    assert out["src"].nunique() == 3
    assert all(c[1:4] == ("pandas", "src", None) and c[4] == {"sep": ","} for c in calls)


def test_token_count_filter_takes_any_object_with_encode():
    from curator_dask.nemo import ScoreFilter
    from curator_dask.nemo.filters import TokenCountFilter

    class Chars:
        def encode(self, text):
            return list(text)

    frame = pd.DataFrame({"id": ["a", "b", "c"], "text": ["ab", "abcdef", "abcd"]})
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=2))
    f = TokenCountFilter(tokenizer=Chars(), min_tokens=3, max_tokens=5)
    with dask.config.set(scheduler="sync"):
        out = ScoreFilter(f, score_field="tokens")(ds).df.compute()
    assert out["id"].tolist() == ["c"]
    assert out["tokens"].tolist() == [4]
    with pytest.raises(TypeError, match="encode"):
        TokenCountFilter(tokenizer=object())


def test_joint_and_parallel_score_filters():
    from curator_dask.nemo import JointScoreFilter, ParallelScoreFilter
    from curator_dask.nemo.filters import DocumentFilter

    class LengthRatio(DocumentFilter):
        def score_document(self, row):
            return len(row["src"]) / max(1, len(row["tgt"]))

        def keep_document(self, score):
            return 0.5 <= score <= 2

    class Short(DocumentFilter):
        def score_document(self, text):
            return len(text)

        def keep_document(self, score):
            return score <= 5

    frame = pd.DataFrame(
        {"src": ["abcd", "a", "abc", "abcdefgh"], "tgt": ["abc", "abcdef", "ab", "ab"]}
    )
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=2))
    with dask.config.set(scheduler="sync"):
        joint = JointScoreFilter(LengthRatio(), score_field="ratio")(ds).df.compute()
        par = ParallelScoreFilter(Short(), Short(), src_score="s", tgt_score="t")(ds).df.compute()
    assert joint["src"].tolist() == ["abcd", "abc"]
    assert joint["ratio"].tolist() == pytest.approx([4 / 3, 1.5])
    assert par["src"].tolist() == ["abcd", "abc"]
    with pytest.raises(ValueError, match="both"):
        JointScoreFilter(LengthRatio(), src_field=["src"], tgt_field="tgt")


def test_unicode_reformatter_and_modify():
    from curator_dask.nemo import Modify
    from curator_dask.nemo.modifiers import UnicodeReformatter

    frame = pd.DataFrame({"id": ["a", "b"], "text": ["cafÃ© &amp; “quotes”", None]})
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=1))
    with dask.config.set(scheduler="sync"):
        out = Modify(UnicodeReformatter())(ds).df.compute()
        flat = Modify(UnicodeReformatter(uncurl_quotes=True))(ds).df.compute()
    assert out["text"].iloc[0] == "café & “quotes”"
    assert flat["text"].iloc[0] == 'café & "quotes"'
    assert pd.isna(out["text"].iloc[1])


def test_file_utils(tmp_path):
    from curator_dask.nemo.utils.file_utils import (
        expand_outdir_and_mkdir,
        get_all_files_paths_under,
        separate_by_metadata,
    )

    (tmp_path / "d" / "sub").mkdir(parents=True)
    for name in ("d/x.jsonl", "d/y.txt", "d/sub/z.jsonl"):
        (tmp_path / name).write_text("")
    root = str(tmp_path / "d")
    assert get_all_files_paths_under(root) == sorted(
        [f"{root}/sub/z.jsonl", f"{root}/x.jsonl", f"{root}/y.txt"]
    )
    with pytest.warns(UserWarning, match="skipped 1"):
        assert get_all_files_paths_under(root, keep_extensions="jsonl") == [
            f"{root}/sub/z.jsonl", f"{root}/x.jsonl"
        ]  # fmt: skip
    assert get_all_files_paths_under(root, recurse_subdirectories=False) == [
        f"{root}/sub", f"{root}/x.jsonl", f"{root}/y.txt"
    ]  # fmt: skip
    made = expand_outdir_and_mkdir(str(tmp_path / "new" / "deep"))
    assert os.path.isdir(made)
    assert os.path.isabs(made)
    frame = pd.DataFrame({
        "id": [str(i) for i in range(6)], "text": ["t"] * 6,
        "lang": ["en", "fr", "en", "de", "en", "fr"],
        "file_name": ["s0.jsonl", "s0.jsonl", "s1.jsonl", "s1.jsonl", "s0.jsonl", "s1.jsonl"],
    })  # fmt: skip
    out = tmp_path / "by_lang"
    counts = separate_by_metadata(dd.from_pandas(frame, npartitions=3), str(out), "lang",
                                  exclude_values=["de"]).compute()  # fmt: skip
    assert counts == {"en": 3, "fr": 2}
    assert sorted(os.listdir(out)) == ["en", "fr"]
    en = pd.concat(pd.read_json(out / "en" / n, lines=True, dtype={"id": str})
                   for n in sorted(os.listdir(out / "en")))  # fmt: skip
    assert sorted(en["id"]) == ["0", "2", "4"]
    assert sorted(os.listdir(out / "en")) == ["s0.jsonl", "s1.jsonl"]
    with pytest.raises(ValueError, match="exclusive"):
        separate_by_metadata(frame, str(out), "lang", include_values=["en"], exclude_values=[])


def test_argument_helper():
    from curator_dask.nemo.utils.script_utils import ArgumentHelper

    parser = argparse.ArgumentParser()
    helper = ArgumentHelper(parser)
    helper.add_distributed_args()
    helper.add_arg_input_data_dir(required=True)
    helper.add_arg_output_data_dir(help="out")
    helper.add_arg_input_meta()
    helper.add_arg_shuffle(help="shuffle")
    args = parser.parse_args(
        ["--input-data-dir", "in", "--output-data-dir", "out", "--n-workers", "2",
         "--no-shuffle", "--scheduler-address", "tcp://127.0.0.1:1"]
    )  # fmt: skip
    assert args.files_per_partition == 2
    assert args.shuffle is False
    client_args = ArgumentHelper.parse_client_args(args)
    assert client_args["n_workers"] == 2
    assert client_args["cluster_type"] == "cpu"
    assert client_args["scheduler_address"] == "tcp://127.0.0.1:1"
    assert "input_data_dir" not in client_args
    classifier = ArgumentHelper.parse_distributed_classifier_args()
    parsed = classifier.parse_args(["--input-data-dir", "i", "--output-data-dir", "o"])
    assert (parsed.device, parsed.max_chars, parsed.autocast) == ("gpu", 2000, True)


def test_word_count_filter_lang_reaches_the_native_filter():
    from curator_dask.nemo import ScoreFilter
    from curator_dask.nemo.filters import WordCountFilter

    frame = pd.DataFrame(
        {"id": ["zh", "en"], "text": ["我们今天去学校。", "we go to school today"]}
    )
    ds = DocumentDataset(dd.from_pandas(frame, npartitions=1))
    with dask.config.set(scheduler="sync"):
        zh = ScoreFilter(WordCountFilter(min_words=6, lang="zh"), score_field="n")(ds)
        en = ScoreFilter(WordCountFilter(min_words=6), score_field="n")(ds)
        zh, en = zh.df.compute(), en.df.compute()
    # one word per Han character (and one for the full stop) with lang="zh"
    assert zh["id"].tolist() == ["zh"]
    assert zh["n"].tolist() == [8]
    assert en["id"].tolist() == []
