"""Bad input never kills a read silently and never disappears: read = kept + quarantined."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zstandard

from curator_dask.io import (
    QUARANTINE_COLUMNS,
    JsonlReader,
    MalformedInputError,
)
from curator_dask.io._files import TruncatedInputError

# (line bytes, expected reason fragment or None when the record is good)
CASES: list[tuple[bytes, str | None]] = [
    (b'{"id": "g1", "text": "good one"}', None),
    (b'{"id": "m1", "text": "unterminated', "malformed JSON"),
    (b'{"id": "u1", "text": "caf\xe9"}', "invalid UTF-8"),
    (b'{"id": "n1"}', "missing or null text field 'text'"),
    (b'{"id": "n2", "text": null}', "missing or null text field 'text'"),
    (b'{"id": "t1", "text": 42}', "text field 'text' is not a string (int)"),
    (b'{"id": "t2", "text": ["a", "b"]}', "text field 'text' is not a string (list)"),
    (b'["not", "an", "object"]', "not a JSON object (list)"),
    (b'"just a string"', "not a JSON object (str)"),
    (b"12", "not a JSON object (int)"),
    (b'{"id": "two", "text": "a"}{"id": "objects", "text": "b"}', "malformed JSON"),
    (b'{"id": "s1", "text": "lone \\ud800 surrogate"}', "unpaired surrogate"),
    (b'{"id": "g2", "text": "' + b"y" * 300 + b'"}', None),
    (b'{"id": "big", "text": "' + b"x" * 5000 + b'"}', "exceeds max_document_bytes=4096"),
    (b'{"id": "g3", "text": "caf\xc3\xa9 \\u00e9 \\n newline"}', None),
    (b'{"id": "g4", "text": "", "extra": {"k": [1, 2]}}', None),
]


def _file(tmp_path: Path, crlf: bool = False, trailing_newline: bool = True) -> Path:
    eol = b"\r\n" if crlf else b"\n"
    body = eol.join(line for line, _ in CASES) + (eol if trailing_newline else b"")
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(body)
    return path


def _read_all(reader: JsonlReader) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    results = [reader.read_partition(s) for s in reader.partitions()]
    data = pd.concat([r.data for r in results], ignore_index=True)
    quarantine = pd.concat([r.quarantine for r in results], ignore_index=True)
    return data, quarantine, sum(r.docs_read for r in results)


@pytest.mark.parametrize("crlf", [False, True])
def test_every_bad_record_is_quarantined_with_its_reason(tmp_path: Path, crlf: bool) -> None:
    path = _file(tmp_path, crlf=crlf, trailing_newline=not crlf)
    reader = JsonlReader(str(path), max_document_bytes=4096)
    data, quarantine, read = _read_all(reader)
    good = [json.loads(line) for line, reason in CASES if reason is None]
    assert data["id"].tolist() == [g["id"] for g in good]
    assert data["text"].tolist() == [g["text"] for g in good]
    assert read == len(CASES) == len(data) + len(quarantine)
    assert tuple(quarantine.columns) == QUARANTINE_COLUMNS
    expected_bad = [(n + 1, line, r) for n, (line, r) in enumerate(CASES) if r is not None]
    assert quarantine["line"].tolist() == [n for n, _, _ in expected_bad]
    assert quarantine["raw"].tolist() == [line for _, line, _ in expected_bad]
    for (_, _, fragment), reason in zip(expected_bad, quarantine["reason"], strict=True):
        assert fragment in reason
    eol = 2 if crlf else 1
    starts = [sum(len(line) + eol for line, _ in CASES[:n]) for n in range(len(CASES))]
    assert quarantine["byte_offset"].tolist() == [starts[n - 1] for n, _, _ in expected_bad]
    assert set(quarantine["file"]) == {str(path)}


@pytest.mark.parametrize("blocksize", [97, 300, 1000])
def test_accounting_holds_when_split(tmp_path: Path, blocksize: int) -> None:
    path = _file(tmp_path)
    ref_data, ref_q, ref_read = _read_all(JsonlReader(str(path), max_document_bytes=4096))
    reader = JsonlReader(str(path), blocksize=blocksize, max_document_bytes=4096)
    assert len(reader.partitions()) > 3
    data, quarantine, read = _read_all(reader)
    assert read == ref_read == len(data) + len(quarantine)
    assert data["id"].tolist() == ref_data["id"].tolist()
    q = quarantine.sort_values("byte_offset")
    assert q["byte_offset"].tolist() == ref_q["byte_offset"].tolist()
    assert q["reason"].tolist() == ref_q["reason"].tolist()
    # Line numbers are known only in a range that starts at the beginning of the file.
    assert set(q["line"]) - set(ref_q["line"]) <= {-1}


def test_raise_mode_stops_at_the_first_bad_record(tmp_path: Path) -> None:
    path = _file(tmp_path)
    reader = JsonlReader(str(path), on_error="raise")
    with pytest.raises(MalformedInputError, match=r"mixed\.jsonl: line 2, byte offset 33: malf"):
        reader.read_partition(reader.partitions()[0])


def _truncated_gzip(tmp_path: Path, n: int = 3000) -> tuple[Path, list[str]]:
    lines = [json.dumps({"id": f"d{i}", "text": f"document number {i} " * 5}) for i in range(n)]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    return path, lines


def test_truncated_gzip_keeps_the_readable_part_and_quarantines_the_tail(tmp_path: Path) -> None:
    path, lines = _truncated_gzip(tmp_path)
    reader = JsonlReader(str(path))
    res = reader.read_partition(reader.partitions()[0])
    n = len(res.data)
    assert 0 < n < len(lines)
    assert res.data["id"].tolist() == [f"d{i}" for i in range(n)]
    assert res.docs_read == n + 1
    row = res.quarantine.iloc[0]
    assert "truncated gzip file" in row["reason"]
    assert str(path) in row["reason"]
    assert row["line"] == n + 1
    assert lines[n].encode().startswith(row["raw"])  # the partial last line


def test_truncated_gzip_raises_in_raise_mode(tmp_path: Path) -> None:
    path, _ = _truncated_gzip(tmp_path)
    reader = JsonlReader(str(path), on_error="raise")
    with pytest.raises(TruncatedInputError, match=r"truncated gzip file .*cut\.jsonl\.gz"):
        reader.read_partition(reader.partitions()[0])


def test_corrupt_zstd_is_reported(tmp_path: Path) -> None:
    body = b"".join(b'{"text": "t%d"}\n' % i for i in range(100))
    data = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(body))
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "bad.jsonl.zst"
    path.write_bytes(bytes(data))
    reader = JsonlReader(str(path))
    res = reader.read_partition(reader.partitions()[0])
    assert res.docs_read == len(res.data) + len(res.quarantine)
    assert "corrupt zstd data" in res.quarantine["reason"].iloc[-1]


def test_duplicate_ids_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_bytes(b'{"id": "a", "text": "1"}\n{"id": "a", "text": "2"}\n')
    reader = JsonlReader(str(path))
    assert reader.read_partition(reader.partitions()[0]).data["text"].tolist() == ["1", "2"]


def test_mixed_types_in_other_fields_are_read(tmp_path: Path) -> None:
    # pyarrow refuses a field that is a number in one record and a string in another;
    # such records are good and must be read (built from the decoded objects).
    path = tmp_path / "mixed_types.jsonl"
    recs = [{"text": f"t{i}", "score": i if i % 2 else str(i)} for i in range(40)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    reader = JsonlReader(str(path))
    res = reader.read_partition(reader.partitions()[0])
    assert len(res.quarantine) == 0
    assert res.data["text"].tolist() == [r["text"] for r in recs]
    assert [str(v) for v in res.data["score"]] == [str(r["score"]) for r in recs]


def test_scattered_bad_lines_match_a_line_by_line_oracle(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    bad_kinds = [b'{"text": "cut', b'{"text": 3}', b"[1]", b'{"text": "\xff"}', b'{"x": 1}']
    lines, want_ids, want_bad = [], [], []
    for i in range(3000):
        r = rng.random()
        if r < 0.02:
            lines.append(bad_kinds[i % len(bad_kinds)])
            want_bad.append(i + 1)
        elif r < 0.03:  # a good record whose other field changes type: not bad
            lines.append(json.dumps({"id": f"d{i}", "text": f"t{i}", "meta": "s"}).encode())
            want_ids.append(f"d{i}")
        else:
            lines.append(json.dumps({"id": f"d{i}", "text": f"t{i}", "meta": i}).encode())
            want_ids.append(f"d{i}")
    path = tmp_path / "scattered.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    for blocksize in ("1GB", 20_000):
        data, quarantine, read = _read_all(JsonlReader(str(path), blocksize=blocksize))
        assert read == 3000
        assert data["id"].tolist() == want_ids
        if blocksize == "1GB":
            assert quarantine["line"].tolist() == want_bad
        else:
            assert len(quarantine) == len(want_bad)
