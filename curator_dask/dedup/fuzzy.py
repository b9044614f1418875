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

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
from dask.base import tokenize

from curator_dask import _backend, config, sizing
from curator_dask.dedup._common import (
    UID_SHIFT,
    DedupWorkflow,
    Run,
    group_members,
    leased,
    members_meta,
    shuffle_method,
    with_uid,
)
from curator_dask.dedup._params import BAND_SHAPES, FuzzyParams, take_input_blocksize
from curator_dask.dedup._runtime import (
    DedupResult,
    StepCache,
    join,
)
from curator_dask.dedup.components import (
    ROUTE_BYTES,
    budget_slots,
    components_in_memory,
    connected_components,
    read_routes,
    route_of,
    write_routes,
)
from curator_dask.dedup.lsh import (
    band_hashes,
    bands_for_threshold,
    bucket_edges,
    verify_buckets,
)
from curator_dask.dedup.minhash import (
    minhash_permutations,
    minhash_signatures,
    shingle_hashes,
    unique_shingles,
)
from curator_dask.dedup.planner import partitions_for, plan_lsh
from curator_dask.io.parquet_dir import (
    count_rows,
    get_fs,
    layout,
    parquet_files,
    read_frames,
    read_parquet_dir,
    read_part_frames,
    read_parts,
    read_row_groups_by,
    read_table,
    release_arrow_memory,
    remove_tree,
    rows_per_file,
    write_frame,
    write_parquet_atomic,
)

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


#: Text bytes (characters) signed at once: the shingle hashes and signatures of a chunk are a
#: few times this, so a partition's working set is its frame plus a bounded scratch space.
CHUNK_CHARS = 8 * 2**20


#: Rows per row group of the cached documents: the candidate check reads them a row group at
#: a time, so the shingle sets it makes from one read stay small.
DOCS_ROW_GROUP = 32_768


def _chunks(n_chars: np.ndarray, limit: int = CHUNK_CHARS) -> list[tuple[int, int]]:
    """Row ranges of at most ``limit`` characters each (at least one row each)."""
    cum = np.cumsum(n_chars)
    bounds, start = [], 0
    while start < len(cum):
        before = cum[start - 1] if start else 0
        end = max(int(np.searchsorted(cum, before + limit, side="right")), start + 1)
        bounds.append((start, end))
        start = end
    return bounds or [(0, 0)]


def _sign_chunk(
    text: pd.Series, p: _SigParams, perms: np.ndarray, gpu: bool, device_text: Any = None
) -> tuple:
    """``(band hashes, shingle counts)`` of one chunk of texts.

    With ``device_text`` (the chunk as a cudf Series) the shingles are hashed on the GPU
    from the column's characters; otherwise on the host.
    """
    if device_text is not None:
        import cupy

        from curator_dask.dedup._gpu_shingles import device_shingle_hashes

        d_hashes, d_offsets = device_shingle_hashes(device_text, p.ngram, p.kind, p.normalization)
        sig = cupy.asnumpy(
            minhash_signatures(d_hashes, d_offsets, cupy.asarray(perms), p.use_64_bit_hash)
        )
        sizes = cupy.asnumpy(cupy.diff(d_offsets))
        return band_hashes(sig, p.num_bands, p.minhashes_per_band), sizes
    hashes, offsets = shingle_hashes(text, p.ngram, p.kind, p.normalization)
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
    return band_hashes(sig, p.num_bands, p.minhashes_per_band), np.diff(offsets)


def minhash_devices() -> tuple[str, str]:
    """Where step 1 computes: ``(signatures, shingles)``, each ``"host"`` or ``"gpu"``.

    Read through the backend's one seam, :func:`curator_dask._backend.device_for` (it
    changes speed, not results: config, not a parameter): ``curator.dedup.minhash-device``
    (``auto|cpu|gpu``; ``auto``: the GPU under the cudf backend where CuPy imports) and
    ``curator.dedup.shingle-device`` (``host|gpu``; ``gpu`` needs cudf, and hashes on the
    device only the cudf partitions whose signatures are computed there). ``gpu`` without
    its library stops here, in one line naming the extra, before anything is computed.
    """
    signatures = _backend.device_for("dedup.minhash-device", "cupy", ("auto", "cpu", "gpu"))
    shingles = _backend.device_for("dedup.shingle-device", "cudf", ("host", "gpu"))
    return signatures, shingles


