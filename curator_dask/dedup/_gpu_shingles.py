"""Shingle hashes straight from a string column's characters, one thread per document.

The input is what a cudf string column gives on the device without a host copy:
``series.str.code_points()`` (each character as its UTF-8 bytes packed into an integer,
``"é"`` -> ``0xC3A9``) and ``series.str.len()`` (characters per document). Three passes
over the documents: count the tokens, write the token hashes, roll them into shingle
hashes. Each pass is one self-contained function of one document (no calls, so that it
compiles for either target), compiled twice from the same source: by ``numba.njit`` for
the host (:func:`shingle_hashes_from_units`, how the tests hold it to
:func:`~curator_dask.dedup.minhash.shingle_hashes` on a CPU) and by ``numba.cuda.jit``
for the device (:func:`device_shingle_hashes`, not yet run on a GPU: docs/gpu.md; used by
fuzzy dedup with ``curator.dedup.shingle-device: gpu``).

The arithmetic is the host kernels' (``minhash._word_shingles``/``_char_shingles``): FNV-1a
over the lower-cased bytes of ``[A-Za-z0-9]`` runs (and, for raw text, every non-ASCII
byte), code point + 1 for characters, the rolling polynomial and the 64-bit finaliser.
Word shingles with the ``"simple"`` normalisation (NFKC, Unicode lower case) are done on
the device for documents that are ASCII (their normal form is themselves, apart from the
case folding the kernel does); a document with a non-ASCII character is flagged and
hashed on the host by the reference path, then spliced back in order.
"""

from __future__ import annotations

import warnings
from typing import Any

import numba
import numpy as np

from curator_dask.dedup.minhash import FNV_OFFSET, FNV_PRIME, POLY, ShingleKind, shingle_hashes

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
# ASCII byte -> its lower case when a word character ([A-Za-z0-9]), else 0
_ASCII_WORD = np.array(
    [c + 32 if 65 <= c <= 90 else c if 97 <= c <= 122 or 48 <= c <= 57 else 0 for c in range(128)],
    dtype=np.uint8,
)
WORD, CHAR = 0, 1


def _doc_count(units, start, end, kind, raw):  # pragma: no cover - compiled
    """Tokens of one document; -1 when the host must do it (non-ASCII, normalised words)."""
    if kind == CHAR:
        return end - start
    n = 0
    in_tok = False
    for p in range(start, end):
        u = units[p]
        if u < 128:
            if _ASCII_WORD[u] != 0:
                in_tok = True
            elif in_tok:
                n += 1
                in_tok = False
        elif raw:
            in_tok = True
        else:
            return -1
    if in_tok:
        n += 1
    return n


def _doc_tokens(units, start, end, kind, tok, base):  # pragma: no cover - compiled
    """Write one document's token values at ``tok[base:]`` (raw bytes for words)."""
    t = base
    if kind == CHAR:
        for p in range(start, end):
            u = units[p]
            nb = 1 if u < 0x80 else 2 if u < 0x10000 else 3 if u < 0x1000000 else 4
            lead = u >> np.uint32(8 * (nb - 1))
            if nb == 1:
                cp = np.uint64(lead)
            elif nb == 2:
                cp = np.uint64(lead & 0x1F)
            elif nb == 3:
                cp = np.uint64(lead & 0x0F)
            else:
                cp = np.uint64(lead & 0x07)
            for k in range(nb - 2, -1, -1):
                b = (u >> np.uint32(8 * k)) & np.uint32(0x3F)
                cp = (cp << np.uint64(6)) | np.uint64(b)
            tok[t] = cp + np.uint64(1)
            t += 1
        return
    h = FNV_OFFSET
    in_tok = False
    for p in range(start, end):
        u = units[p]
        if u < 128:
            w = _ASCII_WORD[u]
            if w != 0:
                in_tok = True
                h = (h ^ np.uint64(w)) * FNV_PRIME
            elif in_tok:
                tok[t] = h
                t += 1
                h = FNV_OFFSET
                in_tok = False
        else:  # raw text: every byte of a non-ASCII character is a word byte
            in_tok = True
            nb = 1 if u < 0x80 else 2 if u < 0x10000 else 3 if u < 0x1000000 else 4
            for k in range(nb - 1, -1, -1):
                b = (u >> np.uint32(8 * k)) & np.uint32(0xFF)
                h = (h ^ np.uint64(b)) * FNV_PRIME
    if in_tok:
        tok[t] = h


