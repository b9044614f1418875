"""On a GPU, the cudf backend gives the CPU's results: readers, a pipeline run, exact dedup.

Each test reads or runs the same input under dask's ``dataframe.backend`` ``pandas`` and
``cudf`` and compares what a user compares: row counts, ids, texts, hashes of the output.
(Filters and modifiers: tests/filters/test_gpu.py; writers: tests/io/test_writers.py;
fuzzy dedup and MinHash: tests/dedup/test_gpu.py and test_gpu_shingles.py.)
"""

from __future__ import annotations

import gzip
import hashlib
import sys
from pathlib import Path

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

from curator_dask.cli import main
from curator_dask.dedup.exact import ExactDeduplicationWorkflow
from curator_dask.io import JsonlReader, ParquetReader

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).parent / "io"))
from test_jsonl_bad_input import CASES  # noqa: E402


@pytest.fixture(autouse=True)
def _needs_cudf() -> None:
    pytest.importorskip("cudf")
    pytest.importorskip("dask_cudf")


def _read_all(reader_factory, backend: str) -> tuple[list[int], pd.DataFrame, pd.DataFrame, int]:
    with dask.config.set({"dataframe.backend": backend}):
        reader = reader_factory()
        results = [reader.read_partition(s) for s in reader.partitions()]
    for r in results:
        want = "cudf" if backend == "cudf" else "pandas"
        assert type(r.data).__module__.split(".")[0] == want
    data = pd.concat([_host(r.data) for r in results], ignore_index=True)
    quarantine = pd.concat([r.quarantine for r in results], ignore_index=True)
    return [len(r.data) for r in results], data, quarantine, sum(r.docs_read for r in results)


def _host(frame):
    return frame if isinstance(frame, pd.DataFrame) else frame.to_pandas()


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    cols = ["id", "text"]
    pd.testing.assert_frame_equal(
        a[cols].astype(str).reset_index(drop=True), b[cols].astype(str).reset_index(drop=True)
    )


def test_jsonl_byte_range_splits_on_cudf_equal_pandas(tmp_path: Path, sample_path: Path) -> None:
    path = tmp_path / "sample.jsonl"
    path.write_bytes(gzip.decompress(sample_path.read_bytes()))

    def reader() -> JsonlReader:
        return JsonlReader(str(path), blocksize="256KB")

    cpu = _read_all(reader, "pandas")
    gpu = _read_all(reader, "cudf")
    assert len(cpu[0]) > 3  # split into byte ranges
    assert gpu[0] == cpu[0]
    _same(gpu[1], cpu[1])
    assert gpu[3] == cpu[3] == len(cpu[1])


def test_jsonl_quarantine_on_cudf_equals_pandas(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(line for line, _ in CASES) + b"\n")

    def reader() -> JsonlReader:
        return JsonlReader(str(path), max_document_bytes=4096)

    cpu = _read_all(reader, "pandas")
    gpu = _read_all(reader, "cudf")
    _same(gpu[1], cpu[1])
    pd.testing.assert_frame_equal(gpu[2], cpu[2])
    assert len(cpu[2]) == sum(1 for _, bad in CASES if bad)
    assert gpu[3] == cpu[3] == len(CASES)


def test_parquet_on_cudf_equals_pandas(tmp_path: Path, sample_records) -> None:
    frame = pd.DataFrame(sample_records)[["id", "text"]]
    (tmp_path / "pq").mkdir()
    for i in range(3):
        frame.iloc[i::3].to_parquet(tmp_path / "pq" / f"part-{i}.parquet", row_group_size=500)

    def reader() -> ParquetReader:
        return ParquetReader(str(tmp_path / "pq"))

    cpu = _read_all(reader, "pandas")
    gpu = _read_all(reader, "cudf")
    assert gpu[0] == cpu[0]
    _same(gpu[1], cpu[1])


def _output_digest(out: Path) -> tuple[int, str]:
    frame = pd.read_parquet(out).sort_values("id").reset_index(drop=True)
    digest = hashlib.sha256()
    for i, t in zip(frame["id"].astype(str), frame["text"].astype(str), strict=True):
        digest.update(f"{i}\t{t}\n".encode())
    return len(frame), digest.hexdigest()


def test_pipeline_run_on_cudf_equals_pandas(tmp_path: Path, sample_path: Path) -> None:
    examples = Path(__file__).resolve().parent.parent / "examples" / "pipeline.yaml"
    text = examples.read_text()
    digests = []
    for backend in ("pandas", "cudf"):
        out = tmp_path / f"out-{backend}"
        yaml = tmp_path / f"{backend}.yaml"
        yaml.write_text(
            text.replace("curator_dask/data/sample.jsonl.gz", str(sample_path)).replace(
                "out/sample-clean", str(out)
            )
        )
        with dask.config.set({"dataframe.backend": backend}):
            assert main(["run", str(yaml), "--sequential", "-q"]) == 0
        digests.append(_output_digest(out))
    assert digests[0][0] > 1000
    assert digests[1] == digests[0]


def test_exact_dedup_on_cudf_equals_pandas(tmp_path: Path, sample_records) -> None:
    pdf = pd.DataFrame(sample_records)[["id", "text"]]
    removed = []
    for backend in ("pandas", "cudf"):
        with dask.config.set({"dataframe.backend": backend}):
            df = dd.from_pandas(pdf, npartitions=4)
            if backend == "cudf":
                df = df.to_backend("cudf")
            out = tmp_path / backend
            ExactDeduplicationWorkflow(output_path=str(out), df=df, perform_removal=True).run()
        removed.append(sorted(pd.read_parquet(out / "removed_ids")["id"].astype(str)))
        removed.append(_output_digest(out / "deduplicated"))
    assert len(removed[0]) > 300
    assert removed[2:] == removed[:2]
