"""Bad input and failing output, end to end through ``Pipeline.run`` on a real cluster.

- Disk full / permission denied in the middle of writing a partition: a clear ``OSError``
  naming the file, no partial file under a final name, no ``_SUCCESS``.
- Bad input: each kind of bad record is quarantined with its reason (or, with
  ``on_error="raise"``, a clear error naming file and line), and
  ``read == kept + removed + quarantined``.
- Every test hashes the input before and after: it is never modified.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from _fault_helpers import FailingJsonlWriter, tree_digest
from distributed import Client

from curator_dask.executor import DaskExecutor
from curator_dask.filters import WordCountFilter
from curator_dask.io import JsonlReader, JsonlWriter, MalformedInputError, read_quarantine
from curator_dask.io._files import TruncatedInputError
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration


@pytest.fixture
def client(subprocess_cluster):
    with Client(subprocess_cluster.address, timeout="30s") as c:
        yield c


def _final_names(out: Path) -> list[str]:
    meta = Path(str(out) + ".curator")
    files = [*out.iterdir(), *(meta.iterdir() if meta.is_dir() else [])]
    return sorted(p.name for p in files if re.fullmatch(r"part-\d+\.jsonl|_SUCCESS", p.name))


@pytest.mark.parametrize(
    ("code", "kind"), [(errno.ENOSPC, OSError), (errno.EACCES, PermissionError)]
)
def test_a_failing_write_is_a_clear_error_and_leaves_no_partial_file(
    client, shard_dir: Path, tmp_path: Path, code: int, kind: type
) -> None:
    before = tree_digest(shard_dir)
    out = tmp_path / "out"
    pipeline = Pipeline(
        "disk",
        [
            JsonlReader(str(shard_dir), files_per_partition=1),
            FailingJsonlWriter(str(out), errno=code),
        ],
    )
    with pytest.raises(kind) as err:
        pipeline.run(DaskExecutor(client=client, progress=False))
    assert err.value.errno == code
    assert f"could not write {out}/part-0000" in str(err.value)
    assert os.strerror(code) in str(err.value)
    assert _final_names(out) == []  # nothing under a final name, no _SUCCESS
    # Temporary files of writes still running when the run stopped may remain (never under
    # a final name, never read as input); the next run's begin() removes them.
    Pipeline(
        "again", [JsonlReader(str(shard_dir), files_per_partition=1), JsonlWriter(str(out))]
    ).run(DaskExecutor(client=client, progress=False))
    assert [p.name for p in out.glob("*.tmp-*")] == []
    assert len(_final_names(out)) == 7
    assert tree_digest(shard_dir) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_output_directory_is_a_clear_permission_error(
    client, shard_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o555)
    pipeline = Pipeline(
        "ro", [JsonlReader(str(shard_dir), files_per_partition=1), JsonlWriter(str(out))]
    )
    try:
        with pytest.raises(PermissionError, match=str(out)):
            pipeline.run(DaskExecutor(client=client, progress=False))
    finally:
        out.chmod(0o755)
    assert list(out.iterdir()) == []


# -- bad input ----------------------------------------------------------------------------
BIG = 50 * 2**20  # the 50 MB document
GOOD_WORDS = "one two three four five"


def _doc(i: str, text: str = GOOD_WORDS) -> str:
    return json.dumps({"id": i, "text": text})


@pytest.fixture
def bad_input(tmp_path: Path) -> Path:
    src = tmp_path / "bad"
    src.mkdir()
    # a truncated gzip file: 30 documents, the last 40% of the compressed bytes cut off
    data = gzip.compress("".join(_doc(f"gz{i}") + "\n" for i in range(30)).encode())
    (src / "a_truncated.jsonl.gz").write_bytes(data[: int(len(data) * 0.6)])
    # a broken JSON line (line 3) between good ones
    (src / "b_broken.jsonl").write_text(
        _doc("b1")
        + "\n"
        + _doc("b2")
        + '\n{"id": "b3", "text": "unterminated\n'
        + _doc("b4")
        + "\n"
    )
    # invalid UTF-8 (line 2)
    (src / "c_utf8.jsonl").write_bytes(
        (_doc("c1") + "\n").encode() + b'{"id": "c2", "text": "caf\xe9 au lait"}\n'
    )
    # wrong types: text a number, text null, a JSON array, an id that is a number
    (src / "d_types.jsonl").write_text(
        '{"id": "d1", "text": 42}\n{"id": "d2", "text": null}\n[1, 2]\n'
        + json.dumps({"id": 7, "text": GOOD_WORDS})
        + "\n"
    )
    # no text column at all
    (src / "e_no_text.jsonl").write_text('{"id": "e1", "body": "x"}\n{"id": "e2", "body": "y"}\n')
    # empty files, plain and compressed
    (src / "f_empty.jsonl").write_bytes(b"")
    (src / "g_empty.jsonl.gz").write_bytes(gzip.compress(b""))
    # a 50 MB document (over max_document_bytes) and a 5 MB one (kept whole)
    with open(src / "h_big.jsonl", "w") as f:
        f.write(_doc("big50", "word " * (BIG // 5)) + "\n")
        f.write(_doc("big5", "word " * (BIG // 50)) + "\n")
    # duplicate ids (in one file and across files) are kept: dedup is a separate step
    (src / "i_dupes.jsonl").write_text(
        _doc("dup", GOOD_WORDS + " a")
        + "\n"
        + _doc("dup", GOOD_WORDS + " b")
        + "\n"
        + _doc("b1", GOOD_WORDS + " again")
        + "\n"
        + _doc("short", "too short")
        + "\n"
    )
    return src


def test_bad_input_is_quarantined_or_kept_and_every_document_is_accounted_for(
    client, bad_input: Path, tmp_path: Path
) -> None:
    before = tree_digest(bad_input)
    out = tmp_path / "out"
    pipeline = Pipeline(
        "bad",
        [
            JsonlReader(str(bad_input), files_per_partition=1, max_document_bytes=20 * 2**20),
            WordCountFilter(min_words=3, max_words=10**7),
            JsonlWriter(str(out)),
        ],
    )
    result = pipeline.run(DaskExecutor(client=client, progress=False))

    q = read_quarantine(str(out))
    reasons = {
        (Path(f).name, r.split(":")[0].split(" (")[0])
        for f, r in zip(q["file"], q["reason"], strict=True)
    }
    assert sorted(q["file"].map(lambda f: Path(f).name).value_counts().items()) == [
        ("a_truncated.jsonl.gz", 1),
        ("b_broken.jsonl", 1),
        ("c_utf8.jsonl", 1),
        ("d_types.jsonl", 3),
        ("e_no_text.jsonl", 2),
        ("h_big.jsonl", 1),
    ]
    assert ("b_broken.jsonl", "malformed JSON") in reasons
    assert ("c_utf8.jsonl", "invalid UTF-8") in reasons
    assert ("d_types.jsonl", "text field 'text' is not a string") in reasons
    assert ("d_types.jsonl", "missing or null text field 'text'") in reasons
    assert ("d_types.jsonl", "not a JSON object") in reasons
    assert ("e_no_text.jsonl", "missing or null text field 'text'") in reasons
    assert any(f == "a_truncated.jsonl.gz" and "truncated gzip file" in r for f, r in reasons)
    big = q[q["file"].str.endswith("h_big.jsonl")]
    assert big["reason"].iloc[0].startswith("document of 52428")
    assert "exceeds max_document_bytes=20971520" in big["reason"].iloc[0]
    assert q.loc[q["file"].str.endswith("b_broken.jsonl"), "line"].tolist() == [3]

    rows = pd.concat(
        [pd.read_json(p, lines=True, dtype=False) for p in sorted(out.glob("part-*.jsonl"))]
    )
    ids = rows["id"].astype(str).tolist()
    gz_kept = [i for i in ids if i.startswith("gz")]
    assert 0 < len(gz_kept) < 30  # the readable head of the truncated file
    assert sorted(i for i in ids if not i.startswith("gz")) == sorted(
        ["b1", "b2", "b4", "c1", "7", "big5", "dup", "dup", "b1"]
    )
    assert len(rows.loc[rows["id"] == "big5", "text"].iloc[0]) == BIG // 10
    assert result.removed == 1  # "too short"
    assert result.quarantined == len(q) == 9
    assert result.read == result.kept + result.removed + result.quarantined
    assert result.read == len(gz_kept) + 1 + 9 + 9  # kept + removed + quarantined
    assert tree_digest(bad_input) == before


def test_bad_input_with_on_error_raise_names_file_and_line(
    client, bad_input: Path, tmp_path: Path
) -> None:
    before = tree_digest(bad_input)
    for name, error, match in (
        ("b_broken.jsonl", MalformedInputError, r"b_broken\.jsonl: line 3, byte offset \d+"),
        ("a_truncated.jsonl.gz", TruncatedInputError, r"truncated gzip file .*a_truncated"),
    ):
        pipeline = Pipeline(
            "raise",
            [
                JsonlReader(str(bad_input / name), on_error="raise"),
                JsonlWriter(str(tmp_path / name)),
            ],
        )
        with pytest.raises(error, match=match):
            pipeline.run(DaskExecutor(client=client, progress=False))
        assert not (Path(str(tmp_path / name) + ".curator") / "_SUCCESS").exists()
    assert tree_digest(bad_input) == before
