"""The output never eats its input, resume follows the input, and one output has one job.

Each case is built from scratch and checked by hashing the files the test wrote itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from curator_dask.executor import SequentialExecutor
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.io.layout import OutputInUseError, OutputLease, RunLayout
from curator_dask.pipeline import Pipeline
from curator_dask.stage import ProcessingStage


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _write(path: Path, ids: range) -> None:
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"doc {i}"}) + "\n" for i in ids))


def _ids(out: Path) -> list[str]:
    return sorted(
        json.loads(line)["id"]
        for p in out.glob("part-*.jsonl")
        for line in p.read_text().splitlines()
    )


def _run(inp: Any, out: Any, mode: str = "overwrite", *stages: ProcessingStage) -> Any:
    reader = JsonlReader(inp, files_per_partition=1)
    pipeline = Pipeline("safety", [reader, *stages, JsonlWriter(str(out), mode=mode)])
    return pipeline.run(SequentialExecutor(progress=False))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "d"
    d.mkdir()
    _write(d / "a.jsonl", range(0, 5))
    _write(d / "b.jsonl", range(5, 9))
    return d


# -- an output that overlaps its input ------------------------------------------------------
@pytest.mark.parametrize("mode", ["overwrite", "resume"])
@pytest.mark.parametrize(
    ("inp", "out"),
    [
        ("d", "d"),  # the same directory
        ("d", "d/out"),  # the output inside the input
        ("d/*.jsonl", "d"),  # a glob over the output
        ("d/a.jsonl", "d"),  # an input file inside the output
        ("d", "./d/../d/"),  # the same directory spelled differently
    ],
)
def test_an_output_overlapping_its_input_is_refused_before_anything_is_touched(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, inp: str, out: str, mode: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _run("d", tmp_path / "first")  # an earlier run's part files, to tempt an overwrite
    for p in (tmp_path / "first").glob("part-*"):
        (data_dir / p.name).write_bytes(p.read_bytes())
    before = _tree(data_dir)
    with pytest.raises(ValueError, match="overlaps the input"):
        _run(inp, out, mode)
    assert _tree(data_dir) == before  # nothing deleted, nothing written


def test_an_output_through_a_symlink_to_the_input_is_refused(tmp_path: Path, data_dir: Path):
    link = tmp_path / "link"
    link.symlink_to(data_dir, target_is_directory=True)
    before = _tree(data_dir)
    with pytest.raises(ValueError, match="overlaps the input"):
        _run(str(data_dir), link)
    assert _tree(data_dir) == before


def test_a_sibling_output_is_fine(tmp_path: Path, data_dir: Path) -> None:
    result = _run(str(data_dir), tmp_path / "d-out")  # a name that starts like the input's
    assert result.kept == 9


# -- resume over a changed input -----------------------------------------------------------
def test_resume_redoes_changed_partitions_and_drops_vanished_ones(
    tmp_path: Path, data_dir: Path
) -> None:
    out = tmp_path / "out"
    _write(data_dir / "c.jsonl", range(9, 12))
    first = _run(str(data_dir), out, "resume")
    assert (first.kept, first.partitions_skipped) == (12, 0)

    again = _run(str(data_dir), out, "resume")  # nothing changed: nothing redone
    assert (again.kept, again.partitions_skipped) == (12, 3)

    with open(data_dir / "a.jsonl", "a") as f:  # documents appended to a file
        f.write(json.dumps({"id": "new", "text": "appended"}) + "\n")
    appended = _run(str(data_dir), out, "resume")
    assert appended.partitions_skipped == 2  # b and c
    assert "new" in _ids(out)
    assert appended.read == appended.kept == 13

    (data_dir / "c.jsonl").unlink()  # a file deleted: its partition has no input any more
    shrunk = _run(str(data_dir), out, "resume")
    assert shrunk.partitions_skipped == 2
    assert sorted(p.name for p in out.glob("part-*")) == ["part-00000.jsonl", "part-00001.jsonl"]
    assert sorted(p.name for p in (Path(str(out) + ".curator") / "_stats").iterdir()) == [
        "part-00000.json",
        "part-00001.json",
    ]
    assert _ids(out) == sorted(["new", *(f"d{i}" for i in range(9))])
    assert shrunk.read == shrunk.kept == 10
    stats = json.loads((Path(str(out) + ".curator") / "_stats.json").read_text())
    assert stats["kept"] == 10


def test_resume_redoes_a_file_rewritten_with_the_same_size(tmp_path: Path, data_dir: Path):
    out = tmp_path / "out"
    _run(str(data_dir), out, "resume")
    text = (data_dir / "b.jsonl").read_text().replace('"d5"', '"x5"')  # same length
    time.sleep(0.01)
    (data_dir / "b.jsonl").write_text(text)
    again = _run(str(data_dir), out, "resume")
    assert again.partitions_skipped == 1
    assert "x5" in _ids(out)
    assert "d5" not in _ids(out)


# -- two jobs, one output --------------------------------------------------------------------
_ENTERED, _RELEASE = threading.Event(), threading.Event()


@dataclass(kw_only=True)
class Gate(ProcessingStage):
    """Hold the first partition until ``_RELEASE`` is set (a job that is still running)."""

    def process(self, part: Any) -> Any:
        _ENTERED.set()
        assert _RELEASE.wait(30)
        return part


def test_a_second_job_on_the_same_output_is_refused_naming_the_first(
    tmp_path: Path, data_dir: Path
) -> None:
    out = tmp_path / "out"
    entered, release = _ENTERED, _RELEASE
    results: list[Any] = []
    first = threading.Thread(
        target=lambda: results.append(_run(str(data_dir), out, "overwrite", Gate()))
    )
    first.start()
    try:
        assert entered.wait(30)
        lease = json.loads((Path(str(out) + ".curator") / "_lease.json").read_text())
        other = tmp_path / "other"
        other.mkdir()
        _write(other / "z.jsonl", range(100, 103))
        before = _tree(out)
        with pytest.raises(OutputInUseError, match=f"in use by run {lease['run_id']}") as err:
            _run(str(other), out)
        assert f"pid {os.getpid()}" in str(err.value)
        assert _tree(out) == before  # the second job touched nothing
    finally:
        release.set()
        first.join(60)
    assert len(results) == 1
    assert results[0].kept == 9
    assert _ids(out) == [f"d{i}" for i in range(9)]
    assert not (Path(str(out) + ".curator") / "_lease.json").exists()  # released at the end


def test_a_lease_left_by_a_killed_job_is_taken_over(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "out"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    layout = RunLayout.for_output(str(out), ".jsonl")
    stale = OutputLease(layout, "deadbeef")._record(time.time())
    stale["pid"] = int(dead.stdout)
    layout.write_json(layout.lease_path, stale)
    result = _run(str(data_dir), out)
    assert result.kept == 9
    assert not Path(layout.lease_path).exists()


def test_a_lease_without_heartbeat_elsewhere_expires(tmp_path: Path) -> None:
    layout = RunLayout.for_output(str(tmp_path / "out"), ".jsonl")
    lease = OutputLease(layout, "mine", timeout_s=60)
    other = {"run_id": "theirs", "host": "another-host", "pid": 1, "started": time.time()}
    assert lease.stale_reason({**other, "heartbeat": time.time()}) is None
    assert "no heartbeat" in str(lease.stale_reason({**other, "heartbeat": time.time() - 61}))
    layout.write_json(layout.lease_path, {**other, "heartbeat": time.time()})
    with pytest.raises(OutputInUseError, match=r"run theirs \(host another-host"):
        lease.acquire()
