"""The GPU half against the CPU, as a user runs it: each command twice, outputs compared by hash.

    python bench/gpu_check.py --out OUT [--tests-log OUT/gpu_tests.log] [--input FILE]

``curator-dask run`` (examples/pipeline.yaml), ``exact-dedup --perform-removal``,
``fuzzy-dedup --perform-removal`` and ``semantic-dedup``, each once on CPU workers and
once with ``--gpu`` on the cudf backend (``DASK_DATAFRAME__BACKEND=cudf``), on the shipped
sample unless ``--input`` names another JSONL file. Every output dataset is read back,
sorted by id and hashed (id and text); the GPU run passes when its hashes equal the CPU's
(when they differ, the Jaccard similarity of the two removed-id sets says by how much:
semantic dedup embeds in half precision on a GPU by default). Fuzzy dedup runs a second
time on the GPU with the shingles hashed there too (``curator.dedup.shingle-device: gpu``,
row ``fuzzy-dedup gpu-shingle``), against the same CPU run. Semantic dedup's k-means
(cuML under the cudf backend) is compared with the CPU run's by the clustering it gives
(row ``semantic k-means``: :func:`kmeans_row`).
Then ``bench/bench_minhash_gpu.py`` and ``bench/bench_kmeans_gpu.py`` (cuML against the
host's k-means on ``--kmeans-vectors`` synthetic vectors, 1M by default). One table at the
end (the ``gpu`` tests' counts from ``--tests-log`` too), and ``OUT/gpu_check.json``. Exit
status: the number of failures.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLE = os.path.join(ROOT, "curator_dask", "data", "sample.jsonl.gz")


def digest(path: str) -> tuple[int, str]:
    """``(rows, sha256)`` of the Parquet/JSONL dataset at ``path``, sorted by id."""
    import pandas as pd

    files = sorted(glob.glob(os.path.join(path, "*.parquet")))
    if files:
        frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    else:
        files = sorted(glob.glob(os.path.join(path, "*.jsonl*")))
        frame = pd.concat([pd.read_json(f, lines=True) for f in files], ignore_index=True)
    if "id" not in frame.columns:
        return len(frame), "no id column"
    frame = frame.sort_values("id", kind="stable").reset_index(drop=True)
    h = hashlib.sha256()
    texts = frame["text"].astype(str) if "text" in frame.columns else [""] * len(frame)
    for i, t in zip(frame["id"].astype(str), texts, strict=True):
        h.update(f"{i}\t{t}\n".encode())
    return len(frame), h.hexdigest()[:16]


def _ids(path: str) -> set[str]:
    import pandas as pd

    files = sorted(glob.glob(os.path.join(path, "*.parquet")))
    if not files:
        return set()
    return set(pd.concat([pd.read_parquet(f, columns=["id"]) for f in files])["id"].astype(str))


def _overlap(a: str, b: str) -> float | None:
    """Jaccard similarity of the ids in two removed-id datasets (how far apart they are)."""
    x, y = _ids(a), _ids(b)
    return round(len(x & y) / len(x | y), 4) if x | y else None


#: The GPU runs of each command, against its CPU run: mode -> (command, environment).
#: ``gpu-shingle`` is fuzzy dedup with the shingles hashed on the device too
#: (``curator.dedup.shingle-device: gpu``; ``gpu`` leaves the default, the host).
GPU_RUNS: dict[str, tuple[str, dict[str, str]]] = {
    "gpu": ("", {"DASK_DATAFRAME__BACKEND": "cudf"}),
    "gpu-shingle": (
        "fuzzy-dedup",
        {"DASK_DATAFRAME__BACKEND": "cudf", "DASK_CURATOR__DEDUP__SHINGLE_DEVICE": "gpu"},
    ),
}


def compare_runs(check: str, cpu: dict, gpu: dict) -> dict:
    """One row: a GPU run against the CPU run of the same command, outputs by hash.

    ``cpu`` and ``gpu`` hold ``rc``, ``s``, ``outputs`` (paths) and ``digest`` (one
    ``(rows, hash)`` per output). Where both ran and differ, ``removed_jaccard`` says how
    far apart the first outputs' ids are.
    """
    result: dict = {"check": check, "outputs": [os.path.basename(p) for p in cpu["outputs"]]}
    for mode, r in (("cpu", cpu), ("gpu", gpu)):
        result[f"{mode}_rc"], result[f"{mode}_s"] = r["rc"], r["s"]
        result[f"{mode}_digest"] = r["digest"]
    ran = cpu["rc"] == 0 and gpu["rc"] == 0
    same = ran and cpu["digest"] == gpu["digest"]
    result["status"] = "ok" if same else "FAIL"
    if ran and not same:
        result["removed_jaccard"] = _overlap(cpu["outputs"][0], gpu["outputs"][0])
    return result


def kmeans_row(cpu_cache: str, gpu_cache: str) -> dict:
    """The semantic-dedup runs' k-means, GPU against CPU: the same clustering within tolerance?

    Reads each run's step cache (``<cache>/semantic/kmeans-*``: ``centroids.npy`` and the
    ``_DONE`` marker, which says on which device k-means ran) and the CPU run's embeddings,
    labels every vector with its nearest centroid of either set and compares them
    (:func:`curator_dask.dedup.semantic.kmeans_agreement`). Passes when the GPU run's
    k-means ran on the GPU (cuML) and agrees within ``KMEANS_AGREEMENT``.
    """
    import numpy as np

    from curator_dask.dedup.semantic import KMEANS_AGREEMENT, _read_matrix, kmeans_agreement

    found = {}
    for mode, cache in (("cpu", cpu_cache), ("gpu", gpu_cache)):
        dirs = sorted(glob.glob(os.path.join(cache, "semantic", "kmeans-*")))
        done = [d for d in dirs if os.path.exists(os.path.join(d, "_DONE"))]
        if not done:
            return {"check": "semantic k-means", "status": "FAIL", "detail": f"no {mode} cache"}
        with open(os.path.join(done[-1], "_DONE"), encoding="utf-8") as f:
            marker = json.load(f)
        found[mode] = (np.load(os.path.join(done[-1], "centroids.npy")), marker)
    emb = os.path.join(cpu_cache, "semantic", "embeddings-*", "data", "*.parquet")
    emb = sorted(glob.glob(emb))
    vectors = np.concatenate([_read_matrix(f, None) for f in emb])
    agreement = kmeans_agreement(vectors, found["cpu"][0], found["gpu"][0])
    devices = {m: found[m][1].get("device", "host") for m in found}
    ok = agreement["equal"] and devices["gpu"] == "gpu"
    detail = {"devices": devices, **agreement, "tolerance": KMEANS_AGREEMENT}
    return {"check": "semantic k-means", "status": "ok" if ok else "FAIL", "detail": detail}


def _commands(data: str, work: str, mode: str) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (argv, output datasets to compare) for one mode (cpu or gpu)."""
    out = os.path.join(work, mode)
    flags = ["--gpu"] if mode.startswith("gpu") else ["--n-workers", "4"]
    pipeline = os.path.join(work, f"pipeline-{mode}.yaml")
    with open(os.path.join(ROOT, "examples", "pipeline.yaml"), encoding="utf-8") as f:
        text = f.read()
    text = text.replace("curator_dask/data/sample.jsonl.gz", data)
    text = text.replace("out/sample-clean", os.path.join(out, "run"))
    with open(pipeline, "w", encoding="utf-8") as f:
        f.write(text)
    cli = [sys.executable, "-m", "curator_dask.cli"]
    return {
        "run": ([*cli, "run", pipeline, *flags], [os.path.join(out, "run")]),
        "exact-dedup": (
            [*cli, "exact-dedup", data, "--output", os.path.join(out, "exact"),
             "--perform-removal", *flags],
            [os.path.join(out, "exact", "removed_ids"), os.path.join(out, "exact", "deduplicated")],
        ),
        "fuzzy-dedup": (
            [*cli, "fuzzy-dedup", data, "--cache-dir", os.path.join(out, "fuzzy-cache"),
             "--output", os.path.join(out, "fuzzy"), "--perform-removal", *flags],
            [os.path.join(out, "fuzzy", "removed_ids"), os.path.join(out, "fuzzy", "deduplicated")],
        ),
        "semantic-dedup": (
            [*cli, "semantic-dedup", data, "--cache-dir", os.path.join(out, "sem-cache"),
             "--output", os.path.join(out, "semantic"), *flags,
             *(["--device", "cuda", "--no-autocast"] if mode.startswith("gpu")
               else ["--device", "cpu"])],
            [os.path.join(out, "semantic", "removed_ids")],
        ),
    }  # fmt: skip


