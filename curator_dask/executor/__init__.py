"""Executors run a :class:`~curator_dask.pipeline.Pipeline`: on dask distributed, or in-process.

- :class:`DaskExecutor` -- the default: a local cluster sized to the machine, an existing
  scheduler (address or scheduler file) or a client; stages are placed by their resources.
- :class:`SequentialExecutor` -- everything in this process, one partition at a time, for
  tests and debugging.

A partition that runs out of memory on :class:`DaskExecutor` is split and recomputed in
pieces (``curator.execution.max-splits``); :class:`PartitionMemoryError` when even the
smallest pieces fail.

Both write the same files and statistics and resume the same way.
"""

from __future__ import annotations

from curator_dask.executor.base import Executor
from curator_dask.executor.dask_executor import DaskExecutor, PartitionMemoryError
from curator_dask.executor.sequential import SequentialExecutor

__all__ = ["DaskExecutor", "Executor", "PartitionMemoryError", "SequentialExecutor"]