def _minhash_partition(
    part: Any,
    index: int,
    p: _SigParams,
    path: str,
    device: str = "host",
    storage_options: dict[str, Any] | None = None,
    docs_path: str | None = None,
    shingle_device: str = "host",
) -> int:
    """Sign one input partition in chunks of :data:`CHUNK_CHARS` and write its band hashes
    to ``path``; with ``docs_path`` also the documents themselves (with ``_uid``), so that
    later steps read the step cache instead of the input again."""
    from curator_dask.dedup._gpu_shingles import device_supported

    gpu = device == "gpu"
    device_text = None
    if (
        gpu
        and shingle_device == "gpu"
        and not isinstance(part, pd.DataFrame)
        and device_supported(p.kind, p.normalization)
    ):
        device_text = part[p.text_column].reset_index(drop=True)
    pdf = _backend.to_pandas(part if docs_path else part[[p.id_column, p.text_column]])
    n = len(pdf)
    uid = (np.int64(index) << UID_SHIFT) + np.arange(n, dtype=np.int64)
    if docs_path is not None:
        write_parquet_atomic(
            pdf.assign(_uid=uid), docs_path, storage_options, row_group_size=DOCS_ROW_GROUP
        )
    text = pdf[p.text_column]
    n_chars = text.str.len().fillna(0).to_numpy(np.int64)
    perms = minhash_permutations(p.num_bands * p.minhashes_per_band, p.seed, p.use_64_bit_hash)
    bands = np.empty((n, p.num_bands), dtype=np.int64)
    n_shingles = np.empty(n, dtype=np.int64)
    for a, b in _chunks(n_chars):
        chunk = None if device_text is None else device_text.iloc[a:b]
        bands[a:b], n_shingles[a:b] = _sign_chunk(text.iloc[a:b], p, perms, gpu, chunk)
    cols: dict[str, Any] = {
        "_uid": uid,
        "id": pdf[p.id_column].to_numpy(),
        "n_chars": n_chars,
        "n_shingles": n_shingles,
    }
    for k in range(p.num_bands):
        cols[_band_col(k)] = bands[:, k]
    frame = pd.DataFrame(cols).astype({"id": pdf[p.id_column].dtype})
    write_parquet_atomic(frame, path, storage_options)
    del pdf, text, frame
    release_arrow_memory()
    return n


