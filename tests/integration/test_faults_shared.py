"""Issue 21: two pipelines and two fuzzy dedups at once on one cluster, on shared and on
distinct outputs and caches, while a worker is SIGKILLed during a pipeline's write, the
LSH shuffle and the candidate check. Each command ends with a quiet single run's result
(counted and hashed) or is refused naming the lease holder; nothing else."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _fault_helpers import Cluster, subprocess_env, tree_digest
from distributed import Client

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_WORDS = [f"w{chr(97 + i)}" for i in range(15)]


def _inputs(src: Path) -> None:
    """240 documents in 6 files: near-duplicate families, and short ones the filter drops."""
    src.mkdir()
    n = 0
    for f in range(6):
        lines = []
        for _ in range(40):
            fam = (n * 7) % 60
            words = [f"{_WORDS[(fam + k) % len(_WORDS)]}{(fam * k) % 11}" for k in range(30)]
            text = " ".join(words) + (f" tail{n}" if n % 3 else "")
            if n % 9 == 0:
                text = f"short {n}"
            lines.append(json.dumps({"id": f"d{n}", "text": text}) + "\n")
            n += 1
        (src / f"s{f}.jsonl").write_text("".join(lines))


def _spec(tmp: Path, src: Path, out: Path) -> Path:
    f = tmp / f"{out.name}.yaml"
    stages = [
        {"class": "_fault_helpers:SlowCopy", "params": {"seconds": 0.5}},
        {"class": "WordCountFilter", "params": {"min_words": 3}},
    ]
    reader = {"class": "JsonlReader", "params": {"paths": str(src), "files_per_partition": 1}}
    writer = {"class": "JsonlWriter", "params": {"path": str(out)}}
    f.write_text(yaml.safe_dump({"reader": reader, "stages": stages, "writer": writer}))
    return f


def _fuzzy(src: Path, out: Path, cache: Path) -> list[str]:
    return [
        "fuzzy-dedup",
        str(src),
        "--output",
        str(out),
        "--cache-dir",
        str(cache),
        "--num-bands",
        "6",
        "--minhashes-per-band",
        "5",
        "--bands-per-iteration",
        "1",
        "--false-positive-check",
        "--json",
    ]


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "curator_dask.cli", *args],
        cwd=cwd,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _pipeline_result(out: Path) -> tuple[int, str, dict[str, int]]:
    """Rows, a hash of the sorted rows, and the run's counts (kept+removed+quarantined=read)."""
    rows = sorted(x for p in sorted(out.glob("part-*.jsonl")) for x in p.read_text().splitlines())
    stats = json.loads((Path(str(out) + ".curator") / "_stats.json").read_text())
    counts = {k: stats[k] for k in ("read", "kept", "removed", "quarantined")}
    assert counts["read"] == counts["kept"] + counts["removed"] + counts["quarantined"], counts
    assert (Path(str(out) + ".curator") / "_SUCCESS").exists()
    return len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest(), counts


def _fuzzy_result(out: Path, stdout: str) -> tuple[list[tuple[str, str]], dict[str, int]]:
    summary = json.loads(stdout.strip().splitlines()[-1])
    counts = {k: summary[k] for k in ("documents", "kept", "removed", "quarantined")}
    assert counts["documents"] == counts["kept"] + counts["removed"] + counts["quarantined"]
    frame = pd.read_parquet(out / "removed_ids")
    return sorted(frame[["id", "group"]].itertuples(index=False, name=None)), counts


class _Killer:
    """Polls the runs' files; SIGKILLs one worker (its nanny starts a new one) once in each
    phase: a pipeline's write (a part file is out, more to come), the LSH shuffle (signatures
    done, band groups still to do) and the candidate check (a verify step begun, not done)."""

    def __init__(self, client: Client, outputs: list[Path], caches: list[Path]) -> None:
        self.client = client
        self.outputs = outputs
        self.caches = caches
        self.killed: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.errors: list[BaseException] = []

    def __enter__(self) -> _Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _phase(self) -> tuple[str, str] | None:
        if "write" not in self.killed:
            for out in self.outputs:
                parts = list(out.glob("part-*.jsonl"))
                if 0 < len(parts) < 5:
                    return "write", f"{out.name}: {len(parts)} of 6 part files"
        for cache in self.caches:
            for run in cache.glob("fuzzy-*"):
                groups = len(list(run.glob("lsh/bands-*/_DONE")))
                if "lsh" not in self.killed and (run / "minhash/_DONE").exists() and groups < 6:
                    return "lsh", f"{cache.name}: {groups} of 6 band groups"
                for step in run.glob("verify-*"):
                    if "verify" not in self.killed and not (step / "_DONE").exists():
                        return "verify", f"{cache.name}: {step.name} begun"
        return None

    def _loop(self) -> None:
        try:
            while not self._stop.wait(0.01) and len(self.killed) < 3:
                found = self._phase()
                if found is None:
                    continue
                try:  # a worker that is starting again may not answer yet: ask again
                    pids = sorted(self.client.run(os.getpid).values())
                except Exception:
                    continue
                if not pids:
                    continue
                os.kill(pids[len(self.killed) % len(pids)], signal.SIGKILL)
                self.killed[found[0]] = found[1]
        except BaseException as e:  # reported by the test
            self.errors.append(e)


