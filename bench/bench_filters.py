"""Throughput of the default heuristic filter set, single thread, on one partition.

Usage: ``python bench/bench_filters.py [--input PATH | --multilingual N] [--limit N]
[--repeat N] [--no-vectorised] [--out FILE]``

Reads the shipped sample (or ``--input``, a JSONL file; or ``--multilingual N``: N
documents of 200-1,200 characters made of the example sentences spaCy ships in 60-odd
languages, as ``bench_minhash.py`` builds them) into one pandas partition and times, with
the fused kernels and then with the vectorised kernels they replaced (the peer, same run,
same partition; ``--no-vectorised`` leaves them out):

- *each filter alone*: one filter scoring every document, nothing cached;
- *all filters, every document*: the 28 filters scoring the whole partition, one after
  the other (the shared measures computed once);
- *pipeline*: the set applied as a streaming run applies it (the executor's stage task
  per filter, with its statistics): each filter sees the survivors of the previous one
  through a running mask, and the kept rows are copied once, at the end.

Times are CPU seconds of this process (the box may be shared; wall time would count
other people's work), best of ``--repeat``; rates are documents per CPU-second. Caches are
cleared before every timed run. When datatrove is installed (with spaCy, its English word
tokenizer) its Gopher quality, Gopher repetition and C4 filters are timed on the same
documents, each alone and as a pipeline (its own definitions, so the kept counts differ).
Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from curator_dask import text as text_kit
from curator_dask.executor import _tasks
from curator_dask.filters import heuristic_filters

SAMPLE = Path(__file__).resolve().parent.parent / "curator_dask" / "data" / "sample.jsonl.gz"


def _time(fn: Callable[[], Any], repeat: int) -> float:
    """CPU seconds of this process for ``fn`` (the best of ``repeat``), caches cleared.

    The box is shared, so wall time counts other people's work; the process's CPU time
    (single-threaded here: Arrow and numba use one thread) does not.
    """
    best = float("inf")
    for _ in range(repeat):
        text_kit.clear_measures()
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def _wall(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call of ``fn``, caches cleared."""
    text_kit.clear_measures()
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def _run(part: pd.DataFrame, repeat: int, fused: bool) -> dict[str, Any]:
    text_kit._FUSED = fused
    filters = heuristic_filters()
    text = part["text"]
    per_filter = {
        f.stage_name: _time(lambda f=f: f.keep_score(f.score(text)), repeat) for f in filters
    }

    def score_all() -> None:
        for f in filters:
            f.keep_score(f.score(text))

    def pipeline() -> int:
        carry = _tasks.Carry(0, part, None)
        for f in filters:
            carry = _tasks.stage_task(f, carry)
        return len(carry.materialised().part)

    kept = pipeline()
    wall, cpu = _wall(pipeline)
    return {
        "per_filter_seconds": per_filter,
        "all_filters_seconds": _time(score_all, repeat),
        "pipeline_seconds": _time(pipeline, repeat),
        "pipeline_once_wall_seconds": wall,
        "pipeline_once_cpu_seconds": cpu,
        "pipeline_kept": kept,
    }


