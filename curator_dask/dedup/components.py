"""Connected components of an edge list, distributed on dask dataframes.

First every partition of the edge list is replaced by the star edges of its own components
(each vertex to its partition-local component minimum; written under ``work_dir``): the same
connectivity, with at most one edge per vertex and partition. Then two paths, same result
(every vertex labelled with the smallest vertex of its component):

- streamed union-find: the uids of the workflows are ``partition << 32 | row``, so a vertex
  has a dense slot (its partition's offset plus its row). One task on a worker holds a parent
  array of one 32-bit (64-bit past 2**31 slots) integer per slot and reads the reduced edge
  files one at a time into it, then writes the labels in pieces of a million rows. Its memory
  is ~5 bytes per document and one edge file, whatever the number of edges; it is used when
  that fits ``curator.dedup.memory-fraction`` of a worker's memory limit (or
  ``curator.dedup.components-in-memory-max-vertices`` when set);
- distributed: alternating *large-star* and *small-star* rounds (Kiveris et al., "Connected
  Components in MapReduce and Beyond", SoCC 2014), each a shuffle of the edges on their first
  vertex and a per-partition pandas reduction, until the edge set stops changing. At the fixed
  point every edge joins a vertex to its component's minimum. Each round's edges are written to
  Parquet, so memory is bounded by a shuffle, never the whole graph on one machine. Used past
  that budget, or for vertices that are not ``partition << 32 | row`` (negative, or too many
  slots).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dask
import numba
import numpy as np
import pandas as pd

from curator_dask import _ckernels, config, sizing
from curator_dask._kernels import KERNEL_OPT, share_compiles
from curator_dask.dedup._common import UID_SHIFT, shuffle_method
from curator_dask.dedup._runtime import (
    Reporter,
    join,
)
from curator_dask.io.parquet_dir import (
    get_fs,
    parquet_files,
    read_parquet_dir,
    read_parts,
    read_table,
    remove_tree,
    write_frame,
    write_parquet_atomic,
)

if TYPE_CHECKING:
    import dask.dataframe as dd


@numba.njit(nogil=True, cache=True)
def _union_into(parent, a, b):  # pragma: no cover - compiled
    # parent[i] <= i always holds: a root is the smallest slot of its tree
    for k in range(len(a)):
        x, y = a[k], b[k]
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x < y:
            parent[y] = x
        elif y < x:
            parent[x] = y


@numba.njit(nogil=True, cache=True)
def _flatten(parent):  # pragma: no cover - compiled
    for i in range(len(parent)):  # parent[i] < i is final by the time i is reached
        parent[i] = parent[parent[i]]


def _union_kernels() -> tuple[Any, Any]:
    """:func:`_union_into` and :func:`_flatten`, or their C twins (``csrc/dedup_small.c``,
    for int32 and int64 parents) where :mod:`curator_dask._ckernels` builds them."""
    return (
        _ckernels.kernel("components.union_into", _union_into),
        _ckernels.kernel("components.flatten", _flatten),
    )


def components_in_memory(u: np.ndarray, v: np.ndarray) -> pd.DataFrame:
    """Label the vertices of edges ``(u, v)`` with their component's smallest vertex."""
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    nodes, inv = np.unique(np.concatenate([u, v]), return_inverse=True)
    n = len(nodes)
    if n == 0:
        return pd.DataFrame({"uid": np.zeros(0, np.int64), "label": np.zeros(0, np.int64)})
    m = len(u)
    # roots are always the smallest index of their tree, and nodes are sorted, so each
    # root is its component's minimum; after the final pass every node points at it
    # the slots' dtype of the streamed union-find (int32 below 2**31 slots): one compiled
    # _union_into and _flatten for both, not one more per dtype on a machine's first run
    dtype = np.int32 if n < 2**31 else np.int64
    root = np.arange(n, dtype=dtype)
    union_into, flatten = _union_kernels()
    union_into(root, inv[:m].astype(dtype), inv[m:].astype(dtype))
    flatten(root)
    return pd.DataFrame({"uid": nodes, "label": nodes[root]})


