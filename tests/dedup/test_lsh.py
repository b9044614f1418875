from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask.dedup.lsh import (
    band_hashes,
    bucket_edges,
    candidate_probability,
    choose_bands,
    verify_buckets,
)
from curator_dask.dedup.minhash import (
    jaccard_sorted,
    minhash_permutations,
    minhash_signatures,
    shingle_hashes,
    unique_shingles,
)


def test_candidate_probability_s_curve():
    assert candidate_probability(0.8, 20, 13) == pytest.approx(1 - (1 - 0.8**13) ** 20)
    assert candidate_probability(0.0, 20, 13) == 0.0
    assert candidate_probability(1.0, 20, 13) == 1.0
    assert candidate_probability(0.5, 20, 13) < 0.01 < 0.6 < candidate_probability(0.8, 20, 13)


def test_choose_bands_centres_the_curve_on_the_threshold():
    b, r = choose_bands(0.8, 128)
    assert b * r <= 128
    assert abs((1 / b) ** (1 / r) - 0.8) < 0.1
    with pytest.raises(ValueError, match="threshold"):
        choose_bands(1.5, 64)


def test_band_hashes_depend_on_band_and_values():
    sig = np.array([[1, 2, 3, 4], [1, 2, 3, 5], [3, 4, 1, 2]], dtype=np.uint32)
    bh = band_hashes(sig, 2, 2)
    assert bh.dtype == np.int64
    assert bh[0, 0] == bh[1, 0]
    assert bh[0, 1] != bh[1, 1]
    assert bh[2, 0] != bh[0, 1]  # same values in another band: another bucket
    assert (band_hashes(sig, 1, 2, first_band=1)[:, 0] == bh[:, 1]).all()
    with pytest.raises(ValueError, match="need"):
        band_hashes(sig, 3, 2)


def test_bucket_edges_are_stars():
    out = bucket_edges(np.array([5, 5, 5, 7, 9, 9, 5]), np.array([30, 10, 20, 1, 4, 4, 10]))
    assert sorted(zip(out["anchor"], out["uid"], strict=False)) == [(10, 20), (10, 30)]
    assert out["bucket"].nunique() == 1


def test_identical_member_sets_share_a_bucket_label():
    out = bucket_edges(np.array([1, 1, 2, 2]), np.array([8, 9, 9, 8]))
    assert out["bucket"].nunique() == 1
    assert len(out) == 2


def _corpus(rng: np.random.Generator, n_base: int, n_variants: int) -> list[str]:
    vocab = [f"w{i}" for i in range(500)]
    docs = []
    for _ in range(n_base):
        base = list(rng.choice(vocab, size=60))
        docs.append(" ".join(base))
        for _ in range(n_variants):
            v = list(base)
            for _ in range(int(rng.integers(0, 6))):
                v[int(rng.integers(0, len(v)))] = str(rng.choice(vocab))
            docs.append(" ".join(v))
    return docs


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 10_000))
def test_lsh_finds_what_brute_force_finds(seed):
    rng = np.random.default_rng(seed)
    docs = _corpus(rng, 6, 3)
    k, t = 3, 0.7
    h, o = shingle_hashes(pd.Series(docs), k)
    sets, so = unique_shingles(h, o)
    n = len(docs)
    truth = {
        (i, j)
        for i, j in itertools.combinations(range(n), 2)
        if jaccard_sorted(sets[so[i] : so[i + 1]], sets[so[j] : so[j + 1]]) >= t
    }
    # b=60, r=4: P(candidate | s=0.7) = 1 - (1 - 0.24)^60 > 0.999999
    b, r = 60, 4
    assert candidate_probability(t, b, r) > 0.999999
    sig = minhash_signatures(h, o, minhash_permutations(b * r, seed))
    bands = band_hashes(sig, b, r)
    rows = pd.DataFrame({"bucket": bands.T.ravel(), "uid": np.tile(np.arange(n), b)})
    edges = bucket_edges(rows["bucket"].to_numpy(), rows["uid"].to_numpy())
    members = pd.concat(
        [edges[["bucket", "uid"]], edges[["bucket", "anchor"]].rename(columns={"anchor": "uid"})]
    ).drop_duplicates()
    cand = set()
    for _, g in members.groupby("bucket"):
        cand |= set(itertools.combinations(sorted(g["uid"]), 2))
    assert truth <= cand


def test_verify_buckets_recovers_pairs_behind_a_false_anchor():
    # bucket of 3: anchor 0 is unlike 1 and 2, which are alike
    sets = np.array([1, 2, 3, 10, 11, 12, 13, 10, 11, 12, 14], dtype=np.uint64)
    off = np.array([0, 3, 7, 11])
    a, b, n = verify_buckets(np.array([7, 7, 7]), sets, off, 0.5)
    assert list(zip(a.tolist(), b.tolist(), strict=False)) == [(1, 2)]
    # a bucket of identical members needs k - 1 checks
    same = np.array([1, 2, 1, 2, 1, 2, 1, 2], dtype=np.uint64)
    a, b, n = verify_buckets(np.zeros(4, np.int64), same, np.array([0, 2, 4, 6, 8]), 0.8)
    assert n == 3
    assert len(a) == 3
