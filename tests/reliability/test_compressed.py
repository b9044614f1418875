"""Corrupt and truncated compressed inputs: nothing kept is altered, nothing disappears.

Each case writes 600 documents (some too short for the filter) compressed one way, damages
the file, and runs the same pipeline through the library and through ``curator-dask run``.
The audit reads the output and quarantine files back and checks that every input document
is kept unaltered, removed by the filter, or quarantined, and that
``read = kept + removed + quarantined``.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard
from _audit import MIN_WORDS, Audit, doc_hash, run_cli, run_library

N = 600
WORDS = ["river", "stone", "cloud", "amber", "north", "quiet", "lantern", "meadow"]


def _docs(seed: int = 0, n_docs: int = N) -> list[dict[str, str]]:
    docs = []
    for i in range(n_docs):
        n = 1 + (i * 7 + seed) % 40  # some below MIN_WORDS
        text = " ".join(WORDS[(i * j + seed) % len(WORDS)] for j in range(n)) + f" #{i}"
        docs.append({"id": f"doc-{i}", "text": text})
    return docs


def _body(docs: list[dict[str, str]]) -> bytes:
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(data)


COMPRESSORS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": (".gz", gzip.compress),
    "zstd": (".zst", _zstd),
    "bz2": (".bz2", lambda b: bz2.compress(b, 1)),
    "xz": (".xz", lzma.compress),
}


def _flip(data: bytes, at: float) -> bytes:
    out = bytearray(data)
    out[int(len(out) * at)] ^= 0x10
    return bytes(out)


def _check(audit: Audit, docs: list[dict[str, str]], intact: set[int], min_doubt: int = 0) -> None:
    """``intact``: indexes of the documents that must be accounted for exactly;
    ``min_doubt``: at least this many lines decoded from the damaged part are quarantined
    one by one (the part decoded before the error was found)."""
    audit.balanced()
    by_hash = {doc_hash(d["id"], d["text"]): i for i, d in enumerate(docs)}
    kept = [by_hash.get(doc_hash(d["id"], d["text"])) for d in audit.kept]
    assert None not in kept, "a kept document is not one of the input's: it was altered"
    long_enough = {i for i, d in enumerate(docs) if len(d["text"].split()) >= MIN_WORDS}
    assert set(kept) & intact == long_enough & intact  # the intact ones are all kept
    assert set(kept) <= intact  # nothing from the damaged part is kept
    # the damaged part is in the quarantine: one row per decoded line, and one for the rest
    doubt = [q for q in audit.quarantine if "may be altered" in q["reason"]]
    tails = [q for q in audit.quarantine if "unreadable tail" in q["reason"]]
    assert len(tails) == 1
    assert len(doubt) >= min_doubt
    for q in doubt:  # each is a whole line as decoded, kept for inspection
        assert q["raw"]
        assert "\n" not in q["raw"]
    assert len(doubt) + len(tails) == len(audit.quarantine)
    missing = sorted(set(range(len(docs))) - intact)
    if missing:
        # the quarantine rows start where the intact documents end
        first = min(q["line"] for q in audit.quarantine)
        assert first == missing[0] + 1


def _cases(
    tmp_path: Path,
    name: str,
    data: bytes,
    docs: list[dict[str, str]],
    intact: set[int],
    min_doubt: int = 0,
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / name).write_bytes(data)
    reader = {"paths": str(src)}
    _check(run_library(reader, tmp_path / "lib"), docs, intact, min_doubt)
    _check(run_cli(reader, tmp_path / "cli"), docs, intact, min_doubt)
    assert (src / name).read_bytes() == data  # the input is never touched


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_flipped_bit_keeps_only_what_an_integrity_check_vouches_for(
    tmp_path: Path, kind: str
) -> None:
    """One member/stream, one flipped bit in its middle.

    gzip, zstd and xz verify a checksum only at the end of the member, after handing out
    the data: nothing decoded from it is kept, every decoded line is quarantined on its own.
    bz2 checks each block before releasing it: the blocks before the damaged one are kept.
    """
    docs = _docs(n_docs=4000)  # several zstd blocks (128 kB each)
    suffix, compress = COMPRESSORS[kind]
    if kind == "bz2":
        # bz2 level 1 = 100 kB blocks; the flip lands in the second of three blocks.
        docs = [{"id": f"doc-{i}", "text": f"{i} " + " ".join(WORDS) * 40} for i in range(1200)]
        data = compress(_body(docs))
        first_block = len(bz2.compress(_body(docs)[:100_000], 1)) - 100
        data = _flip(data, (first_block + 2000) / len(data))
        got = run_library({"paths": str(_write(tmp_path / "probe", suffix, data))}, tmp_path / "p")
        intact = {int(d["id"].split("-")[1]) for d in got.kept}
        assert 0 < len(intact) < len(docs)
        assert intact == set(range(len(intact)))
    else:
        data = _flip(compress(_body(docs)), 0.5)
        intact = set()
    # gzip/zstd/xz: at least the lines before the flipped bit were decoded
    min_doubt = 0 if kind == "bz2" else len(docs) // 5
    _cases(tmp_path, f"docs.jsonl{suffix}", data, docs, intact, min_doubt)


def _write(d: Path, suffix: str, data: bytes) -> Path:
    d.mkdir()
    (d / f"docs.jsonl{suffix}").write_bytes(data)
    return d


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_members_before_a_corrupt_one_are_kept(tmp_path: Path, kind: str) -> None:
    """Three members (gzip) / frames (zstd) concatenated; the middle one corrupt."""
    docs = _docs(seed=3, n_docs=4500)
    suffix, compress = COMPRESSORS[kind]
    thirds = [docs[:1500], docs[1500:3000], docs[3000:]]
    members = [compress(_body(t)) for t in thirds]
    members[1] = _flip(members[1], 0.9)
    data = b"".join(members)
    _cases(tmp_path, f"docs.jsonl{suffix}", data, docs, set(range(1500)), min_doubt=300)


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_truncated_file_keeps_every_whole_line(tmp_path: Path, kind: str) -> None:
    """Cut at 60%: what was decoded is the original, every whole line of it is kept."""
    docs = _docs(seed=5, n_docs=4000)  # more than one zstd block (128 kB)
    suffix, compress = COMPRESSORS[kind]
    body = _body(docs)
    data = compress(body)
    data = data[: int(len(data) * 0.6)]
    src = tmp_path / "probe"
    got = run_library({"paths": str(_write(src, suffix, data))}, tmp_path / "p")
    n = len([q for q in got.quarantine if "unreadable tail" in q["reason"]])
    assert n == 1
    first_missing = got.quarantine[0]["line"] - 1
    # a truncated stream decodes to a prefix of the original: everything before the cut
    assert first_missing > 0 or kind == "bz2"  # bz2 releases nothing of an unfinished block
    _cases(tmp_path, f"docs.jsonl{suffix}", data, docs, set(range(first_missing)))
