"""A cluster the executor starts sizes the partitions, though it starts after they are listed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import dask
import pandas as pd

from curator_dask.cluster import ClusterConfig, get_client
from curator_dask.config import BASE_WORKER_BYTES, blocksize_for_memory, worker_resources
from curator_dask.executor import DaskExecutor
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline

MiB = 2**20


#: one in-process worker of one thread and 4 GiB
_ONE_WORKER = ClusterConfig(
    n_workers=1,
    threads_per_worker=1,
    memory_limit="4GiB",
    processes=False,
    dashboard_address=None,
)


def _input(tmp_path: Path) -> Path:
    """2,500 JSONL documents of about 2 kB each."""
    src = tmp_path / "in.jsonl"
    with src.open("w") as f:
        for i in range(2_500):
            f.write(json.dumps({"id": f"d{i}", "text": f"doc {i} " + "word " * 400}) + "\n")
    return src


def test_the_default_blocksize_follows_the_cluster_the_executor_will_start(tmp_path: Path) -> None:
    src = _input(tmp_path)
    size = src.stat().st_size
    config = _ONE_WORKER
    out = tmp_path / "out"
    # a peak of 500x the partition's bytes makes the 4 GiB worker's blocksize small
    with dask.config.set({"curator.io.peak-per-partition-byte": 500}):
        usable = 0.6 * 4 * 2**30 - BASE_WORKER_BYTES
        want = blocksize_for_memory(usable, 1, peak_per_partition_byte=500, memory_fraction=1)
        assert want == 2 * MiB < size < 256_000_000  # the fixed default: one partition
        result = Pipeline("planned", [JsonlReader(str(src)), JsonlWriter(str(out))]).run(
            DaskExecutor(cluster=config, progress=False)
        )
    n = math.ceil(size / want)
    assert result.partitions == n > 1
    files = sorted(out.glob("*.jsonl"))
    assert len(files) == n
    got = pd.concat([pd.read_json(p, lines=True) for p in files])
    assert got["id"].tolist() == [f"d{i}" for i in range(2_500)]


def test_planned_worker_memory_is_what_the_started_workers_get() -> None:
    config = ClusterConfig(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    )
    assert config.memory_limit == "auto"
    planned = config.worker_memory()
    with get_client(config) as client:
        _, limit, threads = worker_resources(client)
    assert planned == (limit, threads)
    assert ClusterConfig(kind="address", address="tcp://127.0.0.1:1").worker_memory() is None


def test_streaming_keeps_one_partition_in_flight_per_worker_thread_by_default() -> None:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=3, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        # what the default blocksize is sized for (config.default_blocksize)
        assert DaskExecutor(client=client)._window(client) == 6
        assert DaskExecutor(client=client, max_in_flight=2)._window(client) == 2
        with dask.config.set({"curator.execution.max-in-flight": 4}):
            assert DaskExecutor(client=client)._window(client) == 4


def test_a_reader_told_the_same_workers_lists_what_the_executor_lists(tmp_path: Path) -> None:
    # The executor hands the workers it will start to the reader's listing
    # (Reader.partitions(workers)); a reader told the same shape outside any executor cuts the
    # input the same way, and no hidden context is consulted (sizing has no ContextVar).
    import ast

    from curator_dask import sizing

    src = _input(tmp_path)
    config = _ONE_WORKER
    executor = DaskExecutor(cluster=config, progress=False)
    with dask.config.set({"curator.io.peak-per-partition-byte": 500}):
        limit, threads = config.worker_memory()  # type: ignore[misc]
        told = sizing.Workers(limit, threads, 1)
        assert executor._planned_workers() == told
        outside = JsonlReader(str(src)).partitions(told)
        assert len(JsonlReader(str(src)).partitions()) == 1  # no workers, no client: ceiling
        result = Pipeline("told", [JsonlReader(str(src)), JsonlWriter(str(tmp_path / "out"))]).run(
            executor
        )
    assert result.partitions == len(outside) > 1
    assert len(list((tmp_path / "out").glob("*.jsonl"))) == len(outside)
    tree = ast.parse(Path(sizing.__file__).read_text(encoding="utf-8"))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert "ContextVar" not in names
