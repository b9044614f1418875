"""One GPU against all CPU cores of the same machine, end to end, same data, same run.

    python bench/bench_gpu_e2e.py [--docs 1000000] [--modes gpu cpu] [--rmm-pool 0.5]
                                  [--semantic-docs 20000] [--out bench/results]

The corpus is ``bench/dedup_corpus.py``'s ``distinct`` kind (public-corpus text, or the
shipped sample when the public corpus is absent; near-duplicate clusters of mean size 3),
``--docs`` rounded up to whole files of 100,000. Each step is the command a user runs:
``run`` (read + examples/pipeline.yaml's normaliser and filters, Parquet out),
``exact-dedup``, ``fuzzy-dedup`` (text in, removed ids out) and ``semantic-dedup`` (on the
corpus's first ``--semantic-docs``, 20,000 by default: CPU workers embed tens of documents a
second each), once on the GPU with the cudf backend and once on CPU workers (one per
core). On the GPU, fuzzy dedup runs twice: shingles hashed on the host (the default) and
on the device (``fuzzy shingle-gpu``: ``curator.dedup.shingle-device: gpu``), each
compared by its removed set's hash with the CPU's.

The GPU commands share one ``LocalCUDACluster`` this script starts the way ``--gpu``
does (``curator_dask.cluster.make_cluster``), with an RMM pool per worker (``--rmm-pool``:
a fraction of the device or a size; ``0``: none) and cudf spilling on, and they reach it
through ``--scheduler-file``; that is how the workers' memory is read (``client.run``,
:func:`worker_gpu_memory`) before and after each step: the RMM pool's size, the bytes
RMM handed out (current and peak during the step, through ``rmm.statistics``), and the
bytes cudf spilled to host and back (its spill statistics). ``--gpu-cluster cli`` runs the
commands with ``--gpu`` instead (each its own cluster, no pool, none of those figures).

Per step: wall time, documents/s, the GPU's peak memory (NVML, sampled every 0.2 s by this
process), RMM pool and peak, spilled bytes, the GPU/CPU ratio, an estimate of the ratio to
one CPU core (CPU wall x cores: an upper bound on one core's speed, so a lower bound on the
ratio), and whether the outputs hash equal. Prints a table, writes ``OUT/gpu_e2e.json``.

Run on one H200 on 2026-11-27: the figures are in docs/gpu.md ("One GPU against 16 cores").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gpu_check import ROOT, _run, digest  # noqa: E402

#: fuzzy dedup on the GPU with the shingles hashed there too (``shingle-device: gpu``);
#: its removed set is compared with the CPU's ``fuzzy`` step.
SHINGLE_STEP = "fuzzy shingle-gpu"


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


def worker_gpu_memory() -> dict[str, Any]:
    """On one GPU worker (``client.run``): its RMM pool and allocations, cudf's spilling.

    ``pool_bytes``: the RMM pool's current size (None without a pool); ``rmm_current_bytes``
    and ``rmm_peak_bytes``: what RMM handed out now and at most since the last
    :func:`start_step` (None unless statistics are on); ``spilled_bytes`` and
    ``unspilled_bytes``: cudf's device-to-host and host-to-device totals in this process
    (0 with spilling off or without spill statistics, ``CUDF_SPILL_STATS``).
    """
    import rmm

    out: dict[str, Any] = {}
    mr = rmm.mr.get_current_device_resource()
    out["rmm_resource"] = type(mr).__name__
    pool = mr
    while pool is not None and not hasattr(pool, "pool_size"):
        pool = getattr(pool, "upstream_mr", None)
    out["pool_bytes"] = None if pool is None else int(pool.pool_size())
    stats = rmm.statistics.get_statistics()
    out["rmm_current_bytes"] = None if stats is None else int(stats.current_bytes)
    out["rmm_peak_bytes"] = None if stats is None else int(stats.peak_bytes)
    out["spilled_bytes"] = out["unspilled_bytes"] = 0
    try:
        from cudf.core.buffer.spill_manager import get_global_manager
    except ImportError:
        return out
    manager = get_global_manager()
    if manager is not None:
        totals = manager.statistics.spill_totals
        out["spilled_bytes"] = int(totals.get(("gpu", "cpu"), (0, 0.0))[0])
        out["unspilled_bytes"] = int(totals.get(("cpu", "gpu"), (0, 0.0))[0])
    return out


def start_step() -> None:
    """On one GPU worker: RMM statistics on (once), and a fresh counter for the next step.

    cudf's spill manager, made on the worker's first cudf buffer, puts its own resource (to
    spill on demand) on top of RMM's stack, and RMM reads statistics only from the top one:
    made after them, it hid the first step's figures (H200, 2026-11-27). It is made first.
    """
    import rmm

    try:
        from cudf.core.buffer.spill_manager import get_global_manager
    except ImportError:
        pass
    else:
        get_global_manager()

    if rmm.statistics.get_statistics() is None:
        rmm.statistics.enable_statistics()
    else:
        rmm.statistics.pop_statistics()  # the last step's counters (never the base ones)
    rmm.statistics.push_statistics()


def memory_delta(before: dict[str, dict], after: dict[str, dict]) -> dict[str, Any]:
    """One step's figures over all workers, from :func:`worker_gpu_memory` before and after.

    Pool and peak are the largest worker's (each worker has its own GPU and pool); the
    spilled bytes are the sum of what each worker spilled during the step.
    """

    def most(key: str) -> int | None:
        values = [w.get(key) for w in after.values() if w.get(key) is not None]
        return max(values) if values else None

    def added(key: str) -> int:
        return sum(int(w.get(key) or 0) - int(before.get(a, {}).get(key) or 0)
                   for a, w in after.items())  # fmt: skip

    return {
        "workers": len(after),
        "rmm_pool_mb": _mb(most("pool_bytes")),
        "rmm_peak_mb": _mb(most("rmm_peak_bytes")),
        "spilled_mb": _mb(added("spilled_bytes")),
        "unspilled_mb": _mb(added("unspilled_bytes")),
    }


def _mb(n: int | None) -> float | None:
    return None if n is None else round(n / 2**20, 1)


class _GpuCluster:
    """The GPU commands' cluster (``--gpu``'s, with a pool and cudf spilling), by file."""

    def __init__(self, work: str, rmm_pool: str) -> None:
        from distributed import Client

        from curator_dask.cluster import ClusterConfig, make_cluster

        os.environ.setdefault("CUDF_SPILL_STATS", "1")  # the workers inherit it
        pool: str | float | None = None if rmm_pool in ("0", "none") else rmm_pool
        if pool is not None and pool.replace(".", "", 1).isdigit():
            pool = float(pool)
        self.cluster = make_cluster(
            ClusterConfig(kind="gpu", rmm_pool_size=pool, enable_cudf_spill=True)
        )
        self.client = Client(self.cluster)
        self.client.wait_for_workers(1, timeout=120)
        self.scheduler_file = os.path.join(work, "scheduler.json")
        self.client.write_scheduler_file(self.scheduler_file)

    def before(self) -> dict[str, dict]:
        self.client.run(start_step)
        return self.client.run(worker_gpu_memory)

    def after(self) -> dict[str, dict]:
        return self.client.run(worker_gpu_memory)

    def close(self) -> None:
        self.client.close()
        self.cluster.close()


def _steps(
    files: list[str],
    work: str,
    mode: str,
    workers: int,
    scheduler_file: str | None = None,
    semantic_input: str | None = None,
) -> dict[str, tuple]:
    out = os.path.join(work, mode)
    data = os.path.dirname(files[0])
    semantic_input = semantic_input or data
    if mode == "gpu":
        flags = ["--scheduler-file", scheduler_file] if scheduler_file else ["--gpu"]
    else:
        flags = ["--n-workers", str(workers), "--threads-per-worker", "1"]
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
        SHINGLE_STEP: ([*cli, "fuzzy-dedup", data, "--cache-dir", os.path.join(out, "fc-sg"),
                        "--output", os.path.join(out, "fuzzy-sg"), *flags],
                       [os.path.join(out, "fuzzy-sg", "removed_ids")]),
        "semantic": ([*cli, "semantic-dedup", semantic_input,
                      "--cache-dir", os.path.join(out, "sc"),
                      "--output", os.path.join(out, "semantic"), *flags,
                      "--device", "cuda" if mode == "gpu" else "cpu"],
                     [os.path.join(out, "semantic", "removed_ids")]),
    }  # fmt: skip


def semantic_subset(files: list[str], work: str, n: int) -> tuple[str, int]:
    """A folder with the corpus's first ``n`` documents (all of them where ``n`` is 0 or
    more than there are), for the semantic step, and how many it holds.

    Embedding is the one step whose CPU side cannot do a million documents in a device
    call: MiniLM embeds tens of documents a second per core (docs/models.md)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    total = len(files) * _file_docs()
    if n <= 0 or n >= total:
        return os.path.dirname(files[0]), total
    folder = os.path.join(work, f"semantic-input-{n}")
    os.makedirs(folder, exist_ok=True)
    tables, left = [], n
    for f in files:
        table = pq.read_table(f)
        tables.append(table.slice(0, left))
        left -= tables[-1].num_rows
        if left <= 0:
            break
    pq.write_table(pa.concat_tables(tables), os.path.join(folder, "part-0000.parquet"))
    return folder, n


