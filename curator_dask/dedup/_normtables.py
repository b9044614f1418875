"""Per-code-point tables that let numba apply the ``"simple"`` normalisation to UTF-8 bytes.

The reference is ``re.sub(r"[\\W_]+", " ", unicodedata.normalize("NFKC", t).lower())``. For
word shingles only the tokens matter: the maximal runs of word characters of
``lower(NFKC(t))``. The tables give, for every code point ``c``, the UTF-8 bytes of
``lower(NFKC(c))`` with every non-word character written as one space, and a class that says
when the concatenation of these per-code-point outputs has the reference's tokens:

- ``PLAIN``: the first character of ``NFKD(c)`` is a starter (canonical combining class 0)
  that is never the second character of a canonical composition, so NFKC never combines
  ``c`` with what precedes it, and a following starter of this kind never combines with
  ``c``; or ``NFKD(c)`` holds only non-starters that never compose. Canonical reordering
  only permutes non-starters, and every non-starter this class can emit is a non-word
  character (a token boundary), so reordering never changes the tokens.
- ``SECOND`` / ``SECOND0``: ``c`` has no decomposition and is the second character of some
  canonical composition (a combining accent, a Hangul vowel or trailing consonant, an Indic
  length mark; ``SECOND0`` for those of class 0). It is safe unless the last starter before
  it (for ``SECOND0``: immediately before it) forms a composition pair with it; the kernel
  checks that pair in ``pairs`` (blocking is ignored, so the check is conservative). After
  a code point whose decomposition ends in non-starters, reordering can put a non-starter
  ``SECOND`` between them and compose it with an intermediate (``U+1F80 U+0301`` ->
  ``U+1F84``): there the kernel looks the code point and the mark up in ``tail_pairs``, the
  pairs whose NFKC is not the concatenation, found by trying them all. Marks in between
  only block compositions, never enable one.
- ``SIGMA``: ``NFKC(c)`` is the capital sigma, whose lower case is final (U+03C2) or not
  (U+03C3) by the characters around it (CPython's ``handle_capital_sigma``); the kernel
  applies that rule with ``sigma_back`` and ``sigma_fwd``, what each neighbouring code
  point's NFKC shows to the rule's backward and forward scans.
- ``UNSAFE``: anything else (a non-starter word character; code points from U+40000 on;
  surrogates).
  A document holding one goes through the Python reference.

The tables depend on the interpreter's :mod:`unicodedata` and on this module's code. They are
built once per machine (about a second of CPU), lazily, on the first call, and saved in
:func:`curator_dask.config.cache_dir` under a name that digests both, so every later process
on that machine loads them (milliseconds) and a new Python, Unicode version or builder never
reads a stale file. Without a usable cache directory each process builds them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import sys
import tempfile
import threading
import unicodedata
import zipfile
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

UNSAFE, PLAIN, SECOND, SECOND0, SIGMA = 0, 1, 2, 3, 4
# how a code point's NFKC looks to Python's final-sigma rule, scanning away from the sigma:
# its first character that is not case-ignorable is cased / not cased; all are ignorable;
# unknown (a non-starter that is not case-ignorable: mark reordering could move it)
CASED, NOT_CASED, IGNORABLE, UNKNOWN = 1, 0, 2, 3
N_CODE_POINTS = 0x40000  # planes 0-3; later planes are unassigned or private use
_WORD = re.compile(r"[^\W_]")
_SIGMA = "\u03a3"
_S_BASE, _L_BASE, _V_BASE, _T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
_L_COUNT, _V_COUNT, _T_COUNT = 19, 21, 28


class NormTables(NamedTuple):
    """Arrays indexed by code point (``N_CODE_POINTS`` entries, ``out_off`` one more)."""

    cls: np.ndarray  # uint8 class
    out_off: np.ndarray  # int32 offsets of each code point's output into out_data
    out_data: np.ndarray  # uint8: UTF-8 of the word characters, 0x20 for a non-word one
    last_starter: np.ndarray  # int32: the last starter of NFKC(c), -1 when none
    ends_starter: np.ndarray  # bool: NFKC(c) ends with a starter
    tail_marks: np.ndarray  # bool: NFKD(c) has non-starters after its last starter
    pairs: np.ndarray  # sorted int64 keys (first << 21) | second of every composition
    tail_pairs: np.ndarray  # keys (c << 21) | s where NFKC(c + s) != NFKC(c) + s, c tailed
    sigma_back: np.ndarray  # int8 CASED/NOT_CASED/IGNORABLE/UNKNOWN, scanning backwards
    sigma_fwd: np.ndarray  # int8, the same scanning forwards
    max_tokens: int  # the most tokens one code point's output holds


def _composition_pairs() -> tuple[set[int], list[int]]:
    seconds: set[int] = set()
    keys: list[int] = []
    for cp in range(N_CODE_POINTS):  # no character from U+30000 on has a decomposition
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2:
                first, second = int(parts[0], 16), int(parts[1], 16)
                seconds.add(second)
                keys.append((first << 21) | second)
    # Hangul: L + V -> LV, LV + T -> LVT (algorithmic, not in the decomposition data)
    for v in range(_V_BASE, _V_BASE + _V_COUNT):
        seconds.add(v)
        keys.extend(((_L_BASE + li) << 21) | v for li in range(_L_COUNT))
    for t in range(_T_BASE + 1, _T_BASE + _T_COUNT):
        seconds.add(t)
        keys.extend(((_S_BASE + s * _T_COUNT) << 21) | t for s in range(_L_COUNT * _V_COUNT))
    return seconds, sorted(set(keys))


def _sigma_view(nfkc: str, ccc: Callable[[str], int]) -> tuple[int, int]:
    # Python's own lower() tells: a sigma after text ending in a cased letter is final
    if any(ccc(ch) and _sigma_stops(ch) for ch in nfkc):
        return UNKNOWN, UNKNOWN
    if (nfkc + _SIGMA).lower()[-1] == "ς":
        back = CASED
    elif ("A" + nfkc + _SIGMA).lower()[-1] == "ς":
        back = IGNORABLE
    else:
        back = NOT_CASED
    if ("A" + _SIGMA + nfkc + "A").lower()[1] == "ς":
        fwd = NOT_CASED
    elif ("A" + _SIGMA + nfkc).lower()[1] == "ς":
        fwd = IGNORABLE
    else:
        fwd = CASED
    return back, fwd


def _sigma_stops(ch: str) -> bool:
    """True when ``ch`` is not case-ignorable (the final-sigma scan stops there)."""
    return ("A" + ch + _SIGMA).lower()[-1] != "ς" or (ch + _SIGMA).lower()[-1] == "ς"


def _output(nfkc: str) -> bytes:
    return "".join(ch if _WORD.match(ch) else " " for ch in nfkc.lower()).encode("utf-8")


_LOCK = threading.Lock()


def norm_tables() -> NormTables:
    """Return the tables: loaded from this machine's cache, else built (and cached).

    Once per process; threads wait for the first call.
    """
    with _LOCK:
        return _load_or_build()


@functools.cache
def _load_or_build() -> NormTables:
    from curator_dask.config import cache_dir

    directory = cache_dir()
    if directory is None:
        return _build()
    path = os.path.join(directory, f"normtables-{_digest()}.npz")
    tables = _load(path)
    if tables is None:
        tables = _build()
        _save(tables._asdict(), path)
    return tables


def derived(name: str, code: bytes, build: Callable[[], tuple[np.ndarray, ...]]) -> tuple:
    """Arrays that ``build`` derives from the tables, cached beside them.

    Saved in :func:`curator_dask.config.cache_dir` under a name that digests the tables'
    own (:func:`_digest`) and ``code`` (the source of the code that derives them), so that,
    like the tables, they are built once per machine and loaded by every later process.
    Without a usable cache directory each process builds them.
    """
    from curator_dask.config import cache_dir

    directory = cache_dir()
    if directory is None:
        return build()
    key = hashlib.sha256(_digest().encode() + code).hexdigest()[:24]
    path = os.path.join(directory, f"{name}-{key}.npz")
    try:
        with np.load(path, allow_pickle=False) as f:
            return tuple(f[f"a{i}"] for i in range(len(f.files)))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        pass
    arrays = tuple(build())
    _save({f"a{i}": a for i, a in enumerate(arrays)}, path)
    return arrays


def _digest() -> str:
    """What the tables are built from: this module's code, the Python and its Unicode data."""
    h = hashlib.sha256()
    with open(__file__, "rb") as f:
        h.update(f.read())
    h.update(f"{sys.implementation.name} {sys.version} {unicodedata.unidata_version}".encode())
    return h.hexdigest()[:24]


