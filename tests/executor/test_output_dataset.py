"""An output directory is a dataset: every reader users use gets the documents, all columns.

The input has three sources with different fields, and its first partition holds only broken
records (as in the demo), so that partition's file would otherwise lack every field but
``id`` and ``text``. The runs keep their removed documents and quarantine records: those, and
the run's statistics, lie beside the output (``<output>.curator/``), where no tool reading
the output looks: pandas, pyarrow.dataset, dask (a directory, ``*`` and ``**`` globs), HF
``datasets``, polars (a directory, ``scan_*``, globs) and duckdb (globs).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import duckdb
import pandas as pd
import polars as pl
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
    ] + [{"id": "w-short", "text": "too short to keep", "source": "web", "url": "s"}]
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
    stages = [reader, WordCountFilter(min_words=8), writer]
    result = Pipeline("ds", stages, keep_removed=True).run(  # type: ignore[arg-type]
        SequentialExecutor(progress=False)
    )
    assert result.quarantined == 2
    assert result.balanced


def test_parquet_output_reads_back_with_every_tool(multi_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(multi_source, ParquetWriter(str(out)))
    # the partition of broken records is empty: no file (an empty Parquet file breaks
    # datasets.load_dataset); its accounting and quarantine are in out.curator/ beside it
    assert sorted(p.name for p in out.iterdir()) == [
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    want = _expected()
    assert set(want.columns) == {"id", "text", "source", "url", "score"}
    assert result_has_metadata(out)
    frames = {
        "dask": dd.read_parquet(str(out)).compute(),
        "dask *": dd.read_parquet(f"{out}/*.parquet").compute(),
        "dask **": dd.read_parquet(f"{out}/**/*.parquet").compute(),
        "polars": pl.read_parquet(out).to_pandas(),
        "polars scan": pl.scan_parquet(out).collect().to_pandas(),
        "polars **": pl.read_parquet(f"{out}/**/*.parquet").to_pandas(),
        "duckdb *": duckdb.sql(f"select * from read_parquet('{out}/*.parquet')").df(),
        "duckdb **": duckdb.sql(f"select * from read_parquet('{out}/**/*.parquet')").df(),
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
    assert result_has_metadata(out)
    for pattern in ("*.jsonl", "**/*.jsonl"):
        got = dd.read_json(f"{out}/{pattern}", lines=True, orient="records", dtype=sparse)
        pd.testing.assert_frame_equal(_canonical(got.compute()), want, obj=f"dask {pattern}")
    types = {"url": pl.String, "score": pl.Float64, "source": pl.String}
    frames = {
        "polars": pl.read_ndjson(out, schema_overrides=types),
        "polars scan": pl.scan_ndjson(out, schema_overrides=types).collect(),
        "polars *": pl.read_ndjson(f"{out}/*.jsonl", schema_overrides=types),
        "polars **": pl.read_ndjson(f"{out}/**/*.jsonl", schema_overrides=types),
    }
    for tool, frame in frames.items():
        pd.testing.assert_frame_equal(_canonical(frame.to_pandas()), want, obj=tool)
    for pattern in ("*.jsonl", "**/*.jsonl", "**"):
        got = duckdb.sql(f"select * from read_json('{out}/{pattern}')").df()
        pd.testing.assert_frame_equal(_canonical(got), want, obj=f"duckdb {pattern}")
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


def result_has_metadata(out: Path) -> bool:
    """The run left its quarantine, removed documents and marker beside ``out``, not in it."""
    meta = Path(f"{out}.curator")
    quarantined = list((meta / "_quarantine").glob("part-*.jsonl"))
    removed = list((meta / "_removed").glob("part-*"))
    files = [p for p in out.rglob("*") if p.is_file()]
    return (
        bool(quarantined and removed)
        and (meta / "_SUCCESS").exists()
        and all(p.name.startswith("part-") for p in files)
    )


def test_dedup_outputs_read_back_as_the_kept_documents(tmp_path: Path) -> None:
    """``deduplicated/`` holds the kept documents and nothing else; its marker, the removed
    ids' marker and the quarantine lie beside the folders."""
    from curator_dask.dedup import ExactDeduplicationWorkflow
    from curator_dask.io import QuarantineWarning

    src = tmp_path / "in"
    src.mkdir()
    docs = [{"id": f"d{i:02d}", "text": f"text {i % 7}"} for i in range(30)]
    lines = [json.dumps(d) for d in docs] + ['{"id": "bad", "text": 5}']
    (src / "a.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    flow = ExactDeduplicationWorkflow(
        input_path=str(src), output_path=str(out), perform_removal=True
    )
    with pytest.warns(QuarantineWarning, match="1 bad record"):
        result = flow.run()
    assert (result.documents, result.removed, result.quarantined) == (30, 23, 1)
    kept = out / "deduplicated"
    want = sorted(f"d{i:02d}" for i in range(7))
    got = {
        "pandas": pd.read_parquet(kept),
        "pyarrow.dataset": pads.dataset(str(kept)).to_table().to_pandas(),
        "dask": dd.read_parquet(str(kept)).compute(),
        "dask **": dd.read_parquet(f"{kept}/**/*.parquet").compute(),
        "polars": pl.read_parquet(kept).to_pandas(),
        "polars scan": pl.scan_parquet(f"{out}/deduplicated").collect().to_pandas(),
        "polars **": pl.read_parquet(f"{kept}/**/*.parquet").to_pandas(),
        "duckdb **": duckdb.sql(f"select * from read_parquet('{kept}/**/*.parquet')").df(),
        "datasets": datasets.load_dataset("parquet", data_dir=str(kept), split="train").to_pandas(),
    }
    for tool, frame in got.items():
        assert sorted(frame["id"]) == want, tool
    assert len(pl.read_parquet(out / "removed_ids")) == 23
    assert Path(f"{kept}.curator/_SUCCESS").exists()
    assert len(list(Path(f"{out}.curator/_quarantine").glob("part-*.jsonl"))) == 1
    assert all(p.name.startswith("part-") for p in kept.rglob("*"))
    assert all(p.name.startswith("part-") for p in (out / "removed_ids").rglob("*"))
