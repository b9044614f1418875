"""Locality-sensitive hashing of MinHash signatures: the vocabulary and the maths.

A signature of ``num_bands * minhashes_per_band`` MinHash values is cut into ``num_bands``
bands of ``minhashes_per_band`` consecutive values. Two documents become *candidates* when all
values of at least one band are equal. If the Jaccard similarity of their shingle sets is
``s``, one MinHash value agrees with probability ``s``, one band agrees with probability
``s**r`` and

    P(candidate) = 1 - (1 - s^r)^b

with ``b = num_bands`` and ``r = minhashes_per_band``: an S-curve whose steep part sits near
``(1/b)**(1/r)``. NeMo Curator's ``b=20, r=13`` put it near 0.79: a pair at ``s=0.8`` is a
candidate with probability 0.68, ``s=0.85`` -> 0.92, ``s=0.9`` -> 0.997, ``s=0.5`` -> 0.0024.
With ``false_positive_check`` the false candidates cost only verification time, so a curve
shifted left keeps recall at the threshold: ``b=30, r=8`` (the default at 0.8, see
:func:`bands_for_threshold`) gives ``s=0.8`` -> 0.996, ``s=0.7`` -> 0.83, ``s=0.5`` -> 0.11.

``num_bands``
    Bands per signature (``b``). More bands: higher recall, more false candidates.
``minhashes_per_band``
    MinHash values per band (``r``). More rows: fewer false candidates, lower recall.
``bands_per_iteration``
    How many bands are bucketed (shuffled) together in one pass of the LSH step. It changes
    only peak memory and the number of passes, never the result: the edges of all band
    groups are united before connected components. Chosen by :mod:`.planner` by default.

Each band value is hashed, with its band index, into one 64-bit *bucket*; documents with equal
buckets in a band fall in the same bucket. A bucket with ``k >= 2`` members becomes ``k - 1``
edges as a *star* around its anchor (the smallest document number), not ``k(k-1)/2`` pairs.

Examples
--------
>>> round(candidate_probability(0.8, num_bands=20, minhashes_per_band=13), 3)
0.677
>>> choose_bands(0.8, num_hashes=128)
(9, 13)
"""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd

from curator_dask import _ckernels
from curator_dask._kernels import KERNEL_OPT, helper, share_compiles
from curator_dask.dedup._params import BAND_SHAPES as BAND_SHAPES  # the named shapes
from curator_dask.dedup.minhash import POLY, _fmix64, jaccard_sorted

_SEP = np.uint64(0x632BE59BD9B4E019)


def candidate_probability(s: float, num_bands: int, minhashes_per_band: int) -> float:
    """Return ``1 - (1 - s**r)**b``: the chance that a pair of Jaccard ``s`` is a candidate."""
    return float(1.0 - (1.0 - s**minhashes_per_band) ** num_bands)


def _integrate(f, a: float, b: float, n: int = 200) -> float:
    x = np.linspace(a, b, n)
    y = np.array([f(v) for v in x])
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0)


def choose_bands(
    threshold: float,
    num_hashes: int,
    false_positive_weight: float = 0.5,
    false_negative_weight: float = 0.5,
) -> tuple[int, int]:
    """Choose ``(num_bands, minhashes_per_band)`` for a Jaccard threshold.

    Minimises ``wfp * FP + wfn * FN`` with ``b * r <= num_hashes``, where ``FP`` is the area
    under ``P(candidate)`` below the threshold and ``FN`` the area above it of
    ``1 - P(candidate)``.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    best: tuple[float, int, int] | None = None
    for b in range(1, num_hashes + 1):
        for r in range(1, num_hashes // b + 1):
            fp = _integrate(lambda s, b=b, r=r: candidate_probability(s, b, r), 0.0, threshold)
            fn = _integrate(
                lambda s, b=b, r=r: 1.0 - candidate_probability(s, b, r), threshold, 1.0
            )
            err = false_positive_weight * fp + false_negative_weight * fn
            if best is None or err < best[0] - 1e-12:
                best = (err, b, r)
    assert best is not None
    return best[1], best[2]


#: MinHash values per signature when the shape is derived from a threshold.
DEFAULT_NUM_HASHES = 240


def recall_bands(
    threshold: float, num_hashes: int = DEFAULT_NUM_HASHES, min_probability: float = 0.99
) -> tuple[int, int]:
    """The steepest ``(num_bands, minhashes_per_band)`` that still finds pairs at the threshold.

    For use with the candidate check, where false candidates cost only verification time and
    a missed pair is lost: the largest ``r`` (fewest false candidates) with
    ``b = num_hashes // r`` such that ``P(candidate | s = threshold) >= min_probability``.

    Examples
    --------
    >>> recall_bands(0.8)
    (30, 8)
    >>> recall_bands(0.5)
    (80, 3)
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    best = (num_hashes, 1)
    for r in range(1, num_hashes + 1):
        b = num_hashes // r
        if b < 1:
            break
        if candidate_probability(threshold, b, r) >= min_probability:
            best = (b, r)
    return best


