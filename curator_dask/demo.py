"""The demo job: a full curation pipeline on the sample corpus shipped in the package.

``curator-dask demo --output out/demo`` (what ``make demo`` runs) does, on a local cluster:

1. write the shipped sample as plain JSONL, plus a small file of deliberately broken records
   (so the quarantine is visible), under ``<output>/input/``;
2. a :class:`~curator_dask.pipeline.Pipeline`: read with ``blocksize`` (the 8 MB file is split
   into byte ranges), Unicode NFKC and whitespace normalisation, the default heuristic
   filters, Parquet writer -> ``<output>/filtered/``;
3. exact deduplication -> ``<output>/exact/`` (``removed_ids/``, ``deduplicated/``);
4. fuzzy deduplication (word 5-grams, candidate check) -> ``<output>/fuzzy/``;
5. ``<output>/summary.json`` with the accounting ``read = kept + removed + quarantined``, and
   the pipeline's HTML report ``<output>/filtered.curator/_report.html``.

Everything it writes is under ``output``. A second run removes what the first one wrote (the
entries listed in ``<output>/.curator-demo``) and nothing else; a non-empty ``output`` that
holds no such list is refused.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parent / "data" / "sample.jsonl.gz"

#: Records that are broken on purpose, each for a different reason the reader quarantines.
BROKEN_RECORDS = (
    b'{"id": "broken-json", "text": "a line cut in the middle\n',
    b'{"id": "no-text", "body": "the text field is missing"}\n',
    b'{"id": "not-a-string", "text": 42}\n',
    b'{"id": "bad-utf8", "text": "caf\xc3\x28 au lait"}\n',
)


def _count_parquet_rows(path: str) -> int:
    files = sorted(Path(path).glob("*.parquet"))
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def prepare_input(output: str) -> str:
    """Write the demo input under ``<output>/input/``; return that directory."""
    inp = os.path.join(output, "input")
    os.makedirs(inp, exist_ok=True)
    with gzip.open(SAMPLE, "rb") as src, open(os.path.join(inp, "sample.jsonl"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    with open(os.path.join(inp, "broken.jsonl"), "wb") as f:
        f.writelines(BROKEN_RECORDS)
    return inp


#: What the demo writes under its output directory (and removes again on a rerun).
DEMO_ENTRIES = ("input", "filtered", "exact", "fuzzy", "cache", "summary.json")
_MARKER = ".curator-demo"


def clear_previous_run(output: str) -> None:
    """Remove what an earlier demo run wrote in ``output``, and nothing else.

    Raises ``FileExistsError`` for a non-empty directory that no demo run wrote (no
    ``.curator-demo`` list, no demo ``summary.json``).
    """
    if not os.path.isdir(output) or not os.listdir(output):
        return
    marker = os.path.join(output, _MARKER)
    if os.path.exists(marker):
        with open(marker) as f:
            entries = [e for e in json.load(f) if e in DEMO_ENTRIES]
    elif _is_old_demo(output):
        entries = list(DEMO_ENTRIES)  # written by a version without the list
    else:
        raise FileExistsError(
            f"demo: {output} is not empty and was not written by the demo; give a new or "
            "empty directory with --output (the demo removes only what it wrote)"
        )
    for name in entries:
        path = os.path.join(output, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)


def _is_old_demo(output: str) -> bool:
    try:
        with open(os.path.join(output, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and {"read", "kept", "balanced"} <= set(summary)


def run_demo(output: str, client: Any = None, blocksize: str = "1MB") -> dict[str, Any]:
    """Run the demo job (see the module docstring); return the summary it writes.

    Parameters
    ----------
    output : str
        Directory for everything the demo writes (what an earlier demo run wrote there is
        removed first; nothing else is).
    client : distributed.Client, optional
        Where to run; default a local cluster from ``curator.cluster.*``.
    blocksize : str
        Partition size of the reader.
    """
    import dask

    from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
    from curator_dask.executor import DaskExecutor
    from curator_dask.filters import heuristic_filters
    from curator_dask.io import JsonlReader, ParquetWriter
    from curator_dask.modifiers import UnicodeNormalizer, WhitespaceNormalizer
    from curator_dask.pipeline import Pipeline

    output = os.path.abspath(output)
    clear_previous_run(output)
    os.makedirs(output, exist_ok=True)
    with open(os.path.join(output, _MARKER), "w") as f:
        json.dump(list(DEMO_ENTRIES), f)
    t0 = time.perf_counter()
    inp = prepare_input(output)
    pipeline = Pipeline(
        "demo",
        [
            JsonlReader(inp, blocksize=blocksize),
            UnicodeNormalizer(form="NFKC"),
            WhitespaceNormalizer(),
            *heuristic_filters(),
            ParquetWriter(os.path.join(output, "filtered")),
        ],
    )
    print(pipeline)
    # the demo also renders the run's HTML report (funnel, time per stage, memory over time)
    with dask.config.set({"curator.monitoring.report": True}):
        result = pipeline.run(executor=DaskExecutor(client=client))
    print(result)

    exact = ExactDeduplicationWorkflow(
        input_path=os.path.join(output, "filtered"),
        output_path=os.path.join(output, "exact"),
        perform_removal=True,
        client=client,
    ).run()
    fuzzy = FuzzyDeduplicationWorkflow(
        input_path=exact["deduplicated"],
        cache_path=os.path.join(output, "cache"),
        output_path=os.path.join(output, "fuzzy"),
        char_ngrams=None,
        word_ngrams=5,
        false_positive_check=True,
        perform_removal=True,
        client=client,
    ).run()

    kept = _count_parquet_rows(fuzzy["deduplicated"])
    removed = {
        "filters": result.removed,
        "exact_duplicates": int(exact["removed"]),
        "fuzzy_duplicates": int(fuzzy["removed"]),
    }
    summary: dict[str, Any] = {
        "read": result.read,
        "quarantined": result.quarantined,
        "removed": removed,
        "kept": kept,
        "balanced": result.read == kept + sum(removed.values()) + result.quarantined,
        "output": fuzzy["deduplicated"],
        "quarantine": ParquetWriter(os.path.join(output, "filtered")).layout.quarantine_dir,
        "report": ParquetWriter(os.path.join(output, "filtered")).layout.report_path,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    with open(os.path.join(output, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    _print_summary(summary)
    if not summary["balanced"]:
        raise RuntimeError(f"demo: documents not accounted for: {summary}")
    return summary


def _print_summary(s: dict[str, Any]) -> None:
    rows = [
        ("read", s["read"]),
        ("quarantined (broken input)", s["quarantined"]),
        ("removed by heuristic filters", s["removed"]["filters"]),
        ("removed as exact duplicates", s["removed"]["exact_duplicates"]),
        ("removed as fuzzy duplicates", s["removed"]["fuzzy_duplicates"]),
        ("kept", s["kept"]),
    ]
    print("\ncuration summary")
    for label, n in rows:
        print(f"  {label:<32}{n:>8,}")
    ok = "ok" if s["balanced"] else "MISMATCH"
    print(f"  read = kept + removed + quarantined: {ok}")
    print(f"  kept documents: {s['output']}")
    print(f"  quarantined records: {s['quarantine']}")
    print(f"  pipeline report: {s['report']}")
    print(f"  {s['seconds']} s")


DEMO_HELP = """\
Run a full curation job on the sample corpus shipped with curator_dask, on a local cluster:

