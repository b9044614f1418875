"""Dedup runs feed curator's Prometheus metrics: step progress as it finishes, documents at
the end, served by ``--metrics-port`` while a dedup command runs."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import pandas as pd
import pytest

import curator_dask.monitoring.hooks as hooks
import curator_dask.monitoring.metrics as metrics
from curator_dask.cli import main
from curator_dask.dedup import ExactDeduplicationWorkflow
from curator_dask.monitoring import default_metrics

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

TEXTS = ["dup", "a", "b", "c", "a", "e", "f", "dup", "dup"]  # "dup" straddles partitions


def value(metric: Any, *labels: str) -> float:
    return float(metric.labels(*labels)._value.get())


def test_steps_count_as_they_finish_and_documents_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf = "exact-dedup"
    m = default_metrics()
    # the registry is the process's: other tests may have counted exact-dedup runs already
    hashed0 = value(m.dedup_progress, wf, "hash", "partitions")
    processed0, removed0, kept0 = (value(c, wf, wf) for c in (m.processed, m.removed, m.kept))
    seen: list[tuple[str, float, float]] = []
    real_progress = hooks.on_dedup_progress

    def on_dedup_progress(workflow: str, step: str, unit: str, n: int) -> None:
        real_progress(workflow, step, unit, n)
        if step == "hash":
            hashed = value(m.dedup_progress, wf, "hash", "partitions") - hashed0
            seen.append((unit, hashed, value(m.processed, wf, wf) - processed0))

    monkeypatch.setattr(hooks, "on_dedup_progress", on_dedup_progress)
    pdf = pd.DataFrame({"id": [f"d{i}" for i in range(9)], "text": TEXTS})
    result = ExactDeduplicationWorkflow(
        output_path=str(tmp_path / "out"), df=dd.from_pandas(pdf, npartitions=3)
    ).run()
    assert (result.documents, result.removed) == (9, 3)
    # the series is created at zero, then grows by one per partition hashed, while the
    # documents (known at the end) are not counted yet
    assert seen == [("partitions", k, 0) for k in range(4)]
    assert value(m.processed, wf, wf) - processed0 == 9
    assert value(m.removed, wf, wf) - removed0 == 3
    assert value(m.kept, wf, wf) - kept0 == 6


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_port_serves_a_dedup_command_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "data"
    src.mkdir()
    for f in range(3):
        rows = [{"id": f"{f}-{i}", "text": TEXTS[3 * f + i]} for i in range(3)]
        (src / f"part-{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    servers: list[Any] = []
    scraped: list[Any] = []
    real_start, real_result = metrics.start_metrics_server, hooks.on_dedup_result

    def start_metrics_server(*args: Any, **kwargs: Any) -> Any:
        servers.append(real_start(*args, **kwargs))
        return servers[-1]

    def on_dedup_result(result: Any) -> None:
        real_result(result)
        try:  # still inside the command: its server is up and shows this run
            scraped.append(_scrape(servers[0].url))
        except Exception as e:  # hooks never fail a run: keep the error for the assert
            scraped.append(e)

    monkeypatch.setattr(metrics, "start_metrics_server", start_metrics_server)
    monkeypatch.setattr(hooks, "on_dedup_result", on_dedup_result)
    args = ["exact-dedup", str(src), "--output", str(tmp_path / "out"), "--n-workers", "1"]
    assert main([*args, "--metrics-port", "0", "-q"]) == 0
    (page,) = scraped
    assert isinstance(page, dict), page
    wf = (("pipeline", "exact-dedup"), ("stage", "exact-dedup"))
    assert page[("curator_documents_processed_total", wf)] >= 9
    assert page[("curator_documents_removed_total", wf)] >= 3
    hashed = (("step", "hash"), ("unit", "partitions"), ("workflow", "exact-dedup"))
    assert page[("curator_dedup_progress_total", hashed)] >= 1
