"""Sentence embeddings (for semantic deduplication and search).

torch and transformers are imported only when the stage is set up; they come with
``pip install 'curator_dask[models]'``.
"""

from __future__ import annotations

from curator_dask.embeddings.creator import (
    EmbeddingCreator,
    column_to_embeddings,
    default_embedding_model_dir,
    embeddings_to_column,
    read_embeddings,
)

__all__ = [
    "EmbeddingCreator",
    "column_to_embeddings",
    "default_embedding_model_dir",
    "embeddings_to_column",
    "read_embeddings",
]
