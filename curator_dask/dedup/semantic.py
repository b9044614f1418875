"""Semantic deduplication: sentence embeddings, k-means, and cosine similarity within clusters.

Steps, each checkpointed under ``<cache_path>/semantic/`` in a directory named by a hash of
the input and of every parameter that step depends on (a changed parameter never reuses a
stale result; a restarted run skips finished steps):

1. ``embeddings``: :class:`~curator_dask.embeddings.EmbeddingCreator` on every document (or
   the input's own ``embedding_column``); Parquet ``id, _uid, vector``
   (``_uid = partition << 32 | row``, the input order; ``vector`` one fixed-size binary value
   a row, the float32 vector's bytes, uncompressed, so that a part file reads back as an
   ``(n, dim)`` matrix without a per-row conversion: k-means reads every file once per
   iteration).
2. ``kmeans``: Lloyd's k-means, distributed: the initial centroids are ``n_clusters``
   documents drawn with ``seed``; each iteration assigns every part file's vectors to their
   nearest centroid *on the workers* and returns per-centroid sums and counts, which a tree
   reduction adds up; the client only ever holds ``n_clusters x dim`` numbers. Then every
   document gets its nearest centroid (``cluster``) and its cosine similarity to it
   (``centroid_sim``), written per part file (``id, _uid, cluster, centroid_sim``, row for
   row the embeddings part file of the same number; the vectors are not copied).
3. ``duplicates``: the documents are shuffled by cluster; within each cluster, on the
   workers, they are ordered by the ``keep`` rule and a document is removed when its cosine
   similarity to an earlier *kept* document of the cluster is at least ``1 - eps``.

:func:`kmeans_reference` and :func:`semantic_reference` are the same computation in one
process on an in-memory matrix: the tests hold the workflow equal to them.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import dask
import numpy as np
import pandas as pd
from dask.base import tokenize

from curator_dask import _backend
from curator_dask.dedup._common import UID_SHIFT, DedupWorkflow, Run, leased, shuffle_method
from curator_dask.dedup._params import SemanticParams, take_input_blocksize
from curator_dask.dedup._runtime import (
    DedupResult,
    StepCache,
    join,
    resolve_path,
)
from curator_dask.io.parquet_dir import (
    get_fs,
    layout,
    parquet_files,
    read_parquet_dir,
    release_arrow_memory,
    rows_per_file,
    write_bytes_atomic,
    write_frame,
    write_table_atomic,
)

_KEEP = ("hard", "easy", "first")
#: k-means stops when the centroids move less than this (sum of squared shifts).
KMEANS_TOL = 1e-8
#: How the steps store their results; part of every step's cache key, so that a cache
#: written in another layout (before 2: a ``list<float>`` ``embedding`` column, and the
#: vectors copied into the kmeans step) is never read as this one.
CACHE_LAYOUT = 2


@dataclass
class SemanticDeduplicationWorkflow(SemanticParams, DedupWorkflow):
    __doc__ = (
        (SemanticParams.__doc__ or "").replace(
            "Parameters of :class:`~curator_dask.dedup.SemanticDeduplicationWorkflow`.",
            "Find semantically near-duplicate documents with embeddings and k-means.",
        )
        + """
    embedding_column : str, optional
        Use this column of the input (a list of floats per document) as the embeddings
        instead of computing them; no model is loaded.

    Examples
    --------
    >>> wf = SemanticDeduplicationWorkflow(
    ...     input_path="data/", cache_path="cache/", output_path="out/",
    ...     n_clusters=100, eps=0.01, keep="hard")
    >>> wf.run().removed  # doctest: +SKIP
    """
    )

    method: ClassVar[str] = "semantic-dedup"
    stats: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self, input_blocksize: int | str | None) -> None:
        take_input_blocksize(self, input_blocksize)
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
        self._run_obj: Run | None = None

    # -- cache layout ------------------------------------------------------------------
    def _run(self) -> Run:
        if self._run_obj is None:
            run = self._begin()
            run.steps = StepCache(
                join(resolve_path(self.cache_path), "semantic"), self.storage_options
            )
            self._run_obj = run
        return self._run_obj

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
            autocast=self.autocast,
        )

    def step_dirs(self) -> dict[str, str]:
        """The cache directory of each step for this input and these parameters."""
        run = self._run()
        if self.embedding_column is not None:
            model_key: Any = ("column", self.embedding_column)
        else:
            model_key = _model_fingerprint(self._embedding_stage().resolved_model_dir)
            if not self.autocast:  # other vectors on a GPU; the default keeps its old key
                model_key = (model_key, "no-autocast")
        emb = tokenize(
            "embeddings", CACHE_LAYOUT, run.input.fingerprint(), str(self.blocksize),
            self.text_column, self.id_column, model_key, self.max_chars, self.max_tokens,
        )  # fmt: skip
        km = tokenize("kmeans", CACHE_LAYOUT, emb, self.n_clusters, self.seed, self.kmeans_max_iter)
        dup = tokenize("duplicates", CACHE_LAYOUT, km, float(self.eps), self.keep)
        root = run.steps.root
        return {
            "embeddings": join(root, f"embeddings-{emb[:16]}"),
            "kmeans": join(root, f"kmeans-{km[:16]}"),
            "duplicates": join(root, f"duplicates-{dup[:16]}"),
        }

    # -- steps -------------------------------------------------------------------------
    def compute_embeddings(self) -> str:
        """Step 1: embed every document; skipped if already done. Returns its directory."""
        run = self._run()
        so = self.storage_options
        out = self.step_dirs()["embeddings"]
        if run.steps.is_done(out):
            self.stats["embeddings_computed"] = 0
            return out
        run.steps.clear(out)
        run.input.quarantine_path = join(out, "quarantine")
        df = run.input.frame()
        meta = df._meta.assign(_uid=pd.Series([], dtype="int64"))
        df = df.map_partitions(_with_uid, meta=meta)
        column = self.embedding_column
        if column is None:
            column = "embedding"
            # embedding is the costly step (a model forward pass per batch): at least
            # EMBED_PARTITIONS_PER_THREAD partitions per worker thread keep every worker busy
            # and let the progress line count (a reader partition sized for memory may be the
            # whole corpus); split in order, so the rows (and k-means' seed rows) keep theirs
            wanted = EMBED_PARTITIONS_PER_THREAD * _worker_threads(run.client)
            if df.npartitions < wanted:
                df = df.repartition(npartitions=wanted)
            df = self._embedding_stage()(df)
        df = df[[self.id_column, "_uid", column]]
        if self.id_column != "id":
            df = df.rename(columns={self.id_column: "id"})
        counts = df.map_partitions(
            _write_embeddings, column, join(out, "data"), so,
            meta=pd.DataFrame({"rows": pd.Series([], dtype="int64")}),
        )  # fmt: skip
        # a model counts its batches as they finish: the line moves inside a partition
        parts = run.reporter.compute(
            counts.to_delayed(), "embeddings", docs=True, batches=self.embedding_column is None
        )
        n = int(sum(int(p["rows"].sum()) for p in parts))
        run.steps.mark_done(out, {"documents": n, "layout": CACHE_LAYOUT})
        self.stats["embeddings_computed"] = 1
        return out

    def compute_clusters(self, emb_dir: str) -> str:
        """Step 2: distributed k-means and nearest centroid per document; resumable."""
        run = self._run()
        so = self.storage_options
        out = self.step_dirs()["kmeans"]
        if run.steps.is_done(out):
            self.stats["kmeans_computed"] = 0
            return out
        run.steps.clear(out)
        files = parquet_files(join(emb_dir, "data"), so)
        sizes = rows_per_file(files, so)
        n = sum(sizes)
        n_clusters = min(self.n_clusters, n)
        centroids, iterations = np.zeros((0, 0), np.float32), 0
        # where k-means runs changes speed, not (beyond KMEANS_AGREEMENT) results: config,
        # through the backend's one seam (auto: cuML under the cudf backend)
        device = _backend.device_for("dedup.kmeans-device", "cuml")
        if n_clusters:
            # cuML's estimator pickles its objects to the workers: each must import it too
            device, note = _backend.device_on_workers(
                device, "dedup.kmeans-device", "cuml.dask.cluster", run.client
            )
            if note:
                run.reporter.say(f"k-means: {note}")
            centroids, iterations = KMEANS[device](
                files, sizes, n_clusters, self.seed, self.kmeans_max_iter, so, run
            )
        write_bytes_atomic(_npy_bytes(centroids), join(out, "centroids.npy"), so)
        data = layout(join(out, "data"), so)
        tasks = [
            dask.delayed(_assign_file)(f, data.part_path(i), so, centroids)
            for i, f in enumerate(files)
        ]
        run.reporter.compute(tasks, "assign clusters")
        run.steps.mark_done(
            out,
            {
                "n_clusters": int(n_clusters),
                "iterations": iterations,
                "layout": CACHE_LAYOUT,
                "device": device,
            },
        )
        self.stats["kmeans_computed"] = 1
        return out

    def compute_duplicates(self, km_dir: str) -> str:
        """Step 3: duplicates within each cluster, on the workers; resumable."""
        run = self._run()
        so = self.storage_options
        out = self.step_dirs()["duplicates"]
        if run.steps.is_done(out):
            self.stats["duplicates_computed"] = 0
            return out
        run.steps.clear(out)
        emb_dir = self.step_dirs()["embeddings"]
        packed = _read_assigned_dir(join(emb_dir, "data"), join(km_dir, "data"), so)
        # the vectors travel as one Arrow binary value a row: dask's p2p shuffle cannot
        # rebuild a list<float> ArrowDtype column from its pandas metadata
        shuffled = packed.shuffle(on="cluster", shuffle_method=shuffle_method(self.client))
        id_dtype = packed._meta["id"].dtype
        found = shuffled.map_partitions(
            _duplicates_in_partition, float(self.eps), self.keep, meta=_dups_meta(id_dtype)
        )
        write_frame(found, join(out, "data"), run.reporter, "duplicates", so)
        run.steps.mark_done(out, {"eps": self.eps, "keep": self.keep})
        self.stats["duplicates_computed"] = 1
        return out

    @leased
    def run(self) -> DedupResult:
        """Run the three steps (reusing finished ones) and write the outputs.

        Writes ``<output_path>/removed_ids/*.parquet`` with columns ``id`` and ``group``
        (the id of the kept document), one row per removed document; with
        ``duplicate_groups`` every member to ``duplicate_groups/``; with ``perform_removal``
        the kept documents to ``deduplicated/``. Intermediate results go under
        ``<cache_path>/semantic/``.

        Returns
        -------
        DedupResult
            Counts, ``seconds`` per step, ``paths``; ``details`` holds ``n_clusters`` and
            ``cache_dirs``; ``stats`` which steps were computed rather than reused.
        """
        self._run_obj = None
        run = self._run()
        r = run.reporter
        so = self.storage_options
        with r.step("embeddings"):
            emb_dir = self.compute_embeddings()
            run.input.quarantine_path = join(emb_dir, "quarantine")
        with r.step("kmeans"):
            km_dir = self.compute_clusters(emb_dir)
        with r.step("duplicates"):
            dup_dir = self.compute_duplicates(km_dir)
        dups = read_parquet_dir(join(dup_dir, "data"), so, _dups_meta(object))
        from curator_dask.dedup._common import members_meta

        members = dups.map_partitions(_members, meta=members_meta(dups._meta["id"].dtype))
        details = {
            "n_clusters": int(run.steps.read_done(km_dir)["n_clusters"]),
            "cache_dirs": {"embeddings": emb_dir, "kmeans": km_dir, "duplicates": dup_dir},
        }
        documents = int(run.steps.read_done(emb_dir)["documents"])
        work = join(dup_dir, "output")
        return self._finish(run, members, documents, work, details, self.stats)

    def duplicate_pairs(self) -> pd.DataFrame:
        """The removed documents with their kept document, similarity and cluster.

        Reads the last step's cache (run :meth:`run` first): columns ``id, group,
        cosine_similarity, cluster``.
        """
        dup_dir = self.step_dirs()["duplicates"]
        run = self._run()
        if not run.steps.is_done(dup_dir):
            raise FileNotFoundError(f"no finished duplicates step in {dup_dir}; call run()")
        cols = ["id", "group", "cosine_similarity", "cluster"]
        files = parquet_files(join(dup_dir, "data"), self.storage_options)
        frames = [
            pd.read_parquet(f, columns=cols, storage_options=self.storage_options)
            if "://" in f
            else pd.read_parquet(f, columns=cols)
            for f in files
        ]
        return pd.concat(frames, ignore_index=True) if frames else _dups_meta(object)[cols]


# -- partition functions ---------------------------------------------------------------
#: Embedding partitions per worker thread, at least (see ``compute_embeddings``).
EMBED_PARTITIONS_PER_THREAD = 4


def _worker_threads(client: Any) -> int:
    """Worker threads of ``client``'s cluster (of this machine without one)."""
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:  # a client that cannot say: as many as this machine has
            pass
    return max(1, os.cpu_count() or 1)


def _with_uid(part: Any, partition_info: dict[str, Any] | None = None) -> Any:
    i = (partition_info or {}).get("number", 0)
    uid = (np.int64(i) << UID_SHIFT) + np.arange(len(part), dtype=np.int64)
    lib = _frame_lib(part)
    return part.assign(_uid=lib.Series(uid, index=part.index))


def _list_matrix(col: Any) -> np.ndarray:
    """A ``list<float>`` column (pandas, Arrow, or fixed-size lists) as an ``(n, dim)`` float32
    matrix, through a flat view of the values (no per-row conversion)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pd.Series):
        arr = col.array._pa_array if hasattr(col.array, "_pa_array") else pa.array(col.array)
    else:
        arr = col
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if n == 0:
        return np.zeros((0, 0), np.float32)
    if arr.null_count:
        raise ValueError(f"{arr.null_count} documents have no embedding (null)")
    if pa.types.is_fixed_size_list(arr.type):
        dim = arr.type.list_size
    else:
        low, high = pc.min_max(pc.list_value_length(arr)).values()
        if low != high:
            raise ValueError(f"embeddings of different lengths ({low} to {high})")
        dim = int(high.as_py())
    flat = arr.flatten().to_numpy(zero_copy_only=False)  # honours the array's offsets
    return flat.astype(np.float32, copy=False).reshape(n, dim)


def _vector_array(mat: np.ndarray) -> Any:
    """An ``(n, dim)`` matrix as a fixed-size binary Arrow array (float32 bytes a row)."""
    import pyarrow as pa

    mat = np.ascontiguousarray(mat, dtype="<f4")
    n, dim = mat.shape if mat.ndim == 2 else (len(mat), 0)
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(4 * dim), n, [None, pa.py_buffer(mat.reshape(-1))]
    )


def _vector_matrix(col: Any) -> np.ndarray:
    """The inverse of :func:`_vector_array`: a read-only view of the Arrow buffer."""
    import pyarrow as pa

    arr = col
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    width = arr.type.byte_width
    n = len(arr)
    if n == 0 or width == 0:
        return np.zeros((n, width // 4), np.float32)
    if arr.null_count:
        raise ValueError(f"{arr.null_count} null vectors in the embeddings cache")
    flat = np.frombuffer(arr.buffers()[1], "<f4", count=n * width // 4, offset=arr.offset * width)
    return flat.astype(np.float32, copy=False).reshape(n, width // 4)


def _write_embeddings(
    part: Any, column: str, directory: str, storage_options: dict[str, Any] | None,
    partition_info: dict[str, Any] | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Write one partition as ``part-<i>.parquet``: ``id, _uid, vector`` (see the module)."""
    import pyarrow as pa

    part = _backend.to_pandas(part)
    if not len(part):  # no file: its vectors' size is unknown (and Parquet has no 0-byte one)
        return pd.DataFrame({"rows": [0]})
    i = (partition_info or {}).get("number", 0)
    mat = _list_matrix(part[column])
    table = pa.Table.from_pandas(part[["id", "_uid"]], preserve_index=False)
    table = table.append_column("vector", _vector_array(mat))
    del mat
    write_table_atomic(
        table, layout(directory).part_path(i), storage_options,
        compression={"id": "snappy", "_uid": "snappy", "vector": "none"},
        use_dictionary=["id"], write_statistics=["id", "_uid"],
    )  # fmt: skip
    del table
    release_arrow_memory()
    return pd.DataFrame({"rows": [len(part)]})


def _read_table(path: str, storage_options: dict[str, Any] | None, columns: list[str]) -> Any:
    """Columns of one step-cache part file, read whole (one request on an object store)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fs, p = get_fs(path, storage_options)
    with fs.open(p, "rb") as f:
        data = f.read()
    schema = pq.read_schema(pa.BufferReader(data))
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise ValueError(
            f"{path} has no column {missing}: not a semantic-dedup cache file of layout "
            f"{CACHE_LAYOUT}; delete the cache directory"
        )
    return pq.read_table(pa.BufferReader(data), columns=columns)


@dataclass(frozen=True)
class _ReadAssigned:
    """One partition of the duplicates step: a kmeans part file beside its embeddings file."""

    storage_options: dict[str, Any] | None

    def __call__(self, files: tuple[str, str]) -> pd.DataFrame:
        import pyarrow as pa

        emb_file, km_file = files
        cols = ["id", "_uid", "cluster", "centroid_sim"]
        assigned = _read_table(km_file, self.storage_options, cols)
        emb = _read_table(emb_file, self.storage_options, ["_uid", "vector"])
        if not emb.column("_uid").equals(assigned.column("_uid")):
            raise ValueError(f"{km_file} does not hold the rows of {emb_file}")
        part = assigned.to_pandas()
        vectors = emb.column("vector").cast(pa.binary())
        return part.assign(
            vector=pd.Series(pd.arrays.ArrowExtensionArray(vectors), index=part.index)
        )


def _read_assigned_dir(emb_data: str, km_data: str, storage_options: dict[str, Any] | None) -> Any:
    """``id, _uid, cluster, centroid_sim, vector`` (float32 bytes), one partition a file."""
    import dask.dataframe as dd
    import pyarrow as pa
    import pyarrow.parquet as pq

    emb_files = parquet_files(emb_data, storage_options)
    km_files = parquet_files(km_data, storage_options)
    if len(emb_files) != len(km_files):
        raise ValueError(f"{len(km_files)} kmeans part files for {len(emb_files)} embeddings")
    meta = pd.DataFrame(
        {
            "id": pd.Series([], dtype=object),
            "_uid": pd.Series([], dtype="int64"),
            "cluster": pd.Series([], dtype="int64"),
            "centroid_sim": pd.Series([], dtype="float32"),
        }
    )
    if not km_files:  # no documents
        return dd.from_pandas(meta.assign(vector=pd.Series([], dtype=object)), npartitions=1)
    fs, p = get_fs(km_files[0], storage_options)
    with fs.open(p, "rb") as f:
        meta = pq.read_schema(f).empty_table().to_pandas()
    meta = meta[["id", "_uid", "cluster", "centroid_sim"]].assign(
        vector=pd.Series([], dtype=pd.ArrowDtype(pa.binary()))
    )
    return dd.from_map(
        _ReadAssigned(storage_options), list(zip(emb_files, km_files, strict=True)), meta=meta,
        enforce_metadata=False,
    )  # fmt: skip


def _dups_meta(id_dtype: Any) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": pd.Series([], dtype=id_dtype),
            "group": pd.Series([], dtype=id_dtype),
            "cosine_similarity": pd.Series([], dtype="float32"),
            "cluster": pd.Series([], dtype="int64"),
            "_uid": pd.Series([], dtype="int64"),
            "group_uid": pd.Series([], dtype="int64"),
        }
    )


def _members(part: pd.DataFrame) -> pd.DataFrame:
    """Removed rows and their kept documents -> ``id, group, _uid, removed``."""
    removed = pd.DataFrame(
        {"id": part["id"], "group": part["group"], "_uid": part["_uid"], "removed": True}
    )
    kept = pd.DataFrame(
        {"id": part["group"], "group": part["group"], "_uid": part["group_uid"], "removed": False}
    ).drop_duplicates("_uid")
    out = pd.concat([kept, removed], ignore_index=True)
    return out.astype({"_uid": "int64", "removed": bool})


def _unpack(col: pd.Series) -> np.ndarray:
    """The ``(n, dim)`` float32 matrix of a column of equal-length vector bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(col):
        return np.zeros((0, 0), np.float32)
    arr = col.array._pa_array if hasattr(col.array, "_pa_array") else pa.array(col, pa.binary())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    low, high = pc.min_max(pc.binary_length(arr)).values()
    if low != high:
        raise ValueError(f"vectors of different sizes ({low} to {high} bytes)")
    if arr.null_count:
        raise ValueError(f"{arr.null_count} null vectors")
    # equal lengths: the values are one run of n * width bytes in the data buffer
    width = int(high.as_py())
    offset_type = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    start = np.frombuffer(arr.buffers()[1], offset_type, count=arr.offset + 1)[-1]
    n = len(arr)
    flat = np.frombuffer(arr.buffers()[2], "<f4", count=n * width // 4, offset=int(start))
    return flat.astype(np.float32, copy=False).reshape(n, width // 4)


def _duplicates_in_partition(part: Any, eps: float, keep: str) -> pd.DataFrame:
    """Removed documents of every cluster in ``part`` (whole clusters, after the shuffle)."""
    part = _backend.to_pandas(part)
    out = []
    if len(part):
        vectors = _unpack(part["vector"])
        part = part.drop(columns=["vector"])
        for _, rows in part.groupby("cluster", sort=True).indices.items():
            out.append(_cluster_duplicates(part.iloc[rows], vectors[rows], eps, keep))
    if not out:
        return _dups_meta(part["id"].dtype)
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
        stop = min(start + block, m)
        # only the later rows: the pairs (i, j > i) of this block of rows
        sims = vectors[start:stop] @ vectors[start:].T
        hit = sims >= threshold
        d = stop - start
        hit[:, :d] &= xp.arange(d)[None, :] > xp.arange(d)[:, None]
        # most rows have no pair: find the few that do before listing the pairs
        rows = xp.flatnonzero(hit.any(axis=1))
        i, j = xp.nonzero(hit[rows])
        i = rows[i]
        pi.append(_host(i + start))
        pj.append(_host(j + start))
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
            "group_uid": uid[order][kept_by[gone]],
        }
    )


# -- k-means -----------------------------------------------------------------------------
def _read_matrix(path: str, storage_options: dict[str, Any] | None) -> np.ndarray:
    """A part file's ``(n, dim)`` float32 embedding matrix."""
    return _vector_matrix(_read_table(path, storage_options, ["vector"]).column("vector"))


def _nearest(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the nearest centroid (squared Euclidean) of each row."""
    dist = (centroids * centroids).sum(axis=1)[None, :] - 2.0 * (vectors @ centroids.T)
    return np.asarray(dist.argmin(axis=1), dtype=np.int64)


def _partial_sums(vectors: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k, d = centroids.shape
    sums = np.zeros((k, d), np.float64)
    counts = np.zeros(k, np.int64)
    if len(vectors):
        nearest = _nearest(vectors, centroids)
        order = np.argsort(nearest, kind="stable")
        members = vectors[order]
        first = np.flatnonzero(np.r_[True, np.diff(nearest[order]) != 0])
        # a sum over axis 0 adds the rows one after another, in input order: the same
        # float64 additions as np.add.at(sums, nearest, vectors), without a float64 copy
        for lo, hi in zip(first, np.r_[first[1:], len(order)], strict=True):
            sums[nearest[order[lo]]] = members[lo:hi].sum(axis=0, dtype=np.float64)
        counts += np.bincount(nearest, minlength=k)
    return sums, counts


def _file_sums(
    path: str, storage_options: dict[str, Any] | None, centroids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    return _partial_sums(_read_matrix(path, storage_options), centroids)


def _add_sums(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    return a[0] + b[0], a[1] + b[1]


def _pick_rows(path: str, storage_options: dict[str, Any] | None, rows: list[int]) -> np.ndarray:
    return _read_matrix(path, storage_options)[rows]


def _update(centroids: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """New centroids: the mean of their members; an empty cluster keeps its centroid."""
    new = centroids.astype(np.float64).copy()
    hit = counts > 0
    new[hit] = sums[hit] / counts[hit, None]
    return new.astype(np.float32)


def initial_rows(n: int, n_clusters: int, seed: int) -> np.ndarray:
    """The sorted global row numbers of the documents that seed the centroids."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=n_clusters, replace=False))


def kmeans_reference(
    vectors: np.ndarray, n_clusters: int, seed: int, max_iter: int
) -> tuple[np.ndarray, int]:
    """Single-process k-means with the same initialisation and updates; ``(centroids, iters)``."""
    vectors = np.asarray(vectors, dtype=np.float32)
    centroids = vectors[initial_rows(len(vectors), n_clusters, seed)].copy()
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        sums, counts = _partial_sums(vectors, centroids)
        new = _update(centroids, sums, counts)
        shift = float(((new - centroids).astype(np.float64) ** 2).sum())
        centroids = new
        if shift <= KMEANS_TOL:
            break
    return centroids, it


def _initial_centroids(
    files: list[str],
    sizes: list[int],
    n_clusters: int,
    seed: int,
    storage_options: dict[str, Any] | None,
) -> np.ndarray:
    """The rows :func:`initial_rows` picks, read from the part files they are in."""
    starts = np.concatenate([[0], np.cumsum(sizes)])
    seeds = initial_rows(int(starts[-1]), n_clusters, seed)
    picks = []
    for i, f in enumerate(files):
        local = seeds[(seeds >= starts[i]) & (seeds < starts[i + 1])] - starts[i]
        if len(local):
            picks.append(dask.delayed(_pick_rows)(f, storage_options, local.tolist()))
    return np.concatenate(dask.compute(*picks)).astype(np.float32)


def _device_matrix(path: str, storage_options: dict[str, Any] | None) -> Any:
    import cupy

    return cupy.asarray(_read_matrix(path, storage_options))


def kmeans_cuml(
    files: list[str],
    sizes: list[int],
    n_clusters: int,
    seed: int,
    max_iter: int,
    storage_options: dict[str, Any] | None,
    client: Any,
) -> tuple[np.ndarray, int]:
    """k-means by cuML's dask estimator on the GPU workers; ``(centroids, iterations)``.

    Lloyd's iterations from the same initial rows as :func:`kmeans_distributed`, with the
    vectors read into GPU memory part file by part file (a dask array of CuPy blocks).
    cuML's stopping rule is its own (``tol`` on the centroids' change), so the centroids
    equal :func:`kmeans_distributed`'s to float32 rounding when both stop at the same
    iteration. Used with ``curator.dedup.kmeans-device: gpu``; not yet run on a GPU
    (docs/gpu.md).
    """
    import cupy
    import dask.array as da
    from cuml.dask.cluster import KMeans

    init = _initial_centroids(files, sizes, n_clusters, seed, storage_options)
    dim = init.shape[1]
    meta = cupy.empty((0, dim), dtype=cupy.float32)
    blocks = [
        da.from_delayed(
            dask.delayed(_device_matrix)(f, storage_options),
            shape=(n, dim),
            dtype=np.float32,
            meta=meta,
        )
        for f, n in zip(files, sizes, strict=True)
        if n
    ]
    model = KMeans(
        client=client,
        n_clusters=n_clusters,
        init=cupy.asarray(init),
        n_init=1,
        max_iter=max_iter,
        tol=KMEANS_TOL,
    )
    model.fit(da.concatenate(blocks))
    centers = model.cluster_centers_
    centers = centers.to_numpy() if hasattr(centers, "to_numpy") else cupy.asnumpy(centers)
    return np.asarray(centers, dtype=np.float32), int(getattr(model, "n_iter_", max_iter))


def kmeans_distributed(
    files: list[str],
    sizes: list[int],
    n_clusters: int,
    seed: int,
    max_iter: int,
    storage_options: dict[str, Any] | None,
    reporter: Any,
) -> tuple[np.ndarray, int]:
    """Lloyd's k-means over part files; each iteration a map on the workers and a tree sum.

    Equal to :func:`kmeans_reference` on the concatenated files (same seed rows, same
    update); the client holds only the centroids and one ``n_clusters x dim`` sum.
    """
    centroids = _initial_centroids(files, sizes, n_clusters, seed, storage_options)
    counter = reporter.counter("k-means", max_iter, "iterations")
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        parts = [dask.delayed(_file_sums)(f, storage_options, centroids) for f in files]
        while len(parts) > 1:  # a tree: no task receives more than two partial sums
            parts = [
                dask.delayed(_add_sums)(parts[j], parts[j + 1]) if j + 1 < len(parts) else parts[j]
                for j in range(0, len(parts), 2)
            ]
        ((sums, counts),) = dask.compute(parts[0])
        new = _update(centroids, sums, counts)
        shift = float(((new - centroids).astype(np.float64) ** 2).sum())
        centroids = new
        counter.tick()
        if shift <= KMEANS_TOL:
            break
    return centroids, it


def _kmeans_host(
    files: list[str], sizes: list[int], n_clusters: int, seed: int, max_iter: int,
    storage_options: dict[str, Any] | None, run: Any,
) -> tuple[np.ndarray, int]:  # fmt: skip
    return kmeans_distributed(
        files, sizes, n_clusters, seed, max_iter, storage_options, run.reporter
    )


def _kmeans_gpu(
    files: list[str], sizes: list[int], n_clusters: int, seed: int, max_iter: int,
    storage_options: dict[str, Any] | None, run: Any,
) -> tuple[np.ndarray, int]:  # fmt: skip
    return kmeans_cuml(files, sizes, n_clusters, seed, max_iter, storage_options, run.client)


#: Semantic dedup's k-means by the device :func:`curator_dask._backend.device_for` picks
#: from ``curator.dedup.kmeans-device`` (``auto``: ``gpu`` under the cudf backend where
#: cuML imports). Each takes the part files, their rows, ``n_clusters``, ``seed``,
#: ``max_iter``, the storage options and the run; returns ``(centroids, iterations)``.
KMEANS: dict[str, Callable[..., tuple[np.ndarray, int]]] = {
    "host": _kmeans_host,
    "gpu": _kmeans_gpu,
}

#: How close two k-means of the same vectors must be to count as the same clustering (the
#: GPU's cuML against the host's numpy, float32 sums in another order): an adjusted Rand
#: index of the labels of at least ``ari`` and, after matching centroids one to one,
#: no coordinate further apart than ``centroid_atol``. See :func:`kmeans_agreement`.
KMEANS_AGREEMENT = {"ari": 0.99, "centroid_atol": 1e-3}


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """The adjusted Rand index of two labelings of the same rows (1.0: the same partition).

    Label values need not match, only which rows share a label (Hubert and Arabie's
    correction for chance: 0.0 is what random labelings give on average).

    >>> adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([5, 5, 2, 2]))
    1.0
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"labelings of different lengths: {a.shape} and {b.shape}")
    n = len(a)
    if n < 2:
        return 1.0
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    # the contingency table, sparse: one count per (label in a, label in b) pair present
    _, joint = np.unique(ia.astype(np.int64) * (int(ib.max()) + 1) + ib, return_counts=True)

    def pairs(counts: np.ndarray) -> float:
        c = counts.astype(np.float64)
        return float((c * (c - 1) / 2).sum())

    both = pairs(joint)
    sum_a, sum_b = pairs(np.bincount(ia)), pairs(np.bincount(ib))
    total = n * (n - 1) / 2
    expected = sum_a * sum_b / total
    top = (sum_a + sum_b) / 2
    if top == expected:  # both labelings are one cluster, or both all singletons
        return 1.0
    return (both - expected) / (top - expected)


def matched_centroid_gap(a: np.ndarray, b: np.ndarray) -> float:
    """The largest coordinate difference between two centroid sets matched one to one.

    Pairs are taken closest first (squared distance), each centroid used once, so two
    runs that number their clusters differently compare cluster by cluster; for two
    near-equal sets (the use here) that is the matching of least total distance. ``inf``
    when the sets differ in shape.

    >>> matched_centroid_gap(np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 1.5], [0.0, 0.0]]))
    0.5
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    if not a.size:
        return 0.0
    cost = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    free_a = np.ones(len(a), bool)
    free_b = np.ones(len(b), bool)
    gap = 0.0
    for flat in np.argsort(cost, axis=None, kind="stable"):
        i, j = divmod(int(flat), len(b))
        if free_a[i] and free_b[j]:
            free_a[i] = free_b[j] = False
            gap = max(gap, float(np.abs(a[i] - b[j]).max()))
            if not free_a.any():
                break
    return gap


def kmeans_agreement(
    vectors: np.ndarray, centroids_a: np.ndarray, centroids_b: np.ndarray
) -> dict[str, Any]:
    """How far two k-means results on ``vectors`` are apart, against :data:`KMEANS_AGREEMENT`.

    Each row is labelled with its nearest centroid of either set; returns ``ari`` (the
    labels' :func:`adjusted_rand_index`), ``centroid_gap`` (:func:`matched_centroid_gap`)
    and ``equal`` (both within the tolerance).
    """
    vectors = np.asarray(vectors, np.float32)
    la = _nearest(vectors, np.asarray(centroids_a, np.float32))
    lb = _nearest(vectors, np.asarray(centroids_b, np.float32))
    ari = adjusted_rand_index(la, lb)
    gap = matched_centroid_gap(centroids_a, centroids_b)
    tol = KMEANS_AGREEMENT
    return {
        "ari": round(ari, 6),
        "centroid_gap": gap,
        "equal": bool(ari >= tol["ari"] and gap <= tol["centroid_atol"]),
    }


def _assign(vectors: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest centroid and the cosine similarity to it."""
    if len(vectors) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    cluster = _nearest(vectors, centroids)
    cn = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    sim = (vectors * cn[cluster]).sum(axis=1).astype(np.float32)
    return cluster, sim


def _assign_file(
    path: str, out: str, storage_options: dict[str, Any] | None, centroids: np.ndarray
) -> int:
    import pyarrow as pa

    table = _read_table(path, storage_options, ["id", "_uid", "vector"])
    cluster, sim = _assign(_vector_matrix(table.column("vector")), centroids)
    table = table.drop_columns(["vector"])
    table = table.append_column("cluster", pa.array(cluster, pa.int64()))
    table = table.append_column("centroid_sim", pa.array(sim, pa.float32()))
    write_table_atomic(table, out, storage_options)
    return len(table)


def semantic_reference(
    ids: Any, vectors: np.ndarray, n_clusters: int, eps: float, keep: str, seed: int,
    max_iter: int, uids: np.ndarray | None = None,
) -> dict[Any, Any]:  # fmt: skip
    """The removed ``{id: kept id}`` of the whole method in one process (for tests)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    ids = np.asarray(ids, dtype=object)
    uid = np.arange(len(ids), dtype=np.int64) if uids is None else np.asarray(uids)
    centroids, _ = kmeans_reference(vectors, max(1, min(n_clusters, len(ids))), seed, max_iter)
    cluster, sim = _assign(vectors, centroids)
    out: dict[Any, Any] = {}
    for c in np.unique(cluster):
        rows = np.flatnonzero(cluster == c)
        order = keep_order(sim[rows], uid[rows], keep)
        removed, kept_by, _ = greedy_duplicates(vectors[rows][order], eps)
        r_ids = ids[rows][order]
        for j in np.flatnonzero(removed):
            out[r_ids[j]] = r_ids[kept_by[j]]
    return out


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


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
