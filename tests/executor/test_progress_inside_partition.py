"""A streaming run's progress moves while a partition is still being computed: each read and
stage of a partition says so (a run hook event and a share of the progress line), and a
stage with a ``batch_size`` after each of its slices; not only each written partition."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import pandas as pd
import pytest
from distributed import Client, LocalCluster

from curator_dask.executor import DaskExecutor
from curator_dask.hooks import RunCallback, RunInfo
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline
from curator_dask.progress import Progress
from curator_dask.stage import Filter, Modifier

pytestmark = pytest.mark.timeout(120)


def _wait_for(flag: Path, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not flag.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the client never heard {what} while the partition ran")
        time.sleep(0.02)


@dataclass(kw_only=True)
class KeepAll(Filter):
    def keep(self, text: pd.Series) -> pd.Series:
        return text.str.len() >= 0


@dataclass(kw_only=True)
class WaitUntilHeard(Filter):
    """Keeps everything, once ``flag`` exists (the client heard what it waits for)."""

    flag: str = ""
    what: str = ""

    def keep(self, text: pd.Series) -> pd.Series:
        _wait_for(Path(self.flag), self.what)
        return text.str.len() >= 0


class Heard(RunCallback):
    def __init__(self, flag: Path, step: str) -> None:
        self.flag = flag
        self.step = step
        self.events: list[tuple[str, str, int, bool]] = []

    def on_progress(self, run: RunInfo, step: str, unit: str, n: int, record: Any) -> None:
        self.events.append((step, unit, n, record is not None))
        if step == self.step and unit == "partitions" and n:
            self.flag.touch()


@pytest.fixture
def src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    rows = [{"id": f"d{i}", "text": f"document number {i}"} for i in range(6)]
    (src / "one.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src


@pytest.fixture
def client() -> Any:
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def test_a_stage_done_is_heard_before_its_partition_is_written(
    src: Path, tmp_path: Path, client: Any
) -> None:
    flag = tmp_path / "heard"
    pipeline = Pipeline(
        "p",
        [
            JsonlReader(str(src)),
            KeepAll(name="first"),
            WaitUntilHeard(name="second", flag=str(flag), what="'first' done"),
            JsonlWriter(str(tmp_path / "out")),
        ],
    )
    with Heard(flag, "first") as heard:
        result = pipeline.run(DaskExecutor(client=client, progress=False))
    assert result.kept == 6  # type: ignore[attr-defined]
    steps = [e for e in heard.events if e[1] == "partitions" and e[2]]
    written = steps.index(("write", "partitions", 1, True))
    # the read and the first stage were heard while the partition ran (the second stage
    # waited for it); every step said once at most (one still on its way as the run ends
    # may be heard after it, or not at all)
    assert ("read", "partitions", 1, False) in steps[:written]
    assert ("first", "partitions", 1, False) in steps[:written]
    assert len(steps) == len(set(steps))
    assert set(steps) <= {
        ("read", "partitions", 1, False),
        ("first", "partitions", 1, False),
        ("second", "partitions", 1, False),
        ("write", "partitions", 1, True),
    }


_CALLS: dict[str, int] = {}


def _third_call_waits(flag: str, what: str) -> None:
    """Count a call of the stage that ``flag`` names; from the third on, wait for ``flag``."""
    _CALLS[flag] = _CALLS.get(flag, 0) + 1
    if _CALLS[flag] > 2:
        _wait_for(Path(flag), what)


@dataclass(kw_only=True)
class ThirdSliceWaits(Filter):
    """Keeps everything; its third call waits until ``flag`` exists."""

    flag: str = ""

    def keep(self, text: pd.Series) -> pd.Series:
        _third_call_waits(self.flag, "a slice's share")
        return text.str.len() >= 0


def test_a_batched_stage_moves_the_line_after_each_slice(
    src: Path, tmp_path: Path, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = tmp_path / "heard"
    shares: list[float] = []
    say = Progress.share

    def share(self: Progress, unit: int, value: float) -> None:
        shares.append(value)
        if 1 / 4 < value < 2 / 4:  # inside the batched stage, step 1 of read, 2 stages, write
            flag.touch()
        say(self, unit, value)

    monkeypatch.setattr(Progress, "share", share)
    pipeline = Pipeline(
        "p",
        [
            JsonlReader(str(src)),
            ThirdSliceWaits(flag=str(flag)).with_(batch_size=2),  # 3 slices of 2 rows
            KeepAll(),
            JsonlWriter(str(tmp_path / "out")),
        ],
    )
    result = pipeline.run(DaskExecutor(client=client, progress=False))
    assert result.kept == 6  # type: ignore[attr-defined]
    # the first slice's share opened the gate; every share is a step or a slice done
    # (the read 1/4, the slices 1/4 + 1/12 and + 2/12, the stages 2/4 and 3/4)
    assert any(v == pytest.approx(1 / 4 + 1 / 12) for v in shares)
    allowed = [1 / 4, 1 / 4 + 1 / 12, 1 / 4 + 2 / 12, 2 / 4, 3 / 4]
    assert all(any(v == pytest.approx(a) for a in allowed) for v in shares), shares


def test_the_line_counts_shares_of_running_partitions() -> None:
    progress = Progress("p", 4, enabled=False)
    progress.share(0, 0.5)
    progress.share(1, 0.25)
    progress.share(1, 0.1)  # a share never goes back
    assert progress.fraction_done() == pytest.approx(0.75)
    assert "(19%)" in progress.status()
    progress.update({"index": 0, "rows": 3, "stages": [{"docs_in": 3}]})
    assert progress.fraction_done() == pytest.approx(1.25)
    progress.share(0, 0.9)  # late news of a written partition: ignored
    assert progress.fraction_done() == pytest.approx(1.25)


@dataclass(kw_only=True)
class UpperThirdSliceWaits(Modifier):
    """Upper-cases the text; its third call waits until ``flag`` exists."""

    flag: str = ""

    def modify(self, text: pd.Series) -> pd.Series:
        _third_call_waits(self.flag, "a modifier's slice")
        return text.str.upper()


def test_a_modifier_runs_in_slices_that_move_the_line_and_give_the_same_output(
    src: Path, tmp_path: Path, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = tmp_path / "heard"
    shares: list[float] = []
    say = Progress.share

    def share(self: Progress, unit: int, value: float) -> None:
        shares.append(value)
        if 1 / 3 < value < 2 / 3:  # inside the modifier: step 1 of read, modifier, write
            flag.touch()
        say(self, unit, value)

    monkeypatch.setattr(Progress, "share", share)
    out = tmp_path / "out"
    pipeline = Pipeline(
        "p", [JsonlReader(str(src)), UpperThirdSliceWaits(flag=str(flag)), JsonlWriter(str(out))]
    )
    with dask.config.set({"curator.execution.slice-rows": 2}):  # 3 slices of 2 rows
        result = pipeline.run(DaskExecutor(client=client, progress=False))
    assert result.kept == 6  # type: ignore[attr-defined]
    # slices of 2 of 6 rows in step 1 of 3: 1/3 + 1/9 and + 2/9 (the first opened the gate)
    assert any(v == pytest.approx(4 / 9) for v in shares)
    allowed = [1 / 3, 4 / 9, 5 / 9, 2 / 3]
    assert all(any(v == pytest.approx(a) for a in allowed) for v in shares), shares
    written = [json.loads(line) for p in sorted(out.glob("*.jsonl")) for line in p.open()]
    assert written == [{"id": f"d{i}", "text": f"DOCUMENT NUMBER {i}"} for i in range(6)]


def test_only_modifiers_that_keep_the_base_process_are_sliced() -> None:
    class Custom(Modifier):
        def process(self, part: Any) -> Any:
            return part

    assert UpperThirdSliceWaits().row_wise
    assert not Custom().row_wise
    assert not KeepAll().row_wise  # a filter's measures are shared across its partition
