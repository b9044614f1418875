"""First-run kernel compile time of ``curator-dask demo`` (what ``make demo`` runs).

A fresh install has no numba cache: every kernel the demo calls compiles once, on the
first call. Each case runs the demo in a fresh process pinned to one core (``taskset -c 0``
where there is one, ``NUMBA_NUM_THREADS=1``) with ``NUMBA_CACHE_DIR`` and
``DASK_CURATOR__CACHE_DIR`` pointing at empty directories, on a client whose one worker is
a thread of that process, so every compile happens where a listener on numba's
``numba:compile`` event (:mod:`numba.core.event`) sees it. The listener sums the outermost
events of each thread (a kernel's compile includes the helpers it calls), as CPU seconds of
that thread and as wall seconds, per kernel. The C kernels' build (``_ckernels``, where
the code base has them) counts as one more, with the compiler's CPU seconds (the process's
children's). A second run with the same, now warm, caches shows what a later run pays
(loading, not compiling).

With ``--baseline DIR`` (another checkout, e.g. ``git worktree add --detach /tmp/base
main``) the same two runs with that checkout's code, in the same run: the peer.

Usage::

    python bench/bench_compile.py [--baseline DIR] [--top 12]

Prints a table and writes ``bench/results/bench_compile.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import write_results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

_CHILD = r"""
import json, sys, threading, time
import numba.core.event as ev

class Compiles(ev.Listener):
    def __init__(self):
        self.local = threading.local()
        self.kernels = {}

    def on_start(self, event):
        depth = getattr(self.local, "depth", 0)
        if depth == 0:
            d = event.data["dispatcher"]
            self.local.name = f"{d.py_func.__module__}.{d.py_func.__qualname__}"
            self.local.t = (time.thread_time(), time.perf_counter())
        self.local.depth = depth + 1

    def on_end(self, event):
        self.local.depth -= 1
        if self.local.depth == 0:
            cpu0, wall0 = self.local.t
            k = self.kernels.setdefault(self.local.name, [0, 0.0, 0.0])
            k[0] += 1
            k[1] += time.thread_time() - cpu0
            k[2] += time.perf_counter() - wall0

compiles = Compiles()
ev.register("numba:compile", compiles)
try:  # the C kernels' build (a code base that has them): the compiler's CPU is its children's
    import os, resource
    from curator_dask import _ckernels
    build = _ckernels._build

    def timed_build(cc, path):
        r0, c0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.thread_time()
        w0 = time.perf_counter()
        try:
            return build(cc, path)
        finally:
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
            name = f"C kernels ({os.path.basename(cc)})"
            k = compiles.kernels.setdefault(name, [0, 0.0, 0.0])
            k[0] += 1
            k[1] += cpu + time.thread_time() - c0
            k[2] += time.perf_counter() - w0

    _ckernels._build = timed_build
except ImportError:
    pass
c0 = time.process_time()
w0 = time.perf_counter()
from distributed import Client
from curator_dask.demo import run_demo
with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
    summary = run_demo(sys.argv[1], client=client)
out = {
    "process_cpu_s": time.process_time() - c0,
    "wall_s": time.perf_counter() - w0,
    "kept": summary["kept"],
    "balanced": summary["balanced"],
    "kernels": compiles.kernels,
}
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""


def _run(code: Path, scratch: Path, caches: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_OPT")}
    env.update(
        PYTHONPATH=str(code),
        NUMBA_CACHE_DIR=str(caches / "numba"),
        DASK_CURATOR__CACHE_DIR=str(caches / "curator"),
        NUMBA_NUM_THREADS="1",
        DASK_CURATOR__EXECUTION__PROGRESS="false",
    )
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    result = scratch / "result.json"
    cmd = [*pin, sys.executable, "-c", _CHILD, str(scratch / "demo"), str(result)]
    subprocess.run(cmd, env=env, cwd=scratch, check=True, stdout=subprocess.DEVNULL)
    with open(result) as f:
        out: dict[str, Any] = json.load(f)
    kernels = out.pop("kernels")
    out["compile_cpu_s"] = sum(k[1] for k in kernels.values())
    out["compile_wall_s"] = sum(k[2] for k in kernels.values())
    out["compiles"] = sum(k[0] for k in kernels.values())
    out["kernels"] = {
        name: {"compiles": k[0], "cpu_s": round(k[1], 3), "wall_s": round(k[2], 3)}
        for name, k in sorted(kernels.items(), key=lambda kv: -kv[1][1])
    }
    return out


def measure(code: Path) -> dict[str, Any]:
    """The demo with ``code`` on its path: a first run on empty caches, then a warm one."""
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp:
        caches = Path(tmp) / "caches"
        cold = _run(code, Path(tmp), caches)
        shutil.rmtree(Path(tmp) / "demo")
        warm = _run(code, Path(tmp), caches)
    return {"code": str(code), "cold": cold, "warm": warm}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="another checkout, run as the peer")
    ap.add_argument("--top", type=int, default=12, help="kernels listed per code base")
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_compile.json")
    args = ap.parse_args(argv)
    cases = [("this checkout", ROOT)]
    if args.baseline:
        cases.append(("baseline", args.baseline.resolve()))
    t0 = time.perf_counter()
    results = {label: measure(code) for label, code in cases}
    head = f"{'code':<15}{'caches':<8}{'compile CPU s':>15}{'wall s':>9}{'kernels':>9}"
    print(f"\n{head}{'demo CPU s':>12}{'demo wall s':>13}{'kept':>7}")
    for label, r in results.items():
        for state in ("cold", "warm"):
            c = r[state]
            print(
                f"{label:<15}{state:<8}{c['compile_cpu_s']:>15.2f}{c['compile_wall_s']:>9.2f}"
                f"{c['compiles']:>9}{c['process_cpu_s']:>12.1f}{c['wall_s']:>13.1f}{c['kept']:>7}"
            )
    for label, r in results.items():
        print(f"\n{label}: first-run compile CPU s per kernel (outermost compiles)")
        for name, k in list(r["cold"]["kernels"].items())[: args.top]:
            print(f"  {name:<60}{k['cpu_s']:>8.2f}")
    if len(results) == 2:
        ours, base = (results[k]["cold"]["compile_cpu_s"] for k in ("this checkout", "baseline"))
        print(f"\nfirst-run compile: {ours:.2f} CPU s vs baseline {base:.2f} ({ours / base:.2f}x)")
    write_results(args.out, {"seconds": round(time.perf_counter() - t0, 1), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
