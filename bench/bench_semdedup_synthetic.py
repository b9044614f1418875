"""Semantic dedup's k-means and pairwise steps at scale, on synthetic embedding vectors.

    python bench/bench_semdedup_synthetic.py [--docs 200000 --dim 384 --partitions 20]

Two runs, each in its own process: the workflow (``embedding_column``: no model) on a local
cluster of 2 worker processes, the vectors generated on the workers (the client never holds
them), and the single-process reference (:func:`semantic_reference`, the whole matrix in one
process). Prints wall time per step, the client's peak RSS, and whether the removed sets are
equal (the reference runs only up to ``--reference-max`` documents).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import table, write_json

N_TOPICS = 400


def _part(i: int, rows: int, dim: int, seed: int):
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    rng = np.random.default_rng([seed, i])
    centres = np.random.default_rng(seed).normal(size=(N_TOPICS, dim))
    topic = rng.integers(0, N_TOPICS, size=rows)
    v = centres[topic] + rng.normal(scale=0.8, size=(rows, dim))
    dup = rng.random(rows) < 0.2  # a fifth are near-copies of the row before them
    dup[0] = False
    v[dup] = v[np.flatnonzero(dup) - 1] + rng.normal(scale=0.005, size=(int(dup.sum()), dim))
    v = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    flat = pa.array(v.reshape(-1))
    arr = pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32) * dim), flat)
    return pd.DataFrame(
        {
            "id": [f"p{i:04d}-{r:07d}" for r in range(rows)],
            "emb": pd.arrays.ArrowExtensionArray(arr),
        }
    )


def _frame(docs: int, dim: int, parts: int, seed: int):
    import dask.dataframe as dd

    rows = docs // parts
    return dd.from_map(_part, list(range(parts)), rows=rows, dim=dim, seed=seed)


def run_workflow(args) -> dict:
    import dask
    import pandas as pd
    from distributed import Client, LocalCluster

    from curator_dask.dedup import SemanticDeduplicationWorkflow

    tmp = tempfile.mkdtemp(prefix="bench-semdedup-")
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
        as cluster,
        Client(cluster) as client,
        dask.config.set({"curator.dedup.progress": False}),
    ):  # fmt: skip
        t = time.perf_counter()
        res = SemanticDeduplicationWorkflow(
            cache_path=f"{tmp}/cache", output_path=f"{tmp}/out",
            df=_frame(args.docs, args.dim, args.partitions, args.seed),
            embedding_column="emb", n_clusters=args.clusters, eps=args.eps, keep="first",
            kmeans_max_iter=args.iters, client=client,
        ).run()  # fmt: skip
        wall = time.perf_counter() - t
    removed = pd.read_parquet(f"{tmp}/out/removed_ids")
    return {
        "run": "workflow (2 worker processes)",
        "docs": args.docs,
        "wall_s": round(wall, 1),
        "steps": res.seconds,
        "client_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "removed": int(res.removed),
        "removed_ids": dict(zip(removed["id"], removed["group"], strict=True))
        if args.docs <= args.reference_max
        else None,
    }


def run_reference(args) -> dict:
    import numpy as np
    import pandas as pd

    from curator_dask.dedup.semantic import semantic_reference

    frames = [
        _part(i, args.docs // args.partitions, args.dim, args.seed) for i in range(args.partitions)
    ]
    pdf = pd.concat(frames, ignore_index=True)
    v = np.stack(pdf["emb"].to_numpy()).astype(np.float32)
    t = time.perf_counter()
    got = semantic_reference(pdf["id"], v, args.clusters, args.eps, "first", 42, args.iters)
    wall = time.perf_counter() - t
    return {
        "run": "single-process reference",
        "docs": args.docs,
        "wall_s": round(wall, 1),
        "client_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "removed": len(got),
        "removed_ids": got,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--eps", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--reference-max", type=int, default=200_000)
    ap.add_argument("--one", choices=("workflow", "reference"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        fn = run_workflow if args.one == "workflow" else run_reference
        print(json.dumps(fn(args)))
        return []
    rows = []
    which = ["workflow"] + (["reference"] if args.docs <= args.reference_max else [])
    for one in which:
        cmd = [sys.executable, __file__, "--one", one]
        for k in ("docs", "dim", "partitions", "clusters", "iters", "eps", "seed"):
            cmd += [f"--{k}", str(getattr(args, k))]
        cmd += ["--reference-max", str(args.reference_max)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    if len(rows) == 2:
        same = rows[0]["removed_ids"] == rows[1]["removed_ids"]
        for r in rows:
            r["equal_to_reference"] = same
    for r in rows:
        r.pop("removed_ids", None)
    cols = ["run", "docs", "wall_s", "client_peak_rss_mb", "removed", "equal_to_reference"]
    print(table(rows, cols))
    print("workflow steps (s):", rows[0].get("steps"))
    print("wrote", write_json("bench_semdedup_synthetic", {"args": vars(args), "rows": rows}))
    return rows


if __name__ == "__main__":
    main()
