"""Sizing policy: how large the partitions of a run are and how much of them fits a worker.

What is decided here changes how a run is cut into tasks, never what it outputs.
"""

from __future__ import annotations

from typing import Any

#: More partitions than this is not a small input (and not worth a size per file).
_MAX_SMALL_PARTITIONS = 64


def input_bytes(reader: Any, specs: list[Any] | None = None) -> float | None:
    """Estimated in-memory bytes of a small input, or None (large, or unknown).

    ``reader`` is a :class:`~curator_dask.io.base.Reader` and ``specs`` its partitions
    (listed when None). What :meth:`~curator_dask.cluster.ClusterConfig.for_input` decides
    on: an input of more than 64 partitions, or one the reader cannot size, counts as large.
    """
    specs = reader.partitions() if specs is None else specs
    if len(specs) > _MAX_SMALL_PARTITIONS:
        return None
    sizes = [reader.estimated_bytes(spec) for spec in specs]
    if any(size is None for size in sizes):
        return None
    return float(sum(sizes))  # type: ignore[arg-type]
