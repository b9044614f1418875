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


# On a machine that never compiled them: a package kernel, a function of the user's own, then
# another package kernel with NUMBA_OPT set; prints numba's optimisation level as each
# compile started, and after.
_OPT_CHILD = """
import json, os
import numba
import numba.core.event as ev
import numpy as np
from curator_dask._text_kernels import doc_hashes, gather_strings

seen = {}

class Levels(ev.Listener):
    def on_start(self, event):
        seen.setdefault(event.data["dispatcher"].py_func.__name__, int(numba.config.OPT))

    def on_end(self, event):
        pass

ev.register("numba:compile", Levels())
offsets, data = np.array([0, 2, 3], dtype=np.int64), np.frombuffer(b"abc", dtype=np.uint8)
gather_strings(offsets, data, np.array([1, 0], dtype=np.int64))
numba.njit(lambda x: x + 1)(1)
after = int(numba.config.OPT)
os.environ["NUMBA_OPT"] = "3"
doc_hashes(offsets, data, np.zeros(0, dtype=np.uint64))
print(json.dumps({"seen": seen, "after": after}))
"""


def test_kernels_compile_at_the_package_opt_level_and_leave_numbas_own(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_OPT"}
    env.update(
        PYTHONPATH=str(ROOT),
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),  # a machine that never compiled them
        DASK_CURATOR__CACHE_DIR=str(tmp_path / "curator"),
    )
    out = subprocess.run(
        [sys.executable, "-c", _OPT_CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["seen"]["gather_strings"] < 3  # the package's kernel: a cheaper level
    from curator_dask._kernels import KERNEL_OPT

    assert got["seen"]["gather_strings"] == KERNEL_OPT
    assert got["seen"]["<lambda>"] == 3  # the user's own function: numba's default
    assert got["after"] == 3
    assert got["seen"]["doc_hashes"] == 3  # NUMBA_OPT in the environment wins


def test_a_helper_called_from_python_raises_instead_of_crashing() -> None:
    import dask
    import numpy as np
    import pandas as pd
    import pytest

    from curator_dask import _text_kernels, text

    data = np.frombuffer(b"http://x", dtype=np.uint8)
    with pytest.raises(TypeError, match="helper of numba kernels"):
        _text_kernels._url_prefix(data, 0, len(data))
    # a kernel calls it: URLs at the ends of a text, cut short, or with a non-ASCII tail
    cases = ["http://", "http://x", "https://", "https://x y", "see www.", "www.a", "ftp://a b"]
    cases += ["ftp:/a", "htt", "x https://é.fr/ü z", "a http:// b", "wwwx.y", "httpss://x"]
    for c_kernels in (False, "auto"):  # numba's kernel, then its C twin where a compiler is
        text.clear_measures()
        with dask.config.set({"curator.c-kernels": c_kernels}):
            got = text.document_measures(pd.Series(cases))["url_chars"].tolist()
        assert got == [0, 8, 0, 9, 0, 5, 7, 0, 0, 14, 0, 0, 0], c_kernels
    text.clear_measures()


def test_a_numba_cache_without_the_private_loader_loads_numbas_own_way() -> None:
    # the lean load reaches into numba's cache (``_load_overload``); a numba without it
    # must get its own public ``load_overload``, not an AttributeError mid-run
    from curator_dask._kernels import _lean_load

    class OtherNumbasCache:
        def load_overload(self, sig: object, target_context: object) -> object:
            return ("numba's own", sig, target_context)

    load = _lean_load(OtherNumbasCache())
    assert load("sig", "ctx") == ("numba's own", "sig", "ctx")
