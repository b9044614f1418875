"""How inputs are named: one file named twice is read once (issue 21).

Each case runs ``curator-dask run`` and ``curator-dask exact-dedup`` as subprocesses and
counts and hashes what they wrote against the input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from _audit import cli, doc_hash, run_cli

pytestmark = pytest.mark.integration


def test_a_file_named_twice_is_read_once(tmp_path: Path) -> None:
    """``in/a.jsonl``, ``in/./a.jsonl``, ``in/../in/a.jsonl``, a symlink to it and ``in/``."""
    src = tmp_path / "in"
    src.mkdir()
    docs = [{"id": f"d{i}", "text": f"document number {i} has words"} for i in range(10)]
    (src / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "link.jsonl").symlink_to(src / "a.jsonl")
    names = [
        str(src / "a.jsonl"),
        f"{src}/./a.jsonl",
        f"{src}/../in/a.jsonl",
        str(tmp_path / "link.jsonl"),
        str(src),
    ]
    want = sorted(doc_hash(d["id"], d["text"]) for d in docs)

    got = run_cli({"paths": names}, tmp_path / "out")
    got.balanced()
    assert got.stats["read"] == 10
    assert sorted(got.hashes.elements()) == want

    out = tmp_path / "dedup"
    args = ["exact-dedup", *names, "--output", str(out), "--perform-removal", "-q", "--json"]
    proc = cli([*args, "--n-workers", "1"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["documents"] == 10
    kept = ds.dataset(out / "deduplicated", format="parquet").to_table().to_pylist()
    assert sorted(doc_hash(d["id"], d["text"]) for d in kept) == want
    assert not ds.dataset(out / "removed_ids", format="parquet").to_table().num_rows


def _tree(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("fuzzy-dedup", "cache in input"),
        ("fuzzy-dedup", "input in cache"),
        ("fuzzy-dedup", "cache is output"),
        ("fuzzy-dedup", "output in cache"),
        ("semantic-dedup", "cache in input"),
        ("run", "quarantine in input"),
        ("run", "quarantine is output"),
    ],
)
def test_a_cache_or_work_directory_overlapping_the_input_or_output_is_refused(
    tmp_path: Path, command: str, where: str
) -> None:
    """Issue 21 (2): one overlap rule (io.layout) for outputs, caches and quarantine dirs.

    Refused before anything is written: exit status non-zero, one line naming both
    locations, the input byte-identical and nothing new on disk.
    """
    import yaml

    data = tmp_path / "data"
    src = data / "in"
    src.mkdir(parents=True)
    docs = [{"id": f"d{i}", "text": f"document number {i % 4} has words"} for i in range(12)]
    (src / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    out, cache = tmp_path / "out", tmp_path / "cache"
    if where == "cache in input":
        cache = src / "cache"
    elif where == "input in cache":
        cache = data
    elif where == "cache is output":
        cache = out
    elif where == "output in cache":
        out = cache / "out"
    before = _tree(tmp_path)
    if command == "run":
        qdir = src / "q" if where == "quarantine in input" else out
        spec = {
            "name": "t",
            "reader": {"class": "JsonlReader", "params": {"paths": str(src)}},
            "writer": {"class": "JsonlWriter", "params": {"path": str(out)}},
            "config": {"curator.io.quarantine-dir": str(qdir)},
        }
        spec_file = tmp_path / "p.yaml"
        spec_file.write_text(yaml.safe_dump(spec))
        before = _tree(tmp_path)
        args = ["run", str(spec_file), "--sequential"]
    else:
        args = [command, str(src), "--output", str(out), "--cache-dir", str(cache)]
        args += ["--n-workers", "1"]
    proc = cli(args, cwd=tmp_path, timeout=300)
    assert proc.returncode != 0
    errors = [x for x in proc.stderr.splitlines() if "error:" in x]
    assert errors, proc.stderr[-2000:]
    assert "overlaps the" in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert _tree(tmp_path) == before  # nothing written, nothing deleted