def _file_docs() -> int:
    from dedup_corpus import FILE_DOCS

    return int(FILE_DOCS)


def summarize(results: dict, cores: int) -> list[str]:
    """The table's lines; adds each step's ratios and ``equal`` to ``results`` in place.

    A step runs in both modes and is compared with itself; :data:`SHINGLE_STEP` runs on the
    GPU only and is compared with the CPU's ``fuzzy`` (and says whether it equals the GPU's
    ``fuzzy`` with host shingling too, ``equal_host_shingles``).
    """
    lines = [
        f"{'step':<18} {'gpu s':>8} {'cpu s':>8} {'gpu/cpu':>8} {'vs 1 core':>10} "
        f"{'peak MB':>8} {'pool MB':>8} {'rmm MB':>8} {'spill MB':>8}  equal"
    ]
    steps = results["steps"]
    for name, r in steps.items():
        g = r.get("gpu")
        c = steps.get("fuzzy", {}).get("cpu") if name == SHINGLE_STEP else r.get("cpu")
        ok = bool(g and c and not g["rc"] and not c["rc"])
        ratio = c["wall_s"] / g["wall_s"] if ok and g and c else None
        r["gpu_over_cpu"] = ratio
        r["gpu_over_one_core_at_least"] = None if ratio is None else ratio * cores
        r["equal"] = bool(ok and g and c and g["digest"] == c["digest"])
        if name == SHINGLE_STEP:
            host = steps.get("fuzzy", {}).get("gpu")
            r["equal_host_shingles"] = bool(g and host and g["digest"] == host["digest"])
        mem = (g or {}).get("memory") or {}

        def cell(v: Any) -> str:
            return "-" if v is None else str(v)

        lines.append(
            f"{name:<18} {cell(g and g['wall_s']):>8} {cell(c and c['wall_s']):>8} "
            f"{'-' if ratio is None else f'{ratio:.1f}x':>8} "
            f"{'-' if ratio is None else f'{ratio * cores:.0f}x':>10} "
            f"{cell((g or {}).get('gpu_peak_mb')):>8} {cell(mem.get('rmm_pool_mb')):>8} "
            f"{cell(mem.get('rmm_peak_mb')):>8} {cell(mem.get('spilled_mb')):>8}  {r['equal']}"
        )
    return lines


