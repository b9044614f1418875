"""Namespaced defaults under ``curator.*`` in :mod:`dask.config`.

Settings here change *how* work is computed, never *what* is output. They are
registered with :func:`dask.config.update_defaults` when the package is imported
and read with :func:`get`.
"""

from __future__ import annotations

import os
from typing import Any

import dask.config
import dask.utils
import yaml

# The sizing policy moved to curator_dask.sizing; its old import path keeps working.
from curator_dask.sizing import (
    BASE_WORKER_BYTES,
    blocksize_for_memory,
    default_blocksize,
    tightest_worker,
    worker_resources,
    workers_of,
)

__all__ = [
    "BASE_WORKER_BYTES",
    "blocksize_for_memory",
    "cache_dir",
    "default_blocksize",
    "get",
    "register_defaults",
    "tightest_worker",
    "worker_resources",
    "workers_of",
]

_FN = os.path.join(os.path.dirname(__file__), "curator.yaml")


def _load_defaults() -> dict[str, Any]:
    with open(_FN) as f:
        return yaml.safe_load(f)


def register_defaults() -> None:
    """Register ``curator.yaml`` as dask config defaults (idempotent)."""
    defaults = _load_defaults()
    dask.config.update_defaults(defaults)


def get(key: str, default: Any = None) -> Any:
    """Read ``curator.<key>`` from dask config, e.g. ``get("io.blocksize")``."""
    return dask.config.get(f"curator.{key}", default=default)


def cache_dir() -> str | None:
    """This machine's directory for derived data its processes share, or None for none.

    ``curator.cache-dir`` (``DASK_CURATOR__CACHE_DIR``): a path, ``false`` for no cache, or
    null (default) for ``curator_dask`` under the user's cache directory
    (``$XDG_CACHE_HOME``, else ``~/.cache``; ``%LOCALAPPDATA%`` on Windows). It holds what a
    process would otherwise rebuild (the Unicode normalisation tables); every entry is named
    by a digest of what it was built from, so a stale entry is never read. Read in the
    process that uses it: each machine has its own.

    Examples
    --------
    >>> with dask.config.set({"curator.cache-dir": False}):
    ...     cache_dir() is None
    True
    """
    value = get("cache-dir", None)
    if value is False or value == "":
        return None
    if value:
        return os.path.abspath(os.path.expanduser(str(value)))
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "curator_dask")
