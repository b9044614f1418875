"""The HTML run report, the ``report`` / ``monitor`` subcommands, and the executor hooks."""

from __future__ import annotations

import argparse
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import curator_dask.monitoring.cli as mon_cli
from curator_dask.monitoring import (
    CuratorWarning,
    load_run,
    on_run_end,
    on_run_start,
    read_timeline,
    write_run_report,
)
from curator_dask.monitoring.report import REPORT_FILE, TIMELINE_FILE
from curator_dask.stage import StageStats

STAGE_NAMES = ["JsonlReader", "WordCountFilter", "ExactDuplicateFilter", "JsonlWriter"]


def _images(html: str) -> tuple[int, int]:
    return html.count("data:image/png;base64,"), len(re.findall(r"<svg class=\"chart\"", html))


def test_report_has_stages_funnel_and_memory(
    run_dir: Path, synthetic_stats: Any, synthetic_timeline: Any
) -> None:
    timeline = synthetic_timeline(workers=2, leak_worker=1)
    out = write_run_report(run_dir, synthetic_stats(), timeline)
    assert out == run_dir / REPORT_FILE
    html = out.read_text()
    for name in STAGE_NAMES:
        assert name in html
    png, svg = _images(html)
    # funnel, time per stage, all-worker memory, per-worker memory, GPU memory
    assert (png, svg) == (5, 0)  # matplotlib, the one chart engine
    assert "Every document is accounted for: read 1,000" in html
    assert "complete</span>" in html  # _SUCCESS is there
    assert "Possible memory leak" in html
    assert "tcp://127.0.0.1:4001" in html
    assert "Workers spilled" in html
    assert "10 records were quarantined (JsonlReader)" in html
    assert "Peak GPU memory" in html
    assert "11.0 GiB" in html
    # self-contained: no scripts, nothing fetched from elsewhere
    assert "<script" not in html
    assert not re.search(r"(src|href)=\"https?:|url\(", html)
    # the timeline is kept beside the report, so it can be drawn again later
    back = read_timeline(run_dir / TIMELINE_FILE)
    assert len(back) == len(timeline)


def test_report_without_a_timeline_has_the_stage_charts(
    run_dir: Path, synthetic_stats: Any
) -> None:
    html = write_run_report(run_dir, synthetic_stats()).read_text()
    assert _images(html) == (2, 0)  # the funnel and the time per stage
    for value in ("990", "190", "10"):  # kept, removed, quarantined in the stage table
        assert f"<td>{value}</td>" in html
    assert "No memory timeline was recorded" in html


def test_report_escapes_and_flags_bad_accounting(tmp_path: Path, synthetic_stats: Any) -> None:
    stats = synthetic_stats("<script>alert(1)</script>")
    stats["stages"][1]["name"] = "<b>evil</b>"
    stats["kept"] = 690
    stats["executor"] = {"workers": 2, "note": "<i>x</i>"}
    html = write_run_report(tmp_path, stats).read_text()
    assert "<script>" not in html
    assert "<b>evil</b>" not in html
    assert "<i>x</i>" not in html
    assert "&lt;b&gt;evil&lt;/b&gt;" in html
    assert "Accounting does not add up" in html
    assert "Run details" in html
    assert "executor" in html


def test_report_from_run_dir_alone(run_dir: Path, synthetic_timeline: Any) -> None:
    synthetic_timeline().to_parquet(run_dir / TIMELINE_FILE)
    stats, timeline = load_run(run_dir)
    assert stats["pipeline"] == "synthetic-run"
    assert timeline is not None
    html = write_run_report(run_dir).read_text()
    assert _images(html)[0] == 5  # funnel, time, memory of all workers, per worker, GPU
    assert "Peak GPU memory" in html


def test_load_run_needs_stats(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"_stats\.json"):
        load_run(tmp_path)


# -- the CLI ------------------------------------------------------------------------------
def _parser(client: Any = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="curator-dask")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_cluster_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--scheduler-address")

    mon_cli.register(sub, add_cluster_args, lambda args: client)
    return parser


def _run(argv: list[str], client: Any = None) -> int:
    args = _parser(client).parse_args(argv)
    return args.func(args)


def test_cli_report_renders_once_then_reuses(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["report", str(run_dir)]) == 0
    report = run_dir / REPORT_FILE
    assert capsys.readouterr().out.strip() == str(report.resolve())
    html = report.read_text()
    assert all(name in html for name in STAGE_NAMES)

    old = time.time() - 100
    os.utime(run_dir / "_stats.json", (old, old))
    os.utime(report, (old + 50, old + 50))
    assert _run(["report", str(run_dir)]) == 0
    assert report.stat().st_mtime == pytest.approx(old + 50)  # up to date: not redrawn
    assert _run(["report", str(run_dir), "--force"]) == 0
    assert report.stat().st_mtime > old + 60
    # newer statistics: drawn again
    os.utime(report, (old, old))
    os.utime(run_dir / "_stats.json", (old + 10, old + 10))
    assert _run(["report", str(run_dir)]) == 0
    assert report.stat().st_mtime > old + 60