def step_env(mode: str, name: str) -> dict[str, str]:
    """The environment of one step's command: the checkout first on the path, then what the
    caller put there (RAPIDS carried into a target folder, as scripts/gpu_check.sh installs
    it); on the GPU the cudf backend, and the shingles on the device for SHINGLE_STEP."""
    path = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path.rstrip(os.pathsep))
    if mode == "gpu":
        env["DASK_DATAFRAME__BACKEND"] = "cudf"
        env["DASK_CURATOR__DEDUP__SHINGLE_DEVICE"] = "gpu" if name == SHINGLE_STEP else "host"
    return env


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--modes", nargs="+", default=["gpu", "cpu"], choices=["gpu", "cpu"])
    ap.add_argument(
        "--steps", nargs="+", default=["read+filters", "exact", "fuzzy", SHINGLE_STEP, "semantic"]
    )
    ap.add_argument(
        "--rmm-pool", default="0.5",
        help="each GPU worker's RMM pool: a fraction of the device or a size (0: none)",
    )  # fmt: skip
    ap.add_argument(
        "--gpu-cluster", default="own", choices=["own", "cli"],
        help="own: one cluster for the GPU steps, its memory read (default); cli: --gpu",
    )  # fmt: skip
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--corpus-root")
    ap.add_argument(
        "--semantic-docs", type=int, default=20_000,
        help="documents for the semantic step, the corpus's first (0: all of them)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    from dedup_corpus import FILE_DOCS, corpus_files

    files = corpus_files("distinct", args.docs, args.corpus_root)
    n_docs = len(files) * FILE_DOCS
    cores = _cores()
    work = os.path.abspath(os.path.join(args.out, "gpu_e2e_work"))
    os.makedirs(work, exist_ok=True)
    results: dict = {"documents": n_docs, "cpu_cores": cores, "steps": {}}
    results["rmm_pool"] = args.rmm_pool if args.gpu_cluster == "own" else None
    semantic_input, semantic_docs = (
        semantic_subset(files, work, args.semantic_docs)
        if "semantic" in args.steps
        else (None, n_docs)
    )
    results["semantic_documents"] = semantic_docs
    for mode in args.modes:
        cluster = (
            _GpuCluster(work, args.rmm_pool)
            if mode == "gpu" and args.gpu_cluster == "own"
            else None
        )
        try:
            steps = _steps(
                files, work, mode, cores, cluster and cluster.scheduler_file, semantic_input
            )
            for name in args.steps:
                if name == SHINGLE_STEP and mode != "gpu":
                    continue  # the CPU has one shingling: the "fuzzy" step
                env = step_env(mode, name)
                cmd, outputs = steps[name]
                before = cluster.before() if cluster else None
                with _GpuPeak() as peak:
                    rc, wall = _run(cmd, env, os.path.join(work, f"{name}-{mode}.log"))
                row = {
                    "rc": rc,
                    "wall_s": round(wall, 2),
                    "documents": semantic_docs if name == "semantic" else n_docs,
                    "docs_per_s": round(
                        (semantic_docs if name == "semantic" else n_docs) / wall, 1
                    ),
                    "gpu_peak_mb": None if peak.peak is None else round(peak.peak / 2**20),
                    "digest": [digest(p) if rc == 0 else None for p in outputs],
                }
                if cluster and before is not None:
                    row["memory"] = memory_delta(before, cluster.after())
                results["steps"].setdefault(name, {})[mode] = row
                print(name, mode, json.dumps(row), flush=True)
        finally:
            if cluster:
                cluster.close()
    print(f"\n{n_docs:,} documents, {cores} CPU cores, RMM pool {results['rmm_pool']}")
    for line in summarize(results, cores):
        print(line)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_e2e.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
