"""The compiled ``"simple"`` normalisation gives the reference's word shingles, bit for bit.

The reference is Python's: ``re.sub(r"[\\W_]+", " ", unicodedata.normalize("NFKC", t).lower())``,
then tokens, FNV-1a over each token's UTF-8 bytes, a polynomial rolling hash and fmix64.
"""

# ruff: noqa: RUF001  (the test strings hold look-alike characters on purpose)
from __future__ import annotations

import gzip
import itertools
import json
import os
import re
import unicodedata

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask.dedup._normtables import N_CODE_POINTS, SECOND, SECOND0, UNSAFE, norm_tables
from curator_dask.dedup.minhash import shingle_hashes

_NW = re.compile(r"[\W_]+")
M64 = (1 << 64) - 1
POLY = 0x9E3779B97F4A7C15
CORPUS = "/work/shared/data/public_corpus.jsonl.gz"
SAMPLE = os.path.join(
    os.path.dirname(__file__), "..", "..", "curator_dask", "data", "sample.jsonl.gz"
)


def ref_tokens(t: str) -> list[str]:
    return _NW.sub(" ", unicodedata.normalize("NFKC", t).lower()).split()


def fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    return k ^ (k >> 33)


def ref_hashes(t: str, ngram: int) -> list[int]:
    """Word shingle hashes of one document, in pure Python."""
    toks = []
    for tok in ref_tokens(t):
        h = 0xCBF29CE484222325
        for b in tok.encode("utf-8"):
            h = ((h ^ b) * 0x100000001B3) & M64
        toks.append(h)
    out = []
    for s in range(max(len(toks) - ngram + 1, 1) if toks else 0):
        acc = 0
        for v in toks[s : s + ngram]:
            acc = (acc * POLY + v) & M64
        out.append(fmix64(acc))
    return out


def compiled(texts: list[str], ngram: int) -> list[list[int]]:
    h, o = shingle_hashes(pd.Series(texts, dtype=object), ngram)
    return [h[o[i] : o[i + 1]].tolist() for i in range(len(texts))]


