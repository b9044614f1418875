"""Model stages: Hugging Face sequence classifiers and fastText models.

Models are loaded once per worker process in ``setup`` and kept in ``_``-prefixed
attributes, so they never travel inside a task graph. torch, transformers and fastText are
imported only when a stage is set up; they come with ``pip install 'curator_dask[models]'``.
"""

from __future__ import annotations

from curator_dask.classifiers.fasttext_models import (
    FastTextLangId,
    FastTextQualityFilter,
    bundled_langid_model_path,
)
from curator_dask.classifiers.hf import (
    ContentTypeClassifier,
    DomainClassifier,
    FineWebEduClassifier,
    HFSequenceClassifier,
    MultilingualDomainClassifier,
    QualityClassifier,
)

__all__ = [
    "ContentTypeClassifier",
    "DomainClassifier",
    "FastTextLangId",
    "FastTextQualityFilter",
    "FineWebEduClassifier",
    "HFSequenceClassifier",
    "MultilingualDomainClassifier",
    "QualityClassifier",
    "bundled_langid_model_path",
]