def _doc_shingles(tok, t0, nt, ngram, top, out, o0):  # pragma: no cover - compiled
    """Roll one document's ``nt`` tokens into shingle hashes at ``out[o0:]``."""
    if nt == 0:
        return
    acc = np.uint64(0)
    first = ngram if ngram < nt else nt
    for t in range(first):
        acc = acc * POLY + tok[t0 + t]
    k = acc
    k ^= k >> _S33
    k *= _M1
    k ^= k >> _S33
    k *= _M2
    k ^= k >> _S33
    out[o0] = k
    o = o0 + 1
    for t in range(ngram, nt):
        acc = (acc - tok[t0 + t - ngram] * top) * POLY + tok[t0 + t]
        k = acc
        k ^= k >> _S33
        k *= _M1
        k ^= k >> _S33
        k *= _M2
        k ^= k >> _S33
        out[o] = k
        o += 1


# -- host: the same per-document functions, compiled by numba.njit ---------------------------
_h_count_doc = numba.njit(_doc_count)
_h_tokens_doc = numba.njit(_doc_tokens)
_h_shingles_doc = numba.njit(_doc_shingles)


@numba.njit(cache=True)
def _h_count(units, offsets, kind, raw, ntok):  # pragma: no cover - compiled
    for i in range(len(ntok)):
        ntok[i] = _h_count_doc(units, offsets[i], offsets[i + 1], kind, raw)


@numba.njit(cache=True)
def _h_tokens(units, offsets, kind, tok, tok_off, ntok):  # pragma: no cover - compiled
    for i in range(len(ntok)):
        if ntok[i] > 0:
            _h_tokens_doc(units, offsets[i], offsets[i + 1], kind, tok, tok_off[i])


@numba.njit(cache=True)
def _h_shingles(tok, tok_off, ngram, top, out, out_off):  # pragma: no cover - compiled
    for i in range(len(tok_off) - 1):
        t0 = tok_off[i]
        _h_shingles_doc(tok, t0, tok_off[i + 1] - t0, ngram, top, out, out_off[i])


@numba.njit(cache=True)
def pack_utf8(data, offsets):  # pragma: no cover - compiled
    """``(units, unit offsets)`` from UTF-8 bytes: what cudf's ``str.code_points()`` gives.

    Each character's UTF-8 bytes packed big-endian into a uint32 (``"é"`` -> ``0xC3A9``).
    """
    n_docs = len(offsets) - 1
    units = np.empty(offsets[n_docs] - offsets[0], dtype=np.uint32)
    unit_off = np.zeros(n_docs + 1, dtype=np.int64)
    n = 0
    for i in range(n_docs):
        p = offsets[i]
        while p < offsets[i + 1]:
            c = data[p]
            nb = 1 if c < 0x80 else 2 if c < 0xE0 else 3 if c < 0xF0 else 4
            u = np.uint32(0)
            for k in range(nb):
                u = (u << np.uint32(8)) | np.uint32(data[p + k])
            units[n] = u
            n += 1
            p += nb
        unit_off[i + 1] = n
    return units[:n], unit_off


def _poly_top(ngram: int) -> np.uint64:
    top = np.uint64(1)
    with np.errstate(over="ignore"):
        for _ in range(ngram - 1):
            top = np.uint64(top * POLY)
    return top


def _shingle_counts(ntok: Any, ngram: int, xp: Any) -> Any:
    """Shingles per document: none for no token, one for fewer than ``ngram``."""
    ntok = xp.maximum(ntok, 0)
    return xp.where(ntok == 0, 0, xp.where(ntok < ngram, 1, ntok - ngram + 1))


def _exclusive_cumsum(counts: Any, xp: Any) -> Any:
    off = xp.zeros(len(counts) + 1, dtype=xp.int64)
    xp.cumsum(counts, out=off[1:])
    return off


def device_supported(kind: str, normalization: str | None) -> bool:
    """True when the device kernels do these shingles (words; characters of raw text)."""
    return (kind == "word" and (normalization or "simple") in ("simple", "none")) or (
        kind == "char" and (normalization or "none") == "none"
    )


def _kind(kind: str, normalization: str | None) -> tuple[int, bool]:
    if kind == "word":
        norm = normalization or "simple"
        if norm not in ("simple", "none"):
            raise ValueError(f"normalization must be 'simple' or 'none', got {norm!r}")
        return WORD, norm == "none"
    if kind == "char":
        if (normalization or "none") != "none":
            raise ValueError("character shingles from the buffers take normalization='none'")
        return CHAR, True
    raise ValueError(f"kind must be 'word' or 'char', got {kind!r}")


