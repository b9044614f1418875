"""Semantic dedup's k-means, cuML on one GPU against the host's on all CPU cores, same vectors.

    python bench/bench_kmeans_gpu.py [--vectors 1000000] [--pair host gpu] [--out OUT]

Synthetic unit vectors (``--dim``, around ``--centres`` random centres) are written as
semantic dedup's embeddings cache (``--files`` part files of ``id, _uid, vector``); each
implementation of :data:`curator_dask.dedup.semantic.KMEANS` then clusters them from the
same initial rows: ``host`` (numpy on a ``LocalCluster`` of one single-threaded worker per
core), ``gpu`` (cuML's dask ``KMeans`` on a ``LocalCUDACluster``), or ``reference``
(:func:`~curator_dask.dedup.semantic.kmeans_reference` in this process, for a check without
a GPU). The two results are compared by :func:`~curator_dask.dedup.semantic.kmeans_agreement`
(adjusted Rand index of the labels, largest centroid difference after matching) against
``KMEANS_AGREEMENT``. Prints a table, writes ``OUT/kmeans_gpu.json``; exit status 1 when the
two differ beyond the tolerance or a side failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def make_vectors(n: int, dim: int, centres: int, seed: int = 0) -> np.ndarray:
    """Unit vectors scattered around ``centres`` random directions (float32)."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dim)).astype(np.float32)
    v = c[rng.integers(0, centres, n)] + rng.normal(scale=0.35, size=(n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def write_cache(vectors: np.ndarray, directory: str, files: int) -> tuple[list[str], list[int]]:
    """The vectors as an embeddings cache's part files; ``(paths, rows per file)``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curator_dask.dedup.semantic import _vector_array

    os.makedirs(directory, exist_ok=True)
    paths, sizes = [], []
    for i, rows in enumerate(np.array_split(np.arange(len(vectors)), files)):
        table = pa.table(
            {
                "id": pa.array([f"v{r}" for r in rows]),
                "_uid": pa.array(rows.astype(np.int64)),
                "vector": _vector_array(vectors[rows]),
            }
        )
        path = os.path.join(directory, f"part-{i:05d}.parquet")
        codecs = {"id": "snappy", "_uid": "snappy", "vector": "none"}
        pq.write_table(table, path, compression=codecs)
        paths.append(path)
        sizes.append(len(rows))
    return paths, sizes


def run_side(
    side: str, vectors: np.ndarray, files: list[str], sizes: list[int], args: Any
) -> dict[str, Any]:
    """One implementation's centroids, iterations and seconds (cluster start not counted)."""
    from curator_dask.dedup.semantic import KMEANS, kmeans_reference
    from curator_dask.progress import Reporter

    k, seed, it = args.clusters, args.seed, args.max_iter
    if side == "reference":
        t0 = time.perf_counter()
        centroids, iters = kmeans_reference(vectors, k, seed, it)
        return {"centroids": centroids, "iterations": iters, "s": time.perf_counter() - t0}
    from distributed import Client, LocalCluster

    if side == "gpu":
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(n_workers=1)
    else:
        cluster = LocalCluster(
            n_workers=args.workers or _cores(), threads_per_worker=1, processes=True
        )
    with cluster, Client(cluster) as client:
        run = types.SimpleNamespace(client=client, reporter=Reporter("k-means", client))
        t0 = time.perf_counter()
        centroids, iters = KMEANS[side](files, sizes, k, seed, it, None, run)
        return {"centroids": centroids, "iterations": iters, "s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--centres", type=int, default=200)
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--max-iter", type=int, default=20)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--workers", type=int, help="host side's workers (default: one per core)")
    ap.add_argument(
        "--pair", nargs=2, default=["host", "gpu"], choices=["host", "gpu", "reference"]
    )
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    from curator_dask.dedup.semantic import KMEANS_AGREEMENT, kmeans_agreement

    vectors = make_vectors(args.vectors, args.dim, args.centres)
    files, sizes = write_cache(vectors, os.path.join(args.out, "kmeans_work"), args.files)
    result: dict[str, Any] = {
        "vectors": args.vectors, "dim": args.dim, "clusters": args.clusters,
        "max_iter": args.max_iter, "cpu_cores": _cores(), "tolerance": KMEANS_AGREEMENT,
    }  # fmt: skip
    sides = {}
    for side in args.pair:
        try:
            sides[side] = run_side(side, vectors, files, sizes, args)
        except Exception as err:  # a side that fails is a row that says so
            result[side] = {"error": f"{type(err).__name__}: {err}"}
            continue
        r = sides[side]
        result[side] = {"iterations": r["iterations"], "s": round(r["s"], 2)}
        print(side, json.dumps(result[side]), flush=True)
    a, b = args.pair
    if a in sides and b in sides:
        agreement = kmeans_agreement(vectors, sides[a]["centroids"], sides[b]["centroids"])
        result["agreement"] = agreement
        ok = agreement["equal"]
    else:
        ok = False
    result["status"] = "ok" if ok else "FAIL"
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "kmeans_gpu.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=float)
    print(f"\n{args.vectors:,} vectors of {args.dim}, {args.clusters} clusters")
    print(f"{'side':<10} {'iters':>6} {'s':>8}")
    for side in args.pair:
        r = result.get(side, {})
        its, secs = r.get("iterations", "-"), r.get("s", "-")
        print(f"{side:<10} {its!s:>6} {secs!s:>8}  {r.get('error', '')}")
    if "agreement" in result:
        g = result["agreement"]
        print(f"ARI {g['ari']}, centroid gap {g['centroid_gap']:.2e}: {result['status']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
