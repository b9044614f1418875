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
    timed = [r for r in rows if r["cpu_ms"] != ""]
    assert len(timed) == 7
    assert all(r["cpu_ms"] >= 0 and r["corpus"] == "t" for r in timed)
    hashes, _ = minhash.shingle_hashes(pd.Series(docs), 3)
    assert f"{len(hashes) / len(docs):.0f} shingles a document" in rows[-1]["step"]


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
