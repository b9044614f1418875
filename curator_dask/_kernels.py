"""Numba kernels compile once per machine, not once per worker process.

A kernel compiles on its first call (lazily: only what a run uses) and numba caches the
machine code on disk (``cache=True``: next to the module, or numba's user cache directory),
so later processes load it. But worker processes that start together each find no cache
and each compile the same kernel: N workers, N compiles. :func:`share_compiles` puts a lock
that this machine's processes share (a file under :func:`curator_dask.config.cache_dir`)
around each kernel's compile: the first process compiles and writes the cache, the others
wait and then load it. A process loads a cached kernel without numba's set-up for compiling
(:func:`_lean_load`), which it does only when a kernel has to compile.

Compiling is accounted apart from the work: :func:`compile_seconds` is the time a thread
spent compiling kernels (numba's ``numba:compile`` events, the outermost of each thread,
and the waits on another process's compile), which :func:`curator_dask.stage.run_stage`
takes out of a stage's seconds; and each compile is said as it starts and ends to the
sinks of :func:`compile_sinks` in this process or, inside a distributed worker's task, as
an event on the ``COMPILE_TOPIC`` topic that a client's progress display follows.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

_DEPTH = threading.local()
#: Per thread: ``depth`` of nested compiles, ``seconds`` spent compiling, ``t0`` and
#: ``kernel`` of the outermost compile under way.
_COMPILING = threading.local()
_LISTENING: list[Any] = []
_LISTEN_LOCK = threading.Lock()
#: The distributed event topic of the compiles that workers say (``{"state": "start" or
#: "end", "kernel": name, "seconds": compile seconds at the end}``).
COMPILE_TOPIC = "curator-dask-compile"
#: Callables ``sink(state, kernel, seconds)`` told of every compile in this process.
_SINKS: list[Callable[[str, str, float], None]] = []


#: numba's LLVM optimisation level for this package's kernels (numba's default is 3; the
#: ``NUMBA_OPT`` environment variable, where set, wins). See :func:`share_compiles`.
KERNEL_OPT = 2


def share_compiles(namespace: dict[str, Any], opt: int | None = None) -> None:
    """Make the cached numba kernels among ``namespace``'s values compile once per machine.

    Call at the end of a module that defines kernels: ``share_compiles(globals())``. With
    ``opt`` (e.g. :data:`KERNEL_OPT`), each kernel and the helpers it calls compile at that
    LLVM optimisation level instead of numba's (``numba.config.OPT``, for the compile only,
    under numba's compiler lock), unless the environment sets ``NUMBA_OPT``.
    """
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    listen()
    for obj in list(namespace.values()):
        if (
            isinstance(obj, CPUDispatcher)
            and not isinstance(obj._cache, NullCache)
            and not getattr(obj.compile, "_curator_shared", False)
        ):
            obj.compile = _locked(obj, obj.compile, opt)
            obj._cache.load_overload = _lean_load(obj._cache)


def _lean_load(cache: Any) -> Callable[[Any, Any], Any]:
    """``cache.load_overload`` without numba's refresh of the target context.

    Before a cached kernel is loaded, numba refreshes its CPU target: it imports and installs
    every typing and lowering registry (``numba.cpython``, ``numba.np``, ``numba.typed``,
    cffi's C parser, ...) and compiles its runtime's LLVM module, which touches much of
    LLVM's optimiser and code generator. Loading machine code needs none of it (about
    0.2 CPU-s and 30 MB of a 2,000-document ``fuzzy-dedup``; ``bench/bench_fuzzy_cost.py``):
    the kernels' cached object code links its runtime helpers in (``NRT_incref`` and the
    like) and calls only the runtime's C functions, which :func:`_runtime_symbols` gives to
    LLVM as numba's ``rtsys.initialize`` would. A kernel not in the cache compiles as
    before, and numba's compiler refreshes the target then.
    """
    numba_load = cache.load_overload

    def load_overload(sig: Any, target_context: Any) -> Any:
        if not (_runtime_symbols() and hasattr(cache, "_load_overload")):
            return numba_load(sig, target_context)  # another numba: its own way
        with cache._guard_against_spurious_io_errors():
            return _load_cached(cache, sig, target_context)

    return load_overload  # type: ignore[no-any-return]


def _load_cached(cache: Any, sig: Any, target_context: Any) -> Any:
    """numba's ``cache._load_overload``, leaving two things it does until they are needed.

    - A kernel's cached data names the numba modules whose functions it inlined (the
      "environments" of ``np.empty``'s implementation, in ``numba.np.arrayobj``), and
      unpickling it imports them: ``numba.np.arrayobj`` brings ``numba.cpython.unicode``,
      ``charseq``, ``hashing`` and ``randomimpl`` (about 0.05 CPU-s and 4 MB). Machine code
      that was compiled in nopython mode never reads such a module's globals, so an
      environment of a numba module not imported yet is given its name and constants only
      (:func:`_environment`).
    - numba parses the LLVM bitcode stored beside each kernel's machine code, in case a
      later compile links against it, and reads the names of what the code defines from
      it (about 5 MB, most of it LLVM's bitcode reader). The names are read from the object
      code's symbol table instead, and the bitcode is parsed when a compile first links
      against the kernel (:func:`_link_later`).

    Either falls back to numba's own way where this numba or platform differs (another
    object format than ELF; a cache without these internals).
    """
    from numba.core.compiler_lock import global_compiler_lock

    files: Any = getattr(cache, "_cache_file", None)
    if not (
        hasattr(cache, "_enabled")
        and hasattr(cache, "_impl")
        and hasattr(files, "_load_index")
        and hasattr(files, "_data_path")
    ):
        return cache._load_overload(sig, target_context)
    if not cache._enabled:
        return None
    with global_compiler_lock:  # numba holds it already while it loads; the codegen is shared
        codegen = target_context.codegen()
        data_name = files._load_index().get(cache._index_key(sig, codegen))
        if data_name is None:
            return None
        try:
            with open(files._data_path(data_name), "rb") as f:
                data = _CacheUnpickler(f).load()
        except OSError:  # removed while the index still names it: numba's answer too
            return None
        codegen.unserialize_library = functools.partial(_unserialize, codegen)
        try:
            return cache._impl.rebuild(target_context, data)
        finally:
            del codegen.unserialize_library


class _CacheUnpickler(pickle.Unpickler):
    """numba's cache data, with :func:`_environment` for the environments in it."""

    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(module, name)
        if (module, name) == ("numba.core.environment", "_rebuild_env"):
            return functools.partial(_environment, found)
        return found


