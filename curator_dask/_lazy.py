"""Public names that a package imports on first use (PEP 562), so the CLI starts fast.

``import curator_dask`` used to import dask.dataframe, numba, pyarrow and every stage (about
2 s); with :func:`lazy_exports` a package lists where each public name lives and imports that
module when the name is first read. Type checkers see the real imports under
``TYPE_CHECKING`` in the package itself.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package``; ``exports`` maps name -> module."""

    def __getattr__(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name), name)
        setattr(sys.modules[package], name, value)  # later reads skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__


@contextlib.contextmanager
def imports_without_gc() -> Iterator[None]:
    """Import large libraries with the cyclic garbage collector off, then freeze what exists.

    Importing pandas, pyarrow and numba makes hundreds of thousands of objects (modules,
    classes, functions) that live as long as the process, and no garbage; the collector
    still runs a few hundred times while they import, twice over all of them: about
    0.1 CPU-s of a small dedup command (issue 22; ``bench/bench_fuzzy_cost.py``). Inside,
    it does not run; after, ``gc.freeze`` moves every object there is to the permanent
    generation, which later collections skip, until :func:`thaw_imports` (the CLI's
    ``main`` calls it as it returns). Does nothing where the collector is off already
    (nested, or the caller's choice); freezes nothing where the caller froze objects itself.
    """
    global _frozen
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
            _frozen = True
        gc.enable()


#: Whether :func:`imports_without_gc` froze the objects there are (for :func:`thaw_imports`).
_frozen = False


def thaw_imports() -> None:
    """Give what :func:`imports_without_gc` froze back to the collector.

    Frozen objects are never collected, also not by the interpreter's teardown: a caller of
    the CLI's ``main`` in its own process keeps its usual garbage collection, and a failed
    command's process ends as usual (finalizers run at its teardown).
    """
    global _frozen
    if _frozen:
        gc.unfreeze()
        _frozen = False
