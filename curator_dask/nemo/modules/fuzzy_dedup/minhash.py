"""``nemo_curator.modules.fuzzy_dedup.minhash``: :class:`MinHash`."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.nemo.datasets import DocumentDataset, read_parquet_files

SIGNATURE_FIELD = "_minhash_signature"


def _minhash_part(
    part: Any, id_field: str, text_field: str, ngram: int, perms: np.ndarray, wide: bool
) -> pd.DataFrame:
    from curator_dask._backend import to_pandas
    from curator_dask.dedup import minhash_signatures, shingle_hashes

    part = to_pandas(part)
    text = part[text_field].astype(object).where(part[text_field].notna(), "")
    hashes, offsets = shingle_hashes(text, ngram, kind="char")
    sig = minhash_signatures(hashes, offsets, perms, use_64_bit_hash=wide)
    # An Arrow list column: dask would turn an object column of arrays into strings.
    values = pa.array(np.ascontiguousarray(sig).reshape(-1))
    offsets = pa.array(np.arange(0, sig.size + 1, max(1, sig.shape[1]), dtype=np.int32))
    if not len(sig):
        offsets = pa.array(np.zeros(1, dtype=np.int32))
    lists = pa.ListArray.from_arrays(offsets, values)
    return pd.DataFrame(
        {
            id_field: part[id_field].to_numpy(),
            SIGNATURE_FIELD: pd.Series(lists, dtype=pd.ArrowDtype(lists.type)),
        }
    ).astype({id_field: part[id_field].dtype})


def signature_matrix(signatures: pd.Series) -> np.ndarray:
    """A signature column (Arrow lists, or arrays read back from Parquet) as a matrix."""
    if not len(signatures):
        return np.zeros((0, 0), dtype=np.uint32)
    if isinstance(signatures.dtype, pd.ArrowDtype):
        lists = pa.chunked_array([pa.array(signatures)]).combine_chunks()
        return lists.flatten().to_numpy().reshape(len(signatures), -1)
    return np.stack([np.asarray(v) for v in signatures.to_numpy()])


class MinHash:
    """The MinHash signature of each document's character n-grams, as NeMo's ``MinHash``.

    Returns ``id_field`` and ``_minhash_signature`` (an array of ``num_hashes`` uint32, or
    uint64 with ``use_64bit_hash``) per document. Computed by
    :func:`curator_dask.dedup.minhash_signatures` over the raw text's ``char_ngrams``-
    character shingles: the hash functions are curator_dask's (seeded by ``seed``), so the
    values differ from NeMo's while estimating the same Jaccard similarity.

    Parameters
    ----------
    seed : int
        Seed of the hash functions.
    num_hashes : int
        Signature length.
    char_ngrams : int
        Shingle length in characters.
    use_64bit_hash : bool
        64-bit values instead of 32-bit.
    logger, profile_dir
        Accepted for NeMo's signature.
    id_field, text_field : str
        Id and text columns.
    cache_dir : str, optional
        Write the signatures to ``<cache_dir>/_minhashes.parquet`` and read them back (this
        computes); without it the result is lazy.
    """

    def __init__(
        self,
        seed: int = 42,
        num_hashes: int = 260,
        char_ngrams: int = 24,
        use_64bit_hash: bool = False,
        logger: Any = "./",
        id_field: str = "id",
        text_field: str = "text",
        profile_dir: str | None = None,
        cache_dir: str | None = None,
    ) -> None:
        from curator_dask.dedup import minhash_permutations

        self.seed = seed
        self.num_hashes = num_hashes
        self.char_ngrams = char_ngrams
        self.use_64bit_hash = use_64bit_hash
        self.id_field = id_field
        self.text_field = text_field
        self.cache_dir = cache_dir
        self.perms = minhash_permutations(num_hashes, seed, use_64bit_hash)

    def compute_minhashes(self, df: Any) -> Any:
        """The signatures of a dask frame's documents (lazy)."""
        args = (self.id_field, self.text_field, self.char_ngrams, self.perms, self.use_64bit_hash)
        return df.map_partitions(_minhash_part, *args, meta=_minhash_part(df._meta, *args))

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        result = self.compute_minhashes(dataset.df)
        if self.cache_dir is None:
            return DocumentDataset(result)
        from curator_dask.io import write_parquet

        path = os.path.join(self.cache_dir, "_minhashes.parquet")
        write_parquet(result, path, mode="overwrite")
        return DocumentDataset(read_parquet_files(path))


__all__ = ["MinHash"]
