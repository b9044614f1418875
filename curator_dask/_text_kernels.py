"""Numba kernels behind :mod:`curator_dask.text`'s per-document measures.

They read an Arrow string array as it is laid out in memory (``offsets``: int64 byte
offsets, ``data``: the UTF-8 bytes) and decode code points themselves. Character classes
come from ``flags``, one byte per code point, built in :mod:`curator_dask.text` from the
same engines the vectorised kernels use (RE2 classes, Python's whitespace), so both give
identical results. Repeats (lines, paragraphs, words, n-grams) are found with open
addressing tables that compare the bytes on every hash match: exact, never probabilistic.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from curator_dask._kernels import KERNEL_OPT, helper, share_compiles

# Bits of the per-code-point flags table.
WS = 1
LETTER = 2
ALNUM = 4
DIGIT = 8
ENDMARK = 16
BULLET = 32
PAREN = 64
NUM_FLAGS_CP = 0x110000

# Columns of document_stats' output, in order.
DOC_COLUMNS = (
    "chars",
    "whitespace",
    "alnum",
    "digits",
    "words",
    "letter_words",
    "longest_word",
    "parentheses",
    "symbols",
    "url_chars",
    "lines",
    "unique_lines",
    "line_chars",
    "unique_line_chars",
    "lines_without_endmark",
    "lines_with_ellipsis",
    "bullet_lines",
    "paragraphs",
    "unique_paragraphs",
    "paragraph_chars",
    "unique_paragraph_chars",
)

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


@nb.njit(cache=True, inline="always")
def _fmix(h):  # type: ignore[no-untyped-def]
    h = h ^ (h >> np.uint64(30))
    h = h * _M2
    h = h ^ (h >> np.uint64(27))
    h = h * _M3
    return h ^ (h >> np.uint64(31))


@nb.njit(cache=True, inline="always")
def _rotl(h, r):  # type: ignore[no-untyped-def]
    return (h << np.uint64(r)) | (h >> np.uint64(64 - r))


@nb.njit(cache=True, inline="always")
def _load(data, words, i, k):  # type: ignore[no-untyped-def]
    """``k`` (1..8) bytes from ``data[i]`` as a little-endian uint64 (unaligned read)."""
    q = i >> 3
    r = i & 7
    if q + 1 < len(words):
        w = words[q] >> np.uint64(8 * r)
        if r:
            w |= words[q + 1] << np.uint64(64 - 8 * r)
    else:
        w = np.uint64(0)
        for j in range(k):
            w |= np.uint64(data[i + j]) << np.uint64(8 * j)
        return w
    if k < 8:
        w &= (np.uint64(1) << np.uint64(8 * k)) - np.uint64(1)
    return w


@helper
def hash_bytes(data, words, s, e):  # type: ignore[no-untyped-def]
    """64-bit hash of ``data[s:e]`` (``words``: ``data`` viewed as uint64)."""
    h = np.uint64(e - s) * _M1
    i = s
    while i + 8 <= e:
        h = _rotl(h ^ _load(data, words, i, 8), 27) * _M1
        i += 8
    if i < e:
        h ^= _load(data, words, i, e - i)
    return _fmix(h)


@nb.njit(cache=True)
def doc_hashes(offsets, data, words):  # type: ignore[no-untyped-def]
    """Two independent 64-bit hashes of every document's bytes.

    ``words`` is ``data`` viewed as uint64: a document is read eight bytes per step
    wherever it starts (the hashes depend on the bytes only), two chains in one pass.
    """
    n = len(offsets) - 1
    h1 = np.empty(n, np.uint64)
    h2 = np.empty(n, np.uint64)
    nw = len(words)
    for d in range(n):
        s = offsets[d]
        e = offsets[d + 1]
        a = np.uint64(e - s) * _M1
        b = np.uint64(e - s) * _M2 + _M3
        q = s >> 3
        r = s & 7
        i = s
        if r == 0:
            while i + 8 <= e and q < nw:
                w = words[q]
                a = _rotl(a ^ w, 27) * _M1
                b = _rotl(b ^ w, 31) * _M3
                q += 1
                i += 8
        else:
            lo_shift = np.uint64(8 * r)
            hi_shift = np.uint64(64 - 8 * r)
            lo = words[q] if q < nw else np.uint64(0)
            while i + 8 <= e and q + 1 < nw:
                hi = words[q + 1]
                w = (lo >> lo_shift) | (hi << hi_shift)
                a = _rotl(a ^ w, 27) * _M1
                b = _rotl(b ^ w, 31) * _M3
                lo = hi
                q += 1
                i += 8
        while i + 8 <= e:  # the end of the buffer, outside the uint64 view
            w = np.uint64(0)
            for k in range(8):
                w |= np.uint64(data[i + k]) << np.uint64(8 * k)
            a = _rotl(a ^ w, 27) * _M1
            b = _rotl(b ^ w, 31) * _M3
            i += 8
        if i < e:
            w = np.uint64(0)
            k = 0
            while i < e:
                w |= np.uint64(data[i]) << np.uint64(8 * k)
                i += 1
                k += 1
            a = (a ^ w) * _M1
            b = (b ^ w) * _M3
        h1[d] = _fmix(a)
        h2[d] = _fmix(b ^ _M2)
    return h1, h2


@nb.njit(cache=True, inline="always")
def _decode(data, i):  # type: ignore[no-untyped-def]
    b = np.int64(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return (
            ((b & 0x0F) << 12)
            | ((np.int64(data[i + 1]) & 0x3F) << 6)
            | (np.int64(data[i + 2]) & 0x3F)
        ), 3
    return (
        ((b & 0x07) << 18)
        | ((np.int64(data[i + 1]) & 0x3F) << 12)
        | ((np.int64(data[i + 2]) & 0x3F) << 6)
        | (np.int64(data[i + 3]) & 0x3F)
    ), 4


@helper
def _decode_call(data, i):  # type: ignore[no-untyped-def]
    """:func:`_decode` as a call: for the sites off the per-character loops. Each inlined
    site is typed and compiled again (seconds of a first run's compile for all of them)."""
    return _decode(data, i)


@nb.njit(cache=True, inline="always")
def _prev_start(data, j):  # type: ignore[no-untyped-def]
    """Start byte of the code point that ends just before byte ``j``."""
    j -= 1
    while (data[j] & 0xC0) == 0x80:
        j -= 1
    return j


@nb.njit(cache=True, inline="always")
def _cps(data, s, e):  # type: ignore[no-untyped-def]
    """Number of code points in ``data[s:e]``."""
    c = 0
    for i in range(s, e):
        if (data[i] & 0xC0) != 0x80:
            c += 1
    return c


@helper  # once per line: a call, not inlined (see _decode_call)
def _strip(data, flags, s, e):  # type: ignore[no-untyped-def]
    """``data[s:e]`` without its leading and trailing whitespace. ASCII ends are read in
    place; others through :func:`_decode_call` (two inlined decoders here were a third of
    ``_strip``'s compile, for the rare non-ASCII end)."""
    while s < e:
        cp = np.int64(data[s])
        k = 1
        if cp >= 0x80:
            cp, k = _decode_call(data, s)
        if not flags[cp] & WS:
            break
        s += k
    while e > s:
        j = e - 1
        cp = np.int64(data[j])
        if cp >= 0x80:
            j = _prev_start(data, e)
            cp, _ = _decode_call(data, j)
        if not flags[cp] & WS:
            break
        e = j
    return s, e


@nb.njit(cache=True, inline="always")
def _same(data, s1, e1, s2, e2):  # type: ignore[no-untyped-def]
    if e1 - s1 != e2 - s2:
        return False
    for k in range(e1 - s1):  # noqa: SIM110 (a loop numba compiles; no generator)
        if data[s1 + k] != data[s2 + k]:
            return False
    return True


@helper
def _intern_range(data, words, s, e, stamp, gen, starts, ends, ids, mask, next_id):  # type: ignore[no-untyped-def]
    """Id of the byte string ``data[s:e]`` in a table; a new id (``next_id``) if unseen.

    Callers start their count at ``np.int64(0)``, not ``0``: numba types a call first with
    the arguments' types as they are then, and a count still typed as the literal ``0``
    compiles a second copy of the helper for a ``Literal[int](0)`` argument (half a second
    of a fresh machine's compile per helper and caller).
    """
    slot = np.int64(hash_bytes(data, words, s, e) & np.uint64(mask))
    while stamp[slot] == gen:
        if _same(data, s, e, starts[slot], ends[slot]):
            return ids[slot]
        slot = (slot + 1) & mask
    stamp[slot] = gen
    starts[slot] = s
    ends[slot] = e
    ids[slot] = next_id
    return next_id


def _ascii_word(text):  # type: ignore[no-untyped-def]
    """``text``'s bytes as a little-endian uint64 (up to 8 bytes)."""
    return np.uint64(int.from_bytes(text.encode("ascii"), "little"))


_HTTPS = _ascii_word("https://")
_HTTP = _ascii_word("http://")
_FTP = _ascii_word("ftp://")
_WWW = _ascii_word("www.")
_MASK7 = np.uint64((1 << 56) - 1)
_MASK6 = np.uint64((1 << 48) - 1)
_MASK4 = np.uint64((1 << 32) - 1)


@helper
def _url_prefix(data, i, e):  # type: ignore[no-untyped-def]
    """Bytes of ``https://``, ``http://``, ``ftp://`` or ``www.`` starting at ``i`` (0: none).

    The next (up to) 8 bytes as one word, compared with each prefix under a mask: a byte
    past ``e`` reads as 0, which no prefix holds. Compiles in a fraction of the time of a
    comparison per byte (each one typed and lowered apart).
    """
    w = np.uint64(0)
    for j in range(min(8, e - i)):
        w |= np.uint64(data[i + j]) << np.uint64(8 * j)
    if w == _HTTPS:
        return 8
    if w & _MASK7 == _HTTP:
        return 7
    if w & _MASK6 == _FTP:
        return 6
    if w & _MASK4 == _WWW:
        return 4
    return 0


@helper
def _table_size(items):  # type: ignore[no-untyped-def]
    size = 16
    while size < 2 * items:
        size *= 2
    return size


@nb.njit(cache=True)
def word_counts(offsets, data, flags):  # type: ignore[no-untyped-def]
    """Words of every document (``document_stats``' ``words``), in one cheap pass."""
    n = len(offsets) - 1
    out = np.zeros(n, np.int64)
    for d in range(n):
        i = offsets[d]
        e = offsets[d + 1]
        words = 0
        in_word = False
        while i < e:
            b = data[i]
            if b < 0x80:
                space = flags[b] & WS
                i += 1
            else:
                cp, k = _decode(data, i)
                space = flags[cp] & WS
                i += k
            if space:
                in_word = False
            elif not in_word:
                in_word = True
                words += 1
        out[d] = words
    return out


@nb.njit(cache=True)
def document_stats(offsets, data, words, flags):  # type: ignore[no-untyped-def]
    """Character, word, line and paragraph counts of every document (see DOC_COLUMNS),
    row after row: ``out.reshape(n, len(DOC_COLUMNS))`` is the table.

    Flat, not 2-D: the 2-D ``np.zeros`` overload is one more compile on a fresh machine
    (half a second) for the same bytes.
    """
    n = len(offsets) - 1
    out = np.zeros(n * 21, np.int64)
    size = 16
    stamp = np.zeros(size, np.int64)
    starts = np.zeros(size, np.int64)
    ends = np.zeros(size, np.int64)
    ids = np.zeros(size, np.int64)
    p_starts = np.zeros(size, np.int64)
    p_ends = np.zeros(size, np.int64)
    gen = 0
    for d in range(n):
        s = offsets[d]
        e = offsets[d + 1]
        # -- characters and words ---------------------------------------------------
        chars = 0
        ws = 0
        alnum = 0
        digits = 0
        n_words = 0
        letter_words = 0
        longest = 0
        parens = 0
        symbols = 0
        url_chars = 0
        url_end = s
        dots = 0
        in_word = False
        word_len = 0
        word_letter = False
        newlines = 0
        i = s
        while i < e:
            cp, k = _decode(data, i)
            f = flags[cp]
            chars += 1
            if cp == 10:
                newlines += 1
            if f & WS:
                ws += 1
                if in_word:
                    in_word = False
                    if word_len > longest:
                        longest = word_len
                    if word_letter:
                        letter_words += 1
            else:
                if not in_word:
                    in_word = True
                    n_words += 1
                    word_len = 0
                    word_letter = False
                word_len += 1
                if f & LETTER:
                    word_letter = True
            if f & ALNUM:
                alnum += 1
            if f & DIGIT:
                digits += 1
            if f & PAREN:
                parens += 1
            if cp == 46:
                dots += 1
            else:
                symbols += dots // 3
                dots = 0
                if cp == 35 or cp == 0x2026:
                    symbols += 1
            if i >= url_end and (cp == 104 or cp == 102 or cp == 119):
                p = _url_prefix(data, i, e)
                if p and i + p < e:
                    ncp, _ = _decode_call(data, i + p)
                    if not flags[ncp] & WS:
                        j = i
                        while j < e:
                            c2, k2 = _decode_call(data, j)
                            if flags[c2] & WS:
                                break
                            url_chars += 1
                            j += k2
                        url_end = j
            i += k
        symbols += dots // 3
        if in_word:
            if word_len > longest:
                longest = word_len
            if word_letter:
                letter_words += 1
        # -- lines and paragraphs ------------------------------------------------------
        need = _table_size(2 * (newlines + 1))
        if need > size:
            size = need
            stamp = np.zeros(size, np.int64)
            starts = np.zeros(size, np.int64)
            ends = np.zeros(size, np.int64)
            ids = np.zeros(size, np.int64)
            p_starts = np.zeros(size, np.int64)
            p_ends = np.zeros(size, np.int64)
            gen = 0
        mask = size - 1
        gen += 1
        lines = 0
        unique_lines = 0
        line_chars = 0
        unique_line_chars = 0
        no_end = 0
        ellipsis = 0
        bullets = 0
        paras = 0
        next_id = np.int64(0)  # not 0: see _intern_range
        in_para = False
        ls = s
        while ls <= e:
            le = ls
            while le < e and data[le] != 10:
                le += 1
            a, b = _strip(data, flags, ls, le)
            if a < b:
                lines += 1
                nc = _cps(data, a, b)
                line_chars += nc
                got = _intern_range(data, words, a, b, stamp, gen, starts, ends, ids, mask, next_id)
                if got == next_id:
                    next_id += 1
                    unique_lines += 1
                    unique_line_chars += nc
                first, _ = _decode_call(data, a)
                last, _ = _decode_call(data, _prev_start(data, b))
                if not flags[last] & ENDMARK:
                    no_end += 1
                if last == 0x2026 or (
                    b - a >= 3 and data[b - 1] == 46 and data[b - 2] == 46 and data[b - 3] == 46
                ):
                    ellipsis += 1
                if flags[first] & BULLET:
                    bullets += 1
                elif first == 45 or first == 42 or first == 43:
                    if a + 1 == b:
                        bullets += 1
                    else:
                        c2, _ = _decode_call(data, a + 1)
                        if flags[c2] & WS:
                            bullets += 1
                # A paragraph is a run of non-blank lines, stripped as a whole.
                if not in_para:
                    in_para = True
                    p_starts[paras] = a
                    paras += 1
                p_ends[paras - 1] = b
            else:
                in_para = False
            ls = le + 1
        gen += 1
        next_id = np.int64(0)
        unique_paras = 0
        para_chars = 0
        unique_para_chars = 0
        for p in range(paras):
            a = p_starts[p]
            b = p_ends[p]
            nc = _cps(data, a, b)
            para_chars += nc
            got = _intern_range(data, words, a, b, stamp, gen, starts, ends, ids, mask, next_id)
            if got == next_id:
                next_id += 1
                unique_paras += 1
                unique_para_chars += nc
        r = 21 * d
        out[r] = chars
        out[r + 1] = ws
        out[r + 2] = alnum
        out[r + 3] = digits
        out[r + 4] = n_words
        out[r + 5] = letter_words
        out[r + 6] = longest
        out[r + 7] = parens
        out[r + 8] = symbols
        out[r + 9] = url_chars
        out[r + 10] = lines
        out[r + 11] = unique_lines
        out[r + 12] = line_chars
        out[r + 13] = unique_line_chars
        out[r + 14] = no_end
        out[r + 15] = ellipsis
        out[r + 16] = bullets
        out[r + 17] = paras
        out[r + 18] = unique_paras
        out[r + 19] = para_chars
        out[r + 20] = unique_para_chars
    return out


@helper
def _intern_key(key, stamp, gen, keys, ids, mask, next_id):  # type: ignore[no-untyped-def]
    slot = np.int64(_fmix(np.uint64(key)) & np.uint64(mask))
    while stamp[slot] == gen:
        if keys[slot] == key:
            return ids[slot]
        slot = (slot + 1) & mask
    stamp[slot] = gen
    keys[slot] = key
    ids[slot] = next_id
    return next_id


@nb.njit(cache=True)
def ngram_stats(offsets, data, words, flags, max_n):  # type: ignore[no-untyped-def]
    """Word n-gram repetition of every document, for n = 1 .. ``max_n``.

    Returns an int64 matrix, flat (row after row, ``1 + 2 * max_n`` columns: see
    :func:`document_stats`): column 0 holds the characters in words; for each n, column
    ``2n - 1`` holds count x characters of the most frequent repeated n-gram (ties: the
    longer) and column ``2n`` the characters of the words covered by repeated n-grams.
    N-gram keys are pairs of the ids of the two overlapping (n-1)-grams, so an n-gram
    can only repeat where both do: most positions are settled without a table lookup.
    """
    n_docs = len(offsets) - 1
    width = 1 + 2 * max_n
    out = np.zeros(n_docs * width, np.int64)
    cap = 16
    w_start = np.zeros(cap, np.int64)
    w_end = np.zeros(cap, np.int64)
    w_len = np.zeros(cap, np.int64)
    cum = np.zeros(cap + 1, np.int64)
    prev = np.zeros(cap, np.int64)
    cur = np.zeros(cap, np.int64)
    cnt_prev = np.zeros(cap, np.int64)
    cnt_cur = np.zeros(cap, np.int64)
    size = 16
    stamp = np.zeros(size, np.int64)
    starts = np.zeros(size, np.int64)
    ends = np.zeros(size, np.int64)
    keys = np.zeros(size, np.int64)
    ids = np.zeros(size, np.int64)
    gen = 0
    for d in range(n_docs):
        s = offsets[d]
        e = offsets[d + 1]
        need = (e - s) // 2 + 2
        if need > cap:
            cap = need
            w_start = np.zeros(cap, np.int64)
            w_end = np.zeros(cap, np.int64)
            w_len = np.zeros(cap, np.int64)
            cum = np.zeros(cap + 1, np.int64)
            prev = np.zeros(cap, np.int64)
            cur = np.zeros(cap, np.int64)
            cnt_prev = np.zeros(cap, np.int64)
            cnt_cur = np.zeros(cap, np.int64)
        # Words: maximal runs of non-whitespace code points.
        m = 0
        in_word = False
        i = s
        while i < e:
            cp, k = _decode(data, i)
            if flags[cp] & WS:
                if in_word:
                    in_word = False
                    w_end[m - 1] = i
            else:
                if not in_word:
                    in_word = True
                    w_start[m] = i
                    w_len[m] = 0
                    m += 1
                w_len[m - 1] += 1
            i += k
        if in_word:
            w_end[m - 1] = e
        if m == 0:
            continue
        cum[0] = 0
        for j in range(m):
            cum[j + 1] = cum[j] + w_len[j]
        out[d * width] = cum[m]
        need = _table_size(m)
        if need > size:
            size = need
            stamp = np.zeros(size, np.int64)
            starts = np.zeros(size, np.int64)
            ends = np.zeros(size, np.int64)
            keys = np.zeros(size, np.int64)
            ids = np.zeros(size, np.int64)
            gen = 0
        mask = size - 1
        for n in range(1, max_n + 1):
            positions = m - n + 1
            if positions <= 0:
                break
            gen += 1
            next_id = np.int64(0)  # not 0: see _intern_range
            if n == 1:
                for j in range(m):
                    got = _intern_range(
                        data,
                        words,
                        w_start[j],
                        w_end[j],
                        stamp,
                        gen,
                        starts,
                        ends,
                        ids,
                        mask,
                        next_id,
                    )
                    if got == next_id:
                        cnt_cur[next_id] = 0
                        next_id += 1
                    cur[j] = got
                    cnt_cur[got] += 1
            else:
                for j in range(positions):
                    a = prev[j]
                    b = prev[j + 1]
                    if a < 0 or b < 0 or cnt_prev[a] < 2 or cnt_prev[b] < 2:
                        cur[j] = -1
                        continue
                    got = _intern_key(a * m + b, stamp, gen, keys, ids, mask, next_id)
                    if got == next_id:
                        cnt_cur[next_id] = 0
                        next_id += 1
                    cur[j] = got
                    cnt_cur[got] += 1
            best_count = 0
            best_chars = 0
            covered = 0
            cover_end = 0
            for j in range(m):
                if j < positions:
                    g = cur[j]
                    if g >= 0:
                        c = cnt_cur[g]
                        if c >= 2:
                            chars = cum[j + n] - cum[j]
                            if c > best_count or (c == best_count and chars > best_chars):
                                best_count = c
                                best_chars = chars
                            if j + n > cover_end:
                                cover_end = j + n
                if j < cover_end:
                    covered += w_len[j]
            out[d * width + 2 * n - 1] = best_count * best_chars
            out[d * width + 2 * n] = covered
            if best_count == 0:
                break  # no n-gram repeats, so no longer one does: the rest stay 0
            for j in range(positions):
                prev[j] = cur[j]
            for j in range(next_id):
                cnt_prev[j] = cnt_cur[j]
    return out


@nb.njit(cache=True)
def word_list_counts(offsets, data, strip, lower, k1s, k2s):  # type: ignore[no-untyped-def]
    """Occurrences per document of words in a set of ASCII words (at most 16 bytes).

    A word is lower-cased (``lower``: the ASCII byte a code point lower-cases to, or 0)
    after code points whose lower case is in the punctuation set (``strip``) are removed
    from both ends; the set is given as sorted pairs of little-endian packed bytes.
    """
    n = len(offsets) - 1
    out = np.zeros(n, np.int64)
    for d in range(n):
        s = offsets[d]
        e = offsets[d + 1]
        i = s
        count = 0
        while i < e:
            cp, k = _decode(data, i)
            if lower[cp] == 255:  # whitespace
                i += k
                continue
            ws_ = i
            while i < e:
                cp, k = _decode(data, i)
                if lower[cp] == 255:
                    break
                i += k
            a = ws_
            b = i
            # the ends' punctuation: a call to the decoder, not two more inlined copies
            # (once or twice a word; see _decode_call)
            while a < b:
                cp, k = _decode_call(data, a)
                if not strip[cp]:
                    break
                a += k
            while b > a:
                j = _prev_start(data, b)
                cp, _ = _decode_call(data, j)
                if not strip[cp]:
                    break
                b = j
            k1 = np.uint64(0)
            k2 = np.uint64(0)
            nbytes = 0
            ok = True
            p = a
            while p < b:
                cp, k = _decode(data, p)
                c = lower[cp]
                if c == 0 or nbytes >= 16:
                    ok = False
                    break
                if nbytes < 8:
                    k1 |= np.uint64(c) << np.uint64(8 * nbytes)
                else:
                    k2 |= np.uint64(c) << np.uint64(8 * (nbytes - 8))
                nbytes += 1
                p += k
            if not ok:
                continue
            lo = 0
            hi = len(k1s)
            while lo < hi:
                mid = (lo + hi) // 2
                if k1s[mid] < k1 or (k1s[mid] == k1 and k2s[mid] < k2):
                    lo = mid + 1
                else:
                    hi = mid
            if lo < len(k1s) and k1s[lo] == k1 and k2s[lo] == k2:
                count += 1
        out[d] = count
    return out


@nb.njit(cache=True)
def gather_strings(offsets, data, rows):  # type: ignore[no-untyped-def]
    """The offsets and bytes of strings ``rows`` of a string array, in one exact allocation.

    Arrow's own take/filter grow their output buffer by doubling, which for a large
    partition briefly holds up to twice the bytes it keeps; this sizes it first.
    """
    n = len(rows)
    out_offsets = np.empty(n + 1, np.int64)
    out_offsets[0] = 0
    for k in range(n):
        r = rows[k]
        out_offsets[k + 1] = out_offsets[k] + offsets[r + 1] - offsets[r]
    out = np.empty(out_offsets[n], np.uint8)
    for k in range(n):
        # a byte loop, not slice assignment (which compiles numba's general array setitem:
        # seconds of a first run's compile for nothing), on unsigned indices: a signed one
        # gets a wraparound check per byte that keeps LLVM from making the loop a copy
        # (1.4 ms instead of 0.06 ms for 1 MB)
        s = np.uint64(offsets[rows[k]])
        p = np.uint64(out_offsets[k])
        for j in range(np.uint64(out_offsets[k + 1]) - p):
            out[p + j] = data[s + j]
    return out_offsets, out


# Each kernel compiles once per machine, however many worker processes start at once.
share_compiles(globals(), opt=KERNEL_OPT)
