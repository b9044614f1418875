"""The C twins of minhash._unique_per_doc and components._union_into / _flatten
(``csrc/dedup_small.c``) equal the numba kernels, and the dedup steps call them."""

from __future__ import annotations

import dask
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask import _ckernels
from curator_dask.dedup import components, minhash
from curator_dask.dedup.lsh import band_hashes, bucket_edges

pytestmark = pytest.mark.c_compiler

TOP = np.uint64(2**64 - 1)


def _unique_c():
    c = _ckernels.kernel("minhash.unique_per_doc", minhash._unique_per_doc)
    assert c is not minhash._unique_per_doc  # the C twin, not numba's kernel
    return c


def _assert_unique_twins(hashes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    got = _unique_c()(hashes, offsets)
    want = minhash._unique_per_doc(hashes, offsets)
    assert len(got) == len(want) == 2
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    return got


def _assert_union_twins(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    union_c, flatten_c = components._union_kernels()
    assert union_c is not components._union_into
    assert flatten_c is not components._flatten
    for dtype in (np.int32, np.int64):
        got, want = np.arange(n, dtype=dtype), np.arange(n, dtype=dtype)
        union_c(got, a.astype(dtype), b.astype(dtype))
        components._union_into(want, a.astype(dtype), b.astype(dtype))
        np.testing.assert_array_equal(got, want)  # after the unions: the same trees
        flatten_c(got)
        components._flatten(want)
        assert got.dtype == want.dtype == dtype
        np.testing.assert_array_equal(got, want)
    return got


def test_the_dedup_steps_call_the_c_twins(monkeypatch):
    """unique_shingles, components_in_memory and the streamed union-find go through
    ``_ckernels.kernel`` and get the C twins; with ``curator.c-kernels: false``, numba's."""
    calls: list[str] = []
    for key in ("minhash.unique_per_doc", "components.union_into", "components.flatten"):
        c = _ckernels._C_KERNELS[key]

        def spy(*args, _c=c, _key=key):
            calls.append(_key)
            return _c(*args)

        monkeypatch.setitem(_ckernels._C_KERNELS, key, spy)
    hashes = np.array([9, 3, 3, 7, 1, 5, 5, 2], dtype=np.uint64)
    sets, off = minhash.unique_shingles(hashes, np.array([0, 5, 8], dtype=np.int64))
    assert sets.tolist() == [1, 3, 7, 9, 2, 5]
    assert off.tolist() == [0, 4, 6]
    got = components.components_in_memory(np.array([5, 9, 1]), np.array([9, 7, 2]))
    assert dict(zip(got["uid"], got["label"], strict=True)) == {1: 1, 2: 1, 5: 5, 7: 5, 9: 5}
    assert calls == ["minhash.unique_per_doc", "components.union_into", "components.flatten"]
    with dask.config.set({"curator.c-kernels": False}):
        monkeypatch.setattr(_ckernels, "_LOADED", {})
        assert _ckernels.kernel("minhash.unique_per_doc", minhash._unique_per_doc) is (
            minhash._unique_per_doc
        )
        assert components._union_kernels() == (components._union_into, components._flatten)


def test_the_streamed_union_find_calls_the_c_twins(monkeypatch, tmp_path):
    calls: list[str] = []
    for key in ("components.union_into", "components.flatten"):
        c = _ckernels._C_KERNELS[key]

        def spy(*args, _c=c, _key=key):
            calls.append(_key)
            return _c(*args)

        monkeypatch.setitem(_ckernels._C_KERNELS, key, spy)
    uid = lambda part, row: (part << 32) | row  # noqa: E731
    edges = pd.DataFrame({"a": [uid(0, 2), uid(1, 0)], "b": [uid(1, 1), uid(0, 2)]})
    path = tmp_path / "edges.parquet"
    edges.to_parquet(path)
    parent, touched, off = components._union_files([str(path)], np.array([3, 2]), ("a", "b"), None)
    assert calls == ["components.union_into", "components.flatten"]
    assert parent.dtype == np.int32
    assert parent.tolist() == [0, 1, 2, 2, 2]  # slots 2 (0, 2), 3 (1, 0), 4 (1, 1)
    assert touched.tolist() == [False, False, True, True, True]
    assert off.tolist() == [0, 3, 5]


def test_unique_per_doc_equals_numbas_on_the_sample(sample_records):
    """The shingles of the fuzzy dedup's defaults (word 5-grams), of char 24-grams (the
    first 800 documents) and of word 1-grams (many repeats in a document)."""
    text = pd.Series([r["text"] for r in sample_records])
    for kind, ngram, docs in (("word", 5, text), ("char", 24, text[:800]), ("word", 1, text)):
        hashes, offsets = minhash.shingle_hashes(docs, ngram, kind, "simple")
        sets, off = _assert_unique_twins(hashes, offsets)
        assert len(off) == len(docs) + 1
        assert 0 < len(sets) <= len(hashes)


def test_union_find_equals_numbas_on_the_samples_lsh_edges(sample_records):
    """The candidate edges of the sample's LSH buckets (20 bands of 13), as
    components_in_memory numbers their vertices."""
    text = pd.Series([r["text"] for r in sample_records])
    hashes, offsets = minhash.shingle_hashes(text, 5)
    sig = minhash.minhash_signatures(hashes, offsets, minhash.minhash_permutations(260, 42))
    n = len(text)
    edges = bucket_edges(band_hashes(sig, 20, 13).T.ravel(), np.tile(np.arange(n), 20))
    u, v = edges["anchor"].to_numpy(np.int64), edges["uid"].to_numpy(np.int64)
    assert len(u) > 100
    nodes, inv = np.unique(np.concatenate([u, v]), return_inverse=True)
    labels = _assert_union_twins(len(nodes), inv[: len(u)], inv[len(u) :])
    assert (labels <= np.arange(len(nodes))).all()
    assert len(np.unique(labels)) < len(nodes)


def _docs(rng: np.random.Generator, lengths: list[int], kind: str) -> np.ndarray:
    parts = []
    for m in lengths:
        if kind == "uniform":
            parts.append(rng.integers(0, 2**64, m, dtype=np.uint64))
        elif kind == "repeats":  # few distinct values, uniform over 64 bits
            parts.append(rng.choice(rng.integers(0, 2**64, 7, dtype=np.uint64), m))
        elif kind == "small":  # every value in the first bucket: crowded, quicksorted
            parts.append(rng.integers(0, 50, m).astype(np.uint64))
        elif kind == "equal":
            parts.append(np.full(m, rng.integers(0, 2**64, dtype=np.uint64), np.uint64))
        elif kind == "top":  # the largest values (the last bucket), and 0
            parts.append(TOP - rng.integers(0, 3, m).astype(np.uint64) * (m % 2))
        elif kind == "descending":
            parts.append(np.sort(rng.integers(0, 2**64, m, dtype=np.uint64))[::-1])
        else:  # "clustered": some buckets crowded, others not
            base = rng.integers(0, 2**64, dtype=np.uint64)
            parts.append(base + rng.integers(0, 2**40, m).astype(np.uint64))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


_KINDS = ("uniform", "repeats", "small", "equal", "top", "descending", "clustered")


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    lengths=st.lists(
        st.one_of(st.integers(0, 40), st.sampled_from([15, 16, 17, 32, 33, 64, 65, 1000])),
        max_size=8,
    ),
    kinds=st.lists(st.sampled_from(_KINDS), min_size=1, max_size=3),
)
def test_unique_per_doc_equals_numbas_on_random_documents(seed, lengths, kinds):
    rng = np.random.default_rng(seed)
    docs = [_docs(rng, [m], kinds[i % len(kinds)]) for i, m in enumerate(lengths)]
    hashes = np.concatenate(docs) if docs else np.zeros(0, np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    sets, off = _assert_unique_twins(hashes, offsets)
    for i, d in enumerate(docs):  # and they are each document's distinct values, sorted
        np.testing.assert_array_equal(sets[off[i] : off[i + 1]], np.unique(d))


def test_unique_per_doc_edges():
    rng = np.random.default_rng(7)
    _assert_unique_twins(np.zeros(0, np.uint64), np.array([0]))  # no document
    _assert_unique_twins(np.zeros(0, np.uint64), np.array([0, 0, 0]))  # empty documents
    sets, off = _assert_unique_twins(np.array([TOP]), np.array([0, 1]))  # one hash
    assert sets.tolist() == [2**64 - 1]
    for kind in _KINDS:  # one large document (a huge bucket where crowded)
        _assert_unique_twins(_docs(rng, [200_000], kind), np.array([0, 200_000]))
    big = _docs(rng, [5, 70_000, 0, 3, 20_000], "uniform")  # scratch sized by the longest
    sets, off = _assert_unique_twins(big, np.array([0, 5, 70_005, 70_005, 70_008, 90_008]))
    assert np.diff(off).tolist() == [5, 70_000, 0, 3, 20_000]
    sets, off = _assert_unique_twins(np.full(100, TOP), np.array([0, 50, 100]))  # all equal
    assert sets.tolist() == [2**64 - 1] * 2
    assert off.tolist() == [0, 1, 2]
    frozen = _docs(rng, [40, 3], "repeats")  # read-only arrays (e.g. over an Arrow buffer)
    frozen.flags.writeable = False
    offsets = np.array([0, 40, 43])
    offsets.flags.writeable = False
    _assert_unique_twins(frozen, offsets)


def test_unique_per_doc_raises_memory_error_when_its_scratch_cannot_be_had():
    """A document said to be 2**59 hashes long: its sort's scratch cannot be allocated."""
    with pytest.raises(MemoryError):
        _unique_c()(np.zeros(4, np.uint64), np.array([0, 2**59], np.int64))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 300),
    m=st.integers(0, 600),
)
def test_union_find_equals_numbas_on_random_graphs(seed, n, m):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    _assert_union_twins(n, a, b)


