"""MinHash signatures as small pure functions over flat arrays.

The pipeline from raw text to a signature is three steps, each a pure function:

1. :func:`normalize_text` -- the ``"simple"`` normalisation used for word shingles:
   Unicode NFKC, lower-case, every run of non-word characters (``[\\W_]+``) replaced by one
   space, surrounding whitespace stripped.
2. :func:`shingle_hashes` -- one flat ``uint64`` array of shingle hashes for a whole
   partition plus ``offsets`` (document ``i`` owns ``hashes[offsets[i]:offsets[i + 1]]``).
   Word shingles: each token is hashed (FNV-1a over its UTF-8 bytes), the ``n`` token hashes of
   a shingle are combined with a polynomial rolling hash and finalised with ``fmix64``. A
   document with fewer than ``n`` tokens gets one shingle, its whole token sequence; a
   document without tokens gets none. Character shingles: a polynomial rolling hash over the
   Unicode code points of every window of ``n`` characters (one shingle, the whole text, when
   shorter). Both run in numba over the UTF-8 bytes: no per-shingle Python.
3. :func:`minhash_signatures` -- for every document the minimum, over its shingles, of
   ``num_hashes`` hash functions. 32-bit (default): ``h_j(x) = (a_j * x + b_j) >> 32`` with
   ``x`` the 32-bit fold of the shingle hash and random 64-bit ``a_j, b_j`` (multiply-add-shift,
   a 2-independent family). 64-bit: ``h_j(x) = fmix64(x ^ s_j)``. A document without shingles
   gets the all-``max`` signature and is never a candidate (see :mod:`.lsh`). A document's
   repeated shingles are skipped while repeats are common in its partition (``_source``):
   the same minimum for fewer passes over the permutations.

The word tokenizer applies the normalisation itself, in numba: ASCII bytes directly (NFKC is
the identity on ASCII), other code points through per-code-point tables built from
:mod:`unicodedata` (:mod:`._normtables`). A document holding a code point whose normalisation
depends on its neighbours in a way the tables do not cover (a capital sigma; an accent that
composes with the letter before it) goes through Python's :mod:`unicodedata` and :mod:`re`,
so the tokens always equal the reference normalisation's exactly.

Examples
--------
>>> import pandas as pd
>>> text = pd.Series(["The quick brown fox jumps", "the QUICK brown fox, jumps!"])
>>> hashes, offsets = shingle_hashes(text, ngram=3, kind="word")
>>> offsets.tolist()
[0, 3, 6]
>>> sig = minhash_signatures(hashes, offsets, minhash_permutations(8, seed=1))
>>> bool((sig[0] == sig[1]).all())
True
"""

from __future__ import annotations

import contextlib
import functools
import re
import unicodedata
from typing import Any, Literal

import numba
import numpy as np
import pandas as pd
import pyarrow as pa
from numba.core.codegen import get_host_cpu_features
from numba.extending import intrinsic

from curator_dask import _ckernels
from curator_dask._kernels import KERNEL_OPT, helper, share_compiles
from curator_dask.dedup._normtables import CASED as _CASED
from curator_dask.dedup._normtables import IGNORABLE as _IGNORABLE
from curator_dask.dedup._normtables import NOT_CASED as _NOT_CASED
from curator_dask.dedup._normtables import PLAIN as _PLAIN
from curator_dask.dedup._normtables import SECOND as _SECOND
from curator_dask.dedup._normtables import SIGMA as _SIGMA
from curator_dask.dedup._normtables import UNKNOWN as _UNKNOWN
from curator_dask.dedup._normtables import UNSAFE as _UNSAFE
from curator_dask.dedup._normtables import derived, norm_tables

_NONWORD = re.compile(r"[\W_]+")

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
POLY = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the rolling hashes
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_S32 = np.uint64(32)
U32_MAX = np.uint32(0xFFFFFFFF)
U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)

ShingleKind = Literal["word", "char"]


def normalize_text(text: pd.Series) -> pd.Series:
    """Return the ``"simple"`` normalisation of every document.

    NFKC, lower-case, ``[\\W_]+`` -> one space, stripped (so whitespace is collapsed).

    Examples
    --------
    >>> normalize_text(pd.Series(["\uff28ello,  WORLD_x!"])).tolist()
    ['hello world x']
    """
    return pd.Series(
        [_normalize_one(t) for t in text.astype(object).fillna("")],
        index=text.index,
        dtype=object,
    )


def _normalize_one(t: str) -> str:
    return _NONWORD.sub(" ", unicodedata.normalize("NFKC", t).lower()).strip()


