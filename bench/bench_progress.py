"""How often a pipeline run says how far it is: the gaps between its progress lines.

Usage: ``python bench/bench_progress.py [--docs 300000] [--out FILE]``

Writes one JSONL file of ``--docs`` documents (the shipped sample's documents repeated,
each copy with a new id and a distinct first word), then runs ``curator-dask run`` on it
in a subprocess at default settings (the CLI's local cluster, streaming; the stages of
``examples/pipeline.yaml``, JSONL out) with stderr piped, so progress comes as timestamped
lines. Each line is stamped when it arrives; prints the number of progress lines, the
longest gap between two of them (the target: at most ~5 s), the time from the start to
the first, the wall time, and writes JSON.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"


def make_input(path: Path, docs: int) -> int:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    with open(path, "w", encoding="utf-8") as out:
        for i in range(docs):
            rec = records[i % len(records)]
            copy = i // len(records)
            line = {**rec, "id": f"{rec['id']}#{copy}", "text": f"{copy} {rec['text']}"}
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=300_000)
    ap.add_argument("--out", default="bench_progress.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-progress-") as tmp:
        src = Path(tmp) / "in.jsonl"
        size = make_input(src, args.docs)
        cfg = Path(tmp) / "run.yaml"
        cfg.write_text(
            "name: progress\n"
            "reader:\n"
            "  class: JsonlReader\n"
            f"  params: {{paths: {json.dumps(str(src))}}}\n"
            "stages:\n"
            "  - class: UnicodeNormalizer\n"
            "  - class: WhitespaceNormalizer\n"
            "  - class: WordCountFilter\n"
            "    params: {min_words: 50}\n"
            "  - class: RepeatedLinesFilter\n"
            "  - class: RepeatingDuplicateNGramsFilter\n"
            "    params: {n: 5}\n"
            "writer:\n"
            "  class: JsonlWriter\n"
            f"  params: {{path: {json.dumps(str(Path(tmp) / 'out'))}}}\n"
            "execution: {mode: streaming}\n"
        )
        cmd = [sys.executable, "-m", "curator_dask.cli", "run", str(cfg)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
        stamps: list[tuple[float, str]] = []
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            stamps.append((time.perf_counter() - t0, line))
        rc = proc.wait()
        wall = time.perf_counter() - t0
    progress = [t for t, line in stamps if "%" in line and "/" in line]
    gaps = [b - a for a, b in itertools.pairwise(progress)]
    result = {
        "docs": args.docs,
        "input_mb": round(size / 1e6, 1),
        "exit": rc,
        "wall_s": round(wall, 1),
        "progress_lines": len(progress),
        "first_progress_s": round(progress[0], 1) if progress else None,
        "longest_gap_s": round(max(gaps), 1) if gaps else None,
        "stderr": [f"{t:7.1f}s {line}" for t, line in stamps],
    }
    for line in result["stderr"]:
        print(line)
    print(
        f"{args.docs} documents ({result['input_mb']} MB): exit {rc}, {wall:.1f} s wall, "
        f"{len(progress)} progress lines, first at {result['first_progress_s']} s, "
        f"longest gap {result['longest_gap_s']} s (target <= ~5 s)"
    )
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
