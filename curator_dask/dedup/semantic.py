"""Semantic deduplication: sentence embeddings, k-means, and cosine similarity within clusters.

Steps, each a dask computation whose output is checkpointed under ``cache_path`` in a
directory named by a hash of the input and of every parameter that step depends on (so a
changed parameter never reuses a stale result, and a restarted run skips finished steps):

1. ``embeddings``: :class:`~curator_dask.embeddings.EmbeddingCreator` on every document;
   Parquet ``id, _uid, embedding`` (``_uid = partition << 32 | row``, the input order).
2. ``kmeans``: k-means on the embeddings (scikit-learn on CPU; cuML under dask's ``cudf``
   backend); every document gets its nearest centroid (``cluster``) and its cosine
   similarity to that centroid (``centroid_sim``).
3. ``duplicates``: the documents are shuffled by cluster; within each cluster they are
   ordered by the ``keep`` rule and a document is removed when its cosine similarity to an
   earlier *kept* document of the cluster is at least ``1 - eps``.

The result is ``<output_path>/removed_ids/*.parquet`` with columns ``id`` and ``group`` (the
id of the kept document it duplicates): the same format as the fuzzy and exact workflows.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.base import tokenize

from curator_dask import _backend, config

_KEEP = ("hard", "easy", "first")
_UID_SHIFT = 32


@dataclass
class SemanticDeduplicationWorkflow:
    """Find semantically near-duplicate documents with embeddings and k-means.

    Two documents are duplicates when the cosine distance of their embeddings,
    ``1 - cos(a, b)``, is at most ``eps`` and k-means put them in the same cluster.

    Parameters
    ----------
    cache_path : str
        Where the steps' results are checkpointed (embeddings, clusters, duplicates).
    output_path : str
        Where ``removed_ids/`` is written.
    input_path : str or list of str, optional
        JSONL or Parquet files, a directory or a glob, read with :mod:`curator_dask.io`.
        Or give ``df``.
    df : dask.dataframe.DataFrame, optional
        The input frame instead of ``input_path``.
    text_column, id_column : str
        Text and (unique) document id columns.
    n_clusters : int
        k-means clusters (capped at the number of documents). Only documents of one cluster
        are compared, so more clusters is faster and may miss pairs split across clusters.
    eps : float
        Cosine-distance threshold: a document within ``eps`` of a kept document of its
        cluster is removed (``eps=0.01``: cosine similarity >= 0.99).
    keep : {"hard", "easy", "first"}
        Which document of a set of duplicates survives. Documents of a cluster are visited in
        an order and each is kept unless it is within ``eps`` of one already kept:
        ``"hard"`` visits the documents farthest from the centroid first (keeps the least
        typical, as in SemDeDup), ``"easy"`` the nearest first, ``"first"`` in input order.
        Ties are broken by input order, so the result is deterministic.
    model_dir : str, optional
        Local embedding model directory; default: the bundled all-MiniLM-L6-v2.
    model_inference_batch_size, max_chars, max_tokens
        See :class:`~curator_dask.embeddings.EmbeddingCreator`.
    seed : int
        Seed of k-means.
    kmeans_max_iter : int
        Maximum k-means iterations.
    input_blocksize : int or str, optional
        Partition size for the reader.
    device : str
        Where the embedding model runs (``"auto"``, ``"cpu"``, ``"cuda"``).
    client : distributed.Client, optional
        Run on this client; otherwise on the active dask scheduler.

    Examples
    --------
    >>> wf = SemanticDeduplicationWorkflow(
    ...     input_path="data/", cache_path="cache/", output_path="out/",
    ...     n_clusters=100, eps=0.01, keep="hard")
    >>> wf.run()["removed"]  # doctest: +SKIP
    """

    cache_path: str
    output_path: str
    input_path: str | Sequence[str] | None = None
    df: Any = field(default=None, repr=False)
    text_column: str = "text"
    id_column: str = "id"
    n_clusters: int = 100
    eps: float = 0.01
    keep: str = "hard"
    model_dir: str | None = None
    model_inference_batch_size: int = 128
    max_chars: int | None = 2000
    max_tokens: int | None = None
    seed: int = 42
    kmeans_max_iter: int = 100
    input_blocksize: int | str | None = None
    device: str = "auto"
    client: Any = field(default=None, repr=False)
    stats: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.input_path is None and self.df is None:
            raise ValueError("give input_path or df")
        if self.n_clusters < 1:
            raise ValueError(f"n_clusters must be >= 1, got {self.n_clusters}")
        if not 0.0 <= self.eps < 2.0:
            raise ValueError(f"eps (a cosine distance) must be in [0, 2), got {self.eps}")
        if self.keep not in _KEEP:
            raise ValueError(f"keep must be one of {_KEEP}, got {self.keep!r}")
        if self.model_dir is not None:
            self.model_dir = str(self.model_dir)

    # -- cache layout ------------------------------------------------------------------
    def _input_key(self) -> str:
        if self.df is not None:
            return tokenize(self.df)
        return _file_fingerprint(self.input_path)

    def _embedding_stage(self) -> Any:
        from curator_dask.embeddings import EmbeddingCreator

        return EmbeddingCreator(
            model_dir=self.model_dir,
            text_column=self.text_column,
            embedding_column="embedding",
            model_inference_batch_size=self.model_inference_batch_size,
            max_chars=self.max_chars,
            max_tokens=self.max_tokens,
            device=self.device,
        )

    def step_dirs(self) -> dict[str, str]:
        """The cache directory of each step for this input and these parameters."""
        stage = self._embedding_stage()
        model_key = _model_fingerprint(stage.resolved_model_dir)
        emb = tokenize(
            "embeddings", self._input_key(), str(self.input_blocksize), self.text_column,
            self.id_column, model_key, self.max_chars, self.max_tokens,
        )  # fmt: skip
        km = tokenize("kmeans", emb, self.n_clusters, self.seed, self.kmeans_max_iter)
        dup = tokenize("duplicates", km, float(self.eps), self.keep)
        root = os.path.join(self.cache_path, "semantic")
        return {
            "embeddings": os.path.join(root, f"embeddings-{emb[:16]}"),
            "kmeans": os.path.join(root, f"kmeans-{km[:16]}"),
            "duplicates": os.path.join(root, f"duplicates-{dup[:16]}"),
        }

    # -- steps -------------------------------------------------------------------------
    def _input(self) -> Any:
        if self.df is not None:
            return self.df
        from curator_dask.io import read_jsonl, read_parquet

        paths = _input_files(self.input_path)
        is_parquet = bool(paths) and all(p.endswith(".parquet") for p in paths)
        if is_parquet:
            return read_parquet(
                paths,
                text_column=self.text_column,
                id_column=self.id_column,
                blocksize=self.input_blocksize,
            )
        return read_jsonl(
            paths,
            text_column=self.text_column,
            id_column=self.id_column,
            blocksize=self.input_blocksize,
        )

    def compute_embeddings(self) -> str:
        """Step 1: embed every document; skipped if already done. Returns its directory."""
        out = self.step_dirs()["embeddings"]
        if _is_done(out):
            self.stats["embeddings_computed"] = 0
            return out
        _clear(out)
        df = self._input()
        meta = df._meta.assign(_uid=pd.Series([], dtype="int64"))
        df = df.map_partitions(_with_uid, meta=meta)
        df = self._embedding_stage()(df)[[self.id_column, "_uid", "embedding"]]
        if self.id_column != "id":
            df = df.rename(columns={self.id_column: "id"})
        df.to_parquet(os.path.join(out, "data"), write_index=False)
        n = _count_rows(os.path.join(out, "data"))
        _mark_done(out, {"documents": n})
        self.stats["embeddings_computed"] = 1
        return out

    def compute_clusters(self, emb_dir: str) -> str:
        """Step 2: k-means and nearest centroid per document; skipped if already done."""
        out = self.step_dirs()["kmeans"]
        if _is_done(out):
            self.stats["kmeans_computed"] = 0
            return out
        _clear(out)
        from curator_dask.embeddings import column_to_embeddings, read_embeddings

        data = os.path.join(emb_dir, "data")
        vectors = column_to_embeddings(
            read_embeddings(data, columns=["embedding"])["embedding"].compute()
        )
        n_clusters = min(self.n_clusters, len(vectors))
        centroids = _fit_kmeans(vectors, n_clusters, self.seed, self.kmeans_max_iter)
        os.makedirs(out, exist_ok=True)
        np.save(os.path.join(out, "centroids.npy"), centroids)
        emb = read_embeddings(data)
        meta = emb._meta.assign(
            cluster=pd.Series([], dtype="int64"), centroid_sim=pd.Series([], dtype="float32")
        )
        assigned = emb.map_partitions(_assign_clusters, centroids, meta=meta)
        assigned.to_parquet(os.path.join(out, "data"), write_index=False)
        _mark_done(out, {"n_clusters": int(n_clusters)})
        self.stats["kmeans_computed"] = 1
        return out

    def compute_duplicates(self, km_dir: str) -> str:
        """Step 3: duplicates within each cluster; skipped if already done."""
        out = self.step_dirs()["duplicates"]
        if _is_done(out):
            self.stats["duplicates_computed"] = 0
            return out
        _clear(out)
        from curator_dask.embeddings import read_embeddings

        assigned = read_embeddings(os.path.join(km_dir, "data"))
        method = _shuffle_method(self.client)
        shuffled = assigned.shuffle(on="cluster", method=method)
        id_dtype = assigned._meta["id"].dtype
        meta = pd.DataFrame(
            {
                "id": pd.Series([], dtype=id_dtype),
                "group": pd.Series([], dtype=id_dtype),
                "cosine_similarity": pd.Series([], dtype="float32"),
                "cluster": pd.Series([], dtype="int64"),
                "_uid": pd.Series([], dtype="int64"),
            }
        )
        found = shuffled.map_partitions(
            _duplicates_in_partition, float(self.eps), self.keep, meta=meta
        )
        found.to_parquet(os.path.join(out, "data"), write_index=False)
        _mark_done(out, {"eps": self.eps, "keep": self.keep})
        self.stats["duplicates_computed"] = 1
        return out

    def run(self) -> dict[str, Any]:
        """Run the three steps (reusing finished ones) and write the removed ids.

        Writes ``<output_path>/removed_ids/*.parquet`` with columns ``id`` and ``group``
        (the id of the kept document), one row per removed document. Intermediate results
        go under ``<cache_path>/semantic/``.

        Returns
        -------
        dict
            ``documents``, ``n_clusters``, ``removed``, ``duplicate_groups``,
            ``removed_ids``, ``cache_dirs``, ``seconds`` per step and ``stats`` (which
            steps were computed rather than reused).
        """
        t0 = time.perf_counter()
        seconds: dict[str, float] = {}
        ctx = dask.config.set(scheduler=self.client) if self.client is not None else nullcontext()
        with ctx:
            t = time.perf_counter()
            emb_dir = self.compute_embeddings()
            seconds["embeddings"] = time.perf_counter() - t
            t = time.perf_counter()
            km_dir = self.compute_clusters(emb_dir)
            seconds["kmeans"] = time.perf_counter() - t
            t = time.perf_counter()
            dup_dir = self.compute_duplicates(km_dir)
            seconds["duplicates"] = time.perf_counter() - t
            t = time.perf_counter()
            removed = dd.read_parquet(os.path.join(dup_dir, "data"), columns=["id", "group"])
            removed_dir = os.path.join(self.output_path, "removed_ids")
            removed.to_parquet(removed_dir, write_index=False, overwrite=True)
            n_removed = _count_rows(removed_dir)
            n_groups = int(removed["group"].nunique().compute()) if n_removed else 0
            seconds["output"] = time.perf_counter() - t
        summary: dict[str, Any] = {
            "documents": int(_read_done(emb_dir)["documents"]),
            "n_clusters": int(_read_done(km_dir)["n_clusters"]),
            "removed": n_removed,
            "duplicate_groups": n_groups,
            "removed_ids": removed_dir,
            "cache_dirs": {"embeddings": emb_dir, "kmeans": km_dir, "duplicates": dup_dir},
            "seconds": {k: round(v, 3) for k, v in seconds.items()},
            "stats": dict(self.stats),
        }
        summary["seconds"]["total"] = round(time.perf_counter() - t0, 3)
        return summary

    def duplicate_pairs(self) -> pd.DataFrame:
        """The removed documents with their kept document, similarity and cluster.

        Reads the last step's cache (run :meth:`run` first): columns ``id, group,
        cosine_similarity, cluster``.
        """
        dup_dir = self.step_dirs()["duplicates"]
        if not _is_done(dup_dir):
            raise FileNotFoundError(f"no finished duplicates step in {dup_dir}; call run()")
        cols = ["id", "group", "cosine_similarity", "cluster"]
        return pd.read_parquet(os.path.join(dup_dir, "data"), columns=cols)


# -- partition functions ---------------------------------------------------------------
def _with_uid(part: Any, partition_info: dict[str, Any] | None = None) -> Any:
    i = (partition_info or {}).get("number", 0)
    uid = (np.int64(i) << _UID_SHIFT) + np.arange(len(part), dtype=np.int64)
    lib = _frame_lib(part)
    return part.assign(_uid=lib.Series(uid, index=part.index))


def _assign_clusters(part: Any, centroids: np.ndarray) -> Any:
    """Nearest centroid (Euclidean, as k-means assigns) and cosine similarity to it."""
    from curator_dask.embeddings import column_to_embeddings

    lib = _frame_lib(part)
    if len(part) == 0:
        return part.assign(
            cluster=lib.Series([], dtype="int64"), centroid_sim=lib.Series([], dtype="float32")
        )
    vectors = column_to_embeddings(part["embedding"])
    xp = _backend.array_module(vectors)
    c = xp.asarray(centroids, dtype=xp.float32)
    dist = (c * c).sum(axis=1)[None, :] - 2.0 * vectors @ c.T
    cluster = dist.argmin(axis=1)
    cn = c / xp.maximum(xp.linalg.norm(c, axis=1, keepdims=True), 1e-12)
    sim = (vectors * cn[cluster]).sum(axis=1).astype(xp.float32)
    return part.assign(
        cluster=lib.Series(cluster.astype(xp.int64), index=part.index),
        centroid_sim=lib.Series(sim, index=part.index),
    )


def _duplicates_in_partition(part: Any, eps: float, keep: str) -> pd.DataFrame:
    """Removed documents of every cluster in ``part`` (whole clusters, after the shuffle)."""
    from curator_dask.embeddings import column_to_embeddings

    part = _backend.to_pandas(part)
    out = []
    if len(part):
        vectors = column_to_embeddings(part["embedding"])
        for _, rows in part.groupby("cluster", sort=True).indices.items():
            out.append(_cluster_duplicates(part.iloc[rows], vectors[rows], eps, keep))
    if not out:
        id_dtype = part["id"].dtype
        return pd.DataFrame(
            {
                "id": pd.Series([], dtype=id_dtype),
                "group": pd.Series([], dtype=id_dtype),
                "cosine_similarity": pd.Series([], dtype="float32"),
                "cluster": pd.Series([], dtype="int64"),
                "_uid": pd.Series([], dtype="int64"),
            }
        )
    return pd.concat(out, ignore_index=True)


def keep_order(centroid_sim: np.ndarray, uid: np.ndarray, keep: str) -> np.ndarray:
    """The order in which the documents of one cluster are visited (kept if not a duplicate).

    ``"hard"``: least similar to the centroid first; ``"easy"``: most similar first;
    ``"first"``: input order. Ties always go to input order (``uid``).
    """
    if keep == "first":
        return np.argsort(uid, kind="stable")
    sim = centroid_sim.astype(np.float64)
    key = sim if keep == "hard" else -sim
    return np.lexsort((uid, key))


def greedy_duplicates(
    vectors: np.ndarray, eps: float, block: int = 1024
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Visit rows in order; a row within ``eps`` of an earlier *kept* row is removed.

    ``vectors`` are L2-normalised rows in visiting order. Returns ``removed`` (bool),
    ``kept_by`` (index of the most similar earlier kept row, -1 if kept) and the cosine
    similarity to it. Only pairs above the threshold are materialised, ``block`` rows at a
    time, so memory stays ``O(block * m)``.
    """
    m = len(vectors)
    xp = _backend.array_module(vectors)
    threshold = 1.0 - eps
    pi, pj, ps = [], [], []
    for start in range(0, m, block):
        sims = vectors[start : start + block] @ vectors.T
        rows = xp.arange(start, min(start + block, m))[:, None]
        cols = xp.arange(m)[None, :]
        i, j = xp.nonzero((sims >= threshold) & (cols > rows))
        pi.append(_host(i + start))
        pj.append(_host(j))
        ps.append(_host(sims[i, j]))
    removed = np.zeros(m, dtype=bool)
    kept_by = np.full(m, -1, dtype=np.int64)
    best = np.zeros(m, dtype=np.float32)
    if not pi or not sum(len(x) for x in pi):
        return removed, kept_by, best
    i_all, j_all, s_all = np.concatenate(pi), np.concatenate(pj), np.concatenate(ps)
    order = np.lexsort((i_all, j_all))  # by later row, then earlier row
    i_all, j_all, s_all = i_all[order], j_all[order], s_all[order]
    bounds = np.flatnonzero(np.diff(j_all)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(j_all)], strict=True):
        j = j_all[lo]
        earlier = i_all[lo:hi]
        live = ~removed[earlier]  # final: every earlier row was decided before row j
        if live.any():
            sims = s_all[lo:hi][live]
            k = int(np.argmax(sims))
            removed[j] = True
            kept_by[j] = earlier[live][k]
            best[j] = sims[k]
    return removed, kept_by, best


def _cluster_duplicates(rows: pd.DataFrame, vectors: Any, eps: float, keep: str) -> pd.DataFrame:
    uid = rows["_uid"].to_numpy(np.int64)
    order = keep_order(rows["centroid_sim"].to_numpy(np.float32), uid, keep)
    removed, kept_by, sim = greedy_duplicates(vectors[order], eps)
    ids = rows["id"].to_numpy()[order]
    gone = np.flatnonzero(removed)
    return pd.DataFrame(
        {
            "id": pd.Series(ids[gone], dtype=rows["id"].dtype),
            "group": pd.Series(ids[kept_by[gone]], dtype=rows["id"].dtype),
            "cosine_similarity": sim[gone].astype(np.float32),
            "cluster": rows["cluster"].to_numpy(np.int64)[order][gone],
            "_uid": uid[order][gone],
        }
    )


# -- k-means -----------------------------------------------------------------------------
def _fit_kmeans(vectors: np.ndarray, n_clusters: int, seed: int, max_iter: int) -> np.ndarray:
    """Centroids of k-means: cuML under the cudf backend, scikit-learn otherwise."""
    if _backend.backend_name() == "cudf":  # pragma: no cover - needs a GPU
        import cupy
        from cuml.cluster import KMeans as GpuKMeans

        km = GpuKMeans(n_clusters=n_clusters, random_state=seed, max_iter=max_iter, n_init=1)
        km.fit(cupy.asarray(vectors))
        return cupy.asnumpy(km.cluster_centers_).astype(np.float32)
    from curator_dask.models import require

    require("sklearn", "SemanticDeduplicationWorkflow's k-means")
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=n_clusters, random_state=seed, max_iter=max_iter, n_init=1)
    km.fit(np.asarray(vectors, dtype=np.float32))
    return np.asarray(km.cluster_centers_, dtype=np.float32)


# -- small helpers ---------------------------------------------------------------------------
def _host(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


def _frame_lib(part: Any) -> Any:
    from curator_dask.models import frame_lib

    return frame_lib(part)


def _model_fingerprint(model_dir: str) -> Any:
    """Path, size and mtime of the model's weights: a changed model is a changed result."""
    files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    stats = []
    for f in files:
        st = os.stat(f)
        stats.append((os.path.basename(f), st.st_size, st.st_mtime_ns))
    return (os.path.abspath(model_dir), stats)


def _shuffle_method(client: Any) -> str:
    method = str(config.get("shuffle.method", "p2p"))
    if method != "p2p" or client is not None:
        return method
    try:
        from distributed import default_client

        default_client()
    except (ImportError, ValueError):
        return "tasks"
    return method


def _count_rows(path: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(glob.glob(f"{path}/*.parquet")))


def _is_done(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, "_DONE"))


def _read_done(directory: str) -> dict[str, Any]:
    with open(os.path.join(directory, "_DONE")) as f:
        return dict(json.load(f))


def _mark_done(directory: str, info: dict[str, Any]) -> None:
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f"_DONE.tmp-{uuid.uuid4().hex}")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(directory, "_DONE"))


def _clear(directory: str) -> None:
    # A step directory without its marker holds a partial result: start it again.
    if os.path.isdir(directory):
        shutil.rmtree(directory)


def _input_files(input_path: str | Sequence[str] | None) -> list[str]:
    paths = [input_path] if isinstance(input_path, (str, os.PathLike)) else list(input_path or [])
    files: list[str] = []
    for p in map(os.fspath, paths):
        if os.path.isdir(p):
            files += sorted(
                f
                for f in glob.glob(os.path.join(p, "**", "*"), recursive=True)
                if os.path.isfile(f) and not os.path.basename(f).startswith(("_", "."))
            )
        elif any(c in p for c in "*?["):
            files += sorted(glob.glob(p))
        else:
            files.append(p)
    return files


def _file_fingerprint(input_path: str | Sequence[str] | None) -> str:
    """Paths, sizes and mtimes of the input files (remote paths: the path alone)."""
    stats: list[tuple[str, int | None, int | None]] = []
    for f in _input_files(input_path):
        try:
            st = os.stat(f)
            stats.append((os.path.abspath(f), st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append((f, None, None))
    return tokenize(stats)
