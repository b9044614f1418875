"""The LSH step's C kernels (``csrc/lsh.c``) equal their numba twins in ``dedup/lsh.py``:
band hashes, member-set hashes and the anchored verification, on the sample through the real
callers' inputs and on random and edge inputs; the public functions run them."""

from __future__ import annotations

import dask
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import _ckernels
from curator_dask.dedup import lsh
from curator_dask.dedup.minhash import (
    minhash_permutations,
    minhash_signatures,
    shingle_hashes,
    unique_shingles,
)

pytestmark = pytest.mark.c_compiler

_NUMBA = {
    "lsh.band_hashes": lsh._band_hashes,
    "lsh.member_set_hash": lsh._member_set_hash,
    "lsh.verify_anchors": lsh._verify_anchors,
}


def _assert_twins(name: str, *args: object) -> None:
    """The C kernel ``name`` (not numba's) gives what numba's gives, dtypes and shapes too."""
    numba_kernel = _NUMBA[name]
    c = _ckernels.kernel(name, numba_kernel)
    assert c is not numba_kernel, name
    got, want = c(*args), numba_kernel(*args)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert len(got) == len(want), name
    for a, b in zip(got, want, strict=True):
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype, name
            assert a.shape == b.shape, name
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            assert int(a) == int(b), name


def _verify_inputs(bucket: np.ndarray, uid: np.ndarray, offsets: np.ndarray) -> tuple:
    """``verify_buckets``' arguments of ``_verify_anchors``: rows sorted by (bucket, uid),
    each row's set bounds those of its document."""
    order = np.lexsort((uid, bucket))
    bucket, uid = bucket[order], uid[order]
    new = np.ones(len(bucket), dtype=bool)
    new[1:] = bucket[1:] != bucket[:-1]
    starts = np.flatnonzero(new).astype(np.int64)
    ends = np.append(starts[1:], len(bucket)).astype(np.int64)
    lo = np.ascontiguousarray(offsets[:-1][uid], dtype=np.int64)
    hi = np.ascontiguousarray(offsets[1:][uid], dtype=np.int64)
    return starts, ends, lo, hi


@pytest.fixture(scope="module")
def sample_lsh(sample_records: list[dict]) -> dict:
    """The sample's shingle sets, signatures (32 and 64 bits) and bucket members, as the
    fuzzy workflow makes them (word 5-grams, 30 bands of 8)."""
    texts = pd.Series([r["text"] for r in sample_records])
    hashes, offsets = shingle_hashes(texts, 5, "word", "simple")
    sets, set_offsets = unique_shingles(hashes, offsets)
    sigs = {
        bits: minhash_signatures(
            hashes, offsets, minhash_permutations(240, 42, bits == 64), bits == 64
        )
        for bits in (32, 64)
    }
    bands = lsh.band_hashes(sigs[32], 30, 8)
    n = len(texts)
    edges = lsh.bucket_edges(bands.T.ravel(), np.tile(np.arange(n, dtype=np.int64), 30))
    members = pd.concat(
        [edges[["bucket", "uid"]], edges[["bucket", "anchor"]].rename(columns={"anchor": "uid"})]
    ).drop_duplicates()
    return {
        "sets": sets,
        "set_offsets": set_offsets,
        "sigs": sigs,
        "bands": bands,
        "members": (members["bucket"].to_numpy(np.int64), members["uid"].to_numpy(np.int64)),
    }


def test_band_hashes_equal_numbas_on_the_sample(sample_lsh: dict) -> None:
    for sig in sample_lsh["sigs"].values():
        assert sig.dtype in (np.uint32, np.uint64)
        for b, r, first in ((30, 8, 0), (20, 12, 0), (9, 13, 0), (10, 8, 20), (1, 240, 0)):
            _assert_twins("lsh.band_hashes", sig, b, r, first)


def test_member_set_hash_equals_numbas_on_the_sample(sample_lsh: dict) -> None:
    bands = sample_lsh["bands"]
    n = bands.shape[0]
    bucket = bands.T.ravel()
    uid = np.tile(np.arange(n, dtype=np.int64), bands.shape[1])
    order = np.lexsort((uid, bucket))
    bucket, uid = bucket[order], uid[order]
    new = np.ones(len(bucket), dtype=bool)
    new[1:] = bucket[1:] != bucket[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(bucket)).astype(np.int64)
    big = ends - starts >= 2
    assert big.sum() > 10  # the sample has near-duplicates: shared buckets
    _assert_twins("lsh.member_set_hash", bucket, uid, starts[big], ends[big])
    _assert_twins("lsh.member_set_hash", bucket, uid, starts, ends)  # singletons too


