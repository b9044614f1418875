"""Semantic dedup's k-means and pairwise steps at scale, on synthetic embedding vectors.

    python bench/bench_semdedup_synthetic.py [--docs 200000 --dim 384 --partitions 20]
    python bench/bench_semdedup_synthetic.py --docs 1000000 --partitions 50

Two runs, each in its own process: the workflow (``embedding_column``: no model) on a local
cluster of 2 single-threaded worker processes capped at ``--memory-limit`` each, the vectors
generated on the workers (the client never holds them), and the single-process reference
(:func:`semantic_reference`, the whole matrix in one process). Prints wall and CPU seconds
(the client process plus its workers; the reference's process), wall time per step, peak
RSS of the client and of the largest worker, and whether the removed sets are equal. The
reference runs at ``--docs`` up to ``--reference-max`` documents; above that, with
``--check-docs N``, the workflow and the reference also run at N documents for the equality.
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


def _part_matrix(i: int, rows: int, dim: int, seed: int):
    """Partition ``i``'s ids and unit vectors around ``N_TOPICS`` topics, a fifth near-copies."""
    import numpy as np

    rng = np.random.default_rng([seed, i])
    centres = np.random.default_rng(seed).normal(size=(N_TOPICS, dim))
    topic = rng.integers(0, N_TOPICS, size=rows)
    v = centres[topic] + rng.normal(scale=0.8, size=(rows, dim))
    dup = rng.random(rows) < 0.2  # a fifth are near-copies of the row before them
    dup[0] = False
    v[dup] = v[np.flatnonzero(dup) - 1] + rng.normal(scale=0.005, size=(int(dup.sum()), dim))
    v = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return [f"p{i:04d}-{r:07d}" for r in range(rows)], v


def _part(i: int, rows: int, dim: int, seed: int):
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    ids, v = _part_matrix(i, rows, dim, seed)
    flat = pa.array(v.reshape(-1))
    arr = pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32) * dim), flat)
    return pd.DataFrame({"id": ids, "emb": pd.arrays.ArrowExtensionArray(arr)})


def _frame(docs: int, dim: int, parts: int, seed: int):
    import dask.dataframe as dd

    rows = docs // parts
    return dd.from_map(_part, list(range(parts)), rows=rows, dim=dim, seed=seed)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _worker_usage() -> dict:
    return {
        "cpu_s": _cpu_s(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


class _StepClock:
    """Stands in for stderr during the run: at each step's start and end line of the
    workflow's progress output, adds up the CPU seconds of the client and its workers."""

    def __init__(self, client) -> None:
        self.client = client
        self.start: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def _now(self) -> float:
        return _cpu_s() + sum(w["cpu_s"] for w in self.client.run(_worker_usage).values())

    def write(self, text: str) -> int:
        import re

        m = re.search(r": step (\S+) (\.\.\.|done)", text)
        if m and m.group(2) == "...":
            self.start[m.group(1)] = self._now()
        elif m:
            self.cpu[m.group(1)] = round(self._now() - self.start[m.group(1)], 1)
        return len(text)

    def flush(self) -> None:
        pass


def run_workflow(args) -> dict:
    import dask
    import pandas as pd
    from distributed import Client, LocalCluster

    from curator_dask.dedup import SemanticDeduplicationWorkflow

    tmp = tempfile.mkdtemp(prefix="bench-semdedup-")
    cpu0 = _cpu_s()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
            memory_limit=args.memory_limit,
        ) as cluster,
        Client(cluster) as client,
        dask.config.set({"curator.execution.progress": True}),
    ):  # fmt: skip
        w0 = client.run(_worker_usage)
        clock = _StepClock(client)
        sys.stderr, stderr = clock, sys.stderr
        t = time.perf_counter()
        try:
            res = SemanticDeduplicationWorkflow(
                cache_path=f"{tmp}/cache", output_path=f"{tmp}/out",
                df=_frame(args.docs, args.dim, args.partitions, args.seed),
                embedding_column="emb", n_clusters=args.clusters, eps=args.eps, keep="first",
                kmeans_max_iter=args.iters, client=client,
            ).run()  # fmt: skip
        finally:
            sys.stderr = stderr
        wall = time.perf_counter() - t
        w1 = client.run(_worker_usage)
    worker_cpu = sum(w1[a]["cpu_s"] - w0.get(a, {"cpu_s": 0.0})["cpu_s"] for a in w1)
    removed = pd.read_parquet(f"{tmp}/out/removed_ids")
    return {
        "run": "workflow (2 worker processes)",
        "docs": args.docs,
        "wall_s": round(wall, 1),
        "cpu_s": round(_cpu_s() - cpu0 + worker_cpu, 1),
        "steps": {k: round(v, 1) for k, v in res.seconds.items()},
        "steps_cpu_s": clock.cpu,
        "client_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "worker_peak_rss_mb": round(max(w["peak_rss_mb"] for w in w1.values())),
        "worker_memory_limit": args.memory_limit,
        "workers_restarted": len(set(w1) - set(w0)),
        "removed": int(res.removed),
        "removed_ids": dict(zip(removed["id"], removed["group"], strict=True))
        if args.docs <= args.reference_max
        else None,
    }