def _environment(rebuild: Callable[..., Any], modname: Any, consts: Any, env_name: str) -> Any:
    """numba's ``_rebuild_env``, without importing a numba module that is not imported yet."""
    if not isinstance(modname, str) or not modname.startswith("numba.") or modname in sys.modules:
        return rebuild(modname, consts, env_name)
    from numba.core.environment import Environment, lookup_environment

    env = lookup_environment(env_name)
    if env is None:
        env = Environment({"__name__": modname})
        env.consts[:] = consts
        env.env_name = env_name
        Environment._memo[env_name] = env
    return env


def _unserialize(codegen: Any, serialized: tuple[str, str, Any]) -> Any:
    """numba's ``codegen.unserialize_library`` for object code, without parsing its bitcode."""
    name, kind, data = serialized
    symbols = _defined_symbols(data[0]) if kind == "object" else None
    if symbols is None:
        return type(codegen).unserialize_library(codegen, serialized)
    library = _link_later(codegen._library_class)(codegen, name)
    library.enable_object_caching()
    library._set_compiled_object(data[0])
    library._link_bitcode = data[1]
    library._finalize_final_module()
    codegen._engine._defined_symbols |= symbols  # as numba's _load_defined_symbols
    return library


@functools.cache
def _link_later(library_class: type) -> type:
    """``library_class`` whose bitcode for linking is parsed when first linked against."""

    class LinkLater(library_class):  # type: ignore[misc, valid-type]
        _link_bitcode: bytes | None = None
        _shared_module: Any

        def _get_module_for_linking(self) -> Any:
            if self._shared_module is None and self._link_bitcode is not None:
                import llvmlite.binding as ll

                self._shared_module = ll.parse_bitcode(self._link_bitcode)
                self._link_bitcode = None
            return super()._get_module_for_linking()

    return LinkLater


