"""curator_dask: curate text datasets for LLM training on Dask, on CPU and GPU.

The public API, in the vocabulary NeMo Curator users know:

- readers and writers: :func:`read_jsonl`, :func:`read_parquet`, :class:`JsonlReader`,
  :class:`ParquetReader`, :class:`JsonlWriter`, :class:`ParquetWriter`;
- stages: :class:`ProcessingStage`, :class:`Filter`, :class:`Modifier`,
  :func:`processing_stage`, :class:`Resources` (filters in :mod:`curator_dask.filters`,
  modifiers in :mod:`curator_dask.modifiers`, model stages in :mod:`curator_dask.classifiers`
  and :mod:`curator_dask.embeddings`);
- :class:`Pipeline` (``run()`` is where computation happens);
- deduplication: :class:`ExactDeduplicationWorkflow`, :class:`FuzzyDeduplicationWorkflow`,
  :class:`SemanticDeduplicationWorkflow`;
- clusters: :class:`ClusterConfig`, :func:`get_client`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from curator_dask._dask_widgets import import_dask

import_dask()  # dask's notebook widgets import Jinja2 when first drawn, not now

from curator_dask.config import register_defaults  # noqa: E402

register_defaults()

from curator_dask._lazy import lazy_exports  # noqa: E402

_EXPORTS = {
    "ClusterConfig": "curator_dask.cluster",
    "get_client": "curator_dask.cluster",
    "ExactDeduplicationWorkflow": "curator_dask.dedup",
    "FuzzyDeduplicationWorkflow": "curator_dask.dedup",
    "SemanticDeduplicationWorkflow": "curator_dask.dedup",
    "JsonlReader": "curator_dask.io",
    "JsonlWriter": "curator_dask.io",
    "ParquetReader": "curator_dask.io",
    "ParquetWriter": "curator_dask.io",
    "read_jsonl": "curator_dask.io",
    "read_parquet": "curator_dask.io",
    "write_jsonl": "curator_dask.io",
    "write_parquet": "curator_dask.io",
    "Pipeline": "curator_dask.pipeline",
    "PipelineResult": "curator_dask.pipeline",
    "Filter": "curator_dask.stage",
    "Modifier": "curator_dask.stage",
    "ProcessingStage": "curator_dask.stage",
    "Resources": "curator_dask.stage",
    "StageStats": "curator_dask.stage",
    "processing_stage": "curator_dask.stage",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from curator_dask.cluster import ClusterConfig, get_client
    from curator_dask.dedup import (
        ExactDeduplicationWorkflow,
        FuzzyDeduplicationWorkflow,
        SemanticDeduplicationWorkflow,
    )
    from curator_dask.io import (
        JsonlReader,
        JsonlWriter,
        ParquetReader,
        ParquetWriter,
        read_jsonl,
        read_parquet,
        write_jsonl,
        write_parquet,
    )
    from curator_dask.pipeline import Pipeline, PipelineResult
    from curator_dask.stage import (
        Filter,
        Modifier,
        ProcessingStage,
        Resources,
        StageStats,
        processing_stage,
    )

__version__ = "0.1.0"

__all__ = [
    "ClusterConfig",
    "ExactDeduplicationWorkflow",
    "Filter",
    "FuzzyDeduplicationWorkflow",
    "JsonlReader",
    "JsonlWriter",
    "Modifier",
    "ParquetReader",
    "ParquetWriter",
    "Pipeline",
    "PipelineResult",
    "ProcessingStage",
    "Resources",
    "SemanticDeduplicationWorkflow",
    "StageStats",
    "get_client",
    "processing_stage",
    "read_jsonl",
    "read_parquet",
    "write_jsonl",
    "write_parquet",
]
