"""CLI start-up and the fixed cost of a small run.

Times, in fresh processes (median of ``--repeat`` runs), the wall time, the CPU time of the
whole process tree (the CLI, the cluster's nannies and workers) and the peak resident memory
of that tree (psutil, sampled every 20 ms) of:

- ``python -c pass``: the interpreter alone (peer of the next two);
- ``curator-dask --help`` and ``curator-dask run`` without its argument (an argument error);
- ``curator-dask run small.yaml --sequential``: a 2,000-document pipeline in one process;
- ``curator-dask run small.yaml --n-workers 2`` with ``curator.cluster.processes: true``:
  the same on a local cluster of worker processes (how every run went before
  ``processes: auto``, the peer);
- ``curator-dask run small.yaml --n-workers 2`` as shipped (``processes: auto``: this input
  is below ``threads-below``, so the workers are threads in the CLI's process);
- ``curator-dask fuzzy-dedup`` of the same input (with ``--perform-removal``), with worker
  processes and as shipped, the same pair for the dedup commands.

The fixed cost of a run on a cluster is a cluster run minus ``--sequential``: starting and
stopping the cluster, its worker processes and what they import. The last line compares
the two cluster runs' totals (shipped / processes).

CPU time is the larger of the tree's CPU time sampled per process (every 20 ms) and what
the operating system reports for the reaped children: worker processes that a nanny kills
are never reaped by the CLI, so the second alone misses them.

Usage::

    python bench/bench_cli.py [--repeat 3] [--n-workers 2]

Prints a table and writes ``bench/results/bench_cli.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"
RESULTS = ROOT / "bench" / "results"


def _tree_sample(proc: psutil.Process, cpu: dict[int, float]) -> int:
    """RSS of the tree now; record each process's CPU seconds so far in ``cpu``."""
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        with contextlib.suppress(psutil.Error), p.oneshot():
            total += p.memory_info().rss
            t = p.cpu_times()
            cpu[p.pid] = max(cpu.get(p.pid, 0.0), t.user + t.system)
    return total


