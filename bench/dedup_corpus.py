"""Corpora of any size for the dedup scale benchmarks, made from the public corpus's real text.

Two kinds, both deterministic and cached (Parquet files of :data:`FILE_DOCS` documents,
``id, text``, made once under ``<root>/<kind>-s<seed>-v<version>/``; a size uses the first
files, and a larger size only adds files):

``distinct`` (the default of ``bench_dedup_scale.py``)
    A corpus whose duplicate structure does not change with its size, so that time and memory
    per document can be compared across sizes. Each file is made on its own (random state
    seeded by ``(seed, file)``): its distinct documents are public-corpus texts (cut to about
    1,000 characters) with every word replaced, with probability :data:`REPLACE`, by a word
    drawn from the corpus's word frequencies, so two documents made from the same text share
    almost no word 5-gram (expected Jaccard about 0.001); then :data:`NEAR_DUP_SHARE` of the
    file's documents are near-duplicate copies of some of them (one random word replaced), in
    clusters of ``1 + min(Zipf(2), 63)`` copies (mean about 3). Rows are shuffled within the
    file, so copies sit in other partitions than their original. Every file has the same
    share of duplicates and the same cluster-size distribution, whatever the corpus size.

``resampled`` (the corpus of the earlier scale runs, kept for comparison)
    Public-corpus texts drawn with replacement, cut to ~1,000 characters, each copy edited by
    one appended word. Every text has about ``N / 35,000`` near-copies, so the duplicate
    clusters and the LSH buckets grow with the corpus (at 6.4M, ~180 copies of each text and
    nearly every document a duplicate): the hard case for the candidate check.
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache

import numpy as np
import pandas as pd
from bench_dedup_common import SAMPLE, have_corpus, load

#: Documents per corpus file.
FILE_DOCS = 100_000
#: Characters of a public-corpus text used (whole words).
TEXT_CHARS = 1_000
#: Probability that a word of a distinct document is replaced.
REPLACE = 0.5
#: Share of each file's documents that are near-duplicate copies of another document.
NEAR_DUP_SHARE = 0.15
#: Largest number of copies of one document.
MAX_COPIES = 63
#: Bumped when the generated text changes (the cache key).
VERSION = 1
KINDS = ("distinct", "resampled")


@lru_cache(maxsize=1)
def _source() -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """``(texts, vocabulary with a trailing space, word ids of all texts, offsets)``."""
    recs = load() if have_corpus() else load(SAMPLE)
    texts = [r["text"][:TEXT_CHARS] for r in recs]
    words = [t.split() for t in texts]
    keep = [i for i, w in enumerate(words) if w]
    texts = [texts[i] for i in keep]
    words = [words[i] for i in keep]
    flat = np.array([w for ws in words for w in ws], dtype=object)
    vocab, ids = np.unique(flat, return_inverse=True)
    off = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in words], out=off[1:])
    vocab_sp = np.array([v + " " for v in vocab], dtype=object)
    return texts, vocab_sp, ids.astype(np.int64), off


def _ranges(counts: np.ndarray) -> np.ndarray:
    ends = np.cumsum(counts)
    return np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) - np.repeat(
        ends - counts, counts
    )


def _join(vocab_sp: np.ndarray, ids: np.ndarray, off: np.ndarray) -> list[str]:
    """The texts of word-id runs ``ids[off[i]:off[i+1]]``, words separated by a space."""
    big = "".join(vocab_sp[ids].tolist())
    lens = np.fromiter((len(w) for w in vocab_sp), dtype=np.int64, count=len(vocab_sp))
    cum = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lens[ids], out=cum[1:])
    at = cum[off].tolist()
    return [big[at[i] : at[i + 1] - 1] for i in range(len(off) - 1)]


def _distinct_file(f: int, seed: int) -> pd.DataFrame:
    _, vocab_sp, words, woff = _source()
    rng = np.random.default_rng([seed, f, 1])
    n_copies_total = int(FILE_DOCS * NEAR_DUP_SHARE)
    sizes: list[int] = []
    while sum(sizes) < n_copies_total:
        sizes += np.minimum(rng.zipf(2.0, size=1_000), MAX_COPIES).tolist()
    sizes_a = np.array(sizes, dtype=np.int64)
    sizes_a = sizes_a[: int(np.searchsorted(np.cumsum(sizes_a), n_copies_total)) + 1]
    sizes_a[-1] -= int(sizes_a.sum()) - n_copies_total
    sizes_a = sizes_a[sizes_a > 0]
    n_distinct = FILE_DOCS - n_copies_total
    # distinct documents: source texts with half of their words replaced
    src = rng.integers(0, len(woff) - 1, size=n_distinct)
    lens = woff[src + 1] - woff[src]
    ids = words[np.repeat(woff[src], lens) + _ranges(lens)]
    swap = rng.random(len(ids)) < REPLACE
    ids[swap] = words[rng.integers(0, len(words), size=int(swap.sum()))]
    off = np.zeros(n_distinct + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    # near-duplicate copies: one word of the original replaced
    base = np.repeat(rng.choice(n_distinct, size=len(sizes_a), replace=False), sizes_a)
    clens = lens[base]
    cids = ids[np.repeat(off[base], clens) + _ranges(clens)]
    coff = np.zeros(len(base) + 1, dtype=np.int64)
    np.cumsum(clens, out=coff[1:])
    pos = coff[:-1] + (rng.random(len(base)) * clens).astype(np.int64)
    cids[pos] = words[rng.integers(0, len(words), size=len(base))]
    texts = _join(vocab_sp, ids, off) + _join(vocab_sp, cids, coff)
    order = rng.permutation(FILE_DOCS)
    return pd.DataFrame(
        {
            "id": [f"d{f:04d}{i:06d}" for i in range(FILE_DOCS)],
            "text": np.array(texts, dtype=object)[order],
        }
    )


def _resampled_file(f: int, seed: int) -> pd.DataFrame:
    texts = _source()[0]
    rng = np.random.default_rng([seed, f, 2])
    pick = rng.integers(0, len(texts), size=FILE_DOCS)
    edit = rng.integers(0, 10**9, size=FILE_DOCS)
    return pd.DataFrame(
        {
            "id": [f"d{f:04d}{i:06d}" for i in range(FILE_DOCS)],
            "text": [f"{texts[p]} w{e}" for p, e in zip(pick, edit, strict=True)],
        }
    )


def default_root() -> str:
    return os.path.join(tempfile.gettempdir(), "curator-bench-corpus")


def corpus_files(kind: str, n: int, root: str | None = None, seed: int = 0) -> list[str]:
    """The first ``ceil(n / FILE_DOCS)`` files of corpus ``kind``, made where missing."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    d = os.path.join(root or default_root(), f"{kind}-s{seed}-v{VERSION}")
    os.makedirs(d, exist_ok=True)
    make = _distinct_file if kind == "distinct" else _resampled_file
    files = []
    for f in range(-(-n // FILE_DOCS)):
        path = os.path.join(d, f"part-{f:04d}.parquet")
        if not os.path.exists(path):
            tmp = f"{path}.tmp-{os.getpid()}"
            make(f, seed).to_parquet(tmp, row_group_size=20_000, index=False)
            os.replace(tmp, path)
        files.append(path)
    return files
