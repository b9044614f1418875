"""Exact, fuzzy (MinHash + LSH) and semantic (embeddings + k-means) deduplication workflows."""

from __future__ import annotations

from curator_dask.dedup.components import connected_components
from curator_dask.dedup.exact import ExactDeduplicationWorkflow, hash_texts
from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow
from curator_dask.dedup.lsh import band_hashes, candidate_probability, choose_bands
from curator_dask.dedup.minhash import (
    minhash_permutations,
    minhash_signatures,
    normalize_text,
    shingle_hashes,
)
from curator_dask.dedup.planner import LSHPlan, plan_lsh
from curator_dask.dedup.semantic import SemanticDeduplicationWorkflow

__all__ = [
    "ExactDeduplicationWorkflow",
    "FuzzyDeduplicationWorkflow",
    "LSHPlan",
    "SemanticDeduplicationWorkflow",
    "band_hashes",
    "candidate_probability",
    "choose_bands",
    "connected_components",
    "hash_texts",
    "minhash_permutations",
    "minhash_signatures",
    "normalize_text",
    "plan_lsh",
    "shingle_hashes",
]
