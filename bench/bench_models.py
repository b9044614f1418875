"""Model inference throughput on the CPU: documents per second of the model stages.

Documents: a seeded random sample of ``--docs`` documents from the public corpus
(``../shared/data/public_corpus.jsonl.gz``, else the shipped sample), so the length mix is
the corpus' own (short API entries next to manual pages and novel chapters); the table
header prints its length percentiles. Two stages:

``embedding``
    :class:`~curator_dask.embeddings.EmbeddingCreator` with the bundled all-MiniLM-L6-v2.
``classifier``
    :class:`~curator_dask.classifiers.QualityClassifier` on a checkpoint in NVIDIA's
    DeBERTa classifier layout built here with **random weights** and the published
    DeBERTa-v3-xsmall backbone configuration (12 layers, width 384; the BERT vocabulary of
    the bundled MiniLM tokenizer). The timings are those of the architecture; the labels
    mean nothing. (NVIDIA's quality classifier is DeBERTa-v3-base, about 4x the compute.)

For every ``max_chars`` x ``model_inference_batch_size`` x sorted-batching combination the
stage runs over the documents (model loaded once, outside the timing; one warm-up call);
``--repeats`` runs, best time. The sorted/unsorted ratio is the peer comparison: both are
measured in the same run on the same documents.

Usage::

    python bench/bench_models.py [--docs 128] [--stages embedding classifier]

Prints a table and writes ``bench/results/bench_models.json``.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from curator_dask.classifiers import QualityClassifier  # noqa: E402
from curator_dask.embeddings import EmbeddingCreator, default_embedding_model_dir  # noqa: E402

CORPUS = ROOT.parent / "shared" / "data" / "public_corpus.jsonl.gz"
SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"
RESULTS = ROOT / "bench" / "results"

DEFAULTS = {
    "embedding": {"batch_sizes": [8, 32, 128], "max_chars": [500, 2000]},
    "classifier": {"batch_sizes": [8, 32, 256], "max_chars": [2000, 6000]},
}


def load_docs(n: int, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """A seeded random sample of ``n`` documents (reservoir sampling over the file)."""
    path = CORPUS if CORPUS.is_file() else SAMPLE
    rng = random.Random(seed)
    picked: list[dict[str, Any]] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if len(picked) < n:
                picked.append(json.loads(line))
            else:
                j = rng.randint(0, i)
                if j < n:
                    picked[j] = json.loads(line)
    return pd.DataFrame(picked)[["id", "text"]], str(path)


def build_classifier_dir(root: Path) -> Path:
    """NVIDIA's DeBERTa classifier layout with random weights (see the module docstring)."""
    import shutil

    import safetensors.torch
    import torch
    import transformers

    from curator_dask.classifiers._checkpoints import KNOWN_BACKBONES

    path = root / "quality-xsmall-random"
    tok_dir = Path(default_embedding_model_dir())
    backbone = dict(KNOWN_BACKBONES["microsoft/deberta-v3-xsmall"], vocab_size=30522)
    (path / "backbone").mkdir(parents=True)
    (path / "backbone" / "config.json").write_text(json.dumps(backbone))
    options = {k: v for k, v in backbone.items() if k != "model_type"}
    torch.manual_seed(0)
    model = transformers.DebertaV2Model(transformers.DebertaV2Config(**options))
    fc = torch.nn.Linear(backbone["hidden_size"], 3)
    state = {f"model.{k}": v.contiguous() for k, v in model.state_dict().items()}
    state.update({"fc.weight": fc.weight.detach(), "fc.bias": fc.bias.detach()})
    safetensors.torch.save_file(state, str(path / "model.safetensors"))
    labels = ["High", "Low", "Medium"]
    config = {
        "base_model": "backbone",
        "fc_dropout": 0.2,
        "id2label": dict(enumerate(labels)),
        "label2id": {x: i for i, x in enumerate(labels)},
    }
    (path / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (tok_dir / name).is_file():
            shutil.copy(tok_dir / name, path / name)
    return path


def make_stage(kind: str, model_dir: Path | None, batch: int, max_chars: int, sort: bool) -> Any:
    common = {
        "model_inference_batch_size": batch,
        "max_chars": max_chars,
        "sort_by_length": sort,
        "device": "cpu",
    }
    if kind == "embedding":
        return EmbeddingCreator(**common)
    return QualityClassifier(model_dir=str(model_dir), **common)


def run_one(stage: Any, frame: pd.DataFrame, repeats: int) -> float:
    ready = copy.copy(stage)
    ready.setup()
    ready.process(frame.head(4))  # warm-up: first-call allocations
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        ready.process(frame)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=128)
    ap.add_argument("--stages", nargs="+", default=["embedding", "classifier"])
    ap.add_argument("--batch-sizes", type=int, nargs="+", help="default: per stage")
    ap.add_argument("--max-chars", type=int, nargs="+", help="default: per stage")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=str(RESULTS / "bench_models.json"))
    args = ap.parse_args(argv)

    import torch

    frame, source = load_docs(args.docs)
    lengths = frame["text"].str.len().to_numpy()
    pct = {f"p{q}": int(np.percentile(lengths, q)) for q in (10, 50, 90, 99)}
    print(f"{len(frame)} documents from {source}; characters: {pct}, max {lengths.max()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        clf_dir = build_classifier_dir(Path(tmp)) if "classifier" in args.stages else None
        for kind in args.stages:
            sizes = args.batch_sizes or DEFAULTS[kind]["batch_sizes"]
            chars = args.max_chars or DEFAULTS[kind]["max_chars"]
            for max_chars in chars:
                for batch in sizes:
                    for sort in (True, False):
                        stage = make_stage(kind, clf_dir, batch, max_chars, sort)
                        seconds = run_one(stage, frame, args.repeats)
                        rows.append(
                            {
                                "stage": kind,
                                "max_chars": max_chars,
                                "model_inference_batch_size": batch,
                                "sort_by_length": sort,
                                "docs": len(frame),
                                "seconds": round(seconds, 3),
                                "docs_per_s": round(len(frame) / seconds, 2),
                            }
                        )
                        print(
                            f"{kind:>10} max_chars={max_chars:>5} batch={batch:>4} "
                            f"sorted={sort!s:>5}  {rows[-1]['docs_per_s']:>7.2f} docs/s",
                            flush=True,
                        )
    print()
    print(
        f"{'stage':>10} {'max_chars':>9} {'batch':>6} {'sorted':>8} {'unsorted':>9} "
        f"{'sorted/unsorted':>15}  (docs/s)"
    )
    for r in rows:
        if not r["sort_by_length"]:
            continue
        off = next(
            o for o in rows if not o["sort_by_length"] and o["stage"] == r["stage"]
            and o["max_chars"] == r["max_chars"]
            and o["model_inference_batch_size"] == r["model_inference_batch_size"]
        )  # fmt: skip
        r["sorted_over_unsorted"] = round(r["docs_per_s"] / off["docs_per_s"], 2)
        print(
            f"{r['stage']:>10} {r['max_chars']:>9} {r['model_inference_batch_size']:>6} "
            f"{r['docs_per_s']:>8.2f} {off['docs_per_s']:>9.2f} "
            f"{r['sorted_over_unsorted']:>14.2f}x"
        )
    result = {
        "benchmark": "bench_models",
        "documents": {"source": source, "count": len(frame), "chars": pct},
        "stages": {
            "embedding": "EmbeddingCreator, all-MiniLM-L6-v2 (bundled), CPU",
            "classifier": "QualityClassifier, NVIDIA layout, DeBERTa-v3-xsmall shape, "
            "random weights, CPU",
        },
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "load_average_after": os.getloadavg(),  # other work on a shared machine skews it
        },
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out}")
    return result


if __name__ == "__main__":
    main()
