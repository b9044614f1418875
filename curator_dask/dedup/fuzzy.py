"""Fuzzy (near-duplicate) deduplication: MinHash + LSH + connected components.

Steps, each a dask computation whose output is checkpointed under ``cache_path``:

1. ``minhash``: per input partition, shingle hashes -> MinHash signatures -> band hashes
   (:mod:`.minhash`, :mod:`.lsh`); one Parquet file per partition (``_uid, id, n_chars,
   n_shingles, b000 ...``).
2. ``lsh``: for each group of ``bands_per_iteration`` bands, shuffle ``(bucket, uid)`` on the
   bucket, keep buckets with >= 2 members and write them as star edges.
3. ``verify`` (``false_positive_check``): exact Jaccard of the shingle sets of the candidates,
   bucket by bucket (:func:`.lsh.verify_buckets`).
4. ``components``: connected components of the edges (:mod:`.components`).
5. keep one document per component; write ``removed_ids`` (and the deduplicated dataset).
"""

from __future__ import annotations

import glob
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from dask.base import tokenize

from curator_dask import _backend, config
from curator_dask.dedup._common import (
    UID_SHIFT,
    choose_keepers,
    input_fingerprint,
    is_done,
    mark_done,
    read_done,
    read_input,
    remove_documents,
    removed_meta,
    scheduler_for,
    shuffle_method,
    with_uid,
    write_parquet_atomic,
    write_removed,
)
from curator_dask.dedup.components import connected_components
from curator_dask.dedup.lsh import band_hashes, bucket_edges, verify_buckets
from curator_dask.dedup.minhash import (
    minhash_permutations,
    minhash_signatures,
    shingle_hashes,
    unique_shingles,
)
from curator_dask.dedup.planner import cluster_memory, plan_lsh

_KEEP = ("first", "longest")


def _band_col(k: int) -> str:
    return f"b{k:03d}"


@dataclass(frozen=True)
class _SigParams:
    kind: Literal["word", "char"]
    ngram: int
    normalization: str
    num_bands: int
    minhashes_per_band: int
    seed: int
    use_64_bit_hash: bool
    text_column: str
    id_column: str


def _minhash_partition(
    part: Any, index: int, p: _SigParams, path: str, device: str = "auto"
) -> int:
    gpu = device == "gpu" or (device == "auto" and not isinstance(part, pd.DataFrame))
    pdf = _backend.to_pandas(part[[p.id_column, p.text_column]])
    text = pdf[p.text_column]
    hashes, offsets = shingle_hashes(text, p.ngram, p.kind, p.normalization)
    perms = minhash_permutations(p.num_bands * p.minhashes_per_band, p.seed, p.use_64_bit_hash)
    if gpu:  # the permutation-min step on the GPU; shingling stayed on the host
        import cupy

        sig = cupy.asnumpy(
            minhash_signatures(
                cupy.asarray(hashes),
                cupy.asarray(offsets),
                cupy.asarray(perms),
                p.use_64_bit_hash,
            )
        )
    else:
        sig = minhash_signatures(hashes, offsets, perms, p.use_64_bit_hash)
    bands = band_hashes(sig, p.num_bands, p.minhashes_per_band)
    n = len(pdf)
    cols: dict[str, Any] = {
        "_uid": (np.int64(index) << UID_SHIFT) + np.arange(n, dtype=np.int64),
        "id": pdf[p.id_column].to_numpy(),
        "n_chars": text.str.len().fillna(0).to_numpy(np.int64),
        "n_shingles": np.diff(offsets).astype(np.int64),
    }
    for k in range(p.num_bands):
        cols[_band_col(k)] = bands[:, k]
    frame = pd.DataFrame(cols).astype({"id": pdf[p.id_column].dtype})
    write_parquet_atomic(frame, path)
    return n


