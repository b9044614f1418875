"""Peak memory of ``curator-dask run`` per busy worker and for the whole tree, 250 MB vs 1 GB.

The streaming pipeline of ``examples/pipeline.yaml`` (Unicode and whitespace normalisers,
three filters, the Parquet writer) at default settings on the command's default local
cluster (this machine's: worker processes for inputs this large), over synthetic JSONL
inputs of ``--sizes-mb`` (default 250 and 1,000 MB) in ``--files`` files (10): the shipped
sample's documents repeated, each copy with new ids and a number in front of its text, so
that nothing repeats. The inputs are written to a temporary directory and deleted after.

While a run goes, a thread reads the resident memory (RSS) of every process of the tree
(the command, its worker processes) every 50 ms with psutil. The cluster's worker processes
are the ones a worker preload the run is given (``distributed.worker.preload``) names as
they start (:data:`WORKER_PIDS_PRELOAD`); any other process of the tree (a process pool,
a worker's own children) counts in the tree only. Reported per run:

- ``tree peak MB``: the peak of the tree's summed RSS;
- ``partition MB``: the input's bytes on disk over the partitions the run made
  (``partitions`` in its ``_stats.json``): the JSONL bytes a partition was read from;
- ``worker peak / partition``: the highest worker's peak RSS less an idle worker's
  (``idle worker MB``: the highest worker peak of the same command on a 1 MB input, run on
  worker processes too, so with the libraries and kernels loaded and a tiny partition),
  over the partition's bytes. The issue's target is at most 3.

Usage::

    python bench/bench_memory_pipeline.py [--sizes-mb 250 1000] [--files 10]

Prints a table (and the 1 GB / 250 MB tree ratio, target at most 1.2) and writes
``bench/results/bench_memory_pipeline.json``. Needs about twice the largest size free in
the temporary directory (input plus output).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"
RESULTS = ROOT / "bench" / "results"


def make_input(dest: Path, size_mb: float, n_files: int) -> int:
    """Write ``size_mb`` MB of distinct JSONL documents into ``n_files`` files; return bytes."""
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    dest.mkdir(parents=True)
    written, copy, target = 0, 0, size_mb * 1e6
    with contextlib.ExitStack() as stack:
        files = [
            stack.enter_context(open(dest / f"part-{i:02d}.jsonl", "w", encoding="utf-8"))
            for i in range(n_files)
        ]
        while written < target:
            for j, rec in enumerate(records):
                line = json.dumps(
                    {**rec, "id": f"c{copy}-{rec['id']}", "text": f"{copy} {rec['text']}"},
                    ensure_ascii=False,
                )
                files[(copy * len(records) + j) % n_files].write(line + "\n")
                written += len(line.encode()) + 1
            copy += 1
    return written


def pipeline_file(tmp: Path, src: Path, out: Path) -> Path:
    text = (ROOT / "examples" / "pipeline.yaml").read_text()
    text = text.replace("paths: curator_dask/data/sample.jsonl.gz", f"paths: {src}")
    text = text.replace("path: out/sample-clean", f"path: {out}")
    path = tmp / f"{src.name}.yaml"
    path.write_text(text)
    return path


#: A dask worker preload that appends its worker's process id to ``$BENCH_WORKER_PIDS``.
WORKER_PIDS_PRELOAD = """\
import os


