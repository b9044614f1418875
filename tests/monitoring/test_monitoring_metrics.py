"""Prometheus metrics: served over HTTP on 127.0.0.1 and scraped; the Grafana dashboard."""

from __future__ import annotations

import json
import re
import urllib.request
from importlib import resources
from typing import Any

import pytest

from curator_dask.monitoring import (
    CuratorMetrics,
    default_metrics,
    record_stage_stats,
    record_task_failure,
    record_task_retry,
    start_metrics_server,
)
from curator_dask.monitoring.metrics import set_memory_gauges
from curator_dask.stage import StageStats

pytest.importorskip("prometheus_client")
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


def test_scrape_stage_stats_over_http() -> None:
    registry = CollectorRegistry()
    metrics = CuratorMetrics(registry)
    per_partition = [
        StageStats("WordCountFilter", 100, 80, 0, 0.2),
        StageStats("WordCountFilter", 50, 45, 0, 3.0),
        StageStats("JsonlReader", 152, 150, 2, 0.04),
    ]
    record_stage_stats(per_partition, pipeline="demo", metrics=metrics)
    # a summed StageStats (3 partitions) as a dict from _stats.json
    summed = StageStats("ExactDuplicateFilter", 125, 100, 0, 1.5, 3).to_dict()
    record_stage_stats([summed], pipeline="demo", metrics=metrics)
    record_task_failure("WordCountFilter", pipeline="demo", retried=True, metrics=metrics)
    record_task_failure("WordCountFilter", pipeline="demo", metrics=metrics)
    record_task_retry("JsonlReader", pipeline="demo", metrics=metrics)

    with start_metrics_server(0, registry=registry) as server:
        assert server.addr == "127.0.0.1"
        assert server.port > 0
        got = _scrape(server.url)

    wc = {"pipeline": "demo", "stage": "WordCountFilter"}
    assert got[_key("curator_documents_processed_total", **wc)] == 150
    assert got[_key("curator_documents_kept_total", **wc)] == 125
    assert got[_key("curator_documents_removed_total", **wc)] == 25
    assert got[_key("curator_documents_quarantined_total", **wc)] == 0
    assert got[_key("curator_partitions_total", **wc)] == 2
    assert got[_key("curator_stage_seconds_count", **wc)] == 2
    assert got[_key("curator_stage_seconds_sum", **wc)] == pytest.approx(3.2)
    assert got[_key("curator_stage_seconds_bucket", le="0.25", **wc)] == 1
    assert got[_key("curator_stage_seconds_bucket", le="5.0", **wc)] == 2
    assert got[_key("curator_tasks_failed_total", **wc)] == 2
    assert got[_key("curator_tasks_retried_total", **wc)] == 1

    rd = {"pipeline": "demo", "stage": "JsonlReader"}
    assert got[_key("curator_documents_quarantined_total", **rd)] == 2
    assert got[_key("curator_documents_removed_total", **rd)] == 0
    assert got[_key("curator_tasks_retried_total", **rd)] == 1

    ex = {"pipeline": "demo", "stage": "ExactDuplicateFilter"}
    assert got[_key("curator_documents_removed_total", **ex)] == 25
    assert got[_key("curator_stage_seconds_count", **ex)] == 3  # three partitions
    assert got[_key("curator_stage_seconds_sum", **ex)] == pytest.approx(1.5)
    assert got[_key("curator_stage_seconds_bucket", le="0.25", **ex)] == 0
    assert got[_key("curator_stage_seconds_bucket", le="0.5", **ex)] == 3


def test_default_registry_accumulates() -> None:
    m = default_metrics()
    assert default_metrics() is m
    counter = m.processed.labels("default-test", "S")
    before = counter._value.get()
    record_stage_stats([StageStats("S", 7, 7)], pipeline="default-test")
    record_stage_stats([StageStats("S", 5, 1)], pipeline="default-test")
    assert counter._value.get() - before == 12
    with start_metrics_server(0) as server:
        got = _scrape(server.url)
    assert got[_key("curator_documents_removed_total", pipeline="default-test", stage="S")] >= 4


def test_memory_gauges() -> None:
    registry = CollectorRegistry()
    metrics = CuratorMetrics(registry)
    nan = float("nan")
    rows = [
        {"worker": "tcp://w:1", "rss": 300.0, "managed": 100.0, "unmanaged": 200.0,
         "spilled": 5.0, "gpu_used": nan, "gpu_total": nan},
        {"worker": "gpu:0", "rss": nan, "managed": nan, "unmanaged": nan, "spilled": nan,
         "gpu_used": 7.0, "gpu_total": 16.0},
    ]  # fmt: skip
    set_memory_gauges(rows, metrics=metrics)
    with start_metrics_server(0, registry=registry) as server:
        got = _scrape(server.url)
    assert got[_key("curator_worker_memory_bytes", worker="tcp://w:1", type="unmanaged")] == 200
    assert got[_key("curator_worker_memory_bytes", worker="tcp://w:1", type="spilled")] == 5
    assert got[_key("curator_gpu_memory_used_bytes", device="gpu:0")] == 7
    assert got[_key("curator_gpu_memory_total_bytes", device="gpu:0")] == 16
    assert _key("curator_worker_memory_bytes", worker="gpu:0", type="rss") not in got


# -- the Grafana dashboard ----------------------------------------------------------------
_NAME = re.compile(r"\b((?:curator|dask)_[a-z_]+|DCGM_FI_[A-Z_]+)\b")


def _dashboard() -> dict[str, Any]:
    text = resources.files("curator_dask").joinpath("dashboards/curator_dask.json").read_text()
    return json.loads(text)


def _exposed_names(text: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(s.name for s in family.samples)
    # families without samples still print their TYPE line
    names.update(re.findall(r"^# TYPE (\S+)", text, flags=re.M))
    names.update(n + "_total" for n in list(names))
    return names


def test_dashboard_queries_use_real_metric_names(client: Any) -> None:
    from prometheus_client import generate_latest

    dash = _dashboard()
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    used = {m for e in exprs for m in _NAME.findall(e)}
    assert {"dask_worker_memory_bytes", "curator_stage_seconds_bucket"} <= used

    # curator's names: what a registry with every metric set exposes
    registry = CollectorRegistry()
    metrics = CuratorMetrics(registry)
    record_stage_stats([StageStats("S", 2, 1)], metrics=metrics)
    record_task_failure("S", retried=True, metrics=metrics)
    set_memory_gauges([{"worker": "w", "rss": 1.0, "gpu_used": 1.0, "gpu_total": 2.0}],
                      metrics=metrics)  # fmt: skip
    ours = _exposed_names(generate_latest(registry).decode())

    # dask's names: scraped from a real scheduler's and worker's /metrics
    dask_text = ""
    servers = [client.cluster.scheduler, *client.cluster.workers.values()]
    urls = [f"http://127.0.0.1:{s.http_server.port}/metrics" for s in servers]
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as r:
            dask_text += r.read().decode()
    theirs = _exposed_names(dask_text)

    missing = {m for m in used if not m.startswith("DCGM_") and m not in ours and m not in theirs}
    assert not missing, f"dashboard uses metrics nobody exposes: {sorted(missing)}"
    # every panel has a datasource from the template variable and a unit
    for p in panels:
        assert p["datasource"]["uid"] == "${datasource}"
        assert p["fieldConfig"]["defaults"]["unit"]
