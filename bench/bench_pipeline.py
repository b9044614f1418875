"""Pipeline benchmark: wall time and peak memory at 1x and 4x the shipped sample.

Runs a demo pipeline (JSONL reader -> Unicode and whitespace normalisation -> heuristic
filters -> JSONL writer) on a local cluster of worker processes, over the shipped
4,000-document sample (``curator_dask/data/sample.jsonl.gz``) and over four copies of it
with new ids. Both inputs are cut into shards of the same size, so 4x the data is 4x the
partitions, not bigger partitions. While each run goes, a thread samples the resident
memory (RSS) of this process and all its children (the cluster's nannies and workers) with
psutil; the peak of the sum is reported.

Streaming keeps at most ``max-in-flight`` partitions in memory, so the peak should stay
within 1.2x while the data grows 4x. Most of the peak is the idle cluster (interpreters,
imported libraries); the growth above it, measured once the cluster is up, is reported too.

Usage::

    python bench/bench_pipeline.py [--modes streaming batch] [--n-workers 2]

Prints a table and writes ``bench/results/bench_pipeline.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from curator_dask import processing_stage  # noqa: E402
from curator_dask.cluster import ClusterConfig, get_client  # noqa: E402
from curator_dask.executor import DaskExecutor  # noqa: E402
from curator_dask.io import JsonlReader, JsonlWriter  # noqa: E402
from curator_dask.pipeline import Pipeline  # noqa: E402

SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"
RESULTS = ROOT / "bench" / "results"


def demo_stages() -> list[Any]:
    """Unicode + whitespace modifiers and a few heuristic filters (the README demo)."""
    try:
        from curator_dask.filters import (
            MeanWordLengthFilter,
            NonAlphaNumericFilter,
            RepeatedLinesFilter,
            SymbolsToWordsFilter,
            WordCountFilter,
        )
        from curator_dask.modifiers import UnicodeNormalizer, WhitespaceNormalizer
    except ImportError:  # the filters package is not there: equivalent function stages
        return _fallback_stages()
    return [
        UnicodeNormalizer(form="NFKC"),
        WhitespaceNormalizer(),
        WordCountFilter(min_words=50),
        MeanWordLengthFilter(),
        SymbolsToWordsFilter(),
        NonAlphaNumericFilter(),
        RepeatedLinesFilter(),
    ]


def _fallback_stages() -> list[Any]:
    @processing_stage(name="unicode_nfkc")
    def unicode_nfkc(part: Any) -> Any:
        return part.assign(text=part["text"].str.normalize("NFKC"))

    @processing_stage(name="whitespace")
    def whitespace(part: Any) -> Any:
        return part.assign(text=part["text"].str.replace(r"[ \t]+", " ", regex=True))

    @processing_stage(name="min_words")
    def min_words(part: Any) -> Any:
        return part[part["text"].str.split().str.len() >= 50]

    return [unicode_nfkc, whitespace, min_words]


def make_input(dest: Path, copies: int, docs_per_shard: int) -> int:
    """Write ``copies`` copies of the sample (new ids) as JSONL shards; return docs."""
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    dest.mkdir(parents=True)
    shard, n, out = 0, 0, None
    for c in range(copies):
        for rec in records:
            if n % docs_per_shard == 0:
                if out:
                    out.close()
                out = open(dest / f"shard-{shard:05d}.jsonl", "w", encoding="utf-8")  # noqa: SIM115
                shard += 1
            out.write(json.dumps({**rec, "id": f"{rec['id']}#{c}"}, ensure_ascii=False) + "\n")
            n += 1
    if out:
        out.close()
    return n


class TreeMemorySampler:
    """Samples the summed RSS of this process and its descendants in a thread."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        me = psutil.Process()
        total = 0
        for p in [me, *me.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):  # a process that just exited
                total += p.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeMemorySampler:
        self.peak = self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._sample())


def run_once(src: Path, out: Path, mode: str, config: ClusterConfig) -> dict[str, Any]:
    """Start a cluster, run the demo pipeline, return timings and peak memory."""
    stages = demo_stages()
    with TreeMemorySampler() as mem, get_client(config) as client:
        base = TreeMemorySampler()._sample()  # cluster up, nothing read yet
        pipeline = Pipeline(
            "bench", [JsonlReader(str(src), files_per_partition=1), *stages, JsonlWriter(str(out))]
        )
        t0 = time.perf_counter()
        result = pipeline.run(DaskExecutor(client=client, progress=False), execution_mode=mode)
        wall = time.perf_counter() - t0
    return {
        "mode": mode,
        "docs": result.read,
        "kept": result.kept,
        "partitions": result.partitions,
        "wall_s": round(wall, 2),
        "docs_per_s": round(result.read / wall, 1),
        "idle_cluster_rss_mb": round(base / 2**20, 1),
        "peak_rss_mb": round(mem.peak / 2**20, 1),
        "peak_above_idle_mb": round((mem.peak - base) / 2**20, 1),
        "stages": [s.name for s in result.stages[1:-1]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", default=["streaming"], choices=["streaming", "batch"])
    parser.add_argument("--n-workers", type=int, default=2)
    parser.add_argument("--threads-per-worker", type=int, default=1)
    parser.add_argument("--docs-per-shard", type=int, default=250)
    parser.add_argument("--scale", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args(argv)

    config = ClusterConfig(
        n_workers=args.n_workers, threads_per_worker=args.threads_per_worker, dashboard_address=None
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        for scale in args.scale:
            src = Path(tmp) / f"in-{scale}x"
            make_input(src, scale, args.docs_per_shard)
            for mode in args.modes:
                out = Path(tmp) / f"out-{scale}x-{mode}"
                row = {"scale": scale, **run_once(src, out, mode, config)}
                rows.append(row)
                shutil.rmtree(out)
                print(
                    f"  {scale}x {mode}: {row['wall_s']}s, peak {row['peak_rss_mb']} MB",
                    file=sys.stderr,
                )

    print(
        f"\n{'scale':>5} {'mode':>9} {'docs':>7} {'parts':>5} {'wall s':>7} {'docs/s':>8} "
        f"{'idle MB':>8} {'peak MB':>8}"
    )
    for r in rows:
        print(
            f"{r['scale']:>4}x {r['mode']:>9} {r['docs']:>7} {r['partitions']:>5} "
            f"{r['wall_s']:>7} {r['docs_per_s']:>8} {r['idle_cluster_rss_mb']:>8} "
            f"{r['peak_rss_mb']:>8}"
        )
    ratios = {}
    for mode in args.modes:
        by = {r["scale"]: r for r in rows if r["mode"] == mode}
        if 1 in by and 4 in by:
            ratios[mode] = round(by[4]["peak_rss_mb"] / by[1]["peak_rss_mb"], 3)
            verdict = "ok" if ratios[mode] <= 1.2 else "ABOVE 1.2x"
            print(
                f"{mode}: peak memory 4x / 1x = {ratios[mode]} ({verdict}); above the idle "
                f"cluster: {by[1]['peak_above_idle_mb']} MB -> {by[4]['peak_above_idle_mb']} MB"
            )

    RESULTS.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "bench_pipeline",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        },
        "cluster": {"n_workers": args.n_workers, "threads_per_worker": args.threads_per_worker},
        "docs_per_shard": args.docs_per_shard,
        "rows": rows,
        "peak_ratio_4x_over_1x": ratios,
    }
    path = RESULTS / "bench_pipeline.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
