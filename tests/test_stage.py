from __future__ import annotations

import pickle
from dataclasses import dataclass

import dask
import dask.dataframe as dd
import pandas as pd
import pytest
from dask.dataframe.utils import assert_eq

from curator_dask import Filter, Modifier, ProcessingStage, Resources, processing_stage
from curator_dask.stage import StageStats, ready_stage, run_stage, teardown_all


@dataclass
class MinCharsFilter(Filter):
    min_chars: int = 5

    def keep(self, text: pd.Series) -> pd.Series:
        return text.str.len() >= self.min_chars


@dataclass
class LenScoreFilter(Filter):
    min_chars: int = 5

    def score(self, text: pd.Series) -> pd.Series:
        return text.str.len()

    def keep_score(self, score: pd.Series) -> pd.Series:
        return score >= self.min_chars


class Upper(Modifier):
    def modify(self, text: pd.Series) -> pd.Series:
        return text.str.upper()


@pytest.fixture
def frame() -> pd.DataFrame:
    texts = ["a", "hello world", "abc", "abcdef", "hello world", "x" * 10, "", "four"]
    return pd.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": texts})


def test_resources_validation():
    assert Resources(gpus=0.25).to_dask() == {"GPU": 0.25}
    assert Resources(gpu_memory_gb=8).to_dask() == {"GPU_MEMORY_GB": 8.0}
    assert Resources().to_dask() == {}
    assert Resources(gpus=1).requires_gpu
    assert not Resources(cpus=4).requires_gpu
    with pytest.raises(ValueError, match="either gpus or gpu_memory_gb"):
        Resources(gpus=1, gpu_memory_gb=16)
    with pytest.raises(ValueError, match="cpus must be a number"):
        Resources(cpus=-1)


def test_filter_matches_pandas_on_partitions(frame):
    df = dd.from_pandas(frame, npartitions=3)
    with dask.config.set(scheduler="sync"):
        got = MinCharsFilter(min_chars=4)(df)
        assert_eq(got, frame[frame.text.str.len() >= 4])
        got = LenScoreFilter(min_chars=4)(df)
        assert_eq(got, frame[frame.text.str.len() >= 4])


def test_filter_score_only_and_invert(frame):
    f = LenScoreFilter(min_chars=4, score_only=True)
    out = f.process(frame)
    assert len(out) == len(frame)
    assert out["LenScoreFilter_score"].tolist() == frame.text.str.len().tolist()
    assert out["LenScoreFilter_keep"].tolist() == (frame.text.str.len() >= 4).tolist()
    inv = LenScoreFilter(min_chars=4, invert=True).process(frame)
    assert inv.text.tolist() == frame[frame.text.str.len() < 4].text.tolist()
    named = LenScoreFilter(min_chars=4, score_column="n").process(frame)
    assert named["n"].min() >= 4


def test_modifier_and_function_stage(frame):
    out = Upper().process(frame)
    assert out.text.tolist() == frame.text.str.upper().tolist()

    @processing_stage(resources=Resources(cpus=2), name="lengths")
    def add_len(part):
        return part.assign(n=part["text"].str.len())

    assert add_len.stage_name == "lengths"
    assert add_len.resources.cpus == 2
    out, stats = run_stage(add_len, frame)
    assert out["n"].tolist() == frame.text.str.len().tolist()
    assert (stats.docs_in, stats.docs_out, stats.removed) == (len(frame), len(frame), 0)


def test_with_returns_copy():
    f = MinCharsFilter(min_chars=3)
    g = f.with_(resources=Resources(gpus=0.25), batch_size=2, name="short")
    assert (f.resources, f.batch_size, f.stage_name) == (Resources(), None, "MinCharsFilter")
    assert (g.resources.gpus, g.batch_size, g.stage_name) == (0.25, 2, "short")
    assert g.min_chars == 3
    with pytest.raises(TypeError):
        f.with_(resources={"GPU": 1})
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        f.with_(batch_size=0)


def test_batch_size_splits_and_counts(frame):
    calls = []

    @processing_stage(batch_size=3)
    def record(part):
        calls.append(len(part))
        return part[part.text.str.len() > 0]

    out, stats = run_stage(record, frame)
    assert calls == [3, 3, 2]
    assert (stats.docs_in, stats.docs_out, stats.removed) == (8, 7, 1)
    assert out.text.tolist() == [t for t in frame.text if t]


class Counting(ProcessingStage):
    setups = 0

    def setup(self):
        type(self).setups += 1
        self._model = object()  # runtime state: never pickled

    def process(self, part):
        assert self._model is not None
        return part


def test_setup_once_per_process_and_state_not_pickled(frame):
    teardown_all()
    Counting.setups = 0
    stage = Counting()
    for _ in range(3):
        run_stage(ready_stage(stage), frame)
    assert Counting.setups == 1
    ready = ready_stage(stage)
    assert "_model" in ready.__dict__
    clone = pickle.loads(pickle.dumps(ready))
    assert "_model" not in clone.__dict__
    assert clone.token() == stage.token()
    teardown_all()


def test_a_stage_changed_after_its_setup_is_set_up_again_for_its_new_parameters(frame):
    from curator_dask.filters import WordCountFilter

    teardown_all()
    stage = WordCountFilter(min_words=1)
    first = ready_stage(stage)
    assert ready_stage(stage) is first  # found again, parameters unchanged
    stage.min_words = 3  # a notebook user changes a threshold and runs again
    again = ready_stage(stage)
    assert again is not first
    assert again.min_words == 3
    assert ready_stage(WordCountFilter(min_words=1)) is first  # an equal stage: the same
    teardown_all()


def test_stats_add():
    a = StageStats("f", 10, 7, 1, 0.5, 1, {"oom_retries": 1})
    b = StageStats("f", 5, 5, 0, 0.25, 1, {"oom_retries": 2})
    c = a + b
    assert (c.docs_in, c.docs_out, c.quarantined, c.removed, c.partitions) == (15, 12, 1, 2, 2)
    assert c.extra == {"oom_retries": 3}
    with pytest.raises(ValueError, match="cannot add stats"):
        a + StageStats("g")


def test_score_output_column():
    assert LenScoreFilter(score_only=True).score_output_column == "LenScoreFilter_score"
    assert LenScoreFilter(score_column="n").score_output_column == "n"
    assert LenScoreFilter().score_output_column is None
    assert MinCharsFilter(score_only=True).score_output_column is None


def test_heuristic_filters_score_only(frame):
    from curator_dask.filters import heuristic_filters

    filters = heuristic_filters(score_only=True)
    assert all(f.score_only for f in filters)
    out = frame
    for f in filters:
        out = f.process(out)
    assert len(out) == len(frame)
    assert all(f.score_output_column in out.columns for f in filters)
