"""Run time of the per-document kernels against another checkout's, in one process.

A change that makes a kernel compile faster must not make it run slower. This loads the
kernel modules of ``--baseline DIR`` (another checkout, e.g. ``git worktree add --detach
/tmp/base main``) beside this checkout's and calls each kernel of both on the same arrays
(the shipped sample's first ``--docs`` documents), interleaved, ``--repeat`` times; the
results must be equal (compared flat). This checkout's side is what it runs: the C twins
(``curator_dask/csrc``) where its C kernels are built, numba's kernels otherwise (so a
baseline from before the C kernels times C against numba). Times are CPU seconds of this
process; pin it to one core (``taskset -c 1``) on a shared box.

Usage::

    taskset -c 1 python bench/bench_kernel_runtime.py --baseline DIR [--repeat 21]

Prints a table and writes ``bench/results/bench_kernel_runtime.json``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import write_results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_baseline(base: Path) -> tuple[ModuleType, ModuleType]:
    """The baseline's ``_text_kernels`` and ``dedup.minhash``, under other names.

    They compile the baseline's way: while they load, ``curator_dask._kernels`` is the
    baseline's own (its numba settings: the LLVM level, which functions compile as helpers),
    not this checkout's, which they would otherwise import and compile with. Other modules
    they import (``curator_dask.dedup._normtables``, ...) are this checkout's.
    """
    import curator_dask._kernels  # noqa: F401  (in sys.modules)

    ours = sys.modules["curator_dask._kernels"]
    sys.modules["curator_dask._kernels"] = _load(
        "base_kernels", base / "curator_dask" / "_kernels.py"
    )
    try:
        old_kernels = _load("base_text_kernels", base / "curator_dask" / "_text_kernels.py")
        old_minhash = _load("base_minhash", base / "curator_dask" / "dedup" / "minhash.py")
    finally:
        sys.modules["curator_dask._kernels"] = ours
    return old_kernels, old_minhash


def _cases(base: Path, docs: int) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    from curator_dask import _ckernels
    from curator_dask import text as text_kit
    from curator_dask.dedup import minhash
    from curator_dask.demo import SAMPLE

    old_kernels, old_minhash = load_baseline(base)
    with gzip.open(SAMPLE, "rt") as f:
        texts = [json.loads(line)["text"] for line in f][:docs]
    series = pd.Series(texts, dtype=object)
    hashes, offsets = minhash.shingle_hashes(series, 5)
    perms = minhash.minhash_permutations(128, seed=42)
    offs, data, words = text_kit.utf8_buffers(series)
    flags = text_kit._tables()["flags"]
    args = (offs, data, words, flags)
    # word_list_counts' arrays, as text.py builds them
    k1s, k2s = text_kit._pack_words({"the", "be", "to", "of", "and"})  # type: ignore[misc]
    strip = text_kit._strip_table(".,;:!?\"'()")
    words_args = (offs, data, strip, text_kit._tables()["ascii_lower"], k1s, k2s)
    # what this checkout runs: the C twins (csrc/) where the library is built, else numba's
    kernel = _ckernels.kernel
    return {
        "document_stats": (
            lambda: old_kernels.document_stats(*args),
            lambda: kernel("document_stats")(*args),
        ),
        "ngram_stats": (
            lambda: old_kernels.ngram_stats(*args, 10),
            lambda: kernel("ngram_stats")(*args, 10),
        ),
        "word_list_counts": (
            lambda: old_kernels.word_list_counts(*words_args),
            lambda: kernel("word_list_counts")(*words_args),
        ),
        "_unique_per_doc": (
            lambda: old_minhash._unique_per_doc(hashes, offsets),
            lambda: minhash.unique_shingles(hashes, offsets),
        ),
        "_word_shingles": (
            lambda: old_minhash.shingle_hashes(series, 5),
            lambda: minhash.shingle_hashes(series, 5),
        ),
        "minhash_signatures": (
            lambda: old_minhash.minhash_signatures(hashes, offsets, perms),
            lambda: minhash.minhash_signatures(hashes, offsets, perms),
        ),
    }


def _flat(result: Any) -> list[np.ndarray]:
    parts = result if isinstance(result, tuple) else (result,)
    return [np.asarray(p).ravel() for p in parts]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="another checkout")
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--docs", type=int, default=4000, help="sample documents")
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_kernel_runtime.json")
    args = ap.parse_args(argv)
    if "numba" not in sys.modules:
        # The baseline's modules load under other names; their numba cache entries, written
        # beside the baseline's sources, broke that checkout's next import ("No module named
        # '<dynamic>'"). Both checkouts' kernels compile into a directory of this run only.
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-kernel-runtime-")
    results: dict[str, Any] = {}
    print(
        f"\n{'kernel':<18}{'base min ms':>12}{'base med':>10}{'this min':>10}{'this med':>10}"
        f"{'min x':>8}{'med x':>8}"
    )
    for name, (base, this) in _cases(args.baseline.resolve(), args.docs).items():
        got, want = _flat(this()), _flat(base())  # compiled or loaded; equal results
        assert len(got) == len(want)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
        t_base, t_this = [], []
        for _ in range(args.repeat):
            t = time.process_time()
            base()
            t_base.append(time.process_time() - t)
            t = time.process_time()
            this()
            t_this.append(time.process_time() - t)
        r = {
            "baseline_min_ms": 1e3 * min(t_base),
            "baseline_median_ms": 1e3 * statistics.median(t_base),
            "this_min_ms": 1e3 * min(t_this),
            "this_median_ms": 1e3 * statistics.median(t_this),
        }
        r["ratio_min"] = r["this_min_ms"] / r["baseline_min_ms"]
        r["ratio_median"] = r["this_median_ms"] / r["baseline_median_ms"]
        results[name] = r
        print(
            f"{name:<18}{r['baseline_min_ms']:>12.1f}{r['baseline_median_ms']:>10.1f}"
            f"{r['this_min_ms']:>10.1f}{r['this_median_ms']:>10.1f}"
            f"{r['ratio_min']:>8.3f}{r['ratio_median']:>8.3f}"
        )
    write_results(
        args.out,
        {
            "baseline": str(args.baseline),
            "repeat": args.repeat,
            "docs": args.docs,
            "results": results,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