def run_reference(args) -> dict:
    import numpy as np

    from curator_dask.dedup.semantic import semantic_reference

    rows = args.docs // args.partitions
    ids: list[str] = []
    v = np.empty((rows * args.partitions, args.dim), np.float32)
    for i in range(args.partitions):
        part_ids, v[i * rows : (i + 1) * rows] = _part_matrix(i, rows, args.dim, args.seed)
        ids += part_ids
    t = time.perf_counter()
    cpu0 = _cpu_s()
    got = semantic_reference(ids, v, args.clusters, args.eps, "first", 42, args.iters)
    wall = time.perf_counter() - t
    return {
        "run": "single-process reference",
        "docs": args.docs,
        "wall_s": round(wall, 1),
        "cpu_s": round(_cpu_s() - cpu0, 1),
        "client_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "removed": len(got),
        "removed_ids": got,
    }


def _one(args, which: str, docs: int) -> dict:
    cmd = [sys.executable, __file__, "--one", which]
    for k in ("dim", "partitions", "clusters", "iters", "eps", "seed", "memory_limit"):
        cmd += [f"--{k.replace('_', '-')}", str(getattr(args, k))]
    cmd += ["--docs", str(docs), "--reference-max", str(args.reference_max)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--eps", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--memory-limit", default="2GB", help="per worker (default 2GB)")
    ap.add_argument("--reference-max", type=int, default=1_000_000)
    ap.add_argument(
        "--check-docs", type=int, default=0,
        help="above --reference-max: run the workflow and the reference at this size too",
    )  # fmt: skip
    ap.add_argument("--one", choices=("workflow", "reference"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        fn = run_workflow if args.one == "workflow" else run_reference
        print(json.dumps(fn(args)))
        return []
    rows = [_one(args, "workflow", args.docs)]
    pairs = []
    if args.docs <= args.reference_max:
        rows.append(_one(args, "reference", args.docs))
        pairs.append((rows[0], rows[1]))
    elif args.check_docs:
        rows += [_one(args, "workflow", args.check_docs), _one(args, "reference", args.check_docs)]
        pairs.append((rows[1], rows[2]))
    for wf, ref in pairs:
        same = wf["removed_ids"] == ref["removed_ids"]
        wf["equal_to_reference"] = ref["equal_to_reference"] = same
    for r in rows:
        r.pop("removed_ids", None)
    cols = [
        "run", "docs", "wall_s", "cpu_s", "client_peak_rss_mb", "worker_peak_rss_mb",
        "removed", "equal_to_reference",
    ]  # fmt: skip
    print(table(rows, cols))
    for r in rows:
        if "steps" in r:
            print(f"workflow steps at {r['docs']:,} documents (wall s):", r["steps"])
            print(f"workflow steps at {r['docs']:,} documents (CPU s):", r.get("steps_cpu_s"))
    print("wrote", write_json("bench_semdedup_synthetic", {"args": vars(args), "rows": rows}))
    return rows


if __name__ == "__main__":
    main()
