from __future__ import annotations

import itertools
import re
import unicodedata

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask.dedup.minhash import (
    jaccard_sorted,
    minhash_permutations,
    minhash_signatures,
    normalize_text,
    shingle_hashes,
    unique_shingles,
)

_NW = re.compile(r"[\W_]+")


def ref_norm(t: str) -> str:
    return " ".join(_NW.sub(" ", unicodedata.normalize("NFKC", t).lower()).split())


def ref_word_shingles(t: str, k: int) -> set[str]:
    toks = ref_norm(t).split()
    if not toks:
        return set()
    if len(toks) < k:
        return {" ".join(toks)}
    return {" ".join(toks[i : i + k]) for i in range(len(toks) - k + 1)}


def n_unique(text: list[str], k: int, kind: str = "word") -> list[int]:
    h, o = shingle_hashes(pd.Series(text, dtype=object), k, kind)
    _, uo = unique_shingles(h, o)
    return np.diff(uo).tolist()


WORDS = st.sampled_from(["a", "b", "Cé", "ÉTÉ", "x_y", "ﬁn", "İ", "12", "--", "  ", "\n", "Ω"])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(WORDS, max_size=12).map(" ".join), min_size=1, max_size=6), st.integers(1, 4)
)
def test_word_shingles_match_reference_sets(texts, k):
    assert n_unique(texts, k) == [len(ref_word_shingles(t, k)) for t in texts]


def test_normalize_text_is_the_reference():
    texts = ["\uff28ello,  WORLD_x!", "ÉTÉ—été", "", "İstanbul ﬁne"]
    assert normalize_text(pd.Series(texts)).tolist() == [ref_norm(t) for t in texts]


def test_equal_shingle_sets_give_equal_hashes():
    h, o = shingle_hashes(pd.Series(["The quick, brown fox!", "the QUICK brown  fox"]), 2)
    assert h[o[0] : o[1]].tolist() == h[o[1] : o[2]].tolist()
    assert len(set(h[o[0] : o[1]].tolist())) == 3


def test_char_shingles_count_code_points():
    texts = ["abcdef", "ééééé", "ab", ""]
    assert n_unique(texts, 3, "char") == [4, 1, 1, 0]
    h, o = shingle_hashes(pd.Series(["xéy", "xéy"]), 2, "char")
    assert h[o[0] : o[1]].tolist() == h[o[1] : o[2]].tolist()


def test_empty_document_has_max_signature(kernel32):
    h, o = shingle_hashes(pd.Series(["", "!!", "a b"]), 2)
    sig = minhash_signatures(h, o, minhash_permutations(16))
    assert (sig[:2] == np.iinfo(np.uint32).max).all()
    assert (sig[2] < np.iinfo(np.uint32).max).any()


@pytest.mark.parametrize("use_64", [False, True])
@settings(max_examples=10, deadline=None)
@given(st.integers(0, 1000), st.floats(0.1, 0.95))
def test_minhash_estimates_true_jaccard(use_64, seed, target):
    rng = np.random.default_rng(seed)
    n = 400
    common = round(2 * n * target / (1 + target))
    base = rng.integers(0, 2**63, size=2 * n - common, dtype=np.int64).astype(np.uint64)
    a = base[:n]
    b = np.concatenate([base[:common], base[n:]])
    true_j = jaccard_sorted(np.unique(a), np.unique(b))
    perms = minhash_permutations(512, seed=seed, use_64_bit_hash=use_64)
    sig = minhash_signatures(np.concatenate([a, b]), np.array([0, n, 2 * n]), perms, use_64)
    est = float((sig[0] == sig[1]).mean())
    # standard error sqrt(j(1-j)/512) <= 0.022: 5 sigma
    assert abs(est - true_j) < 0.11


