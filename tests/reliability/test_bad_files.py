"""Whole files of bad input never stop a run, and every record is accounted for.

A directory with: a file where every line is bad, random bytes named ``.jsonl``, a lone
surrogate in a field other than ``text``, and a field whose type differs between files
(``score`` 0.5 in one file and ``"high"`` in another). Run through the library and the CLI,
with one file per partition and with all files in one partition, written as JSONL; the
audit reads everything back.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import yaml
from _audit import audit, cli, doc_hash, run_cli, run_library

GOOD = {
    "a_score.jsonl": [{"id": "a1", "text": "one two three four", "score": 0.5}],
    "b_score.jsonl": [{"id": "b1", "text": "one two three four", "score": "high"}],
}
SURROGATE_OK = {"id": "s2", "text": "one two three five", "title": "fine"}


def _make(src: Path) -> dict[str, list[bytes]]:
    """Write the input; return the raw lines expected in the quarantine, by file."""
    src.mkdir()
    for name, recs in GOOD.items():
        (src / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    bad_lines = [b"garbage", b"{not json", b"[1,2]"]
    (src / "allbad.jsonl").write_bytes(b"\n".join(bad_lines) + b"\n")
    rng = random.Random(4)
    binary = bytes(rng.randrange(256) for _ in range(3000))
    (src / "binary.jsonl").write_bytes(binary)
    lone = b'{"id":"s1","text":"one two three four","title":"\\ud800 lone"}'
    ok = json.dumps(SURROGATE_OK).encode()
    (src / "surrogate.jsonl").write_bytes(lone + b"\n" + ok + b"\n")
    binary_lines = [x.rstrip(b"\r") for x in binary.split(b"\n") if x.strip()]
    return {"allbad.jsonl": bad_lines, "binary.jsonl": binary_lines, "surrogate.jsonl": [lone]}


def _check(out: Path, expected_bad: dict[str, list[bytes]], one_partition: bool) -> None:
    got = audit(out)
    got.balanced()
    want = [*GOOD["a_score.jsonl"], *GOOD["b_score.jsonl"], SURROGATE_OK]
    kept = {d["id"]: d for d in got.kept}
    assert sorted(kept) == ["a1", "b1", "s2"]
    for d in want:
        assert doc_hash(kept[d["id"]]["id"], kept[d["id"]]["text"]) == doc_hash(d["id"], d["text"])
    assert kept["s2"]["title"] == "fine"
    # the type rule: mixed in one partition -> strings; else each partition keeps its own
    assert kept["a1"]["score"] == ("0.5" if one_partition else 0.5)
    assert kept["b1"]["score"] == "high"
    by_file: dict[str, list[dict[str, Any]]] = {}
    for q in got.quarantine:
        by_file.setdefault(Path(q["file"]).name, []).append(q)
    assert sorted(by_file) == sorted(expected_bad)
    for name, lines in expected_bad.items():
        rows = by_file[name]
        assert len(rows) == len(lines), name
        if name != "binary.jsonl":  # binary raw is stored with backslash escapes
            assert [r["raw"].encode() for r in rows] == lines
    (surrogate,) = by_file["surrogate.jsonl"]
    assert "field 'title'" in surrogate["reason"]


@pytest.mark.parametrize("files_per_partition", [1, 5])
def test_bad_files_are_quarantined_and_the_run_completes(
    tmp_path: Path, files_per_partition: int
) -> None:
    src = tmp_path / "in"
    expected = _make(src)
    reader = {"paths": str(src), "files_per_partition": files_per_partition}
    one = files_per_partition == 5
    run_library(reader, tmp_path / "lib")
    _check(tmp_path / "lib", expected, one)
    run_cli(reader, tmp_path / "cli")
    _check(tmp_path / "cli", expected, one)


@pytest.mark.parametrize("files_per_partition", [5, 1], ids=["one-partition", "separate"])
def test_mixed_types_write_parquet_that_reads_back_as_one_dataset(
    tmp_path: Path, files_per_partition: int
) -> None:
    """0.5 in one file, "high" in another: a string column, in one partition (the reader's
    rule) or in separate ones (the run's one schema)."""
    src = tmp_path / "in"
    _make(src)
    out = tmp_path / "pq"
    params = {"paths": str(src), "files_per_partition": files_per_partition}
    spec = {
        "reader": {"class": "JsonlReader", "params": params},
        "writer": {"class": "ParquetWriter", "params": {"path": str(out)}},
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(spec))
    proc = cli(["run", str(tmp_path / "p.yaml"), "--sequential"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = pads.dataset(str(out), format="parquet").to_table()
    rows = {r["id"]: r for r in table.to_pylist()}
    assert rows["a1"]["score"] == "0.5"
    assert rows["b1"]["score"] == "high"


def test_an_unreadable_parquet_file_is_one_quarantine_row_naming_it(tmp_path: Path) -> None:
    """Random bytes named ``.parquet`` among good Parquet files: the good rows are kept,
    the bad file is one quarantine row naming it; through the library and the CLI."""
    import pyarrow as pa

    src = tmp_path / "in"
    src.mkdir()
    rows = [{"id": f"p{i}", "text": f"one two three {i}"} for i in range(6)]
    pq.write_table(pa.Table.from_pylist(rows[:3]), src / "a.parquet")
    (src / "b.parquet").write_bytes(random.Random(1).randbytes(4000))
    pq.write_table(pa.Table.from_pylist(rows[3:]), src / "c.parquet")
    for how in ("lib", "cli"):
        out = tmp_path / how
        spec = {
            "reader": {"class": "ParquetReader", "params": {"paths": str(src)}},
            "writer": {"class": "JsonlWriter", "params": {"path": str(out)}},
        }
        if how == "lib":
            from curator_dask.cli.pipeline_file import run_config_from_dict
            from curator_dask.executor import SequentialExecutor

            run_config_from_dict(spec).pipeline.run(SequentialExecutor())
        else:
            (tmp_path / "p.yaml").write_text(yaml.safe_dump(spec))
            proc = cli(["run", str(tmp_path / "p.yaml"), "--sequential", "-q"], cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr[-2000:]
        got = audit(out)
        got.balanced()
        assert sorted(d["id"] for d in got.kept) == [r["id"] for r in rows]
        (row,) = got.quarantine
        assert row["file"].endswith("b.parquet")
        assert "unreadable Parquet file" in row["reason"]
