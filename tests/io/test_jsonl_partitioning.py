"""Byte-range splitting: every line in exactly one partition, whatever the blocksize."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fsspec.implementations.local import LocalFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask.io import JsonlReader
from curator_dask.io._files import read_range


def _line_starts(body: bytes) -> list[int]:
    starts, pos = [], 0
    for line in body.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    return starts


@pytest.mark.parametrize(
    "body",
    [
        b"aa\nbbb\ncccc\n",
        b"aa\nbbb\ncccc",  # no trailing newline
        b"aa\r\nbbb\r\ncccc\r\n",  # CRLF: a boundary may fall between \r and \n
        b"\n\nx\n\n",  # blank lines
        b"a\nb\nc\nd\n",  # a line at every other byte: boundaries exactly at line starts
        b"only one line without newline",
    ],
)
def test_read_range_every_line_once_for_every_blocksize(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(body)
    fs = LocalFileSystem()
    want = _line_starts(body)
    for bs in range(1, len(body) + 2):
        seen: list[int] = []
        for start in range(0, len(body), bs):
            end = min(start + bs, len(body))
            data, offset = read_range(fs, str(path), start, end)
            got = _line_starts(data)
            # every line read starts inside the range, and the data is exactly those lines
            assert all(start <= offset + s < end for s in got), (bs, start)
            assert body[offset : offset + len(data)] == data
            seen.extend(offset + s for s in got)
        assert seen == want, bs


def test_boundary_exactly_at_a_line_start(tmp_path: Path) -> None:
    line = json.dumps({"text": "x" * 20}).encode() + b"\n"
    path = tmp_path / "f.jsonl"
    path.write_bytes(line * 10)
    reader = JsonlReader(str(path), blocksize=len(line) * 2)
    specs = reader.partitions()
    assert [(s.start, s.end) for s in specs] == [
        (i * 2 * len(line), (i + 1) * 2 * len(line)) for i in range(5)
    ]
    assert [len(reader.read_partition(s).data) for s in specs] == [2] * 5


def _write(path: Path, docs: list[str], crlf: list[bool], blanks: list[bool], trail: bool) -> None:
    out = []
    for i, text in enumerate(docs):
        out.append(json.dumps({"text": text}, ensure_ascii=bool(i % 2)).encode())
        out.append(b"\r\n" if crlf[i] else b"\n")
        if blanks[i]:
            out.append(b"\n")
    body = b"".join(out)
    if not trail:
        body = body.rstrip(b"\r\n")
    path.write_bytes(body)


docs_strategy = st.lists(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    min_size=1,
    max_size=30,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    docs=docs_strategy,
    data=st.data(),
)
def test_results_do_not_depend_on_blocksize(tmp_path: Path, docs: list[str], data) -> None:
    n = len(docs)
    crlf = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    blanks = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    trail = data.draw(st.booleans())
    path = tmp_path / "h.jsonl"
    _write(path, docs, crlf, blanks, trail)
    size = path.stat().st_size
    # at most ~30 partitions; the exhaustive test above covers every tiny blocksize
    blocksize = data.draw(st.integers(min_value=max(1, size // 30), max_value=size + 1))
    reader = JsonlReader(str(path), blocksize=blocksize)
    specs = reader.partitions()
    assert len(specs) == -(-size // blocksize)
    parts = [reader.read_partition(s) for s in specs]
    got = pd.concat([p.data for p in parts], ignore_index=True)
    assert sum(p.docs_read for p in parts) == n
    assert got["text"].tolist() == docs
    ref = JsonlReader(str(path), blocksize=size + 1)
    ref_ids = ref.read_partition(ref.partitions()[0]).data["id"].tolist()
    assert got["id"].tolist() == ref_ids
    offsets = [int(i.rsplit(":", 1)[1]) for i in ref_ids]
    assert np.all(np.diff(offsets) > 0)