def dask_setup(worker):
    with open(os.environ["BENCH_WORKER_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\\n")
"""


def run_measured(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """Run ``cmd``; peak summed RSS of its tree and each worker process's peak RSS (the
    cluster's worker processes: those :data:`WORKER_PIDS_PRELOAD` names)."""
    preload, pids = cwd / "bench_worker_pids.py", cwd / "bench_worker_pids.txt"
    preload.write_text(WORKER_PIDS_PRELOAD)
    pids.write_text("")
    env = {
        **env,
        "BENCH_WORKER_PIDS": str(pids),
        "DASK_DISTRIBUTED__WORKER__PRELOAD": json.dumps([str(preload)]),
    }
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    root = psutil.Process(proc.pid)
    tree_peak = 0
    peak: dict[int, int] = {}  # every process of the tree but the command's
    stop = threading.Event()

    def sample() -> None:
        nonlocal tree_peak
        while not stop.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    rss = p.memory_info().rss
                except psutil.Error:
                    continue
                total += rss
                if p.pid != root.pid:
                    peak[p.pid] = max(peak.get(p.pid, 0), rss)
            tree_peak = max(tree_peak, total)
            stop.wait(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    _, err = proc.communicate()
    stop.set()
    thread.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode(errors='replace')[-2000:]}")
    workers = {int(line) for line in pids.read_text().split()} - {root.pid}  # not threads
    worker_peak = {pid: rss for pid, rss in peak.items() if pid in workers}
    return {
        "wall_s": time.perf_counter() - t0,
        "tree_peak_mb": tree_peak / 1e6,
        "worker_peaks_mb": sorted((v / 1e6 for v in worker_peak.values()), reverse=True),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[250, 1000])
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--tmp", help="directory for the inputs and outputs (default: $TMPDIR)")
    args = ap.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(":")
    cli = [sys.executable, "-m", "curator_dask.cli", "run"]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_memory_pipeline_", dir=args.tmp) as name:
        tmp = Path(name)
        # an idle worker: the same command on 1 MB, on worker processes as the large runs are
        src = tmp / "in-idle"
        make_input(src, 1, 2)
        idle_env = {**env, "DASK_CURATOR__CLUSTER__THREADS_BELOW": "1"}
        idle = run_measured([*cli, str(pipeline_file(tmp, src, tmp / "out-idle"))], idle_env, tmp)
        idle_mb = max(idle["worker_peaks_mb"] or [0.0])
        shutil.rmtree(src)
        for size in args.sizes_mb:
            src, out = tmp / f"in-{size:g}", tmp / f"out-{size:g}"
            nbytes = make_input(src, size, args.files)
            run = run_measured([*cli, str(pipeline_file(tmp, src, out))], env, tmp)
            stats = json.loads((Path(f"{out}.curator") / "_stats.json").read_text())
            part_mb = nbytes / 1e6 / max(1, stats["partitions"])
            busiest = max(run["worker_peaks_mb"] or [0.0])
            rows.append(
                {
                    "input_mb": round(nbytes / 1e6, 1),
                    "documents": stats["read"],
                    "partitions": stats["partitions"],
                    "partition_mb": round(part_mb, 1),
                    "workers": len(run["worker_peaks_mb"]),
                    "wall_s": round(run["wall_s"], 1),
                    "tree_peak_mb": round(run["tree_peak_mb"]),
                    "worker_peaks_mb": [round(w) for w in run["worker_peaks_mb"]],
                    "idle_worker_mb": round(idle_mb),
                    "worker_peak_over_partition": round((busiest - idle_mb) / part_mb, 2),
                }
            )
            shutil.rmtree(src)
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(Path(f"{out}.curator"), ignore_errors=True)
    print(
        f"{'input MB':>9}{'docs':>10}{'parts':>7}{'part MB':>9}{'workers':>8}{'wall s':>8}"
        f"{'tree peak MB':>14}{'worker peaks MB':>18}{'idle MB':>9}{'peak/part':>11}"
    )
    for r in rows:
        peaks = "/".join(str(w) for w in r["worker_peaks_mb"])
        print(
            f"{r['input_mb']:>9.0f}{r['documents']:>10,}{r['partitions']:>7}{r['partition_mb']:>9.1f}"
            f"{r['workers']:>8}{r['wall_s']:>8.1f}{r['tree_peak_mb']:>14,}{peaks:>18}"
            f"{r['idle_worker_mb']:>9}{r['worker_peak_over_partition']:>11.2f}"
        )
    if len(rows) >= 2:
        ratio = rows[-1]["tree_peak_mb"] / rows[0]["tree_peak_mb"]
        print(
            f"tree peak, {rows[-1]['input_mb']:.0f} MB / {rows[0]['input_mb']:.0f} MB: "
            f"{ratio:.2f}x (target at most 1.2)"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (the box may be shared)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_json = RESULTS / "bench_memory_pipeline.json"
    out_json.write_text(
        json.dumps({"rows": rows, "machine": platform.platform(), "args": vars(args)}, indent=2)
    )
    print(f"results: {out_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
