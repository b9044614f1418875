"""Peak memory of a streaming filter pipeline as its one input file grows 4x (250 MB -> 1 GB).

Usage: ``python bench/bench_filters_pipeline.py [--sizes-mb 250 1000] [--n-workers 2]
[--memory-limit 1.5GB] [--variants default two-per-thread-half] [--out FILE]``

For every size, writes one JSONL file of that many bytes (the shipped sample's documents
repeated, each copy with a new id and a distinct first word, so nothing is a duplicate),
then runs the pipeline of NeMo Curator's measurement in issue 12 (Unicode and whitespace
normalisation, word count, repeated lines, duplicate 5-grams) in streaming mode on a
local cluster of worker processes with a memory limit, once per variant:

- ``default``: every setting at its default (the reader's blocksize and the executor's
  partitions in flight, both chosen from the workers' memory limit and threads);
- ``one-per-thread``: the default blocksize, one partition in flight per worker thread;
- ``two-per-thread``: the default blocksize, two partitions in flight per worker thread;
- ``two-per-thread-half``: two in flight per thread with half the default blocksize (the
  other way to fit two partitions per thread in the same memory).

A thread samples the resident memory of this process and each of its children
(scheduler, nannies, workers) every 50 ms. Prints per run the peak of the sum, the
largest worker's peak as a share of its memory limit, the workers the nannies had to
restart, wall time and documents per CPU-second of the workers; then, per variant, the
ratio of the peak at the largest size to the peak at the smallest (the target: at most
1.2). Writes JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
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

from curator_dask.cluster import ClusterConfig, get_client  # noqa: E402
from curator_dask.executor import DaskExecutor  # noqa: E402
from curator_dask.filters import (  # noqa: E402
    RepeatedLinesFilter,
    RepeatingDuplicateNGramsFilter,
    WordCountFilter,
)
from curator_dask.io import JsonlReader, JsonlWriter  # noqa: E402
from curator_dask.modifiers import UnicodeNormalizer, WhitespaceNormalizer  # noqa: E402
from curator_dask.pipeline import Pipeline  # noqa: E402
from curator_dask.sizing import default_blocksize  # noqa: E402

SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"


def make_input(path: Path, size_mb: float) -> int:
    """Write about ``size_mb`` MB of JSONL made of sample copies; return the documents."""
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    target, written, n, copy = size_mb * 1e6, 0, 0, 0
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            for rec in records:
                line = json.dumps(
                    {**rec, "id": f"{rec['id']}#{copy}", "text": f"{copy} {rec['text']}"},
                    ensure_ascii=False,
                )
                written += out.write(line + "\n")
                n += 1
            copy += 1
    return n


def stages() -> list[Any]:
    return [
        UnicodeNormalizer(form="NFKC"),
        WhitespaceNormalizer(),
        WordCountFilter(min_words=50),
        RepeatedLinesFilter(),
        RepeatingDuplicateNGramsFilter(n=5),
    ]


class ProcessSampler:
    """Samples the RSS of this process and of each descendant, and their CPU times."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak = 0  # of the sum
        self.peak_by_pid: dict[int, int] = {}
        self.cpu_by_pid: dict[int, float] = {}
        self.kind_of: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> int:
        me = psutil.Process()
        total = 0
        for p in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):  # a process that just exited
                rss = p.memory_info().rss
                total += rss
                self.peak_by_pid[p.pid] = max(self.peak_by_pid.get(p.pid, 0), rss)
                cpu = p.cpu_times()
                self.cpu_by_pid[p.pid] = cpu.user + cpu.system
                if p.pid not in self.kind_of:
                    tracker = any("resource_tracker" in a for a in p.cmdline())
                    self.kind_of[p.pid] = "tracker" if tracker else "worker"
        return total + me.memory_info().rss

    def workers(self) -> list[int]:
        """Worker processes: the children of this process (which holds the scheduler and
        the nannies) that are not multiprocessing's resource tracker."""
        return [pid for pid, kind in self.kind_of.items() if kind == "worker"]

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> ProcessSampler:
        self.peak = self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


#: What each variant changes: partitions in flight per worker thread (None: the
#: executor's default) and the blocksize as a share of the default one.
VARIANTS: dict[str, tuple[int | None, float]] = {
    "default": (None, 1.0),
    "one-per-thread": (1, 1.0),
    "two-per-thread": (2, 1.0),
    "two-per-thread-half": (2, 0.5),
}


