from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask.dedup import fuzzy as fuzzy_mod
from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow
from tests.conftest import score_removed


def _corpus(seed: int = 0, n_base: int = 12) -> pd.DataFrame:
    """Random 80-word documents, each with 0-3 copies that differ by one edited word."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(2000)]
    docs, cluster = [], []
    for b in range(n_base):
        base = list(rng.choice(vocab, size=80))
        docs.append(" ".join(base))
        cluster.append(b)
        for _ in range(int(rng.integers(0, 4))):
            v = list(base)
            v[int(rng.integers(0, 80))] = "edit"
            docs.append(" ".join(v))
            cluster.append(b)
    order = rng.permutation(len(docs))
    return pd.DataFrame(
        {
            "id": [f"doc{i:03d}" for i in range(len(docs))],
            "text": [docs[i] for i in order],
            "cluster": [cluster[i] for i in order],
        }
    )


def _run(tmp, df, **kw) -> tuple[set[str], dict]:
    kw.setdefault("word_ngrams", 3)
    wf = FuzzyDeduplicationWorkflow(
        cache_path=str(tmp / "cache"), output_path=str(tmp / "out"), df=df, **kw
    )
    s = wf.run()
    return set(pd.read_parquet(tmp / "out" / "removed_ids")["id"]), s


def _ref_removed(pdf: pd.DataFrame) -> set[str]:
    return {i for _, g in pdf.groupby("cluster") for i in sorted(g["id"])[1:]}


def test_sample_precision_recall(tmp_path, sample_records, sample_truth_clusters):
    df = dd.from_pandas(pd.DataFrame(sample_records), npartitions=4)
    removed, s = _run(tmp_path, df, word_ngrams=5, false_positive_check=True)
    score = score_removed(removed, sample_truth_clusters)
    assert score["precision"] >= 0.95, score
    assert score["recall"] >= 0.95, score
    assert s["documents"] == 4000


def test_finds_the_planted_clusters(tmp_path):
    pdf = _corpus()
    removed, s = _run(tmp_path, dd.from_pandas(pdf, npartitions=3), false_positive_check=True)
    assert removed == _ref_removed(pdf)
    assert s["duplicate_groups"] == int((pdf.groupby("cluster").size() > 1).sum())


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(1, 7), st.booleans())
def test_removed_set_independent_of_partitions(tmp_path_factory, nparts, check):
    pdf = _corpus(seed=1)
    one, _ = _run(
        tmp_path_factory.mktemp("a"), dd.from_pandas(pdf, npartitions=1), false_positive_check=check
    )
    many, _ = _run(
        tmp_path_factory.mktemp("b"),
        dd.from_pandas(pdf, npartitions=nparts),
        false_positive_check=check,
    )
    assert one == many
    assert one


def test_keep_longest(tmp_path):
    pdf = pd.DataFrame(
        {"id": [3, 1, 2, 4], "text": ["a b c d e f g", "a b c d e f g", "a b c d e f g h", "z"]}
    )
    removed, _s = _run(
        tmp_path,
        dd.from_pandas(pdf, npartitions=2),
        keep="longest",
        jaccard_threshold=0.7,
        false_positive_check=True,
        word_ngrams=2,
    )
    assert removed == {1, 3}
    groups = pd.read_parquet(tmp_path / "out" / "removed_ids")
    assert set(groups["group"]) == {2}


def test_char_ngrams_and_removal(tmp_path):
    pdf = _corpus(seed=2)
    df = dd.from_pandas(pdf, npartitions=3)
    removed, _s = _run(
        tmp_path,
        df,
        word_ngrams=None,
        char_ngrams=10,
        perform_removal=True,
        false_positive_check=True,
        jaccard_threshold=0.7,
    )
    assert removed == _ref_removed(pdf)
    kept = pd.read_parquet(tmp_path / "out" / "deduplicated")
    assert set(kept["id"]) == set(pdf["id"]) - removed


def test_resume_skips_finished_band_groups(tmp_path, monkeypatch):
    pdf = _corpus(seed=3)
    df = dd.from_pandas(pdf, npartitions=3)
    full, _ = _run(tmp_path / "ref", df, bands_per_iteration=5)

    calls = {"n": 0}
    real = fuzzy_mod.FuzzyDeduplicationWorkflow._run_band_group

    def dying(self, group):
        if calls["n"] == 2:
            raise KeyboardInterrupt("killed")
        calls["n"] += 1
        return real(self, group)

    monkeypatch.setattr(fuzzy_mod.FuzzyDeduplicationWorkflow, "_run_band_group", dying)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "r", df, bands_per_iteration=5)
    monkeypatch.setattr(fuzzy_mod.FuzzyDeduplicationWorkflow, "_run_band_group", real)
    resumed, s = _run(tmp_path / "r", df, bands_per_iteration=5)
    assert s["stats"]["minhash_partitions_computed"] == 0
    assert s["stats"]["lsh_groups_computed"] == 4  # 6 groups (30 bands), 2 finished before the kill
    assert resumed == full


def test_changed_parameters_do_not_reuse_stale_cache(tmp_path):
    pdf = _corpus(seed=4)
    df = dd.from_pandas(pdf, npartitions=2)
    _, s1 = _run(tmp_path, df, seed=1)
    _, s2 = _run(tmp_path, df, seed=2)
    assert s1["cache_dir"] != s2["cache_dir"]
    assert s2["stats"]["minhash_partitions_computed"] == 2
    _, s3 = _run(tmp_path, df, seed=2)
    assert s3["stats"]["minhash_partitions_computed"] == 0
    assert s3["stats"]["lsh_groups_computed"] == 0
    # a changed input (one more document) is a new cache too
    more = pd.concat([pdf, pd.DataFrame({"id": ["new"], "text": ["brand new text"]})])
    _, s4 = _run(tmp_path, dd.from_pandas(more, npartitions=2), seed=2)
    assert s4["cache_dir"] != s3["cache_dir"]


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="keep"):
        FuzzyDeduplicationWorkflow(keep="last")
    with pytest.raises(ValueError, match="ngrams"):
        FuzzyDeduplicationWorkflow(char_ngrams=0)
    with pytest.raises(ValueError, match="band_shape"):
        FuzzyDeduplicationWorkflow(band_shape="wide")
    with pytest.raises(ValueError, match="jaccard_threshold"):
        FuzzyDeduplicationWorkflow(jaccard_threshold=0)


@pytest.mark.integration
@pytest.mark.slow
def test_local_cluster_processes(tmp_path):
    from distributed import Client, LocalCluster

    pdf = _corpus(seed=5)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        df = dd.from_pandas(pdf, npartitions=3)
        wf = FuzzyDeduplicationWorkflow(
            cache_path=str(tmp_path / "c"),
            output_path=str(tmp_path / "o"),
            df=df,
            word_ngrams=3,
            false_positive_check=True,
            perform_removal=True,
            client=client,
        )
        s = wf.run()
    assert set(pd.read_parquet(tmp_path / "o" / "removed_ids")["id"]) == _ref_removed(pdf)
    assert s["removed"] == len(_ref_removed(pdf))


def _large_clusters(n_base: int = 6, copies: int = 120, seed: int = 11) -> pd.DataFrame:
    """Few bases, each with many copies that differ from it by one or two edited words."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(3000)]
    docs, cluster = [], []
    for b in range(n_base):
        base = list(rng.choice(vocab, size=80))
        docs.append(" ".join(base))
        cluster.append(b)
        for _ in range(copies):
            v = list(base)
            for pos in rng.choice(80, size=int(rng.integers(1, 3)), replace=False):
                v[int(pos)] = f"edit{int(rng.integers(0, 10**6))}"
            docs.append(" ".join(v))
            cluster.append(b)
    order = rng.permutation(len(docs))
    return pd.DataFrame(
        {
            "id": [f"doc{i:04d}" for i in range(len(docs))],
            "text": [docs[i] for i in order],
            "cluster": [cluster[i] for i in order],
        }
    )


