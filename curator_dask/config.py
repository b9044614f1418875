"""Namespaced defaults under ``curator.*`` in :mod:`dask.config`.

Settings here change *how* work is computed, never *what* is output. They are
registered with :func:`dask.config.update_defaults` when the package is imported
and read with :func:`get`.
"""

from __future__ import annotations

import os
from typing import Any

import dask.config
import yaml

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
