"""The old, private name of :mod:`curator_dask.io.file_reader` (imports of it keep working)."""

from __future__ import annotations

from typing import Any

from curator_dask.io import file_reader


def __getattr__(name: str) -> Any:
    return getattr(file_reader, name)
