"""``nemo_curator.modules.fuzzy_dedup.fuzzyduplicates``: :class:`FuzzyDuplicates`."""

from __future__ import annotations

import os
from typing import Any

from curator_dask.nemo.datasets import DocumentDataset
from curator_dask.nemo.modules.config import FuzzyDuplicatesConfig
from curator_dask.nemo.utils.duplicates_removal import remove_duplicates

GROUP_FIELD = "group"


class FuzzyDuplicates:
    """NeMo's ``FuzzyDuplicates``, run by :class:`curator_dask.dedup.FuzzyDeduplicationWorkflow`.

    :meth:`identify_duplicates` computes and returns ``id_field`` and ``group`` for every
    member of every group of near duplicates (each group in one partition), or None when
    there is none; :meth:`remove` drops all but the first member of each group. Calling
    the module does the first, and the second with ``perform_removal=True``. See
    :class:`~curator_dask.nemo.modules.config.FuzzyDuplicatesConfig` for the parameters.
    The workflow's files go to ``<cache_dir>/cache`` and ``<cache_dir>/output``.
    """

    def __init__(self, config: FuzzyDuplicatesConfig, logger: Any = "./") -> None:
        self.config = config

    def identify_duplicates(self, dataset: DocumentDataset) -> DocumentDataset | None:
        """Every member of every duplicate group, or None when there is none (computes)."""
        import dask.dataframe as dd

        from curator_dask.dedup import FuzzyDeduplicationWorkflow

        c = self.config
        result = FuzzyDeduplicationWorkflow(
            df=dataset.df,
            cache_path=os.path.join(c.cache_dir, "cache"),
            output_path=os.path.join(c.cache_dir, "output"),
            text_column=c.text_field,
            id_column=c.id_field,
            char_ngrams=c.char_ngrams,
            num_bands=c.num_buckets,
            minhashes_per_band=c.hashes_per_bucket,
            bands_per_iteration=c.buckets_per_shuffle,
            use_64_bit_hash=c.use_64_bit_hash,
            seed=c.seed,
            jaccard_threshold=c.jaccard_threshold if c.jaccard_threshold is not None else 0.8,
            false_positive_check=c.false_positive_check,
            num_anchors=c.num_anchors if c.false_positive_check else None,
            perform_removal=False,
            duplicate_groups=True,
        ).run()
        if not result.duplicate_groups:
            return None
        groups = dd.read_parquet(result.paths["duplicate_groups"])[["id", GROUP_FIELD]]
        groups = groups.rename(columns={"id": c.id_field})
        return DocumentDataset(groups.shuffle(on=[GROUP_FIELD], ignore_index=True))

    def remove(
        self, dataset: DocumentDataset, duplicates_to_remove: DocumentDataset | None
    ) -> DocumentDataset:
        """``dataset`` without all but the first member of each group (lazy)."""
        if duplicates_to_remove is None:
            return dataset
        return DocumentDataset(
            remove_duplicates(
                dataset.df, duplicates_to_remove.df, self.config.id_field, GROUP_FIELD
            )
        )

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset | None:
        duplicates = self.identify_duplicates(dataset)
        if self.config.perform_removal:
            return self.remove(dataset, duplicates)
        return duplicates


__all__ = ["FuzzyDuplicates"]
