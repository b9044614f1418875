"""Run the benchmarks in one command: ``python -m bench [--all] [--only NAME ...]``.

Each benchmark runs in its own process (so peak-memory figures are its own), prints its
table and writes JSON under ``bench/results/``. The default set takes a few minutes on a
2-core machine; ``--all`` adds the 1M-document LSH memory benchmark and the model
benchmarks (tens of minutes on CPU). Benchmarks that compare with a peer (datasketch)
report the ratio from the same run. The end-to-end dedup benchmark uses the 35k-document
public corpus when ``../shared/data`` is present, else the shipped sample.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

#: name -> (script, arguments, in the default set)
BENCHMARKS = {
    "minhash": ("bench_minhash.py", [], True),
    "dedup": ("bench_dedup.py", [], True),
    "pipeline": ("bench_pipeline.py", ["--modes", "streaming", "batch"], True),
    "io": ("bench_io.py", ["--out", os.path.join(RESULTS, "bench_io.json")], True),
    "filters": ("bench_filters.py", ["--out", os.path.join(RESULTS, "bench_filters.json")], True),
    "filters_memory": (
        "bench_filters_memory.py",
        ["--out", os.path.join(RESULTS, "bench_filters_memory.json")],
        True,
    ),
    "cli": ("bench_cli.py", [], True),
    "fuzzy_cost": ("bench_fuzzy_cost.py", [], False),
    "compile": ("bench_compile.py", [], False),
    "progress": (
        "bench_progress.py",
        ["--out", os.path.join(RESULTS, "bench_progress.json")],
        False,
    ),
    "memory_pipeline": ("bench_memory_pipeline.py", [], False),
    "dedup_memory": ("bench_dedup_memory.py", [], False),
    "dedup_scale": ("bench_dedup_scale.py", [], False),
    "models": ("bench_models.py", [], False),
    "semdedup": ("bench_models_semdedup.py", [], False),
    "semdedup_scale": (
        "bench_semdedup_synthetic.py",
        ["--docs", "1000000", "--partitions", "50"],
        False,
    ),
    "minhash_gpu": ("bench_minhash_gpu.py", [], False),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--all", action="store_true", help="also the long CPU benchmarks")
    ap.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run just these")
    args = ap.parse_args(argv)
    names = args.only or [n for n, (_, _, default) in BENCHMARKS.items() if default or args.all]
    if args.all and not args.only:
        names = [n for n in names if n != "minhash_gpu"]  # needs cupy and a GPU
    os.makedirs(RESULTS, exist_ok=True)
    ran = []
    for name in names:
        script, extra, _ = BENCHMARKS[name]
        print(f"\n=== {name}: {script} {' '.join(extra)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, os.path.join(HERE, script), *extra])
        ran.append({"benchmark": name, "exit": rc, "seconds": round(time.perf_counter() - t0, 1)})
    print(f"\n{'benchmark':<14}{'exit':>6}{'seconds':>10}")
    for r in ran:
        print(f"{r['benchmark']:<14}{r['exit']:>6}{r['seconds']:>10}")
    with open(os.path.join(RESULTS, "summary.json"), "w") as f:
        json.dump(ran, f, indent=2)
    print(f"results: {RESULTS}/")
    return 1 if any(r["exit"] for r in ran) else 0


if __name__ == "__main__":
    sys.exit(main())
