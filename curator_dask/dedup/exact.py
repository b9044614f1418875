"""Exact deduplication: documents with byte-identical text.

Each text is hashed to 128 bits, the ``(id, hash)`` rows are shuffled on the hash so that
every group of identical texts lands in one partition, and one document per group is kept.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
import pandas as pd

from curator_dask import _backend
from curator_dask.dedup._common import (
    choose_keepers,
    read_input,
    remove_documents,
    removed_meta,
    shuffle_method,
    with_uid,
    write_removed,
)
from curator_dask.dedup.minhash import _fmix64, utf8_buffers

HASH_METHODS = ("md5", "xxh128", "fast128")

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_R31 = np.uint64(31)
_R33 = np.uint64(33)


@numba.njit(inline="always")
def _rotl(x: np.uint64, r: np.uint64) -> np.uint64:
    return (x << r) | (x >> (np.uint64(64) - r))


@numba.njit(nogil=True, cache=True)
def _fast128(data, offsets):  # pragma: no cover - compiled
    n = len(offsets) - 1
    out = np.empty((n, 2), dtype=np.uint64)
    for i in range(n):
        s, e = offsets[i], offsets[i + 1]
        h1 = np.uint64(0x243F6A8885A308D3) ^ np.uint64(e - s)
        h2 = np.uint64(0x13198A2E03707344)
        p = s
        while p + 8 <= e:
            w = np.uint64(0)
            for k in range(8):
                w |= np.uint64(data[p + k]) << np.uint64(8 * k)
            h1 = _rotl(h1 ^ (w * _P1), _R31) * _P2
            h2 = _rotl(h2 + (w * _P2), _R33) * _P1 ^ h1
            p += 8
        w = np.uint64(0)
        k = 0
        while p < e:
            w |= np.uint64(data[p]) << np.uint64(8 * k)
            p += 1
            k += 1
        h1 = _rotl(h1 ^ (w * _P1), _R31) * _P2
        h2 = _rotl(h2 + (w * _P2), _R33) * _P1 ^ h1
        out[i, 0] = _fmix64(h1 ^ _fmix64(h2))
        out[i, 1] = _fmix64(h2 + h1)
    return out


def hash_texts(text: pd.Series, method: str = "md5") -> np.ndarray:
    """Return a ``(n, 2)`` int64 array: the 128-bit hash of each text's UTF-8 bytes.

    ``md5`` (interoperable), ``xxh128`` (needs the ``xxhash`` package) or ``fast128`` (a
    numba hash over the flat UTF-8 buffer, no per-document Python; not cryptographic).

    Examples
    --------
    >>> h = hash_texts(pd.Series(["a", "b", "a"]), "fast128")
    >>> bool((h[0] == h[2]).all()), bool((h[0] == h[1]).all())
    (True, False)
    """
    if method == "fast128":
        data, offsets = utf8_buffers(text)
        return _fast128(data, offsets).view(np.int64)
    values = text.astype(object).fillna("").tolist()
    if method == "md5":
        digests = [hashlib.md5(t.encode("utf-8", "surrogatepass")).digest() for t in values]
    elif method == "xxh128":
        import xxhash

        digests = [xxhash.xxh3_128_digest(t.encode("utf-8", "surrogatepass")) for t in values]
    else:
        raise ValueError(f"hash_method must be one of {HASH_METHODS}, got {method!r}")
    if not digests:
        return np.zeros((0, 2), dtype=np.int64)
    return np.frombuffer(b"".join(digests), dtype="<i8").reshape(-1, 2).copy()


def _hash_part(
    part: Any, text_column: str, id_column: str, method: str, partition_info: dict | None = None
) -> pd.DataFrame:
    part = _backend.to_pandas(part)
    h = hash_texts(part[text_column], method)
    out = pd.DataFrame(
        {"id": part[id_column].to_numpy(), "_h0": h[:, 0], "_h1": h[:, 1]},
    ).astype({"id": part[id_column].dtype})
    return with_uid(out, partition_info)


def _groups_part(part: pd.DataFrame, keep: str) -> pd.DataFrame:
    part = part[part.duplicated(["_h0", "_h1"], keep=False).to_numpy()]
    label = part.groupby(["_h0", "_h1"], sort=False).ngroup().to_numpy()
    return choose_keepers(part.assign(label=label), keep)


@dataclass
class ExactDeduplicationWorkflow:
    """Remove documents whose text is byte-identical to another's.

    Parameters
    ----------
    input_path : str or list of str, optional
        JSONL or Parquet files, a directory or a glob. Or give ``df``.
    output_path : str
        Where ``removed_ids/`` (and ``deduplicated/``) are written.
    text_column, id_column : str
        Columns holding the text and the document id (ids must be unique).
    input_blocksize : int or str, optional
        Partition size for the reader; default ``curator.io.blocksize``.
    hash_method : {"md5", "xxh128", "fast128"}
        128-bit hash of the UTF-8 text. Identical texts always share a hash; different
        texts collide with probability ~ n^2 / 2^129.
    keep : {"first", "last"}
        Which document of a group survives: the smallest id (``"first"``) or the largest.
    perform_removal : bool
        Also write the dataset without the removed documents.
    df : dask.dataframe.DataFrame, optional
        The input as a dask frame instead of ``input_path``.
    client : distributed.Client, optional
        Run on this client; otherwise on the active dask scheduler.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd, tempfile
    >>> df = dd.from_pandas(pd.DataFrame({"id": ["a", "b", "c"], "text": ["x", "y", "x"]}),
    ...                     npartitions=2)
    >>> out = tempfile.mkdtemp()
    >>> ExactDeduplicationWorkflow(output_path=out, df=df).run()["removed"]
    1
    """

    input_path: str | Sequence[str] | None = None
    output_path: str = "exact_dedup_output"
    text_column: str = "text"
    id_column: str = "id"
    input_blocksize: int | str | None = None
    hash_method: str = "md5"
    keep: str = "first"
    perform_removal: bool = False
    df: Any = field(default=None, repr=False)
    client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.hash_method not in HASH_METHODS:
            raise ValueError(f"hash_method must be one of {HASH_METHODS}, got {self.hash_method!r}")
        if self.keep not in ("first", "last"):
            raise ValueError(f"keep must be 'first' or 'last', got {self.keep!r}")

    def removed(self) -> Any:
        """The lazy dask frame of removed documents: ``id, group, _uid``."""
        df = self._input()
        hashed = df.map_partitions(
            _hash_part,
            self.text_column,
            self.id_column,
            self.hash_method,
            meta=pd.DataFrame(
                {
                    "id": pd.Series([], dtype=df._meta[self.id_column].dtype),
                    "_h0": pd.Series([], dtype="int64"),
                    "_h1": pd.Series([], dtype="int64"),
                    "_uid": pd.Series([], dtype="int64"),
                }
            ),
        )
        shuffled = hashed.shuffle(on="_h0", method=shuffle_method(self.client))
        return shuffled.map_partitions(
            _groups_part, self.keep, meta=removed_meta(df._meta[self.id_column].dtype)
        )

    def _input(self) -> Any:
        return read_input(
            self.input_path, self.df, self.text_column, self.id_column, self.input_blocksize
        )

    def run(self) -> dict[str, Any]:
        """Compute and write the result.

        Writes ``<output_path>/removed_ids/*.parquet`` (columns ``id``: the id as read,
        ``group``: the id of the document kept for that text), one row per removed document,
        and with ``perform_removal`` the kept documents to ``<output_path>/deduplicated/``.

        Returns
        -------
        dict
            ``documents``, ``duplicate_groups``, ``removed``, ``seconds`` and the paths.
        """
        t0 = time.perf_counter()
        os.makedirs(self.output_path, exist_ok=True)
        work = os.path.join(self.output_path, "_work")
        df = self._input()
        n_docs = len(df)
        removed_dir, n_removed, n_groups = write_removed(
            self.removed(), self.output_path, work if self.perform_removal else None
        )
        summary: dict[str, Any] = {
            "documents": int(n_docs),
            "duplicate_groups": n_groups,
            "removed": n_removed,
            "removed_ids": removed_dir,
        }
        if self.perform_removal:
            import dask.dataframe as dd

            uids = dd.read_parquet(os.path.join(work, "removed_uids"))
            summary["deduplicated"] = remove_documents(df, uids, self.output_path, self.client)
        summary["seconds"] = round(time.perf_counter() - t0, 3)
        return summary