def _run(argv: list[str], env: dict[str, str], log: str) -> tuple[int, float]:
    return _wait(_start(argv, env, log))


def _start(argv: list[str], env: dict[str, str], log: str) -> tuple[subprocess.Popen, float]:
    with open(log, "w", encoding="utf-8") as f:
        proc = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    return proc, time.perf_counter()


def _wait(
    started: tuple[subprocess.Popen, float], timeout: float | None = None
) -> tuple[int, float]:
    """Exit status and wall seconds; 124 (as timeout(1) says) when it ran past ``timeout``."""
    proc, start = started
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = 124
    return rc, time.perf_counter() - start


def _tests(log: str | None) -> dict[str, int]:
    if not log or not os.path.exists(log):
        return {}
    with open(log, encoding="utf-8", errors="replace") as f:
        tail = f.read()[-3000:]
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error|errors)", tail)}


def _device_benches(args: argparse.Namespace) -> list[tuple[str, list[str], str]]:
    """The benchmarks after the commands: (row name, argv after python, result JSON file)."""
    out = []
    if not args.no_bench:
        out.append(
            ("bench_minhash_gpu", [os.path.join(HERE, "bench_minhash_gpu.py"), "--out", args.out],
             "minhash_gpu.json")
        )  # fmt: skip
    if args.kmeans_vectors:
        out.append(
            (f"k-means {args.kmeans_vectors:,} vectors",
             [os.path.join(HERE, "bench_kmeans_gpu.py"), "--vectors", str(args.kmeans_vectors),
              "--max-iter", "10", "--out", args.out],
             "kmeans_gpu.json")
        )  # fmt: skip
    return out