def test_concurrent_runs_with_worker_kills_equal_a_quiet_run_or_are_refused(
    tmp_path: Path,
) -> None:
    src = tmp_path / "in"
    _inputs(src)
    before = tree_digest(src)

    # the quiet single runs, one at a time, on local workers
    quiet_spec = _spec(tmp_path, src, tmp_path / "quiet")
    quiet = subprocess.run(
        [sys.executable, "-m", "curator_dask.cli", "run", str(quiet_spec), "--sequential", "-q"],
        cwd=tmp_path,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    want_run = _pipeline_result(tmp_path / "quiet")
    assert 0 < want_run[2]["removed"] < want_run[2]["read"] == 240
    quiet_f = _start([*_fuzzy(src, tmp_path / "quiet-f", tmp_path / "quiet-c"), "-q"], tmp_path)
    out, err = quiet_f.communicate(timeout=300)
    assert quiet_f.returncode == 0, err[-2000:]
    want_fuzzy = _fuzzy_result(tmp_path / "quiet-f", out)
    assert 0 < want_fuzzy[1]["removed"] < 240

    shared, own = tmp_path / "shared", tmp_path / "own"
    cache, own_cache = tmp_path / "cache", tmp_path / "own-cache"
    with (
        Cluster(tmp_path / "cluster", 2, ("--memory-limit", "1GB")) as cluster,
        Client(scheduler_file=str(cluster.scheduler_file), timeout="30s") as client,
    ):
        at = ["--scheduler-file", str(cluster.scheduler_file), "-q"]
        commands = {
            "run-1": ["run", str(_spec(tmp_path, src, shared)), *at],
            "run-2": ["run", str(_spec(tmp_path, src, shared)), *at],
            "run-own": ["run", str(_spec(tmp_path, src, own)), *at],
            "fuzzy-1": [*_fuzzy(src, tmp_path / "f1", cache), *at],
            "fuzzy-2": [*_fuzzy(src, tmp_path / "f2", cache), *at],
            "fuzzy-own": [*_fuzzy(src, tmp_path / "f-own", own_cache), *at],
        }
        with _Killer(client, [shared, own], [cache, own_cache]) as killer:
            procs = {name: _start(args, tmp_path) for name, args in commands.items()}
            done = {name: p.communicate(timeout=600) for name, p in procs.items()}
        assert killer.errors == []

    codes = {name: p.returncode for name, p in procs.items()}
    print(f"killed a worker during: {killer.killed}; exit codes: {codes}")
    assert sorted(killer.killed) == ["lsh", "verify", "write"], killer.killed
    for name, code in codes.items():
        stderr = done[name][1]
        if code != 0:  # a clean refusal, naming the holder
            assert code == 1, (name, stderr[-3000:])
            assert "is in use by run" in stderr, (name, stderr[-3000:])
            assert "pid " in stderr, (name, stderr[-3000:])
        assert "Traceback" not in stderr, (name, stderr[-3000:])
    assert codes["run-own"] == 0, codes
    assert codes["fuzzy-own"] == 0, codes
    assert 0 in (codes["run-1"], codes["run-2"]), codes
    assert 0 in (codes["fuzzy-1"], codes["fuzzy-2"]), codes

    assert _pipeline_result(shared) == want_run
    assert _pipeline_result(own) == want_run
    for name, out_dir in (("fuzzy-1", "f1"), ("fuzzy-2", "f2"), ("fuzzy-own", "f-own")):
        if codes[name] == 0:
            assert _fuzzy_result(tmp_path / out_dir, done[name][0]) == want_fuzzy, name
    assert tree_digest(src) == before
