"""Dedup workflows read a pipeline's output directory, markers and statistics excluded."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from curator_dask import ExactDeduplicationWorkflow, Pipeline
from curator_dask.executor import SequentialExecutor
from curator_dask.io import JsonlReader, ParquetWriter


def test_exact_dedup_on_pipeline_output(tmp_path):
    texts = ["alpha beta", "gamma", "alpha beta", "delta", "gamma", "epsilon"]
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    Pipeline("p", [JsonlReader(str(src)), ParquetWriter(str(tmp_path / "clean"))]).run(
        executor=SequentialExecutor(progress=False)
    )
    # the writer leaves its marker, statistics and quarantine in clean.curator/ beside the data
    assert (tmp_path / "clean.curator" / "_SUCCESS").exists()
    assert all(p.name.startswith("part-") for p in (tmp_path / "clean").iterdir())
    summary = ExactDeduplicationWorkflow(
        input_path=str(tmp_path / "clean"), output_path=str(tmp_path / "exact")
    ).run()
    assert summary["documents"] == len(texts)
    removed = pd.concat(
        pq.read_table(f).to_pandas()
        for f in sorted((tmp_path / "exact" / "removed_ids").glob("*.parquet"))
    )
    assert sorted(removed["id"]) == ["d2", "d4"]


def test_minhash_device_config_is_checked(tmp_path):
    import dask
    import dask.dataframe as dd

    from curator_dask import FuzzyDeduplicationWorkflow

    df = dd.from_pandas(pd.DataFrame({"id": ["a", "b"], "text": ["x y z", "x y z"]}), 1)
    with (
        dask.config.set({"curator.dedup.minhash-device": "tpu"}),
        pytest.raises(ValueError, match="minhash-device"),
    ):
        FuzzyDeduplicationWorkflow(
            cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"), df=df
        ).run()