def _load(path: str) -> NormTables | None:
    """The tables saved at ``path``; None when missing or unreadable (then rebuilt)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {name: f[name] for name in NormTables._fields}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if len(arrays["cls"]) != N_CODE_POINTS or len(arrays["out_off"]) != N_CODE_POINTS + 1:
        return None
    return NormTables(**{**arrays, "max_tokens": int(arrays["max_tokens"])})


def _save(arrays: dict[str, Any], path: str) -> None:
    """Write ``arrays`` to ``path`` atomically; a cache that cannot be written is skipped."""
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)  # readers see the old name or a whole file, never a part
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _build() -> NormTables:
    seconds, keys = _composition_pairs()
    n = N_CODE_POINTS
    cls = np.zeros(n, dtype=np.uint8)
    out_off = np.zeros(n + 1, dtype=np.int32)
    last_starter = np.full(n, -1, dtype=np.int32)
    ends_starter = np.zeros(n, dtype=np.bool_)
    tail_marks = np.zeros(n, dtype=np.bool_)
    sigma_back = np.full(n, UNKNOWN, dtype=np.int8)
    sigma_fwd = np.full(n, UNKNOWN, dtype=np.int8)
    chunks: list[bytes] = []
    pos = 0
    max_tokens = 1
    ccc = unicodedata.combining
    norm = unicodedata.normalize
    for cp in range(n):
        out_off[cp] = pos
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        nfkc = norm("NFKC", c)
        starters = [ch for ch in nfkc if not ccc(ch)]
        if starters:
            last_starter[cp] = ord(starters[-1])
        ends_starter[cp] = not ccc(nfkc[-1])
        d = norm("NFKD", c)
        tail_marks[cp] = bool(ccc(d[-1])) and any(not ccc(ch) for ch in d)
        sigma_back[cp], sigma_fwd[cp] = _sigma_view(nfkc, ccc)
        if nfkc == _SIGMA:
            cls[cp] = SIGMA
            continue
        if _SIGMA in nfkc or any(ccc(ch) and _WORD.match(ch) for ch in nfkc.lower()):
            continue
        first = ord(d[0])
        if d == c and cp in seconds:
            kind = SECOND0 if not ccc(c) else SECOND
        elif (not ccc(d[0]) and first not in seconds) or all(
            ccc(ch) and ord(ch) not in seconds for ch in d
        ):
            kind = PLAIN
        else:
            continue
        out = _output(nfkc)
        max_tokens = max(max_tokens, len(out.split()))
        cls[cp] = kind
        chunks.append(out)
        pos += len(out)
    out_off[n] = pos
    out_data = np.frombuffer(b"".join(chunks), dtype=np.uint8).copy()
    # a non-starter second character after a code point whose decomposition ends in
    # non-starters: tried directly, since reordering can compose it with an intermediate
    tail_keys = []
    for s in np.flatnonzero(cls == SECOND).tolist():
        for cp in np.flatnonzero(tail_marks).tolist():
            pre = norm("NFKC", chr(cp))
            if norm("NFKC", chr(cp) + chr(s)) != pre + chr(s):
                tail_keys.append((cp << 21) | s)
    return NormTables(
        cls,
        out_off,
        out_data,
        last_starter,
        ends_starter,
        tail_marks,
        np.array(keys, dtype=np.int64),
        np.array(sorted(tail_keys), dtype=np.int64),
        sigma_back,
        sigma_fwd,
        max_tokens,
    )
