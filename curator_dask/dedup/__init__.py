"""Exact, fuzzy (MinHash + LSH) and semantic (embeddings + k-means) deduplication workflows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from curator_dask._lazy import lazy_exports

_EXPORTS = {
    "DedupResult": "curator_dask.dedup._runtime",
    "remove_duplicates": "curator_dask.dedup._common",
    "BAND_SHAPES": "curator_dask.dedup.lsh",
    "bands_for_threshold": "curator_dask.dedup.lsh",
    "recall_bands": "curator_dask.dedup.lsh",
    "connected_components": "curator_dask.dedup.components",
    "ExactDeduplicationWorkflow": "curator_dask.dedup.exact",
    "hash_texts": "curator_dask.dedup.exact",
    "FuzzyDeduplicationWorkflow": "curator_dask.dedup.fuzzy",
    "band_hashes": "curator_dask.dedup.lsh",
    "candidate_probability": "curator_dask.dedup.lsh",
    "choose_bands": "curator_dask.dedup.lsh",
    "minhash_permutations": "curator_dask.dedup.minhash",
    "minhash_signatures": "curator_dask.dedup.minhash",
    "normalize_text": "curator_dask.dedup.minhash",
    "shingle_hashes": "curator_dask.dedup.minhash",
    "LSHPlan": "curator_dask.dedup.planner",
    "plan_lsh": "curator_dask.dedup.planner",
    "SemanticDeduplicationWorkflow": "curator_dask.dedup.semantic",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from curator_dask.dedup._common import remove_duplicates
    from curator_dask.dedup._runtime import DedupResult
    from curator_dask.dedup.components import connected_components
    from curator_dask.dedup.exact import ExactDeduplicationWorkflow, hash_texts
    from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow
    from curator_dask.dedup.lsh import (
        BAND_SHAPES,
        band_hashes,
        bands_for_threshold,
        candidate_probability,
        choose_bands,
        recall_bands,
    )
    from curator_dask.dedup.minhash import (
        minhash_permutations,
        minhash_signatures,
        normalize_text,
        shingle_hashes,
    )
    from curator_dask.dedup.planner import LSHPlan, plan_lsh
    from curator_dask.dedup.semantic import SemanticDeduplicationWorkflow

__all__ = [
    "BAND_SHAPES",
    "DedupResult",
    "ExactDeduplicationWorkflow",
    "FuzzyDeduplicationWorkflow",
    "LSHPlan",
    "SemanticDeduplicationWorkflow",
    "band_hashes",
    "bands_for_threshold",
    "candidate_probability",
    "choose_bands",
    "connected_components",
    "hash_texts",
    "minhash_permutations",
    "minhash_signatures",
    "normalize_text",
    "plan_lsh",
    "recall_bands",
    "remove_duplicates",
    "shingle_hashes",
]
