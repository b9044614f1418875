"""Pipeline.run() uses the user's Client; a pipeline can start from the user's DataFrame."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client, LocalCluster

from curator_dask.executor import SequentialExecutor
from curator_dask.filters import WordCountFilter
from curator_dask.io import JsonlReader, JsonlWriter, ParquetWriter
from curator_dask.pipeline import Pipeline


def _frame() -> pd.DataFrame:
    texts = [("one two three four " * (i % 3)).strip() or "short" for i in range(30)]
    return pd.DataFrame({"id": [f"d{i}" for i in range(30)], "text": texts, "n": range(30)})


def _ids(out: Path) -> list[str]:
    return sorted(pd.read_parquet(out)["id"].tolist())


def test_run_uses_the_active_client_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _frame().to_dict("records")))

    def no_new_cluster(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Pipeline.run() started a cluster of its own")

    monkeypatch.setattr("curator_dask.executor.dask_executor.get_client", no_new_cluster)
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cluster,
        Client(cluster) as client,
    ):
        pipeline = Pipeline(
            "mine",
            [
                JsonlReader(str(src)),
                WordCountFilter(min_words=4),
                ParquetWriter(str(tmp_path / "o")),
            ],
        )
        result = pipeline.run()
        assert client.status == "running"  # left open
        err = capsys.readouterr().err
        assert client.scheduler.address in err
        # said once, in the one progress voice: "<time> [curator-dask] mine: using ..."
        (said,) = [ln for ln in err.splitlines() if "using the active dask client" in ln]
        assert said[:4].isdigit(), err
        assert "[curator-dask] mine: using" in said, err
    assert result.read == 30
    assert result.balanced


def test_a_pipeline_from_a_dask_dataframe_has_the_same_accounting(tmp_path: Path) -> None:
    pdf = _frame()
    df = dd.from_pandas(pdf, npartitions=3)
    out = tmp_path / "out"
    stages = [WordCountFilter(min_words=4), ParquetWriter(str(out), mode="resume")]
    result = Pipeline.from_dataframe(df, stages, name="df").run(SequentialExecutor(progress=False))
    want = pdf[pdf["text"].str.split().str.len() >= 4]
    assert (result.read, result.kept, result.removed, result.quarantined) == (
        30,
        len(want),
        30 - len(want),
        0,
    )
    assert result.partitions == 3
    assert _ids(out) == sorted(want["id"])
    back = pd.read_parquet(out).sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(
        back[["id", "text", "n"]],
        want.sort_values("id").reset_index(drop=True)[["id", "text", "n"]],
        check_dtype=False,
    )
    again = Pipeline.from_dataframe(df, stages, name="df").run(SequentialExecutor(progress=False))
    assert again.partitions_skipped == 3
    assert again.kept == result.kept


def test_a_pipeline_from_a_dataframe_on_a_cluster(tmp_path: Path) -> None:
    df = dd.from_pandas(_frame(), npartitions=4)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster,
        Client(cluster),
    ):
        result = Pipeline.from_dataframe(df, [JsonlWriter(str(tmp_path / "out"))]).run()
    assert (result.read, result.kept, result.partitions) == (30, 30, 4)
    got = sorted(
        json.loads(line)["id"]
        for p in (tmp_path / "out").glob("part-*.jsonl")
        for line in p.read_text().splitlines()
    )
    assert got == sorted(_frame()["id"])
