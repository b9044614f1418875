"""Connected components of an edge list, distributed on dask dataframes.

First every partition of the edge list is replaced by the star edges of its own components
(each vertex to its partition-local component minimum; written under ``work_dir``): the same
connectivity, with at most one edge per vertex and partition. The workflows shuffle their
candidates so that a cluster of near-duplicates meets in one partition, so this turns most
clusters into single stars and the edge count into about the number of duplicated documents,
whatever the number of candidate pairs. Then two paths, same result (every vertex labelled
with the smallest vertex of its component):

- in memory: when the edge list has at most ``curator.dedup.components-in-memory-max-edges``
  rows it is collected on the client and solved with a union-find (numba, a core dependency:
  no scipy), and the labels go back to the workers in pieces of a million rows; that client
  state is bounded by the setting, not by the corpus;
- distributed: alternating *large-star* and *small-star* rounds (Kiveris et al., "Connected
  Components in MapReduce and Beyond", SoCC 2014), each a shuffle of the edges on their first
  vertex and a per-partition pandas reduction, until the edge set stops changing. At the fixed
  point every edge joins a vertex to its component's minimum. Each round's edges are written to
  Parquet, so memory is bounded by a shuffle, never the whole graph on one machine.
"""

from __future__ import annotations

from typing import Any

import dask
import dask.dataframe as dd
import numba
import numpy as np
import pandas as pd

from curator_dask import config
from curator_dask.dedup._base import (
    Reporter,
    join,
    parquet_files,
    read_parts,
    remove_tree,
    write_frame,
)
from curator_dask.dedup._common import shuffle_method


@numba.njit(nogil=True, cache=True)
def _union_find(a, b, n):  # pragma: no cover - compiled
    parent = np.arange(n)
    for k in range(len(a)):
        x, y = a[k], b[k]
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x != y:  # the smaller index becomes the root: roots are component minima
            if x < y:
                parent[y] = x
            else:
                parent[x] = y
    for i in range(n):
        parent[i] = parent[parent[i]]
    return parent


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
    root = _union_find(inv[:m].astype(np.int64), inv[m:].astype(np.int64), n)
    return pd.DataFrame({"uid": nodes, "label": nodes[root]})


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
            .shuffle(on="u", npartitions=npart, method=method)
            .map_partitions(_large_star, meta=_EDGE_META)
        )
        ss = (
            ls.map_partitions(_oriented, meta=_EDGE_META)
            .shuffle(on="u", npartitions=npart, method=method)
            .map_partitions(_small_star, meta=_EDGE_META)
        )
        # canonical edge set: de-duplicate across partitions before the checksum
        ss = ss.shuffle(on=["u", "v"], npartitions=npart, method=method).map_partitions(
            lambda p: p.drop_duplicates(), meta=_EDGE_META
        )
        out = join(work_dir, f"round-{rnd:03d}")
        ss.to_parquet(out, write_index=False, overwrite=True, storage_options=storage_options)
        cur = dd.read_parquet(out, storage_options=storage_options)
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
    return labels.shuffle(on="uid", npartitions=npart, method=method).map_partitions(
        lambda p: p.groupby("uid", as_index=False)["label"].min(), meta=meta
    )


def connected_components(
    edges: Any,
    work_dir: str,
    client: Any = None,
    max_in_memory_edges: int | None = None,
    storage_options: dict[str, Any] | None = None,
    reporter: Reporter | None = None,
) -> dd.DataFrame:
    """Connected components of ``edges`` (dask dataframe ``u, v``): lazy ``uid, label``.

    Each partition's edges are first reduced to the star edges of its local components
    (written under ``work_dir/local``). When those are few (``<= max_in_memory_edges``,
    default from ``curator.dedup.components-in-memory-max-edges``) they are solved in
    memory (union-find), else with :func:`components_distributed` (rounds written under
    ``work_dir``).
    """
    limit = (
        max_in_memory_edges
        if max_in_memory_edges is not None
        else int(config.get("dedup.components-in-memory-max-edges", 10_000_000))
    )
    local = join(work_dir, "local")
    reporter = reporter or Reporter("connected components", client)
    reduced = edges[["u", "v"]].map_partitions(_local_stars, meta=_EDGE_META)
    n_edges = write_frame(reduced, local, reporter, "local components", storage_options)
    edges = read_parts(parquet_files(local, storage_options), _EDGE_META, storage_options)
    if limit <= 0:
        n_edges = limit + 1
    if n_edges <= limit:
        # gathered piece by piece to the client (a plain compute would concatenate them on
        # a worker first)
        pieces = dask.compute(*edges[["u", "v"]].to_delayed())
        u = np.concatenate([p["u"].to_numpy(np.int64) for p in pieces] or [np.zeros(0, np.int64)])
        v = np.concatenate([p["v"].to_numpy(np.int64) for p in pieces] or [np.zeros(0, np.int64)])
        del pieces
        labels = components_in_memory(u, v)
        remove_tree(local, storage_options)
        # handed back in pieces of LABELS_PER_PARTITION rows: a worker joining the labels to
        # the documents holds one piece, not the whole graph's labels
        npart = max(1, -(-len(labels) // LABELS_PER_PARTITION))
        return dd.from_pandas(labels, npartitions=npart, sort=False)
    return components_distributed(edges, work_dir, client=client, storage_options=storage_options)
