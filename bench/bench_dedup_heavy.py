"""The fuzzy candidate check on heavily duplicated text: anchored (linear) vs exhaustive.

    python bench/bench_dedup_heavy.py [--bases 400 --copies 99]

The corpus: ``--bases`` documents of the public corpus (300+ words), each followed by
``--copies`` copies with a few words edited (so most documents sit in large clusters of
near-duplicates). Both runs use the defaults (word 5-grams, 30 x 8, candidate check); one with
``num_anchors=4`` (the default), one with ``num_anchors=None`` (the exhaustive check). Prints
each run's step times, the check's share of the run, and whether the removed sets are equal.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import CORPUS, load, table, write_json


def corpus(bases: int, copies: int, seed: int = 0):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    recs = [r for r in load(CORPUS) if len(r["text"].split()) >= 300][:bases]
    docs = []
    for rec in recs:
        words = rec["text"].split()[:400]
        docs.append(" ".join(words))
        for _ in range(copies):
            w = list(words)
            for pos in rng.choice(len(w), size=int(rng.integers(1, 6)), replace=False):
                w[int(pos)] = f"edit{int(rng.integers(0, 10**9))}"
            docs.append(" ".join(w))
    order = rng.permutation(len(docs))
    ids = [f"h{i:06d}" for i in range(len(docs))]
    return pd.DataFrame({"id": ids, "text": [docs[i] for i in order]})


def main(argv: list[str] | None = None) -> list[dict]:
    import dask
    import dask.dataframe as dd
    import pandas as pd

    from curator_dask.dedup import FuzzyDeduplicationWorkflow

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bases", type=int, default=400)
    ap.add_argument("--copies", type=int, default=99)
    args = ap.parse_args(argv)
    pdf = corpus(args.bases, args.copies)
    df = dd.from_pandas(pdf, npartitions=8)
    rows, removed = [], {}
    tmp = tempfile.mkdtemp(prefix="bench-heavy-")
    with dask.config.set({"scheduler": "threads", "curator.execution.progress": False}):
        # a first run compiles the kernels and fills the shared minhash/LSH cache
        warm = FuzzyDeduplicationWorkflow(
            df=df, cache_path=f"{tmp}/cache", output_path=f"{tmp}/warm", num_anchors=1
        ).run()
        before = warm.seconds["minhash"] + warm.seconds["lsh"]
        for name, anchors in (("anchored (4)", 4), ("exhaustive", None)):
            res = FuzzyDeduplicationWorkflow(
                df=df, cache_path=f"{tmp}/cache", output_path=f"{tmp}/{anchors}",
                num_anchors=anchors,
            ).run()  # fmt: skip
            removed[name] = set(pd.read_parquet(f"{tmp}/{anchors}/removed_ids")["id"])
            rows.append(
                {
                    "check": name,
                    "docs": len(pdf),
                    "verify_s": res.seconds["verify"],
                    "run_s": round(before + res.seconds["total"], 1),
                    "verify_share": round(
                        res.seconds["verify"] / (before + res.seconds["total"]), 2
                    ),
                    "removed": res.removed,
                }
            )
    for r in rows:
        r["same_removed_set"] = removed["anchored (4)"] == removed["exhaustive"]
    cols = ["check", "docs", "verify_s", "run_s", "verify_share", "removed", "same_removed_set"]
    print(table(rows, cols))
    print("(run_s: the first run's minhash + LSH time plus this run's steps, which reuse them)")
    print("wrote", write_json("bench_dedup_heavy", {"args": vars(args), "rows": rows}))
    return rows


if __name__ == "__main__":
    main()
