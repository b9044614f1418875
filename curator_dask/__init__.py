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

from curator_dask.config import register_defaults

register_defaults()

from curator_dask.cluster import ClusterConfig, get_client  # noqa: E402
from curator_dask.dedup import (  # noqa: E402
    ExactDeduplicationWorkflow,
    FuzzyDeduplicationWorkflow,
    SemanticDeduplicationWorkflow,
)
from curator_dask.io import (  # noqa: E402
    JsonlReader,
    JsonlWriter,
    ParquetReader,
    ParquetWriter,
    read_jsonl,
    read_parquet,
    write_jsonl,
    write_parquet,
)
from curator_dask.pipeline import Pipeline, PipelineResult  # noqa: E402
from curator_dask.stage import (  # noqa: E402
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
