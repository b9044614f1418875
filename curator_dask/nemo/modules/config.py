"""``nemo_curator.modules.config``: :class:`FuzzyDuplicatesConfig`."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

#: Used only with ``false_positive_check=True``, with these defaults (NeMo's).
_CHECK_DEFAULTS = {"num_anchors": 2, "jaccard_threshold": 0.8}
#: NeMo's shuffle tuning for the check: accepted, without effect here.
_TUNING = ("bucket_mapping_blocksize", "parts_per_worker", "bucket_parts_per_worker")


@dataclass
class FuzzyDuplicatesConfig:
    """NeMo's ``FuzzyDuplicatesConfig``: MinHash + LSH fuzzy duplicates.

    ``num_buckets`` -> ``num_bands``, ``hashes_per_bucket`` -> ``minhashes_per_band``,
    ``buckets_per_shuffle`` -> ``bands_per_iteration`` of
    :class:`curator_dask.dedup.FuzzyDeduplicationWorkflow`; ``char_ngrams``, ``seed``,
    ``use_64_bit_hash``, ``false_positive_check``, ``num_anchors`` and
    ``jaccard_threshold`` keep their meaning. Checked as NeMo checks them: ``cache_dir`` is
    required, ``num_anchors`` > 0 and ``jaccard_threshold`` in [0, 1] with the check,
    ``buckets_per_shuffle`` in [1, ``num_buckets``].
    """

    cache_dir: str
    profile_dir: str | None = None
    id_field: str = "id"
    text_field: str = "text"
    perform_removal: bool = False
    seed: int = 42
    char_ngrams: int = 24
    num_buckets: int = 20
    hashes_per_bucket: int = 13
    use_64_bit_hash: bool = False
    buckets_per_shuffle: int = 1
    false_positive_check: bool = False
    num_anchors: int | None = None
    jaccard_threshold: float | None = None
    bucket_mapping_blocksize: int | None = None
    parts_per_worker: int | None = None
    bucket_parts_per_worker: int | None = None

    def __post_init__(self) -> None:
        if self.cache_dir is None:
            raise ValueError("FuzzyDuplicatesConfig needs a cache_dir that every worker can reach")
        self.num_hashes = self.num_buckets * self.hashes_per_bucket
        if self.false_positive_check:
            for name, default in _CHECK_DEFAULTS.items():
                if getattr(self, name) is None:
                    setattr(self, name, default)
            if self.num_anchors <= 0:  # type: ignore[operator]
                raise ValueError(f"num_anchors must be > 0, got {self.num_anchors}")
            if not 0 <= self.jaccard_threshold <= 1:  # type: ignore[operator]
                raise ValueError(
                    f"jaccard_threshold must be in [0, 1], got {self.jaccard_threshold}"
                )
        else:
            unused = [n for n in (*_CHECK_DEFAULTS, *_TUNING) if getattr(self, n) is not None]
            if unused:
                warnings.warn(f"false_positive_check is off: {unused} are not used", stacklevel=3)
        if not 1 <= self.buckets_per_shuffle <= self.num_buckets:
            raise ValueError(
                f"buckets_per_shuffle must be in [1, num_buckets={self.num_buckets}], "
                f"got {self.buckets_per_shuffle}"
            )

    @classmethod
    def from_yaml(cls, file_path: str) -> FuzzyDuplicatesConfig:
        """A config from a YAML file of its fields."""
        import yaml

        with open(file_path) as f:
            fields: dict[str, Any] = yaml.safe_load(f)
        return cls(**fields)


__all__ = ["FuzzyDuplicatesConfig"]