def _melt_bands(part: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    release_arrow_memory()  # what the shuffle's previous transfer freed
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


def _members_part(
    part: pd.DataFrame,
    routes: str | None = None,
    vertex_counts: np.ndarray | None = None,
    storage_options: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Star edges ``bucket, anchor, uid`` -> bucket members ``bucket, uid, route``: each
    member, and each bucket's anchor once. ``route`` says where the bucket is checked: its
    candidate cluster (:func:`.components.route_of` over the ``routes`` file), else its
    anchor. (The check itself needs only the buckets' members.)"""
    release_arrow_memory()  # what the shuffle's previous transfer freed
    bucket, anchor = part["bucket"].to_numpy(np.int64), part["anchor"].to_numpy(np.int64)
    # a bucket's anchor is its smallest member: the same for all of the bucket's rows
    bucket_ids, first = np.unique(bucket, return_index=True)
    uid = np.concatenate([part["uid"].to_numpy(np.int64), anchor[first]])
    bucket = np.concatenate([bucket, bucket_ids])
    anchor = np.concatenate([anchor, anchor[first]])
    if routes is not None and vertex_counts is not None and len(anchor):
        route = route_of(anchor, read_routes(routes, storage_options), vertex_counts)
    else:
        route = anchor
    return pd.DataFrame({"bucket": bucket, "uid": uid, "route": route})


def _requests(part: pd.DataFrame, partition_info: dict | None = None) -> pd.DataFrame:
    """The documents whose sets a member partition needs, once each, with where they go
    (``_dest``: this partition)."""
    release_arrow_memory()  # what the shuffle's previous transfer freed
    uid = np.unique(part["uid"].to_numpy(np.int64))
    dest = (partition_info or {}).get("number", 0)
    return pd.DataFrame({"uid": uid, "_dest": np.full(len(uid), dest, np.int64)})


def _candidate_sets(
    part: Any,
    req: pd.DataFrame,
    text_column: str,
    kind: Literal["word", "char"],
    ngram: int,
    normalization: str,
    partition_info: dict | None = None,
) -> pd.DataFrame:
    """Each requested document's sorted distinct shingle hashes (uint64 bytes in one Arrow
    binary column: no Python object per set), computed once per document here, where its
    text is, and sent to every partition that asked for it."""
    release_arrow_memory()  # what the shuffle's previous transfer freed
    part = _backend.to_pandas(part)
    if part.index.name == "_uid":  # a row group of the cached documents
        part = part.reset_index()
    else:  # the input frame itself (a dask frame input)
        part = with_uid(part[[text_column]], partition_info)
    req = req.reset_index()
    hit = part["_uid"].isin(req["uid"].to_numpy()).to_numpy()
    text = part[text_column][hit]
    uid = part["_uid"].to_numpy(np.int64)[hit]
    data: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    for a, b in _chunks(text.str.len().fillna(0).to_numpy(np.int64)):  # bounded scratch space
        hashes, offsets = shingle_hashes(text.iloc[a:b], ngram, kind, normalization)
        sets, set_off = unique_shingles(hashes, offsets)
        data.append(sets.astype(np.uint64, copy=False))
        lengths.append(np.diff(set_off))
    del text
    byte_off = np.zeros(len(uid) + 1, dtype=np.int64)
    if lengths:
        np.cumsum(np.concatenate(lengths) * 8, out=byte_off[1:])
    flat = np.concatenate(data) if data else np.zeros(0, np.uint64)
    found = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(uid), [None, pa.py_buffer(byte_off), pa.py_buffer(flat)]
    )
    r_uid = req["uid"].to_numpy(np.int64)
    at = pd.Index(uid).get_indexer(r_uid)
    keep = at >= 0
    return pd.DataFrame(
        {
            "uid": r_uid[keep],
            "_dest": req["_dest"].to_numpy(np.int64)[keep],
            "sig": pd.arrays.ArrowExtensionArray(found.take(pa.array(at[keep]))),
        }
    )


def _read_sets(path: str, storage_options: dict[str, Any] | None) -> tuple:
    """A sets file -> ``(uid, shingle hashes, start, end)``: each uid's set is
    ``hashes[start:end]``, read from the Arrow buffers without a Python object per set."""
    fs, p = get_fs(path, storage_options)
    with fs.open(p, "rb") as fh:
        return _sets_of(read_table(fh, ["uid", "sig"]))


def _sets_of(table: pa.Table) -> tuple:
    """A table ``uid, sig`` of shingle sets -> ``(uid, shingle hashes, start, end)``."""
    uid = table.column("uid").to_numpy().astype(np.int64, copy=False)
    sig = table.column("sig").combine_chunks()
    if not pa.types.is_large_binary(sig.type):
        sig = sig.cast(pa.large_binary())
    n = len(sig)
    offsets = np.frombuffer(sig.buffers()[1], dtype=np.int64)[sig.offset : sig.offset + n + 1]
    raw = sig.buffers()[2]
    raw_bytes = np.frombuffer(raw, dtype=np.uint8) if raw is not None else np.zeros(0, np.uint8)
    data = raw_bytes[: int(offsets[-1]) if n else 0].view(np.uint64)
    return uid, data, offsets[:-1] // 8, offsets[1:] // 8


def _verify_part(
    part: pd.DataFrame,
    sets_dir: str,
    threshold: float,
    max_anchors: int | None = None,
    storage_options: dict[str, Any] | None = None,
    partition_info: dict | None = None,
) -> pd.DataFrame:
    """Verify the buckets of one partition; its sets file (the same partition number, under
    ``sets_dir``) holds each member's set once. (The directory, not a list of the files: a
    list would travel with every task, a graph growing with the square of the partitions.)"""
    release_arrow_memory()  # what reading the members freed
    number = (partition_info or {}).get("number", 0)
    path = layout(sets_dir, storage_options).part_path(number)
    return _verify_members(part, _read_sets(path, storage_options), threshold, max_anchors)


def _verify_members(
    part: pd.DataFrame, sets: tuple, threshold: float, max_anchors: int | None
) -> pd.DataFrame:
    """The verified edges ``u, v`` of bucket members ``part`` (``bucket, uid``), their
    shingle sets in ``sets`` (:func:`_sets_of`)."""
    part = part.sort_values(["bucket", "uid"], kind="stable")
    uid, data, start, end = sets
    at = pd.Index(uid).get_indexer(part["uid"].to_numpy(np.int64))
    part, at = part[at >= 0], at[at >= 0]  # a member without a set has no shingles
    a, b, _ = verify_buckets(
        part["bucket"].to_numpy(), data, None, threshold, max_anchors, (start[at], end[at])
    )
    uid = part["uid"].to_numpy(np.int64)
    u, v = uid[a], uid[b]
    return pd.DataFrame({"u": np.minimum(u, v), "v": np.maximum(u, v)}).drop_duplicates()


def _star_edges(part: pd.DataFrame) -> pd.DataFrame:
    """Star edges ``bucket, anchor, uid`` -> component edges ``u, v``."""
    return pd.DataFrame({"u": part["anchor"].to_numpy(), "v": part["uid"].to_numpy()})


_EDGES_META = pd.DataFrame({"u": pd.Series([], dtype="int64"), "v": pd.Series([], dtype="int64")})
_STAR_META = pd.DataFrame(
    {
        "bucket": pd.Series([], dtype="int64"),
        "anchor": pd.Series([], dtype="int64"),
        "uid": pd.Series([], dtype="int64"),
    }
)
_MEMBERS_META = pd.DataFrame(
    {"bucket": pd.Series([], dtype="int64"), "uid": pd.Series([], dtype="int64")}
)
_ROUTED_META = _MEMBERS_META.assign(route=pd.Series([], dtype="int64"))
_LABELS_META = pd.DataFrame(
    {"uid": pd.Series([], dtype="int64"), "label": pd.Series([], dtype="int64")}
)


@dataclass
class FuzzyDeduplicationWorkflow(FuzzyParams, DedupWorkflow):
    __doc__ = (
        (FuzzyParams.__doc__ or "").replace(
            "Parameters of :class:`~curator_dask.dedup.FuzzyDeduplicationWorkflow`.",
            "Find and remove near-duplicate documents with MinHash and LSH.",
        )
        + """
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
    )

    method: ClassVar[str] = "fuzzy-dedup"
    stats: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self, input_blocksize: int | str | None) -> None:
        take_input_blocksize(self, input_blocksize)
        for name in ("num_bands", "minhashes_per_band", "char_ngrams", "word_ngrams"):
            value = getattr(self, name)
            if value is not None and int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.num_anchors is not None and self.num_anchors < 1:
            raise ValueError(f"num_anchors must be >= 1 or None, got {self.num_anchors}")
        if self.bands_per_iteration is not None and self.bands_per_iteration < 1:
            raise ValueError("bands_per_iteration must be >= 1")
        if not 0.0 < self.jaccard_threshold <= 1.0:
            raise ValueError(f"jaccard_threshold must be in (0, 1], got {self.jaccard_threshold}")
        if self.keep not in _KEEP:
            raise ValueError(f"keep must be one of {_KEEP}, got {self.keep!r}")
        if self.band_shape is not None and self.band_shape not in BAND_SHAPES:
            raise ValueError(
                f"band_shape must be one of {tuple(BAND_SHAPES)}, got {self.band_shape!r}"
            )
        self._run_obj: Run | None = None
        self._plan_key: tuple[int, int] | None = None
        #: An in-memory run's reads of the input partitions (:meth:`_runs_in_memory`).
        self._in_memory: tuple[Any, list[Any]] | None = None

    # -- parameters and cache layout ---------------------------------------------------
    def bands(self) -> tuple[int, int]:
        """``(num_bands, minhashes_per_band)``: as given, else ``band_shape``'s, else the
        shape that follows from ``jaccard_threshold`` (:func:`.lsh.bands_for_threshold`)."""
        if self.band_shape is not None:
            b, r = BAND_SHAPES[self.band_shape]
        else:
            b, r = bands_for_threshold(self.jaccard_threshold, self.false_positive_check)
        return int(self.num_bands or b), int(self.minhashes_per_band or r)

    @property
    def _sig_params(self) -> _SigParams:
        kind: Literal["word", "char"] = "char"
        ngram = int(self.char_ngrams or 24)
        if self.word_ngrams is not None or self.char_ngrams is None:
            kind, ngram = "word", int(self.word_ngrams or 5)
        norm = self.normalization or ("simple" if kind == "word" else "none")
        b, r = self.bands()
        return _SigParams(
            kind, int(ngram), norm, b, r, int(self.seed), bool(self.use_64_bit_hash),
            self.text_column, self.id_column,
        )  # fmt: skip

    def _run(self) -> Run:
        if self._run_obj is None:
            self._run_obj = self._begin()
            # the cache is keyed by the input: resolve its root now, quarantine under it
            root = self._cache_root(self._run_obj)
            self._run_obj.steps = StepCache(root, self.storage_options)
            self._run_obj.input.quarantine_path = join(root, "quarantine")
        return self._run_obj

    def _cache_root(self, run: Run) -> str:
        from curator_dask.dedup._runtime import resolve_path

        key = tokenize(run.input.fingerprint(), str(self.blocksize), self._sig_params)
        return join(resolve_path(self.cache_path), f"fuzzy-{key[:16]}")

    def cache_dir(self) -> str:
        """The cache directory of this input and these signature parameters."""
        return self._run().steps.root

    def _input(self) -> Any:
        return self._run().input.frame()

    def _runs_in_memory(self) -> bool:
        """Whether this run keeps its steps' partitions as pandas frames in this process
        (:meth:`~curator_dask.dedup._common.DedupWorkflow._in_memory_reads`; not with
        signatures on the GPU). The steps call the same partition functions on the same
        partitions and write the same step cache and outputs; only the shuffles (one
        partition holds everything) and the graphs are left out."""
        if minhash_devices()[0] == "gpu":
            return False
        self._in_memory = self._in_memory_reads(self._run())
        return self._in_memory is not None

    def _input_parts(self) -> list[Any]:
        """The input's partitions as dask delayed objects: the frame's, or in an in-memory run
        the reader's reads of the same partitions (what the frame's tasks call)."""
        if self._in_memory is None:
            return list(self._input().to_delayed())
        read, specs = self._in_memory
        return [dask.delayed(read, pure=False)(spec) for spec in specs]

    def _input_meta(self) -> pd.DataFrame:
        """The input's columns and types (an empty frame)."""
        if self._in_memory is not None:
            return self._in_memory[0].meta
        return self._input()._meta

    # -- step 1 -------------------------------------------------------------------------
    def _keeps_documents(self) -> bool:
        """Whether the MinHash step also writes the documents to the cache, so that the
        candidate check and the removal read them there instead of the input again."""
        return bool(self.false_positive_check or self.perform_removal) and (
            self._run().input.paths is not None
        )

    def compute_minhashes(self) -> str:
        """Step 1: write one Parquet file of band hashes per input partition; resumable.

        When the candidate check or the removal needs the texts later, each partition's
        documents are written to the cache's ``docs/`` in the same pass (the input is read
        once per run).
        """
        run = self._run()
        so = self.storage_options
        out = join(run.steps.root, "minhash")
        docs_dir = join(run.steps.root, "docs") if self._keeps_documents() else None
        if run.steps.is_done(out):
            if docs_dir is None or run.steps.read_done(out).get("docs"):
                self.stats["minhash_partitions_computed"] = 0
                return out
            run.steps.clear(out)  # made without the documents, which are needed now
        parts = self._input_parts()
        p = self._sig_params
        todo_all = range(len(parts))
        paths = [join(out, f"part-{i:05d}.parquet") for i in todo_all]
        docs = [join(docs_dir, f"part-{i:05d}.parquet") if docs_dir else None for i in todo_all]
        have = set(parquet_files(out, so))
        if docs_dir is not None:  # a partition is done when both of its files are
            have &= {join(out, f.rsplit("/", 1)[-1]) for f in parquet_files(docs_dir, so)}
        todo = [i for i in range(len(parts)) if paths[i] not in have]
        device, shingle_device = minhash_devices()
        tasks = [
            dask.delayed(_minhash_partition)(
                parts[i], i, p, paths[i], device, so, docs[i], shingle_device
            )
            for i in todo
        ]
        run.reporter.compute(tasks, "minhash")
        rows = rows_per_file(paths, so)
        run.steps.mark_done(
            out,
            {
                "partitions": len(parts),
                "documents": int(sum(rows)),
                "max_partition_documents": int(max(rows, default=0)),
                "partition_documents": [int(r) for r in rows],
                "docs": docs_dir is not None,
                "input": run.input.describe(),
                "params": p.__dict__,
            },
        )
        self.stats["minhash_partitions_computed"] = len(todo)
        return out

    def _documents_by_uid(self) -> tuple[Any, list[int]]:
        """The texts in pieces, and the ``_uid`` bounds of the pieces: the cached documents
        a row group at a time (indexed by ``_uid``), or the input partitions (partition
        ``i`` holds uids ``i << 32 ...``)."""
        if not self._keeps_documents():
            df = self._input()[[self.text_column]]
            n = df.npartitions
            return df, [i << UID_SHIFT for i in range(n)] + [(n << UID_SHIFT) - 1]
        docs_dir = join(self.cache_dir(), "docs")
        meta = self._input()._meta.assign(_uid=pd.Series([], dtype="int64"))
        files = parquet_files(docs_dir, self.storage_options)
        df = read_row_groups_by(files, "_uid", meta, self.storage_options, [self.text_column])
        return df, list(df.divisions)

    def _documents(self, columns: list[str] | None = None) -> Any:
        """The input documents: from the cache's ``docs/`` when the MinHash step wrote them
        (with ``_uid``; one partition per file, in input order), else the input frame.
        An in-memory run always has them in the cache, and reads them as a list of pandas
        frames."""
        if not self._keeps_documents():
            df = self._input()
            return df if columns is None else df[columns]
        docs_dir = join(self.cache_dir(), "docs")
        meta = self._input_meta().assign(_uid=pd.Series([], dtype="int64"))
        files = parquet_files(docs_dir, self.storage_options)
        cols = None if columns is None else [*columns, "_uid"]
        if self._in_memory is not None:  # a list of pandas frames, one per file
            return read_part_frames(files, meta, self.storage_options, cols)
        return read_parts(files, meta, self.storage_options, cols)

    def _minhash_files(self) -> list[str]:
        return parquet_files(join(self.cache_dir(), "minhash"), self.storage_options)

    # -- step 2 -------------------------------------------------------------------------
    def plan(self, num_docs: int) -> int:
        """``bands_per_iteration``: the argument, ``curator.dedup.bands-per-iteration``, or
        the memory planner's choice for ``num_docs`` on the current cluster."""
        if self.bands_per_iteration is not None:
            return int(self.bands_per_iteration)
        configured = config.get("dedup.bands-per-iteration", None)
        if configured is not None:
            return int(configured)
        key = (num_docs, self.bands()[0])
        if self._plan_key != key:  # planned once per run (and warned once)
            n_workers, memory, threads = sizing.worker_resources(self.client)
            per_part = None
            if shuffle_method(self.client) == "p2p":  # spills: memory per partition in flight
                sig_dir = join(self.cache_dir(), "minhash")
                steps = self._run().steps
                done = steps.read_done(sig_dir) if steps.is_done(sig_dir) else {}
                per_part = int(done.get("max_partition_documents") or num_docs)
            plan = plan_lsh(
                num_docs, self.bands()[0], max(1, n_workers), memory,
                docs_per_partition=per_part, threads_per_worker=threads,
            )  # fmt: skip
            self.stats["plan"] = plan.to_dict()
            self._plan_key = key
        return int(self.stats["plan"]["bands_per_iteration"])

    def band_groups(self, num_docs: int) -> list[tuple[int, int]]:
        """The ``[first, last)`` band ranges of the LSH passes."""
        nb = self.bands()[0]
        bpi = min(self.plan(num_docs), nb)
        return [(a, min(a + bpi, nb)) for a in range(0, nb, bpi)]

    def _group_dir(self, group: tuple[int, int]) -> str:
        return join(self.cache_dir(), "lsh", f"bands-{group[0]:03d}-{group[1]:03d}")

    def _run_band_group(self, group: tuple[int, int]) -> None:
        run = self._run()
        so = self.storage_options
        cols = [_band_col(k) for k in range(*group)]
        meta = pd.DataFrame(
            {c: pd.Series([], dtype="int64") for c in ["_uid", "n_shingles", *cols]}
        )
        sig_dir, sig_cols = join(self.cache_dir(), "minhash"), ["_uid", "n_shingles", *cols]
        edges: Any
        if self._in_memory is not None:  # one partition holds every bucket: no shuffle
            sig_frames = read_frames(sig_dir, so, meta, sig_cols)
            edges = [_edges_part(_melt_bands(pd.concat(sig_frames, ignore_index=True), cols))]
        else:
            rows = read_parquet_dir(sig_dir, so, meta, sig_cols).map_partitions(
                _melt_bands,
                cols,
                meta=pd.DataFrame(
                    {"bucket": pd.Series([], dtype="int64"), "uid": pd.Series([], dtype="int64")}
                ),
            )
            shuffled = rows.shuffle(on="bucket", shuffle_method=shuffle_method(self.client))
            edges = shuffled.map_partitions(_edges_part, meta=_STAR_META)
        out = self._group_dir(group)
        write_frame(edges, join(out, "edges"), run.reporter, f"bands {group[0]}-{group[1] - 1}", so)
        run.steps.mark_done(out, {"bands": list(group)})

    def compute_lsh(self, num_docs: int) -> list[str]:
        """Step 2: bucket each band group; skip groups already done. Returns their dirs."""
        run = self._run()
        done = 0
        dirs = []
        groups = self.band_groups(num_docs)
        counter = run.reporter.counter("lsh", len(groups), "band groups")
        for group in groups:
            d = self._group_dir(group)
            if not run.steps.is_done(d):
                self._run_band_group(group)
                done += 1
            dirs.append(d)
            counter.tick()
        self.stats["lsh_groups_computed"] = done
        self.stats["lsh_groups"] = len(dirs)
        return dirs

    def _edge_rows(self, group_dirs: list[str]) -> Any:
        so = self.storage_options
        files = sorted(f for d in group_dirs for f in parquet_files(join(d, "edges"), so))
        if self._in_memory is not None:
            return pd.concat(read_part_frames(files, _STAR_META, so), ignore_index=True)
        return read_parts(files, _STAR_META, so)

    # -- step 3 -------------------------------------------------------------------------
    def _verify_partitions(self, edge_rows: int) -> int:
        """Partitions of the candidate check, so that each holds at most what the planner
        gives a partition (:func:`.planner.partitions_for`): its bucket members (at most two
        24-byte rows per star edge) and their shingle sets (8 bytes per shingle, the corpus
        mean, at most one set per candidate document and partition)."""
        so = self.storage_options
        sig = read_parquet_dir(
            join(self.cache_dir(), "minhash"), so, pd.DataFrame({"n_shingles": []}), ["n_shingles"]
        )
        shingles = sig["n_shingles"]
        n_docs, mean_shingles = dask.compute(shingles.count(), shingles.mean())
        # no signature at all (every record quarantined): the mean of nothing is NaN
        mean_shingles = float(mean_shingles) if int(n_docs) else 0.0
        total = 2 * edge_rows * 24 + min(2 * edge_rows, int(n_docs)) * (8 * mean_shingles + 64)
        _, memory, threads = sizing.worker_resources(self.client)
        return partitions_for(total, memory, threads)

    def _partition_documents(self) -> np.ndarray:
        """Documents per input partition (the uids' row counts), from the MinHash step."""
        done = self._run().steps.read_done(join(self.cache_dir(), "minhash"))
        counts = done.get("partition_documents")
        if counts is None:  # a cache from before the counts were recorded
            counts = rows_per_file(self._minhash_files(), self.storage_options)
        return np.asarray(counts, dtype=np.int64)

    def _candidate_routes(
        self, out: str, files: list[str], npart: int, edge_rows: int
    ) -> tuple[np.ndarray | None, str | None]:
        """The candidate clusters (connected components of the LSH buckets' star edges),
        written to ``out/routes.npy`` by one worker task, so that the check meets every bucket
        of a cluster in one partition and needs each document's shingle set there only.
        A cluster of more than half a check partition's documents is checked by anchor.
        ``(None, None)`` (check by anchor) when a route per document does not fit a worker."""
        so = self.storage_options
        counts = self._partition_documents()
        if int(counts.sum()) > budget_slots(self.client, ROUTE_BYTES):
            return None, None
        path = join(out, "routes.npy")
        fs, p = get_fs(path, so)
        if not fs.exists(p):
            in_buckets = min(2 * edge_rows, int(counts.sum()))
            cap = max(2, in_buckets // max(1, 2 * npart))
            task = dask.delayed(write_routes, pure=False)(files, counts, path, cap, so)
            self._run().reporter.compute([task], "candidate clusters", unit="tasks")
        return counts, path

    def verify_candidates(self, group_dirs: list[str]) -> str:
        """Step 3: verified edges ``u, v`` (exact Jaccard >= threshold); resumable.

        The bucket members are shuffled on their candidate cluster (:meth:`_candidate_routes`:
        all the buckets a document is in meet in one partition), written, and each partition
        asks the documents' partitions (in the cache) for the shingle set of each of its
        documents once, however many of its buckets the document is in. So each document's
        set is made and sent once, however large its cluster.
        """
        run = self._run()
        so = self.storage_options
        groups = [d.rsplit("/", 1)[-1] for d in group_dirs]
        out = run.steps.dir("verify", self.jaccard_threshold, self.num_anchors, groups)
        if run.steps.is_done(out):
            self.stats["verify_computed"] = 0
            return out
        if self._in_memory is not None:
            return self._verify_in_memory(out, group_dirs)
        method = shuffle_method(self.client)
        files = sorted(f for d in group_dirs for f in parquet_files(join(d, "edges"), so))
        rows = read_parts(files, _STAR_META, so)
        edge_rows = count_rows(files, so)  # star edges, from the files' footers (read once)
        npart = self._verify_partitions(edge_rows)
        counts, routes = self._candidate_routes(out, files, npart, edge_rows)
        members = (
            rows.map_partitions(_members_part, routes, counts, so, meta=_ROUTED_META)
            .shuffle(on="route", shuffle_method=method, npartitions=npart)
            .map_partitions(lambda p: p.drop(columns="route").drop_duplicates(), meta=_MEMBERS_META)
        )
        mdir = join(out, "members")
        member_rows = write_frame(members, mdir, run.reporter, "candidates", so)
        members = read_parts(parquet_files(mdir, so), _MEMBERS_META, so)
        npart = members.npartitions
        df, bounds = self._documents_by_uid()
        req = members.map_partitions(
            _requests,
            meta=pd.DataFrame({c: pd.Series([], dtype="int64") for c in ("uid", "_dest")}),
        ).set_index("uid", divisions=bounds, shuffle_method=method)
        p = self._sig_params
        sets = df.map_partitions(
            _candidate_sets,
            req,
            self.text_column,
            p.kind,
            p.ngram,
            p.normalization,
            align_dataframes=False,
            meta=pd.DataFrame(
                {
                    "uid": pd.Series([], dtype="int64"),
                    "_dest": pd.Series([], dtype="int64"),
                    "sig": pd.Series([], dtype=pd.ArrowDtype(pa.large_binary())),
                }
            ),
        ).set_index("_dest", divisions=[*range(npart), npart], shuffle_method=method)
        # written before the check: the sets' shuffle and the check do not hold memory at
        # the same time, and a check partition reads only its own file
        sdir = join(out, "sets")
        schema = pa.schema([("uid", pa.int64()), ("sig", pa.large_binary())])
        n_sets = write_frame(sets, sdir, run.reporter, "shingle sets", so, schema)
        n_files = len(parquet_files(sdir, so))
        if n_files != npart:
            raise RuntimeError(f"{n_files} shingle set files for {npart} partitions")
        edges = members.map_partitions(
            _verify_part,
            sdir,
            float(self.jaccard_threshold),
            self.num_anchors,
            so,
            meta=_EDGES_META,
        )
        write_frame(edges, join(out, "edges"), run.reporter, "verify", so)
        remove_tree(mdir, so)
        remove_tree(sdir, so)
        if routes is not None:
            fs, path = get_fs(routes, so)
            fs.rm(path)
        run.steps.mark_done(
            out,
            {
                "threshold": self.jaccard_threshold,
                "members": member_rows,
                "sets": n_sets,
                "partitions": npart,
                "by_cluster": routes is not None,
            },
        )
        self.stats["verify_computed"] = 1
        self.stats["verify_sets"] = n_sets
        return out

    def _verify_in_memory(self, out: str, group_dirs: list[str]) -> str:
        """Step 3 of an in-memory run: :meth:`verify_candidates`'s partition functions on one
        partition (every bucket, every candidate's set), the same edges written."""
        run = self._run()
        so = self.storage_options
        p = self._sig_params
        members = _members_part(self._edge_rows(group_dirs))
        members = members.drop(columns="route").drop_duplicates()
        req = _requests(members).set_index("uid")
        found = [
            _candidate_sets(
                docs.set_index("_uid"), req, self.text_column, p.kind, p.ngram, p.normalization
            )
            for docs in self._documents([self.text_column])
        ]
        sets = pd.concat(found, ignore_index=True)
        table = pa.Table.from_pandas(sets[["uid", "sig"]], preserve_index=False)
        edges = _verify_members(
            members, _sets_of(table), float(self.jaccard_threshold), self.num_anchors
        )
        write_frame([edges], join(out, "edges"), run.reporter, "verify", so)
        run.steps.mark_done(
            out,
            {
                "threshold": self.jaccard_threshold,
                "members": len(members),
                "sets": len(sets),
                "partitions": 1,
                "by_cluster": False,
            },
        )
        self.stats["verify_computed"] = 1
        self.stats["verify_sets"] = len(sets)
        return out

    # -- steps 4 and 5 --------------------------------------------------------------------
    def _edges(self, group_dirs: list[str]) -> tuple[Any, str]:
        """The edges ``u, v`` of the components (a lazy frame; a pandas frame in an
        in-memory run), and the components' step directory."""
        run = self._run()
        groups = [d.rsplit("/", 1)[-1] for d in group_dirs]
        in_memory = self._in_memory is not None
        if self.false_positive_check:
            vdir = self.verify_candidates(group_dirs)
            edir, so = join(vdir, "edges"), self.storage_options
            if in_memory:
                return pd.concat(read_frames(edir, so, _EDGES_META)), join(vdir, "components")
            return read_parquet_dir(edir, so, _EDGES_META), join(vdir, "components")
        rows = self._edge_rows(group_dirs)
        star = run.steps.dir("components", "star", groups)
        if in_memory:
            return _star_edges(rows), star
        return rows.map_partitions(_star_edges, meta=_EDGES_META), star

    def members(self, labels: Any) -> Any:
        """Lazy frame ``id, group, _uid, removed`` of every group member, from the labels
        (a pandas frame from pandas labels, in an in-memory run)."""
        meta = pd.DataFrame(
            {
                "_uid": pd.Series([], dtype="int64"),
                "id": pd.Series([], dtype=object),
                "n_chars": pd.Series([], dtype="int64"),
            }
        )
        sig_dir, cols = join(self.cache_dir(), "minhash"), ["_uid", "id", "n_chars"]
        if self._in_memory is not None:  # one partition: every group
            frame = pd.concat(read_frames(sig_dir, self.storage_options, meta, cols))
            return group_members(labels.merge(frame, left_on="uid", right_on="_uid"), self.keep)
        method = shuffle_method(self.client)
        meta_df = read_parquet_dir(sig_dir, self.storage_options, meta, cols)
        joined = labels.merge(meta_df, left_on="uid", right_on="_uid", shuffle_method=method)
        id_dtype = meta_df._meta["id"].dtype
        return joined.shuffle(on="label", shuffle_method=method).map_partitions(
            group_members, self.keep, meta=members_meta(id_dtype)
        )

    @leased
    def run(self) -> DedupResult:
        """Run all steps, reusing finished ones from ``cache_path``.

        Writes ``<output_path>/removed_ids/*.parquet`` with columns ``id`` (as read) and
        ``group`` (the id of the document kept for that duplicate group), one row per removed
        document; with ``duplicate_groups`` every member to ``duplicate_groups/``; with
        ``perform_removal`` the kept documents to ``deduplicated/``; quarantined input
        records to ``<output_path>.curator/_quarantine/``. Each output directory appears
        whole, with ``<dir>.curator/_SUCCESS`` beside it.
        Intermediate results go under :meth:`cache_dir`.

        Returns
        -------
        DedupResult
            Counts, ``seconds`` per step, ``paths``, and in ``details`` the band shape,
            ``bands_per_iteration`` and ``cache_dir``.
        """
        self._run_obj = None
        self._plan_key = None
        self._in_memory = None
        self.stats.clear()
        run = self._run()
        r = run.reporter
        so = self.storage_options
        in_memory = self._runs_in_memory()
        with r.step("minhash"):
            sig_dir = self.compute_minhashes()
            num_docs = int(run.steps.read_done(sig_dir)["documents"])
        with r.step("lsh"):
            group_dirs = self.compute_lsh(num_docs)
        with r.step("verify" if self.false_positive_check else "edges"):
            if num_docs:
                edges, comp_dir = self._edges(group_dirs)
            else:  # nothing read (every record quarantined): no candidate, no group
                comp_dir = run.steps.dir("components", "none")
        with r.step("components"):
            labels_dir = join(comp_dir, "labels")
            if not num_docs and in_memory:
                labels = _LABELS_META
            elif not num_docs:
                import dask.dataframe as dd

                labels = dd.from_pandas(_LABELS_META, npartitions=1)
            elif not run.steps.is_done(comp_dir):
                if in_memory:  # labelled alike: each component's smallest uid
                    u, v = edges["u"].to_numpy(np.int64), edges["v"].to_numpy(np.int64)
                    labels = [components_in_memory(u, v)]
                else:
                    labels = connected_components(
                        edges,
                        join(comp_dir, "work"),
                        self.client,
                        storage_options=so,
                        reporter=r,
                        vertex_counts=self._partition_documents(),
                    )
                write_frame(labels, labels_dir, r, "labels", so)
                remove_tree(join(comp_dir, "work"), so)
                run.steps.mark_done(comp_dir)
            if num_docs and in_memory:
                labels = pd.concat(read_frames(labels_dir, so, _LABELS_META), ignore_index=True)
            elif num_docs:
                labels = read_parquet_dir(labels_dir, so, _LABELS_META)
        b, rows = self.bands()
        details = {
            "band_shape": f"{b}x{rows}",
            "bands_per_iteration": self.band_groups(num_docs)[0][1],
            "cache_dir": self.cache_dir(),
        }
        work = run.steps.dir("output", comp_dir, self.keep)
        docs = self._documents() if self.perform_removal else None
        return self._finish(
            run, self.members(labels), num_docs, work, details, self.stats, documents_frame=docs
        )
