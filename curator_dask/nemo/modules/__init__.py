"""``nemo_curator.modules``: the dataset-to-dataset modules of NeMo Curator's Dask API.

Every module is lazy unless it says otherwise: it returns a :class:`DocumentDataset`
whose dataframe computes when written or computed. Filters and modifiers whose methods
are :func:`~curator_dask.nemo.utils.decorators.batched` run once per partition; others
once per document, as in NeMo.
"""

from __future__ import annotations

from curator_dask.nemo.modules.add_id import AddId
from curator_dask.nemo.modules.config import FuzzyDuplicatesConfig
from curator_dask.nemo.modules.exact_dedup import ExactDuplicates
from curator_dask.nemo.modules.filter import (
    Filter,
    JointScoreFilter,
    ParallelScoreFilter,
    Score,
    ScoreFilter,
)
from curator_dask.nemo.modules.fuzzy_dedup import LSH, FuzzyDuplicates, MinHash
from curator_dask.nemo.modules.meta import Sequential
from curator_dask.nemo.modules.modify import Modify

__all__ = [
    "LSH",
    "AddId",
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
]
