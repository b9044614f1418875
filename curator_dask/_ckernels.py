"""Kernels in C: compiled once per machine by the system's C compiler, no numba.

numba compiles each kernel on its first call on a machine: for the text kernels behind the
filters and exact dedup (``_text_kernels``), about 8 CPU-s of a fresh machine's first run
(``bench/bench_compile.py``), and again in every fresh container. Their C twins, and those
of some dedup kernels
(``csrc/*.c``, shipped in the package) build in well under a second into one shared library
in :func:`curator_dask.config.cache_dir`, named by a digest of the sources, the compiler and
the platform, so every process of the machine loads it and a change of any of them builds
anew. The build runs under the machine lock the numba kernels use (one process builds, the
others wait, then load) and counts as compile time (:func:`_kernels.compile_seconds`,
progress's "compiling kernels...").

``curator.c-kernels`` (``DASK_CURATOR__C_KERNELS``): ``auto`` (default) uses the library
where a compiler builds it (``$CC``, else ``cc``, ``gcc`` or ``clang`` on ``PATH``) and the
numba kernels otherwise, saying why once per process (log ``curator_dask``, warning);
``false`` always the numba kernels. Both give the same numbers: the numba kernels are the
reference (``tests/test_ckernels.py`` compares them on random and real text).

:func:`kernel` gives the kernel to call, C or numba, with the numba kernel's arguments and
results. The library's functions are called through :mod:`ctypes`, which releases the GIL
for the call: threads of a worker run them in parallel.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from curator_dask import _kernels

logger = logging.getLogger("curator_dask")

_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
#: How the library is built. ``-O2`` as numba's level for the kernels (``KERNEL_OPT``); no
#: ``-march=native``: the library may sit in a cache directory that machines of one
#: architecture share, and the kernels here are byte and integer loops that gain little from it.
CFLAGS = ("-O2", "-std=c99", "-fPIC", "-shared", "-fvisibility=default")
_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


def enabled() -> bool:
    """Whether ``curator.c-kernels`` lets the C kernels be used (read in this process)."""
    from curator_dask.config import get

    value = get("c-kernels", "auto")
    return value not in (False, "false", "False", "no", "off", 0, None)


def compiler() -> str | None:
    """The C compiler's path: ``$CC``, else ``cc``, ``gcc`` or ``clang`` on ``PATH``."""
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc.split()[0]) if cc.split() else None
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _sources() -> list[str]:
    return sorted(
        os.path.join(_SOURCES, f) for f in os.listdir(_SOURCES) if f.endswith((".c", ".h"))
    )


def _digest(cc: str) -> str:
    """What the library is named by: its sources, the compiler (its resolved path, size and
    time, so an upgraded compiler builds anew), the flags and the platform."""
    h = hashlib.sha256()
    for path in _sources():
        h.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(f.read())
    real = os.path.realpath(cc)
    st = os.stat(real)
    libc = ""
    with contextlib.suppress(ValueError, OSError, AttributeError):
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    for part in (real, str(st.st_size), str(st.st_mtime_ns), " ".join(CFLAGS)):
        h.update(part.encode() + b"\0")
    for part in (sys.platform, platform.machine(), libc):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def library() -> Any:
    """The loaded C library, built first where this machine has none; None where the C
    kernels are not to be used (``curator.c-kernels: false``) or cannot be built (said once
    per process)."""
    if not enabled():
        return None
    with _LOCK:
        if "lib" in _LOADED:
            return _LOADED["lib"]
        lib, why = _build_and_load()
        if lib is None:
            logger.warning("C kernels not used, numba's instead (same results): %s", why)
        _LOADED["lib"] = lib
        return lib


def _build_and_load() -> tuple[Any, str]:
    """``(library, "")``, or ``(None, why not)``."""
    cc = compiler()
    if cc is None:
        return None, "no C compiler ($CC, cc, gcc or clang on PATH)"
    name = f"libcurator_kernels-{_digest(cc)}.so"
    from curator_dask.config import cache_dir

    directory = cache_dir()
    if directory is None:  # no cache: built for this process, in a folder removed at exit
        directory = tempfile.mkdtemp(prefix="curator-dask-ckernels-")
        import atexit

        atexit.register(shutil.rmtree, directory, True)
    else:
        directory = os.path.join(directory, "ckernels")
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            return None, f"cannot create {directory}: {e}"
        with _kernels._machine_lock(name):  # one process builds; the others wait, then load
            failed = None if os.path.exists(path) else _build(cc, path)
        if failed:
            return None, failed
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        return None, f"cannot load {path}: {e}"
    _declare(lib)
    return lib, ""


