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


def test_empty_document_has_max_signature():
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
@pytest.mark.parametrize("num_hashes", [1, 7, 64, 260])
def test_kernel_equals_numpy_reference(use_64, num_hashes):
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
