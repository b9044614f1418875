"""MinHash signature step on the GPU (CuPy) vs the CPU (numba, one thread), same shingles.

    python bench/bench_minhash_gpu.py [--copies 25]

The shipped sample is repeated ``--copies`` times; shingling (word 5-grams) runs once on the
host and is not timed; the table gives the signature step alone, 260 hashes, 32- and 64-bit.
Signatures are checked equal before any figure is printed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from curator_dask.dedup.minhash import minhash_permutations, minhash_signatures, shingle_hashes

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "curator_dask", "data", "sample.jsonl.gz")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--copies", type=int, default=25)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args(argv)
    import cupy

    with gzip.open(SAMPLE, "rt") as f:
        texts = [json.loads(line)["text"] for line in f]
    text = pd.Series(texts * args.copies)
    hashes, offsets = shingle_hashes(text, 5, "word")
    rows = []
    for use_64 in (False, True):
        perms = minhash_permutations(260, 42, use_64)
        minhash_signatures(hashes[:1000], offsets[:10], perms, use_64)  # compile
        t = time.perf_counter()
        cpu = minhash_signatures(hashes, offsets, perms, use_64)
        cpu_s = time.perf_counter() - t
        dh, do, dp = cupy.asarray(hashes), cupy.asarray(offsets), cupy.asarray(perms)
        minhash_signatures(dh, do, dp, use_64)  # compile / warm
        cupy.cuda.Device().synchronize()
        t = time.perf_counter()
        gpu = minhash_signatures(dh, do, dp, use_64)
        cupy.cuda.Device().synchronize()
        gpu_s = time.perf_counter() - t
        np.testing.assert_array_equal(cupy.asnumpy(gpu), cpu)
        rows.append(
            {
                "bits": 64 if use_64 else 32,
                "docs": len(text),
                "shingles": len(hashes),
                "cpu_docs_per_s_1_thread": round(len(text) / cpu_s),
                "gpu_docs_per_s": round(len(text) / gpu_s),
                "speedup": round(cpu_s / gpu_s, 1),
            }
        )
    print(f"{'bits':>4} {'docs':>9} {'cpu docs/s (1 thr)':>19} {'gpu docs/s':>12} {'ratio':>7}")
    for r in rows:
        print(
            f"{r['bits']:>4} {r['docs']:>9,} {r['cpu_docs_per_s_1_thread']:>19,} "
            f"{r['gpu_docs_per_s']:>12,} {r['speedup']:>6}x"
        )
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "minhash_gpu.json"), "w") as f:
        json.dump(rows, f, indent=2)
    return {"rows": rows}


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
