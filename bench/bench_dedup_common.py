"""Shared helpers of the dedup benchmarks (corpus loading, scoring, JSON output)."""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import time
import unicodedata
from pathlib import Path

CORPUS = Path("/work/shared/data/public_corpus.jsonl.gz")
TRUTH = Path("/work/shared/data/public_corpus.truth")
SAMPLE = Path(__file__).resolve().parent.parent / "curator_dask" / "data" / "sample.jsonl.gz"
RESULTS = Path(__file__).resolve().parent / "results"
_NW = re.compile(r"[\W_]+")


def load(path: Path = CORPUS) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def clusters(truth: Path = TRUTH, name: str = "clusters.jsonl.gz") -> list[list[str]]:
    with gzip.open(truth / name, "rt") as f:
        return [json.loads(line)["ids"] for line in f]


def score(removed: set, truth_clusters: list[list[str]]) -> dict:
    """The corpus README's rule: min(k, s - 1) correct per cluster."""
    cluster_of = {i: c for c, ids in enumerate(truth_clusters) for i in ids}
    per: dict[int, int] = {}
    wrong = 0
    for r in removed:
        c = cluster_of.get(r)
        if c is None:
            wrong += 1
        else:
            per[c] = per.get(c, 0) + 1
    correct = sum(min(k, len(truth_clusters[c]) - 1) for c, k in per.items())
    target = sum(len(c) - 1 for c in truth_clusters)
    return {
        "removed": len(removed),
        "correct": correct,
        "precision": round(correct / len(removed), 4) if removed else 0.0,
        "recall": round(correct / target, 4) if target else 0.0,
    }


def word_shingles(text: str, k: int) -> set[str]:
    toks = _NW.sub(" ", unicodedata.normalize("NFKC", text).lower()).split()
    if not toks:
        return set()
    if len(toks) < k:
        return {" ".join(toks)}
    return {" ".join(toks[i : i + k]) for i in range(len(toks) - k + 1)}


class Meter:
    """Wall and CPU seconds (this process and children) of a block."""

    def __enter__(self) -> Meter:
        self.t0 = time.perf_counter()
        self.c0 = _cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = _cpu() - self.c0


def _cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def table(rows: list[dict], cols: list[str]) -> str:
    w = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(w[c]) for c in cols)]
    lines += ["  ".join(str(r.get(c, "")).ljust(w[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def write_json(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(payload, indent=1, default=str))
    return out


def machine() -> dict:
    """What a result file records of where it ran: the platform, the CPUs, the 1-minute load
    (timings on a shared box move with it)."""
    import platform

    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"machine": platform.platform(), "cpus": os.cpu_count(), "load_1min": load}


def write_results(out: Path, payload: dict) -> None:
    """``payload`` with :func:`machine`'s fields, as JSON in ``out`` (a bench's ``--out``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**machine(), **payload}, indent=2, default=str))
    print(f"results: {out}")


def have_corpus() -> bool:
    return CORPUS.exists() and os.access(CORPUS, os.R_OK)