def utf8_buffers(text: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(data, offsets)``: the UTF-8 bytes of all documents and int64 offsets.

    Null documents are empty. Zero-copy for Arrow-backed strings apart from the offsets.
    """
    if isinstance(text, pd.Series):
        arr = pa.array(text.astype(object) if text.dtype == object else text, from_pandas=True)
    else:
        arr = pa.array(text, type=pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.large_string())
    if arr.null_count:
        arr = arr.fill_null("")
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = (
        np.frombuffer(bufs[2], dtype=np.uint8)
        if bufs[2] is not None
        else np.zeros(0, dtype=np.uint8)
    )
    return data, offsets


@numba.njit(inline="always")
def _fmix64(k: np.uint64) -> np.uint64:
    k ^= k >> _S33
    k *= _M1
    k ^= k >> _S33
    k *= _M2
    k ^= k >> _S33
    return k


@numba.njit(inline="always")
def _poly_top(ngram):  # pragma: no cover - compiled
    top = np.uint64(1)
    for _ in range(ngram - 1):
        top *= POLY
    return top


@numba.njit(inline="always")
def _rolling_shingles(vals, n, ngram, top, out, pos):  # pragma: no cover - compiled
    """Write the shingle hashes of ``vals[:n]`` at ``out[pos:]``; return the new ``pos``.

    A shingle is the polynomial ``sum vals[t+j] * POLY^(ngram-1-j)`` of ``ngram``
    consecutive values, rolled one value at a time (``top`` = ``POLY^(ngram-1)``), then
    mixed; fewer than ``ngram`` values make one shingle of them all, none make none.
    """
    if n == 0:
        return pos
    acc = np.uint64(0)
    for t in range(min(ngram, n)):
        acc = acc * POLY + vals[t]
    out[pos] = _fmix64(acc)
    pos += 1
    for t in range(ngram, n):
        acc = (acc - vals[t - ngram] * top) * POLY + vals[t]
        out[pos] = _fmix64(acc)
        pos += 1
    return pos


@numba.njit(nogil=True, cache=True)
def _char_shingles(data, offsets, ngram):  # pragma: no cover - compiled
    n_docs = len(offsets) - 1
    out_off = np.zeros(n_docs + 1, dtype=np.int64)
    cap = 16
    for i in range(n_docs):
        cap += offsets[i + 1] - offsets[i] + 1
    out = np.empty(cap, dtype=np.uint64)
    cps = np.empty(0, dtype=np.uint64)
    top = _poly_top(ngram)
    pos = 0
    for i in range(n_docs):
        start, end = offsets[i], offsets[i + 1]
        if len(cps) < end - start:
            cps = np.empty((end - start) * 2, dtype=np.uint64)
        # decode UTF-8 to code points
        nc = 0
        p = start
        while p < end:
            c = np.uint64(data[p])
            if c < 0x80:
                cp, k = c, 0
            elif c < 0xE0:
                cp, k = c & np.uint64(0x1F), 1
            elif c < 0xF0:
                cp, k = c & np.uint64(0x0F), 2
            else:
                cp, k = c & np.uint64(0x07), 3
            p += 1
            for _ in range(k):
                if p < end:
                    cp = (cp << np.uint64(6)) | (np.uint64(data[p]) & np.uint64(0x3F))
                    p += 1
            cps[nc] = cp + np.uint64(1)
            nc += 1
        pos = _rolling_shingles(cps, nc, ngram, top, out, pos)
        out_off[i + 1] = pos
    return out[:pos], out_off


@numba.njit(inline="always")
def _decode(data, p, end):  # pragma: no cover - compiled
    """Decode the UTF-8 sequence at ``data[p]``; return ``(code point, next p)``."""
    c = np.int64(data[p])
    if c < 0xE0:
        cp, k = c & 0x1F, 1
    elif c < 0xF0:
        cp, k = c & 0x0F, 2
    else:
        cp, k = c & 0x07, 3
    p += 1
    for _ in range(k):
        if p < end:
            cp = (cp << 6) | (np.int64(data[p]) & 0x3F)
            p += 1
    return cp, p


# ASCII byte -> its lower case when a word character ([A-Za-z0-9]), else 0
_ASCII_WORD = np.array(
    [c + 32 if 65 <= c <= 90 else c if 97 <= c <= 122 or 48 <= c <= 57 else 0 for c in range(128)],
    dtype=np.uint8,
)
# every byte -> what the word kernel hashes: _ASCII_WORD, and a byte >= 0x80 itself (a word
# byte when the text is taken raw)
_BYTE_WORD = np.concatenate([_ASCII_WORD, np.arange(128, 256)]).astype(np.uint64)


@numba.njit
def _is_pair(keys, first, second):  # pragma: no cover - compiled
    """Whether ``(first, second)`` is in the sorted pair keys ``keys``.

    A binary search written out, not ``np.searchsorted``: numba compiles that generic
    overload (its comparison helpers for every number kind) in seconds of a machine's
    first compile. A call, not inlined: it runs only next to combining marks.
    """
    key = (first << 21) | second
    lo = 0
    hi = len(keys)
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo < len(keys) and keys[lo] == key


@helper(cache=False)
def _final_sigma(data, start, end, q, p, back, fwd):  # pragma: no cover - compiled
    """CPython's final-sigma rule for the sigma at ``data[q:p]``: 1 final, 0 not, -1 unknown.

    Final when the nearest character before it that is not case-ignorable is cased and the
    nearest such character after it is not cased (or there is none). ``back``/``fwd`` say
    what each code point's NFKC shows to these scans; a long run of ignorable characters
    gives up (-1) to bound the work.
    """
    n_cp = len(back)
    seen = 0
    j = q
    view = _IGNORABLE
    while j > start and view == _IGNORABLE:
        j -= 1
        while j > start and (data[j] & 0xC0) == 0x80:
            j -= 1
        cp, _ = _decode(data, j, end) if data[j] >= 0x80 else (np.int64(data[j]), j + 1)
        view = back[cp] if cp < n_cp else _UNKNOWN
        seen += 1
        if seen > 64:
            return -1
    if view == _UNKNOWN:
        return -1
    if view != _CASED:
        return 0
    j = p
    while j < end:
        c = data[j]
        if c < 0x80:
            cp, j = np.int64(c), j + 1
        else:
            cp, j = _decode(data, j, end)
        view = fwd[cp] if cp < n_cp else _UNKNOWN
        seen += 1
        if view == _UNKNOWN or seen > 128:
            return -1
        if view != _IGNORABLE:
            return 1 if view == _NOT_CASED else 0
    return 1


# ``_fast_kinds``: a code point the word kernel can take without its general tables
_FAST_WORD = 1  # one word character, its output one code point (itself or its lower case)
_FAST_SPACE = 2  # one non-word character (its output is a space)
_FAST_TAILED = 4  # with _FAST_WORD/_FAST_SPACE: its NFKD ends in non-starters


@numba.njit(inline="always")
def _utf8_length(cp):  # pragma: no cover - compiled
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


@numba.njit(inline="always")
def _hash_utf8(h, cp):  # pragma: no cover - compiled
    """FNV-1a of ``h`` continued over the UTF-8 bytes of the code point ``cp`` (>= 0x80)."""
    n = _utf8_length(cp)
    lead = (0xC0, 0xE0, 0xF0)[n - 2]
    h = (h ^ np.uint64(lead | (cp >> (6 * (n - 1))))) * FNV_PRIME
    for k in range(n - 2, -1, -1):
        h = (h ^ np.uint64(0x80 | ((cp >> (6 * k)) & 0x3F))) * FNV_PRIME
    return h


def _fast_kinds(
    cls: np.ndarray,
    out_off: np.ndarray,
    out_data: np.ndarray,
    last_starter: np.ndarray,
    ends_starter: np.ndarray,
    tail_marks: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per code point: its fast kind (``_FAST_WORD``/``_FAST_SPACE``, + ``_FAST_TAILED``, or
    0 for none) and, for ``_FAST_WORD``, the one code point of its output.

    A code point gets a fast kind when the general path of :func:`_word_shingles` would
    treat it as output that is one word code point from U+0080 on or one space, with the
    composition state ``last = provider = cp``, ``adjacent`` true: class ``PLAIN``, NFKC's
    last starter the code point itself and NFKC ending with it. The fast path then does
    exactly what the general one does, without its tables.

    Array operations over all code points at once (once per machine: :func:`_fast_table`),
    not a numba kernel: a fresh machine's first run saves its compile.
    """
    n = len(cls)
    fast = np.zeros(n, dtype=np.uint8)
    out_cp = np.arange(n, dtype=np.int32)  # hashed (and then dropped) for a space too
    cp = np.arange(0x80, n, dtype=np.int64)
    plain = (cls[0x80:] == _PLAIN) & (last_starter[0x80:] == cp) & ends_starter[0x80:]
    cp = cp[plain]
    s = out_off[cp].astype(np.int64)
    length = out_off[cp + 1].astype(np.int64) - s
    tailed = np.where(tail_marks[cp], _FAST_TAILED, 0).astype(np.uint8)
    data = np.concatenate([out_data, np.zeros(4, dtype=np.uint8)]).astype(np.int64)
    lead = data[s]  # the padding reads as 0 past the end (masked out below)
    space = (length == 1) & (lead == 32)
    fast[cp[space]] = _FAST_SPACE | tailed[space]
    # decode the output as _decode does (a lead byte, then up to its count of continuation
    # bytes before the end); it is one code point when its length is its lead byte's
    more = np.where(lead < 0xE0, 1, np.where(lead < 0xF0, 2, 3))
    o = np.where(lead < 0xE0, lead & 0x1F, np.where(lead < 0xF0, lead & 0x0F, lead & 0x07))
    took = np.minimum(more, length - 1)
    for j in range(1, 4):
        o = np.where(took >= j, (o << 6) | (data[s + j] & 0x3F), o)
    utf8_length = np.where(o < 0x80, 1, np.where(o < 0x800, 2, np.where(o < 0x10000, 3, 4)))
    word = (
        ~space
        & (length >= 2)
        & (length <= 4)
        & (lead >= 0xC0)
        & (1 + took == length)
        & (utf8_length == length)
        & (o >= 0x80)
    )
    fast[cp[word]] = _FAST_WORD | tailed[word]
    out_cp[cp[word]] = o[word]
    return fast, out_cp


@functools.cache
def _fast_table() -> tuple[np.ndarray, np.ndarray]:
    """:func:`_fast_kinds` of the tables: derived once per machine, loaded by every later
    process (:func:`.derived`, named by this module's code)."""

    def build() -> tuple[np.ndarray, np.ndarray]:
        t = norm_tables()
        return _fast_kinds(
            t.cls, t.out_off, t.out_data, t.last_starter, t.ends_starter, t.tail_marks
        )

    with open(__file__, "rb") as f:
        code = f.read()
    return derived("fasttable", code, build)  # type: ignore[return-value]


@numba.njit(nogil=True, cache=True)
def _word_shingles(data, offsets, raw, tables, fast, fast_cp, ngram):  # pragma: no cover - compiled
    """Word shingles of every document; the tokens are the runs of word characters.

    ASCII bytes: ``[A-Za-z0-9]`` are word characters (lower-cased). Other bytes: when
    ``raw`` (the text is normalised already) every non-ASCII byte is a word byte; otherwise
    each code point is replaced by its table output (a space for a non-word character), and
    a document the tables cannot do exactly (see ``_normtables``) gets no shingles and
    ``ok[i] = False``. Returns ``(hashes, offsets, ok)``.
    """
    cls, out_off_t, out_data_t, last_starter, ends_starter, tail_marks = tables[:6]
    pairs, tail_pairs, sigma_back, sigma_fwd, max_tokens = tables[6:]
    n_cp = len(cls)
    n_docs = len(offsets) - 1
    ok = np.empty(n_docs, dtype=np.bool_)  # not np.ones: one overload less to compile
    for i in range(n_docs):
        ok[i] = True
    out_off = np.zeros(n_docs + 1, dtype=np.int64)
    out = np.empty(16 + (offsets[n_docs] - offsets[0]) // 2 + n_docs, dtype=np.uint64)
    tok = np.empty(0, dtype=np.uint64)
    top = _poly_top(ngram)
    pos = 0
    for i in range(n_docs):
        start, end = offsets[i], offsets[i + 1]
        # at most one token per two bytes, times the most tokens one code point gives
        if len(tok) < (end - start) * max_tokens // 2 + 2:
            tok = np.empty((end - start) * max_tokens + 2, dtype=np.uint64)
        nt = 0
        h = FNV_OFFSET
        in_tok = np.uint64(0)  # 1 inside a token
        # composition state: the last starter (NFKC form), whether it is the last
        # character, whether its code point's decomposition ends in non-starters, that
        # code point
        last = np.int64(-1)
        adjacent = False
        tail = False
        provider = np.int64(-1)
        p = start
        while p < end:
            c = data[p]
            if c < 128 or raw:
                # Without branches on the byte (a branch per token boundary is mispredicted
                # about once a token): store the running hash as the next token every time
                # and count it only where a token ends; a word byte continues the hash, any
                # other byte restarts it.
                p += 1
                w = _BYTE_WORD[c]
                word = np.uint64(w != 0)
                keep = np.uint64(0) - word  # all ones on a word byte
                tok[nt] = h
                nt += np.int64(in_tok & (word ^ np.uint64(1)))
                h = (((h ^ w) * FNV_PRIME) & keep) | (FNV_OFFSET & ~keep)
                in_tok = word
                continue
            q = p
            cp, p = _decode(data, p, end)
            f = fast[cp] if cp < n_cp else 0
            if f:
                # what the general path below does for this code point, without its tables
                # (and, like the ASCII step, without a branch on word or not)
                last = cp
                adjacent = True
                tail = f >= _FAST_TAILED
                provider = cp
                word = np.uint64(f & _FAST_WORD)
                keep = np.uint64(0) - word
                tok[nt] = h
                nt += np.int64(in_tok & (word ^ np.uint64(1)))
                h = (_hash_utf8(h, fast_cp[cp]) & keep) | (FNV_OFFSET & ~keep)
                in_tok = word
                continue
            if q > start and data[q - 1] < 128:
                # an ASCII character (its own NFKC, a starter) came last
                last = np.int64(data[q - 1])
                adjacent = True
                tail = False
                provider = last
            kind = cls[cp] if cp < n_cp else _UNSAFE
            if kind != _PLAIN:
                if kind == _UNSAFE:
                    ok[i] = False
                    break
                if kind == _SIGMA:
                    final = _final_sigma(data, start, end, q, p, sigma_back, sigma_fwd)
                    if final < 0:
                        ok[i] = False
                        break
                    # lower case: U+03C2 (final) or U+03C3, UTF-8 CF 82 / CF 83
                    in_tok = np.uint64(1)
                    h = (h ^ np.uint64(0xCF)) * FNV_PRIME
                    h = (h ^ np.uint64(0x83 - final)) * FNV_PRIME
                    last = np.int64(0x3A3)
                    adjacent = True
                    tail = False
                    provider = cp
                    continue
                if kind == _SECOND and tail:
                    if _is_pair(tail_pairs, provider, cp):
                        ok[i] = False
                        break
                elif (kind == _SECOND or adjacent) and last >= 0 and _is_pair(pairs, last, cp):
                    ok[i] = False
                    break
            ls = last_starter[cp]
            if ls >= 0:
                last = np.int64(ls)
                adjacent = ends_starter[cp]
                tail = tail_marks[cp]
                provider = cp
            else:
                adjacent = False
            for q in range(out_off_t[cp], out_off_t[cp + 1]):
                b = out_data_t[q]
                if b != 32:
                    in_tok = np.uint64(1)
                    h = (h ^ np.uint64(b)) * FNV_PRIME
                elif in_tok != 0:
                    tok[nt] = h
                    nt += 1
                    h = FNV_OFFSET
                    in_tok = np.uint64(0)
        if not ok[i]:
            out_off[i + 1] = pos
            continue
        if in_tok != 0:
            tok[nt] = h
            nt += 1
        if pos + nt + 1 > len(out):
            grown = np.empty(2 * (pos + nt + 1), dtype=np.uint64)
            for q in range(pos):  # not slice assignment: see _text_kernels.gather_strings
                grown[q] = out[q]
            out = grown
        pos = _rolling_shingles(tok, nt, ngram, top, out, pos)
        out_off[i + 1] = pos
    return out[:pos], out_off, ok


@numba.njit(nogil=True, cache=True)
def _splice(hashes, offsets, slow, fb_hashes, fb_offsets):  # pragma: no cover - compiled
    """Put the shingles of documents ``slow`` (empty in ``hashes``) back in document order."""
    n_docs = len(offsets) - 1
    out = np.empty(len(hashes) + len(fb_hashes), dtype=np.uint64)
    out_off = np.zeros(n_docs + 1, dtype=np.int64)
    pos = 0
    k = 0
    for i in range(n_docs):
        if k < len(slow) and slow[k] == i:
            seg = fb_hashes[fb_offsets[k] : fb_offsets[k + 1]]
            k += 1
        else:
            seg = hashes[offsets[i] : offsets[i + 1]]
        out[pos : pos + len(seg)] = seg
        pos += len(seg)
        out_off[i + 1] = pos
    return out, out_off


def _word_shingle_hashes(text: pd.Series, ngram: int, normalization: str) -> Any:
    if normalization not in ("simple", "none"):
        raise ValueError(f"normalization must be 'simple' or 'none', got {normalization!r}")
    data, offsets = utf8_buffers(text)
    tables = tuple(norm_tables())
    if normalization == "none":
        # tokens over the raw bytes: every non-ASCII byte is a word byte
        return _word_shingles(data, offsets, True, tables, *_fast_table(), ngram)[:2]
    hashes, out_off, ok = _word_shingles(data, offsets, False, tables, *_fast_table(), ngram)
    if ok.all():
        return hashes, out_off
    # documents the tables cannot do exactly: the Python reference, then raw tokens
    slow = np.flatnonzero(~ok)
    values = text.astype(object).fillna("").to_numpy()[slow]
    fb_data, fb_offsets = utf8_buffers(pd.Series([_normalize_one(v) for v in values]))
    fb_hashes, fb_out_off, _ = _word_shingles(
        fb_data, fb_offsets, True, tables, *_fast_table(), ngram
    )
    return _splice(hashes, out_off, slow, fb_hashes, fb_out_off)


def shingle_hashes(
    text: pd.Series,
    ngram: int,
    kind: ShingleKind = "word",
    normalization: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Hash the shingles of every document of a partition into one flat array.

    Parameters
    ----------
    text : pandas.Series
        The documents.
    ngram : int
        Shingle length in tokens (``kind="word"``) or characters (``kind="char"``).
    kind : {"word", "char"}
        Word n-grams (after normalisation) or character n-grams.
    normalization : {"simple", "none"}, optional
        Default ``"simple"`` for words, ``"none"`` (raw text) for characters. Word
        tokenisation always lower-cases ASCII and splits on non-alphanumeric ASCII bytes.

    Returns
    -------
    hashes : numpy.ndarray of uint64
        The shingle hashes, document after document (duplicates within a document kept).
    offsets : numpy.ndarray of int64
        ``len(text) + 1`` offsets into ``hashes``.
    """
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")
    if kind == "word":
        return _word_shingle_hashes(text, ngram, normalization or "simple")
    if kind == "char":
        norm = normalization or "none"
        if norm == "simple":
            text = normalize_text(text)
        elif norm != "none":
            raise ValueError(f"normalization must be 'simple' or 'none', got {norm!r}")
        data, offsets = utf8_buffers(text)
        return _char_shingles(data, offsets, ngram)
    raise ValueError(f"kind must be 'word' or 'char', got {kind!r}")


def minhash_permutations(
    num_hashes: int, seed: int = 42, use_64_bit_hash: bool = False
) -> np.ndarray:
    """Return the parameters of ``num_hashes`` hash functions, shape ``(2, num_hashes)``.

    Row 0 holds ``a_j`` (forced odd), row 1 ``b_j``; for 64-bit hashing only row 1 (the
    seeds ``s_j``) is used. Deterministic in ``seed``.
    """
    if num_hashes < 1:
        raise ValueError(f"num_hashes must be >= 1, got {num_hashes}")
    rng = np.random.default_rng([seed, 64 if use_64_bit_hash else 32])
    ab = rng.integers(0, 2**64 - 1, size=(2, num_hashes), dtype=np.uint64, endpoint=True)
    ab[0] |= np.uint64(1)
    return ab


_BLOCK = 8  # shingles per pass over the permutations
# the permutations are padded to a multiple of this: LLVM's loop over them takes one vector
# of 8 a step (a 512-bit vector of 64-bit lanes), so no scalar remainder runs; 16 (two such
# vectors) evaluated up to 8 padding permutations more for nothing (272 for 260, not 264)
_LANES = 8


@intrinsic
def _prefer_wide_vectors(typingctx):  # pragma: no cover - compiled
    """Let LLVM vectorise the calling function with the widest registers the CPU has.

    LLVM's tuning for AVX-512 CPUs prefers 256-bit vectors (``prefer-256-bit``); the
    permutation-min loop is bound by 64-bit multiplies and runs 1.4x faster in 512-bit
    registers. A function attribute scopes this to the kernels (numba's process-wide
    ``NUMBA_CPU_FEATURES`` would be the alternative); a CPU without AVX-512 keeps its
    widest registers. llvmlite validates only keyword attributes, so this string
    attribute goes into the attribute set directly; should a later llvmlite refuse it, the
    kernels compile with the default width (same results, slower; a test notices).
    """

    def codegen(context, builder, signature, args):
        with contextlib.suppress(TypeError):
            set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return numba.types.none(), codegen


@numba.njit(inline="always")
def _padded(v, k_pad):  # pragma: no cover - compiled
    """``v`` extended to ``k_pad`` entries by repeating ``v[0]`` (columns never returned)."""
    # loops, not slice assignment: see _text_kernels.gather_strings
    out = np.zeros(k_pad, dtype=np.uint64)
    for j in range(len(v)):
        out[j] = v[j]
    if len(v):
        for j in range(len(v), k_pad):
            out[j] = v[0]
    return out


@numba.njit(inline="always")
def _fold_block(hashes, p, end, xs):  # pragma: no cover - compiled
    """Load the next block of shingles from ``p`` into ``xs`` as 32-bit folded hashes.

    A short last block repeats its first shingle (a repeat does not change a minimum).
    Returns how many shingles it took.
    """
    nb = min(_BLOCK, end - p)
    for q in range(nb):
        h = hashes[p + q]
        xs[q] = (h ^ (h >> _S32)) & np.uint64(0xFFFFFFFF)
    for q in range(nb, _BLOCK):
        xs[q] = xs[0]
    return nb


_FIB = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: a table slot from a key's top bits
_DISTINCT_MAX = 1 << 16  # a document with more shingles is not de-duplicated (table memory)


@numba.njit(inline="always")
def _distinct_table(offsets):  # pragma: no cover - compiled
    """``(keys, stamps, distinct)`` for :func:`_distinct`: tables of 4x the largest document
    de-duplicated (a power of two), and room for its distinct values."""
    longest = 0
    for i in range(len(offsets) - 1):
        n = offsets[i + 1] - offsets[i]
        if longest < n <= _DISTINCT_MAX:
            longest = n
    size = 4
    while size < 4 * longest:
        size *= 2
    return (
        np.empty(size, dtype=np.uint64),
        np.zeros(size, dtype=np.int64),
        np.empty(max(longest, 1), dtype=np.uint64),
    )


@numba.njit(nogil=True)  # not inlined: the kernels' loops stay as small as they were
def _distinct(hashes, start, end, fold, keys, stamps, stamp, out):  # pragma: no cover - compiled
    """Write the distinct values of ``hashes[start:end]`` (their 32-bit folds when ``fold``)
    to ``out`` in first-seen order; return how many.

    A minimum over a document's shingles is the same over its distinct shingles, and text
    repeats itself (a sentence, a boilerplate line): each repeat skipped saves a pass over
    all the permutations, for one probe of a small open-addressing table. The table is not
    cleared between documents: a slot belongs to this document when its stamp is ``stamp``
    (distinct per document). At most a quarter full, so a probe seldom goes past one slot.
    """
    n = end - start
    bits = 2
    while (1 << bits) < 4 * n:
        bits += 1
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    nu = 0
    for p in range(start, end):
        x = hashes[p]
        if fold:
            x = (x ^ (x >> _S32)) & np.uint64(0xFFFFFFFF)
        slot = np.int64((x * _FIB) >> shift)
        while stamps[slot] == stamp and keys[slot] != x:
            slot = (slot + 1) & mask
        out[nu] = x  # kept (counted) only when new: no branch on it
        nu += np.int64(stamps[slot] != stamp)
        keys[slot] = x
        stamps[slot] = stamp
    return nu


@numba.njit(inline="always")
def _source(hashes, offsets, i, fold, keys, stamps, distinct, tally):  # pragma: no cover
    """``(values, start, end)``: the shingles of document ``i`` the kernels take.

    Its distinct shingles (:func:`_distinct`) while de-duplicating pays: for every
    document until repeats prove rare among the shingles de-duplicated so far (``tally``:
    shingles seen, repeats found; under one in eight), then for every 64th, to keep
    watching. Otherwise, and for a document of more than ``_DISTINCT_MAX`` shingles, its
    shingles as given. Either way the same minimums. The 32-bit fold is idempotent, so
    folded values may be folded again by the block loads.
    """
    start, end = offsets[i], offsets[i + 1]
    n = end - start
    if n > _DISTINCT_MAX or ((i & 63) != 0 and 8 * tally[1] < tally[0]):
        return hashes, start, end
    nu = _distinct(hashes, start, end, fold, keys, stamps, i + 1, distinct)
    tally[0] += n
    tally[1] += n - nu
    return distinct, 0, nu


@numba.njit(nogil=True, cache=True)
def _minhash32(hashes, offsets, a, b):  # pragma: no cover - compiled
    # The minimum of (a_j * x + b_j) mod 2^64 over the shingles, shifted right by 32 once at
    # the end (the shift is monotone, so min-then-shift equals shift-then-min).
    # Shingles go in blocks of _BLOCK with the permutation loop outside and the block loop
    # unrolled inside: one load and store of the running minimum per block instead of per
    # shingle, and LLVM vectorises over j (a short last block repeats its first shingle,
    # which does not change a minimum). The permutations are padded to a multiple of _LANES
    # so that no scalar remainder loop runs for any k.
    _prefer_wide_vectors()
    n_docs = len(offsets) - 1
    k = len(a)
    k_pad = (k + _LANES - 1) // _LANES * _LANES
    a = _padded(a, k_pad)
    b = _padded(b, k_pad)
    sig = np.empty((n_docs, k), dtype=np.uint32)
    buf = np.empty(k_pad, dtype=np.uint64)
    xs = np.empty(_BLOCK, dtype=np.uint64)
    keys, stamps, distinct = _distinct_table(offsets)
    tally = np.zeros(2, dtype=np.int64)
    for i in range(n_docs):
        src, p, end = _source(hashes, offsets, i, True, keys, stamps, distinct, tally)
        for j in range(k_pad):
            buf[j] = U64_MAX
        while p < end:
            nb = _fold_block(src, p, end, xs)
            for j in range(k_pad):
                m = buf[j]
                for q in range(_BLOCK):
                    m = min(m, a[j] * xs[q] + b[j])
                buf[j] = m
            p += nb
        # a document without shingles keeps U64_MAX, i.e. U32_MAX after the shift
        row = sig[i]
        for j in range(k):
            row[j] = np.uint32(buf[j] >> _S32)
    return sig


@numba.njit(nogil=True, cache=True)
def _minhash32_split(hashes, offsets, a, b):  # pragma: no cover - compiled
    # _minhash32 for CPUs without a 64-bit vector multiply (AVX2, NEON), where LLVM emulates
    # a*x with three 32-bit multiplies and the unsigned 64-bit minimum with compares. With
    # a = ah*2^32 + al and b = bh*2^32 + bl (32-bit halves), t = al*x + bl needs no 64th
    # bit (at most (2^32-1)^2 + 2^32-1 = 2^64 - 2^32), and
    #   ((a*x + b) mod 2^64) >> 32 = (ah*x + bh + (t >> 32)) mod 2^32,
    # so a signature entry needs one 32x32->64 multiply, one 32-bit multiply and a 32-bit
    # minimum, eight permutations per 256-bit register. Same blocks and padding.
    _prefer_wide_vectors()
    n_docs = len(offsets) - 1
    k = len(a)
    k_pad = (k + _LANES - 1) // _LANES * _LANES
    a = _padded(a, k_pad)
    b = _padded(b, k_pad)
    low = np.uint64(0xFFFFFFFF)
    al = (a & low).astype(np.uint32)
    ah = (a >> _S32).astype(np.uint32)
    bl = (b & low).astype(np.uint32)
    bh = (b >> _S32).astype(np.uint32)
    sig = np.empty((n_docs, k), dtype=np.uint32)
    buf = np.empty(k_pad, dtype=np.uint32)
    xs = np.empty(_BLOCK, dtype=np.uint32)
    keys, stamps, distinct = _distinct_table(offsets)
    tally = np.zeros(2, dtype=np.int64)
    for i in range(n_docs):
        src, p, end = _source(hashes, offsets, i, True, keys, stamps, distinct, tally)
        for j in range(k_pad):
            buf[j] = U32_MAX
        while p < end:
            nb = _fold_block(src, p, end, xs)
            for j in range(k_pad):
                m = buf[j]
                for q in range(_BLOCK):
                    x = xs[q]
                    t = np.uint64(al[j]) * np.uint64(x) + np.uint64(bl[j])
                    m = min(m, np.uint32(np.uint32(t >> _S32) + np.uint32(ah[j] * x) + bh[j]))
                buf[j] = m
            p += nb
        for j in range(k):  # not slice assignment: see _text_kernels.gather_strings
            sig[i, j] = buf[j]
    return sig


@functools.cache
def _vector_mul64() -> bool:
    """Whether numba compiles for a CPU with a 64-bit vector multiply (AVX-512DQ).

    The same rule as numba's: ``NUMBA_CPU_FEATURES`` when set, else the host's features.
    """
    features = numba.config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features()
    return "+avx512dq" in features.split(",")


@numba.njit(nogil=True, cache=True)
def _minhash64(hashes, offsets, s):  # pragma: no cover - compiled
    # The layout of _minhash32: blocks of shingles, permutations padded, 512-bit vectors.
    _prefer_wide_vectors()
    n_docs = len(offsets) - 1
    k = len(s)
    k_pad = (k + _LANES - 1) // _LANES * _LANES
    s = _padded(s, k_pad)
    sig = np.empty((n_docs, k), dtype=np.uint64)
    buf = np.empty(k_pad, dtype=np.uint64)
    xs = np.empty(_BLOCK, dtype=np.uint64)
    keys, stamps, distinct = _distinct_table(offsets)
    tally = np.zeros(2, dtype=np.int64)
    for i in range(n_docs):
        src, p, end = _source(hashes, offsets, i, False, keys, stamps, distinct, tally)
        for j in range(k_pad):
            buf[j] = U64_MAX
        while p < end:
            nb = min(_BLOCK, end - p)
            for q in range(nb):
                xs[q] = src[p + q]
            for q in range(nb, _BLOCK):
                xs[q] = xs[0]
            for j in range(k_pad):
                m = buf[j]
                for q in range(_BLOCK):
                    m = min(m, _fmix64(xs[q] ^ s[j]))
                buf[j] = m
            p += nb
        row = sig[i]
        for j in range(k):
            row[j] = buf[j]
    return sig


def minhash_signatures(
    hashes: Any, offsets: Any, permutations: Any, use_64_bit_hash: bool = False
) -> Any:
    """Return the MinHash signature matrix, shape ``(n_docs, num_hashes)``.

    ``uint32`` (default) or ``uint64``; a document without shingles gets all-``max``.
    Dispatches on the array module: numpy arrays run the numba kernel, cupy arrays a
    CUDA kernel with the same arithmetic (equal results).
    """
    from curator_dask._backend import array_module

    xp = array_module(hashes)
    if xp is not np:
        from curator_dask.dedup._gpu import minhash_signatures_gpu

        return minhash_signatures_gpu(hashes, offsets, permutations, use_64_bit_hash)
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    perms = np.ascontiguousarray(permutations, dtype=np.uint64)
    if use_64_bit_hash:
        return _minhash64(hashes, offsets, perms[1].copy())
    # both kernels give the same signatures; each is the faster one on its kind of CPU
    kernel = _minhash32 if _vector_mul64() else _minhash32_split
    return kernel(hashes, offsets, perms[0].copy(), perms[1].copy())


def unique_shingles(hashes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort and de-duplicate each document's shingle hashes (uint64, for exact Jaccard).

    ``(distinct hashes, their int64 offsets)``: :func:`_unique_per_doc`, or its C twin
    (``csrc/dedup_small.c``) where :mod:`curator_dask._ckernels` builds it."""
    unique = _ckernels.kernel("minhash.unique_per_doc", _unique_per_doc)
    return unique(  # type: ignore[no-any-return]
        np.ascontiguousarray(hashes, dtype=np.uint64),
        np.ascontiguousarray(offsets, dtype=np.int64),
    )


_SMALL_SORT = 16  # ranges up to this long are insertion-sorted


@numba.njit(inline="always")
def _insertion_sort(v, lo, hi):  # pragma: no cover - compiled
    """Sort ``v[lo:hi]`` in place by insertion: short ranges, and ranges almost in order."""
    for k in range(lo + 1, hi):
        x = v[k]
        t = k
        while t > lo and x < v[t - 1]:
            v[t] = v[t - 1]
            t -= 1
        v[t] = x


@helper
def _sort_range(v, lo, hi, stack):  # pragma: no cover - compiled
    """Sort ``v[lo:hi]`` in place (ascending): quicksort on a median of three, the smaller
    side first and the larger on ``stack`` (at most 64 pairs: 128 entries), insertion sort
    for short ranges.

    Hand-written rather than ``np.sort``: numba's generic quicksort (its closures,
    partition and comparison helpers) was most of a fresh machine's compile of
    :func:`_unique_per_doc`; this is one small function and sorts as fast.
    """
    top = 0
    while True:
        while hi - lo > _SMALL_SORT:
            mid = lo + (hi - lo) // 2
            # median of three into v[mid], the smallest at v[lo], the largest at v[hi - 1]
            if v[mid] < v[lo]:
                v[mid], v[lo] = v[lo], v[mid]
            if v[hi - 1] < v[mid]:
                v[hi - 1], v[mid] = v[mid], v[hi - 1]
                if v[mid] < v[lo]:
                    v[mid], v[lo] = v[lo], v[mid]
            pivot = v[mid]
            i = lo
            j = hi - 1
            while True:  # Hoare: v[lo..i] <= pivot <= v[j..hi-1] after the scans
                i += 1
                while v[i] < pivot:
                    i += 1
                j -= 1
                while pivot < v[j]:
                    j -= 1
                if i >= j:
                    break
                v[i], v[j] = v[j], v[i]
            # v[lo:j+1] <= pivot <= v[j+1:hi]; push the larger side, go on with the smaller
            if j + 1 - lo < hi - j - 1:
                stack[top] = j + 1
                stack[top + 1] = hi
                hi = j + 1
            else:
                stack[top] = lo
                stack[top + 1] = j + 1
                lo = j + 1
            top += 2
        _insertion_sort(v, lo, hi)
        if top == 0:
            return
        top -= 2
        lo = stack[top]
        hi = stack[top + 1]


_CROWDED = 32  # a bucket with more values than this: the range is quicksorted instead


@numba.njit(nogil=True, cache=True)
def _unique_per_doc(hashes, offsets):  # pragma: no cover - compiled
    # Each document's hashes are sorted where its distinct ones go, then compacted there.
    # Shingle hashes are uniform 64-bit values: a counting pass on their top bits (about one
    # value per bucket) puts them almost in order and one insertion pass finishes the sort,
    # a linear sort without the mispredicted compares of a quicksort. Values that crowd a
    # bucket (not uniform) go to _sort_range.
    n = len(offsets) - 1
    longest = 0
    for i in range(n):
        longest = max(longest, offsets[i + 1] - offsets[i])
    out = np.empty(len(hashes), dtype=np.uint64)
    out_off = np.zeros(n + 1, dtype=np.int64)
    stack = np.empty(128, dtype=np.int64)
    tmp = np.empty(longest, dtype=np.uint64)
    count = np.empty(2 * longest + 2, dtype=np.int64)
    pos = np.int64(0)  # not 0: see _push_edge in .lsh
    for i in range(n):
        s = offsets[i]
        m = offsets[i + 1] - s
        for k in range(m):
            out[pos + k] = hashes[s + k]
        if m > _SMALL_SORT:
            bits = 1
            while (1 << bits) < m:
                bits += 1
            shift = np.uint64(64 - bits)
            buckets = 1 << bits
            for t in range(buckets + 1):
                count[t] = 0
            crowded = False
            for k in range(pos, pos + m):
                t = np.int64(out[k] >> shift) + 1
                count[t] += 1
                if count[t] > _CROWDED:
                    crowded = True
            if crowded:
                _sort_range(out, pos, pos + m, stack)
            else:
                for t in range(buckets):
                    count[t + 1] += count[t]
                for k in range(pos, pos + m):
                    x = out[k]
                    t = np.int64(x >> shift)
                    tmp[count[t]] = x
                    count[t] += 1
                for k in range(m):
                    out[pos + k] = tmp[k]
        # an insertion pass: the whole sort of a short range, the last step of a bucketed one
        _insertion_sort(out, pos, pos + m)
        w = pos
        for k in range(pos, pos + m):
            if k == pos or out[k] != out[w - 1]:
                out[w] = out[k]
                w += 1
        pos = w
        out_off[i + 1] = pos
    return out[:pos], out_off


@numba.njit(nogil=True, cache=True)
def jaccard_sorted(a: np.ndarray, b: np.ndarray) -> float:  # pragma: no cover - compiled
    """Exact Jaccard of two sorted arrays of distinct values."""
    i = j = inter = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            inter += 1
            i += 1
            j += 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    union = len(a) + len(b) - inter
    return inter / union if union else 0.0


@numba.njit(nogil=True, cache=True)
def _fmix64_array(x):  # pragma: no cover - compiled
    out = np.empty(len(x), dtype=np.uint64)
    for i in range(len(x)):
        out[i] = _fmix64(np.uint64(x[i]))
    return out


# Each kernel compiles once per machine, however many worker processes start at once.
share_compiles(globals(), opt=KERNEL_OPT)
