"""Live metrics: counters that grow as partitions finish, failure counters, and every query
of the shipped Grafana dashboard checked against real ``/metrics`` pages."""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import curator_dask.monitoring.hooks as hooks
from curator_dask.executor import DaskExecutor
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.monitoring import default_metrics, start_metrics_server
from curator_dask.pipeline import Pipeline
from curator_dask.stage import Filter

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

N_FILES = 5


@dataclass(kw_only=True)
class EvenWords(Filter):
    """Keeps documents with an even number of words; raises on a poisoned one."""

    poison: str = ""

    def keep(self, text: pd.Series) -> pd.Series:
        if self.poison and text.str.contains(self.poison, regex=False).any():
            raise ValueError("poisoned partition")
        return text.str.split().str.len() % 2 == 0


def write_inputs(src: Path, poison: str = "") -> int:
    src.mkdir(parents=True)
    n = 0
    for f in range(N_FILES):
        with open(src / f"shard-{f}.jsonl", "w") as out:
            for i in range(40):
                words = " ".join(["w"] * (i % 7 + 1))
                text = f"{poison} {words}" if poison and f == 3 else words
                out.write(json.dumps({"id": f"{f}-{i}", "text": text}) + "\n")
                n += 1
    return n


def pipeline(name: str, src: Path, out: Path, poison: str = "") -> Pipeline:
    return Pipeline(
        name,
        [
            JsonlReader(str(src), files_per_partition=1),
            EvenWords(poison=poison),
            JsonlWriter(str(out)),
        ],
    )


def value(metric: Any, *labels: str) -> float:
    return float(metric.labels(*labels)._value.get())


@pytest.fixture(scope="module")
def threads_client() -> Any:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
        as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        yield client


