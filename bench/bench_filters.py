"""Throughput of the default heuristic filter set, single thread, on one partition.

Usage: ``python bench/bench_filters.py [--input PATH] [--repeat N] [--out FILE]``

Reads the shipped sample (or ``--input``, a JSONL file) into one pandas partition, then
times (a) every filter scoring every document and (b) the set applied as a pipeline
would (each filter sees the survivors of the previous one). Prints a table and writes
JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa

from curator_dask.filters import heuristic_filters

SAMPLE = Path(__file__).resolve().parent.parent / "curator_dask" / "data" / "sample.jsonl.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(SAMPLE))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="bench_filters.json")
    args = ap.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    part = pd.read_json(args.input, lines=True)
    n, mb = len(part), part["text"].str.len().sum() / 1e6
    filters = heuristic_filters()

    per_filter = {}
    for f in filters:
        best = min(
            _time(lambda f=f: f.keep_score(f.score(part["text"]))) for _ in range(args.repeat)
        )
        per_filter[f.stage_name] = best

    def pipeline() -> int:
        p = part
        for f in filters:
            p = f.process(p)
        return len(p)

    kept = pipeline()
    pipe = min(_time(pipeline) for _ in range(args.repeat))
    score_all = sum(per_filter.values())

    print(f"{n} documents, {mb:.1f} M characters, single thread, best of {args.repeat}")
    print(f"{'filter':36s} {'seconds':>8s} {'docs/s':>10s}")
    for name, sec in per_filter.items():
        print(f"{name:36s} {sec:8.3f} {n / sec:10.0f}")
    print(f"{'all filters, every document':36s} {score_all:8.3f} {n / score_all:10.0f}")
    print(f"{'pipeline (survivors only)':36s} {pipe:8.3f} {n / pipe:10.0f}  kept {kept}")
    result = {
        "documents": n,
        "characters_millions": mb,
        "cpu_count": os.cpu_count(),
        "per_filter_seconds": per_filter,
        "all_filters_seconds": score_all,
        "all_filters_docs_per_s": n / score_all,
        "pipeline_seconds": pipe,
        "pipeline_docs_per_s": n / pipe,
        "pipeline_kept": kept,
    }
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
