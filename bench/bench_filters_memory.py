"""Peak memory of the default heuristic filter set on one partition, against its size.

Usage: ``python bench/bench_filters_memory.py [--sizes-mb 64 256 1024] [--peer-mb 16] [--out FILE]``

For every size, a fresh process builds one pandas partition of that many bytes of text
(the shipped sample's documents repeated, each copy made distinct so nothing is a
duplicate), then runs the 28 filters over it as a pipeline would (each filter sees the
survivors of the previous one), single thread, in two ways:

- *chain*: each filter's input is released once its output exists, as in the streaming
  executor's chain of tasks (dask drops a task's input when its only dependent is done);
- *held*: the partition stays referenced until the end (a caller holding the input).

The process runs with ``MALLOC_TRIM_THRESHOLD_=65536``, the setting dask's nanny gives
every worker (``distributed.nanny.pre-spawn-environ``), and Arrow on the system allocator,
so resident memory follows what is live. A sampling thread reads the process's resident
memory every 2 ms; the table shows the peak above the memory held before the partition
was built, as a multiple of the partition's bytes (the text column's Arrow buffers): the
partition itself counts 1. The peer is the vectorised kernels the fused ones replaced, at
``--peer-mb`` (they take minutes per 64 MB). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "curator_dask" / "data" / "sample.jsonl.gz"


def _child(size_mb: float, fused: bool, held: bool) -> dict:
    import gc

    import pandas as pd
    import psutil
    import pyarrow as pa
    import pyarrow.compute as pc

    from curator_dask import text as text_kit
    from curator_dask.filters import heuristic_filters

    pa.set_cpu_count(1)
    # The system allocator gives freed memory back, so RSS follows what is live.
    pa.set_memory_pool(pa.system_memory_pool())
    text_kit._FUSED = fused
    proc = psutil.Process()
    sample = pd.read_json(SAMPLE, lines=True)["text"]
    heuristic_filters()[0].score(sample.head(3))  # compile and build the tables first
    base = pa.array(sample, type=pa.large_string())
    copies = max(1, round(size_mb * 1e6 / base.nbytes))
    del sample
    gc.collect()
    before = proc.memory_info().rss
    # Prefix each copy with its number: no document repeats another.
    sep = pa.scalar("", pa.large_string())
    chunks = [
        pc.binary_join_element_wise(pa.scalar(f"{i} ", pa.large_string()), base, sep)
        for i in range(copies)
    ]
    text = pa.chunked_array(chunks).combine_chunks()
    del chunks
    part = pd.DataFrame({"text": pd.Series(text, dtype=text_kit.STR_DTYPE)})
    part_bytes = text.nbytes
    del text
    gc.collect()
    loaded = proc.memory_info().rss
    peak = loaded
    stop = threading.Event()

    def sample_rss() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    p = part
    documents = len(part)
    if not held:
        del part
    for f in heuristic_filters():
        p = f.process(p)
    seconds = time.perf_counter() - t0
    stop.set()
    sampler.join()
    return {
        "kernels": "fused" if fused else "vectorised",
        "input": "held" if held else "chain",
        "documents": documents,
        "partition_mb": part_bytes / 1e6,
        "loaded_over_partition": (loaded - before) / part_bytes,
        "peak_over_partition": (peak - before) / part_bytes,
        "peak_mb_above_start": (peak - before) / 1e6,
        "kept": len(p),
        "seconds": seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[64, 256])
    ap.add_argument("--held-max-mb", type=float, default=256, help="held runs up to this size")
    ap.add_argument("--peer-mb", type=float, default=16)
    ap.add_argument("--out", default="bench_filters_memory.json")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        size, fused, held = float(args.child[0]), args.child[1] == "fused", args.child[2] == "held"
        print(json.dumps(_child(size, fused, held)))
        return
    runs = []
    for s in args.sizes_mb:
        runs.append((s, "fused", "chain"))
        if s <= args.held_max_mb:
            runs.append((s, "fused", "held"))
    if args.peer_mb:
        runs = [(args.peer_mb, "vectorised", "chain"), (args.peer_mb, "fused", "chain"), *runs]
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    rows = []
    for size, kind, input_mode in runs:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(size), kind, input_mode],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"{r['kernels']:>10s} {r['input']:>5s} {r['partition_mb']:8.1f} MB  "
            f"{r['documents']:8d} docs  "
            f"peak {r['peak_mb_above_start']:8.0f} MB = {r['peak_over_partition']:5.2f}x "
            f"the partition  ({r['seconds']:.1f} s)",
            flush=True,
        )
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
