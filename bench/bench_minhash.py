"""MinHash signature throughput on one core: curator_dask vs rensa and datasketch.

    python bench/bench_minhash.py [--docs 20000] [--peer-docs 2000] [--num-hashes 260]
                                  [--baseline REV] [--phases] [--checkout DIR]

``--baseline REV`` adds, in the same run, our text-to-signature rows with
``curator_dask/dedup/minhash.py`` as it was at git revision ``REV`` (impl
``curator_dask@REV``), and checks that both give the same signatures.
``--checkout DIR`` (with ``git worktree add --detach DIR REV``) times only text to
signatures, of this checkout's whole package and of ``DIR``'s, in processes of their own
that alternate, and checks that both give the same signatures: a regression check in which
nothing of the other revision is borrowed from this one.

Two measurements, every implementation in the same run, CPU seconds of this process (the box
may be shared; CPU time is what one core delivers), numba and rayon held to one thread:

- **kernel**: signatures from identical ``uint64`` shingle hashes (ours, rensa's
  ``RMinHash.digest_matrix_from_flat_token_hashes``, datasketch ``MinHash.bulk`` with the
  hash values as given).
- **raw text**: from the documents' text to signatures, word 5-grams after the ``"simple"``
  normalisation (NFKC, lower-case, ``[\\W_]+`` -> space). The peers take tokens, so their
  runs include the same normalisation and shingling in Python (rensa:
  ``digest_matrix_from_token_sets``; datasketch: ``MinHash.bulk``).

A third measurement, **length sweep**: identical random shingle hashes, every document of
exactly ``L`` shingles (16 to 1,024), ours and rensa. ``gpairs_per_cpu_s`` is shingles x
permutations per CPU-second (billions): our kernel evaluates every pair (``k`` independent
``(a*x + b) >> 32`` functions, the hash family our caches and signatures rest on), so its
figure is flat and its docs/s falls as 1/L; rensa 0.5's R-MinHash is a bucketed sketch (each
shingle updates a few buckets, affine hashes only for buckets left empty, after Fast
Similarity Sketching), whose cost hardly grows with L, so its nominal figure grows with L and
is not the rate of a k-function kernel. Its signatures are a different function of the input.

With ``--phases``, the text-to-signature time of each corpus split into its steps (ours only,
CPU seconds, best of several runs): the Arrow buffers; the word kernel, which normalises,
tokenises, hashes the tokens (FNV-1a) and rolls the shingle hashes in one pass; the same kernel
on the text normalised beforehand (``raw``: no normalisation tables), so that normalisation is
the difference; the rolling shingle hash alone over one value per token; the signature kernel
as called (its pass over each document's distinct shingles, then the permutations); and the
signature kernel on each document's distinct shingles given (the permutations alone). Two
rates say how near each kernel is to its floor: the permutations' G pairs per CPU-second
(distinct shingles x permutations), and ns a byte of the word kernel against a bare FNV-1a
chain over the same bytes (one dependent multiply a byte, nothing else). The last line
gives the docs/CPU-s caps they imply: the permutations alone, and the permutations plus the
bare chain (shingling at its floor).

Corpora: ``multilingual`` -- real sentences in 60-odd languages, the example sentences
shipped with spaCy (``spacy.lang.*.examples``); each document is one language's sentences
in random order, 200-1,200 characters. ``english`` -- public-corpus documents of 150-300
words (the shipped sample when the corpus is absent). Our input is a pandas Series of the
readers' dtype (``string[pyarrow]``); the peers get the same documents as Python strings.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import numba
import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dedup_common import SAMPLE, have_corpus, load, table, write_json

from curator_dask.dedup import minhash
from curator_dask.dedup.minhash import (
    _normalize_one,
    minhash_permutations,
    minhash_signatures,
    shingle_hashes,
)


def multilingual_docs(n: int, seed: int = 0) -> list[str]:
    import spacy.lang

    by_lang = {}
    for m in pkgutil.iter_modules(spacy.lang.__path__):
        try:
            ex = importlib.import_module(f"spacy.lang.{m.name}.examples")
        except ImportError:
            continue
        sents = [s for s in getattr(ex, "sentences", []) if isinstance(s, str)]
        if sents:
            by_lang[m.name] = sents
    langs = sorted(by_lang)
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n):
        sents = by_lang[langs[rng.integers(len(langs))]]
        target = rng.integers(200, 1200)
        parts: list[str] = []
        size = 0
        while size < target:
            s = sents[rng.integers(len(sents))]
            parts.append(s)
            size += len(s) + 1
        docs.append(" ".join(parts))
    return docs


def english_docs(n: int, seed: int = 0) -> list[str]:
    recs = load() if have_corpus() else load(SAMPLE)
    texts = [r["text"] for r in recs if 150 <= len(r["text"].split()) <= 300]
    pick = np.random.default_rng(seed).choice(len(texts), size=n, replace=len(texts) < n)
    return [texts[i] for i in pick]


def shingle_strings(text: str, k: int) -> list[str]:
    toks = _normalize_one(text).split()
    if len(toks) < k:
        return [" ".join(toks)] if toks else []
    return [" ".join(toks[i : i + k]) for i in range(len(toks) - k + 1)]


def _fold32(x: int) -> int:
    # the 32-bit fold our kernel applies, so that datasketch's affine32 scheme sees it too
    return (x ^ (x >> 32)) & 0xFFFFFFFF


def cpu(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def baseline_module(rev: str):  # type: ignore[no-untyped-def]
    """``curator_dask.dedup.minhash`` as it was at git revision ``rev``, imported apart."""
    import importlib.util
    import subprocess
    import tempfile

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = subprocess.run(
        ["git", "-C", root, "show", f"{rev}:curator_dask/dedup/minhash.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = os.path.join(tempfile.mkdtemp(prefix="bench_minhash_"), f"minhash_{rev}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"minhash_{rev}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_corpus(name: str, docs: list[str], args: argparse.Namespace) -> list[dict]:
    import rensa
    from datasketch import MinHash

    k, ng = args.num_hashes, args.ngram
    # the readers' string dtype (Arrow-backed): the kernels read its buffers without a copy
    text = pd.Series(docs, dtype=pd.StringDtype("pyarrow"))
    peer = docs[: args.peer_docs]
    mb = {"all": sum(len(d.encode()) for d in docs) / 1e6}
    mb["peer"] = sum(len(d.encode()) for d in peer) / 1e6
    perms = minhash_permutations(k, 42)
    hashes, offsets = shingle_hashes(text, ng)
    minhash_signatures(hashes[:100], offsets[:2], perms)  # compile
    rows = []

    def row(what: str, impl: str, n: int, megabytes: float, sec: float) -> None:
        rows.append(
            {
                "corpus": name,
                "input": what,
                "impl": impl,
                "docs": n,
                "cpu_s": round(sec, 3),
                "docs_per_cpu_s": round(n / sec),
                "mb_per_cpu_s": round(megabytes / sec, 1),
                "gpairs_per_cpu_s": round(int(offsets[n] - offsets[0]) * k / sec / 1e9, 2),
            }
        )

    # kernel only: the same shingle hashes for everybody
    row(
        "hashes",
        "curator_dask",
        len(docs),
        mb["all"],
        cpu(lambda: minhash_signatures(hashes, offsets, perms)),
    )
    off_u = offsets.astype(np.uint64)
    row(
        "hashes",
        "rensa",
        len(docs),
        mb["all"],
        cpu(
            lambda: rensa.RMinHash.digest_matrix_from_flat_token_hashes(
                hashes, off_u, num_perm=k, seed=42
            )
        ),
    )
    n_peer = len(peer)
    per_doc = [hashes[offsets[i] : offsets[i + 1]].tolist() for i in range(n_peer)]
    row(
        "hashes",
        "datasketch",
        n_peer,
        mb["peer"],
        cpu(lambda: MinHash.bulk(per_doc, num_perm=k, seed=42, hashfunc=_fold32), 1),
    )

    # from raw text
    if args.baseline:
        # the baseline's runs alternate with ours, so that both see the same load
        old = baseline_module(args.baseline)
        ours_sig = minhash_signatures(*shingle_hashes(text, ng), perms)
        old_sig = old.minhash_signatures(*old.shingle_hashes(text, ng), perms)
        assert np.array_equal(ours_sig, old_sig), "signatures differ from the baseline's"
        best = {"new": float("inf"), "old": float("inf")}
        for _ in range(5):
            best["new"] = min(
                best["new"], cpu(lambda: minhash_signatures(*shingle_hashes(text, ng), perms), 1)
            )
            best["old"] = min(
                best["old"],
                cpu(lambda: old.minhash_signatures(*old.shingle_hashes(text, ng), perms), 1),
            )
        row("text", "curator_dask", len(docs), mb["all"], best["new"])
        row("text", f"curator_dask@{args.baseline}", len(docs), mb["all"], best["old"])
    else:
        row(
            "text",
            "curator_dask",
            len(docs),
            mb["all"],
            cpu(lambda: minhash_signatures(*shingle_hashes(text, ng), perms)),
        )
    row(
        "text",
        "rensa",
        n_peer,
        mb["peer"],
        cpu(
            lambda: rensa.RMinHash.digest_matrix_from_token_sets(
                [shingle_strings(d, ng) for d in peer], num_perm=k, seed=42
            ),
            1,
        ),
    )
    row(
        "text",
        "datasketch",
        n_peer,
        mb["peer"],
        cpu(
            lambda: MinHash.bulk(
                [[s.encode() for s in shingle_strings(d, ng)] for d in peer], num_perm=k, seed=42
            ),
            1,
        ),
    )
    return rows


@numba.njit(nogil=True)
def _roll_all(values, offsets, ngram, out):  # pragma: no cover - compiled
    """The kernel's rolling shingle hash over each document's ``values`` (one per token)."""
    top = minhash._poly_top(ngram)
    pos = 0
    for i in range(len(offsets) - 1):
        s, e = offsets[i], offsets[i + 1]
        pos = minhash._rolling_shingles(values[s:e], e - s, ngram, top, out, pos)
    return pos


@numba.njit(nogil=True)
def _fnv_chain(data):  # pragma: no cover - compiled
    """FNV-1a over every byte as one chain of dependent multiplies: no table, no token, no
    store. The floor of any word kernel that hashes each byte of its output this way."""
    h = minhash.FNV_OFFSET
    for p in range(len(data)):
        h = (h ^ np.uint64(data[p])) * minhash.FNV_PRIME
    return h


def phases(name: str, docs: list[str], args: argparse.Namespace) -> list[dict]:
    """Where our text-to-signature time goes, step by step (see the module docstring)."""
    from curator_dask.dedup._normtables import norm_tables

    ng, n = args.ngram, len(docs)
    text = pd.Series(docs, dtype=pd.StringDtype("pyarrow"))
    perms = minhash_permutations(args.num_hashes, 42)
    tables = tuple(norm_tables())
    fast = minhash._fast_table()
    data, offsets = minhash.utf8_buffers(text)
    norm_data, norm_offsets = minhash.utf8_buffers(minhash.normalize_text(text))
    hashes, shingle_off = shingle_hashes(text, ng)
    tokens, token_off = minhash._word_shingles(norm_data, norm_offsets, True, tables, *fast, 1)[:2]
    distinct, distinct_off = minhash.unique_shingles(hashes, shingle_off)
    out = np.empty(len(tokens) + n, dtype=np.uint64)
    steps = [
        ("text -> signatures", lambda: minhash_signatures(*shingle_hashes(text, ng), perms)),
        ("  Arrow buffers", lambda: minhash.utf8_buffers(text)),
        (
            "  word kernel: normalise, tokenise, hash tokens, roll shingles",
            lambda: minhash._word_shingles(data, offsets, False, tables, *fast, ng),
        ),
        (
            "    the same on normalised text (no normalisation)",
            lambda: minhash._word_shingles(norm_data, norm_offsets, True, tables, *fast, ng),
        ),
        (
            "    rolling shingle hash alone (one value a token)",
            lambda: _roll_all(tokens, token_off, ng, out),
        ),
        ("    floor: FNV-1a's multiply chain over every byte", lambda: _fnv_chain(data)),
        (
            "  signatures (distinct pass + permutations)",
            lambda: minhash_signatures(hashes, shingle_off, perms),
        ),
        (
            "    signatures of distinct shingles given",
            lambda: minhash_signatures(distinct, distinct_off, perms),
        ),
    ]
    for _, fn in steps:
        fn()  # compile
    rows = []
    for step, fn in steps:
        sec = cpu(fn, 7)
        rows.append(
            {
                "corpus": name,
                "step": step,
                "cpu_ms": round(sec * 1e3, 1),
                "us_per_doc": round(sec / n * 1e6, 2),
            }
        )
    total = rows[0]["cpu_ms"]
    for r in rows:
        r["share"] = f"{r['cpu_ms'] / total:.0%}" if total else ""
        r["rate"] = ""
    # the two floors: ns a byte of FNV-1a's chain, G pairs a CPU-second of the permutations
    sec = {r["step"].strip(): r["cpu_ms"] / 1e3 for r in rows}
    by_step = {r["step"].strip(): r for r in rows}
    for step, r in by_step.items():
        if step.startswith(("word kernel", "the same on", "floor")) and sec[step]:
            nbytes = len(norm_data) if step.startswith("the same on") else len(data)
            r["rate"] = f"{sec[step] / max(nbytes, 1) * 1e9:.2f} ns/byte"
    pairs = len(distinct) * args.num_hashes
    perm = "signatures of distinct shingles given"
    if sec[perm]:
        by_step[perm]["rate"] = f"{pairs / sec[perm] / 1e9:.2f} G pairs/s"
    floors = sec[perm] + sec["floor: FNV-1a's multiply chain over every byte"]
    rows.append(
        {
            "corpus": name,
            "step": f"  ({len(hashes) / n:.0f} shingles a document, {len(distinct) / n:.0f} "
            f"distinct, {len(tokens) / n:.0f} tokens, {len(data) / n:.0f} bytes)",
            "cpu_ms": "",
            "us_per_doc": "",
            "share": "",
            "rate": "",
        }
    )
    rows.append(
        {
            "corpus": name,
            "step": "  caps, docs/CPU-s: permutations alone "
            + (f"{n / sec[perm]:,.0f}" if sec[perm] else "-")
            + ", permutations + the byte chain "
            + (f"{n / floors:,.0f}" if floors else "-"),
            "cpu_ms": "",
            "us_per_doc": "",
            "share": "",
            "rate": "",
        }
    )
    return rows


def time_text(corpus: str, args: argparse.Namespace) -> dict:
    """Best-of-``args.rounds`` CPU seconds of text -> signatures with whatever
    ``curator_dask`` this process imports, and a digest of the signatures."""
    import hashlib

    import curator_dask

    docs = multilingual_docs(args.docs) if corpus == "multilingual" else english_docs(args.docs)
    text = pd.Series(docs, dtype=pd.StringDtype("pyarrow"))
    perms = minhash_permutations(args.num_hashes, 42)
    sig = minhash_signatures(*shingle_hashes(text, args.ngram), perms)  # compile, warm
    sec = cpu(lambda: minhash_signatures(*shingle_hashes(text, args.ngram), perms), args.rounds)
    return {
        "package": os.path.dirname(os.path.dirname(os.path.abspath(curator_dask.__file__))),
        "cpu_s": sec,
        "digest": hashlib.sha256(sig.tobytes()).hexdigest()[:16],
    }


def checkouts(args: argparse.Namespace) -> list[dict]:
    """Text -> signatures of this checkout's whole package and of ``args.checkout``'s, each in
    a process of its own, the two alternating (``--repeat`` times each, best kept), on the
    same corpora; their signatures must be equal. Unlike ``--baseline`` (only ``minhash.py``
    swapped) the other checkout's normalisation tables and kernel helpers are its own."""
    import json
    import subprocess

    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this checkout": ours, args.checkout: os.path.abspath(args.checkout)}
    rows = []
    for name in ("multilingual", "english"):
        best: dict[str, dict] = {}
        for _ in range(args.repeat):
            for label, root in trees.items():
                env = dict(os.environ, PYTHONPATH=root)
                cmd = [sys.executable, os.path.abspath(__file__), "--time-text", name]
                cmd += ["--docs", str(args.docs), "--num-hashes", str(args.num_hashes)]
                cmd += ["--ngram", str(args.ngram), "--rounds", str(args.rounds)]
                out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
                got = json.loads(out.stdout.strip().splitlines()[-1])
                assert got["package"] == root, f"{label}: imported {got['package']}"
                if label not in best or got["cpu_s"] < best[label]["cpu_s"]:
                    best[label] = got
        digests = {b["digest"] for b in best.values()}
        assert len(digests) == 1, f"{name}: the checkouts' signatures differ"
        for label, b in best.items():
            rows.append(
                {
                    "corpus": name,
                    "package": label,
                    "docs": args.docs,
                    "cpu_s": round(b["cpu_s"], 4),
                    "docs_per_cpu_s": round(args.docs / b["cpu_s"]),
                    "ours_vs": round(b["cpu_s"] / best["this checkout"]["cpu_s"], 2),
                    "signatures": b["digest"],
                }
            )
    return rows


