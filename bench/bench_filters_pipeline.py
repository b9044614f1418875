"""Peak memory of a streaming filter pipeline as its one input file grows 4x (250 MB -> 1 GB).

Usage: ``python bench/bench_filters_pipeline.py [--sizes-mb 250 1000] [--n-workers 2]
[--memory-limit 1.5GB] [--out FILE]``

For every size, writes one JSONL file of that many bytes (the shipped sample's documents
repeated, each copy with a new id and a distinct first word, so nothing is a duplicate),
then runs the pipeline of NeMo Curator's measurement in issue 12 (Unicode and whitespace
normalisation, word count, repeated lines, duplicate 5-grams) in streaming mode on a
local cluster of worker processes with a memory limit, with the readers' default
blocksize (chosen from the workers' memory limit on the client, see
``curator_dask.config.default_blocksize``) and one partition in flight per worker
(``--max-in-flight``). A thread samples the summed resident memory
of this process and its children (scheduler, nannies, workers) every 50 ms. Prints the
peak per size, the ratio of the largest to the smallest (the target: at most 1.2), and
writes JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_pipeline import TreeMemorySampler  # noqa: E402
from curator_dask.cluster import ClusterConfig, get_client  # noqa: E402
from curator_dask.config import default_blocksize  # noqa: E402
from curator_dask.executor import DaskExecutor  # noqa: E402
from curator_dask.filters import (  # noqa: E402
    RepeatedLinesFilter,
    RepeatingDuplicateNGramsFilter,
    WordCountFilter,
)
from curator_dask.io import JsonlReader, JsonlWriter  # noqa: E402
from curator_dask.modifiers import UnicodeNormalizer, WhitespaceNormalizer  # noqa: E402
from curator_dask.pipeline import Pipeline  # noqa: E402

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


def run_once(
    src: Path, out: Path, config: ClusterConfig, max_in_flight: int | None
) -> dict[str, Any]:
    with TreeMemorySampler() as mem, get_client(config) as client:
        idle = TreeMemorySampler()._sample()
        blocksize = default_blocksize(client)
        pipeline = Pipeline("bench", [JsonlReader(str(src)), *stages(), JsonlWriter(str(out))])
        t0 = time.perf_counter()
        executor = DaskExecutor(client=client, progress=False, max_in_flight=max_in_flight)
        result = pipeline.run(executor, execution_mode="streaming")
        wall = time.perf_counter() - t0
    return {
        "input_mb": round(src.stat().st_size / 1e6, 1),
        "docs": result.read,
        "kept": result.kept,
        "partitions": result.partitions,
        "default_blocksize_mb": round(blocksize / 1e6, 1),
        "wall_s": round(wall, 1),
        "idle_cluster_mb": round(idle / 1e6),
        "peak_mb": round(mem.peak / 1e6),
        "peak_above_idle_mb": round((mem.peak - idle) / 1e6),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[250, 1000])
    ap.add_argument("--n-workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="1.5GB", help="per worker")
    ap.add_argument(
        "--max-in-flight",
        type=int,
        default=None,
        help="partitions in flight (default: one per worker; 0: curator.execution.max-in-flight)",
    )
    ap.add_argument("--out", default="bench_filters_pipeline.json")
    args = ap.parse_args()
    # One partition in flight per worker thread: the default blocksize is sized for that
    # (config.default_blocksize); the executor's own default is two per thread.
    in_flight = args.n_workers if args.max_in_flight is None else (args.max_in_flight or None)
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
            out = Path(tmp) / "out"
            rows.append(run_once(src, out, config, in_flight))
            shutil.rmtree(out, ignore_errors=True)
            src.unlink()
            r = rows[-1]
            print(
                f"{r['input_mb']:8.1f} MB {r['docs']:8d} docs {r['partitions']:4d} partitions "
                f"(blocksize {r['default_blocksize_mb']} MB)  {r['wall_s']:7.1f} s  "
                f"peak {r['peak_mb']} MB (idle cluster {r['idle_cluster_mb']} MB)",
                flush=True,
            )
    ratio = rows[-1]["peak_mb"] / rows[0]["peak_mb"]
    print(
        f"peak at {rows[-1]['input_mb']:.0f} MB / peak at {rows[0]['input_mb']:.0f} MB = "
        f"{ratio:.2f} (target <= 1.2); {args.n_workers} workers x 1 thread, "
        f"memory_limit {args.memory_limit} each, {in_flight or 'default'} partitions in flight"
    )
    report = {
        "cluster": {"n_workers": args.n_workers, "memory_limit": args.memory_limit},
        "max_in_flight": in_flight,
        "rows": rows,
        "peak_ratio": ratio,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
