"""Signature throughput from raw text: curator_dask vs datasketch, one core.

    python bench/bench_minhash.py [--docs 20000] [--baseline-docs 2000]

Both use the same shingles (word 5-grams after the "simple" normalisation) and the same
number of hash functions (num_bands x minhashes_per_band = 260). Documents of 150-300 words
are drawn from the public corpus (the shipped sample when it is absent).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import SAMPLE, have_corpus, load, table, word_shingles, write_json

from curator_dask.dedup.minhash import minhash_permutations, minhash_signatures, shingle_hashes


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--baseline-docs", type=int, default=2000)
    ap.add_argument("--num-hashes", type=int, default=260)
    ap.add_argument("--ngram", type=int, default=5)
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    recs = load() if have_corpus() else load(SAMPLE)
    texts = [r["text"] for r in recs if 150 <= len(r["text"].split()) <= 300]
    rng = np.random.default_rng(0)
    pick = rng.choice(len(texts), size=args.docs, replace=len(texts) < args.docs)
    text = pd.Series([texts[i] for i in pick])
    words = float(text.str.split().str.len().mean())
    perms = minhash_permutations(args.num_hashes, 42)
    # warm up the JIT
    h, o = shingle_hashes(text[:10], args.ngram)
    minhash_signatures(h, o, perms)

    def ours(series: pd.Series) -> float:
        t0 = time.process_time()
        h, o = shingle_hashes(series, args.ngram)
        minhash_signatures(h, o, perms)
        return time.process_time() - t0

    rows = []
    for _kind in ("word",):
        cpu = min(ours(text) for _ in range(3))
        rows.append(
            {
                "impl": "curator_dask",
                "docs": len(text),
                "cpu_s": round(cpu, 3),
                "docs_per_s_core": round(len(text) / cpu),
            }
        )
    from datasketch import MinHash

    base = text[: args.baseline_docs]
    t0 = time.process_time()
    for t in base:
        m = MinHash(num_perm=args.num_hashes, seed=42)
        m.update_batch([s.encode("utf-8") for s in word_shingles(t, args.ngram)])
    cpu = time.process_time() - t0
    rows.append(
        {
            "impl": "datasketch",
            "docs": len(base),
            "cpu_s": round(cpu, 3),
            "docs_per_s_core": round(len(base) / cpu),
        }
    )
    ratio = rows[0]["docs_per_s_core"] / rows[1]["docs_per_s_core"]
    print(
        f"signatures from raw text, word {args.ngram}-grams, {args.num_hashes} hashes, "
        f"mean {words:.0f} words/doc, one core (CPU time)"
    )
    print(table(rows, ["impl", "docs", "cpu_s", "docs_per_s_core"]))
    print(f"ratio curator_dask / datasketch: {ratio:.1f}x")
    payload = {
        "rows": rows,
        "ratio": round(ratio, 2),
        "mean_words": round(words, 1),
        "num_hashes": args.num_hashes,
        "ngram": args.ngram,
    }
    print("wrote", write_json("bench_minhash", payload))
    return payload


if __name__ == "__main__":
    main()