def test_verify_anchors_equals_numbas_on_the_sample(sample_lsh: dict) -> None:
    bucket, uid = sample_lsh["members"]
    starts, ends, lo, hi = _verify_inputs(bucket, uid, sample_lsh["set_offsets"])
    assert (ends - starts).max() > 2
    for threshold in (0.0, 0.5, 0.8, 1.0):
        for max_anchors in (1, 4, 1_000):
            _assert_twins(
                "lsh.verify_anchors",
                starts,
                ends,
                sample_lsh["sets"],
                lo,
                hi,
                threshold,
                max_anchors,
            )


def test_band_hashes_of_edge_signatures() -> None:
    rng = np.random.default_rng(7)
    for dtype in (np.uint32, np.uint64):
        top = np.iinfo(dtype).max
        for sig in (
            np.zeros((0, 16), dtype),  # no document
            rng.integers(0, top, (1, 16), dtype, endpoint=True),  # one document
            np.full((5, 16), top, dtype),  # all the largest value
            np.zeros((5, 16), dtype),  # all equal
            rng.integers(0, top, (257, 64), dtype, endpoint=True),
            np.asfortranarray(rng.integers(0, top, (9, 16), dtype, endpoint=True)),
        ):
            for b, r, first in ((16, 1, 0), (2, 8, 0), (1, 16, 0), (1, 3, 4), (0, 4, 0)):
                _assert_twins("lsh.band_hashes", sig, b, r, first)


def test_member_set_hash_of_edge_buckets() -> None:
    rng = np.random.default_rng(3)
    empty = np.zeros(0, np.int64)
    _assert_twins("lsh.member_set_hash", empty, empty, empty, empty)
    uid = np.sort(rng.integers(-(2**63), 2**63 - 1, 50_000, np.int64, endpoint=True))
    bucket = np.zeros(len(uid), np.int64)
    starts = np.array([0, 0, 10, 49_999], np.int64)
    ends = np.array([50_000, 1, 10, 50_000], np.int64)  # huge, one, none, the last one
    _assert_twins("lsh.member_set_hash", bucket, uid, starts, ends)


def _random_verify_args(rng: np.random.Generator, n_docs: int, universe: int, size: int):
    """Documents with sets of up to ``size`` of ``universe`` values (some empty), in random
    buckets of up to a few dozen rows."""
    sets, offsets = [], [0]
    for _ in range(n_docs):
        k = int(rng.integers(0, size + 1))
        s = np.unique(rng.integers(0, universe, k, dtype=np.uint64))
        sets.append(s)
        offsets.append(offsets[-1] + len(s))
    flat = np.concatenate(sets) if sets else np.zeros(0, np.uint64)
    n_rows = int(rng.integers(0, 4 * n_docs + 1))
    bucket = rng.integers(0, max(1, n_rows // 6), n_rows).astype(np.int64)
    uid = rng.integers(0, n_docs, n_rows).astype(np.int64)
    return flat, *_verify_inputs(bucket, uid, np.array(offsets, np.int64))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(1, 40),
    universe=st.sampled_from([2, 5, 12, 40, 2**64 - 1]),
    threshold=st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0]),
    max_anchors=st.integers(1, 6),
)
def test_verify_anchors_equals_numbas_on_random_buckets(
    seed: int, n_docs: int, universe: int, threshold: float, max_anchors: int
) -> None:
    rng = np.random.default_rng(seed)
    size = 8 if universe > 40 else universe
    sets, starts, ends, lo, hi = _random_verify_args(rng, n_docs, universe, size)
    _assert_twins("lsh.verify_anchors", starts, ends, sets, lo, hi, threshold, max_anchors)