def run_once(src: Path, out: Path, config: ClusterConfig, variant: str) -> dict[str, Any]:
    per_thread, share = VARIANTS[variant]
    with ProcessSampler() as mem, get_client(config) as client:
        idle = mem.sample()
        threads = sum(client.nthreads().values())
        default = default_blocksize(client)
        blocksize = None if share == 1.0 else int(default * share)
        pipeline = Pipeline(
            "bench",
            [JsonlReader(str(src), blocksize=blocksize), *stages(), JsonlWriter(str(out))],
        )
        in_flight = None if per_thread is None else per_thread * threads
        executor = DaskExecutor(client=client, progress=False, max_in_flight=in_flight)
        t0 = time.perf_counter()
        result = pipeline.run(executor, execution_mode="streaming")
        wall = time.perf_counter() - t0
        mem.sample()
        limit = min(int(w["memory_limit"]) for w in client.scheduler_info()["workers"].values())
    workers = mem.workers()
    worker_peak = max(mem.peak_by_pid[pid] for pid in workers)
    cpu = sum(mem.cpu_by_pid.values())
    return {
        "variant": variant,
        "input_mb": round(src.stat().st_size / 1e6, 1),
        "docs": result.read,
        "kept": result.kept,
        "partitions": result.partitions,
        "blocksize_mb": round((blocksize or default) / 1e6, 1),
        "in_flight": in_flight or "default",
        "wall_s": round(wall, 1),
        "cluster_cpu_s": round(cpu, 1),
        "docs_per_cpu_s": round(result.read / cpu) if cpu else None,
        "idle_cluster_mb": round(idle / 1e6),
        "peak_mb": round(mem.peak / 1e6),
        "peak_above_idle_mb": round((mem.peak - idle) / 1e6),
        "worker_peak_mb": round(worker_peak / 1e6),
        "worker_peak_share": round(worker_peak / limit, 3),
        "worker_restarts": max(0, len(workers) - config.sized()[0]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[250, 1000])
    ap.add_argument("--n-workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="1.5GB", help="per worker")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["default"])
    ap.add_argument("--out", default="bench_filters_pipeline.json")
    args = ap.parse_args()
    config = ClusterConfig(
        n_workers=args.n_workers,
        threads_per_worker=1,
        memory_limit=args.memory_limit,
        dashboard_address=None,
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-filters-pipeline-") as tmp:
        for size in args.sizes_mb:
            src = Path(tmp) / f"in-{size:g}MB.jsonl"
            make_input(src, size)
            for variant in args.variants:
                out = Path(tmp) / "out"
                rows.append(run_once(src, out, config, variant))
                shutil.rmtree(out, ignore_errors=True)
                r = rows[-1]
                print(
                    f"{variant:20s} {r['input_mb']:7.1f} MB {r['docs']:8d} docs "
                    f"{r['partitions']:3d} x {r['blocksize_mb']:5.1f} MB, in flight "
                    f"{r['in_flight']!s:7s} {r['wall_s']:6.1f} s {r['docs_per_cpu_s']:6d} "
                    f"docs/CPU-s  peak {r['peak_mb']:5d} MB (idle {r['idle_cluster_mb']} MB)"
                    f"  worker {r['worker_peak_mb']} MB = {r['worker_peak_share']:.0%} of "
                    f"its limit, {r['worker_restarts']} restarts",
                    flush=True,
                )
            src.unlink()
    ratios = {}
    for variant in args.variants:
        mine = [r for r in rows if r["variant"] == variant]
        ratios[variant] = round(mine[-1]["peak_mb"] / mine[0]["peak_mb"], 3)
        print(
            f"{variant:20s} peak at {mine[-1]['input_mb']:.0f} MB / peak at "
            f"{mine[0]['input_mb']:.0f} MB = {ratios[variant]:.2f} (target <= 1.2); worst "
            f"worker {max(r['worker_peak_share'] for r in mine):.0%} of its limit "
            "(target < 60%)"
        )
    print(
        f"{args.n_workers} workers x 1 thread, memory_limit {args.memory_limit} each; "
        "docs/CPU-s: documents over the CPU seconds of the nannies and workers"
    )
    report = {
        "cluster": {"n_workers": args.n_workers, "memory_limit": args.memory_limit},
        "rows": rows,
        "peak_ratio": ratios,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