def _melt_bands(part: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    part = part[part["n_shingles"].to_numpy() > 0]
    uid = part["_uid"].to_numpy(np.int64)
    return pd.DataFrame(
        {
            "bucket": np.concatenate([part[c].to_numpy(np.int64) for c in cols])
            if cols
            else np.zeros(0, np.int64),
            "uid": np.tile(uid, len(cols)),
        }
    )


def _edges_part(part: pd.DataFrame) -> pd.DataFrame:
    return bucket_edges(part["bucket"].to_numpy(), part["uid"].to_numpy())


def _members_part(part: pd.DataFrame) -> pd.DataFrame:
    m = pd.concat(
        [
            pd.DataFrame({"bucket": part["bucket"].to_numpy(), "uid": part["uid"].to_numpy()}),
            pd.DataFrame({"bucket": part["bucket"].to_numpy(), "uid": part["anchor"].to_numpy()}),
        ],
        ignore_index=True,
    )
    return m.drop_duplicates()


def _candidate_uids(part: pd.DataFrame) -> pd.DataFrame:
    uid = np.unique(part["uid"].to_numpy(np.int64))
    return pd.DataFrame({"uid": uid, "_part": uid >> UID_SHIFT})


def _candidate_texts(
    part: Any, cand: pd.DataFrame, text_column: str, partition_info: dict | None = None
) -> pd.DataFrame:
    part = with_uid(_backend.to_pandas(part[[text_column]]), partition_info)
    hit = part["_uid"].isin(cand["uid"].to_numpy()).to_numpy()
    return pd.DataFrame(
        {"uid": part["_uid"].to_numpy()[hit], "text": part[text_column].to_numpy()[hit]}
    ).astype({"text": object})


def _verify_part(
    part: pd.DataFrame,
    kind: Literal["word", "char"],
    ngram: int,
    normalization: str,
    threshold: float,
) -> pd.DataFrame:
    part = part.sort_values(["bucket", "uid"], kind="stable")
    hashes, offsets = shingle_hashes(part["text"], ngram, kind, normalization)
    sets, set_off = unique_shingles(hashes, offsets)
    a, b, _ = verify_buckets(part["bucket"].to_numpy(), sets, set_off, threshold)
    uid = part["uid"].to_numpy(np.int64)
    u, v = uid[a], uid[b]
    return pd.DataFrame({"u": np.minimum(u, v), "v": np.maximum(u, v)}).drop_duplicates()


_EDGES_META = pd.DataFrame({"u": pd.Series([], dtype="int64"), "v": pd.Series([], dtype="int64")})


@dataclass
class FuzzyDeduplicationWorkflow:
    """Find and remove near-duplicate documents with MinHash and LSH.

    Parameters
    ----------
    input_path : str or list of str, optional
        JSONL or Parquet files, a directory or a glob. Or give ``df``.
    cache_path : str
        Where intermediate results are checkpointed (see "Cache and resume" in
        ``docs/dedup.md``). Keyed by the input and the parameters: a changed parameter never
        reuses stale results; a restarted run continues where it stopped.
    output_path : str
        Where ``removed_ids/`` (and ``deduplicated/``) are written.
    text_column, id_column : str
        Text and (unique) document id columns.
    input_blocksize : int or str, optional
        Partition size for the reader.
    char_ngrams : int, optional
        Character shingle length (raw text unless ``normalization="simple"``); used when
        ``word_ngrams`` is None.
    word_ngrams : int, optional
        Word shingle length after the ``"simple"`` normalisation (NFKC, lower-case,
        ``[\\W_]+`` -> space); a document with fewer tokens gets one shingle, all its tokens.
    num_bands, minhashes_per_band : int
        LSH bands and MinHash values per band (see :mod:`curator_dask.dedup.lsh`).
    bands_per_iteration : int, optional
        Bands bucketed per LSH pass; default ``curator.dedup.bands-per-iteration`` or the
        memory planner (:func:`curator_dask.dedup.planner.plan_lsh`).
    use_64_bit_hash : bool
        64-bit MinHash values (fewer collisions, twice the memory) instead of 32-bit.
    seed : int
        Seed of the MinHash functions.
    jaccard_threshold : float
        Similarity threshold of the candidate check.
    false_positive_check : bool
        Verify every candidate pair's exact Jaccard before it becomes an edge.
    keep : {"first", "longest"}
        Survivor of each duplicate group: smallest id, or most characters (ties: smallest id).
    perform_removal : bool
        Also write the dataset without the removed documents.
    normalization : {"simple", "none"}, optional
        Text normalisation before shingling; default ``"simple"`` for words, ``"none"``
        for characters.
    df : dask.dataframe.DataFrame, optional
        Input frame instead of ``input_path``.
    client : distributed.Client, optional
        Run on this client; otherwise on the active dask scheduler.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd, tempfile
    >>> texts = ["the cat sat on the mat today", "the cat sat on the mat today!", "dogs bark"]
    >>> df = dd.from_pandas(pd.DataFrame({"id": ["a", "b", "c"], "text": texts}), npartitions=2)
    >>> tmp = tempfile.mkdtemp()
    >>> wf = FuzzyDeduplicationWorkflow(cache_path=tmp + "/cache", output_path=tmp + "/out",
    ...                                 word_ngrams=3, df=df, false_positive_check=True)
    >>> wf.run()["removed"]
    1
    """

    input_path: str | Sequence[str] | None = None
    cache_path: str = "fuzzy_dedup_cache"
    output_path: str = "fuzzy_dedup_output"
    text_column: str = "text"
    id_column: str = "id"
    input_blocksize: int | str | None = None
    char_ngrams: int | None = 24
    word_ngrams: int | None = None
    num_bands: int = 20
    minhashes_per_band: int = 13
    bands_per_iteration: int | None = None
    use_64_bit_hash: bool = False
    seed: int = 42
    jaccard_threshold: float = 0.8
    false_positive_check: bool = False
    keep: str = "first"
    perform_removal: bool = False
    normalization: str | None = None
    df: Any = field(default=None, repr=False)
    client: Any = field(default=None, repr=False)
    stats: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.word_ngrams is None and self.char_ngrams is None:
            raise ValueError("give char_ngrams or word_ngrams")
        for name in ("num_bands", "minhashes_per_band"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.bands_per_iteration is not None and self.bands_per_iteration < 1:
            raise ValueError("bands_per_iteration must be >= 1")
        if not 0.0 < self.jaccard_threshold <= 1.0:
            raise ValueError(f"jaccard_threshold must be in (0, 1], got {self.jaccard_threshold}")
        if self.keep not in _KEEP:
            raise ValueError(f"keep must be one of {_KEEP}, got {self.keep!r}")

    # -- parameters and cache layout ---------------------------------------------------
    @property
    def _sig_params(self) -> _SigParams:
        kind: Literal["word", "char"] = "word" if self.word_ngrams is not None else "char"
        ngram = int(self.word_ngrams if kind == "word" else self.char_ngrams)  # type: ignore[arg-type]
        norm = self.normalization or ("simple" if kind == "word" else "none")
        return _SigParams(
            kind,
            ngram,
            norm,
            int(self.num_bands),
            int(self.minhashes_per_band),
            int(self.seed),
            bool(self.use_64_bit_hash),
            self.text_column,
            self.id_column,
        )

    def cache_dir(self) -> str:
        """The cache directory of this input and these signature parameters."""
        key = tokenize(
            input_fingerprint(self.input_path, self.df),
            str(self.input_blocksize),
            self._sig_params,
        )
        return os.path.join(self.cache_path, f"fuzzy-{key[:16]}")

    def _input(self) -> Any:
        return read_input(
            self.input_path, self.df, self.text_column, self.id_column, self.input_blocksize
        )

    # -- step 1 -------------------------------------------------------------------------
    def compute_minhashes(self) -> str:
        """Step 1: write one Parquet file of band hashes per input partition; resumable."""
        root = self.cache_dir()
        out = os.path.join(root, "minhash")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(root, "manifest.json"), "w") as f:
            json.dump(
                {
                    "input": self.input_path if self.df is None else "<dask dataframe>",
                    "params": self._sig_params.__dict__,
                    "input_blocksize": str(self.input_blocksize),
                },
                f,
                indent=1,
                default=str,
            )
        if is_done(out):
            self.stats["minhash_partitions_computed"] = 0
            return out
        df = self._input()
        parts = df.to_delayed()
        p = self._sig_params
        paths = [os.path.join(out, f"part-{i:05d}.parquet") for i in range(len(parts))]
        todo = [i for i in range(len(parts)) if not os.path.exists(paths[i])]
        # where signatures are computed changes speed, not results: config, not a parameter
        device = str(config.get("dedup.minhash-device", "auto"))
        if device not in ("auto", "cpu", "gpu"):
            raise ValueError(f"curator.dedup.minhash-device must be auto|cpu|gpu, got {device!r}")
        tasks = [dask.delayed(_minhash_partition)(parts[i], i, p, paths[i], device) for i in todo]
        dask.compute(*tasks)
        docs = sum(pq.ParquetFile(x).metadata.num_rows for x in paths)
        mark_done(out, {"partitions": len(parts), "documents": int(docs)})
        self.stats["minhash_partitions_computed"] = len(todo)
        return out

    def _minhash_files(self) -> list[str]:
        return sorted(glob.glob(os.path.join(self.cache_dir(), "minhash", "part-*.parquet")))

    # -- step 2 -------------------------------------------------------------------------
    def plan(self, num_docs: int) -> int:
        """``bands_per_iteration``: the argument, ``curator.dedup.bands-per-iteration``, or
        the memory planner's choice for ``num_docs`` on the current cluster."""
        if self.bands_per_iteration is not None:
            return int(self.bands_per_iteration)
        configured = config.get("dedup.bands-per-iteration", None)
        if configured is not None:
            return int(configured)
        n_workers, memory = cluster_memory(self.client)
        plan = plan_lsh(num_docs, self.num_bands, n_workers, memory)
        self.stats["plan"] = plan.to_dict()
        return plan.bands_per_iteration

    def band_groups(self, num_docs: int) -> list[tuple[int, int]]:
        """The ``[first, last)`` band ranges of the LSH passes."""
        bpi = min(self.plan(num_docs), self.num_bands)
        return [(a, min(a + bpi, self.num_bands)) for a in range(0, self.num_bands, bpi)]

    def _group_dir(self, group: tuple[int, int]) -> str:
        return os.path.join(self.cache_dir(), "lsh", f"bands-{group[0]:03d}-{group[1]:03d}")

    def _run_band_group(self, group: tuple[int, int]) -> None:
        cols = [_band_col(k) for k in range(*group)]
        files = self._minhash_files()
        sig = dd.read_parquet(files, columns=["_uid", "n_shingles", *cols])
        rows = sig.map_partitions(
            _melt_bands,
            cols,
            meta=pd.DataFrame(
                {"bucket": pd.Series([], dtype="int64"), "uid": pd.Series([], dtype="int64")}
            ),
        )
        shuffled = rows.shuffle(on="bucket", method=shuffle_method(self.client))
        edges = shuffled.map_partitions(
            _edges_part,
            meta=pd.DataFrame(
                {
                    "bucket": pd.Series([], dtype="int64"),
                    "anchor": pd.Series([], dtype="int64"),
                    "uid": pd.Series([], dtype="int64"),
                }
            ),
        )
        out = self._group_dir(group)
        edges.to_parquet(os.path.join(out, "edges"), write_index=False, overwrite=True)
        mark_done(out, {"bands": list(group)})

    def compute_lsh(self, num_docs: int) -> list[str]:
        """Step 2: bucket each band group; skip groups already done. Returns their dirs."""
        done = 0
        dirs = []
        for group in self.band_groups(num_docs):
            d = self._group_dir(group)
            if not is_done(d):
                self._run_band_group(group)
                done += 1
            dirs.append(d)
        self.stats["lsh_groups_computed"] = done
        self.stats["lsh_groups"] = len(dirs)
        return dirs

    def _edge_rows(self, group_dirs: list[str]) -> Any:
        files = sorted(
            f for d in group_dirs for f in glob.glob(os.path.join(d, "edges", "*.parquet"))
        )
        meta = pd.DataFrame(
            {
                "bucket": pd.Series([], dtype="int64"),
                "anchor": pd.Series([], dtype="int64"),
                "uid": pd.Series([], dtype="int64"),
            }
        )
        return dd.read_parquet(files) if files else dd.from_pandas(meta, npartitions=1)

    # -- step 3 -------------------------------------------------------------------------
    def verify_candidates(self, group_dirs: list[str]) -> str:
        """Step 3: verified edges ``u, v`` (exact Jaccard >= threshold); resumable."""
        key = tokenize(self.jaccard_threshold, [os.path.basename(d) for d in group_dirs])
        out = os.path.join(self.cache_dir(), f"verify-{key[:12]}")
        if is_done(out):
            self.stats["verify_computed"] = 0
            return out
        method = shuffle_method(self.client)
        rows = self._edge_rows(group_dirs)
        bmeta = pd.DataFrame(
            {"bucket": pd.Series([], dtype="int64"), "uid": pd.Series([], dtype="int64")}
        )
        members = (
            rows.map_partitions(_members_part, meta=bmeta)
            .shuffle(on="bucket", method=method)
            .map_partitions(lambda p: p.drop_duplicates(), meta=bmeta)
        )
        df = self._input()
        n = df.npartitions
        cand = members[["uid"]].map_partitions(
            _candidate_uids,
            meta=pd.DataFrame(
                {"uid": pd.Series([], dtype="int64"), "_part": pd.Series([], dtype="int64")}
            ),
        )
        cand = cand.set_index("_part", divisions=[*range(n), n])
        texts = df.map_partitions(
            _candidate_texts,
            cand,
            self.text_column,
            align_dataframes=False,
            meta=pd.DataFrame(
                {"uid": pd.Series([], dtype="int64"), "text": pd.Series([], dtype=object)}
            ),
        )
        joined = members.merge(texts, on="uid", how="inner", shuffle_method=method)
        p = self._sig_params
        edges = joined.shuffle(on="bucket", method=method).map_partitions(
            _verify_part,
            p.kind,
            p.ngram,
            p.normalization,
            float(self.jaccard_threshold),
            meta=_EDGES_META,
        )
        edges.to_parquet(os.path.join(out, "edges"), write_index=False, overwrite=True)
        mark_done(out, {"threshold": self.jaccard_threshold})
        self.stats["verify_computed"] = 1
        return out

    # -- steps 4 and 5 --------------------------------------------------------------------
    def _edges(self, group_dirs: list[str]) -> tuple[Any, str]:
        if self.false_positive_check:
            vdir = self.verify_candidates(group_dirs)
            files = sorted(glob.glob(os.path.join(vdir, "edges", "*.parquet")))
            edges = dd.read_parquet(files) if files else dd.from_pandas(_EDGES_META, 1)
            return edges, os.path.join(vdir, "components")
        rows = self._edge_rows(group_dirs)
        edges = rows.map_partitions(
            lambda p: pd.DataFrame({"u": p["anchor"].to_numpy(), "v": p["uid"].to_numpy()}),
            meta=_EDGES_META,
        )
        key = tokenize("star", [os.path.basename(d) for d in group_dirs])
        return edges, os.path.join(self.cache_dir(), f"components-{key[:12]}")

    def removed(self, labels: Any) -> Any:
        """Lazy frame ``id, group, _uid`` of removed documents, from component labels."""
        method = shuffle_method(self.client)
        meta_df = dd.read_parquet(self._minhash_files(), columns=["_uid", "id", "n_chars"])
        joined = labels.merge(meta_df, left_on="uid", right_on="_uid", shuffle_method=method)
        id_dtype = meta_df._meta["id"].dtype
        return joined.shuffle(on="label", method=method).map_partitions(
            choose_keepers, self.keep, meta=removed_meta(id_dtype)
        )

    def run(self) -> dict[str, Any]:
        """Run all steps, reusing finished ones from ``cache_path``.

        Writes ``<output_path>/removed_ids/*.parquet`` with columns ``id`` (as read) and
        ``group`` (the id of the document kept for that duplicate group), one row per removed
        document; with ``perform_removal`` the kept documents go to
        ``<output_path>/deduplicated/``. Intermediate results go under
        :meth:`cache_dir`.

        Returns
        -------
        dict
            ``documents``, ``duplicate_groups``, ``removed``, ``seconds`` per step,
            ``bands_per_iteration`` and the paths.
        """
        t0 = time.perf_counter()
        seconds: dict[str, float] = {}
        with scheduler_for(self.client):
            sig_dir = self.compute_minhashes()
            seconds["minhash"] = time.perf_counter() - t0
            num_docs = int(read_done(sig_dir)["documents"])
            t = time.perf_counter()
            group_dirs = self.compute_lsh(num_docs)
            seconds["lsh"] = time.perf_counter() - t
            t = time.perf_counter()
            edges, comp_dir = self._edges(group_dirs)
            seconds["verify"] = time.perf_counter() - t
            t = time.perf_counter()
            labels_dir = os.path.join(comp_dir, "labels")
            if not is_done(comp_dir):
                labels = connected_components(edges, os.path.join(comp_dir, "work"), self.client)
                labels.to_parquet(labels_dir, write_index=False, overwrite=True)
                mark_done(comp_dir)
            files = sorted(glob.glob(os.path.join(labels_dir, "*.parquet")))
            lmeta = pd.DataFrame(
                {"uid": pd.Series([], dtype="int64"), "label": pd.Series([], dtype="int64")}
            )
            labels = dd.read_parquet(files) if files else dd.from_pandas(lmeta, npartitions=1)
            seconds["components"] = time.perf_counter() - t
            t = time.perf_counter()
            os.makedirs(self.output_path, exist_ok=True)
            work = os.path.join(self.output_path, "_work")
            removed_dir, n_removed, n_groups = write_removed(
                self.removed(labels), self.output_path, work if self.perform_removal else None
            )
            summary: dict[str, Any] = {
                "documents": num_docs,
                "duplicate_groups": n_groups,
                "removed": n_removed,
                "removed_ids": removed_dir,
                "cache_dir": self.cache_dir(),
                "bands_per_iteration": self.band_groups(num_docs)[0][1],
            }
            if self.perform_removal:
                uids = dd.read_parquet(os.path.join(work, "removed_uids"))
                summary["deduplicated"] = remove_documents(
                    self._input(), uids, self.output_path, self.client
                )
            seconds["output"] = time.perf_counter() - t
        summary["seconds"] = {k: round(v, 3) for k, v in seconds.items()}
        summary["seconds"]["total"] = round(time.perf_counter() - t0, 3)
        summary["stats"] = dict(self.stats)
        return summary
