"""JsonlReader / read_jsonl against plain pandas + json, on the shipped sample and built data."""

from __future__ import annotations

import bz2
import gzip
import json
import shutil
from importlib.resources import files
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pytest
import zstandard
from dask.dataframe.utils import assert_eq

from curator_dask.io import (
    JsonlReader,
    MalformedInputError,
    QuarantineWarning,
    read_jsonl,
    read_quarantine,
)

SAMPLE = files("curator_dask") / "data" / "sample.jsonl.gz"


@pytest.fixture(autouse=True)
def _sync_scheduler():
    with dask.config.set(scheduler="sync"):
        yield


@pytest.fixture(scope="module")
def sample_lines() -> list[bytes]:
    with gzip.open(str(SAMPLE), "rb") as f:
        return f.read().splitlines(keepends=True)


@pytest.fixture(scope="module")
def expected(sample_lines: list[bytes]) -> pd.DataFrame:
    """The sample as plain json + pandas would read it."""
    recs = [json.loads(line) for line in sample_lines]
    return pd.DataFrame(recs)[["id", "text", "source"]].astype("string[pyarrow]")


def test_sample_split_by_blocksize_matches_pandas(
    tmp_path: Path, sample_lines: list[bytes], expected: pd.DataFrame
) -> None:
    path = tmp_path / "sample.jsonl"
    path.write_bytes(b"".join(sample_lines))
    df = read_jsonl(str(path), blocksize="2MB")
    assert df.npartitions >= 3  # 8.3 MB file, one file split into byte ranges
    assert_eq(df, expected, check_index=False)
    got = df.compute()
    assert got["id"].tolist() == expected["id"].tolist()  # order kept, nothing doubled


def test_many_files_compressed_and_plain(
    tmp_path: Path, sample_lines: list[bytes], expected: pd.DataFrame
) -> None:
    thirds = np.array_split(np.arange(len(sample_lines)), 4)
    chunks = [b"".join(sample_lines[i] for i in part) for part in thirds]
    (tmp_path / "a.jsonl").write_bytes(chunks[0])
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(chunks[1]))
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(chunks[2]))
    (tmp_path / "d.jsonl.bz2").write_bytes(bz2.compress(chunks[3]))
    (tmp_path / "_SUCCESS").write_text("{}")  # underscore names are not inputs
    (tmp_path / "notes.txt").write_text("not jsonl")
    df = read_jsonl(str(tmp_path), files_per_partition=1, add_filename=True)
    assert df.npartitions == 4
    got = df.compute()
    assert_eq(got.drop(columns="file_name"), expected, check_index=False)
    names = got.groupby("file_name", sort=True).size()
    assert names.to_dict() == {
        "a.jsonl": len(thirds[0]),
        "b.jsonl.gz": len(thirds[1]),
        "c.jsonl.zst": len(thirds[2]),
        "d.jsonl.bz2": len(thirds[3]),
    }
    # Compressed files are never split: with a tiny blocksize each is one partition,
    # the plain one is cut into byte ranges.
    reader = JsonlReader(str(tmp_path), blocksize="256kB")
    specs = reader.partitions()
    whole = [s for s in specs if s.start is None]
    assert sorted(Path(s.paths[0]).name for s in whole) == [
        "b.jsonl.gz",
        "c.jsonl.zst",
        "d.jsonl.bz2",
    ]
    assert [s.index for s in specs] == list(range(len(specs)))
    assert len(specs) > 4
    assert_eq(reader.to_dask(), expected, check_index=False)


def test_small_files_grouped_up_to_blocksize(tmp_path: Path) -> None:
    for i in range(10):
        (tmp_path / f"f{i:02d}.jsonl").write_text(json.dumps({"text": "x" * 90}) + "\n")
    size = (tmp_path / "f00.jsonl").stat().st_size
    specs = JsonlReader(str(tmp_path), blocksize=3 * size).partitions()
    assert [len(s.paths) for s in specs] == [3, 3, 3, 1]
    assert [p for s in specs for p in s.paths] == sorted(str(p) for p in tmp_path.iterdir())
    specs = JsonlReader(str(tmp_path / "f0*.jsonl"), files_per_partition=4).partitions()
    assert [len(s.paths) for s in specs] == [4, 4, 2]


