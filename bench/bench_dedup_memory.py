"""Peak worker memory of the LSH step at three ``bands_per_iteration`` values.

    python bench/bench_dedup_memory.py [--docs 1000000] [--memory-limit 3GB]

A synthetic corpus is made by resampling the public corpus (the shipped sample when absent)
and editing every copy (one word replaced, text cut to ~1,000 characters), written to Parquet.
The MinHash step runs once; then, for each ``bands_per_iteration``, the LSH step alone runs
on a LocalCluster of 2 worker processes with a fixed memory limit while the workers' RSS is
sampled every 0.1 s. The planner's estimate is printed beside the measured peak.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import SAMPLE, have_corpus, load, table, write_json


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def make_corpus(n: int, out: str, seed: int = 0) -> None:
    recs = load() if have_corpus() else load(SAMPLE)
    texts = [r["text"][:1000] for r in recs]
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(texts), size=n)
    edit = rng.integers(0, 10**9, size=n)
    os.makedirs(out, exist_ok=True)
    step = 100_000
    for s in range(0, n, step):
        rows = [
            f"{texts[p]} w{e}" for p, e in zip(pick[s : s + step], edit[s : s + step], strict=False)
        ]
        pd.DataFrame(
            {"id": [f"d{i:08d}" for i in range(s, s + len(rows))], "text": rows}
        ).to_parquet(f"{out}/part-{s // step:04d}.parquet", row_group_size=20_000)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--memory-limit", default="3GB")
    ap.add_argument("--bands-per-iteration", type=int, nargs=3, default=[1, 5, 20])
    args = ap.parse_args(argv)
    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    from curator_dask.dedup import FuzzyDeduplicationWorkflow
    from curator_dask.dedup.planner import estimate_peak

    tmp = tempfile.mkdtemp(prefix="bench-mem-")
    t0 = time.perf_counter()
    make_corpus(args.docs, f"{tmp}/data")
    print(f"corpus: {args.docs} docs in {time.perf_counter() - t0:.0f}s", flush=True)
    rows = []
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.memory_limit,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        wf = FuzzyDeduplicationWorkflow(
            input_path=f"{tmp}/data",
            cache_path=f"{tmp}/cache",
            output_path=f"{tmp}/out",
            word_ngrams=5,
            client=client,
            blocksize="32MB",
        )
        t0 = time.perf_counter()
        with __import__("dask").config.set(scheduler=client):
            wf.compute_minhashes()
        print(f"minhash step: {time.perf_counter() - t0:.0f}s", flush=True)
        for bpi in args.bands_per_iteration:
            shutil.rmtree(os.path.join(wf.cache_dir(), "lsh"), ignore_errors=True)
            client.run(lambda: __import__("gc").collect())
            base = client.run(_rss)
            peak = dict(base)
            stop = threading.Event()

            def sample(peak=peak, stop=stop):
                while not stop.is_set():
                    for w, v in client.run(_rss).items():
                        peak[w] = max(peak[w], v)
                    time.sleep(0.1)

            th = threading.Thread(target=sample, daemon=True)
            th.start()
            wf.bands_per_iteration = bpi
            t0 = time.perf_counter()
            with __import__("dask").config.set(scheduler=client):
                wf.compute_lsh(args.docs)
            secs = time.perf_counter() - t0
            stop.set()
            th.join()
            rows.append(
                {
                    "bands_per_iteration": bpi,
                    "seconds": round(secs, 1),
                    "peak_worker_mb": round(max(peak.values()) / 2**20),
                    "peak_increase_mb": round(max(peak[w] - base[w] for w in peak) / 2**20),
                    "planner_estimate_mb": round(estimate_peak(args.docs, bpi, 2) / 2**20),
                }
            )
            print(rows[-1], flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"LSH step, {args.docs} docs, 20 bands, 2 workers x {args.memory_limit} "
        f"(limit {parse_bytes(args.memory_limit) // 2**20} MB)"
    )
    print(
        table(
            rows,
            [
                "bands_per_iteration",
                "seconds",
                "peak_worker_mb",
                "peak_increase_mb",
                "planner_estimate_mb",
            ],
        )
    )
    print(
        "wrote",
        write_json(
            "bench_dedup_memory",
            {"docs": args.docs, "rows": rows, "memory_limit": args.memory_limit},
        ),
    )
    return rows


if __name__ == "__main__":
    main()
