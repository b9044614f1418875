"""Peak memory of the default heuristic filter set on one partition, against its size.

Usage: ``python bench/bench_filters_memory.py [--sizes-mb 64 256] [--peer-mb 16] [--out FILE]``

For every size, a fresh process builds one pandas partition of that many bytes of text
(the shipped sample's documents repeated, each copy made distinct so nothing is a
duplicate), then runs the 28 filters over it as a pipeline would (each filter sees the
survivors of the previous one), single thread. A sampling thread reads the process's
resident memory every 2 ms; the table shows the peak above the memory held before the
partition was built, as a multiple of the partition's bytes (the text column's Arrow
buffers). The peer is the vectorised kernels the fused ones replaced, at ``--peer-mb``
(they take minutes per 64 MB). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "curator_dask" / "data" / "sample.jsonl.gz"


def _child(size_mb: float, fused: bool) -> dict:
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
    for f in heuristic_filters():
        p = f.process(p)
    seconds = time.perf_counter() - t0
    stop.set()
    sampler.join()
    return {
        "kernels": "fused" if fused else "vectorised",
        "documents": len(part),
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
    ap.add_argument("--peer-mb", type=float, default=16)
    ap.add_argument("--out", default="bench_filters_memory.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        size, fused = float(args.child[0]), args.child[1] == "fused"
        print(json.dumps(_child(size, fused)))
        return
    runs = [(s, "fused") for s in args.sizes_mb]
    if args.peer_mb:
        runs = [(args.peer_mb, "vectorised"), (args.peer_mb, "fused"), *runs]
    rows = []
    for size, kind in runs:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(size), kind],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"{r['kernels']:>10s} {r['partition_mb']:8.1f} MB  {r['documents']:8d} docs  "
            f"peak {r['peak_mb_above_start']:8.0f} MB = {r['peak_over_partition']:5.2f}x "
            f"the partition  ({r['seconds']:.1f} s)",
            flush=True,
        )
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
