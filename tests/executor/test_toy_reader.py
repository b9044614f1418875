"""A new reader format, in this one file, gets splitting, resume and quarantine for free.

The toy format is TSV: one ``id<TAB>text`` record a line; a line without a tab is bad. The
reader subclasses :class:`curator_dask.io.FileReader` and gives only ``read_file``,
``split_file`` and ``meta``; nothing in the executor knows about it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from distributed import Client, LocalCluster

from curator_dask.executor import DaskExecutor, SequentialExecutor
from curator_dask.io import BadRecords, FileInfo, FileReader, JsonlWriter, read_quarantine
from curator_dask.io.base import PartitionSpec
from curator_dask.pipeline import Pipeline
from curator_dask.stage import ProcessingStage


@dataclass
class TsvReader(FileReader):
    """``id<TAB>text`` lines; byte ranges of ``blocksize`` (a line belongs to the range it
    starts in)."""

    paths: Any
    columns: Any = None
    add_filename: bool = False
    blocksize: int | str | None = None
    files_per_partition: int | None = None
    on_error: str = "quarantine"
    quarantine_path: str | None = None
    storage_options: dict[str, Any] | None = field(default=None, repr=False)

    suffixes: ClassVar[tuple[str, ...]] = (".tsv",)
    format_name: ClassVar[str] = "tsv"

    def __post_init__(self) -> None:
        self._check_arguments()

    def split_file(self, f: FileInfo, blocksize: int) -> list[tuple[int, int]] | None:
        return [(s, min(s + blocksize, f.size)) for s in range(0, f.size, blocksize)]

    def read_file(
        self, path: str, start: int | None, end: int | None
    ) -> tuple[pd.DataFrame, BadRecords]:
        data = Path(path).read_bytes()
        lo, hi = start or 0, len(data) if end is None else end
        ids, texts, bad = [], [], BadRecords(path)
        offset = 0
        for number, line in enumerate(data.splitlines(keepends=True), 1):
            here, offset = offset, offset + len(line)
            if not lo <= here < hi or not line.strip():
                continue
            record = line.rstrip(b"\r\n").decode()
            if "\t" not in record:
                bad.add(number, here, "no tab", line.rstrip(b"\n"))
                continue
            doc_id, text = record.split("\t", 1)
            ids.append(doc_id)
            texts.append(text)
        frame = pd.DataFrame({"id": ids, "text": texts}, dtype=pd.StringDtype("pyarrow"))
        return frame, bad

    def meta(self, specs: list[PartitionSpec]) -> pd.DataFrame:
        return pd.DataFrame(
            {c: pd.Series([], dtype=pd.StringDtype("pyarrow")) for c in ("id", "text")}
        )


@dataclass(kw_only=True)
class RowLimit(ProcessingStage):
    """Raise MemoryError on a partition of more than ``max_rows`` rows (an out-of-memory)."""

    max_rows: int | None = None

    def process(self, part: Any) -> Any:
        if self.max_rows is not None and len(part) > self.max_rows:
            raise MemoryError(f"{len(part)} rows > {self.max_rows}")
        return part


@pytest.fixture
def tsv_dir(tmp_path: Path) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    lines = [f"doc{i:03d}\t{'word ' * (5 + i % 7)}{i}" for i in range(90)]
    lines.insert(10, "a line without a tab")
    (src / "a.tsv").write_text("\n".join(lines[:70]) + "\n")
    (src / "b.tsv").write_text("\n".join(lines[70:]) + "\n")
    return src


def _digest(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("part-*"))}


def _pipeline(src: Path, out: Path, max_rows: int | None = None) -> Pipeline:
    size = (src / "a.tsv").stat().st_size
    return Pipeline(
        "toy",
        [
            TsvReader(str(src), blocksize=size // 2 + 1),
            RowLimit(max_rows=max_rows),
            JsonlWriter(str(out), mode="resume"),
        ],
    )


def test_split_halves_read_exactly_the_partition(tsv_dir: Path) -> None:
    reader = _pipeline(tsv_dir, tsv_dir / "x").reader
    assert reader is not None
    specs = reader.partitions()
    assert [s.start is not None for s in specs] == [True, True, False]
    whole = reader.read_partition(specs[0])
    halves = reader.split(specs[0])
    assert halves is not None
    parts = [reader.read_partition(h) for h in halves]
    assert all(0 < len(p.data) < len(whole.data) for p in parts)
    joined = pd.concat([p.data for p in parts], ignore_index=True)
    pd.testing.assert_frame_equal(joined, whole.data)
    assert sum(p.docs_read for p in parts) == whole.docs_read
    assert reader.split(specs[2]) is None  # a whole file: the executor keeps row slices
    assert reader.estimated_bytes(specs[2]) == 2 * (tsv_dir / "b.tsv").stat().st_size


def test_toy_reader_gets_out_of_memory_splitting_resume_and_quarantine(
    tsv_dir: Path, tmp_path: Path
) -> None:
    ref = _pipeline(tsv_dir, tmp_path / "ref").run(SequentialExecutor(progress=False))
    assert (ref.read, ref.kept, ref.quarantined) == (91, 90, 1)
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cluster,
        Client(cluster) as client,
    ):
        result = _pipeline(tsv_dir, tmp_path / "out", max_rows=12).run(
            DaskExecutor(client=client, progress=False)
        )
    assert result.split_partitions == [0, 1, 2]
    assert (result.read, result.kept, result.quarantined) == (91, 90, 1)
    assert _digest(tmp_path / "out") == _digest(tmp_path / "ref")
    q = read_quarantine(str(tmp_path / "out"))
    assert q["raw"].tolist() == ["a line without a tab"]
    # every kept document is there once
    got = [
        json.loads(line)["id"]
        for p in sorted((tmp_path / "out").glob("part-*"))
        for line in p.read_text().splitlines()
    ]
    assert sorted(got) == [f"doc{i:03d}" for i in range(90)]

    again = _pipeline(tsv_dir, tmp_path / "out", max_rows=12).run(
        SequentialExecutor(progress=False)
    )
    assert again.partitions_skipped == 3
    assert (again.read, again.kept, again.quarantined) == (91, 90, 1)
