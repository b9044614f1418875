"""What a command-line run loads: no dashboard (bokeh) unless asked for."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"

_RUN = """
import sys
from curator_dask.cli import main
rc = main(sys.argv[1:])
print("LOADED", sorted(m for m in ("bokeh", "distributed.dashboard.scheduler") if m in sys.modules))
sys.exit(rc)
"""


def _small_input(tmp_path: Path, n_docs: int = 300) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    with gzip.open(SAMPLE, "rt") as f:
        lines = [next(f) for _ in range(n_docs)]
    for i in range(2):
        (src / f"part-{i}.jsonl").write_text("".join(lines[i::2]))
    return src


def _cli(tmp_path: Path, *args: str) -> tuple[list[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("LOADED"))
    return json.loads(line.split(" ", 1)[1].replace("'", '"')), proc.stderr


@pytest.mark.parametrize("flag", [None, "--dashboard"])
def test_a_dedup_run_serves_and_loads_the_dashboard_only_when_asked(
    tmp_path: Path, flag: str | None
) -> None:
    src = _small_input(tmp_path)
    args = ["fuzzy-dedup", str(src), "--output", "out", "--cache-dir", "cache"]
    loaded, err = _cli(tmp_path, *args, "--n-workers", "1", *([flag] if flag else []))
    removed = list((tmp_path / "out" / "removed_ids").glob("*.parquet"))
    assert removed, err[-2000:]
    if flag:
        assert loaded == ["bokeh", "distributed.dashboard.scheduler"]
        assert "; dashboard http://" in err
    else:
        assert loaded == []
        assert "dashboard" not in err


def test_dashboard_link_is_none_for_a_local_cluster_without_the_dashboard() -> None:
    from curator_dask.cluster import ClusterConfig, dashboard_link, get_client

    config = ClusterConfig(n_workers=1, threads_per_worker=1, processes=False)
    with get_client(config) as client:
        assert client.dashboard_link  # distributed still names its HTTP server
        assert dashboard_link(client) is None
    assert dashboard_link(None) is None


_WIDGETS = """
import json, sys
import curator_dask
loaded = ["jinja2"] if "jinja2" in sys.modules else []
import dask
from distributed.security import Security
drawn = [dask.delayed(sum)([1, 2]).dask._repr_html_(), Security()._repr_html_()]
print(json.dumps([loaded, "jinja2" in sys.modules, ["<div" in html for html in drawn]]))
"""


def test_dask_comes_without_jinja2_and_draws_its_widgets_when_asked() -> None:
    """``import curator_dask`` (every command run) imports dask without Jinja2, which only
    dask's notebook widgets use; dask's and distributed's HTML reprs still draw (a graph
    through ``dask.highlevelgraph``, imported with dask; a ``distributed`` object, imported
    after), importing it then."""
    proc = subprocess.run(
        [sys.executable, "-c", _WIDGETS],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [[], True, [True, True]]