def reference_arrays(texts: list[str], ngram: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference normalisation in Python, then the raw-byte tokenizer (fast oracle)."""
    norm = pd.Series([" ".join(ref_tokens(t)) for t in texts], dtype=object)
    return shingle_hashes(norm, ngram, normalization="none")


def via_reference_normalisation(texts: list[str], ngram: int) -> list[list[int]]:
    h, o = reference_arrays(texts, ngram)
    return [h[o[i] : o[i + 1]].tolist() for i in range(len(texts))]


def test_the_fast_oracle_is_the_python_reference():
    texts = ["Héllo, WORLD_x ﬁne!", "ΟΔΟΣ Σ σς", "İstanbul ß ẞ", "가각 ᄀ ᅡ", "", "?!"]
    for ngram in (1, 2, 5):
        assert via_reference_normalisation(texts, ngram) == [ref_hashes(t, ngram) for t in texts]
        assert compiled(texts, ngram) == [ref_hashes(t, ngram) for t in texts]


def assert_as_the_reference(texts: list[str], ngram: int, label: str = "") -> None:
    """The compiled shingles of ``texts`` equal the reference's, compared as whole arrays.

    Equal flat hashes and equal offsets are equal shingles document by document; only a
    failure walks the documents, to name the first that differs.
    """
    h, o = shingle_hashes(pd.Series(texts, dtype=object), ngram)
    rh, ro = reference_arrays(texts, ngram)
    if np.array_equal(o, ro) and np.array_equal(h, rh):
        return
    for i, t in enumerate(texts):
        got, want = h[o[i] : o[i + 1]].tolist(), rh[ro[i] : ro[i + 1]].tolist()
        assert got == want, f"{label} document {i} {t!r}: {got} != {want}"
    raise AssertionError(f"{label}: the arrays differ but no document does")


def all_code_points() -> list[str]:
    return [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def code_points_the_kernel_decides() -> list[str]:
    """Every code point of planes 0-3 (the tables' range) and every assigned one above.

    From U+40000 on a document always goes to the Python reference (``_normalize_one``),
    so there the test checks that it is sent there and spliced back: every assigned code
    point (tags, variation selectors), and every 61st unassigned or private-use one.
    """
    return [
        c
        for c in all_code_points()
        if ord(c) < N_CODE_POINTS or unicodedata.category(c) not in ("Cn", "Co") or ord(c) % 61 == 0
    ]


@pytest.mark.parametrize("template", ["{}", "a{}b", "{}{}", "Z{} {}e", "\u1100{}\u0301"])
def test_every_code_point_alone_and_in_context(template):
    texts = [template.format(c, c) for c in code_points_the_kernel_decides()]
    assert_as_the_reference(texts, 1, template)


@pytest.mark.slow
def test_every_code_point_after_and_before_each_kind_of_neighbour():
    # a neighbour of every class and the composition partners the safety checks are about;
    # code points from U+40000 on always take the Python path
    t = norm_tables()
    neighbours = [int(np.flatnonzero(t.cls == k)[7]) for k in (SECOND, SECOND0, UNSAFE)]
    neighbours += [0x0301, 0x09BE, 0x0DCA, 0x1161, 0x11A8, 0x03A3]
    cps = [c for c in all_code_points() if ord(c) < len(t.cls)]
    for nb in map(chr, neighbours):
        texts = [nb + c for c in cps] + [c + nb for c in cps]
        assert_as_the_reference(texts, 2, hex(ord(nb)))


@pytest.mark.slow
def test_capital_sigma_beside_every_code_point():
    # lower() makes a capital sigma final by the cased and case-ignorable characters around
    cps = [c for c in all_code_points() if ord(c) < len(norm_tables().cls)]
    for template in ("A{}\u03a3", "A\u03a3{}", "A\u03a3{}b", "{}\u03a3 \u03a3{}\u03a3"):
        texts = [template.format(c, c) for c in cps]
        assert_as_the_reference(texts, 1, template)


# characters where NFKC, lower() or \w act on more than one code point, or expand
TRICKY = (
    "aeiouAEIOUnNcCsS İıiIΣσςΟΔΑϹ\U0001d6ba:^`·ß ẞ Ǆǅǆ ﬁﬂﬀﬃ ﬅ Å Ω K ¨´¸ ⑴ ① ㍱ ﷺ ﹰ ｱｶﾞ ＡＢｃ１２"
    "\u0300\u0301\u0308\u0323\u031b\u0327\u0340\u0344\u0345\u034f\u0360\u20dd"
    "\u1100\u1101\u1161\u1175\u11a8\u11c2\u3131\u314f\u3164가각힣"
    "\u0915\u093c\u093f\u094d\u0930\u0937\u0958"  # Devanagari: nukta, virama
    "\u09c7\u09be\u09d7\u09cb\u09cd\u0995"  # Bengali two-part vowels
    "\u0bc6\u0bc7\u0bbe\u0bd7\u0bca\u0bcd\u0b95"  # Tamil
    "\u0dd9\u0dcf\u0dca\u0ddf\u0dda\u0ddc\u0ddd\u0d9a"  # Sinhala
    "\u0f40\u0f71\u0f72\u0f73\u0f74\u0f75\u0f81\u0fb2\u0f80"  # Tibetan
    "\u0e01\u0e31\u0e38\u0e48\u0e33\u0e4d"  # Thai
    "\u0627\u064e\u0651\u0670\u0622\u0653\u0654\u0655\u06c1"  # Arabic, hamza above
    "\u05d0\u05b7\u05bc\u05e9\u05c1"  # Hebrew points
    "\u1b05\u1b35\u1b06\u1025\u102e\u1026"  # Balinese, Myanmar
    "\U0001f600\U0001f44d\U0001f3fb\u200d\ufe0f\u00a0\u2028\u3000\t\n _-.,'’"
    "\U0001d400\U0001d6ba\U00010400\U0001e900\U00020000\U0002f800\U000e0100\U0010fffd\x00"
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(TRICKY), max_size=40), min_size=1, max_size=20))
def test_random_mixtures_of_tricky_characters(texts):
    assert compiled(texts, 2) == [ref_hashes(t, 2) for t in texts]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=20), st.integers(1, 4))
def test_random_unicode_text(texts, ngram):
    assert compiled(texts, ngram) == via_reference_normalisation(texts, ngram)


def spacy_sentences() -> list[str]:
    """Real sentences in 60-odd languages, shipped with the installed spaCy."""
    import importlib
    import pkgutil

    lang = pytest.importorskip("spacy.lang")
    out: list[str] = []
    for m in pkgutil.iter_modules(lang.__path__):
        try:
            ex = importlib.import_module(f"spacy.lang.{m.name}.examples")
        except ImportError:
            continue
        out += [s for s in getattr(ex, "sentences", []) if isinstance(s, str)]
    return out


def test_real_multilingual_text():
    sents = spacy_sentences()
    assert len(sents) > 400
    upper = [s.upper() for s in sents]  # capital sigma, İ, ß -> SS ...
    nfd = [unicodedata.normalize("NFD", s) for s in sents]  # decomposed input
    texts = sents + upper + nfd + [" ".join(sents[i : i + 7]) for i in range(len(sents))]
    for ngram in (1, 5):
        assert_as_the_reference(texts, ngram, f"ngram {ngram}")


def test_public_corpus_slice():
    path = CORPUS if os.path.exists(CORPUS) else SAMPLE
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in itertools.islice(f, 3000)]
    assert_as_the_reference(texts, 5)


# ASCII words, capitals, accents (composed and combining), Cyrillic, Greek with sigma, CJK,
# Hangul, Devanagari, compatibility forms and punctuation: the word kernel's fast paths
# (ASCII bytes, code points that are their own or their lower case's output, one space) and
# its general path, next to each other
MIXED = list("the quick brown fox THE QUICK, 0123 _-.;!? ") + list(
    "éàüßÉÀÜçñøåæœ ЁёЖжЯяСЛОВО слово ΑΣΟΔΟΣ σς ο δρόμος 東京大学の学生 가각힣 "
    "नमस्ते हिन्दी \u0301\u0308\u0327 ｱｶﾞＡ１ ﬁ ① — «» “” 。、！"
)


def mixed_texts(n: int = 400, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    return [
        "".join(MIXED[j] for j in rng.integers(0, len(MIXED), size=int(rng.integers(0, 300))))
        for _ in range(n)
    ]


def test_mixed_script_shingles_and_signatures_are_those_of_before():
    # the digests were recorded with the kernels of 8577ea0 (before the fast paths)
    import hashlib

    from curator_dask.dedup.minhash import minhash_permutations, minhash_signatures

    texts = mixed_texts()
    assert compiled(texts, 3) == [ref_hashes(t, 3) for t in texts]
    h, o = shingle_hashes(pd.Series(texts, dtype=object), 3)
    sig = minhash_signatures(h, o, minhash_permutations(64, 3))
    assert hashlib.sha256(h.tobytes() + o.tobytes()).hexdigest()[:32] == (
        "da7e6faca992c74fa9ee8ed717026f9b"
    )
    assert hashlib.sha256(sig.tobytes()).hexdigest()[:32] == "0b156b175d5262b0f5186bc54f64a7d0"
