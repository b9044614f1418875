"""What a whole ``curator-dask fuzzy-dedup`` command costs, against rensa + an exact verify.

Each case is a fresh process tree, timed from start to exit: CPU seconds of the tree (the
CLI and any worker processes) and its peak resident memory (psutil every 20 ms; see
``bench_cli.measure``), median of ``--repeat`` runs; the cases take turns, one run of
each per round:

- ``fuzzy-dedup`` of the first 2,000 documents of the shipped sample (4 JSONL files, with
  ``--perform-removal``): at this size the cost is fixed cost (imports, the cluster, kernel
  and table loading, step caches);
- the same command on the first 20,000 documents of the public corpus
  (``../shared/data``, "held-out 20k"), scored against its exact ground truth;
- the peer on those 20,000 documents, in one process: the same word 5-grams after the same
  normalisation (Python's ``unicodedata`` and ``re``), rensa 0.5 signatures (240 = 30 x 8,
  as ours), LSH bands grouped with numpy, every candidate pair verified with the exact
  Jaccard of its shingle sets (>= 0.8), connected components, the smallest id of each kept.
- with ``--baseline DIR`` (another checkout, e.g. ``git worktree add --detach /tmp/base
  main``), our two runs again with that checkout's code, in the same run.

Every command runs in a scratch directory, so ``python -m`` imports the code of
``PYTHONPATH`` (this checkout or the baseline), not of the working directory.

Python writes no bytecode when ``PYTHONDONTWRITEBYTECODE`` is set (as in some development
shells): an installed package has its ``.pyc`` files, so the runs here drop that variable
and one untimed run per code base writes them first. The numba kernels and the
normalisation tables are loaded from this machine's caches (``curator.cache-dir``,
numba's cache), as on any run after the first: first-run compile time is measured apart
(``docs/benchmarks.md``).

The ground truth of the 20,000 documents is computed once with
``../shared/tools/ground_truth.py`` (about 3 minutes) and kept in ``bench/results/``.

Usage::

    python bench/bench_fuzzy_cost.py [--repeat 3] [--baseline DIR]

Prints a table and writes ``bench/results/bench_fuzzy_cost.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_cli import measure
from bench.bench_dedup_common import CORPUS, RESULTS, SAMPLE, score

ROOT = Path(__file__).resolve().parent.parent
GROUND_TRUTH = Path("/work/shared/tools/ground_truth.py")
NUM_BANDS, ROWS, THRESHOLD, NGRAM = 30, 8, 0.8, 5


def _write_shards(src: Path, lines: list[str], n_files: int = 4) -> None:
    src.mkdir(parents=True)
    for i in range(n_files):
        (src / f"shard-{i}.jsonl").write_text("".join(lines[i::n_files]))


def _first_lines(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line for _, line in zip(range(n), f, strict=False)]


def _truth(lines: list[str]) -> list[list[str]]:
    """Clusters of the exact ground truth of ``lines`` (computed once, kept in results/)."""
    out = RESULTS / f"truth-first-{len(lines)}"
    if not (out / "clusters.jsonl").exists():
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus.jsonl"
            corpus.write_text("".join(lines))
            subprocess.run(
                [sys.executable, str(GROUND_TRUTH), str(corpus), "--out-dir", str(out)],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
    with open(out / "clusters.jsonl") as f:
        return [json.loads(line)["ids"] for line in f]


def _removed_ids(out: Path) -> set[str]:
    import pyarrow.dataset as ds

    table = ds.dataset(out / "removed_ids", format="parquet").to_table(columns=["id"])
    return {str(x) for x in table.column("id").to_pylist()}


def peer(corpus: str, out: str) -> None:
    """The rensa + exact verify run (a child process): writes the removed ids as JSON."""
    import numpy as np
    import rensa

    from bench.bench_dedup_common import word_shingles

    ids, sets = [], []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            ids.append(str(rec["id"]))
            sets.append(word_shingles(rec["text"], NGRAM))
    matrix = rensa.RMinHash.digest_matrix_from_token_sets(
        [sorted(s) for s in sets], num_perm=NUM_BANDS * ROWS, seed=42
    )
    sig = np.asarray(matrix.to_rows(), dtype=np.uint32)
    pairs: set[tuple[int, int]] = set()
    for b in range(NUM_BANDS):
        band = np.ascontiguousarray(sig[:, b * ROWS : (b + 1) * ROWS]).view(f"V{4 * ROWS}")
        _, inverse, counts = np.unique(band.ravel(), return_inverse=True, return_counts=True)
        shared = np.flatnonzero(counts[inverse] > 1)
        order = shared[np.argsort(inverse[shared], kind="stable")]
        groups = np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)
        for g in groups:
            first = int(g[0])
            pairs.update((first, int(o)) for o in g[1:])  # a star per bucket, as ours
    parent = list(range(len(ids)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        sa, sb = sets[a], sets[b]
        union = len(sa | sb)
        if union and len(sa & sb) / union >= THRESHOLD:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    members: dict[int, list[str]] = {}
    for i, doc_id in enumerate(ids):
        members.setdefault(find(i), []).append(doc_id)
    removed = [d for group in members.values() if len(group) > 1 for d in sorted(group)[1:]]
    Path(out).write_text(json.dumps(removed))


def _fuzzy_cmd(src: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "curator_dask.cli",
        "fuzzy-dedup",
        str(src),
        "--output",
        str(out / "out"),
        "--cache-dir",
        str(out / "cache"),
        "--perform-removal",
    ]


def _median(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        k: round(statistics.median(r[k] for r in runs), 3)
        for k in ("wall_s", "cpu_s", "peak_rss_mb")
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="another checkout whose code runs the same commands")
    ap.add_argument("--docs-large", type=int, default=20_000)
    ap.add_argument("--peer", nargs=2, metavar=("CORPUS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.peer:
        peer(*args.peer)
        return 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    codes = {"this checkout": str(ROOT)}
    if args.baseline:
        codes["baseline"] = str(Path(args.baseline).resolve())
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_fuzzy_cost_") as tmp_name:
        tmp = Path(tmp_name)
        small, large = tmp / "in-2k", tmp / "in-large"
        _write_shards(small, _first_lines(SAMPLE, 2000))
        large_lines = _first_lines(CORPUS, args.docs_large) if CORPUS.exists() else []
        truth = _truth(large_lines) if large_lines else []
        if large_lines:
            _write_shards(large, large_lines)
            (tmp / "large.jsonl").write_text("".join(large_lines))
        cases: list[tuple[str, str, list[str], dict[str, str], Path]] = []
        for code, path in codes.items():
            code_env = {**env, "PYTHONPATH": path}
            out = tmp / f"run-{len(cases)}"
            cases.append(("fuzzy-dedup 2k", code, _fuzzy_cmd(small, out), code_env, out))
            if large_lines:
                out = tmp / f"run-{len(cases)}"
                cases.append(("fuzzy-dedup 20k", code, _fuzzy_cmd(large, out), code_env, out))
            # untimed: writes bytecode, loads (or fills) the kernel and table caches
            subprocess.run(cases[-1][2], env=code_env, cwd=tmp, capture_output=True, check=True)
        if large_lines:
            out = tmp / "peer"
            out.mkdir()
            peer_cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--peer",
                str(tmp / "large.jsonl"),
                str(out / "removed.json"),
            ]
            cases.append(("rensa + exact verify 20k", "peer", peer_cmd, env, out))
        # one run of every case per round, in turn: a load that moves during the bench (a
        # shared box) weighs on every case alike, not on whichever code runs last
        runs: list[list[dict[str, Any]]] = [[] for _ in cases]
        for _ in range(args.repeat):
            for (name, code, cmd, case_env, out), case_runs in zip(cases, runs, strict=True):
                for done in ("out", "cache"):
                    shutil.rmtree(out / done, ignore_errors=True)
                case_runs.append(measure(cmd, case_env, cwd=str(tmp)))  # not this checkout
                if case_runs[-1]["exit"]:
                    raise SystemExit(f"{name} ({code}) failed: {case_runs[-1]['stderr_tail']}")
        for (name, code, _, _, out), case_runs in zip(cases, runs, strict=True):
            row: dict[str, Any] = {"case": name, "code": code, **_median(case_runs)}
            if "20k" in name:
                if code == "peer":
                    removed = set(json.loads((out / "removed.json").read_text()))
                else:
                    removed = _removed_ids(out / "out")
                row.update(score(removed, truth))
            rows.append(row)
    print(f"{'case':<26}{'code':<15}{'wall s':>8}{'CPU s':>8}{'peak MB':>9}{'P':>8}{'R':>8}")
    for r in rows:
        print(
            f"{r['case']:<26}{r['code']:<15}{r['wall_s']:>8.2f}{r['cpu_s']:>8.2f}"
            f"{r['peak_rss_mb']:>9.0f}{r.get('precision', ''):>8}{r.get('recall', ''):>8}"
        )
    by = {(r["case"], r["code"]): r for r in rows}
    ours, rensa_row = (
        by.get(("fuzzy-dedup 20k", "this checkout")),
        by.get(("rensa + exact verify 20k", "peer")),
    )
    if ours and rensa_row:
        print(f"20k, ours / rensa + exact verify: {ours['cpu_s'] / rensa_row['cpu_s']:.2f}x CPU")
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.1f} (the box may be shared)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_json = RESULTS / "bench_fuzzy_cost.json"
    out_json.write_text(
        json.dumps(
            {"rows": rows, "load": load, "machine": platform.platform(), "args": vars(args)},
            indent=2,
        )
    )
    print(f"results: {out_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