def test_permutations_deterministic_and_seeded():
    assert (minhash_permutations(8, 1) == minhash_permutations(8, 1)).all()
    assert not (minhash_permutations(8, 1) == minhash_permutations(8, 2)).all()
    with pytest.raises(ValueError, match="num_hashes"):
        minhash_permutations(0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind"):
        shingle_hashes(pd.Series(["a"]), 2, "line")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ngram"):
        shingle_hashes(pd.Series(["a"]), 0)


@pytest.fixture(params=["vector_mul64", "split32"])
def kernel32(request, monkeypatch):
    """Run the test with each 32-bit kernel, whichever this CPU would pick."""
    from curator_dask.dedup import minhash

    monkeypatch.setattr(minhash, "_vector_mul64", lambda: request.param == "vector_mul64")
    return request.param


def ref_minhash(hashes, offsets, perms, use_64):
    """Permutation-min in plain numpy (uint64 arithmetic wraps mod 2**64, as the kernels)."""
    a, b = perms
    out = []
    with np.errstate(over="ignore"):
        for s, e in itertools.pairwise(offsets):
            h = hashes[s:e]
            if use_64:
                from curator_dask.dedup.minhash import _fmix64_array

                v = np.stack([_fmix64_array(h ^ sj) for sj in b], axis=1)
                empty = np.full(len(b), np.iinfo(np.uint64).max, dtype=np.uint64)
            else:
                x = (h ^ (h >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
                v = (a[None, :] * x[:, None] + b[None, :]) >> np.uint64(32)
                empty = np.full(len(b), np.iinfo(np.uint32).max, dtype=np.uint64)
            out.append(v.min(axis=0) if len(h) else empty)
    return np.array(out, dtype=np.uint64 if use_64 else np.uint32)


@pytest.mark.parametrize("use_64", [False, True])
@pytest.mark.parametrize("num_hashes", [1, 7, 8, 9, 16, 17, 24, 25, 64, 260])
def test_kernel_equals_numpy_reference(use_64, num_hashes, kernel32):
    # num_hashes around the kernel's padding to 8 permutations (one 512-bit vector)
    rng = np.random.default_rng(num_hashes)
    # lengths around the kernel's block of 8 shingles, empty documents included
    lengths = np.array([0, 1, 7, 8, 9, 15, 16, 17, 0, 3, 200, 1])
    lengths = np.concatenate([lengths, rng.integers(0, 60, size=40)])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    hashes = rng.integers(0, 2**64 - 1, size=offsets[-1], dtype=np.uint64, endpoint=True)
    hashes[::5] = hashes[0]  # repeated shingles within and across documents
    perms = minhash_permutations(num_hashes, seed=3, use_64_bit_hash=use_64)
    sig = minhash_signatures(hashes, offsets, perms, use_64)
    ref = ref_minhash(hashes, offsets, perms, use_64)
    assert sig.dtype == ref.dtype
    np.testing.assert_array_equal(sig, ref)


EDGE_HASHES = [
    0,
    1,
    2**32 - 1,
    2**32,
    2**32 + 1,
    2**63,
    2**64 - 2**32,
    2**64 - 2,
    2**64 - 1,
    0xFFFFFFFF00000000,
    0x00000000FFFFFFFF,
    0xAAAAAAAA55555555,
]
EDGE_COEFS = [1, 3, 2**32 - 1, 2**32 + 1, 2**63 + 1, 2**64 - 2**32 + 1, 2**64 - 1]


def python_minhash32(docs: list[list[int]], a: list[int], b: list[int]) -> list[list[int]]:
    """The 32-bit formula in Python integers: min over x of ((a*x + b) mod 2**64) >> 32."""
    out = []
    for doc in docs:
        xs = [(h ^ (h >> 32)) & 0xFFFFFFFF for h in doc]
        out.append(
            [
                min((((aj * x + bj) % 2**64) >> 32 for x in xs), default=2**32 - 1)
                for aj, bj in zip(a, b, strict=True)
            ]
        )
    return out


@pytest.mark.parametrize("num_hashes", [1, 7, 9, 64])
def test_kernel_carries_at_the_edges(num_hashes, kernel32):
    """Hashes and coefficients near 2**32 and 2**64: every carry of the 64-bit arithmetic."""
    rng = np.random.default_rng(7)
    pool = EDGE_COEFS + rng.integers(0, 2**64 - 1, size=8, dtype=np.uint64).tolist()
    a = [int(pool[(3 * j) % len(pool)]) | 1 for j in range(num_hashes)]
    b = [0, 2**64 - 1, 2**32 - 1, 2**32, *EDGE_COEFS]
    b = [int(b[j % len(b)]) for j in range(num_hashes)]
    docs = [[h] for h in EDGE_HASHES] + [[], EDGE_HASHES, EDGE_HASHES[::-1] * 2, [2**64 - 1] * 9]
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    hashes = np.array([h for d in docs for h in d], dtype=np.uint64)
    perms = np.array([a, b], dtype=np.uint64)
    sig = minhash_signatures(hashes, offsets, perms)
    assert sig.dtype == np.uint32
    assert sig.tolist() == python_minhash32(docs, a, b)
    assert sig.tolist() == ref_minhash(hashes, offsets, perms, False).tolist()


def test_kernel_on_partition_slices_and_no_documents(kernel32):
    """The kernel takes any slice of the flat arrays; zero documents give a (0, k) matrix."""
    perms = minhash_permutations(9, seed=5)
    sig = minhash_signatures(np.zeros(0, np.uint64), np.zeros(1, np.int64), perms)
    assert sig.shape == (0, 9)
    assert sig.dtype == np.uint32
    rng = np.random.default_rng(1)
    hashes = rng.integers(0, 2**64 - 1, size=100, dtype=np.uint64, endpoint=True)
    offsets = np.array([10, 10, 35, 100])  # offsets need not start at 0
    sig = minhash_signatures(hashes, offsets, perms)
    np.testing.assert_array_equal(sig, ref_minhash(hashes, offsets, perms, False))
    assert (sig[0] == np.iinfo(np.uint32).max).all()


def python_fmix64(k: int) -> int:
    m = 2**64 - 1
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & m
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & m
    return k ^ (k >> 33)


@pytest.mark.parametrize("num_hashes", [1, 9, 17])
def test_kernel64_equals_python_integers(num_hashes):
    seeds = [int(EDGE_COEFS[j % len(EDGE_COEFS)]) ^ j for j in range(num_hashes)]
    docs = [[h] for h in EDGE_HASHES] + [[], EDGE_HASHES, EDGE_HASHES * 3]
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    hashes = np.array([h for d in docs for h in d], dtype=np.uint64)
    perms = np.array([[1] * num_hashes, seeds], dtype=np.uint64)
    sig = minhash_signatures(hashes, offsets, perms, use_64_bit_hash=True)
    expected = [
        [min((python_fmix64(h ^ s) for h in doc), default=2**64 - 1) for s in seeds] for doc in docs
    ]
    assert sig.dtype == np.uint64
    assert sig.tolist() == expected


def test_kernels_ask_for_wide_vectors():
    """The kernels carry LLVM's prefer-vector-width attribute (their AVX-512 speed rests on it)."""
    import numba

    from curator_dask.dedup.minhash import _minhash32, _minhash32_split, _minhash64

    hashes, offsets = np.arange(3, dtype=np.uint64), np.array([0, 3], dtype=np.int64)
    perm = np.ones(4, dtype=np.uint64)
    for kernel, args in (
        (_minhash32, (perm, perm)),
        (_minhash32_split, (perm, perm)),
        (_minhash64, (perm,)),
    ):
        fresh = numba.njit(kernel.py_func)  # not from the cache, so that its IR can be read
        fresh(hashes, offsets, *args)
        ir = "".join(fresh.inspect_llvm().values())
        assert '"prefer-vector-width"="512"' in ir


def test_distinct_keeps_each_value_once_in_first_seen_order():
    """The kernels' per-document de-duplication: values (or their 32-bit folds) once each,
    in first-seen order; the table is shared by the documents, told apart by stamps."""
    from curator_dask.dedup.minhash import _distinct

    rng = np.random.default_rng(4)
    pool = rng.integers(0, 2**64 - 1, size=40, dtype=np.uint64, endpoint=True)
    # equal 32-bit folds, different values: one value with fold, two without
    twins = np.array([0x0000000100000001, 0x0000000200000002, 0, 2**64 - 1], dtype=np.uint64)
    docs = [pool[rng.integers(0, 40, size=120)], np.concatenate([twins, pool[:5], twins]), pool]
    hashes = np.concatenate(docs)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    keys = np.empty(512, dtype=np.uint64)  # room for 4x the longest document
    stamps = np.zeros(512, dtype=np.int64)
    for fold in (False, True):
        for i, doc in enumerate(docs):
            out = np.empty(len(doc), dtype=np.uint64)
            n = _distinct(hashes, offsets[i], offsets[i + 1], fold, keys, stamps, i + 1, out)
            vals = [int(h) for h in doc]
            if fold:
                vals = [(h ^ (h >> 32)) & 0xFFFFFFFF for h in vals]
            assert out[:n].tolist() == list(dict.fromkeys(vals))
        stamps[:] = 0


def test_kernels_deduplicate_while_repeats_are_common():
    """Each document's distinct shingles while repeats are common among those seen; its
    shingles as given (every 64th still checked) once they are rare, and for a document
    longer than the table takes."""
    from curator_dask.dedup.minhash import _DISTINCT_MAX, _distinct_table, _source

    rng = np.random.default_rng(5)
    unique = [rng.integers(0, 2**63, size=50).astype(np.uint64) for _ in range(70)]
    repeated = [np.tile(rng.integers(0, 2**63, size=10).astype(np.uint64), 5) for _ in range(20)]

    def taken(docs):
        hashes = np.concatenate(docs)
        offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
        keys, stamps, distinct = _distinct_table(offsets)
        tally = np.zeros(2, dtype=np.int64)
        # de-duplicated: its values come from the kernel's buffer of distinct shingles
        return [
            _source(hashes, offsets, i, True, keys, stamps, distinct, tally)[0].ctypes.data
            == distinct.ctypes.data
            for i in range(len(docs))
        ]

    # repeats common: every document de-duplicated
    assert all(taken(repeated))
    # no repeats: the first document and every 64th only
    assert [i for i, d in enumerate(taken(unique)) if d] == [0, 64]
    long = np.arange(_DISTINCT_MAX + 1, dtype=np.uint64)
    assert taken([long, long[:10]]) == [False, True]


@pytest.mark.parametrize("use_64", [False, True])
def test_kernel_equals_numpy_reference_across_the_deduplication_switch(use_64, kernel32):
    """Documents without repeats (de-duplication stops), then with many (it resumes), and
    one longer than the table takes: the same signatures as the reference."""
    from curator_dask.dedup.minhash import _DISTINCT_MAX

    rng = np.random.default_rng(6)
    docs = [rng.integers(0, 2**64 - 1, size=30, dtype=np.uint64, endpoint=True) for _ in range(20)]
    docs += [np.tile(rng.integers(0, 2**64 - 1, size=7, dtype=np.uint64), 9) for _ in range(20)]
    docs.append(rng.integers(0, 2**64 - 1, size=_DISTINCT_MAX + 3, dtype=np.uint64))
    docs.append(np.zeros(5, dtype=np.uint64))
    hashes = np.concatenate(docs)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    perms = minhash_permutations(9, seed=8, use_64_bit_hash=use_64)
    np.testing.assert_array_equal(
        minhash_signatures(hashes, offsets, perms, use_64),
        ref_minhash(hashes, offsets, perms, use_64),
    )