def _build(cc: str, path: str) -> str | None:
    """Compile the sources into ``path`` (atomically: a temporary name, then renamed);
    why not, if it failed."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    sources = [p for p in _sources() if p.endswith(".c")]
    cmd = [cc, *CFLAGS, "-o", tmp, *sources]
    t0 = time.perf_counter()
    _kernels._say("start", "C kernels")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{os.path.basename(cc)} failed: {e}"
    finally:
        took = time.perf_counter() - t0
        _kernels._COMPILING.seconds = _kernels.compile_seconds() + took
        _kernels._say("end", "C kernels", took)
    if done.returncode != 0:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return f"{' '.join(cmd[:1] + list(CFLAGS))} ... exited {done.returncode}: " + " | ".join(
            tail
        )
    os.replace(tmp, path)
    return None


_P = ctypes.c_void_p
_I = ctypes.c_int64
_SIGNATURES = {
    "cdk_doc_hashes": (_P, _I, _P, _P, _P),
    "cdk_word_counts": (_P, _I, _P, _P, _P),
    "cdk_gather_strings": (_P, _P, _P, _I, _P, _P),
    "cdk_document_stats": (_P, _I, _P, _P, _P),
    "cdk_ngram_stats": (_P, _I, _P, _P, _I, _P),
    "cdk_word_list_counts": (_P, _I, _P, _P, _P, _P, _P, _I, _P),
    "cdk_band_hashes_u32": (_P, _I, _I, _I, _I, _I, _P),
    "cdk_band_hashes_u64": (_P, _I, _I, _I, _I, _I, _P),
    "cdk_member_set_hash": (_P, _P, _P, _I, _P),
    "cdk_verify_anchors": (_P, _P, _I, _P, _P, _P, ctypes.c_double, _I, _P, _P, _P),
    "cdk_unique_per_doc": (_P, _P, _I, _P, _P, _P),
    "cdk_union_into_i32": (_P, _P, _P, _I),
    "cdk_union_into_i64": (_P, _P, _P, _I),
    "cdk_flatten_i32": (_P, _I),
    "cdk_flatten_i64": (_P, _I),
}


def _declare(lib: Any) -> None:
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int


def _ok(rc: int) -> None:
    if rc:
        raise MemoryError("a C kernel could not allocate its working memory")


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _u8(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.bool_ and a.flags.c_contiguous:  # one byte each, 0 or 1: no copy
        return a.view(np.uint8)
    return np.ascontiguousarray(a, dtype=np.uint8)


def _u64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.uint64)


def _ptr(a: np.ndarray) -> int:
    """The address of ``a``'s data (C-contiguous). A writable, non-empty array's through a
    ctypes view of its buffer (0.9 µs against ``a.ctypes.data``'s 2), others' through the
    array interface (1.6 µs): every C kernel call takes several, and a small partition's
    call notices them."""
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))  # type: ignore[arg-type]
    return int(a.__array_interface__["data"][0])


# -- the kernels, with the numba kernels' arguments and results ---------------------------------
def _doc_hashes(lib: Any, offsets: Any, data: Any, words: Any) -> tuple[np.ndarray, np.ndarray]:
    offsets, data = _i64(offsets), _u8(data)
    n = len(offsets) - 1
    h1 = np.empty(n, np.uint64)
    h2 = np.empty(n, np.uint64)
    _ok(lib.cdk_doc_hashes(_ptr(offsets), n, _ptr(data), _ptr(h1), _ptr(h2)))
    return h1, h2


def _word_counts(lib: Any, offsets: Any, data: Any, flags: Any) -> np.ndarray:
    offsets, data, flags = _i64(offsets), _u8(data), _u8(flags)
    n = len(offsets) - 1
    out = np.empty(n, np.int64)
    _ok(lib.cdk_word_counts(_ptr(offsets), n, _ptr(data), _ptr(flags), _ptr(out)))
    return out


def _gather_strings(lib: Any, offsets: Any, data: Any, rows: Any) -> tuple[np.ndarray, np.ndarray]:
    offsets, data, rows = _i64(offsets), _u8(data), _i64(rows)
    n = len(rows)
    out_offsets = np.empty(n + 1, np.int64)
    out_offsets[0] = 0
    np.cumsum(offsets[rows + 1] - offsets[rows], out=out_offsets[1:])
    out = np.empty(int(out_offsets[n]), np.uint8)
    _ok(
        lib.cdk_gather_strings(
            _ptr(offsets),
            _ptr(data),
            _ptr(rows),
            n,
            _ptr(out_offsets),
            _ptr(out),
        )
    )
    return out_offsets, out


#: Columns of document_stats' rows: ``len(_text_kernels.DOC_COLUMNS)``, not imported here
#: (that module imports numba), and ``DOC_COLUMNS`` in ``csrc/document_stats.c``.
DOC_WIDTH = 21


def _document_stats(lib: Any, offsets: Any, data: Any, words: Any, flags: Any) -> np.ndarray:
    offsets, data, flags = _i64(offsets), _u8(data), _u8(flags)
    n = len(offsets) - 1
    out = np.empty(n * DOC_WIDTH, np.int64)
    _ok(lib.cdk_document_stats(_ptr(offsets), n, _ptr(data), _ptr(flags), _ptr(out)))
    return out


def _ngram_stats(
    lib: Any, offsets: Any, data: Any, words: Any, flags: Any, max_n: int
) -> np.ndarray:
    offsets, data, flags = _i64(offsets), _u8(data), _u8(flags)
    n = len(offsets) - 1
    max_n = int(max_n)
    out = np.zeros(n * (1 + 2 * max_n), np.int64)
    _ok(lib.cdk_ngram_stats(_ptr(offsets), n, _ptr(data), _ptr(flags), max_n, _ptr(out)))
    return out


def _word_list_counts(
    lib: Any, offsets: Any, data: Any, strip: Any, lower: Any, k1s: Any, k2s: Any
) -> np.ndarray:
    offsets, data, strip, lower = _i64(offsets), _u8(data), _u8(strip), _u8(lower)
    k1s, k2s = _u64(k1s), _u64(k2s)
    n = len(offsets) - 1
    out = np.empty(n, np.int64)
    _ok(
        lib.cdk_word_list_counts(
            _ptr(offsets),
            n,
            _ptr(data),
            _ptr(strip),
            _ptr(lower),
            _ptr(k1s),
            _ptr(k2s),
            len(k1s),
            _ptr(out),
        )
    )
    return out


def _band_hashes(
    lib: Any, sig: np.ndarray, num_bands: int, rows: int, first_band: int
) -> np.ndarray:
    """``lsh._band_hashes`` of uint32 or uint64 signatures (others go to numba's kernel:
    ``_ACCEPTS``); the caller checked the columns suffice."""
    fn = lib.cdk_band_hashes_u32 if sig.dtype == np.uint32 else lib.cdk_band_hashes_u64
    sig = np.ascontiguousarray(sig)
    n, num_bands = sig.shape[0], int(num_bands)
    out = np.empty((n, num_bands), np.uint64)
    _ok(fn(_ptr(sig), n, sig.shape[1], num_bands, int(rows), int(first_band), _ptr(out)))
    return out


def _member_set_hash(
    lib: Any, bucket: np.ndarray, uid: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """``lsh._member_set_hash`` (``bucket`` is not read: the rows are a bucket's already)."""
    uid, starts, ends = _i64(uid), _i64(starts), _i64(ends)
    out = np.empty(len(starts), np.uint64)
    _ok(lib.cdk_member_set_hash(_ptr(uid), _ptr(starts), _ptr(ends), len(starts), _ptr(out)))
    return out


def _verify_anchors(
    lib: Any,
    starts: np.ndarray,
    ends: np.ndarray,
    sets: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    threshold: float,
    max_anchors: int,
) -> tuple[np.ndarray, np.ndarray, int]:
    """``lsh._verify_anchors`` of uint64 sets and ``max_anchors >= 1`` (others go to numba's
    kernel: ``_ACCEPTS``). An edge joins two parts of its bucket: a bucket of
    ``k`` rows gives at most ``k - 1``, so the edges' arrays are allocated here."""
    starts, ends, lo, hi = _i64(starts), _i64(ends), _i64(lo), _i64(hi)
    sets = _u64(sets)
    cap = int(np.maximum(ends - starts - 1, 0).sum()) if len(starts) else 0
    out_a = np.empty(cap, np.int64)
    out_b = np.empty(cap, np.int64)
    counts = np.zeros(2, np.int64)
    _ok(
        lib.cdk_verify_anchors(
            _ptr(starts),
            _ptr(ends),
            len(starts),
            _ptr(sets),
            _ptr(lo),
            _ptr(hi),
            float(threshold),
            int(max_anchors),
            _ptr(out_a),
            _ptr(out_b),
            _ptr(counts),
        )
    )
    n_out = int(counts[0])
    return out_a[:n_out], out_b[:n_out], int(counts[1])


def _unique_per_doc(lib: Any, hashes: Any, offsets: Any) -> tuple[np.ndarray, np.ndarray]:
    hashes, offsets = _u64(hashes), _i64(offsets)
    n = len(offsets) - 1
    out = np.empty(len(hashes), np.uint64)
    out_off = np.zeros(n + 1, np.int64)
    pos = ctypes.c_int64(0)
    _ok(
        lib.cdk_unique_per_doc(
            _ptr(hashes), _ptr(offsets), n, _ptr(out), _ptr(out_off), ctypes.addressof(pos)
        )
    )
    return out[: pos.value], out_off


def _parent(parent: Any) -> bool:
    """Whether a union-find's parent array is int32 (else int64): it is updated in place, so
    it must be one of those (what components.py makes), C-contiguous and writable."""
    if not isinstance(parent, np.ndarray) or parent.dtype not in (np.int32, np.int64):
        raise TypeError(f"a parent array of int32 or int64 is needed, not {type(parent)}")
    if not (parent.flags.c_contiguous and parent.flags.writeable):
        raise TypeError("the parent array must be C-contiguous and writable")
    return bool(parent.dtype == np.int32)


def _union_into(lib: Any, parent: np.ndarray, a: Any, b: Any) -> None:
    fn = lib.cdk_union_into_i32 if _parent(parent) else lib.cdk_union_into_i64
    a = np.ascontiguousarray(a, dtype=parent.dtype)
    b = np.ascontiguousarray(b, dtype=parent.dtype)
    if len(a) != len(b):
        raise ValueError(f"{len(a)} first and {len(b)} second vertices")
    _ok(fn(_ptr(parent), _ptr(a), _ptr(b), len(a)))


def _flatten(lib: Any, parent: np.ndarray) -> None:
    fn = lib.cdk_flatten_i32 if _parent(parent) else lib.cdk_flatten_i64
    _ok(fn(_ptr(parent), len(parent)))


_C_KERNELS: dict[str, Callable[..., Any]] = {
    "doc_hashes": _doc_hashes,
    "word_counts": _word_counts,
    "gather_strings": _gather_strings,
    "document_stats": _document_stats,
    "ngram_stats": _ngram_stats,
    "word_list_counts": _word_list_counts,
    "lsh.band_hashes": _band_hashes,
    "lsh.member_set_hash": _member_set_hash,
    "lsh.verify_anchors": _verify_anchors,
    "minhash.unique_per_doc": _unique_per_doc,
    "components.union_into": _union_into,
    "components.flatten": _flatten,
}


#: The arguments a C twin takes, where it takes fewer than its numba kernel (``kernel``
#: gives the numba kernel the others).
_ACCEPTS: dict[str, Callable[..., bool]] = {
    "lsh.band_hashes": lambda sig, *_: sig.dtype in (np.uint32, np.uint64),
    "lsh.verify_anchors": lambda s, e, sets, lo, hi, t, anchors: (
        sets.dtype == np.uint64 and anchors >= 1
    ),
}


def kernel(name: str, numba_kernel: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """The kernel ``name`` to call: its C twin where the library is available (and takes
    the arguments, ``_ACCEPTS``), else ``numba_kernel`` (default: ``_text_kernels``' kernel
    of that name), with the same arguments and results."""
    if numba_kernel is None:
        from curator_dask import _text_kernels

        numba_kernel = getattr(_text_kernels, name)
    lib = library()
    c = _C_KERNELS.get(name)
    if lib is None or c is None:
        return numba_kernel  # type: ignore[return-value]
    twin = functools.partial(c, lib)
    accepts = _ACCEPTS.get(name)
    if accepts is None:
        return twin
    numba_kernel_ = numba_kernel

    def either(*args: Any) -> Any:
        return twin(*args) if accepts(*args) else numba_kernel_(*args)

    return either