def test_cli_report_open_and_missing(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    opened: list[str] = []
    monkeypatch.setattr(mon_cli.webbrowser, "open", opened.append)
    assert _run(["report", str(run_dir), "--open"]) == 0
    assert opened == [(run_dir / REPORT_FILE).resolve().as_uri()]
    assert _run(["report", str(tmp_path / "nowhere")]) == 2
    assert "_stats.json not found" in capsys.readouterr().err


def test_cli_monitor_writes_a_timeline(client: Any, tmp_path: Path) -> None:
    out = tmp_path / "mem.parquet"
    argv = ["monitor", "--output", str(out), "--interval", "0.1", "--duration", "0.4"]
    assert _run(argv, _Borrowed(client)) == 0
    frame = read_timeline(out)
    assert set(frame["worker"]) == set(client.scheduler_info()["workers"])
    assert frame["time"].nunique() >= 3


class _Borrowed:
    """A context manager yielding a client it does not close (the fixture owns it)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __enter__(self) -> Any:
        return self.client

    def __exit__(self, *exc: object) -> None:
        pass


# -- the executor hooks -------------------------------------------------------------------
@dataclass
class _Result:
    """The parts of a PipelineResult that the hooks use."""

    output_path: str
    name: str = "hooked"
    partitions: int | None = None
    stages: list[StageStats] = field(
        default_factory=lambda: [StageStats("R", 10, 9, 1, 0.1), StageStats("F", 9, 6, 0, 0.2)]
    )

    def to_dict(self) -> dict[str, Any]:
        return {"pipeline": self.name, "stages": [s.to_dict() for s in self.stages],
                "read": 10, "kept": 6, "removed": 3, "quarantined": 1}  # fmt: skip


def test_hooks_sample_a_run_and_record_it(client: Any, tmp_path: Path) -> None:
    import dask

    from curator_dask.monitoring import default_metrics

    run = tmp_path / "run"
    run.mkdir()
    result = _Result(str(run))
    counter = default_metrics().removed.labels("hooked", "F")
    before = counter._value.get()
    with dask.config.set({"curator.monitoring.report": True, "curator.monitoring.interval": 0.05}):
        timeline = on_run_start(client, str(run))
        assert timeline is not None
        assert timeline.running
        client.submit(sum, range(1000)).result()
        time.sleep(0.2)
        report = on_run_end(result)
    assert not timeline.running
    assert counter._value.get() - before == 3
    frame = read_timeline(run / TIMELINE_FILE)
    assert set(frame["worker"]) >= set(client.scheduler_info()["workers"])
    assert report == run / REPORT_FILE
    assert "hooked" in report.read_text()


def test_hooks_off_by_config_and_remote_outputs(client: Any, tmp_path: Path) -> None:
    import dask

    with dask.config.set({"curator.monitoring.timeline": False}):
        assert on_run_start(client, str(tmp_path)) is None
    # a remote output: sampled, but nothing written locally
    on_run_start(None, "s3://bucket/out")
    assert on_run_end(_Result("s3://bucket/out")) is None
    assert not (tmp_path / TIMELINE_FILE).exists()


def test_hooks_warn_about_a_leak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from curator_dask.monitoring import MemoryTimeline

    grown = iter(range(100))

    def leaky(self: MemoryTimeline) -> list[dict[str, Any]]:
        from curator_dask.monitoring.timeline import _row

        return [_row("local", rss=float(300 * 2**20 + next(grown) * 64 * 2**20))]

    monkeypatch.setattr(MemoryTimeline, "_sample_local", leaky)
    timeline = on_run_start(None, str(tmp_path))
    assert timeline is not None
    for _ in range(10):
        timeline.sample()
    with pytest.warns(CuratorWarning, match="unmanaged memory grew steadily"):
        on_run_end(_Result(str(tmp_path), partitions=40))
    assert np.isfinite(read_timeline(tmp_path / TIMELINE_FILE)["rss"]).all()
    # the same growth over 4 partitions: a warm-up spread over a short run, no warning
    timeline = on_run_start(None, str(tmp_path))
    assert timeline is not None
    for _ in range(10):
        timeline.sample()
    on_run_end(_Result(str(tmp_path), partitions=4))  # warnings are errors in this suite


def test_curator_dask_main_runs_report(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import curator_dask.cli as cli

    modules = list(cli.SUBCOMMAND_MODULES)
    if "curator_dask.monitoring.cli" not in modules:
        monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", [*modules, "curator_dask.monitoring.cli"])
    assert cli.main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out.strip() == str((run_dir / REPORT_FILE).resolve())
    help_text = cli.build_parser().format_help()
    assert "report" in help_text
    assert "monitor" in help_text