def bands_for_threshold(threshold: float, false_positive_check: bool) -> tuple[int, int]:
    """The default band shape for a Jaccard threshold.

    With the candidate check: :func:`recall_bands` (``(30, 8)`` at 0.8). Without it, every
    candidate becomes an edge, so false positives and misses weigh the same:
    :func:`choose_bands` with equal weights over ``DEFAULT_NUM_HASHES`` hashes.
    """
    if threshold >= 1.0:
        threshold = 0.999
    if false_positive_check:
        return recall_bands(threshold)
    return choose_bands(threshold, DEFAULT_NUM_HASHES)


@numba.njit(nogil=True, cache=True)
def _band_hashes(sig, num_bands, rows, first_band):  # pragma: no cover - compiled
    n = sig.shape[0]
    out = np.empty((n, num_bands), dtype=np.uint64)
    for i in range(n):
        for k in range(num_bands):
            band = first_band + k
            acc = _fmix64(np.uint64(band + 1) * _SEP)
            for j in range(band * rows, (band + 1) * rows):
                acc = (acc ^ np.uint64(sig[i, j])) * POLY
            out[i, k] = _fmix64(acc)
    return out


def band_hashes(
    signatures: np.ndarray, num_bands: int, minhashes_per_band: int, first_band: int = 0
) -> np.ndarray:
    """Hash bands ``first_band .. first_band + num_bands - 1`` of each signature.

    Returns an ``int64`` array ``(n_docs, num_bands)``; the band index is part of the hash,
    so buckets of different bands never coincide.
    """
    need = (first_band + num_bands) * minhashes_per_band
    if signatures.shape[1] < need:
        raise ValueError(f"signatures have {signatures.shape[1]} values, bands need {need}")
    band = _ckernels.kernel("lsh.band_hashes", _band_hashes)  # C for uint32/uint64
    return band(signatures, num_bands, minhashes_per_band, first_band).view(np.int64)


@numba.njit(nogil=True, cache=True)
def _member_set_hash(bucket, uid, starts, ends):  # pragma: no cover - compiled
    out = np.empty(len(starts), dtype=np.uint64)
    for g in range(len(starts)):
        acc = np.uint64(0x2545F4914F6CDD1D)
        for p in range(starts[g], ends[g]):
            acc = (acc ^ np.uint64(uid[p])) * POLY
        out[g] = _fmix64(acc)
    return out


def bucket_edges(bucket: np.ndarray, uid: np.ndarray) -> pd.DataFrame:
    """Turn (bucket, uid) rows into star edges, one bucket after another.

    Returns a frame ``bucket, anchor, uid``: for every bucket with at least two distinct
    members, one row per member other than the anchor (the smallest uid). ``bucket`` is
    re-labelled with a hash of the sorted member set, so that buckets with the same
    members (the same documents falling together in several bands) can be dropped as
    duplicates before verification.
    """
    bucket = np.asarray(bucket, dtype=np.int64)
    uid = np.asarray(uid, dtype=np.int64)
    order = np.lexsort((uid, bucket))
    bucket, uid = bucket[order], uid[order]
    if len(bucket):
        keep = np.ones(len(bucket), dtype=bool)
        keep[1:] = (bucket[1:] != bucket[:-1]) | (uid[1:] != uid[:-1])
        bucket, uid = bucket[keep], uid[keep]
    new = np.ones(len(bucket), dtype=bool)
    new[1:] = bucket[1:] != bucket[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(bucket)).astype(np.int64)
    sizes = ends - starts
    big = sizes >= 2
    starts, ends, sizes = starts[big], ends[big], sizes[big]
    member_set_hash = _ckernels.kernel("lsh.member_set_hash", _member_set_hash)
    mhash = member_set_hash(bucket, uid, starts, ends).view(np.int64)
    anchors = uid[starts]
    # members other than the anchor of each kept bucket
    idx = np.repeat(starts, sizes - 1) + _ranges(sizes - 1) + 1
    return pd.DataFrame(
        {
            "bucket": np.repeat(mhash, sizes - 1),
            "anchor": np.repeat(anchors, sizes - 1),
            "uid": uid[idx],
        }
    )