def measure(cmd: list[str], env: dict[str, str], cwd: str | None = None) -> dict[str, Any]:
    """Run ``cmd`` (in ``cwd``); return wall seconds, CPU seconds of its process tree and
    peak tree RSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ps = psutil.Process(proc.pid)
    peak = 0
    stop = threading.Event()
    cpu_seen: dict[int, float] = {}

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_sample(ps, cpu_seen))
            stop.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    thread.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu = max(reaped, sum(cpu_seen.values()))
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": peak / 2**20,
        "exit": proc.returncode,
        "stderr_tail": err.decode(errors="replace")[-400:],
    }


def make_input(tmp: Path, n_docs: int) -> Path:
    src = tmp / "in"
    src.mkdir()
    with gzip.open(SAMPLE, "rt") as f:
        lines = [next(f) for _ in range(n_docs)]
    for i in range(4):
        (src / f"shard-{i}.jsonl").write_text("".join(lines[i::4]))
    cfg = tmp / "small.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "name": "small",
                "reader": {
                    "class": "JsonlReader",
                    "params": {"paths": str(src), "files_per_partition": 1},
                },
                "stages": [{"class": "WordCountFilter", "params": {"min_words": 50}}],
                "writer": {
                    "class": "JsonlWriter",
                    "params": {"path": str(tmp / "out"), "mode": "overwrite"},
                },
            }
        )
    )
    return cfg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n-workers", type=int, default=2)
    ap.add_argument("--docs", type=int, default=2000)
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "curator_dask.cli"]
    with tempfile.TemporaryDirectory(prefix="bench_cli_") as tmp_name:
        tmp = Path(tmp_name)
        cfg = str(make_input(tmp, args.docs))
        cluster_run = [
            *cli,
            "run",
            cfg,
            "--n-workers",
            str(args.n_workers),
            "--local-directory",
            str(tmp / "scratch"),
        ]
        processes_env = {**env, "DASK_CURATOR__CLUSTER__PROCESSES": "true"}
        fuzzy_run = [
            *cli,
            "fuzzy-dedup",
            str(tmp / "in"),
            "--output",
            str(tmp / "fuzzy"),
            "--cache-dir",
            str(tmp / "fuzzy-cache"),
            "--perform-removal",
            "--n-workers",
            str(args.n_workers),
            "--local-directory",
            str(tmp / "scratch"),
        ]
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            "--help": ([*cli, "--help"], env),
            "argument error": ([*cli, "run"], env),
            "run --sequential": ([*cli, "run", cfg, "--sequential"], env),
            "cluster, processes": (cluster_run, processes_env),
            "cluster, auto": (cluster_run, env),
            "fuzzy-dedup, processes": (fuzzy_run, processes_env),
            "fuzzy-dedup, auto": (fuzzy_run, env),
        }
        rows = []
        for name, (cmd, case_env) in cases.items():
            runs = []
            for _ in range(args.repeat):
                for done in ("fuzzy", "fuzzy-cache"):  # a fresh dedup each time, not a resume
                    shutil.rmtree(tmp / done, ignore_errors=True)
                runs.append(measure(cmd, case_env))
            row = {
                "case": name,
                **{
                    k: round(statistics.median(r[k] for r in runs), 3)
                    for k in ("wall_s", "cpu_s", "peak_rss_mb")
                },
                "exits": [r["exit"] for r in runs],
                "noise": any("still alive" in r["stderr_tail"] for r in runs),
            }
            rows.append(row)
    by = {r["case"]: r for r in rows}
    seq, procs, auto = by["run --sequential"], by["cluster, processes"], by["cluster, auto"]
    keys = ("wall_s", "cpu_s", "peak_rss_mb")
    fixed = {row["case"]: {k: round(row[k] - seq[k], 3) for k in keys} for row in (procs, auto)}
    ratio = {k: round(auto[k] / procs[k], 3) if procs[k] else None for k in keys}
    f_procs, f_auto = by["fuzzy-dedup, processes"], by["fuzzy-dedup, auto"]
    fuzzy_ratio = {k: round(f_auto[k] / f_procs[k], 3) if f_procs[k] else None for k in keys}
    print(f"{'case':<24}{'wall s':>9}{'cpu s':>9}{'peak MB':>9}  exits  shutdown noise")
    for r in rows:
        print(
            f"{r['case']:<24}{r['wall_s']:>9.2f}{r['cpu_s']:>9.2f}{r['peak_rss_mb']:>9.0f}"
            f"  {r['exits']}  {'yes' if r['noise'] else 'no'}"
        )
    for name, cost in fixed.items():
        print(
            f"fixed cost, {name}: {cost['wall_s']:.2f} s wall, {cost['cpu_s']:.2f} CPU-s, "
            f"{cost['peak_rss_mb']:.0f} MB (minus --sequential, same run)"
        )
    print(
        f"cluster run, auto / processes: {ratio['wall_s']:.2f}x wall, {ratio['cpu_s']:.2f}x CPU, "
        f"{ratio['peak_rss_mb']:.2f}x peak memory"
    )
    print(
        f"fuzzy-dedup, auto / processes: {fuzzy_ratio['wall_s']:.2f}x wall, "
        f"{fuzzy_ratio['cpu_s']:.2f}x CPU, {fuzzy_ratio['peak_rss_mb']:.2f}x peak memory"
    )
    print(f"--help / python -c pass: {rows[1]['wall_s'] / rows[0]['wall_s']:.1f}x")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_cli.json"
    out.write_text(
        json.dumps(
            {
                "rows": rows,
                "fixed_cost": fixed,
                "auto_over_processes": ratio,
                "fuzzy_dedup_auto_over_processes": fuzzy_ratio,
                "machine": platform.platform(),
                "args": vars(args),
            },
            indent=2,
        )
    )
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
