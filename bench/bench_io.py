"""Throughput of the JSONL reader and the writers on one partition.

Usage: ``python bench/bench_io.py [--input PATH] [--repeat N] [--threads N] [--out FILE]``

Decompresses the input (default: the shipped sample; any ``.jsonl`` or ``.jsonl.gz``) to a
temporary plain file, then times, best of ``--repeat``:

- the reader's parse of the whole plain file as one partition (the vectorised path);
- the same with one bad line in every 1,000 (the path that looks for culprits);
- reading the gzipped file (decompression + parse);
- baselines: ``json.loads`` per line, ``pandas.read_json(lines=True)``;
- ``JsonlWriter`` and ``ParquetWriter`` on the parsed partition.

MB/s are of uncompressed JSONL bytes. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa

from curator_dask.io import JsonlReader, JsonlWriter, ParquetWriter

SAMPLE = Path(__file__).resolve().parent.parent / "curator_dask" / "data" / "sample.jsonl.gz"


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _read_all(path: str) -> int:
    reader = JsonlReader(path, blocksize="4GB")
    return sum(reader.read_partition(s).docs_read for s in reader.partitions())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(SAMPLE))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="pyarrow threads (0: its default)")
    ap.add_argument("--out", default="bench/results/bench_io.json")
    args = ap.parse_args()
    if args.threads:
        pa.set_cpu_count(args.threads)

    tmp = Path(tempfile.mkdtemp(prefix="bench_io_"))
    try:
        plain = tmp / "input.jsonl"
        opener = gzip.open if args.input.endswith(".gz") else open
        with opener(args.input, "rb") as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        gz = tmp / "input.jsonl.gz"
        if args.input.endswith(".gz"):
            shutil.copy(args.input, gz)
        else:
            gz.write_bytes(gzip.compress(plain.read_bytes()))
        body = plain.read_bytes()
        lines = body.splitlines(keepends=True)
        bad = tmp / "bad.jsonl"
        bad.write_bytes(
            b"".join(b"{broken\n" if i % 1000 == 999 else x for i, x in enumerate(lines))
        )
        mb = len(body) / 1e6
        n_docs = _read_all(str(plain))

        rows: dict[str, float] = {}
        rows["read plain JSONL (vectorised)"] = _best(lambda: _read_all(str(plain)), args.repeat)
        rows["read with 0.1% bad lines"] = _best(lambda: _read_all(str(bad)), args.repeat)
        rows["read gzipped JSONL"] = _best(lambda: _read_all(str(gz)), args.repeat)
        rows["baseline: json.loads per line"] = _best(
            lambda: [json.loads(x) for x in lines], args.repeat
        )
        rows["baseline: pandas.read_json(lines=True)"] = _best(
            lambda: pd.read_json(plain, lines=True), args.repeat
        )
        reader = JsonlReader(str(plain), blocksize="4GB")
        part = reader.read_partition(reader.partitions()[0]).data
        for cls in (JsonlWriter, ParquetWriter):
            writer = cls(str(tmp / cls.__name__))
            writer.begin()
            rows[f"write {cls.__name__}"] = _best(
                lambda w=writer: w.write_partition(part, 0), args.repeat
            )

        print(
            f"{n_docs} documents, {mb:.1f} MB of JSONL, pyarrow threads "
            f"{pa.cpu_count()}, best of {args.repeat}"
        )
        print(f"{'operation':42s} {'seconds':>8s} {'MB/s':>8s}")
        for name, sec in rows.items():
            print(f"{name:42s} {sec:8.3f} {mb / sec:8.0f}")
        result = {
            "input": os.path.basename(args.input),
            "documents": n_docs,
            "megabytes": round(mb, 2),
            "pyarrow_threads": pa.cpu_count(),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "seconds": {k: round(v, 4) for k, v in rows.items()},
            "mb_per_s": {k: round(mb / v, 1) for k, v in rows.items()},
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
