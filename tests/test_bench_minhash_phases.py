"""bench/bench_minhash.py --phases: every step of the text-to-signature split is timed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import bench_minhash  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from curator_dask.dedup import minhash  # noqa: E402


def test_phases_time_every_step_of_text_to_signatures():
    docs = [
        "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over it.",
        "Съешь же ещё этих мягких французских булок, да выпей чаю.",
        "我能吞下玻璃而不伤身体。我能吞下玻璃而不伤身体。",
        "",
    ]
    rows = bench_minhash.phases("t", docs, argparse.Namespace(ngram=3, num_hashes=16))
    steps = [r["step"].strip() for r in rows]
    assert steps[0] == "text -> signatures"
    assert any(s.startswith("word kernel") for s in steps)
    assert any(s.startswith("signatures of distinct shingles") for s in steps)
    assert any(s.startswith("floor: FNV-1a") for s in steps)
    timed = [r for r in rows if r["cpu_ms"] != ""]
    assert len(timed) == 8
    assert all(r["cpu_ms"] >= 0 and r["corpus"] == "t" for r in timed)
    hashes, _ = minhash.shingle_hashes(pd.Series(docs), 3)
    assert f"{len(hashes) / len(docs):.0f} shingles a document" in rows[-2]["step"]
    assert rows[-1]["step"].strip().startswith("caps, docs/CPU-s: permutations alone")


def test_the_byte_chain_floor_is_fnv1a_over_every_byte():
    data = np.frombuffer("ab, Ü".encode(), dtype=np.uint8)
    h = 0xCBF29CE484222325
    for b in data.tolist():
        h = ((h ^ b) * 0x100000001B3) % 2**64
    assert int(bench_minhash._fnv_chain(data)) == h


def test_rolling_helper_is_the_kernels_rolling_hash():
    # the bench's stand-alone rolling step over each document's token values gives the word
    # kernel's shingles when fed the kernel's own token hashes (FNV-1a of each token)
    tokens = [["a", "bb", "ccc", "dd", "e"], ["x"], [], ["p", "q", "r", "s"]]
    fnv = []
    for doc in tokens:
        for t in doc:
            h = 0xCBF29CE484222325
            for b in t.encode():
                h = ((h ^ b) * 0x100000001B3) % 2**64
            fnv.append(h)
    values = np.array(fnv, dtype=np.uint64)
    offsets = np.cumsum([0] + [len(d) for d in tokens]).astype(np.int64)
    out = np.empty(len(values) + len(tokens), dtype=np.uint64)
    n = bench_minhash._roll_all(values, offsets, 3, out)
    want, _ = minhash.shingle_hashes(pd.Series([" ".join(d) for d in tokens]), 3)
    assert out[:n].tolist() == want.tolist()


def _args(**kw):
    base = {"docs": 3, "num_hashes": 16, "ngram": 3, "rounds": 1, "repeat": 1}
    return argparse.Namespace(**{**base, "checkout": str(ROOT), **kw})


@pytest.fixture
def small_corpora(monkeypatch):
    """The bench's corpora cut to a few documents of their kind (loading them is slow)."""
    texts = {
        "multilingual": [
            "Съешь же ещё этих мягких булок, да выпей чаю.",
            "我能吞下玻璃而不伤身体。",
        ],
        "english": ["The quick brown fox jumps over the lazy dog, twice over again."],
    }
    for name, t in texts.items():
        monkeypatch.setattr(bench_minhash, f"{name}_docs", lambda n, t=t: (t * n)[:n])
    return texts


def test_one_timing_process_reports_its_package_and_its_signatures(small_corpora):
    got = bench_minhash.main(["--time-text", "english", "--docs", "3", "--num-hashes", "16"])
    assert got["package"] == str(ROOT)  # the package on this process's path: this checkout
    docs = pd.Series(small_corpora["english"] * 3, dtype=pd.StringDtype("pyarrow"))
    perms = minhash.minhash_permutations(16, 42)
    sig = minhash.minhash_signatures(*minhash.shingle_hashes(docs, 5), perms)
    import hashlib

    assert got["digest"] == hashlib.sha256(sig.tobytes()).hexdigest()[:16]
    assert got["cpu_s"] > 0


def test_checkouts_alternate_and_refuse_different_signatures(monkeypatch, tmp_path, small_corpora):
    import json
    import subprocess

    calls = []

    def run(cmd, env, **kw):  # the timing process, run here, as the given checkout's
        calls.append(env["PYTHONPATH"])
        got = bench_minhash.main(cmd[2:])
        got["package"] = env["PYTHONPATH"]
        if env["PYTHONPATH"] == str(tmp_path) and other_differs:
            got["digest"] = "0" * 16
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(got) + "\n")

    monkeypatch.setattr(subprocess, "run", run)
    other_differs = False
    rows = bench_minhash.checkouts(_args(checkout=str(tmp_path), repeat=2))
    # per corpus: ours, the other, ours, the other
    assert calls == [str(ROOT), str(tmp_path)] * 4
    assert [(r["corpus"], r["package"]) for r in rows] == [
        ("multilingual", "this checkout"),
        ("multilingual", str(tmp_path)),
        ("english", "this checkout"),
        ("english", str(tmp_path)),
    ]
    assert rows[0]["ours_vs"] == 1.0
    assert rows[0]["signatures"] == rows[1]["signatures"]
    other_differs = True
    with pytest.raises(AssertionError, match="signatures differ"):
        bench_minhash.checkouts(_args(checkout=str(tmp_path)))