def _ranges(counts: np.ndarray) -> np.ndarray:
    """``[0..c0-1, 0..c1-1, ...]`` without a Python loop."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    out = np.arange(total, dtype=np.int64)
    return out - np.repeat(ends - counts, counts)


@helper
def _find(parent, a):  # pragma: no cover - compiled
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@helper
def _identity(k):  # pragma: no cover - compiled
    """``np.arange(k)`` as a loop: numba's ``arange`` overload is one more compile on a
    fresh machine; ``np.empty`` of int64 is compiled for the other kernels anyway."""
    out = np.empty(k, dtype=np.int64)
    for i in range(k):
        out[i] = i
    return out


@helper
def _push_edge(out_a, out_b, n_out, a, b):  # pragma: no cover - compiled
    """Store edge ``(a, b)`` at ``n_out``, doubling the arrays when they are full.

    Callers start ``n_out`` at ``np.int64(0)``, not ``0``: a call typed while it is still
    the literal ``0`` compiles a second copy of this helper (for ``Literal[int](0)``).
    """
    if n_out == len(out_a):
        na = np.empty(2 * len(out_a), dtype=np.int64)
        nb = np.empty(2 * len(out_b), dtype=np.int64)
        # a loop, not slice assignment: that compiles numba's general array setitem,
        # seconds of a machine's first compile
        for t in range(n_out):
            na[t] = out_a[t]
            nb[t] = out_b[t]
        out_a, out_b = na, nb
    out_a[n_out] = a
    out_b[n_out] = b
    return out_a, out_b


@numba.njit(nogil=True, cache=True)
def _verify(starts, ends, sets, lo, hi, threshold):  # pragma: no cover - compiled
    out_a = np.empty(16, dtype=np.int64)  # grown by _push_edge
    out_b = np.empty(16, dtype=np.int64)
    n_out = np.int64(0)  # not 0: see _push_edge
    n_checked = 0
    for g in range(len(starts)):
        s, e = starts[g], ends[g]
        k = e - s
        parent = _identity(k)
        for i in range(k):
            a = sets[lo[s + i] : hi[s + i]]
            if len(a) == 0:
                continue
            for j in range(i + 1, k):
                if _find(parent, i) == _find(parent, j):
                    continue
                b = sets[lo[s + j] : hi[s + j]]
                if len(b) == 0:
                    continue
                n_checked += 1
                if jaccard_sorted(a, b) >= threshold:
                    ri, rj = _find(parent, i), _find(parent, j)
                    parent[max(ri, rj)] = min(ri, rj)
                    out_a, out_b = _push_edge(out_a, out_b, n_out, s + i, s + j)
                    n_out += 1
    return out_a[:n_out], out_b[:n_out], n_checked


@helper
def _check(parent, sets, lo, hi, s, i, j, threshold):  # pragma: no cover - compiled
    """Compare rows ``s+i`` and ``s+j``; join them when similar. True when joined."""
    a = sets[lo[s + i] : hi[s + i]]
    b = sets[lo[s + j] : hi[s + j]]
    if jaccard_sorted(a, b) >= threshold:
        ri, rj = _find(parent, i), _find(parent, j)
        parent[max(ri, rj)] = min(ri, rj)
        return True
    return False


@numba.njit(nogil=True, cache=True)
def _verify_anchors(starts, ends, sets, lo, hi, threshold, max_anchors):  # pragma: no cover
    out_a = np.empty(16, dtype=np.int64)  # grown by _push_edge
    out_b = np.empty(16, dtype=np.int64)
    n_out = np.int64(0)  # not 0: see _push_edge
    n_checked = 0
    anchors = np.empty(max_anchors, dtype=np.int64)
    for g in range(len(starts)):
        s, e = starts[g], ends[g]
        k = e - s
        parent = _identity(k)
        n_anchors = 0
        budget = max_anchors * k  # extra checks for members no anchor vouches for
        for j in range(k):
            if hi[s + j] == lo[s + j]:
                continue
            matched = False
            for t in range(n_anchors):
                i = anchors[t]
                if _find(parent, i) == _find(parent, j):
                    matched = True
                    continue
                n_checked += 1
                if _check(parent, sets, lo, hi, s, i, j, threshold):
                    matched = True
                    out_a, out_b = _push_edge(out_a, out_b, n_out, s + i, s + j)
                    n_out += 1
            if matched:
                continue
            # no anchor matched: look for a partner among the earlier members, as the
            # exhaustive check would, while the bucket's budget lasts
            for i in range(j):
                if budget <= 0:
                    break
                if hi[s + i] == lo[s + i] or _find(parent, i) == _find(parent, j):
                    continue
                budget -= 1
                n_checked += 1
                if _check(parent, sets, lo, hi, s, i, j, threshold):
                    matched = True
                    out_a, out_b = _push_edge(out_a, out_b, n_out, s + i, s + j)
                    n_out += 1
            if not matched and n_anchors < max_anchors:
                anchors[n_anchors] = j
                n_anchors += 1
    return out_a[:n_out], out_b[:n_out], n_checked


def verify_buckets(
    bucket: np.ndarray,
    sets: np.ndarray,
    set_offsets: np.ndarray | None,
    threshold: float,
    max_anchors: int | None = None,
    set_bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Verify the candidates of each bucket with the exact Jaccard of their shingle sets.

    Rows must be sorted by ``bucket``; row ``i`` owns the sorted distinct shingle hashes
    ``sets[set_offsets[i]:set_offsets[i + 1]]``. Within a bucket the pairs are visited in
    row order and a pair already joined by verified edges is skipped (a union-find per
    bucket), so a bucket of ``k`` true duplicates costs ``k - 1`` checks, while a bucket
    whose anchor is a false positive still connects its other members: the verified edges
    connect exactly what the true-similarity graph restricted to the bucket connects.

    With ``max_anchors`` the cost is linear in the bucket size: each member is checked
    against at most ``max_anchors`` *anchors* of its bucket (members that matched nothing
    before them) and joins every anchor it matches. A member that matches no anchor is
    compared with the earlier members as in the exhaustive check, from a budget of
    ``max_anchors * k`` such checks per bucket, and becomes an anchor while there is room.
    A bucket of ``k`` members costs at most ``2 * k * max_anchors`` checks. In a bucket of
    near-duplicates (most members match an anchor) this connects what the exhaustive check
    connects; only when the budget runs out (many mutually dissimilar members) can a member
    stay apart within that bucket (it may still join through another band).

    Instead of ``set_offsets``, ``set_bounds=(lo, hi)`` gives each row its own slice
    ``sets[lo[i]:hi[i]]``, so that rows of the same document (one per bucket it is in) share
    one copy of its set.

    Returns the row numbers ``(a, b)`` of the verified edges and the number of checks.
    """
    if set_bounds is None:
        assert set_offsets is not None
        off = np.asarray(set_offsets, dtype=np.int64)
        lo, hi = off[:-1], off[1:]
    else:
        lo = np.asarray(set_bounds[0], dtype=np.int64)
        hi = np.asarray(set_bounds[1], dtype=np.int64)
    lo, hi = np.ascontiguousarray(lo), np.ascontiguousarray(hi)
    bucket = np.asarray(bucket, dtype=np.int64)
    new = np.ones(len(bucket), dtype=bool)
    new[1:] = bucket[1:] != bucket[:-1]
    starts = np.flatnonzero(new).astype(np.int64)
    ends = np.append(starts[1:], len(bucket)).astype(np.int64)
    if max_anchors is not None and max_anchors > 0:
        verify = _ckernels.kernel("lsh.verify_anchors", _verify_anchors)  # C for uint64 sets
        a, b, n = verify(starts, ends, sets, lo, hi, float(threshold), int(max_anchors))
    else:
        a, b, n = _verify(starts, ends, sets, lo, hi, float(threshold))
    return a, b, int(n)


# Each kernel compiles once per machine, however many worker processes start at once.
share_compiles(globals(), opt=KERNEL_OPT)