def shingle_hashes_from_units(
    units: np.ndarray,
    unit_offsets: np.ndarray,
    ngram: int,
    kind: ShingleKind = "word",
    normalization: str | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host run of the per-document kernels: ``(hashes, offsets, host_docs)``.

    ``host_docs`` are the documents left for the host reference (their shingles are empty
    here); :func:`splice_host_docs` fills them in.
    """
    code, raw = _kind(kind, normalization)
    n = len(unit_offsets) - 1
    ntok = np.empty(n, dtype=np.int64)
    _h_count(units, unit_offsets, code, raw, ntok)
    tok_off = _exclusive_cumsum(np.maximum(ntok, 0), np)
    tok = np.empty(int(tok_off[-1]), dtype=np.uint64)
    _h_tokens(units, unit_offsets, code, tok, tok_off, ntok)
    out_off = _exclusive_cumsum(_shingle_counts(ntok, ngram, np), np)
    out = np.empty(int(out_off[-1]), dtype=np.uint64)
    _h_shingles(tok, tok_off, ngram, _poly_top(ngram), out, out_off)
    return out, out_off, np.flatnonzero(ntok < 0)


def splice_host_docs(
    hashes: np.ndarray,
    offsets: np.ndarray,
    host_docs: np.ndarray,
    texts: Any,
    ngram: int,
    kind: ShingleKind,
    normalization: str | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Put the host reference's shingles of ``host_docs`` (``texts``: their pandas text)."""
    from curator_dask.dedup.minhash import _splice

    if len(host_docs) == 0:
        return hashes, offsets
    fb_hashes, fb_offsets = shingle_hashes(texts, ngram, kind, normalization)
    return _splice(hashes, offsets, host_docs.astype(np.int64), fb_hashes, fb_offsets)


# -- device: the same per-document functions, compiled by numba.cuda -----------------------
_DEVICE: dict[str, Any] = {}


def _device_kernels() -> dict[str, Any]:
    if _DEVICE:
        return _DEVICE
    from numba import cuda

    d_count_doc = cuda.jit(device=True)(_doc_count)
    d_tokens_doc = cuda.jit(device=True)(_doc_tokens)
    d_shingles_doc = cuda.jit(device=True)(_doc_shingles)

    @cuda.jit
    def count(units, offsets, kind, raw, ntok):  # pragma: no cover - device
        i = cuda.grid(1)
        if i < ntok.size:
            ntok[i] = d_count_doc(units, offsets[i], offsets[i + 1], kind, raw)

    @cuda.jit
    def tokens(units, offsets, kind, tok, tok_off, ntok):  # pragma: no cover - device
        i = cuda.grid(1)
        if i < ntok.size and ntok[i] > 0:
            d_tokens_doc(units, offsets[i], offsets[i + 1], kind, tok, tok_off[i])

    @cuda.jit
    def shingles(tok, tok_off, ngram, top, out, out_off):  # pragma: no cover - device
        i = cuda.grid(1)
        if i < tok_off.size - 1:
            t0 = tok_off[i]
            d_shingles_doc(tok, t0, tok_off[i + 1] - t0, ngram, top, out, out_off[i])

    _DEVICE.update(count=count, tokens=tokens, shingles=shingles)
    return _DEVICE


def device_shingle_hashes(
    text: Any, ngram: int, kind: ShingleKind = "word", normalization: str | None = None
) -> tuple[Any, Any]:
    """Shingle hashes of a cudf string Series on its GPU: ``(hashes, offsets)`` as CuPy arrays.

    Equal, bit for bit, to :func:`~curator_dask.dedup.minhash.shingle_hashes` of the same
    text on the host. Documents the device leaves to the host (non-ASCII words under the
    ``"simple"`` normalisation) are copied over, hashed there and spliced back.
    """
    import cupy

    code, raw = _kind(kind, normalization)
    k = _device_kernels()
    text = text.fillna("")
    n = len(text)
    units = cupy.asarray(text.str.code_points().values).view(cupy.uint32)
    offsets = _exclusive_cumsum(cupy.asarray(text.str.len().values, dtype=cupy.int64), cupy)
    threads = 128
    blocks = max(1, (n + threads - 1) // threads)
    ntok = cupy.empty(n, dtype=cupy.int64)
    with warnings.catch_warnings():
        # a small partition is a small grid: numba-cuda's occupancy note says nothing a
        # user can act on (and a test suite that turns warnings into errors would fail)
        warnings.filterwarnings("ignore", message=".*under-utilization.*")
        k["count"][blocks, threads](units, offsets, code, raw, ntok)
        tok_off = _exclusive_cumsum(cupy.maximum(ntok, 0), cupy)
        tok = cupy.empty(int(tok_off[-1]), dtype=cupy.uint64)
        k["tokens"][blocks, threads](units, offsets, code, tok, tok_off, ntok)
        out_off = _exclusive_cumsum(_shingle_counts(ntok, ngram, cupy), cupy)
        out = cupy.empty(int(out_off[-1]), dtype=cupy.uint64)
        k["shingles"][blocks, threads](tok, tok_off, ngram, _poly_top(ngram), out, out_off)
    host_docs = cupy.asnumpy(cupy.flatnonzero(ntok < 0))
    if len(host_docs) == 0:
        return out, out_off
    texts = text.iloc[host_docs].to_pandas()
    hashes, offsets_h = splice_host_docs(
        cupy.asnumpy(out), cupy.asnumpy(out_off), host_docs, texts, ngram, kind, normalization
    )
    return cupy.asarray(hashes), cupy.asarray(offsets_h)
