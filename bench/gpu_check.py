"""The GPU half against the CPU, as a user runs it: each command twice, outputs compared by hash.

    python bench/gpu_check.py --out OUT [--tests-log OUT/gpu_tests.log] [--input FILE]

``curator-dask run`` (examples/pipeline.yaml), ``exact-dedup --perform-removal``,
``fuzzy-dedup --perform-removal`` and ``semantic-dedup``, each once on CPU workers and
once with ``--gpu`` on the cudf backend (``DASK_DATAFRAME__BACKEND=cudf``), on the shipped
sample unless ``--input`` names another JSONL file. Every output dataset is read back,
sorted by id and hashed (id and text); the GPU run passes when its hashes equal the CPU's
(when they differ, the Jaccard similarity of the two removed-id sets says by how much:
semantic dedup embeds in half precision on a GPU by default).
Then ``bench/bench_minhash_gpu.py``. One table at the end (the ``gpu`` tests' counts from
``--tests-log`` too), and ``OUT/gpu_check.json``. Exit status: the number of failures.
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


def _commands(data: str, work: str, mode: str) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (argv, output datasets to compare) for one mode (cpu or gpu)."""
    out = os.path.join(work, mode)
    flags = ["--gpu"] if mode == "gpu" else ["--n-workers", "4"]
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
             *(["--device", "cuda", "--no-autocast"] if mode == "gpu" else ["--device", "cpu"])],
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
    args = ap.parse_args(argv)
    work = os.path.abspath(os.path.join(args.out, "work"))
    os.makedirs(work, exist_ok=True)
    data = os.path.abspath(args.input)
    rows: list[dict] = []
    failures = 0
    cmds = {mode: _commands(data, work, mode) for mode in ("cpu", "gpu")}
    for name in cmds["cpu"]:
        if name in args.skip:
            continue
        result: dict = {"check": name}
        # the CPU and the GPU run of one command at once: the CPU run uses the host's cores,
        # the GPU run mostly the device, and the proof takes half the device time
        started = {}
        for mode in ("cpu", "gpu"):
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            )
            if mode == "gpu":
                env["DASK_DATAFRAME__BACKEND"] = "cudf"
            log = os.path.join(args.out, f"{name}-{mode}.log")
            started[mode] = _start(cmds[mode][name][0], env, log)
        for mode in ("cpu", "gpu"):
            rc, wall = _wait(started[mode], args.timeout)
            outputs = cmds[mode][name][1]
            result[f"{mode}_rc"] = rc
            result[f"{mode}_s"] = round(wall, 1)
            result[f"{mode}_digest"] = [digest(p) if rc == 0 else None for p in outputs]
            result["outputs"] = [os.path.basename(p) for p in outputs]
        same = result["cpu_rc"] == 0 and result["gpu_rc"] == 0
        same = same and result["cpu_digest"] == result["gpu_digest"]
        result["status"] = "ok" if same else "FAIL"
        if not same and result["cpu_rc"] == 0 and result["gpu_rc"] == 0:
            # semantic dedup embeds under autocast (fp16) on a GPU: say how far apart
            cpu_out, gpu_out = cmds["cpu"][name][1][0], cmds["gpu"][name][1][0]
            result["removed_jaccard"] = _overlap(cpu_out, gpu_out)
        failures += not same
        rows.append(result)
        print(json.dumps(result), flush=True)
    if not args.no_bench:
        bench = os.path.join(HERE, "bench_minhash_gpu.py")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
        rc, wall = _wait(
            _start(
                [sys.executable, bench, "--out", args.out],
                env,
                os.path.join(args.out, "bench_minhash_gpu.log"),
            ),
            args.timeout,
        )
        figures = {}
        path = os.path.join(args.out, "minhash_gpu.json")
        if rc == 0 and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                figures = json.load(f)
        failures += rc != 0
        rows.append(
            {"check": "bench_minhash_gpu", "status": "ok" if rc == 0 else "FAIL", "detail": figures}
        )
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
        json.dump(rows, f, indent=1)
    print(f"\n{'check':<20} {'status':<6} {'cpu s':>7} {'gpu s':>7}  detail")
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
        print(f"{r['check']:<20} {r['status']:<6} {cpu_s!s:>7} {gpu_s!s:>7}  {detail}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