def _defined_symbols(obj: bytes) -> set[str] | None:
    """The names an ELF-64 little-endian object file defines (functions, data, no type),
    as numba reads them from the module's bitcode; None for any other object format."""
    if obj[:6] != b"\x7fELF\x02\x01":
        return None
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    names: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize or 24):
            name, info, _, section, _, _ = struct.unpack_from("<IBBHQQ", obj, at)
            # defined (a section, not SHN_UNDEF) and NOTYPE, OBJECT or FUNC
            if name and section and info & 0xF in (0, 1, 2):
                end = obj.index(b"\0", strings + name)
                names.add(obj[strings + name : end].decode())
    return names


_RUNTIME = threading.Lock()
_RUNTIME_SYMBOLS: list[bool] = []


def _runtime_symbols() -> bool:
    """Give LLVM the addresses of numba's runtime C functions (``NRT_MemInfo_alloc_aligned``
    and the like) once per process, as ``rtsys.initialize`` does before it compiles the
    runtime's own module; False where this numba does not have them where expected."""
    with _RUNTIME:
        if _RUNTIME_SYMBOLS:
            return _RUNTIME_SYMBOLS[0]
        try:
            import llvmlite.binding as ll
            from numba.core import config as numba_config
            from numba.core.runtime import _nrt_python, rtsys

            if not rtsys._init:  # else numba did it
                helpers = dict(_nrt_python.c_helpers)
                if numba_config.NRT_STATS:
                    _nrt_python.memsys_enable_stats()
                for name, address in helpers.items():
                    ll.add_symbol(name if name.startswith("_") else f"NRT_{name}", address)
            ok = True
        except (ImportError, AttributeError, TypeError):
            ok = False
        _RUNTIME_SYMBOLS.append(ok)
        return ok


def _locked(
    dispatcher: Any, compile_: Callable[[Any], Any], opt: int | None = None
) -> Callable[[Any], Any]:
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
            with _machine_lock(name), _opt_level(opt):
                return compile_(sig)  # loads what another process cached meanwhile
        finally:
            _DEPTH.n = depth

    compile._curator_shared = True  # type: ignore[attr-defined]
    return compile


@contextlib.contextmanager
def _opt_level(level: int | None) -> Iterator[None]:
    """numba's LLVM optimisation level set to ``level`` for what compiles inside (unless
    ``level`` is None or the environment sets ``NUMBA_OPT``).

    numba reads ``config.OPT`` as it builds each module's LLVM passes, so the level reaches
    the kernel and every helper compiled for it. numba's compiler lock is held throughout:
    another thread's compile (of any numba function) waits and keeps numba's level.
    """
    if level is None or "NUMBA_OPT" in os.environ:
        yield
        return
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        before = config.OPT
        config.OPT = type(before)(level)
        try:
            yield
        finally:
            config.OPT = before


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
            try:  # free: nobody compiles it now
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process compiles it: its compile time here too
                t0 = time.perf_counter()
                kernel = name.rsplit(".", 1)[-1]
                _say("start", kernel)
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX)  # released by the OS if it dies
                finally:
                    waited = time.perf_counter() - t0
                    _COMPILING.seconds = getattr(_COMPILING, "seconds", 0.0) + waited
                    _say("end", kernel, waited)
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


