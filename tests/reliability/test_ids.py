"""Ids keep their exact value: big integers, odd types, missing ids next to given ones.

Rule (docs/io.md): the id column is a string column; a given string id is kept as is, any
other given id becomes its compact JSON text (integers of any size with every digit); a
missing or null id is generated as ``"<file name>:<byte offset>"``, made distinct from the
ids given in the same partition. Each case runs through the library and the CLI and reads
the output files back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _audit import Audit, run_cli, run_library

TEXT = "one two three four"


def _write(path: Path, records: list[dict[str, Any]]) -> list[int]:
    """Write one record a line; return each line's byte offset."""
    offsets, pos, lines = [], 0, []
    for rec in records:
        line = json.dumps(rec).encode() + b"\n"
        offsets.append(pos)
        pos += len(line)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    return offsets


def _expected(name: str, records: list[dict[str, Any]], offsets: list[int]) -> list[str]:
    out = []
    for rec, off in zip(records, offsets, strict=True):
        value = rec.get("id")
        if value is None:
            out.append(f"{name}:{off}")
        elif isinstance(value, str):
            out.append(value)
        else:
            out.append(json.dumps(value, separators=(",", ":")))
    return out


def _both(tmp_path: Path, src: Path) -> list[Audit]:
    reader = {"paths": str(src)}
    return [run_library(reader, tmp_path / "lib"), run_cli(reader, tmp_path / "cli")]


def test_integer_ids_above_2_63_stay_exact_and_distinct(tmp_path: Path) -> None:
    big = [2**64, 2**64 + 1, 2**63, 2**63 + 1, 10**30, -(2**63) - 1]
    records = [{"id": v, "text": f"{TEXT} {i}"} for i, v in enumerate(big)]
    records.append({"id": 7, "text": f"{TEXT} small"})
    src = tmp_path / "in"
    src.mkdir()
    offsets = _write(src / "big.jsonl", records)
    for audit in _both(tmp_path, src):
        audit.balanced()
        ids = [d["id"] for d in audit.kept]
        assert ids == _expected("big.jsonl", records, offsets)
        assert ids[:6] == [str(v) for v in big]
        assert len(set(ids)) == len(ids)


def test_a_list_typed_id_does_not_turn_missing_ids_into_nan(tmp_path: Path) -> None:
    records = [
        {"id": [1, 2], "text": f"{TEXT} list"},
        {"text": f"{TEXT} no id"},
        {"id": "s", "text": f"{TEXT} string"},
        {"id": None, "text": f"{TEXT} null id"},
        {"id": {"a": 1}, "text": f"{TEXT} object"},
        {"id": True, "text": f"{TEXT} bool"},
        {"id": 1.5, "text": f"{TEXT} float"},
    ]
    src = tmp_path / "in"
    src.mkdir()
    offsets = _write(src / "mixed.jsonl", records)
    for audit in _both(tmp_path, src):
        audit.balanced()
        ids = [d["id"] for d in audit.kept]
        assert ids == _expected("mixed.jsonl", records, offsets)
        assert "nan" not in ids
        assert all(isinstance(i, str) for i in ids)


@pytest.mark.parametrize("where", ["same file", "other file"])
def test_generated_ids_never_equal_given_ones(tmp_path: Path, where: str) -> None:
    """A given id that looks like the id generated for another record."""
    src = tmp_path / "in"
    src.mkdir()
    records = [{"text": f"{TEXT} a"}, {"id": "c.jsonl:0", "text": f"{TEXT} b"}]
    if where == "other file":
        _write(src / "c.jsonl", records[:1])
        _write(src / "d.jsonl", records[1:])
    else:
        _write(src / "c.jsonl", records)
    for audit in _both(tmp_path, src):
        audit.balanced()
        ids = [d["id"] for d in audit.kept]
        assert len(ids) == 2
        assert len(set(ids)) == 2, ids
        assert "c.jsonl:0" in ids


def test_files_of_the_same_name_in_two_directories_get_distinct_ids(tmp_path: Path) -> None:
    """``2023/part-0.jsonl`` and ``2024/part-0.jsonl`` without ids (a common layout): the
    generated ids name the directory too, so no two documents share an id (a dedup that
    removes by id would otherwise remove both)."""
    src = tmp_path / "in"
    for year in ("2023", "2024"):
        (src / year).mkdir(parents=True)
        _write(src / year / "part-0.jsonl", [{"text": f"{TEXT} {year} {i}"} for i in range(3)])
    for audit in _both(tmp_path, src):
        audit.balanced()
        ids = [d["id"] for d in audit.kept]
        assert len(ids) == 6
        assert len(set(ids)) == 6, ids
        assert {i.rsplit(":", 1)[0] for i in ids} == {"2023/part-0.jsonl", "2024/part-0.jsonl"}
