"""Semantic deduplication of the shipped sample at several ``eps``.

Runs :class:`~curator_dask.dedup.semantic.SemanticDeduplicationWorkflow` on
``curator_dask/data/sample.jsonl.gz`` (4,000 documents) with the bundled all-MiniLM-L6-v2 on
the CPU. The embeddings and clusters are computed once and reused from the cache for every
``eps`` (only the duplicates step depends on it). For each ``eps`` it reports the removed
documents, how many have the same text as their kept document, how many of them the
sample's near-duplicate ground truth
(``tests/data/sample_truth/clusters.jsonl.gz``: word 5-gram Jaccard >= 0.8) also puts in a
cluster with their kept document, and three example pairs.

Usage::

    python bench/bench_models_semdedup.py [--eps 0.01 0.05 0.1] [--n-clusters 20]

Prints a table and writes ``bench/results/bench_models_semdedup.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dask  # noqa: E402

from curator_dask.dedup.semantic import SemanticDeduplicationWorkflow  # noqa: E402

SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"
TRUTH = ROOT / "tests" / "data" / "sample_truth" / "clusters.jsonl.gz"
RESULTS = ROOT / "bench" / "results"


def truth_cluster_of() -> dict[str, int]:
    """Document id -> near-duplicate cluster number in the ground truth."""
    out: dict[str, int] = {}
    with gzip.open(TRUTH, "rt") as f:
        for k, line in enumerate(f):
            rec = json.loads(line)
            ids = rec["ids"] if isinstance(rec, dict) else rec
            for i in ids:
                out[str(i)] = k
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.05, 0.1])
    ap.add_argument("--n-clusters", type=int, default=20)
    ap.add_argument("--max-chars", type=int, default=2000)
    ap.add_argument("--keep", default="first")
    ap.add_argument("--cache", default=None, help="cache directory (default: a temporary one)")
    args = ap.parse_args(argv)

    texts: dict[str, str] = {}
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            texts[str(rec["id"])] = rec["text"]
    truth = truth_cluster_of()
    work = Path(args.cache or tempfile.mkdtemp(prefix="semdedup-"))
    rows = []
    for eps in args.eps:
        wf = SemanticDeduplicationWorkflow(
            input_path=str(SAMPLE),
            cache_path=str(work / "cache"),
            output_path=str(work / f"out-{eps}"),
            n_clusters=args.n_clusters,
            eps=eps,
            keep=args.keep,
            max_chars=args.max_chars,
            device="cpu",
        )
        t0 = time.perf_counter()
        with dask.config.set(scheduler="threads"):
            summary = wf.run()
        pairs = wf.duplicate_pairs().sort_values(["cosine_similarity", "id"])
        in_truth = sum(
            1
            for a, b in zip(pairs["id"], pairs["group"], strict=True)
            if a in truth and truth[a] == truth.get(b)
        )
        identical = sum(
            texts[a] == texts[b] for a, b in zip(pairs["id"], pairs["group"], strict=True)
        )
        # three examples whose texts differ, spread over the similarity range (least first)
        differ = pairs[
            [texts[a] != texts[b] for a, b in zip(pairs["id"], pairs["group"], strict=True)]
        ]
        picks = differ.iloc[[0, len(differ) // 2, len(differ) - 1]] if len(differ) >= 3 else differ
        examples = [
            {
                "removed": r.id,
                "kept": r.group,
                "cosine_similarity": round(float(r.cosine_similarity), 4),
                "removed_text": texts[r.id][:200],
                "kept_text": texts[r.group][:200],
            }
            for r in picks.itertuples()
        ]
        rows.append(
            {
                "eps": eps,
                "documents": summary["documents"],
                "removed": summary["removed"],
                "duplicate_groups": summary["duplicate_groups"],
                "removed_identical_text": identical,
                "removed_also_near_dup_in_truth": in_truth,
                "seconds": time.perf_counter() - t0,
                "step_seconds": summary["seconds"],
                "examples": examples,
            }
        )
        print(f"eps={eps}: removed {summary['removed']} in {rows[-1]['seconds']:.1f}s", flush=True)

    print()
    print(
        f"{'eps':>6} {'documents':>9} {'removed':>8} {'groups':>7} {'identical':>9} {'in truth':>9}"
    )
    for r in rows:
        print(
            f"{r['eps']:>6} {r['documents']:>9} {r['removed']:>8} {r['duplicate_groups']:>7} "
            f"{r['removed_identical_text']:>9} {r['removed_also_near_dup_in_truth']:>9}"
        )
    for r in rows:
        print(f"\neps={r['eps']} examples:")
        for ex in r["examples"]:
            print(f"  {ex['removed']} ~ {ex['kept']} (cos {ex['cosine_similarity']})")
            print(f"    removed: {ex['removed_text'][:160]!r}")
            print(f"    kept:    {ex['kept_text'][:160]!r}")
    result = {
        "benchmark": "bench_models_semdedup",
        "sample": str(SAMPLE.relative_to(ROOT)),
        "n_clusters": args.n_clusters,
        "keep": args.keep,
        "max_chars": args.max_chars,
        "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_models_semdedup.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out}")
    return result


if __name__ == "__main__":
    main()