def test_anchored_check_equals_exhaustive_on_large_clusters(tmp_path):
    pdf = _large_clusters()
    df = dd.from_pandas(pdf, npartitions=3)
    exhaustive, _ = _run(tmp_path / "all", df, num_anchors=None)
    anchored, _ = _run(tmp_path / "anchored", df)  # the default: 4 anchors per bucket
    assert anchored == exhaustive
    assert len(exhaustive ^ _ref_removed(pdf)) <= 0.01 * len(pdf), "LSH recall on the corpus"


def test_the_check_meets_each_cluster_in_one_partition_and_sends_each_set_once(
    tmp_path, monkeypatch
):
    from curator_dask.dedup import fuzzy

    # four check partitions for a small corpus; the buckets of one cluster have many anchors
    monkeypatch.setattr(fuzzy, "partitions_for", lambda *a, **k: 4)
    pdf = _large_clusters(n_base=12, copies=60)
    df = dd.from_pandas(pdf, npartitions=3)
    by_cluster, s = _run(tmp_path / "cluster", df)
    monkeypatch.setattr(fuzzy, "budget_slots", lambda *a, **k: 0)  # no room: by anchor
    by_anchor, a = _run(tmp_path / "anchor", df)
    assert by_cluster == by_anchor
    assert len(by_cluster ^ _ref_removed(pdf)) <= 0.01 * len(pdf)
    assert s.stats["verify_sets"] <= len(pdf)  # each document's set made and sent once
    assert a.stats["verify_sets"] > 2 * len(pdf)  # by anchor: once per partition asking


def test_anchored_check_cost_is_linear_in_bucket_size():
    from curator_dask.dedup.lsh import verify_buckets
    from curator_dask.dedup.minhash import shingle_hashes, unique_shingles

    rng = np.random.default_rng(0)
    # one bucket of k mutually dissimilar documents: the exhaustive check needs k(k-1)/2
    k = 300
    vocab = np.array([f"t{i}" for i in range(10**5)])  # built once: the same draws
    texts = pd.Series([" ".join(rng.choice(vocab, 40)) for _ in range(k)])
    sets, off = unique_shingles(*shingle_hashes(texts, 3, "word", "simple"))
    bucket = np.zeros(k, dtype=np.int64)
    _, _, n_all = verify_buckets(bucket, sets, off, 0.8)
    _, _, n_anch = verify_buckets(bucket, sets, off, 0.8, max_anchors=4)
    assert n_all == k * (k - 1) // 2
    assert n_anch <= 2 * 4 * k