def test_counters_grow_as_partitions_finish(
    tmp_path: Path, threads_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "live-counters"
    n_docs = write_inputs(tmp_path / "in")
    m = default_metrics()
    seen: list[float] = []
    real_done, real_end = hooks.on_partition_done, hooks.on_run_end

    def on_partition_done(run_dir: str, pipeline: str, record: dict[str, Any]) -> None:
        real_done(run_dir, pipeline, record)
        seen.append(value(m.processed, name, "JsonlReader"))

    def on_run_end(result: Any) -> Any:
        seen.append(value(m.processed, name, "JsonlReader"))  # before the end of the run
        return real_end(result)

    monkeypatch.setattr(hooks, "on_partition_done", on_partition_done)
    monkeypatch.setattr(hooks, "on_run_end", on_run_end)
    result = pipeline(name, tmp_path / "in", tmp_path / "out").run(
        DaskExecutor(client=threads_client, progress=False)
    )
    assert result.read == n_docs
    # one step per partition, every document counted before the run ended, and only once
    assert len(seen) == N_FILES + 1
    assert seen == sorted(seen)
    assert seen[0] < n_docs
    assert seen[-2] == seen[-1] == n_docs
    assert value(m.processed, name, "JsonlReader") == n_docs
    assert value(m.removed, name, "EvenWords") == result.removed
    # the latency histogram holds one observation per partition, each its own time
    hist = m.stage_seconds.labels(name, "EvenWords")
    samples = {s.name: s.value for s in hist._samples() if not s.labels}
    assert samples["_count"] == N_FILES
    stats = json.loads((Path(str(tmp_path / "out") + ".curator") / "_stats.json").read_text())
    total = next(s["seconds"] for s in stats["stages"] if s["name"] == "EvenWords")
    assert samples["_sum"] == pytest.approx(total, rel=1e-6)
    assert value(m.tasks_failed, name, "EvenWords") == 0  # the series exists, at zero


def test_a_failing_stage_is_counted_under_its_name(tmp_path: Path, threads_client: Any) -> None:
    name = "live-failure"
    write_inputs(tmp_path / "in", poison="POISON")
    m = default_metrics()
    with pytest.raises(ValueError, match="poisoned partition"):
        pipeline(name, tmp_path / "in", tmp_path / "out", poison="POISON").run(
            DaskExecutor(client=threads_client, progress=False)
        )
    assert value(m.tasks_failed, name, "EvenWords") == 1
    assert value(m.tasks_failed, name, "JsonlWriter") == 0
    assert value(m.tasks_retried, name, "EvenWords") == 0


# -- the Grafana dashboard against live /metrics pages ---------------------------------------
_SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
_NAME = re.compile(r"\b((?:curator|dask)_[a-z_]+)\b")


def scrape(urls: list[str]) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets of its samples, over every page."""
    series: dict[str, list[dict[str, str]]] = {}
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                series.setdefault(s.name, []).append(dict(s.labels))
    return series


def problems(expr: str, series: dict[str, list[dict[str, str]]]) -> list[str]:
    """What in one PromQL expression does not exist in ``series`` (empty: all of it does)."""
    found = []
    names = set(_NAME.findall(expr))
    for name in names:
        if name not in series:
            found.append(f"no metric {name}")
    for name, body in _SELECTOR.findall(expr):
        if name.startswith("DCGM_") or name not in series:
            continue
        for label, op, literal in _MATCHER.findall(body):
            values = {s.get(label) for s in series[name]} - {None}
            if not values:
                found.append(f"{name} has no label {label!r}")
            elif "$" not in literal and op in ("=", "=~"):
                for alt in literal.split("|") if op == "=~" else [literal]:
                    if alt not in values:
                        found.append(f'{name}{{{label}="{alt}"}}: values are {sorted(values)}')
    for group in _BY.findall(expr):
        for label in (g.strip() for g in group.split(",")):
            if label and not any(label in s for n in names if n in series for s in series[n]):
                found.append(f"by ({label}): no metric of {sorted(names)} has it")
    return found


def test_problems_catches_a_label_that_does_not_exist() -> None:
    series = {"dask_worker_spill_bytes_total": [{"activity": "disk-write"}]}
    assert problems('rate(dask_worker_spill_bytes_total{activity="disk-write"}[1m])', series) == []
    assert problems('rate(dask_worker_spill_bytes_total{activity="disk_write"}[1m])', series)
    assert problems('rate(dask_worker_spill_bytes_total{kind="x"}[1m])', series)
    assert problems("sum by (stage) (dask_worker_spill_bytes_total)", series)
    assert problems("dask_no_such_metric", series)


@pytest.mark.integration
@pytest.mark.slow
def test_every_dashboard_query_matches_live_metrics(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    name = "dashboard-check"
    write_inputs(tmp_path / "in")
    # one worker process with a small memory limit, made to spill to disk and read back, so
    # its /metrics page has the spill series the dashboard plots
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            memory_limit="600MB",
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            local_directory=str(tmp_path / "scratch"),
        ) as cluster,
        Client(cluster) as client,
        start_metrics_server(0) as run_metrics,
    ):
        arrays = [client.submit(np.full, 4_000_000, i, pure=False) for i in range(16)]
        assert client.gather([client.submit(np.sum, a) for a in arrays])[-1] == 15 * 4_000_000
        pipeline(name, tmp_path / "in", tmp_path / "out").run(
            DaskExecutor(client=client, progress=False)
        )
        info = client.scheduler_info()
        urls = [
            f"http://127.0.0.1:{info['services']['dashboard']}/metrics",
            *(
                f"http://127.0.0.1:{w['services']['dashboard']}/metrics"
                for w in info["workers"].values()
            ),
            run_metrics.url,
        ]
        series = scrape(urls)
    text = resources.files("curator_dask").joinpath("dashboards/curator_dask.json").read_text()
    dash = json.loads(text)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [
        v["definition"].removeprefix("label_values(").replace(", ", "{").rstrip(")") + '=~"$any"}'
        for v in dash["templating"]["list"]
        if v["type"] == "query"
    ]
    assert len(exprs) > 15
    report = {e: problems(e, series) for e in exprs if "DCGM_" not in e}
    if not any(k.startswith("curator_gpu") for k in series):  # no GPU here: NVML gauges unset
        report = {e: p for e, p in report.items() if "curator_gpu_" not in e}
    bad = {e: p for e, p in report.items() if p}
    assert not bad, json.dumps(bad, indent=1)
