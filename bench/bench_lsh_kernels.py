"""Run time of the LSH step's C kernels (``csrc/lsh.c``) against their numba twins, in one process.

The kernels get the arrays the fuzzy workflow gives them (word 5-grams, 240 hashes, 30 bands
of 8, the default 4 anchors at Jaccard 0.8) on the shipped sample and on the first ``--docs``
documents of the public corpus; both kernels' results must be equal. Times are the best of
``--repeat`` calls in CPU seconds of this process; pin it to one core (``taskset -c 1``) on a
shared box.

Usage::

    taskset -c 1 python bench/bench_lsh_kernels.py [--docs 20000] [--repeat 7]

Prints a table and writes ``bench/results/bench_lsh_kernels.json``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import CORPUS, have_corpus, load, write_results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _texts(path: Path, limit: int) -> list[str]:
    return [r["text"] for r in load(path)[:limit]]


def _groups(bucket: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    new = np.ones(len(bucket), dtype=bool)
    new[1:] = bucket[1:] != bucket[:-1]
    starts = np.flatnonzero(new).astype(np.int64)
    return starts, np.append(starts[1:], len(bucket)).astype(np.int64)


def _cases(texts: list[str]) -> dict[str, tuple[str, Callable[..., Any], tuple]]:
    """Each kernel's ``_ckernels`` name, numba kernel and arguments, as the workflow's."""
    from curator_dask.dedup import lsh
    from curator_dask.dedup.minhash import (
        minhash_permutations,
        minhash_signatures,
        shingle_hashes,
        unique_shingles,
    )

    hashes, offsets = shingle_hashes(pd.Series(texts), 5, "word", "simple")
    sets, set_offsets = unique_shingles(hashes, offsets)
    sig = minhash_signatures(hashes, offsets, minhash_permutations(240, 42))
    bands = lsh.band_hashes(sig, 30, 8)
    bucket = bands.T.ravel()
    uid = np.tile(np.arange(len(texts), dtype=np.int64), 30)
    order = np.lexsort((uid, bucket))
    sorted_bucket, sorted_uid = bucket[order], uid[order]
    starts, ends = _groups(sorted_bucket)
    big = ends - starts >= 2
    edges = lsh.bucket_edges(bucket, uid)
    members = (
        pd.concat(
            [
                edges[["bucket", "uid"]],
                edges[["bucket", "anchor"]].rename(columns={"anchor": "uid"}),
            ]
        )
        .drop_duplicates()
        .sort_values(["bucket", "uid"])
    )
    m_uid = members["uid"].to_numpy(np.int64)
    v_starts, v_ends = _groups(members["bucket"].to_numpy(np.int64))
    lo = np.ascontiguousarray(set_offsets[:-1][m_uid])
    hi = np.ascontiguousarray(set_offsets[1:][m_uid])
    return {
        "band_hashes": ("lsh.band_hashes", lsh._band_hashes, (sig, 30, 8, 0)),
        "member_set_hash": (
            "lsh.member_set_hash",
            lsh._member_set_hash,
            (sorted_bucket, sorted_uid, starts[big], ends[big]),
        ),
        "verify_anchors": (
            "lsh.verify_anchors",
            lsh._verify_anchors,
            (v_starts, v_ends, sets, lo, hi, 0.8, 4),
        ),
    }


def _best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def _flat(result: Any) -> list[np.ndarray]:
    parts = result if isinstance(result, tuple) else (result,)
    return [np.asarray(p).ravel() for p in parts]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=20_000, help="public corpus documents")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_lsh_kernels.json")
    args = ap.parse_args(argv)
    from curator_dask import _ckernels
    from curator_dask.demo import SAMPLE

    inputs = {"sample": _texts(Path(SAMPLE), 10**9)}
    if have_corpus():
        inputs[f"public {args.docs // 1000}k"] = _texts(CORPUS, args.docs)
    results: dict[str, Any] = {}
    print(f"\n{'input':<12}{'kernel':<18}{'numba ms':>10}{'C ms':>10}{'C / numba':>11}")
    for label, texts in inputs.items():
        for name, (key, numba_kernel, kargs) in _cases(texts).items():
            c = _ckernels.kernel(key, numba_kernel)
            assert c is not numba_kernel, "no C compiler: the C kernels are not built"
            got, want = _flat(c(*kargs)), _flat(numba_kernel(*kargs))  # loaded; equal
            assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), name
            t_numba = _best(functools.partial(numba_kernel, *kargs), args.repeat)
            t_c = _best(functools.partial(c, *kargs), args.repeat)
            r = {"numba_ms": 1e3 * t_numba, "c_ms": 1e3 * t_c, "ratio": t_c / t_numba}
            results[f"{label}: {name}"] = r
            print(
                f"{label:<12}{name:<18}{r['numba_ms']:>10.3f}{r['c_ms']:>10.3f}{r['ratio']:>11.2f}"
            )
    docs = {k: len(v) for k, v in inputs.items()}
    write_results(args.out, {"repeat": args.repeat, "docs": docs, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
