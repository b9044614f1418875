"""One GPU against all CPU cores of the same machine, end to end, same data, same run.

    python bench/bench_gpu_e2e.py [--docs 1000000] [--modes gpu cpu] [--out bench/results]

The corpus is ``bench/dedup_corpus.py``'s ``distinct`` kind (public-corpus text, or the
shipped sample when the public corpus is absent; near-duplicate clusters of mean size 3),
``--docs`` rounded up to whole files of 100,000. Each step is the command a user runs:
``run`` (read + examples/pipeline.yaml's normaliser and filters, Parquet out),
``exact-dedup``, ``fuzzy-dedup`` (text in, removed ids out) and ``semantic-dedup``, once
with ``--gpu`` on the cudf backend and once on CPU workers (one per core). Per step: wall
time, documents/s, the GPU's peak memory (NVML, sampled every 0.2 s by this process), the
GPU/CPU ratio, an estimate of the ratio to one CPU core (CPU wall x cores: an upper bound
on one core's speed, so a lower bound on the ratio), and whether the outputs hash equal.
RMM pool use and cudf spilling are not measured here. Prints a table, writes
``OUT/gpu_e2e.json``.

Not yet run on a GPU (docs/gpu.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gpu_check import ROOT, _run, digest  # noqa: E402


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class _GpuPeak:
    """Peak used memory of GPU 0 while the block runs (NVML); ``None`` without NVML."""

    def __init__(self) -> None:
        self.peak: int | None = None
        self._stop = threading.Event()

    def __enter__(self) -> _GpuPeak:
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            return self

        def sample() -> None:
            while not self._stop.is_set():
                used = int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
                self.peak = max(self.peak or 0, used)
                self._stop.wait(0.2)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


def _steps(files: list[str], work: str, mode: str, workers: int) -> dict[str, tuple]:
    out = os.path.join(work, mode)
    data = os.path.dirname(files[0])
    flags = (
        ["--gpu"] if mode == "gpu" else ["--n-workers", str(workers), "--threads-per-worker", "1"]
    )
    with open(os.path.join(ROOT, "examples", "pipeline.yaml"), encoding="utf-8") as f:
        text = f.read()
    reader = f"reader:\n  class: ParquetReader\n  params: {{paths: {data}}}\n"
    text = text[: text.index("reader:")] + reader + text[text.index("stages:") :]
    text = text.replace("out/sample-clean", os.path.join(out, "run"))
    pipeline = os.path.join(work, f"pipeline-{mode}.yaml")
    with open(pipeline, "w", encoding="utf-8") as f:
        f.write(text)
    cli = [sys.executable, "-m", "curator_dask.cli"]
    return {
        "read+filters": ([*cli, "run", pipeline, *flags], [os.path.join(out, "run")]),
        "exact": ([*cli, "exact-dedup", data, "--output", os.path.join(out, "exact"), *flags],
                  [os.path.join(out, "exact", "removed_ids")]),
        "fuzzy": ([*cli, "fuzzy-dedup", data, "--cache-dir", os.path.join(out, "fc"),
                   "--output", os.path.join(out, "fuzzy"), *flags],
                  [os.path.join(out, "fuzzy", "removed_ids")]),
        "semantic": ([*cli, "semantic-dedup", data, "--cache-dir", os.path.join(out, "sc"),
                      "--output", os.path.join(out, "semantic"), *flags,
                      "--device", "cuda" if mode == "gpu" else "cpu"],
                     [os.path.join(out, "semantic", "removed_ids")]),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--modes", nargs="+", default=["gpu", "cpu"], choices=["gpu", "cpu"])
    ap.add_argument("--steps", nargs="+", default=["read+filters", "exact", "fuzzy", "semantic"])
    ap.add_argument("--shingle-device", default="gpu", choices=["gpu", "host"])
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--corpus-root")
    args = ap.parse_args(argv)
    from dedup_corpus import FILE_DOCS, corpus_files

    files = corpus_files("distinct", args.docs, args.corpus_root)
    n_docs = len(files) * FILE_DOCS
    cores = _cores()
    work = os.path.abspath(os.path.join(args.out, "gpu_e2e_work"))
    os.makedirs(work, exist_ok=True)
    results: dict = {"documents": n_docs, "cpu_cores": cores, "steps": {}}
    for mode in args.modes:
        steps = _steps(files, work, mode, cores)
        for name in args.steps:
            env = dict(os.environ, PYTHONPATH=ROOT)
            if mode == "gpu":
                env["DASK_DATAFRAME__BACKEND"] = "cudf"
                env["DASK_CURATOR__DEDUP__SHINGLE_DEVICE"] = args.shingle_device
            cmd, outputs = steps[name]
            with _GpuPeak() as peak:
                rc, wall = _run(cmd, env, os.path.join(work, f"{name}-{mode}.log"))
            results["steps"].setdefault(name, {})[mode] = {
                "rc": rc,
                "wall_s": round(wall, 2),
                "docs_per_s": round(n_docs / wall, 1),
                "gpu_peak_mb": None if peak.peak is None else round(peak.peak / 2**20),
                "digest": [digest(p) if rc == 0 else None for p in outputs],
            }
            print(name, mode, json.dumps(results["steps"][name][mode]), flush=True)
    print(f"\n{n_docs:,} documents, {cores} CPU cores")
    print(
        f"{'step':<14} {'gpu s':>8} {'cpu s':>8} {'gpu/cpu':>8} {'vs 1 core':>10} "
        f"{'peak MB':>8}  equal"
    )
    for name, r in results["steps"].items():
        g, c = r.get("gpu"), r.get("cpu")
        ratio = c["wall_s"] / g["wall_s"] if g and c and not g["rc"] and not c["rc"] else None
        r["gpu_over_cpu"] = ratio
        r["gpu_over_one_core_at_least"] = None if ratio is None else ratio * cores
        r["equal"] = bool(g and c and g["digest"] == c["digest"] and not g["rc"])
        print(
            f"{name:<14} {g['wall_s'] if g else '-':>8} {c['wall_s'] if c else '-':>8} "
            f"{'-' if ratio is None else f'{ratio:.1f}x':>8} "
            f"{'-' if ratio is None else f'{ratio * cores:.0f}x':>10} "
            f"{(g or {}).get('gpu_peak_mb') or '-':>8}  {r['equal']}"
        )
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_e2e.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
