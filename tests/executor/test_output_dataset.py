"""An output directory is a dataset: every reader users use gets the documents, all columns.

The input has three sources with different fields, and its first partition holds only broken
records (as in the demo), so that partition's file would otherwise lack every field but
``id`` and ``text``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import pandas as pd
import pyarrow.dataset as pads
import pytest

from curator_dask.executor import SequentialExecutor
from curator_dask.filters import WordCountFilter
from curator_dask.io import JsonlReader, JsonlWriter, ParquetWriter
from curator_dask.pipeline import Pipeline

datasets = pytest.importorskip("datasets")  # in the dev extra


def _docs() -> dict[str, list[dict[str, Any]]]:
    web = [
        {"id": f"w{i}", "text": f"web page number {i} " * 3, "source": "web", "url": f"u{i}"}
        for i in range(12)
    ]
    books = [
        {"id": f"b{i}", "text": f"book chapter {i} " * 4, "source": "books", "score": i / 4}
        for i in range(9)
    ]
    return {"b-books.jsonl": books, "c-web.jsonl": web}


@pytest.fixture
def multi_source(tmp_path: Path) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    # first file in sort order: broken records only
    (src / "a-broken.jsonl").write_text('{"id": "x", "text": \n{"id": "y"}\n')
    for name, docs in _docs().items():
        (src / name).write_text("".join(json.dumps(d) + "\n" for d in docs))
    return src


def _expected() -> pd.DataFrame:
    rows = [d for docs in _docs().values() for d in docs]
    frame = pd.DataFrame(rows)
    frame = frame[frame["text"].str.split().str.len() >= 8]  # WordCountFilter(min_words=8)
    return _canonical(frame)


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by id, columns by name, missing values as None, numbers as floats."""
    frame = frame[sorted(frame.columns)].sort_values("id").reset_index(drop=True)

    def norm(v: Any) -> Any:
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        return str(v)

    return pd.DataFrame({c: [norm(v) for v in frame[c].tolist()] for c in frame.columns})


def _run(src: Path, writer: Any) -> None:
    reader = JsonlReader(str(src), files_per_partition=1)
    result = Pipeline("ds", [reader, WordCountFilter(min_words=8), writer]).run(
        SequentialExecutor(progress=False)
    )
    assert result.quarantined == 2
    assert result.balanced


def test_parquet_output_reads_back_with_every_tool(multi_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(multi_source, ParquetWriter(str(out)))
    # the partition of broken records is empty: no file (an empty Parquet file breaks
    # datasets.load_dataset); its accounting and quarantine are in .curator/
    assert sorted(p.name for p in out.iterdir()) == [
        ".curator",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    want = _expected()
    assert set(want.columns) == {"id", "text", "source", "url", "score"}
    frames = {
        "dask": dd.read_parquet(str(out)).compute(),
        "pandas": pd.read_parquet(out),
        "pyarrow.dataset": pads.dataset(str(out), format="parquet").to_table().to_pandas(),
        "datasets": datasets.load_dataset("parquet", data_dir=str(out), split="train").to_pandas(),
    }
    for tool, got in frames.items():
        pd.testing.assert_frame_equal(_canonical(got), want, obj=tool)
    # one schema for every part file, the empty one of broken records included
    schemas = {str(pads.dataset(str(p)).schema) for p in sorted(out.glob("part-*.parquet"))}
    assert len(schemas) == 1


def test_jsonl_output_reads_back_with_every_tool(multi_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(multi_source, JsonlWriter(str(out)))
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "part-00001.jsonl",
        "part-00002.jsonl",
    ]
    want = _expected()
    # JSON carries no types: a field that is null in a whole file is read as float there
    # unless its type is given, as a user does for sparse fields
    sparse = {"url": "string", "score": "float64", "source": "string"}
    got = dd.read_json(str(out / "*.jsonl"), lines=True, orient="records", dtype=sparse)
    got = got.compute()
    pd.testing.assert_frame_equal(_canonical(got), want, obj="dask")
    string, number = datasets.Value("string"), datasets.Value("float64")
    features = datasets.Features(
        {"id": string, "text": string, "source": string, "score": number, "url": string}
    )
    hf = datasets.load_dataset("json", data_dir=str(out), split="train", features=features)
    hf = hf.to_pandas()
    pd.testing.assert_frame_equal(_canonical(hf), want, obj="datasets")
    # every record carries every column, in one order
    keys = {
        tuple(json.loads(line))
        for p in sorted(out.glob("part-*.jsonl"))
        for line in p.read_text().splitlines()
    }
    assert keys == {("id", "text", "source", "score", "url")}