def test_generated_ids_are_file_and_byte_offset(tmp_path: Path) -> None:
    lines = [
        b'{"text": "a"}\n',
        b"\n",
        b'{"text": "bb", "id": 7}\r\n',
        b'{"text": "c", "id": null}',
    ]
    (tmp_path / "x.jsonl").write_bytes(b"".join(lines))
    got = read_jsonl(str(tmp_path / "x.jsonl")).compute()
    offsets = np.cumsum([0] + [len(x) for x in lines])
    assert got["id"].tolist() == ["x.jsonl:0", "7", f"x.jsonl:{offsets[3]}"]
    assert got["text"].tolist() == ["a", "bb", "c"]
    assert got["id"].dtype == pd.StringDtype("pyarrow")
    assert got["text"].dtype == pd.StringDtype("pyarrow")


def test_ids_do_not_depend_on_blocksize(tmp_path: Path, sample_lines: list[bytes]) -> None:
    body = b"".join(
        json.dumps({"text": json.loads(line)["text"]}).encode() + b"\n"
        for line in sample_lines[:600]
    )
    (tmp_path / "noid.jsonl").write_bytes(body)
    ref = read_jsonl(str(tmp_path), blocksize="1GB").compute()
    for bs in ("100kB", "333kB"):
        df = read_jsonl(str(tmp_path), blocksize=bs)
        assert df.npartitions >= 3
        got = df.compute()
        assert got["id"].tolist() == ref["id"].tolist()
    starts = np.cumsum([0] + [len(x) for x in body.splitlines(keepends=True)])[:-1]
    assert ref["id"].tolist() == [f"noid.jsonl:{s}" for s in starts]


