"""End-to-end fuzzy dedup on the public corpus vs a datasketch MinHashLSH baseline.

    python bench/bench_dedup.py [--corpus PATH --truth DIR] [--only NAME ...]

Each configuration runs in its own process (so peak RSS is its own): wall and CPU seconds
(process + children), peak RSS, precision/recall against the truth clusters (the corpus
README's rule). Word 5-grams, the truth's "simple" normalisation, Jaccard 0.8.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import (
    CORPUS,
    TRUTH,
    Meter,
    clusters,
    load,
    peak_rss_mb,
    score,
    table,
    word_shingles,
    write_json,
)

CONFIGS = {
    # the defaults: word 5-grams, the shape that follows from jaccard_threshold=0.8 (30 x 8)
    # and the candidate check
    "ours-default": {},
    "ours-nemo-shape": {"band_shape": "nemo", "false_positive_check": False},
    "ours-20x13": {"num_bands": 20, "minhashes_per_band": 13, "false_positive_check": False},
    "ours-20x13-check": {"num_bands": 20, "minhashes_per_band": 13, "false_positive_check": True},
    "ours-30x8": {"num_bands": 30, "minhashes_per_band": 8, "false_positive_check": False},
    "ours-30x8-check": {"num_bands": 30, "minhashes_per_band": 8, "false_positive_check": True},
    "datasketch-30x8": {"num_bands": 30, "minhashes_per_band": 8, "baseline": True},
}


def run_ours(cfg: dict, corpus: str) -> set:
    import dask
    import pandas as pd

    from curator_dask.dedup import FuzzyDeduplicationWorkflow

    tmp = tempfile.mkdtemp(prefix="bench-dedup-")
    kw = {} if not cfg else {"word_ngrams": 5, "jaccard_threshold": 0.8}
    with dask.config.set({"scheduler": "threads", "curator.execution.progress": False}):
        res = FuzzyDeduplicationWorkflow(
            input_path=corpus,
            cache_path=f"{tmp}/cache",
            output_path=f"{tmp}/out",
            blocksize="16MB",
            **kw,
            **cfg,
        ).run()
    global LAST_SECONDS
    LAST_SECONDS = dict(res.seconds)
    LAST_OUT.append(f"{tmp}/out/removed_ids")
    return set(pd.read_parquet(f"{tmp}/out/removed_ids")["id"])


LAST_SECONDS: dict = {}
LAST_OUT: list = []


def shared_score(removed_dir: str, truth: str) -> dict:
    """The shared scorer (/work/shared/tools/score_removed.py) on the removed_ids folder."""
    tool = "/work/shared/tools/score_removed.py"
    if not os.path.exists(tool):
        return {}
    import gzip
    import shutil

    plain = tempfile.mkdtemp(prefix="truth-")
    for name in ("clusters.jsonl", "exact_groups.jsonl"):
        with (
            gzip.open(os.path.join(truth, name + ".gz"), "rb") as src,
            open(os.path.join(plain, name), "wb") as dst,
        ):
            shutil.copyfileobj(src, dst)
    out = subprocess.run(
        [sys.executable, tool, removed_dir, plain], check=True, capture_output=True, text=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {"shared_precision": got["precision"], "shared_recall": got["recall"]}


def run_datasketch(cfg: dict, corpus: str) -> set:
    from datasketch import MinHash, MinHashLSH

    b, r = cfg["num_bands"], cfg["minhashes_per_band"]
    recs = load(corpus)
    lsh = MinHashLSH(num_perm=b * r, params=(b, r))
    sigs = {}
    for rec in recs:
        sh = word_shingles(rec["text"], 5)
        if not sh:
            continue
        m = MinHash(num_perm=b * r, seed=42)
        m.update_batch([s.encode("utf-8") for s in sh])
        sigs[rec["id"]] = m
        lsh.insert(rec["id"], m)
    parent: dict[str, str] = {}

    def find(a: str) -> str:
        while parent.get(a, a) != a:
            parent[a] = parent.get(parent[a], parent[a])
            a = parent[a]
        return a

    for key, m in sigs.items():
        for other in lsh.query(m):
            ra, rb = find(key), find(other)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for key in sigs:
        groups.setdefault(find(key), []).append(key)
    return {i for g in groups.values() for i in sorted(g)[1:]}


def one(name: str, corpus: str, truth: str) -> dict:
    cfg = dict(CONFIGS[name])
    with Meter() as m:
        if cfg.pop("baseline", False):
            removed = run_datasketch(cfg, corpus)
        else:
            removed = run_ours(cfg, corpus)
    from pathlib import Path

    row = {
        "config": name,
        "wall_s": round(m.wall, 1),
        "cpu_s": round(m.cpu, 1),
        "peak_rss_mb": round(peak_rss_mb()),
    }
    row.update(score(removed, clusters(Path(truth))))
    if LAST_OUT:
        row.update(shared_score(LAST_OUT[-1], truth))
        row["step_seconds"] = LAST_SECONDS
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--truth", default=str(TRUTH))
    ap.add_argument("--only", nargs="*", default=list(CONFIGS))
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.corpus, args.truth)))
        return []
    rows = []
    for name in args.only:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                name,
                "--corpus",
                args.corpus,
                "--truth",
                args.truth,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    print(
        table(
            rows,
            [
                "config",
                "wall_s",
                "cpu_s",
                "peak_rss_mb",
                "removed",
                "precision",
                "recall",
                "shared_precision",
                "shared_recall",
            ],
        )
    )
    print("wrote", write_json("bench_dedup", {"corpus": args.corpus, "rows": rows}))
    return rows


if __name__ == "__main__":
    main()
