"""The one place where pandas and cudf partitions meet.

The dataframe backend is dask's own switch, ``dask.config.set({"dataframe.backend": "cudf"})``.
Partition-level code asks this module for the frame library instead of importing
pandas or cudf directly, so a stage written once runs on both.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import dask.config
import pandas as pd


def backend_name() -> str:
    """Return dask's current dataframe backend, ``"pandas"`` or ``"cudf"``."""
    return str(dask.config.get("dataframe.backend", default="pandas"))


def frame_module(name: str | None = None) -> ModuleType:
    """Return the module (``pandas`` or ``cudf``) that builds partitions for ``name``."""
    name = name or backend_name()
    if name == "pandas":
        return pd
    try:
        return importlib.import_module(name)
    except ImportError as err:  # pragma: no cover - depends on the gpu extra
        raise ImportError(
            f"dataframe backend {name!r} needs its package; install curator_dask[gpu]"
        ) from err


def to_backend(part: Any, name: str | None = None) -> Any:
    """Convert a pandas partition to the current backend (no-op on pandas)."""
    mod = frame_module(name)
    if mod is pd or isinstance(part, (mod.DataFrame, mod.Series)):
        return part
    # cudf's converter is the module-level ``cudf.from_pandas`` (frames, series and
    # indexes alike); its DataFrame and Series classes have no ``from_pandas``.
    return mod.from_pandas(part)


def to_pandas(part: Any) -> pd.DataFrame:
    """Return ``part`` as pandas (cudf partitions are copied to host)."""
    if isinstance(part, (pd.DataFrame, pd.Series)):
        return part
    return part.to_pandas()


def array_module(obj: Any) -> ModuleType:
    """Return numpy or cupy, whichever holds ``obj``'s data."""
    mod = type(obj).__module__.split(".")[0]
    if mod in ("cudf", "cupy"):
        import cupy

        return cupy
    import numpy

    return numpy
