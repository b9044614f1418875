"""Pipeline composition, execution modes, resume and accounting, against pandas."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

from curator_dask import Filter, Modifier, Resources, processing_stage
from curator_dask.executor import DaskExecutor, SequentialExecutor
from curator_dask.io.base import (
    PartitionSpec,
    Reader,
    ReadResult,
    Writer,
    WriteResult,
    empty_quarantine,
)
from curator_dask.pipeline import AccountingError, Pipeline, PipelineResult

N_PARTS = 4


def make_docs(n: int = 80) -> pd.DataFrame:
    words = ["alpha", "beta", "gamma", "delta", "Epsilon"]
    texts = [" ".join(words[: 1 + i % 5] * (1 + i % 3)) + "  " for i in range(n)]
    texts[20] = texts[19]  # a duplicate straddling partitions 0 and 1
    return pd.DataFrame({"id": [f"doc-{i}" for i in range(n)], "text": texts})


# -- test-only reader and writer (in memory / a directory of parquet files) -------------------
@dataclass
class MemoryReader(Reader):
    frame: pd.DataFrame
    n_partitions: int = N_PARTS
    bad_per_partition: int = 1  # fake rejected records in odd partitions
    log: str | None = None  # append "read <index>" lines here
    lie_about_docs_read: bool = False

    def partitions(self, workers: Any = None) -> list[PartitionSpec]:
        return [PartitionSpec(i, (f"mem://{i}",)) for i in range(self.n_partitions)]

    def _slice(self, i: int) -> pd.DataFrame:
        size = -(-len(self.frame) // self.n_partitions)
        return self.frame.iloc[i * size : (i + 1) * size]

    def read_partition(self, spec: PartitionSpec) -> ReadResult:
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"read {spec.index}\n")
        data = self._slice(spec.index)
        bad = self.bad_per_partition if spec.index % 2 else 0
        q = (
            pd.DataFrame(
                {
                    "file": pd.Series([f"mem://{spec.index}"] * bad, dtype="string"),
                    "line": pd.Series(range(bad), dtype="int64"),
                    "byte_offset": pd.Series([0] * bad, dtype="int64"),
                    "reason": pd.Series(["malformed JSON"] * bad, dtype="string"),
                    "raw": pd.Series([b"{bad\xff"] * bad, dtype="object"),
                }
            )
            if bad
            else empty_quarantine()
        )
        read = len(data) + len(q) + (1 if self.lie_about_docs_read else 0)
        return ReadResult(data, q, read)

    def to_dask(self, workers: Any = None) -> Any:
        parts = [self._slice(i) for i in range(self.n_partitions)]
        return dd.from_pandas(pd.concat(parts), npartitions=self.n_partitions, sort=False)


@dataclass
class ParquetDirWriter(Writer):
    path: str
    resume: bool = False
    drop_one: bool = False  # a broken writer: writes one row less than it reports

    def begin(self) -> None:
        os.makedirs(self.path, exist_ok=True)

    def _file(self, index: int) -> str:
        return os.path.join(self.path, f"part-{index:05d}.parquet")

    def is_done(self, index: int) -> bool:
        return self.resume and os.path.exists(self._file(index))

    def write_partition(self, part: Any, index: int) -> WriteResult:
        n = len(part)
        if self.drop_one and n:
            part = part.iloc[1:]
        tmp = self._file(index) + ".tmp"
        part.to_parquet(tmp)
        os.replace(tmp, self._file(index))
        return WriteResult(index, self._file(index), n)

    def finish(self, summary: dict[str, Any]) -> None:
        with open(os.path.join(self.path, "_SUCCESS"), "w") as f:
            json.dump(summary, f)


def read_output(path: str | Path) -> pd.DataFrame:
    files = sorted(Path(path).glob("part-*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files]) if files else pd.DataFrame()


# -- stages ----------------------------------------------------------------------------------
@dataclass(kw_only=True)
class StripModifier(Modifier):
    def modify(self, text: pd.Series) -> pd.Series:
        return text.str.strip()


@dataclass(kw_only=True)
class MinWordsFilter(Filter):
    min_words: int = 3

    def score(self, text: pd.Series) -> pd.Series:
        return text.str.split().str.len()

    def keep_score(self, score: pd.Series) -> pd.Series:
        return score >= self.min_words


@processing_stage(name="lowercase")
def lowercase(part: pd.DataFrame) -> pd.DataFrame:
    return part.assign(text=part["text"].str.lower())


@dataclass(kw_only=True)
class FailOn(Modifier):
    """Raises on the partition holding ``doc_id`` (to test failures and resume)."""

    doc_id: str = ""
    flag: str = ""  # fail only while this file exists

    def modify(self, text: pd.Series) -> pd.Series:
        if os.path.exists(self.flag) and (text.index == int(self.doc_id)).any():
            raise ValueError(f"boom on {self.doc_id}")
        return text


def expected(frame: pd.DataFrame, min_words: int = 3) -> pd.DataFrame:
    text = frame["text"].str.strip()
    out = frame.assign(text=text)[text.str.split().str.len() >= min_words]
    return out.assign(text=out["text"].str.lower())


def build(tmp_path: Path, *, min_words: int = 3, resume: bool = False, **reader_kw: Any):
    frame = make_docs()
    reader = MemoryReader(frame, **reader_kw)
    writer = ParquetDirWriter(str(tmp_path / "out"), resume=resume)
    stages = [StripModifier(), MinWordsFilter(min_words=min_words), lowercase]
    return frame, Pipeline("test", [reader, *stages, writer])


# -- composition -----------------------------------------------------------------------------
def test_stage_order_is_checked(tmp_path: Path) -> None:
    reader = MemoryReader(make_docs())
    writer = ParquetDirWriter(str(tmp_path))
    with pytest.raises(ValueError, match="must be the first stage"):
        Pipeline("p", [StripModifier(), reader])
    with pytest.raises(ValueError, match="writer must be last"):
        Pipeline("p", [reader, writer, StripModifier()])
    with pytest.raises(ValueError, match="second reader"):
        Pipeline("p", [reader, reader])
    with pytest.raises(TypeError, match="expected a Reader, ProcessingStage or Writer"):
        Pipeline("p", [reader, "not a stage"])
    with pytest.raises(ValueError, match="has no writer"):
        Pipeline("p", [reader, StripModifier()]).run(SequentialExecutor())
    with pytest.raises(ValueError, match="has no reader"):
        Pipeline("p", [StripModifier()]).to_dask()


def test_add_stage_chains_and_repr_lists_resources(tmp_path: Path) -> None:
    p = Pipeline("demo", description="a test")
    assert p.add_stage(MemoryReader(make_docs())) is p
    p.add_stage(StripModifier()).add_stage(MinWordsFilter(resources=Resources(gpus=0.5))).add_stage(
        ParquetDirWriter(str(tmp_path))
    )
    text = repr(p)
    assert "lazy: nothing runs until run()" in text
    assert "StripModifier [cpus=1.0]" in text
    assert "MinWordsFilter [gpus=0.5]" in text
    assert "read:  MemoryReader" in text
    assert "ParquetDirWriter" in text


def test_to_dask_is_lazy_and_matches_pandas(tmp_path: Path) -> None:
    frame, p = build(tmp_path)
    df = p.to_dask()
    assert isinstance(df, dd.DataFrame)
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written
    got = df.compute(scheduler="sync")
    # dask turns str columns into pyarrow strings (dataframe.convert-string)
    pd.testing.assert_frame_equal(got, expected(frame), check_dtype=False)


# -- running ---------------------------------------------------------------------------------
def test_sequential_run_matches_pandas_and_accounts_for_every_document(tmp_path: Path) -> None:
    frame, p = build(tmp_path)
    result = p.run(SequentialExecutor(progress=False))
    want = expected(frame)
    got = read_output(tmp_path / "out")
    pd.testing.assert_frame_equal(got, want)

    n_bad = sum(1 for i in range(N_PARTS) if i % 2)
    assert result.read == len(frame) + n_bad
    assert result.quarantined == n_bad
    assert result.kept == len(want)
    assert result.removed == len(frame) - len(want)
    assert result.read == result.kept + result.removed + result.quarantined
    assert result.partitions == N_PARTS
    names = [s.name for s in result.stages]
    assert names == [
        "MemoryReader",
        "StripModifier",
        "MinWordsFilter",
        "lowercase",
        "ParquetDirWriter",
    ]
    assert all(s.partitions == N_PARTS for s in result.stages)
    assert result.stages[2].removed == len(frame) - len(want)

    stats = json.loads((Path(str(tmp_path / "out") + ".curator") / "_stats.json").read_text())
    assert stats["read"] == result.read
    assert stats["balanced"] is True
    assert json.loads((tmp_path / "out" / "_SUCCESS").read_text())["kept"] == len(want)
    assert sorted(os.listdir(Path(str(tmp_path / "out") + ".curator") / "_stats")) == [
        f"part-{i:05d}.json" for i in range(N_PARTS)
    ]
    quarantine = sorted(os.listdir(Path(str(tmp_path / "out") + ".curator") / "_quarantine"))
    assert quarantine == [f"part-{i:05d}.jsonl" for i in range(N_PARTS) if i % 2]
    rec = json.loads(
        (Path(str(tmp_path / "out") + ".curator") / "_quarantine" / "part-00001.jsonl").read_text()
    )
    assert rec["reason"] == "malformed JSON"
    assert rec["raw"] == "{bad\\xff"
    assert "kept" in str(result)
    assert "output:" in str(result)


@pytest.mark.parametrize("executor", ["sequential", "dask"])
def test_streaming_and_batch_give_identical_output(tmp_path: Path, executor: str) -> None:
    outputs = {}
    results: dict[str, PipelineResult] = {}
    for mode in ("streaming", "batch"):
        _frame, p = build(tmp_path / mode)
        if executor == "sequential":
            results[mode] = p.run(SequentialExecutor(progress=False), execution_mode=mode)
        else:
            from distributed import Client, LocalCluster

            with (
                LocalCluster(
                    n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
                ) as cluster,
                Client(cluster) as client,
            ):
                results[mode] = p.run(
                    DaskExecutor(client=client, progress=False), execution_mode=mode
                )
        outputs[mode] = read_output(tmp_path / mode / "out")
    pd.testing.assert_frame_equal(outputs["streaming"], outputs["batch"])
    pd.testing.assert_frame_equal(outputs["streaming"], expected(make_docs()))
    for key in ("read", "kept", "removed", "quarantined", "partitions"):
        assert getattr(results["streaming"], key) == getattr(results["batch"], key)
    assert [s.to_dict()["docs_out"] for s in results["streaming"].stages] == [
        s.to_dict()["docs_out"] for s in results["batch"].stages
    ]
    assert results["batch"].execution_mode == "batch"
    assert not (
        Path(str(tmp_path / "batch" / "out") + ".curator") / "_work"
    ).exists()  # cleaned after success


def test_resume_skips_written_partitions_and_keeps_totals(tmp_path: Path) -> None:
    log = tmp_path / "reads.log"
    _, p = build(tmp_path, resume=True, log=str(log))
    first = p.run(SequentialExecutor(progress=False))
    assert log.read_text().split("\n")[:-1] == [f"read {i}" for i in range(N_PARTS)]

    os.remove(tmp_path / "out" / "part-00002.parquet")  # as if the run died there
    log.write_text("")
    second = p.run(SequentialExecutor(progress=False))
    assert log.read_text() == "read 2\n"
    assert second.partitions_skipped == N_PARTS - 1
    for key in ("read", "kept", "removed", "quarantined", "partitions"):
        assert getattr(second, key) == getattr(first, key), key
    assert [s.docs_in for s in second.stages] == [s.docs_in for s in first.stages]

    log.write_text("")
    third = p.run(SequentialExecutor(progress=False))
    assert log.read_text() == ""
    assert third.partitions_skipped == N_PARTS
    assert third.kept == first.kept


def test_resume_recomputes_when_parameters_changed(tmp_path: Path) -> None:
    log = tmp_path / "reads.log"
    _, p = build(tmp_path, resume=True, log=str(log))
    p.run(SequentialExecutor(progress=False))
    frame, p2 = build(tmp_path, resume=True, log=str(log), min_words=5)
    log.write_text("")
    result = p2.run(SequentialExecutor(progress=False))
    assert log.read_text().count("read") == N_PARTS  # nothing reused
    assert result.partitions_skipped == 0
    pd.testing.assert_frame_equal(read_output(tmp_path / "out"), expected(frame, 5))
    # Changing only resources changes where a stage runs, not its output: reused.
    p3 = Pipeline(
        "test",
        [
            MemoryReader(frame, log=str(log)),
            StripModifier(),
            MinWordsFilter(min_words=5, resources=Resources(cpus=4)),
            lowercase,
            ParquetDirWriter(str(tmp_path / "out"), resume=True),
        ],
    )
    log.write_text("")
    assert p3.run(SequentialExecutor(progress=False)).partitions_skipped == N_PARTS
    assert log.read_text() == ""


def test_batch_mode_resumes_per_stage(tmp_path: Path) -> None:
    log = tmp_path / "reads.log"
    flag = tmp_path / "fail"
    flag.write_text("")
    frame = make_docs()
    stages = [StripModifier(), FailOn(doc_id="45", flag=str(flag)), lowercase]

    def pipeline() -> Pipeline:
        return Pipeline(
            "b",
            [
                MemoryReader(frame, log=str(log)),
                *stages,
                ParquetDirWriter(str(tmp_path / "out"), resume=True),
            ],
        )

    with pytest.raises(ValueError, match="boom on 45"):
        pipeline().run(SequentialExecutor(progress=False), execution_mode="batch")
    work = Path(str(tmp_path / "out") + ".curator") / "_work"
    assert sorted(os.listdir(work)) == ["00-MemoryReader", "01-StripModifier", "02-FailOn"]
    assert len(list((work / "00-MemoryReader").glob("*.done.json"))) == N_PARTS
    assert log.read_text().count("read") == N_PARTS
    flag.unlink()
    log.write_text("")
    result = pipeline().run(SequentialExecutor(progress=False), execution_mode="batch")
    assert log.read_text() == ""  # step 0 was not repeated
    want = frame.assign(text=frame["text"].str.strip().str.lower())
    pd.testing.assert_frame_equal(read_output(tmp_path / "out"), want)
    assert result.kept == len(frame)
    assert result.balanced


def test_accounting_invariant_is_checked(tmp_path: Path) -> None:
    _, p = build(tmp_path, lie_about_docs_read=True)
    with pytest.raises(AccountingError, match=r"read=.* but kept="):
        p.run(SequentialExecutor(progress=False))
    assert not (Path(str(tmp_path / "out") + ".curator") / "_SUCCESS").exists()
    stats = json.loads((Path(str(tmp_path / "out") + ".curator") / "_stats.json").read_text())
    assert stats["balanced"] is False
    assert stats["partition_mismatches"] == [0, 1, 2, 3]


def test_result_from_records_detects_a_writer_losing_rows() -> None:
    rec = {
        "index": 0,
        "rows": 9,
        "stages": [
            {"name": "R", "docs_in": 12, "docs_out": 11, "quarantined": 1},
            {"name": "F", "docs_in": 11, "docs_out": 10},
            {"name": "W", "docs_in": 10, "docs_out": 9},
        ],
    }
    result = PipelineResult.from_records("x", [rec], wall_seconds=0.0, output_path="o")
    assert (result.read, result.kept, result.removed, result.quarantined) == (12, 9, 1, 1)
    assert not result.balanced
    with pytest.raises(AccountingError):
        result.check()
    rec["rows"] = 10
    rec["stages"][2]["docs_out"] = 10
    ok = PipelineResult.from_records(
        "x", [rec, {**rec, "index": 1}], wall_seconds=0.0, output_path="o"
    )
    ok.check()
    assert ok.read == 24
    assert ok.stages[1].partitions == 2


def test_stage_errors_propagate(tmp_path: Path) -> None:
    flag = tmp_path / "fail"
    flag.write_text("")
    p = Pipeline(
        "f",
        [
            MemoryReader(make_docs()),
            FailOn(doc_id="3", flag=str(flag)),
            ParquetDirWriter(str(tmp_path / "out")),
        ],
    )
    with pytest.raises(ValueError, match="boom on 3"):
        p.run(SequentialExecutor(progress=False))


def test_dask_executor_refuses_a_stage_no_worker_can_run(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    p = Pipeline(
        "g",
        [
            MemoryReader(make_docs()),
            StripModifier(resources=Resources(gpus=1)),
            ParquetDirWriter(str(tmp_path / "out")),
        ],
    )
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        with pytest.raises(RuntimeError, match="no worker can run stage 'StripModifier'"):
            p.run(DaskExecutor(client=client, progress=False))
        assert client.status == "running"  # a given client is left open


def test_execution_mode_comes_from_config(tmp_path: Path) -> None:
    _, p = build(tmp_path)
    with dask.config.set({"curator.execution.mode": "batch"}):
        assert p.run(SequentialExecutor(progress=False)).execution_mode == "batch"
    with pytest.raises(ValueError, match="execution_mode must be one of"):
        p.run(SequentialExecutor(progress=False), execution_mode="eager")


def test_progress_line_goes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _, p = build(tmp_path)
    p.run(SequentialExecutor(progress=True))
    err = capsys.readouterr().err
    assert f"test {N_PARTS}/{N_PARTS} partitions" in err
    assert "docs read" in err


def test_real_stages_on_the_sample_match_pandas(tmp_path: Path, sample_records: list) -> None:
    from curator_dask.filters import RepeatedLinesFilter, SymbolsToWordsFilter, WordCountFilter
    from curator_dask.modifiers import UnicodeNormalizer, WhitespaceNormalizer

    frame = pd.DataFrame(sample_records[:400])[["id", "text", "source"]]
    stages = [
        UnicodeNormalizer(form="NFKC"),
        WhitespaceNormalizer(),
        WordCountFilter(min_words=80),
        SymbolsToWordsFilter(),
        RepeatedLinesFilter(),
    ]
    # The pandas result: each stage on the whole frame, one after another.
    want, removed = frame, []
    for stage in stages:
        out = stage.process(want)
        removed.append(len(want) - len(out))
        want = out

    reader = MemoryReader(frame, n_partitions=5, bad_per_partition=0)
    writer = ParquetDirWriter(str(tmp_path / "out"))
    result = Pipeline("sample", [reader, *stages, writer]).run(SequentialExecutor(progress=False))
    got = read_output(tmp_path / "out")
    # pandas < 3 reads the Parquet strings back as string[python], the stages give
    # string[pyarrow_numpy]: the same strings (pandas 3 has one "str" dtype for both)
    assert all(pd.api.types.is_string_dtype(got[c]) for c in ("id", "text", "source"))
    pd.testing.assert_frame_equal(got, want, check_dtype=pd.__version__ >= "3")
    assert [s.removed for s in result.stages[1:-1]] == removed
    assert sum(removed) > 0  # the filters did something
    assert (result.read, result.kept) == (400, len(want))


def test_a_finished_run_needs_no_cluster_to_resume(tmp_path: Path) -> None:
    _, p = build(tmp_path, resume=True)
    first = p.run(SequentialExecutor(progress=False))
    # Nothing listens there: connecting would fail, so nothing may try.
    result = p.run(DaskExecutor(address="tcp://127.0.0.1:9", progress=False))
    assert result.partitions_skipped == N_PARTS
    assert (result.read, result.kept) == (first.read, first.kept)


def test_summary_shows_whole_stage_names():
    from curator_dask.pipeline import PipelineResult
    from curator_dask.stage import StageStats

    long = "RepeatingDuplicateNGramsFilter_10"
    stages = [StageStats("JsonlReader", 3, 3), StageStats(long, 3, 2)]
    result = PipelineResult("p", stages, 3, 2, 1, 0, 0.1, "out/", 1)
    assert f"{long} " in result.summary()
