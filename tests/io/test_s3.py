"""Readers and writers against a real local S3 endpoint (moto's server)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

from curator_dask.io import (
    JsonlReader,
    JsonlWriter,
    QuarantineWarning,
    read_jsonl,
    read_parquet,
    read_quarantine,
    write_jsonl,
    write_parquet,
    write_quarantine,
)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _sync_scheduler():
    with dask.config.set(scheduler="sync"):
        yield


def _fs(options: dict[str, Any]) -> Any:
    import s3fs

    return s3fs.S3FileSystem(**options)


def _frame(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"id": [f"d{i}" for i in range(n)], "text": [f"doc {i} " * 4 for i in range(n)]}
    )


def test_jsonl_round_trip_and_byte_ranges(s3_bucket: tuple[str, dict[str, Any]]) -> None:
    url, options = s3_bucket
    pdf = _frame(200)
    results = write_jsonl(dd.from_pandas(pdf, npartitions=3), f"{url}/out", storage_options=options)
    assert [r.path for r in results] == [f"{url}/out/part-{i:05d}.jsonl" for i in range(3)]
    fs = _fs(options)
    assert json.loads(fs.cat_file(f"{url}/out.curator/_SUCCESS"))["rows_written"] == 200
    # A blocksize smaller than each file: byte-range reads through the S3 API.
    reader = JsonlReader(f"{url}/out", blocksize=1500, storage_options=options)
    specs = reader.partitions()
    assert len(specs) > 3
    assert all(s.start is not None for s in specs)
    got = reader.to_dask().compute()
    assert got["id"].tolist() == pdf["id"].tolist()
    assert got["text"].tolist() == pdf["text"].tolist()


def test_compressed_input_and_quarantine_on_s3(s3_bucket: tuple[str, dict[str, Any]]) -> None:
    url, options = s3_bucket
    fs = _fs(options)
    body = b'{"text": "a"}\n{"text": 5}\n{"text": "b"}\n'
    fs.pipe(f"{url}/in/x.jsonl.gz", gzip.compress(body))
    df = read_jsonl(f"{url}/in/*.jsonl.gz", storage_options=options, quarantine_path=f"{url}/q")
    with pytest.warns(QuarantineWarning, match="1 bad record"):
        assert df.compute()["text"].tolist() == ["a", "b"]
    q = read_quarantine(f"{url}/q", storage_options=options)
    assert q[["file", "line", "raw"]].values.tolist() == [
        [f"{url}/in/x.jsonl.gz", 2, '{"text": 5}']
    ]


def test_parquet_and_writer_modes_on_s3(s3_bucket: tuple[str, dict[str, Any]]) -> None:
    url, options = s3_bucket
    pdf = _frame(60)
    write_parquet(dd.from_pandas(pdf, npartitions=3), f"{url}/pq", storage_options=options)
    got = read_parquet(f"{url}/pq", storage_options=options).compute()
    assert got["id"].tolist() == pdf["id"].tolist()
    fs = _fs(options)
    fs.rm(f"{url}/pq/part-00002.parquet")
    writer = JsonlWriter(f"{url}/pq", mode="resume", storage_options=options)
    assert not writer.is_done(0)  # a JSONL writer does not count parquet parts
    results = write_parquet(
        dd.from_pandas(pdf, npartitions=3), f"{url}/pq", mode="resume", storage_options=options
    )
    assert [r.index for r in results] == [2]
    write_quarantine(
        pd.DataFrame(
            {"file": ["f"], "line": [1], "byte_offset": [0], "reason": ["r"], "raw": [b"x"]}
        ),
        f"{url}/pq",
        2,
        storage_options=options,
    )
    assert read_quarantine(f"{url}/pq", storage_options=options)["partition"].tolist() == [2]
    with pytest.raises(FileExistsError):
        write_jsonl(
            dd.from_pandas(pdf, npartitions=1), f"{url}/pq", mode="error", storage_options=options
        )


def test_an_s3_output_overlapping_its_input_is_refused(s3_bucket: tuple[str, dict[str, Any]]):
    from curator_dask.executor import SequentialExecutor
    from curator_dask.pipeline import Pipeline

    url, options = s3_bucket
    fs = _fs(options)
    fs.pipe_file(f"{url}/d/a.jsonl", b'{"id": "a", "text": "x"}\n')
    fs.pipe_file(f"{url}/d/part-00000.jsonl", b'{"id": "p", "text": "y"}\n')
    before = {p: fs.cat_file(p) for p in fs.find(f"{url}/d")}
    for out in (f"{url}/d", f"{url}/d/out", f"{url}/d/"):
        pipeline = Pipeline(
            "s3-overlap",
            [
                JsonlReader(f"{url}/d", storage_options=options),
                JsonlWriter(out, storage_options=options),
            ],
        )
        with pytest.raises(ValueError, match="overlaps the input"):
            pipeline.run(SequentialExecutor(progress=False))
        fs.invalidate_cache()
        assert {p: fs.cat_file(p) for p in fs.find(f"{url}/d")} == before