1. write the sample as JSONL plus a few deliberately broken records (to show the quarantine)
   under OUTPUT/input/;
2. a pipeline: read in byte ranges of --blocksize, Unicode NFKC and whitespace normalisation,
   the default heuristic filters, Parquet -> OUTPUT/filtered/ (with _report.html);
3. exact deduplication -> OUTPUT/exact/;
4. fuzzy deduplication (word 5-grams, candidate check) -> OUTPUT/fuzzy/;
5. OUTPUT/summary.json with the accounting read = kept + removed + quarantined.

Everything goes under OUTPUT; a second run starts afresh.
"""


def register(
    subparsers: Any,
    add_cluster_args: Callable[[argparse.ArgumentParser], Any],
    client_from_args: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``curator-dask demo`` to the command line."""
    p = subparsers.add_parser(
        "demo",
        help="run a full curation pipeline on the shipped sample corpus",
        description=DEMO_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--output", default="out/demo", help="directory for everything written")
    p.add_argument("--blocksize", default="1MB", help="reader partition size")
    add_cluster_args(p)

    def _run(args: argparse.Namespace) -> int:
        from curator_dask.cluster import dashboard_link

        with client_from_args(args) as client:
            link = dashboard_link(client)
            if link:
                print(f"dashboard: {link}")
            run_demo(args.output, client=client, blocksize=args.blocksize)
        return 0

    p.set_defaults(func=_run)
