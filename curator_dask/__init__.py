"""curator_dask: curate text datasets for LLM training on Dask, on CPU and GPU."""

from __future__ import annotations

from curator_dask.config import register_defaults
from curator_dask.stage import (
    Filter,
    Modifier,
    ProcessingStage,
    Resources,
    StageStats,
    processing_stage,
)

register_defaults()

__version__ = "0.1.0"

__all__ = [
    "Filter",
    "Modifier",
    "ProcessingStage",
    "Resources",
    "StageStats",
    "processing_stage",
]
