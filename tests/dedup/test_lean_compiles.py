"""Dedup kernels compile lean on a fresh machine: once each, without numba's generic sort.

A machine's first run compiles every kernel it calls (issue 22 item 2: a fresh install's
first ``make demo`` spends at most 10 s compiling). What numba compiles along with a kernel
is seen on its ``numba:compile`` events, in a process whose numba cache is empty. The
kernels with C twins (``_ckernels``) are numba's where no C compiler builds those: the child
runs with ``curator.c-kernels: false``, so numba's compile as on such a machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Calls the kernels on tiny inputs; prints every (function, signature) numba compiled.
_CHILD = """
import json
import numba.core.event as ev
import numpy as np

compiled = []

class Seen(ev.Listener):
    def on_start(self, event):
        pass

    def on_end(self, event):
        d = event.data["dispatcher"]
        sig = [str(t) for t in event.data["args"]]
        compiled.append([f"{d.py_func.__module__}.{d.py_func.__qualname__}", sig])

ev.register("numba:compile", Seen())
from curator_dask.dedup import minhash
from curator_dask.dedup.components import components_in_memory

hashes = np.array([9, 3, 3, 7, 1, 5, 5, 2], dtype=np.uint64)
sets, offsets = minhash.unique_shingles(hashes, np.array([0, 5, 8], dtype=np.int64))
assert sets.tolist() == [1, 3, 7, 9, 2, 5], sets
components_in_memory(np.array([1, 2], dtype=np.int64), np.array([2, 3], dtype=np.int64))
assert minhash._is_pair(np.array([5, 9], dtype=np.int64), 0, 9)
print(json.dumps(compiled))
"""


def test_dedup_kernels_compile_once_each_without_numbas_sort(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),  # a machine that never compiled them
        "DASK_CURATOR__CACHE_DIR": str(tmp_path / "curator"),
        "DASK_CURATOR__C_KERNELS": "false",  # numba's kernels, not their C twins
    }
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    compiled = json.loads(proc.stdout.strip().splitlines()[-1])
    names = [name for name, _ in compiled]
    # the per-document sort is written out: numba's quicksort (its partition, insertion
    # sort and comparison helpers) and searchsorted are not compiled
    assert not [n for n in names if "quicksort" in n or "searchsorted" in n], names
    ours = [(n, sig) for n, sig in compiled if n.startswith("curator_dask.")]
    assert "curator_dask.dedup.minhash._sort_range" in names
    # each of our kernels and helpers compiles for one signature: no second copy for a
    # count typed as the literal 0 (lsh._push_edge: tests/test_kernels_compile.py), none
    # for int32 beside int64 slots
    twice = [n for n, k in Counter(n for n, _ in ours).items() if k > 1]
    assert not twice, ours
    assert not [s for _, s in ours if any("Literal" in t for t in s)], ours
