"""Numba kernels compile once per machine, not once per worker process.

A kernel compiles on its first call (lazily: only what a run uses) and numba caches the
machine code on disk (``cache=True``: next to the module, or numba's user cache directory),
so later processes load it. But worker processes that start together each find no cache
and each compile the same kernel: N workers, N compiles. :func:`share_compiles` puts a lock
that this machine's processes share (a file under :func:`curator_dask.config.cache_dir`)
around each kernel's compile: the first process compiles and writes the cache, the others
wait and then load it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

_DEPTH = threading.local()


def share_compiles(namespace: dict[str, Any]) -> None:
    """Make the cached numba kernels among ``namespace``'s values compile once per machine.

    Call at the end of a module that defines kernels: ``share_compiles(globals())``.
    """
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    for obj in list(namespace.values()):
        if (
            isinstance(obj, CPUDispatcher)
            and not isinstance(obj._cache, NullCache)
            and not getattr(obj.compile, "_curator_shared", False)
        ):
            obj.compile = _locked(obj, obj.compile)


def _locked(dispatcher: Any, compile_: Callable[[Any], Any]) -> Callable[[Any], Any]:
    name = f"{dispatcher.py_func.__module__}.{dispatcher.py_func.__qualname__}"

    @functools.wraps(compile_)
    def compile(sig: Any) -> Any:
        depth = getattr(_DEPTH, "n", 0)
        # Only the outermost compile of a thread waits: one nested in another kernel's
        # compile runs under numba's process-wide lock, and waiting there could deadlock.
        if depth or _compiled(dispatcher, sig):
            return compile_(sig)
        _DEPTH.n = depth + 1
        try:
            with _machine_lock(name):
                return compile_(sig)  # loads what another process cached meanwhile
        finally:
            _DEPTH.n = depth

    compile._curator_shared = True  # type: ignore[attr-defined]
    return compile


def _compiled(dispatcher: Any, sig: Any) -> bool:
    from numba.core import sigutils

    try:
        args, _ = sigutils.normalize_signature(sig)
    except Exception:
        return False
    return tuple(args) in dispatcher.overloads


@contextlib.contextmanager
def _machine_lock(name: str) -> Iterator[None]:
    """An exclusive lock on ``name`` among this machine's processes (none where unsupported)."""
    from curator_dask.config import cache_dir

    directory = cache_dir()
    try:
        import fcntl
    except ImportError:  # not POSIX: each process compiles
        fcntl = None  # type: ignore[assignment]
    handle = None
    if directory is not None and fcntl is not None:
        try:
            locks = os.path.join(directory, "locks")
            os.makedirs(locks, exist_ok=True)
            handle = open(os.path.join(locks, f"{name}.lock"), "a")  # noqa: SIM115
            fcntl.flock(handle, fcntl.LOCK_EX)  # released by the OS if this process dies
        except OSError:
            if handle is not None:
                handle.close()
            handle = None
    try:
        yield
    finally:
        if handle is not None:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