def test_union_find_edges():
    assert _assert_union_twins(1, np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == [0]
    assert _assert_union_twins(1, np.zeros(3, np.int64), np.zeros(3, np.int64)).tolist() == [0]
    n = 50_000
    chain = np.arange(n - 1)  # a long path, joined from its far end
    labels = _assert_union_twins(n, chain[::-1] + 1, chain[::-1])
    assert (labels == 0).all()
    star = _assert_union_twins(n, np.full(n - 1, n - 1), np.arange(n - 1))  # one huge star
    assert (star == 0).all()
    pairs = _assert_union_twins(n, np.arange(0, n, 2), np.arange(1, n, 2))  # many components
    assert pairs.tolist() == np.repeat(np.arange(0, n, 2), 2).tolist()
    union_c, flatten_c = components._union_kernels()
    parent = np.arange(4, dtype=np.int32)
    a, b = np.array([3, 1], np.int32), np.array([2, 0], np.int32)
    a.flags.writeable = b.flags.writeable = False  # read-only edges
    union_c(parent, a, b)
    flatten_c(parent)
    assert parent.tolist() == [0, 0, 2, 2]
    with pytest.raises(TypeError, match="int32 or int64"):
        union_c(np.arange(3, dtype=np.uint32), np.zeros(1), np.zeros(1))
    with pytest.raises(TypeError, match="C-contiguous and writable"):
        flatten_c(np.arange(6, dtype=np.int32)[::2])
