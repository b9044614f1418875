"""A kernel compiles once per machine: processes that need it at once share one compile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Waits for the go file, then calls the kernel; prints its compile statistics.
_CHILD = """
import json, os, sys, time
import numpy as np
from curator_dask.dedup.lsh import _push_edge, _verify_anchors
open(sys.argv[1] + ".ready", "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
i64 = np.array([0, 2], dtype=np.int64)
_verify_anchors(i64, i64 + 2, np.arange(4, dtype=np.uint64), i64, i64 + 1, 0.8, 4)
stats = _verify_anchors.stats
misses, hits = sum(stats.cache_misses.values()), sum(stats.cache_hits.values())
helper = [str(sig) for sig in _push_edge.overloads]  # typed by the compile, not a load
print(json.dumps({"misses": misses, "hits": hits, "push_edge": helper}))
"""


def test_processes_that_start_together_compile_a_kernel_once(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),  # a machine that never compiled it
        "DASK_CURATOR__CACHE_DIR": str(tmp_path / "curator"),
    }
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path / f"child{i}"), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"child{i}.ready").exists() for i in range(3)):
        assert time.monotonic() < deadline, [p.poll() for p in procs]
        time.sleep(0.05)
    go.touch()  # all three need the kernel now
    stats = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        stats.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(s["misses"] for s in stats) == 1, stats  # one compiled it
    assert sum(s["hits"] for s in stats) == 2, stats  # the others loaded it
    # its helper compiled once, for int64: not again for a count still typed as literal 0
    assert [s["push_edge"] for s in stats if s["misses"]] == [
        [
            "(Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, "
            "aligned=True), int64, int64, int64)"
        ]
    ], stats