def length_sweep(args: argparse.Namespace) -> list[dict]:
    """Identical random shingle hashes, documents of exactly L shingles: ours and rensa."""
    import rensa

    k = args.num_hashes
    perms = minhash_permutations(k, 42)
    rng = np.random.default_rng(1)
    rows = []
    for length in (16, 64, 256, 1024):
        n = max(500, args.docs * 200 // length)
        offsets = np.arange(n + 1, dtype=np.int64) * length
        hashes = rng.integers(0, 2**64 - 1, size=n * length, dtype=np.uint64, endpoint=True)
        off_u = offsets.astype(np.uint64)
        runs = {
            "curator_dask": lambda h=hashes, o=offsets: minhash_signatures(h, o, perms),
            "rensa": lambda h=hashes, o=off_u: rensa.RMinHash.digest_matrix_from_flat_token_hashes(
                h, o, num_perm=k, seed=42
            ),
        }
        for impl, fn in runs.items():
            sec = cpu(fn)
            rows.append(
                {
                    "corpus": f"random L={length}",
                    "input": "hashes",
                    "impl": impl,
                    "docs": n,
                    "cpu_s": round(sec, 3),
                    "docs_per_cpu_s": round(n / sec),
                    "mb_per_cpu_s": "",
                    "gpairs_per_cpu_s": round(n * length * k / sec / 1e9, 2),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--peer-docs", type=int, default=2000)
    ap.add_argument("--num-hashes", type=int, default=260)
    ap.add_argument("--ngram", type=int, default=5)
    ap.add_argument("--baseline", default=None, help="git revision to compare against")
    ap.add_argument(
        "--phases", action="store_true", help="only the split of our time into its steps"
    )
    ap.add_argument(
        "--checkout",
        default=None,
        help="another checkout's directory: only text -> signatures of its whole package "
        "against this one's, each in processes of its own, alternating",
    )
    ap.add_argument("--repeat", type=int, default=5, help="--checkout: processes per checkout")
    ap.add_argument("--rounds", type=int, default=15, help="--checkout: timed runs a process")
    ap.add_argument("--time-text", default=None, help=argparse.SUPPRESS)  # one such process
    args = ap.parse_args(argv)
    if args.time_text:
        import json

        got = time_text(args.time_text, args)
        print(json.dumps(got))
        return got
    if args.checkout:
        rows = checkouts(args)
        print(
            f"Text -> signatures, this checkout's package against {args.checkout}'s, each in "
            f"processes of its own ({args.repeat} alternating, best of {args.rounds} runs "
            f"each), {args.docs} documents, one core (CPU seconds)"
        )
        cols = ["corpus", "package", "docs", "cpu_s", "docs_per_cpu_s", "ours_vs", "signatures"]
        print(table(rows, cols))
        print("ours_vs: this row's CPU seconds divided by this checkout's (above 1: slower)")
        payload = {"checkouts": rows, "checkout": args.checkout, "repeat": args.repeat}
        print("wrote", write_json("bench_minhash_checkout", payload))
        return payload
    from importlib.metadata import version

    corpora = {"multilingual": multilingual_docs(args.docs), "english": english_docs(args.docs)}
    if args.phases:
        split = [r for name, docs in corpora.items() for r in phases(name, docs, args)]
        print(
            f"Where the text-to-signature time goes: word {args.ngram}-grams, "
            f"{args.num_hashes} hashes, {args.docs} documents, one core (CPU ms, best of 7)"
        )
        print(table(split, ["corpus", "step", "cpu_ms", "us_per_doc", "share", "rate"]))
        payload = {"phases": split, "num_hashes": args.num_hashes, "ngram": args.ngram}
        print("wrote", write_json("bench_minhash_phases", payload))
        return payload
    rows: list[dict] = []
    info = {}
    for name, docs in corpora.items():
        _, o = shingle_hashes(pd.Series(docs[:2000], dtype=object), args.ngram)
        info[name] = {
            "mean_chars": round(float(np.mean([len(d) for d in docs]))),
            "mean_bytes": round(float(np.mean([len(d.encode()) for d in docs]))),
            "mean_shingles": round(float(np.diff(o).mean()), 1),
        }
        rows += run_corpus(name, docs, args)
    rows += length_sweep(args)
    ratios = {}
    for r in rows:
        ours = next(
            x
            for x in rows
            if x["corpus"] == r["corpus"]
            and x["input"] == r["input"]
            and x["impl"] == "curator_dask"
        )
        r["ours_vs"] = round(ours["docs_per_cpu_s"] / r["docs_per_cpu_s"], 2)
        ratios[f"{r['corpus']}/{r['input']}/{r['impl']}"] = r["ours_vs"]
    from curator_dask.dedup.minhash import _vector_mul64

    kernel = "64-bit lanes (AVX-512DQ)" if _vector_mul64() else "32-bit halves"
    print(
        f"MinHash signatures, word {args.ngram}-grams, {args.num_hashes} hashes, one core "
        f"(CPU seconds of this process; the box may be shared). rensa "
        f"{version('rensa')}, datasketch {version('datasketch')}; our 32-bit kernel: {kernel}"
    )
    for name, i in info.items():
        print(
            f"  {name}: mean {i['mean_chars']} chars, {i['mean_bytes']} bytes, "
            f"{i['mean_shingles']} shingles per document"
        )
    cols = [
        "corpus",
        "input",
        "impl",
        "docs",
        "cpu_s",
        "docs_per_cpu_s",
        "mb_per_cpu_s",
        "gpairs_per_cpu_s",
        "ours_vs",
    ]
    print(table(rows, cols))
    print("ours_vs: curator_dask docs/s divided by this row's docs/s (same corpus and input)")
    print(
        "gpairs_per_cpu_s: shingles x permutations per CPU-second, in billions (nominal for "
        "rensa, whose bucketed sketch does not evaluate every pair)"
    )
    payload = {
        "rows": rows,
        "ratios": ratios,
        "corpora": info,
        "num_hashes": args.num_hashes,
        "ngram": args.ngram,
        "peers": {"rensa": version("rensa"), "datasketch": version("datasketch")},
        "kernel": kernel,
        "baseline": args.baseline,
    }
    print("wrote", write_json("bench_minhash", payload))
    return payload


if __name__ == "__main__":
    main()
