"""ParquetReader / read_parquet against pandas, row-group splitting, ids and quarantine."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dask.dataframe.utils import assert_eq

from curator_dask.io import (
    MalformedInputError,
    ParquetReader,
    QuarantineWarning,
    read_parquet,
    read_quarantine,
)


@pytest.fixture(autouse=True)
def _sync_scheduler():
    with dask.config.set(scheduler="sync"):
        yield


def _docs(n: int, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "text": [f"document {i} " + "w " * (i % 17) for i in range(start, start + n)],
            "lang": ["en" if i % 3 else "de" for i in range(start, start + n)],
            "score": np.arange(start, start + n) / 7.0,
        }
    )


def test_files_and_row_groups_match_pandas(tmp_path: Path) -> None:
    frames = [_docs(400, 0), _docs(50, 400), _docs(50, 450)]
    pq.write_table(pa.Table.from_pandas(frames[0]), tmp_path / "a.parquet", row_group_size=50)
    pq.write_table(pa.Table.from_pandas(frames[1]), tmp_path / "b.parquet")
    pq.write_table(pa.Table.from_pandas(frames[2]), tmp_path / "c.parquet")
    size_a = (tmp_path / "a.parquet").stat().st_size
    reader = ParquetReader(str(tmp_path), blocksize=size_a // 6)
    specs = reader.partitions()
    split = [s for s in specs if s.start is not None]
    assert len(split) >= 3  # a.parquet's 8 row groups cut into ranges
    assert split[0].start == 0
    assert split[-1].end == 8
    assert all(a.end == b.start for a, b in itertools.pairwise(split))
    df = reader.to_dask()
    assert df.npartitions == len(specs) >= 4
    expected = pd.concat(frames, ignore_index=True)
    expected.insert(
        0,
        "id",
        [f"a.parquet:{i}" for i in range(400)]
        + [f"b.parquet:{i}" for i in range(50)]
        + [f"c.parquet:{i}" for i in range(50)],
    )
    expected = expected.astype({"id": "string[pyarrow]", "text": "string[pyarrow]"})
    assert_eq(df, expected, check_index=False, check_dtype=False)
    # the same rows and ids whatever the partitioning
    whole = read_parquet(str(tmp_path), files_per_partition=2).compute()
    assert whole["id"].tolist() == expected["id"].tolist()


def test_columns_add_filename_and_existing_ids(tmp_path: Path) -> None:
    pdf = _docs(20).assign(id=[f"x{i}" if i % 4 else None for i in range(20)])
    pq.write_table(pa.Table.from_pandas(pdf), tmp_path / "f.parquet")
    df = read_parquet(str(tmp_path / "f.parquet"), columns=["lang"], add_filename=True)
    assert list(df.columns) == ["id", "text", "lang", "file_name"]
    out = df.compute()
    assert out["id"].tolist() == [f"x{i}" if i % 4 else f"f.parquet:{i}" for i in range(20)]
    assert set(out["file_name"]) == {"f.parquet"}


def test_bad_text_rows_are_quarantined(tmp_path: Path) -> None:
    table = pa.table({"text": ["a", None, "c", None], "n": [1, 2, 3, 4]})
    pq.write_table(table, tmp_path / "nulls.parquet")
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "ints.parquet")
    pq.write_table(pa.table({"body": ["no text column"]}), tmp_path / "notext.parquet")
    reader = ParquetReader(str(tmp_path), files_per_partition=1)
    results = {Path(s.paths[0]).name: reader.read_partition(s) for s in reader.partitions()}
    for res in results.values():
        assert res.docs_read == len(res.data) + len(res.quarantine)
    nulls = results["nulls.parquet"]
    assert nulls.data["text"].tolist() == ["a", "c"]
    assert nulls.data["id"].tolist() == ["nulls.parquet:0", "nulls.parquet:2"]
    assert nulls.quarantine["line"].tolist() == [1, 3]
    assert nulls.quarantine["byte_offset"].tolist() == [-1, -1]
    assert json.loads(nulls.quarantine["raw"][0]) == {"text": None, "n": 2}
    assert (
        results["ints.parquet"].quarantine["reason"].tolist()
        == ["text field 'text' is not a string (int)"] * 2
    )
    assert len(results["notext.parquet"].quarantine) == 1
    qdir = tmp_path / "q"
    df = read_parquet(str(tmp_path / "nulls.parquet"), quarantine_path=str(qdir))
    with pytest.warns(QuarantineWarning, match="2 bad record"):
        assert len(df.compute()) == 2
    assert read_quarantine(str(qdir))["line"].tolist() == [1, 3]
    strict = ParquetReader(str(tmp_path / "nulls.parquet"), on_error="raise")
    with pytest.raises(MalformedInputError, match=r"nulls\.parquet: line 1: missing"):
        strict.read_partition(strict.partitions()[0])


def test_dictionary_encoded_text(tmp_path: Path) -> None:
    pdf = pd.DataFrame({"text": pd.Categorical(["a", "b", "a"])})
    pdf.to_parquet(tmp_path / "cat.parquet")
    got = read_parquet(str(tmp_path)).compute()
    assert got["text"].tolist() == ["a", "b", "a"]


def test_argument_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="either blocksize or files_per_partition"):
        ParquetReader(str(tmp_path), blocksize=10, files_per_partition=1)
    with pytest.raises(FileNotFoundError, match="holds no files"):
        ParquetReader(str(tmp_path)).partitions()
