"""Two dedup runs at once on one cache directory or one output (issue 21).

The first run is a real process that holds its leases for a while (its input partitions
sleep); the second is ``curator-dask fuzzy-dedup`` started while the first runs. The second
is refused naming the first; the first's result equals a quiet run's; the second, run
again afterwards, finishes with the same result.
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
import sys, time
import dask, dask.dataframe as dd, pandas as pd
from curator_dask.dedup import FuzzyDeduplicationWorkflow
src, cache, out, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
frame = pd.read_json(src, lines=True, dtype={"id": str})

def slow(part):
    time.sleep(pause)
    return part

df = dd.from_pandas(frame, npartitions=2).map_partitions(slow, meta=frame.iloc[:0])
with dask.config.set(scheduler="threads"):
    print(FuzzyDeduplicationWorkflow(df=df, cache_path=cache, output_path=out).run()["removed"])
"""


def _docs(path: Path) -> None:
    base = "the quick brown fox jumps over the lazy dog near the river bank at dawn {}"
    docs = [{"id": f"d{i}", "text": base.format(i % 15)} for i in range(60)]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))


def _first(src: Path, cache: Path, out: Path, pause: float) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-c", _FIRST, str(src), str(cache), str(out), str(pause)],
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
    quiet = _first(src / "a.jsonl", tmp_path / "quiet-cache", tmp_path / "quiet", 0)
    assert quiet.wait(timeout=300) == 0, quiet.stderr.read()[-2000:] if quiet.stderr else ""
    want = _removed(tmp_path / "quiet")
    assert want  # the input holds near-duplicates

    cache_a, out_a = tmp_path / "cache", tmp_path / "out-a"
    first = _first(src / "a.jsonl", cache_a, out_a, pause=30)
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

    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-2000:]
    assert _removed(out_a) == want
    assert not lease.exists()  # released
    again = cli([*args, "--n-workers", "1"], cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert [r[0] for r in _removed(out_b)] == [r[0] for r in want]
