"""Pipeline(keep_removed=True): what each stage removed is kept, with the stage's name."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from distributed import Client, LocalCluster

from curator_dask.executor import DaskExecutor, SequentialExecutor
from curator_dask.filters import WordCountFilter
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline
from curator_dask.stage import processing_stage


@processing_stage(name="no_digits")
def no_digits(part: pd.DataFrame) -> pd.DataFrame:
    return part[~part["text"].str.contains("7")]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    for f in range(3):
        docs = [
            {"id": f"f{f}-{i}", "text": " ".join(["w"] * (i % 6)) + f" n{i}"} for i in range(20)
        ]
        lines = [json.dumps(doc) for doc in docs] + ['{"id": "bad", "text": ']
        (d / f"{f}.jsonl").write_text("\n".join(lines) + "\n")
    return d


def _run(src: Path, out: Path, executor: object) -> object:
    pipeline = Pipeline(
        "keep",
        [
            JsonlReader(str(src), files_per_partition=1),
            WordCountFilter(min_words=3),
            no_digits,
            JsonlWriter(str(out)),
        ],
        keep_removed=True,
    )
    return pipeline.run(executor)  # type: ignore[arg-type]


@pytest.mark.parametrize("where", ["sequential", "cluster"])
def test_every_removed_document_is_kept_with_the_stage_that_removed_it(
    src: Path, tmp_path: Path, where: str
) -> None:
    out = tmp_path / "out"
    if where == "sequential":
        result = _run(src, out, SequentialExecutor(progress=False))
    else:
        with (
            LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cluster,
            Client(cluster) as client,
        ):
            result = _run(src, out, DaskExecutor(client=client, progress=False))
    removed = pd.read_parquet(Path(str(out) + ".curator") / "_removed")
    kept = [json.loads(line)["id"] for p in out.glob("part-*.jsonl") for line in p.open()]
    by_stage = removed["removed_by"].value_counts().to_dict()
    assert by_stage == {s.name: s.removed for s in result.stages if s.removed}  # type: ignore[attr-defined]
    assert len(removed) == result.removed  # type: ignore[attr-defined]
    # every good document is kept or removed, exactly once
    want = sorted(f"f{f}-{i}" for f in range(3) for i in range(20))
    assert sorted([*kept, *removed["id"]]) == want
    # the removed documents are the input documents, unchanged
    short = removed[removed["removed_by"] == "WordCountFilter"]
    assert all(len(t.split()) < 3 for t in short["text"])
    assert all("7" in t for t in removed[removed["removed_by"] == "no_digits"]["text"])
    # the documents files hold only documents
    assert sorted(p.name for p in out.iterdir()) == [
        "part-00000.jsonl",
        "part-00001.jsonl",
        "part-00002.jsonl",
    ]


def test_keep_removed_needs_streaming(src: Path, tmp_path: Path) -> None:
    pipeline = Pipeline(
        "keep", [JsonlReader(str(src)), JsonlWriter(str(tmp_path / "o"))], keep_removed=True
    )
    with pytest.raises(ValueError, match="streaming"):
        pipeline.run(SequentialExecutor(progress=False), execution_mode="batch")


def test_an_overwrite_without_keep_removed_drops_the_earlier_removed_files(
    src: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _run(src, out, SequentialExecutor(progress=False))
    assert list((Path(str(out) + ".curator") / "_removed").glob("part-*.pqt"))
    Pipeline("again", [JsonlReader(str(src)), JsonlWriter(str(out))]).run(
        SequentialExecutor(progress=False)
    )
    assert not list((Path(str(out) + ".curator") / "_removed").glob("part-*.pqt"))


def test_a_parquet_output_with_its_metadata_reads_back_as_the_kept_documents(
    src: Path, tmp_path: Path
) -> None:
    """dd.read_parquet lists every *.parquet below a directory, hidden folders included:
    the removed documents and the memory timeline (in out.curator/) must not be among them."""
    import dask.dataframe as dd

    from curator_dask.io import ParquetWriter

    out = tmp_path / "out"
    pipeline = Pipeline(
        "keep",
        [
            JsonlReader(str(src), files_per_partition=1),
            WordCountFilter(min_words=3),
            ParquetWriter(str(out)),
        ],
        keep_removed=True,
    )
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cluster,
        Client(cluster) as client,
    ):
        result = pipeline.run(DaskExecutor(client=client, progress=False))
    meta = Path(str(out) + ".curator")
    assert list((meta / "_removed").iterdir())  # the removed documents are there
    assert not [p for p in meta.rglob("*") if p.suffix in (".parquet", ".parq", ".pq")]
    got = dd.read_parquet(str(out)).compute()
    assert list(got.columns) == ["id", "text"]
    assert len(got) == result.kept  # type: ignore[attr-defined]
    assert sorted(got["id"]) == sorted(pd.read_parquet(out)["id"])
