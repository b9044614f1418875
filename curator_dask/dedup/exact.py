"""Exact deduplication: documents with byte-identical text.

Each text is hashed to 128 bits, the ``(id, hash)`` rows are shuffled on the hash so that
every group of identical texts lands in one partition, and one document per group is kept.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

import dask
import numba
import numpy as np
import pandas as pd

from curator_dask import _backend
from curator_dask._kernels import KERNEL_OPT, share_compiles
from curator_dask.dedup._common import (
    DedupWorkflow,
    group_members,
    leased,
    members_meta,
    shuffle_method,
    with_uid,
)
from curator_dask.dedup._params import HASH_METHODS, ExactParams, take_input_blocksize
from curator_dask.dedup._runtime import (
    DedupResult,
    join,
)
from curator_dask.dedup.minhash import _fmix64, utf8_buffers
from curator_dask.io.parquet_dir import (
    get_fs,
    layout,
    parquet_files,
    read_parquet_dir,
    read_part_frames,
    read_parts,
    release_arrow_memory,
    remove_tree,
    write_frame,
    write_parquet_atomic,
)

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
    part: Any,
    text_column: str,
    id_column: str,
    method: str,
    docs_dir: str | None = None,
    storage_options: dict[str, Any] | None = None,
    partition_info: dict | None = None,
) -> pd.DataFrame:
    part = _backend.to_pandas(part)
    h = hash_texts(part[text_column], method)
    out = pd.DataFrame(
        {"id": part[id_column].to_numpy(), "_h0": h[:, 0], "_h1": h[:, 1]},
    ).astype({"id": part[id_column].dtype})
    out = with_uid(out, partition_info)
    if docs_dir is not None:  # the documents, for the removal (the input is read once)
        i = (partition_info or {}).get("number", 0)
        docs = part.assign(_uid=out["_uid"].to_numpy())
        write_parquet_atomic(docs, layout(docs_dir).part_path(i), storage_options)
    release_arrow_memory()
    return out


def _groups_part(part: pd.DataFrame, keep: str) -> pd.DataFrame:
    part = part[part.duplicated(["_h0", "_h1"], keep=False).to_numpy()]
    label = part.groupby(["_h0", "_h1"], sort=False).ngroup().to_numpy()
    return group_members(part.assign(label=label), keep)


@dataclass
class ExactDeduplicationWorkflow(ExactParams, DedupWorkflow):
    __doc__ = (
        (ExactParams.__doc__ or "").replace(
            "Parameters of :class:`~curator_dask.dedup.ExactDeduplicationWorkflow`.",
            "Remove documents whose text is byte-identical to another's.",
        )
        + """
    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd, tempfile
    >>> df = dd.from_pandas(pd.DataFrame({"id": ["a", "b", "c"], "text": ["x", "y", "x"]}),
    ...                     npartitions=2)
    >>> out = tempfile.mkdtemp()
    >>> ExactDeduplicationWorkflow(output_path=out, df=df).run().removed
    1
    """
    )

    method: ClassVar[str] = "exact-dedup"

    def __post_init__(self, input_blocksize: int | str | None) -> None:
        take_input_blocksize(self, input_blocksize)
        if self.hash_method not in HASH_METHODS:
            raise ValueError(f"hash_method must be one of {HASH_METHODS}, got {self.hash_method!r}")
        if self.keep not in ("first", "last"):
            raise ValueError(f"keep must be 'first' or 'last', got {self.keep!r}")

    def hashes(self, df: Any, docs_dir: str | None = None) -> Any:
        """The lazy frame ``id, _h0, _h1, _uid``: each document's 128-bit text hash.

        With ``docs_dir`` each partition's documents (with ``_uid``) are also written there,
        as ``part-<i>.parquet``, as a side effect of computing the hashes.
        """
        return df.map_partitions(
            _hash_part,
            self.text_column,
            self.id_column,
            self.hash_method,
            docs_dir,
            self.storage_options if docs_dir else None,
            meta=pd.DataFrame(
                {
                    "id": pd.Series([], dtype=df._meta[self.id_column].dtype),
                    "_h0": pd.Series([], dtype="int64"),
                    "_h1": pd.Series([], dtype="int64"),
                    "_uid": pd.Series([], dtype="int64"),
                }
            ),
        )

    def members(self, hashed: Any) -> Any:
        """Every duplicate group's members, ``id, group, _uid, removed``, from the hashes."""
        shuffled = hashed.shuffle(on="_h0", shuffle_method=shuffle_method(self.client))
        return shuffled.map_partitions(
            _groups_part, self.keep, meta=members_meta(hashed._meta["id"].dtype)
        )

    @leased
    def run(self) -> DedupResult:
        """Compute and write the result.

        Writes ``<output_path>/removed_ids/*.parquet`` (columns ``id``: the id as read,
        ``group``: the id of the document kept for that text), one row per removed document;
        with ``duplicate_groups`` every member to ``duplicate_groups/``; with
        ``perform_removal`` the kept documents to ``deduplicated/``; bad input records to
        ``<output_path>.curator/_quarantine/`` (beside ``output_path``). Each directory
        appears whole, with a ``<dir>.curator/_SUCCESS`` marker beside it. Scratch files (the
        hashes) go to ``<output_path>.curator/_work/`` and are removed at the end.

        Returns
        -------
        DedupResult
            Counts (``documents``, ``quarantined``, ``duplicate_groups``, ``removed``),
            ``seconds`` per step and ``paths``.

        A small input of files runs in memory, without a dask dataframe
        (``curator.dedup.in-memory-below``): the same partition functions on pandas frames,
        the same outputs.
        """
        run = self._begin()
        so = run.storage_options
        run.input.quarantine_path = join(run.work_path, "quarantine")
        hdir = join(run.work_path, "hashes")
        # the removal reads the documents kept by the hash pass, not the input again
        ddir = join(run.work_path, "docs") if self.perform_removal and run.input.paths else None
        in_memory = self._in_memory_reads(run)
        with run.reporter.step("hash"):
            if ddir is not None:
                remove_tree(ddir, so)
            if in_memory is not None:  # the same partition function on each read partition
                read, specs = in_memory
                meta = read.meta
                tasks = [
                    dask.delayed(_hash_part)(
                        dask.delayed(read, pure=False)(spec), self.text_column,
                        self.id_column, self.hash_method, ddir, so if ddir else None,
                        partition_info={"number": i},
                    )
                    for i, spec in enumerate(specs)
                ]  # fmt: skip
                hashes = run.reporter.compute(tasks, "hash")
                n_docs = write_frame(hashes, hdir, None, "hash", so)
            else:
                df = run.input.frame()
                meta = df._meta
                n_docs = write_frame(self.hashes(df, ddir), hdir, run.reporter, "hash", so)
        members: Any
        if in_memory is not None:  # one partition holds every group: no shuffle
            members = _groups_part(pd.concat(hashes, ignore_index=True), self.keep)
        else:
            members = self.members(read_parquet_dir(hdir, so, self.hashes(df)._meta))
        docs = None
        if ddir is not None:
            read_docs = read_part_frames if in_memory is not None else read_parts
            docs = read_docs(
                parquet_files(ddir, so), meta.assign(_uid=pd.Series([], dtype="int64")), so
            )
        result = self._finish(run, members, n_docs, run.work_path, documents_frame=docs)
        remove_tree(run.work_path, so)
        fs, parent = get_fs(run.work_path.rsplit("/", 1)[0], so)
        if fs.isdir(parent) and not fs.ls(parent):
            fs.rmdir(parent)  # the empty _work folder
        return result


# Each kernel compiles once per machine, however many worker processes start at once.
share_compiles(globals(), opt=KERNEL_OPT)