#: Bytes a streamed union-find holds per slot: the parent (int32) and a touched flag.
SLOT_BYTES = 5
#: Bytes :func:`write_routes` holds per slot at its peak (the union-find, the sort of the
#: touched slots' roots, and the mask of the large components).
ROUTE_BYTES = 16


def _slots(vertex_counts: np.ndarray) -> np.ndarray:
    """Offsets of each uid partition's first slot (one more entry: the number of slots)."""
    off = np.zeros(len(vertex_counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(vertex_counts, dtype=np.int64), out=off[1:])
    return off


def _slot_of(uid: np.ndarray, off: np.ndarray) -> np.ndarray:
    hi = uid >> UID_SHIFT
    lo = uid & ((1 << UID_SHIFT) - 1)
    n = len(off) - 1
    bad = (uid < 0) | (hi >= n)
    if not bad.any():
        bad = lo >= (off[1:] - off[:-1])[hi]
    if bad.any():
        raise ValueError(
            f"vertex {int(uid[np.argmax(bad)])} is not partition << {UID_SHIFT} | row of the "
            f"{n} partitions whose row counts were given"
        )
    return off[hi] + lo


def _uid_of(slot: np.ndarray, off: np.ndarray) -> np.ndarray:
    hi = np.searchsorted(off, slot, side="right") - 1
    return (hi.astype(np.int64) << UID_SHIFT) + (slot - off[hi])


def _union_files(
    files: list[str],
    vertex_counts: np.ndarray,
    columns: tuple[str, str],
    storage_options: dict[str, Any] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union-find over the edges in ``columns`` of ``files``, read one file at a time:
    ``(root slot of every slot, touched flag of every slot, slot offsets)``."""
    off = _slots(vertex_counts)
    n = int(off[-1])
    parent = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
    touched = np.zeros(n, dtype=np.bool_)
    union_into, flatten = _union_kernels()
    for f in files:
        fs, p = get_fs(f, storage_options)
        with fs.open(p, "rb") as fh:
            table = read_table(fh, columns)
        a = _slot_of(table.column(columns[0]).to_numpy().astype(np.int64, copy=False), off)
        b = _slot_of(table.column(columns[1]).to_numpy().astype(np.int64, copy=False), off)
        del table
        touched[a] = True
        touched[b] = True
        union_into(parent, a.astype(parent.dtype), b.astype(parent.dtype))
        del a, b
    flatten(parent)
    return parent, touched, off


def streamed_union_find(
    files: list[str],
    vertex_counts: np.ndarray,
    out_dir: str,
    storage_options: dict[str, Any] | None = None,
    rows_per_file: int | None = None,
) -> list[str]:
    """Union-find over the edge files ``files`` (columns ``u, v``) read one at a time, with
    one slot per vertex (``vertex_counts[p]`` rows in uid partition ``p``); writes the labels
    ``uid, label`` of every vertex on an edge to ``out_dir/part-*.parquet`` in pieces of
    ``rows_per_file`` rows and returns their paths. Memory: :data:`SLOT_BYTES` per slot and
    one edge file."""
    rows_per_file = rows_per_file or LABELS_PER_PARTITION
    parent, touched, off = _union_files(files, vertex_counts, ("u", "v"), storage_options)
    slots = np.flatnonzero(touched)
    del touched
    remove_tree(out_dir, storage_options)
    paths = []
    for k, start in enumerate(range(0, max(len(slots), 1), rows_per_file)):
        piece = slots[start : start + rows_per_file]
        frame = pd.DataFrame(
            {"uid": _uid_of(piece, off), "label": _uid_of(parent[piece].astype(np.int64), off)}
        )
        path = join(out_dir, f"part-{k:05d}.parquet")
        paths.append(write_parquet_atomic(frame, path, storage_options))
    return paths


def write_routes(
    files: list[str],
    vertex_counts: np.ndarray,
    path: str,
    max_component: int,
    storage_options: dict[str, Any] | None = None,
    columns: tuple[str, str] = ("anchor", "uid"),
) -> int:
    """Connected components of the edges in ``files`` (read one at a time), saved to ``path``
    (``.npy``) as one route per slot: the component's root slot, or -1 for the members of a
    component of more than ``max_component`` vertices (and for vertices on no edge).
    Returns the number of vertices on an edge."""
    import io

    from curator_dask.io.parquet_dir import write_bytes_atomic

    route, touched, _ = _union_files(files, vertex_counts, columns, storage_options)
    roots, sizes = np.unique(route[touched], return_counts=True)
    route[~touched] = -1
    big = roots[sizes > max_component]
    if len(big):
        route[np.isin(route, big)] = -1
    buf = io.BytesIO()
    np.save(buf, route)
    write_bytes_atomic(buf.getvalue(), path, storage_options)
    return int(touched.sum())


_ROUTES: dict[tuple[str, str], np.ndarray] = {}


def read_routes(path: str, storage_options: dict[str, Any] | None = None) -> np.ndarray:
    """The routes :func:`write_routes` saved (memory-mapped from a local disk); one array is
    kept per process, so the tasks of a worker read it once."""
    import io
    import json

    key = (path, json.dumps(storage_options or {}, sort_keys=True, default=str))
    if key not in _ROUTES:
        _ROUTES.clear()
        fs, p = get_fs(path, storage_options)
        if "file" in ((fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol):
            _ROUTES[key] = np.load(p, mmap_mode="r")
        else:
            with fs.open(p, "rb") as fh:
                _ROUTES[key] = np.load(io.BytesIO(fh.read()))
    return _ROUTES[key]


def route_of(anchor: np.ndarray, routes: np.ndarray, vertex_counts: np.ndarray) -> np.ndarray:
    """The shuffle key of rows whose bucket has ``anchor``: the root slot of the anchor's
    component, or the anchor itself (its own key) where :func:`write_routes` gave -1."""
    anchor = np.asarray(anchor, dtype=np.int64)
    r = np.asarray(routes[_slot_of(anchor, _slots(vertex_counts))], dtype=np.int64)
    return np.where(r >= 0, r, anchor)


def _vertex_counts_of(part: pd.DataFrame) -> pd.DataFrame:
    """Per uid partition, one more than the largest row on an edge of ``part``."""
    uid = np.concatenate([part["u"].to_numpy(np.int64), part["v"].to_numpy(np.int64)])
    if len(uid) and uid.min() < 0:
        return pd.DataFrame({"hi": [-1], "rows": [0]})
    frame = pd.DataFrame({"hi": uid >> UID_SHIFT, "rows": (uid & ((1 << UID_SHIFT) - 1)) + 1})
    return frame.groupby("hi", as_index=False)["rows"].max()


def _local_stars(part: pd.DataFrame) -> pd.DataFrame:
    """The edges of one partition -> one edge per non-minimal vertex to its local minimum."""
    lab = components_in_memory(part["u"].to_numpy(np.int64), part["v"].to_numpy(np.int64))
    uid, label = lab["uid"].to_numpy(), lab["label"].to_numpy()
    kid = uid != label
    return pd.DataFrame({"u": label[kid], "v": uid[kid]})


def _large_star(part: pd.DataFrame) -> pd.DataFrame:
    # part holds both directions of every edge, keyed by u
    m = np.minimum(part.groupby("u")["v"].transform("min").to_numpy(), part["u"].to_numpy())
    keep = part["v"].to_numpy() > part["u"].to_numpy()
    out = pd.DataFrame({"u": part["v"].to_numpy()[keep], "v": m[keep]})
    return out[out["u"] != out["v"]].drop_duplicates()


def _small_star(part: pd.DataFrame) -> pd.DataFrame:
    # part holds edges oriented u > v, keyed by u
    if not len(part):
        return part
    m = np.minimum(part.groupby("u")["v"].transform("min").to_numpy(), part["u"].to_numpy())
    out = pd.concat(
        [
            pd.DataFrame({"u": part["v"].to_numpy(), "v": m}),
            pd.DataFrame({"u": part["u"].to_numpy(), "v": m}),
        ],
        ignore_index=True,
    )
    return out[out["u"] != out["v"]].drop_duplicates()


def _both_directions(part: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(
        [part, pd.DataFrame({"u": part["v"].to_numpy(), "v": part["u"].to_numpy()})],
        ignore_index=True,
    )


def _oriented(part: pd.DataFrame) -> pd.DataFrame:
    u, v = part["u"].to_numpy(), part["v"].to_numpy()
    return pd.DataFrame({"u": np.maximum(u, v), "v": np.minimum(u, v)})


def _checksum(part: pd.DataFrame) -> pd.DataFrame:
    from curator_dask.dedup.minhash import _fmix64_array

    key = part["u"].to_numpy(np.int64) * 0x9E3779B1 + part["v"].to_numpy(np.int64)
    h = _fmix64_array(key).view(np.int64)
    return pd.DataFrame({"n": [len(part)], "s": [int(np.bitwise_xor.reduce(h)) if len(h) else 0]})


#: Rows per partition of the labels found in memory (16 bytes each: 16 MB).
LABELS_PER_PARTITION = 1_000_000

_EDGE_META = pd.DataFrame({"u": pd.Series([], dtype="int64"), "v": pd.Series([], dtype="int64")})


def components_distributed(
    edges: Any,
    work_dir: str,
    max_rounds: int = 100,
    client: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> dd.DataFrame:
    """Large-star / small-star connected components; returns a lazy ``uid, label`` frame.

    ``edges`` is a dask dataframe with int64 columns ``u, v``. Each round's edges are
    written under ``work_dir`` (removed on success except the final labels).
    """
    method = shuffle_method(client)
    npart = max(1, edges.npartitions)
    cur = edges[["u", "v"]].map_partitions(_oriented, meta=_EDGE_META)
    prev: tuple[int, int] | None = None
    for rnd in range(max_rounds):
        ls = (
            cur.map_partitions(_both_directions, meta=_EDGE_META)
            .shuffle(on="u", npartitions=npart, shuffle_method=method)
            .map_partitions(_large_star, meta=_EDGE_META)
        )
        ss = (
            ls.map_partitions(_oriented, meta=_EDGE_META)
            .shuffle(on="u", npartitions=npart, shuffle_method=method)
            .map_partitions(_small_star, meta=_EDGE_META)
        )
        # canonical edge set: de-duplicate across partitions before the checksum
        ss = ss.shuffle(on=["u", "v"], npartitions=npart, shuffle_method=method).map_partitions(
            lambda p: p.drop_duplicates(), meta=_EDGE_META
        )
        out = join(work_dir, f"round-{rnd:03d}")
        write_frame(ss, out, None, f"components round {rnd}", storage_options)
        cur = read_parquet_dir(out, storage_options, _EDGE_META)
        sums = cur.map_partitions(_checksum, meta=pd.DataFrame({"n": [0], "s": [0]})).compute()
        state = (int(sums["n"].sum()), int(np.bitwise_xor.reduce(sums["s"].to_numpy())))
        if rnd:
            remove_tree(join(work_dir, f"round-{rnd - 1:03d}"), storage_options)
        if state == prev:
            break
        prev = state
    else:  # pragma: no cover - needs a pathological graph
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")

    def _labels(part: pd.DataFrame) -> pd.DataFrame:
        roots = pd.DataFrame({"uid": part["v"].to_numpy(), "label": part["v"].to_numpy()})
        kids = part.rename(columns={"u": "uid", "v": "label"})
        return pd.concat([kids, roots], ignore_index=True)

    meta = pd.DataFrame(
        {"uid": pd.Series([], dtype="int64"), "label": pd.Series([], dtype="int64")}
    )
    labels = cur.map_partitions(_labels, meta=meta)
    # a vertex can be a root in several partitions: keep its smallest label, once
    return labels.shuffle(on="uid", npartitions=npart, shuffle_method=method).map_partitions(
        lambda p: p.groupby("uid", as_index=False)["label"].min(), meta=meta
    )


def budget_slots(client: Any = None, per_slot: int | None = None) -> int:
    """Slots a streamed union-find may hold: ``curator.dedup.memory-fraction`` of the tightest
    worker's memory limit (this machine's memory without a cluster), less an idle worker and
    room for one edge file and one piece of labels."""
    from curator_dask.dedup.planner import BASE_WORKER_BYTES

    _, memory, _ = sizing.worker_resources(client)
    if memory is None:
        import psutil

        memory = psutil.virtual_memory().total
    fraction = float(config.get("dedup.memory-fraction", 0.4))
    room = memory * fraction - BASE_WORKER_BYTES - 4 * 16 * LABELS_PER_PARTITION
    return max(0, int(room // (per_slot or SLOT_BYTES)))


def connected_components(
    edges: Any,
    work_dir: str,
    client: Any = None,
    max_in_memory_vertices: int | None = None,
    storage_options: dict[str, Any] | None = None,
    reporter: Reporter | None = None,
    vertex_counts: Any = None,
) -> dd.DataFrame:
    """Connected components of ``edges`` (dask dataframe ``u, v``): lazy ``uid, label``.

    Each partition's edges are first reduced to the star edges of its local components
    (written under ``work_dir/local``). Vertices are uids ``partition << 32 | row``;
    ``vertex_counts[p]`` is the number of rows of partition ``p`` (found from the edges when
    not given). When the slots fit ``max_in_memory_vertices`` (default
    ``curator.dedup.components-in-memory-max-vertices``, or when that is null the memory
    budget of one worker: :func:`budget_slots`), one task streams the reduced edges through
    a union-find (:func:`streamed_union_find`); otherwise :func:`components_distributed`
    runs (rounds written under ``work_dir``). ``max_in_memory_vertices=0`` forces the
    distributed rounds.
    """
    local = join(work_dir, "local")
    reporter = reporter or Reporter("connected components", client)
    reduced = edges[["u", "v"]].map_partitions(_local_stars, meta=_EDGE_META)
    write_frame(reduced, local, reporter, "local components", storage_options)
    files = parquet_files(local, storage_options)
    edges = read_parts(files, _EDGE_META, storage_options)
    limit = max_in_memory_vertices
    if limit is None:
        configured = config.get("dedup.components-in-memory-max-vertices", None)
        limit = int(configured) if configured is not None else budget_slots(client)
    if vertex_counts is None and limit > 0:
        found = pd.concat(
            reporter.compute(
                edges.map_partitions(
                    _vertex_counts_of,
                    meta=pd.DataFrame(
                        {"hi": pd.Series([], dtype="int64"), "rows": pd.Series([], dtype="int64")}
                    ),
                ).to_delayed(),
                "vertices",
            )
        )
        if len(found) and (found["hi"].min() < 0 or found["hi"].max() >= limit):
            vertex_counts = None  # not partition << 32 | row, or too many partitions
        else:
            counts = found.groupby("hi")["rows"].max()
            vertex_counts = np.zeros(int(counts.index.max()) + 1 if len(counts) else 0, np.int64)
            vertex_counts[counts.index.to_numpy()] = counts.to_numpy()
    if vertex_counts is not None and limit > 0 and int(np.sum(vertex_counts)) <= limit:
        task = dask.delayed(streamed_union_find, pure=False)(
            files, np.asarray(vertex_counts, np.int64), join(work_dir, "labels"), storage_options
        )
        (paths,) = reporter.compute([task], "union-find", unit="tasks")
        remove_tree(local, storage_options)
        meta = pd.DataFrame(
            {"uid": pd.Series([], dtype="int64"), "label": pd.Series([], dtype="int64")}
        )
        return read_parts(paths, meta, storage_options)
    return components_distributed(edges, work_dir, client=client, storage_options=storage_options)


# Each kernel compiles once per machine, however many worker processes start at once.
share_compiles(globals(), opt=KERNEL_OPT)
