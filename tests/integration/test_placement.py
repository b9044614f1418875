"""Stages are placed by their resources on a real cluster of subprocesses.

A ``dask scheduler`` and two ``dask worker`` processes run on 127.0.0.1, one of them
advertising ``GPU=1``. A scheduler plugin (``_cluster_helpers.PlacementLog``) records the
worker and resource restrictions of every task as it starts processing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _cluster_helpers import LongDocs, TitleCase, expected_ids, jsonl_ids, placement_records
from distributed import Client

from curator_dask import Resources
from curator_dask.executor import DaskExecutor
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration


def test_gpu_stage_runs_only_on_gpu_workers_and_cpu_stages_hold_no_gpu(
    subprocess_cluster, shard_dir: Path, tmp_path: Path
) -> None:
    gpu_stage = LongDocs(min_chars=300, name="gpu_stage", resources=Resources(gpus=1))
    pipeline = Pipeline(
        "placement",
        [
            JsonlReader(str(shard_dir), files_per_partition=1),
            TitleCase(name="cpu_stage"),
            gpu_stage,
            JsonlWriter(str(tmp_path / "out")),
        ],
    )
    with Client(subprocess_cluster.address, timeout="30s") as client:
        result = pipeline.run(DaskExecutor(client=client, progress=False))
        records = client.run_on_scheduler(placement_records)

    gpu_worker = subprocess_cluster.workers["gpu-worker"]
    by_step: dict[str, list[dict]] = {}
    for rec in records:
        by_step.setdefault(rec["key"].split("-")[0], []).append(rec)
    assert len(by_step["gpu_stage"]) == 6
    assert {r["worker"] for r in by_step["gpu_stage"]} == {gpu_worker}
    assert all(r["resources"] == {"GPU": 1.0} for r in by_step["gpu_stage"])
    for step in ("read", "cpu_stage", "write"):
        assert len(by_step[step]) == 6
        assert all(r["resources"] == {} for r in by_step[step]), step
    assert jsonl_ids(tmp_path / "out") == expected_ids(shard_dir, 300)
    assert result.kept == len(expected_ids(shard_dir, 300))
    assert result.read == 240