def test_columns_and_meta(tmp_path: Path) -> None:
    recs = [{"text": f"t{i}", "n": i, "f": i / 2, "tag": "x", "id": f"d{i}"} for i in range(9)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    df = read_jsonl(str(tmp_path), columns=["n"], add_filename=True)
    assert list(df.columns) == ["id", "text", "n", "file_name"]
    assert df.dtypes["n"] == np.int64
    out = df.compute()
    assert out["n"].tolist() == list(range(9))
    assert set(out["file_name"]) == {"a.jsonl"}
    df = read_jsonl(str(tmp_path))
    assert list(df.columns) == ["id", "text", "n", "f", "tag"]
    assert_eq(
        df,
        pd.DataFrame(recs)[list(df.columns)].astype(
            {"id": "string[pyarrow]", "text": "string[pyarrow]"}
        ),
    )


def test_argument_errors(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "a"}\n')
    with pytest.raises(ValueError, match="either blocksize or files_per_partition"):
        JsonlReader(str(tmp_path), blocksize="1MB", files_per_partition=2)
    with pytest.raises(ValueError, match="on_error"):
        JsonlReader(str(tmp_path), on_error="ignore")
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl"):
        JsonlReader(str(tmp_path / "nope.jsonl")).partitions()
    with pytest.raises(FileNotFoundError, match="no files match"):
        JsonlReader(str(tmp_path / "*.parquet")).partitions()


def test_empty_file_is_zero_records(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "empty.jsonl.gz").write_bytes(gzip.compress(b""))
    (tmp_path / "blank.jsonl").write_bytes(b"\n\r\n  \n")
    reader = JsonlReader(str(tmp_path), files_per_partition=1)
    for spec in reader.partitions():
        res = reader.read_partition(spec)
        assert (res.docs_read, len(res.data), len(res.quarantine)) == (0, 0, 0)
    assert len(read_jsonl(str(tmp_path)).compute()) == 0


def test_fifty_megabyte_document(tmp_path: Path) -> None:
    big = "word " * 10_000_000  # 50 MB of text in one document
    path = tmp_path / "big.jsonl"
    with open(path, "w") as f:
        f.write(json.dumps({"id": "small", "text": "tiny"}) + "\n")
        f.write(json.dumps({"id": "big", "text": big}) + "\n")
        f.write(json.dumps({"id": "after", "text": "end"}) + "\n")
    # Split into 8 MB ranges: the big line starts in the first and belongs to it alone.
    reader = JsonlReader(str(path), blocksize="8MB")
    specs = reader.partitions()
    assert len(specs) == 7
    results = [reader.read_partition(s) for s in specs]
    assert [len(r.data) for r in results] == [2, 0, 0, 0, 0, 0, 1]
    got = pd.concat([r.data for r in results], ignore_index=True)
    assert got["id"].tolist() == ["small", "big", "after"]
    assert got["text"][1] == big
    del got, results
    # The same with a size limit: the big document is quarantined, not lost.
    reader = JsonlReader(str(path), max_document_bytes=1_000_000, blocksize="1GB")
    res = reader.read_partition(reader.partitions()[0])
    assert res.data["id"].tolist() == ["small", "after"]
    assert res.docs_read == 3
    row = res.quarantine.iloc[0]
    assert (row["line"], row["byte_offset"]) == (2, path.read_bytes().index(b'{"id": "big"'))
    assert "max_document_bytes=1000000" in row["reason"]
    assert len(row["raw"]) > 50_000_000


def test_sample_copy_under_quarantine_dir_is_read(tmp_path: Path) -> None:
    # Explicit file paths are read whatever their name; directories skip "_" names.
    shutil.copy(str(SAMPLE), tmp_path / "_hidden.jsonl.gz")
    assert len(read_jsonl(str(tmp_path / "_hidden.jsonl.gz"))) == 4000
    with pytest.raises(FileNotFoundError, match="holds no files"):
        read_jsonl(str(tmp_path))


def test_raise_mode_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "ok2"}\n{"text": oops}\n')
    reader = JsonlReader(str(path), on_error="raise")
    with pytest.raises(MalformedInputError, match=r"bad\.jsonl: line 3, byte offset 31"):
        reader.read_partition(reader.partitions()[0])


def test_to_dask_writes_quarantine_and_warns(tmp_path: Path) -> None:
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.jsonl").write_bytes(b'{"text": "a"}\n{"text": 1}\n{"text": "b"}\n')
    (data / "b.jsonl").write_bytes(b'{"text": "c"}\nnot json\n')
    qdir = tmp_path / "q"
    df = read_jsonl(str(data), files_per_partition=1, quarantine_path=str(qdir))
    with pytest.warns(QuarantineWarning, match="1 bad record"):
        got = df.compute()
    assert got["text"].tolist() == ["a", "b", "c"]
    q = read_quarantine(str(qdir))
    assert sorted(p.name for p in qdir.iterdir()) == ["part-00000.jsonl", "part-00001.jsonl"]
    assert q[["line", "partition"]].values.tolist() == [[2, 0], [2, 1]]
    assert q["raw"].tolist() == ['{"text": 1}', "not json"]
    # A recompute overwrites the same files: nothing doubles.
    with pytest.warns(QuarantineWarning):
        df.compute()
    assert len(read_quarantine(str(qdir))) == 2


def test_default_quarantine_dir_from_config(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b'{"text": "a"}\n[1]\n')
    qdir = tmp_path / "from-config"
    with dask.config.set({"curator.io.quarantine-dir": str(qdir)}):
        df = read_jsonl(str(tmp_path / "a.jsonl"))
    with pytest.warns(QuarantineWarning):
        assert len(df.compute()) == 1
    assert read_quarantine(str(qdir))["reason"].tolist() == ["not a JSON object (list)"]