# -- compile time, apart from the work -------------------------------------------------------
def compile_seconds() -> float:
    """Seconds this thread has spent compiling numba kernels (or waiting for another
    process's compile of one) since it started; loading a cached kernel does not count."""
    return float(getattr(_COMPILING, "seconds", 0.0))


def compile_sinks() -> list[Callable[[str, str, float], None]]:
    """The callables told of each compile in this process (append and remove your own):
    ``sink("start", kernel, 0.0)`` as it starts, ``sink("end", kernel, seconds)`` as it ends."""
    return _SINKS


def listen() -> None:
    """Register the listener of numba's compile events (once per process)."""
    with _LISTEN_LOCK:
        if _LISTENING:
            return
        from numba.core import event

        class _Compiles(event.Listener):  # type: ignore[misc]
            def on_start(self, ev: Any) -> None:
                depth = getattr(_COMPILING, "depth", 0)
                _COMPILING.depth = depth + 1
                if depth == 0:
                    _COMPILING.kernel = _name(ev.data["dispatcher"])
                    _COMPILING.t0 = time.perf_counter()
                    _say("start", _COMPILING.kernel)

            def on_end(self, ev: Any) -> None:
                _COMPILING.depth = max(getattr(_COMPILING, "depth", 1) - 1, 0)
                if _COMPILING.depth == 0 and getattr(_COMPILING, "t0", None) is not None:
                    took = time.perf_counter() - _COMPILING.t0
                    _COMPILING.t0 = None
                    _COMPILING.seconds = compile_seconds() + took
                    _say("end", _COMPILING.kernel, took)

        listener = _Compiles()
        event.register("numba:compile", listener)
        _LISTENING.append(listener)


def _name(dispatcher: Any) -> str:
    py_func = getattr(dispatcher, "py_func", None)
    return str(getattr(py_func, "__name__", None) or dispatcher)


def _say(state: str, kernel: str, seconds: float = 0.0) -> None:
    """Tell the clients following a distributed worker's events (inside a worker's task),
    else this process's sinks."""
    worker = None
    if "distributed" in sys.modules:
        try:
            from distributed import get_worker

            worker = get_worker()
        except (ImportError, ValueError):
            worker = None
    if worker is not None:
        with contextlib.suppress(Exception):  # a display must never fail a compile
            msg = {"state": state, "kernel": kernel, "seconds": seconds}
            worker.log_event(COMPILE_TOPIC, msg)
        return
    for sink in list(_SINKS):
        with contextlib.suppress(Exception):
            sink(state, kernel, seconds)


# -- helpers: compiled for kernels only --------------------------------------------------------
def helper(func: Callable[..., Any] | None = None, *, cache: bool = True) -> Any:
    """``numba.njit(cache=cache)`` for a function that only kernels call, never Python.

    numba builds a CPython wrapper for every function it compiles (unboxing of each
    argument, boxing of the result, error handling), so that Python can call it: about half
    of a small helper's compile on a fresh machine, for code that a kernel's call never
    runs. A helper is compiled without it (``no_cpython_wrapper``); calling one from Python
    raises ``TypeError`` (numba itself would jump into the missing wrapper and crash the
    process). Use as ``@helper`` or ``@helper(cache=False)``.
    """

    def make(f: Callable[..., Any]) -> Any:
        dispatcher = _helper_class()(
            py_func=f, locals={}, targetoptions={"nopython": True, "no_cpython_wrapper": True}
        )
        if cache:
            dispatcher.enable_caching()
        return dispatcher

    return make if func is None else make(func)


@functools.cache
def _helper_class() -> type:
    from numba.core.registry import CPUDispatcher

    class HelperDispatcher(CPUDispatcher):  # type: ignore[misc,valid-type]
        """A dispatcher that kernels call; Python may not (no CPython wrapper)."""

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            raise TypeError(
                f"{self.py_func.__qualname__} is a helper of numba kernels, compiled without "
                "a CPython wrapper: call it from a kernel, not from Python"
            )

    return HelperDispatcher
