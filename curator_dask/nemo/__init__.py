"""A compatibility layer for NeMo Curator's Dask-era scripts (its v0.3 - v0.8 API).

The layout mirrors ``nemo_curator`` so a script changes only its import prefix,
``nemo_curator`` -> ``curator_dask.nemo``::

    from curator_dask.nemo import ScoreFilter, Sequential, get_client
    from curator_dask.nemo.datasets import DocumentDataset
    from curator_dask.nemo.filters import WordCountFilter

Everything runs on curator_dask's readers, filters, writers and dedup workflows; see
``docs/nemo.md`` for what is mapped and what differs.
"""

from __future__ import annotations

from curator_dask.nemo.datasets import DocumentDataset
from curator_dask.nemo.modules import (
    LSH,
    AddId,
    ExactDuplicates,
    Filter,
    FuzzyDuplicates,
    FuzzyDuplicatesConfig,
    JointScoreFilter,
    MinHash,
    Modify,
    ParallelScoreFilter,
    Score,
    ScoreFilter,
    Sequential,
)
from curator_dask.nemo.utils.distributed_utils import get_client

__all__ = [
    "LSH",
    "AddId",
    "DocumentDataset",
    "ExactDuplicates",
    "Filter",
    "FuzzyDuplicates",
    "FuzzyDuplicatesConfig",
    "JointScoreFilter",
    "MinHash",
    "Modify",
    "ParallelScoreFilter",
    "Score",
    "ScoreFilter",
    "Sequential",
    "get_client",
]
