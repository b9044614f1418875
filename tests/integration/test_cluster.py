"""Connecting to an existing scheduler: by scheduler file (as in a batch job) and address."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from _cluster_helpers import expected_ids, jsonl_ids

from curator_dask.cli import main
from curator_dask.cluster import ClusterConfig, get_client
from curator_dask.executor import DaskExecutor
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration


def test_get_client_by_scheduler_file_and_address(subprocess_cluster) -> None:
    sfile = str(subprocess_cluster.scheduler_file)
    with get_client(ClusterConfig(kind="scheduler_file", scheduler_file=sfile, n_workers=2)) as c:
        assert len(c.scheduler_info(n_workers=-1)["workers"]) == 2
        assert c.submit(sum, [1, 2]).result() == 3
    with get_client(ClusterConfig(kind="address", address=subprocess_cluster.address)) as c:
        assert c.scheduler.address == subprocess_cluster.address
    # the scheduler outlives the clients
    with get_client(ClusterConfig(kind="scheduler_file", scheduler_file=sfile)) as c:
        assert c.status == "running"


def test_pipeline_through_scheduler_file_in_batch_mode(
    subprocess_cluster, shard_dir: Path, tmp_path: Path
) -> None:
    from _cluster_helpers import LongDocs, TitleCase

    pipeline = Pipeline(
        "sfile",
        [
            JsonlReader(str(shard_dir), files_per_partition=1),
            TitleCase(),
            LongDocs(min_chars=500),
            JsonlWriter(str(tmp_path / "out")),
        ],
    )
    executor = DaskExecutor(scheduler_file=str(subprocess_cluster.scheduler_file), progress=False)
    result = pipeline.run(executor, execution_mode="batch")
    assert jsonl_ids(tmp_path / "out") == expected_ids(shard_dir, 500)
    assert (result.read, result.partitions, result.execution_mode) == (240, 6, "batch")


@pytest.mark.parametrize("given", ["scheduler_file", "cluster_config"])
def test_default_blocksize_follows_the_workers_of_a_scheduler_file(
    subprocess_cluster, tmp_path: Path, given: str
) -> None:
    import dask
    import pandas as pd

    from curator_dask.config import BASE_WORKER_BYTES, blocksize_for_memory

    src = tmp_path / "in.jsonl"
    with src.open("w") as f:
        for i in range(2_500):
            f.write(json.dumps({"id": f"d{i}", "text": f"doc {i} " + "word " * 400}) + "\n")
    size = src.stat().st_size
    out = tmp_path / "out"
    # the workers have 1 GB each (conftest); a peak of 50x makes their blocksize small
    with dask.config.set({"curator.io.peak-per-partition-byte": 50}):
        usable = max(0.6e9 - BASE_WORKER_BYTES, 0.6e9 / 4)
        want = blocksize_for_memory(usable, 1, peak_per_partition_byte=50, memory_fraction=1)
        assert want == 2 * 2**20 < size < 256_000_000  # the fixed default: one partition
        sfile = str(subprocess_cluster.scheduler_file)
        if given == "scheduler_file":
            executor = DaskExecutor(scheduler_file=sfile, progress=False)
        else:  # as the command line gives it
            config = ClusterConfig(kind="scheduler_file", scheduler_file=sfile)
            executor = DaskExecutor(cluster=config, progress=False)
        result = Pipeline("sized", [JsonlReader(str(src)), JsonlWriter(str(out))]).run(executor)
    files = sorted(out.glob("*.jsonl"))
    assert result.partitions == len(files) == -(-size // want) > 1
    got = pd.concat([pd.read_json(p, lines=True) for p in files])
    assert got["id"].tolist() == [f"d{i}" for i in range(2_500)]


def test_cli_run_with_scheduler_file(
    subprocess_cluster, shard_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    cfg = tmp_path / "p.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "name": "cli",
                "reader": {
                    "class": "JsonlReader",
                    "params": {"paths": str(shard_dir), "files_per_partition": 1},
                },
                "stages": [
                    {"class": "_cluster_helpers:TitleCase"},
                    {"class": "_cluster_helpers:LongDocs", "params": {"min_chars": 400}},
                ],
                "writer": {"class": "JsonlWriter", "params": {"path": str(out)}},
            }
        )
    )
    assert main(["run", str(cfg), "--scheduler-file", str(subprocess_cluster.scheduler_file)]) == 0
    assert f"output: {out}" in capsys.readouterr().out
    assert jsonl_ids(out) == expected_ids(shard_dir, 400)
    assert json.loads((Path(str(out) + ".curator") / "_stats.json").read_text())["read"] == 240
