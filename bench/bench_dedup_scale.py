"""Fuzzy and exact dedup at growing corpus sizes, default settings: time, CPU and peak memory.

    python bench/bench_dedup_scale.py [--docs 100000 400000 1600000 6400000]
                                      [--memory-limit 2GB] [--methods fuzzy exact]
                                      [--corpus distinct|resampled] [--corpus-dir DIR]

The corpus (``dedup_corpus.py``) is made from the public corpus's real text once and cached
under ``--corpus-dir`` (default ``$TMPDIR/curator-bench-corpus``) as Parquet files of 100,000
documents; a size uses the first files. The default, ``distinct``, has the same duplicate
structure at every size (15% near-duplicate copies in clusters of a fixed size distribution,
all other documents distinct), so time and memory per document are comparable across sizes.
``resampled`` is the corpus of the earlier runs (public texts drawn with replacement): every
text has ~N/35,000 near-copies there, so clusters and buckets grow with N (the hard case for
the candidate check); it is kept to compare with those runs.
Each (size, method) runs on a fresh LocalCluster of
2 worker processes (1 thread each) with a fixed memory limit, with the workflow's defaults
(no blocksize, no bands_per_iteration: both chosen from the workers' memory; fuzzy: word
5-grams with the candidate check). While it runs, the workers' RSS is sampled every 0.2 s and
attributed to the step running then. Per step: wall seconds, CPU seconds of the workers and
of this process, peak worker RSS. The last table compares each size with the peer size
(``--peer``, default 400,000) measured in the same run: the peak-memory ratio (target <= 1.2)
and the time per document ratio (1.0: linear).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import table, write_json
from dedup_corpus import FILE_DOCS, KINDS, corpus_files, default_root


class _Sampler:
    """Worker RSS and CPU, attributed to the current step."""

    def __init__(self, pids: list[int]) -> None:
        import psutil

        self.procs = [psutil.Process(p) for p in pids]
        self.me = psutil.Process()
        self.step = "start"
        self.sub = ""  # the label of the computation running inside the step
        self.peak: dict[str, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def cpu(self) -> float:
        total = 0.0
        for p in [*self.procs, self.me]:
            with contextlib.suppress(Exception):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def _run(self) -> None:
        while not self.stop.is_set():
            rss = 0
            for p in self.procs:
                with contextlib.suppress(Exception):
                    rss = max(rss, p.memory_info().rss)
            self.peak[self.step] = max(self.peak.get(self.step, 0), rss)
            if self.sub:
                key = f"{self.step}/{self.sub}"
                self.peak[key] = max(self.peak.get(key, 0), rss)
            time.sleep(0.2)


@contextlib.contextmanager
def _steps_of(sampler: _Sampler, rows: list[dict[str, Any]]):
    """Time every ``Reporter.step`` of the workflows (wall, CPU, peak worker RSS), and take
    the peak of each computation inside a step (``Reporter.compute``'s label) as well."""
    from curator_dask.dedup import _runtime

    original = _runtime.Reporter.step
    original_compute = _runtime.Reporter.compute

    def compute(self: Any, tasks: Any, label: str, *args: Any, **kwargs: Any) -> Any:
        sampler.sub = label
        try:
            return original_compute(self, tasks, label, *args, **kwargs)
        finally:
            sampler.sub = ""

    @contextlib.contextmanager
    def step(self: Any, name: str):
        sampler.step = name
        t, c = time.perf_counter(), sampler.cpu()
        with original(self, name):
            yield
        rows.append(
            {
                "step": name,
                "wall_s": round(time.perf_counter() - t, 1),
                "cpu_s": round(sampler.cpu() - c, 1),
                "peak_worker_mb": round(sampler.peak.get(name, 0) / 2**20),
                "peak_mb_by_part": {
                    k.split("/", 1)[1]: round(v / 2**20)
                    for k, v in sampler.peak.items()
                    if k.startswith(name + "/")
                },
            }
        )
        print("  step", rows[-1], flush=True)
        sampler.step = "between"

    _runtime.Reporter.step = step  # type: ignore[method-assign]
    _runtime.Reporter.compute = compute  # type: ignore[method-assign]
    try:
        yield
    finally:
        _runtime.Reporter.step = original  # type: ignore[method-assign]
        _runtime.Reporter.compute = original_compute  # type: ignore[method-assign]


def run_one(
    method: str, files: list[str], tmp: str, memory_limit: str, keep_cache: str | None = None
) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow

    out = os.path.join(tmp, f"out-{method}")
    cache = os.path.join(keep_cache, f"{method}-{len(files)}") if keep_cache else None
    if cache is None:
        cache = os.path.join(tmp, "cache")
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    steps: list[dict[str, Any]] = []
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit,
            dashboard_address=":0",
            local_directory=os.path.join(tmp, "dask"),
        ) as cluster,
        Client(cluster) as client,
    ):
        pids = list(client.run(os.getpid).values())
        sampler = _Sampler(pids)
        sampler.thread.start()
        t, c = time.perf_counter(), sampler.cpu()
        with _steps_of(sampler, steps):
            if method == "fuzzy":
                wf: Any = FuzzyDeduplicationWorkflow(
                    input_path=files, cache_path=cache, output_path=out, client=client
                )
            else:
                wf = ExactDeduplicationWorkflow(input_path=files, output_path=out, client=client)
            try:
                res = wf.run()
            except Exception as exc:  # a failed size is reported, not hidden
                sampler.stop.set()
                return {
                    "failed": f"{type(exc).__name__}: {str(exc)[:200]}",
                    "steps": steps,
                    "peak_worker_mb": round(max(sampler.peak.values(), default=0) / 2**20),
                }
        wall, cpu = time.perf_counter() - t, sampler.cpu() - c
        sampler.stop.set()
        sampler.thread.join()
    shutil.rmtree(out, ignore_errors=True)
    if not keep_cache:
        shutil.rmtree(cache, ignore_errors=True)
    return {
        "documents": res.documents,
        "removed": res.removed,
        "details": {k: v for k, v in res.details.items() if k != "cache_dir"},
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "peak_worker_mb": round(max(sampler.peak.values(), default=0) / 2**20),
        "steps": steps,
        "stats": res.stats,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, nargs="+", default=[100_000, 400_000, 1_600_000, 6_400_000])
    ap.add_argument("--memory-limit", default="2GB")
    ap.add_argument("--methods", nargs="+", default=["fuzzy", "exact"])
    ap.add_argument("--peer", type=int, default=400_000)
    ap.add_argument("--corpus", choices=KINDS, default="distinct")
    ap.add_argument("--corpus-dir", default=None, help=f"corpus cache (default {default_root()})")
    ap.add_argument("--tmp", default=None, help="scratch directory (default: a new temp dir)")
    ap.add_argument(
        "--keep-cache",
        default=None,
        metavar="DIR",
        help="keep fuzzy dedup's step cache under DIR (one per size) and resume from it: "
        "remove a step's directory there to measure that step again",
    )
    args = ap.parse_args(argv)
    sizes = sorted(args.docs)
    tmp = tempfile.mkdtemp(prefix="bench-scale-", dir=args.tmp)
    t0 = time.perf_counter()
    all_files = corpus_files(args.corpus, max(sizes), args.corpus_dir)
    print(
        f"corpus {args.corpus}: {max(sizes):,} docs ready in {time.perf_counter() - t0:.0f}s",
        flush=True,
    )
    runs: list[dict[str, Any]] = []
    try:
        for n in sizes:
            files = all_files[: -(-n // FILE_DOCS)]
            for method in args.methods:
                r = run_one(method, files, tmp, args.memory_limit, args.keep_cache)
                r.update(method=method, docs=n)
                runs.append(r)
                if "failed" in r:
                    print(f"{method} {n:,}: FAILED {r['failed']}", flush=True)
                    continue
                print(
                    f"{method} {n:,}: {r['wall_s']} s wall, {r['cpu_s']} s CPU, "
                    f"peak worker {r['peak_worker_mb']} MB, removed {r['removed']:,}, "
                    f"{r['details']}",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [
        {"method": r["method"], "docs": f"{r['docs']:,}", **s}
        for r in runs
        for s in [
            *r["steps"],
            {
                "step": "total" if "failed" not in r else "FAILED",
                **{k: r.get(k, "") for k in ("wall_s", "cpu_s", "peak_worker_mb")},
            },
        ]
    ]
    print(
        f"\n{args.corpus} corpus, per step, 2 workers x {args.memory_limit}, 1 thread each, "
        "default settings"
    )
    print(table(rows, ["method", "docs", "step", "wall_s", "cpu_s", "peak_worker_mb"]))
    summary = []
    for r in runs:
        if "failed" in r:
            summary.append({"method": r["method"], "docs": f"{r['docs']:,}", "failed": True})
            continue
        peer = next(
            (
                p
                for p in runs
                if p["method"] == r["method"] and p["docs"] == args.peer and "failed" not in p
            ),
            None,
        )
        row = {
            "method": r["method"],
            "docs": f"{r['docs']:,}",
            "docs_per_cpu_s": round(r["docs"] / max(r["cpu_s"], 1e-9)),
            "peak_worker_mb": r["peak_worker_mb"],
        }
        if peer is not None:
            row["peak_vs_peer"] = round(r["peak_worker_mb"] / peer["peak_worker_mb"], 2)
            row["time_per_doc_vs_peer"] = round(
                (r["wall_s"] / r["docs"]) / (peer["wall_s"] / peer["docs"]), 2
            )
        summary.append(row)
    print(f"\nscaling against the peer size {args.peer:,} (same run; the box may be shared)")
    print(
        table(
            summary,
            [
                "method",
                "docs",
                "docs_per_cpu_s",
                "peak_worker_mb",
                "peak_vs_peer",
                "time_per_doc_vs_peer",
            ],
        )
    )
    payload = {
        "corpus": args.corpus,
        "memory_limit": args.memory_limit,
        "runs": runs,
        "summary": summary,
    }
    name = "bench_dedup_scale" + ("" if args.corpus == "distinct" else f"_{args.corpus}")
    print("wrote", write_json(name, payload))
    return payload


if __name__ == "__main__":
    main()
