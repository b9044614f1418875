"""``nemo_curator.modules.fuzzy_dedup.lsh``: :class:`LSH`."""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np
import pandas as pd

from curator_dask.nemo.datasets import DocumentDataset, read_parquet_files
from curator_dask.nemo.modules.fuzzy_dedup.minhash import SIGNATURE_FIELD, signature_matrix

BUCKET_FIELD = "_bucket_id"


def _bucket_part(
    part: Any, id_fields: list[str], field: str, num_buckets: int, rows: int
) -> pd.DataFrame:
    from curator_dask._backend import to_pandas
    from curator_dask.dedup import band_hashes

    part = to_pandas(part)
    if len(part):
        sig = signature_matrix(part[field])
        bands = band_hashes(sig, num_buckets, rows)
    else:
        bands = np.zeros((0, num_buckets), dtype=np.int64)
    ids = part[id_fields].reset_index(drop=True)
    out = ids.loc[ids.index.repeat(num_buckets)].reset_index(drop=True)
    return out.assign(**{BUCKET_FIELD: bands.reshape(-1)})


def _shared_part(part: pd.DataFrame) -> pd.DataFrame:
    return part[part[BUCKET_FIELD].duplicated(keep=False).to_numpy()]


class LSH:
    """Band MinHash signatures into buckets, as NeMo's ``LSH``.

    Calling it writes ``<cache_dir>/_buckets.parquet``: ``id_fields`` and ``_bucket_id``
    for every document that shares a bucket with another, and returns it, or None when
    no two documents share a bucket. A bucket id is curator_dask's 64-bit hash of the band
    (:func:`curator_dask.dedup.band_hashes`, band number included), not NeMo's string of
    the band's md5 (or its contiguous integer with ``false_positive_check``).

    Parameters
    ----------
    cache_dir : str
        Where the buckets are written (required).
    num_hashes : int
        Signature length.
    num_buckets : int
        Bands; each has ``num_hashes // num_buckets`` values.
    buckets_per_shuffle : int
        Accepted (curator_dask shuffles all bands at once here).
    false_positive_check : bool
        Accepted (the bucket ids are the same integers either way).
    logger, profile_dir
        Accepted for NeMo's signature.
    id_fields : str or list of str
        Id column(s).
    minhash_field : str
        The signature column.
    """

    def __init__(
        self,
        cache_dir: str,
        num_hashes: int,
        num_buckets: int,
        buckets_per_shuffle: int = 1,
        false_positive_check: bool = False,
        logger: Any = "./",
        id_fields: str | list[str] = "id",
        minhash_field: str = SIGNATURE_FIELD,
        profile_dir: str | None = None,
    ) -> None:
        if cache_dir is None:
            raise ValueError("LSH needs a cache_dir for its buckets")
        if num_buckets < 1 or num_hashes // num_buckets < 1:
            raise ValueError(
                f"num_hashes={num_hashes} cannot make {num_buckets} buckets of >= 1 value"
            )
        self.cache_dir = cache_dir
        self.num_hashes = num_hashes
        self.num_buckets = num_buckets
        self.buckets_per_shuffle = buckets_per_shuffle
        self.id_fields = [id_fields] if isinstance(id_fields, str) else list(id_fields)
        self.minhash_field = minhash_field

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset | None:
        from curator_dask.io import write_parquet

        df = dataset.df
        args = (self.id_fields, self.minhash_field, self.num_buckets,
                self.num_hashes // self.num_buckets)  # fmt: skip
        meta = _bucket_part(df._meta, *args)
        buckets = df.map_partitions(_bucket_part, *args, meta=meta)
        buckets = buckets.shuffle(on=[BUCKET_FIELD], ignore_index=True)
        buckets = buckets.map_partitions(_shared_part, meta=meta)
        path = os.path.join(self.cache_dir, "_buckets.parquet")
        written = write_parquet(buckets, path, mode="overwrite")
        if sum(r.rows for r in written) == 0:
            shutil.rmtree(path, ignore_errors=True)
            return None
        return DocumentDataset(read_parquet_files(path))


__all__ = ["LSH"]
