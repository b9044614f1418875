"""The report answers "what produced this": parameters, quarantine by reason, removed
examples, and the time of every run after a resumed rerun."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from curator_dask.executor import DaskExecutor
from curator_dask.filters import WordCountFilter
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.monitoring import write_run_report
from curator_dask.monitoring.report import RUNS_FILE, quarantine_by_reason
from curator_dask.pipeline import Pipeline


def write_inputs(src: Path) -> dict[str, str]:
    src.mkdir()
    docs = {}
    for f in range(3):
        with open(src / f"shard-{f}.jsonl", "w") as out:
            for i in range(30):
                doc_id = f"{f}-{i}"
                docs[doc_id] = " ".join(f"word{k}" for k in range(i % 9 + 1))
                out.write(json.dumps({"id": doc_id, "text": docs[doc_id]}) + "\n")
            out.write('{"id": "cut", "text": "no end\n')  # malformed: quarantined
            out.write('{"id": "num", "text": 7}\n')  # text not a string: quarantined
    return docs


def run(src: Path, out: Path, client: Any, mode: str) -> Any:
    return Pipeline(
        "provenance",
        [
            JsonlReader(str(src), files_per_partition=1),
            WordCountFilter(min_words=5),
            JsonlWriter(str(out), mode=mode),
        ],
    ).run(DaskExecutor(client=client, progress=False))


@pytest.fixture(scope="module")
def threads_client() -> Any:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None)
        as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        yield client


def test_report_says_what_produced_the_output(tmp_path: Path, threads_client: Any) -> None:
    docs = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    first = run(tmp_path / "in", out, threads_client, "overwrite")
    html = write_run_report(out).read_text()
    # the stage's parameters, from _stats.json
    stats = json.loads((Path(str(out) + ".curator") / "_stats.json").read_text())
    assert stats["parameters"]["WordCountFilter"]["min_words"] == 5
    assert "min_words=5" in html
    # quarantine by reason, counted from the quarantine files themselves
    reasons = quarantine_by_reason(out)
    assert sum(reasons.values()) == first.quarantined == 6
    assert "Quarantine by reason" in html
    for reason, n in reasons.items():
        assert re.search(rf"{re.escape(reason)}</td><td>{n:,}</td>", html.replace("&#x27;", "'"))
    # removed examples: documents that really were removed, as they were read
    kept = {json.loads(line)["id"] for p in out.glob("part-*.jsonl") for line in p.open()}
    examples = next(s for s in stats["stages"] if s["name"] == "WordCountFilter")["examples"]
    assert 1 <= len(examples) <= 3
    for e in examples:
        assert e["id"] not in kept
        assert docs[e["id"]] == e["text"]
        assert len(e["text"].split()) < 5
        assert e["id"] in html

    # a rerun that finds every partition written: same totals, and the time of the real run
    (Path(str(out) + ".curator") / "_report.html").unlink()
    second = run(tmp_path / "in", out, threads_client, "resume")
    assert second.partitions_skipped == second.partitions == 3
    assert (second.read, second.kept, second.removed) == (first.read, first.kept, first.removed)
    runs = json.loads((Path(str(out) + ".curator") / RUNS_FILE).read_text())
    assert [r["partitions_written"] for r in runs] == [3]
    html = write_run_report(out).read_text()
    assert "wrote 0 of 3 partitions; 3 were done before" in html
    assert "Wall time, all runs" in html
    assert f"{runs[0]['wall_seconds']:.1f} s" in html
    # an overwrite starts the history again
    run(tmp_path / "in", out, threads_client, "overwrite")
    assert len(json.loads((Path(str(out) + ".curator") / RUNS_FILE).read_text())) == 1
