"""``nemo_curator.modules.fuzzy_dedup``: FuzzyDuplicates, MinHash, LSH."""

from __future__ import annotations

from curator_dask.nemo.modules.fuzzy_dedup.fuzzyduplicates import FuzzyDuplicates
from curator_dask.nemo.modules.fuzzy_dedup.lsh import LSH
from curator_dask.nemo.modules.fuzzy_dedup.minhash import MinHash

__all__ = ["LSH", "FuzzyDuplicates", "MinHash"]
