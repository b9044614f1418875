"""``nemo_curator.modules.exact_dedup``: :class:`ExactDuplicates`."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pandas as pd

from curator_dask.nemo.datasets import DocumentDataset, read_parquet_files
from curator_dask.nemo.utils.duplicates_removal import remove_duplicates

HASH_FIELD = "_hashes"


def _hash_part(part: Any, id_field: str, text_field: str) -> pd.DataFrame:
    from curator_dask._backend import to_pandas

    part = to_pandas(part)
    texts = part[text_field].astype(object).where(part[text_field].notna(), "")
    digests = [hashlib.md5(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]
    return pd.DataFrame(
        {id_field: part[id_field].to_numpy(), HASH_FIELD: pd.Series(digests, dtype="str")}
    ).astype({id_field: part[id_field].dtype})


def _duplicated_part(part: pd.DataFrame) -> pd.DataFrame:
    return part[part[HASH_FIELD].duplicated(keep=False).to_numpy()]


class ExactDuplicates:
    """Find (and remove) documents whose text is byte-identical, as NeMo's v0.7-0.8 API.

    :meth:`identify_duplicates` returns ``id_field`` and ``_hashes`` (the md5 hex digest
    of the text's UTF-8 bytes, as NeMo's) of every member of every duplicate group, each
    group in one partition; :meth:`remove` drops all but the first member of each group.
    Calling the module does the first, and the second with ``perform_removal=True``.

    Parameters
    ----------
    logger : str or logging.Logger
        Accepted for NeMo's signature (nothing is logged to it).
    id_field, text_field : str
        Id and text columns.
    hash_method : str
        ``"md5"`` (the only method NeMo offers; others raise ``ValueError``).
    perform_removal : bool
        Calling the module returns the dataset without duplicates.
    profile_dir : str, optional
        Accepted for NeMo's signature (no profile is written).
    cache_dir : str, optional
        Write the duplicates to ``<cache_dir>/_exact_duplicates.parquet`` and read them back
        (this computes); without it the result is lazy.
    """

    SUPPORTED_HASHES = frozenset({"md5"})

    def __init__(
        self,
        logger: Any = "./",
        id_field: str = "id",
        text_field: str = "text",
        hash_method: str = "md5",
        perform_removal: bool = False,
        profile_dir: str | None = None,
        cache_dir: str | None = None,
    ) -> None:
        if hash_method not in self.SUPPORTED_HASHES:
            raise ValueError(
                f"hash_method {hash_method!r} is not supported; NeMo's ExactDuplicates "
                f"offers {sorted(self.SUPPORTED_HASHES)} (curator_dask's "
                "ExactDeduplicationWorkflow has more)"
            )
        self.id_field = id_field
        self.text_field = text_field
        self.hash_method = hash_method
        self.perform_removal = perform_removal
        self.profile_dir = profile_dir
        self.cache_dir = cache_dir

    def hash_documents(self, text: Any) -> pd.Series:
        """The md5 hex digest of each document (a Series of texts)."""
        frame = pd.DataFrame({"_i": range(len(text)), "_t": text.to_numpy()})
        return _hash_part(frame, "_i", "_t")[HASH_FIELD].set_axis(text.index)

    def identify_duplicates(self, dataset: DocumentDataset) -> DocumentDataset:
        """``id_field`` and ``_hashes`` of every document whose text another document has."""
        df = dataset.df
        meta = _hash_part(df._meta, self.id_field, self.text_field)
        hashed = df.map_partitions(_hash_part, self.id_field, self.text_field, meta=meta)
        n = max(1, hashed.npartitions // 3)
        dups = hashed.shuffle(on=[HASH_FIELD], npartitions=n, ignore_index=True)
        dups = dups.map_partitions(_duplicated_part, meta=meta)
        if self.cache_dir is None:
            return DocumentDataset(dups)
        from curator_dask.io import write_parquet

        path = os.path.join(self.cache_dir, "_exact_duplicates.parquet")
        write_parquet(dups, path, mode="overwrite")
        # One file per partition: each group is read back whole in one partition.
        return DocumentDataset(read_parquet_files(path))

    def remove(
        self, dataset: DocumentDataset, duplicates_to_remove: DocumentDataset | None
    ) -> DocumentDataset:
        """``dataset`` without all but the first member of each group (lazy)."""
        if duplicates_to_remove is None:
            return dataset
        return DocumentDataset(
            remove_duplicates(dataset.df, duplicates_to_remove.df, self.id_field, HASH_FIELD)
        )

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        duplicates = self.identify_duplicates(dataset)
        if self.perform_removal:
            return self.remove(dataset, duplicates)
        return duplicates


__all__ = ["ExactDuplicates"]
