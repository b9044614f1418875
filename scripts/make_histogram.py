"""Write a character histogram for ``HistogramFilter(lang=...)`` from JSONL documents.

Usage::

    python scripts/make_histogram.py curator_dask/data/sample.jsonl.gz \\
        --sources janeausten sotu --out curator_dask/data/histogram_en.txt

One character per line, most frequent first, the characters that make up ``--coverage``
(0.999) of the non-whitespace characters (curator_dask.filters.content.character_histogram).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import fsspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curator_dask.filters.content import character_histogram


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="JSONL (.gz) with text and source fields")
    ap.add_argument("--sources", nargs="*", help="only documents of these sources")
    ap.add_argument("--coverage", type=float, default=0.999)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with fsspec.open(args.input, "rt", compression="infer", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    texts = [r["text"] for r in records if not args.sources or r.get("source") in args.sources]
    chars = character_histogram(texts, args.coverage)
    Path(args.out).write_text("".join(c + "\n" for c in chars), encoding="utf-8")
    print(f"{len(chars)} characters from {len(texts)} documents -> {args.out}")


if __name__ == "__main__":
    main()