def test_verify_anchors_of_edge_buckets() -> None:
    rng = np.random.default_rng(11)
    empty = np.zeros(0, np.int64)
    no_sets = np.zeros(0, np.uint64)
    _assert_twins("lsh.verify_anchors", empty, empty, no_sets, empty, empty, 0.8, 4)
    one = np.array([0], np.int64)
    _assert_twins("lsh.verify_anchors", one, one + 1, no_sets, one, one, 0.8, 4)  # empty set
    top = np.array([1, 2**64 - 1], np.uint64)  # the largest values
    two = np.array([0, 0], np.int64)
    for t in (0.0, 1.0):
        _assert_twins("lsh.verify_anchors", one, one + 2, top, two, two + 2, t, 1)
    # one huge bucket: all-equal sets (k - 1 checks), mutually dissimilar sets (the budget
    # runs out), and a mix with empty sets between
    k = 3_000
    same = np.arange(20, dtype=np.uint64)
    zeros = np.zeros(k, np.int64)
    start, end = np.array([0], np.int64), np.array([k], np.int64)
    for t in (0.0, 0.8, 1.0):
        _assert_twins("lsh.verify_anchors", start, end, same, zeros, zeros + 20, t, 4)
    apart = np.sort(rng.choice(2**40, size=(k, 10), replace=False), axis=1).astype(np.uint64)
    lo = np.arange(k, dtype=np.int64) * 10
    for t, anchors in ((0.8, 4), (0.0, 4), (1.0, 1), (0.8, 300)):
        _assert_twins("lsh.verify_anchors", start, end, apart.ravel(), lo, lo + 10, t, anchors)
    mixed_hi = np.where(rng.random(k) < 0.2, lo, lo + 10)  # a fifth without shingles
    groups = np.array([0, 1000, 1001, 2500], np.int64)
    group_ends = np.array([1000, 1001, 2500, k], np.int64)
    _assert_twins("lsh.verify_anchors", groups, group_ends, apart.ravel(), lo, mixed_hi, 0.5, 3)


def test_verify_anchors_that_cannot_allocate_raises_memory_error() -> None:
    one = np.array([0], np.int64)
    c = _ckernels.kernel("lsh.verify_anchors", lsh._verify_anchors)
    sets = np.array([1, 2], np.uint64)
    with pytest.raises(MemoryError, match="could not allocate"):
        c(one, one + 2, sets, np.zeros(2, np.int64), np.full(2, 2), 0.8, 2**60)  # 8 EiB


def test_the_public_functions_run_the_c_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """band_hashes, bucket_edges and verify_buckets give their results without numba's
    kernels, for the dtypes the workflow sends; other set dtypes still run numba's."""
    sig = np.array([[1, 2, 3, 4], [1, 2, 3, 5], [3, 4, 1, 2]], dtype=np.uint32)
    want_bands = lsh.band_hashes(sig, 2, 2)
    sets = np.array([1, 2, 3, 10, 11, 12, 13, 10, 11, 12, 14], dtype=np.uint64)
    off = np.array([0, 3, 7, 11])
    want_edges = lsh.bucket_edges(np.array([5, 5, 5, 7, 9, 9, 5]), np.array([3, 1, 2, 1, 4, 4, 1]))
    with dask.config.set({"curator.c-kernels": False}):
        monkeypatch.setattr(_ckernels, "_LOADED", {})
        ref = lsh.verify_buckets(np.array([7, 7, 7]), sets, off, 0.5, max_anchors=2)
    monkeypatch.setattr(_ckernels, "_LOADED", {})

    def numba_called(*args: object) -> None:
        raise AssertionError("numba's kernel ran")

    for name in ("_band_hashes", "_member_set_hash", "_verify_anchors"):
        monkeypatch.setattr(lsh, name, numba_called)
    np.testing.assert_array_equal(lsh.band_hashes(sig, 2, 2), want_bands)
    got_edges = lsh.bucket_edges(np.array([5, 5, 5, 7, 9, 9, 5]), np.array([3, 1, 2, 1, 4, 4, 1]))
    pd.testing.assert_frame_equal(got_edges, want_edges)
    a, b, n = lsh.verify_buckets(np.array([7, 7, 7]), sets, off, 0.5, max_anchors=2)
    assert (a.tolist(), b.tolist(), n) == (ref[0].tolist(), ref[1].tolist(), ref[2])
    assert list(zip(a.tolist(), b.tolist(), strict=True)) == [(1, 2)]
    with pytest.raises(AssertionError, match="numba's kernel ran"):  # int64 sets: numba's
        lsh.verify_buckets(np.array([7, 7, 7]), sets.astype(np.int64), off, 0.5, max_anchors=2)
