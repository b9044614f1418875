"""Public names that a package imports on first use (PEP 562), so the CLI starts fast.

``import curator_dask`` used to import dask.dataframe, numba, pyarrow and every stage (about
2 s); with :func:`lazy_exports` a package lists where each public name lives and imports that
module when the name is first read. Type checkers see the real imports under
``TYPE_CHECKING`` in the package itself.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
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
