"""Write-back per input file: one output file per input file, under the same relative name."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from curator_dask.executor import SequentialExecutor
from curator_dask.filters import WordCountFilter
from curator_dask.io import JsonlReader, JsonlWriter, ParquetWriter
from curator_dask.pipeline import Pipeline


def _docs(prefix: str, n: int) -> list[dict]:
    return [
        {"id": f"{prefix}{i}", "text": " ".join(["w"] * (i % 5)) + f" {prefix}"} for i in range(n)
    ]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    (d / "2023").mkdir(parents=True)
    (d / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _docs("a", 10)))
    with gzip.open(d / "2023" / "b.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in _docs("b", 7)))
    return d


@pytest.mark.parametrize(
    ("writer", "suffix"), [(JsonlWriter, ".jsonl"), (ParquetWriter, ".parquet")]
)
def test_one_output_file_per_input_file_with_its_name(
    src: Path, tmp_path: Path, writer: type, suffix: str
) -> None:
    out = tmp_path / "out"
    result = Pipeline(
        "back",
        [
            JsonlReader(str(src), files_per_partition=1),
            WordCountFilter(min_words=2),
            writer(str(out), per_input_file=True),
        ],
    ).run(SequentialExecutor(progress=False))
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == [f"2023/b{suffix}", f"a{suffix}"]
    read = pd.read_json if suffix == ".jsonl" else pd.read_parquet
    kwargs = {"lines": True} if suffix == ".jsonl" else {}
    for name, prefix, n in ((f"a{suffix}", "a", 10), (f"2023/b{suffix}", "b", 7)):
        got = read(out / name, **kwargs)
        want = [d["id"] for d in _docs(prefix, n) if len(d["text"].split()) >= 2]
        assert got["id"].tolist() == want
    assert result.kept == sum(
        1 for d in _docs("a", 10) + _docs("b", 7) if len(d["text"].split()) >= 2
    )
    # resume finds the files under their names
    again = Pipeline(
        "back",
        [
            JsonlReader(str(src), files_per_partition=1),
            WordCountFilter(min_words=2),
            writer(str(out), per_input_file=True, mode="resume"),
        ],
    ).run(SequentialExecutor(progress=False))
    assert again.partitions_skipped == 2


def test_per_input_file_needs_whole_files(src: Path, tmp_path: Path) -> None:
    pipeline = Pipeline(
        "back",
        [
            JsonlReader(str(src), blocksize=1 << 20),  # both small files in one partition
            JsonlWriter(str(tmp_path / "out"), per_input_file=True),
        ],
    )
    with pytest.raises(ValueError, match="files_per_partition=1"):
        pipeline.run(SequentialExecutor(progress=False))


def test_resume_removes_the_output_of_a_deleted_input_file(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"

    def run() -> object:
        return Pipeline(
            "back",
            [
                JsonlReader(str(src), files_per_partition=1),
                JsonlWriter(str(out), per_input_file=True, mode="resume"),
            ],
        ).run(SequentialExecutor(progress=False))

    run()
    assert (out / "2023" / "b.jsonl").exists()
    (src / "2023" / "b.jsonl.gz").unlink()  # sorted first: the partitions renumber
    result = run()
    assert result.read == result.kept == 10  # type: ignore[attr-defined]
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.jsonl"))
    assert files == ["a.jsonl"]