def _datatrove(part: pd.DataFrame, repeat: int) -> dict[str, Any] | None:
    """CPU seconds of datatrove's Gopher and C4 filters on the same documents.

    Its English word tokenizer is spaCy's blank ``en`` pipeline (offline, no model); its
    C4 filter rewrites ``doc.text``, so every run gets fresh documents.
    """
    try:
        from datatrove.data import Document
        from datatrove.pipeline.filters import (
            C4QualityFilter,
            GopherQualityFilter,
            GopherRepetitionFilter,
        )
    except ImportError:
        return None
    texts = part["text"].tolist()
    filters = {
        "GopherRepetitionFilter": GopherRepetitionFilter(),
        "GopherQualityFilter": GopherQualityFilter(),
        "C4QualityFilter": C4QualityFilter(filter_no_terminal_punct=False),
    }

    def docs() -> list[Any]:
        return [Document(text=t, id=str(i)) for i, t in enumerate(texts)]

    def keeps(result: Any) -> bool:
        return bool(result[0] if isinstance(result, tuple) else result)

    def timed(run: Callable[[list[Any]], Any]) -> tuple[float, Any]:
        best, out = float("inf"), None
        for _ in range(repeat):
            batch = docs()
            c0 = time.process_time()
            out = run(batch)
            best = min(best, time.process_time() - c0)
        return best, out

    out: dict[str, Any] = {}
    try:
        for f in filters.values():  # load the tokenizer before timing
            f.filter(docs()[0])
        for name, f in filters.items():
            out[name], _ = timed(lambda batch, f=f: [f.filter(d) for d in batch])

        def pipeline(batch: list[Any]) -> int:
            for f in filters.values():
                batch = [d for d in batch if keeps(f.filter(d))]
            return len(batch)

        out["pipeline_seconds"], out["pipeline_kept"] = timed(pipeline)
    except Exception as exc:  # e.g. a tokenizer that needs data from the network
        return {"error": f"{type(exc).__name__}: {exc}"}
    out["all_seconds"] = sum(out[name] for name in filters)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(SAMPLE))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=int, help="only the first N documents of --input")
    ap.add_argument("--multilingual", type=int, metavar="N", help="N multilingual documents")
    ap.add_argument("--no-vectorised", action="store_true", help="skip the vectorised peer")
    ap.add_argument("--out", default="bench_filters.json")
    args = ap.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    if args.multilingual:
        from bench_minhash import multilingual_docs

        part = pd.DataFrame({"text": multilingual_docs(args.multilingual)})
        args.input = f"multilingual ({args.multilingual} documents)"
    else:
        part = pd.read_json(args.input, lines=True, nrows=args.limit)[["text"]]
    part["text"] = part["text"].astype(text_kit.STR_DTYPE)
    n, mb = len(part), part["text"].str.len().sum() / 1e6
    heuristic_filters()[0].score(part["text"].head(2))  # compile the kernels first

    fused = _run(part, args.repeat, fused=True)
    vectorised = fused if args.no_vectorised else _run(part, args.repeat, fused=False)
    text_kit._FUSED = True
    assert fused["pipeline_kept"] == vectorised["pipeline_kept"], "kernels disagree"
    peer = _datatrove(part, args.repeat)

    print(
        f"{args.input}: {n} documents, {mb:.1f} M characters, single thread, CPU seconds "
        f"of this process (best of {args.repeat}); docs/s = documents per CPU-second"
    )
    print(f"{'filter':36s} {'fused s':>8s} {'docs/s':>9s} {'vector s':>9s} {'speedup':>8s}")
    for name, sec in fused["per_filter_seconds"].items():
        old = vectorised["per_filter_seconds"][name]
        print(f"{name:36s} {sec:8.3f} {n / sec:9.0f} {old:9.3f} {old / sec:7.1f}x")
    for label, key in (
        ("all filters, every document", "all_filters_seconds"),
        ("pipeline (survivors only)", "pipeline_seconds"),
    ):
        sec, old = fused[key], vectorised[key]
        print(f"{label:36s} {sec:8.3f} {n / sec:9.0f} {old:9.3f} {old / sec:7.1f}x")
    print(
        f"pipeline once, fused: {fused['pipeline_once_wall_seconds']:.3f} s wall, "
        f"{fused['pipeline_once_cpu_seconds']:.3f} s CPU (the box is shared)"
    )
    print(f"kept by the pipeline: {fused['pipeline_kept']} (both kernels)")
    if peer is None:
        print("datatrove: not installed (pip install datatrove spacy to compare)")
    elif "error" in peer:
        print(f"datatrove: could not run ({peer['error']})")
    else:
        for name in ("GopherRepetitionFilter", "GopherQualityFilter", "C4QualityFilter"):
            sec = peer[name]
            print(f"datatrove {name:26s} {sec:8.3f} {n / sec:9.0f}")
        for label, ours, theirs in (
            ("every document", fused["all_filters_seconds"], peer["all_seconds"]),
            ("pipeline", fused["pipeline_seconds"], peer["pipeline_seconds"]),
        ):
            print(
                f"{label}: our 28 filters {n / ours:,.0f} docs/s, datatrove Gopher + C4 "
                f"{n / theirs:,.0f} docs/s: {theirs / ours:.1f}x"
            )
        print(f"datatrove's pipeline kept {peer['pipeline_kept']} (its own definitions)")
    result = {
        "input": args.input,
        "documents": n,
        "characters_millions": mb,
        "cpu_count": os.cpu_count(),
        "fused": fused,
        "vectorised": vectorised,
        "timing": "CPU seconds of the process, single thread",
        "all_filters_docs_per_s": n / fused["all_filters_seconds"],
        "pipeline_docs_per_s": n / fused["pipeline_seconds"],
        "vectorised_pipeline_docs_per_s": n / vectorised["pipeline_seconds"],
        "speedup_pipeline": vectorised["pipeline_seconds"] / fused["pipeline_seconds"],
        "datatrove": peer,
    }
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