def _brief(name: str, figures: dict) -> dict:
    """What a benchmark row shows of its JSON."""
    if "agreement" in figures or "host" in figures:
        keep = ("host", "gpu", "agreement")
        return {k: figures[k] for k in keep if k in figures}
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--input", default=SAMPLE)
    ap.add_argument("--tests-log")
    ap.add_argument("--skip", nargs="*", default=[], help="commands not to run")
    ap.add_argument(
        "--timeout", type=float, default=300, help="seconds one command may take (default 300)"
    )
    ap.add_argument("--no-bench", action="store_true", help="leave out bench/bench_minhash_gpu.py")
    ap.add_argument(
        "--kmeans-vectors", type=int, default=1_000_000,
        help="synthetic vectors for bench/bench_kmeans_gpu.py, cuML against the host (0: none)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    work = os.path.abspath(os.path.join(args.out, "work"))
    os.makedirs(work, exist_ok=True)
    data = os.path.abspath(args.input)
    rows: list[dict] = []
    failures = 0
    cmds = {mode: _commands(data, work, mode) for mode in ("cpu", *GPU_RUNS)}
    for name in cmds["cpu"]:
        if name in args.skip:
            continue
        # the CPU and the GPU runs of one command at once: the CPU run uses the host's
        # cores, the GPU runs mostly the device, and the proof takes half the device time
        modes = ["cpu", *(m for m, (cmd, _) in GPU_RUNS.items() if cmd in ("", name))]
        started = {}
        for mode in modes:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            )
            env.update(GPU_RUNS.get(mode, ("", {}))[1])
            log = os.path.join(args.out, f"{name}-{mode}.log")
            started[mode] = _start(cmds[mode][name][0], env, log)
        runs = {}
        for mode in modes:
            rc, wall = _wait(started[mode], args.timeout)
            outputs = cmds[mode][name][1]
            runs[mode] = {
                "rc": rc, "s": round(wall, 1), "outputs": outputs,
                "digest": [digest(p) if rc == 0 else None for p in outputs],
            }  # fmt: skip
        for mode in modes[1:]:
            check = name if mode == "gpu" else f"{name} {mode}"
            row = compare_runs(check, runs["cpu"], runs[mode])
            failures += row["status"] != "ok"
            rows.append(row)
            print(json.dumps(row), flush=True)
    if "semantic-dedup" not in args.skip:
        row = kmeans_row(
            os.path.join(work, "cpu", "sem-cache"), os.path.join(work, "gpu", "sem-cache")
        )
        failures += row["status"] != "ok"
        rows.append(row)
        print(json.dumps(row, default=float), flush=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    for name, argv, result_file in _device_benches(args):
        rc, wall = _wait(
            _start([sys.executable, *argv], env, os.path.join(args.out, f"{name}.log")),
            args.timeout,
        )
        figures = {}
        path = os.path.join(args.out, result_file)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                figures = json.load(f)
        failures += rc != 0
        rows.append(
            {"check": name, "status": "ok" if rc == 0 else "FAIL", "gpu_s": round(wall, 1),
             "detail": _brief(name, figures)}
        )  # fmt: skip
    if args.tests_log:
        # scripts/gpu_check.sh runs the tests beside the commands and writes LOG.rc at the end
        rc_file = os.path.splitext(args.tests_log)[0] + ".rc"
        deadline = time.monotonic() + args.timeout
        while os.path.exists(os.path.dirname(rc_file) or ".") and not os.path.exists(rc_file):
            if time.monotonic() > deadline or not os.path.exists(args.tests_log):
                break
            time.sleep(1)
        tests = _tests(args.tests_log)
        ok = bool(tests.get("passed")) and not tests.get("failed") and not tests.get("error")
        ok = ok and not tests.get("errors")
        failures += not ok
        rows.insert(
            0, {"check": "pytest -m gpu", "status": "ok" if ok else "FAIL", "detail": tests}
        )
    with open(os.path.join(args.out, "gpu_check.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1, default=float)
    print(f"\n{'check':<26} {'status':<6} {'cpu s':>7} {'gpu s':>7}  detail")
    for r in rows:
        detail = r.get("detail")
        if detail is None:
            detail = " ".join(
                f"{n}={d[0]}:{d[1]}" if d else "-"
                for n, d in zip(r["outputs"], r.get("gpu_digest") or [], strict=False)
            ) + ("" if r["status"] == "ok" else f" (cpu {r.get('cpu_digest')})")
            if "removed_jaccard" in r:
                detail += f" removed-ids Jaccard {r['removed_jaccard']}"
        cpu_s = r.get("cpu_s", "")
        gpu_s = r.get("gpu_s", "")
        print(f"{r['check']:<26} {r['status']:<6} {cpu_s!s:>7} {gpu_s!s:>7}  {detail}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
