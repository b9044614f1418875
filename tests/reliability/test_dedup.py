"""Dedup commands under bad input: one input listing (README and hidden files skipped), the
quarantine beside the output directory, and every document accounted for.

The audit reads ``deduplicated/``, ``removed_ids/`` and ``<output>.curator/_quarantine/``
back with pyarrow and json; ``read = kept + removed + quarantined``; kept and removed ids
are disjoint and together the ids of every readable input document.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from _audit import cli

pytestmark = pytest.mark.integration


def test_exact_dedup_accounts_for_every_document(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    docs = [{"id": f"a{i}", "text": f"text number {i % 7} here"} for i in range(40)]
    (src / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[:20]) + "{bad\n")
    more = gzip.compress("".join(json.dumps(d) + "\n" for d in docs[20:30]).encode())
    broken = bytearray(gzip.compress("".join(json.dumps(d) + "\n" for d in docs[30:]).encode()))
    broken[len(broken) // 2] ^= 0x10
    (src / "b.jsonl.gz").write_bytes(more + bytes(broken))  # second member corrupt
    (src / "README.md").write_text("# not data\n")
    (src / "_hidden.jsonl").write_text(json.dumps({"id": "h", "text": "hidden"}) + "\n")
    out = tmp_path / "out"
    args = ["exact-dedup", str(src), "--output", str(out), "--perform-removal"]
    proc = cli([*args, "--n-workers", "1", "-q"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]  # nothing in cwd
    kept = ds.dataset(out / "deduplicated", format="parquet").to_table().to_pylist()
    removed = ds.dataset(out / "removed_ids", format="parquet").to_table().column("id")
    quarantine = [
        json.loads(line)
        for f in sorted((Path(str(out) + ".curator") / "_quarantine").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    kept_ids = [d["id"] for d in kept]
    removed_ids = removed.to_pylist()
    assert not set(kept_ids) & set(removed_ids)
    assert len(set(kept_ids)) == len(kept_ids)
    readable = {d["id"] for d in docs[:30]}
    assert set(kept_ids) | set(removed_ids) == readable
    # one text per kept document, each the text of the input document with that id
    by_id = {d["id"]: d["text"] for d in docs}
    assert all(by_id[d["id"]] == d["text"] for d in kept)
    assert len({d["text"] for d in kept}) == len(kept)
    # read = kept + removed + quarantined, with quarantined rows naming their files
    files = {Path(q["file"]).name for q in quarantine}
    assert files == {"a.jsonl", "b.jsonl.gz"}
    summary = proc.stdout
    assert f"read: {len(kept) + len(removed_ids) + len(quarantine)}" in summary.replace(
        "documents read", "read"
    )
    assert f"quarantined: {len(quarantine)}" in summary
