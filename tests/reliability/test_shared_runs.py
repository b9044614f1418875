"""Two dedup runs at once on one cache directory or one output (issue 21).

The first run is a real process that holds its leases until the test lets it go (its
input partitions wait for a file the test writes once the second is refused); the second
is ``curator-dask fuzzy-dedup`` started while the first runs. The second is refused naming
the first; the first's result equals a quiet run's; the second, run again afterwards,
finishes with the same result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from _audit import ROOT, cli

pytestmark = pytest.mark.integration

_FIRST = """
import os, sys, time
import dask, dask.dataframe as dd, pandas as pd
from curator_dask.dedup import FuzzyDeduplicationWorkflow
src, cache, out, go = sys.argv[1:5]
frame = pd.read_json(src, lines=True, dtype={"id": str})

def slow(part):
    deadline = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    return part

df = dd.from_pandas(frame, npartitions=2).map_partitions(slow, meta=frame.iloc[:0])
with dask.config.set(scheduler="threads"):
    print(FuzzyDeduplicationWorkflow(df=df, cache_path=cache, output_path=out).run()["removed"])
"""


def _docs(path: Path) -> None:
    base = "the quick brown fox jumps over the lazy dog near the river bank at dawn {}"
    docs = [{"id": f"d{i}", "text": base.format(i % 15)} for i in range(60)]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))


def _first(src: Path, cache: Path, out: Path, go: Path) -> subprocess.Popen[str]:
    """The first run; its partitions wait until ``go`` exists (120 s at most)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-c", _FIRST, str(src), str(cache), str(out), str(go)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _removed(out: Path) -> list[tuple[str, str]]:
    table = ds.dataset(out / "removed_ids", format="parquet").to_table()
    return sorted(
        zip(table.column("id").to_pylist(), table.column("group").to_pylist(), strict=True)
    )


@pytest.mark.parametrize("shared", ["cache", "output"])
def test_a_second_dedup_on_a_cache_or_output_in_use_is_refused_naming_the_first(
    tmp_path: Path, shared: str
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    _docs(src / "a.jsonl")
    go = tmp_path / "go"
    go.touch()
    quiet = _first(src / "a.jsonl", tmp_path / "quiet-cache", tmp_path / "quiet", go)
    assert quiet.wait(timeout=300) == 0, quiet.stderr.read()[-2000:] if quiet.stderr else ""
    want = _removed(tmp_path / "quiet")
    assert want  # the input holds near-duplicates

    cache_a, out_a = tmp_path / "cache", tmp_path / "out-a"
    go.unlink()
    first = _first(src / "a.jsonl", cache_a, out_a, go)
    lease = Path(str(cache_a if shared == "cache" else out_a) + ".curator") / "_lease.json"
    deadline = time.monotonic() + 120
    while not lease.exists():
        assert first.poll() is None, first.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the first run never took its lease"
        time.sleep(0.1)
    cache_b = cache_a if shared == "cache" else tmp_path / "cache-b"
    out_b = tmp_path / "out-b" if shared == "cache" else out_a
    args = ["fuzzy-dedup", str(src), "--output", str(out_b), "--cache-dir", str(cache_b)]
    second = cli([*args, "--n-workers", "1"], cwd=tmp_path, timeout=300)
    assert first.poll() is None, "the first run ended before the second was refused"
    assert second.returncode == 1, second.stderr[-2000:]
    line = next(x for x in second.stderr.splitlines() if "in use by run" in x)
    where = "cache directory" if shared == "cache" else "output"
    assert f"{where} {cache_b if shared == 'cache' else out_b} is in use by run" in line
    assert f"pid {first.pid}" in line
    assert "Traceback" not in second.stderr

    go.touch()  # the first run goes on
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-2000:]
    assert _removed(out_a) == want
    assert not lease.exists()  # released
    again = cli([*args, "--n-workers", "1"], cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert [r[0] for r in _removed(out_b)] == [r[0] for r in want]


def _lines(out: Path) -> list[str]:
    return sorted(x for p in sorted(out.glob("part-*.jsonl")) for x in p.read_text().splitlines())


def test_two_pipelines_and_two_dedups_at_once_equal_a_quiet_run_or_are_refused(
    tmp_path: Path,
) -> None:
    """Issue 21: four commands started together: two ``run`` on one output and one on its
    own, two ``fuzzy-dedup`` on one cache. Each finishes with the quiet run's result or is
    refused naming the holder (exit 1); nothing else."""
    import yaml

    src = tmp_path / "in"
    src.mkdir()
    _docs(src / "a.jsonl")

    def spec(out: Path) -> Path:
        f = tmp_path / f"{out.name}.yaml"
        f.write_text(
            yaml.safe_dump(
                {
                    "reader": {"class": "JsonlReader", "params": {"paths": str(src)}},
                    "stages": [{"class": "WordCountFilter", "params": {"min_words": 3}}],
                    "writer": {"class": "JsonlWriter", "params": {"path": str(out)}},
                }
            )
        )
        return f

    def fuzzy(out: Path, cache: Path) -> list[str]:
        return ["fuzzy-dedup", str(src), "--output", str(out), "--cache-dir", str(cache)]

    quiet = cli(["run", str(spec(tmp_path / "quiet")), "--sequential", "-q"], cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    quiet_f = cli([*fuzzy(tmp_path / "quiet-f", tmp_path / "quiet-c"), "-q"], cwd=tmp_path)
    assert quiet_f.returncode == 0, quiet_f.stderr[-2000:]

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    shared, own = tmp_path / "shared", tmp_path / "own"
    commands = {
        "run-1": ["run", str(spec(shared)), "--sequential", "-q"],
        "run-2": ["run", str(spec(shared)), "--sequential", "-q"],
        "run-own": ["run", str(spec(own)), "--sequential", "-q"],
        "fuzzy-1": [*fuzzy(tmp_path / "f1", tmp_path / "cache"), "-q", "--n-workers", "1"],
        "fuzzy-2": [*fuzzy(tmp_path / "f2", tmp_path / "cache"), "-q", "--n-workers", "1"],
    }
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "curator_dask.cli", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in commands.items()
    }
    done = {name: p.communicate(timeout=600) for name, p in procs.items()}
    codes = {name: p.returncode for name, p in procs.items()}
    for name, code in codes.items():
        if code != 0:  # a clean refusal, naming the holder
            assert code == 1, (name, done[name][1][-2000:])
            assert "is in use by run" in done[name][1], (name, done[name][1][-2000:])
            assert "Traceback" not in done[name][1]
    assert codes["run-own"] == 0
    assert codes["run-1"] == 0 or codes["run-2"] == 0
    assert codes["fuzzy-1"] == 0 or codes["fuzzy-2"] == 0
    assert _lines(shared) == _lines(tmp_path / "quiet")
    assert _lines(own) == _lines(tmp_path / "quiet")
    for name, out in (("fuzzy-1", tmp_path / "f1"), ("fuzzy-2", tmp_path / "f2")):
        if codes[name] == 0:
            assert _removed(out) == _removed(tmp_path / "quiet-f")
