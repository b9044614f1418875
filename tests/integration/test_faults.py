"""Losing a worker (SIGKILL) in the middle of a pipeline and of fuzzy deduplication: the job
completes and its output equals an undisturbed run's."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import dask
import pandas as pd
import pytest
from _cluster_helpers import (
    LoggingJsonlReader,
    LoggingJsonlWriter,
    SlowCopy,
    TitleCase,
    jsonl_ids,
    read_log,
)
from _fault_helpers import Cluster, PartialFileWatch, slow_partition, tree_bytes, tree_digest
from distributed import Client, LocalCluster

from curator_dask.dedup import FuzzyDeduplicationWorkflow
from curator_dask.executor import DaskExecutor, SequentialExecutor
from curator_dask.io import JsonlReader, JsonlWriter, read_jsonl
from curator_dask.pipeline import Pipeline

pytestmark = pytest.mark.integration


def test_a_killed_worker_is_replaced_and_no_partition_is_lost(
    shard_dir: Path, tmp_path: Path
) -> None:
    log = str(tmp_path / "events.log")
    out = tmp_path / "out"
    before = tree_digest(shard_dir)
    reference = Pipeline(
        "fault",
        [
            JsonlReader(str(shard_dir), files_per_partition=1),
            SlowCopy(seconds=0.0),
            TitleCase(),
            JsonlWriter(str(tmp_path / "ref")),
        ],
    ).run(SequentialExecutor(progress=False))
    pipeline = Pipeline(
        "fault",
        [
            LoggingJsonlReader(str(shard_dir), files_per_partition=1, log=log),
            SlowCopy(seconds=0.4),
            TitleCase(),
            LoggingJsonlWriter(str(out), log=log),
        ],
    )
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit="1GB",
        ) as cluster,
        Client(cluster) as client,
    ):
        pids = client.run(os.getpid)
        victim = sorted(pids.values())[0]
        killed_at: list[float] = []

        def kill_after_first_write() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if os.path.exists(log) and any(w == "wrote" for w, _, _ in read_log(log)):
                    os.kill(victim, signal.SIGKILL)
                    killed_at.append(time.time())
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_after_first_write)
        killer.start()
        out.mkdir()
        with PartialFileWatch(out) as watch:
            result = pipeline.run(DaskExecutor(client=client, max_in_flight=4, progress=False))
        killer.join()
        assert victim not in client.run(os.getpid).values()  # it really died

    written = {i: t for what, i, t in read_log(log) if what == "wrote"}
    assert set(written) == set(range(6))
    assert killed_at
    assert max(written.values()) > killed_at[0]  # the kill happened mid-run
    assert result.read == 240
    assert result.kept == 240
    assert result.balanced
    assert len(jsonl_ids(out)) == 240
    assert sorted(jsonl_ids(out)) == sorted(set(jsonl_ids(out)))  # no duplicate rows
    # byte for byte the undisturbed run: file list, part files and quarantine files
    got, want = tree_bytes(out), tree_bytes(tmp_path / "ref")
    assert sorted(got) == sorted(want)
    assert got == want
    assert (result.read, result.kept, result.removed) == (reference.read, reference.kept, 0)
    # no part file was ever visible incomplete while the run went on
    assert watch.problems == []
    assert watch.checked >= 6
    assert tree_digest(shard_dir) == before


@pytest.fixture(scope="module")
def dedup_input(tmp_path_factory: pytest.TempPathFactory, sample_path: Path) -> Path:
    """The first 1,200 documents of the shipped sample in 8 JSONL files."""
    import gzip

    with gzip.open(sample_path, "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(1200)]
    src = tmp_path_factory.mktemp("dedup") / "in"
    src.mkdir()
    for i in range(8):
        (src / f"shard-{i}.jsonl").write_text("".join(lines[i * 150 : (i + 1) * 150]))
    return src


def _fuzzy(src: Path, tmp: Path, name: str, client: Client | None) -> dict:
    # a slow identity before MinHash makes step 1 last about a second on 2 workers
    df = read_jsonl(str(src), files_per_partition=1).map_partitions(slow_partition, 0.25)
    return FuzzyDeduplicationWorkflow(
        df=df,
        cache_path=str(tmp / f"{name}-cache"),
        output_path=str(tmp / f"{name}-out"),
        word_ngrams=5,
        num_bands=6,
        minhashes_per_band=5,
        bands_per_iteration=1,
        client=client,
    ).run()


def _removed(out: Path) -> tuple[list[str], list[tuple[str, str]]]:
    files = sorted(p.name for p in (out / "removed_ids").glob("*.parquet"))
    frame = pd.read_parquet(out / "removed_ids")
    return files, sorted(frame[["id", "group"]].itertuples(index=False, name=None))


@pytest.fixture(scope="module")
def undisturbed_fuzzy(dedup_input: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """The undisturbed run, on the local threaded scheduler (its result does not depend on
    the scheduler, partitions or workers)."""
    tmp = tmp_path_factory.mktemp("fuzzy-ref")
    with dask.config.set(scheduler="threads"):
        summary = _fuzzy(dedup_input, tmp, "ref", None)
    return summary, _removed(tmp / "ref-out")[1]


@pytest.mark.parametrize("when", ["minhash", "lsh"])
def test_a_worker_killed_during_fuzzy_dedup_changes_nothing_in_its_output(
    dedup_input: Path, undisturbed_fuzzy: tuple, tmp_path: Path, when: str
) -> None:
    before = tree_digest(dedup_input)
    ref, ref_rows = undisturbed_fuzzy
    cache = tmp_path / "run-cache"
    with (
        Cluster(tmp_path / "cluster", 2, ("--memory-limit", "1GB")) as cluster,
        Client(scheduler_file=str(cluster.scheduler_file), timeout="30s") as client,
    ):
        victim = sorted(client.run(os.getpid).values())[0]
        killed: list[str] = []

        def kill() -> None:
            # "minhash": once the first signature file is written, with most still to come;
            # "lsh": once all signatures are done, while the band groups are bucketed
            # (one p2p shuffle each, one after the other)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                parts = list(cache.glob("fuzzy-*/minhash/part-*.parquet"))
                done = list(cache.glob("fuzzy-*/minhash/_DONE"))
                if (when == "minhash" and parts) or (when == "lsh" and done):
                    groups = list(cache.glob("fuzzy-*/lsh/*/_DONE"))
                    os.kill(victim, signal.SIGKILL)
                    killed.append(f"{len(parts)} signature files, {len(groups)} band groups")
                    return
                time.sleep(0.01)

        killer = threading.Thread(target=kill)
        killer.start()
        summary = _fuzzy(dedup_input, tmp_path, "run", client)
        killer.join()
        assert victim not in client.run(os.getpid).values()  # it really died

    assert killed, "the worker was not killed"
    print(f"killed during {when} after {killed[0]}")
    if when == "minhash":
        assert not killed[0].startswith("8 ")  # mid-step: not every partition was done
    else:
        assert not killed[0].endswith(" 6 band groups")
    assert summary["removed"] == ref["removed"] > 0
    assert summary["duplicate_groups"] == ref["duplicate_groups"]
    # The same rows. Not the same bytes, nor the same files: inside a shuffle's output
    # partition rows come in the order the shards arrived, and the number of output
    # partitions follows the input's (p2p on the cluster, tasks on the local scheduler).
    assert _removed(tmp_path / "run-out")[1] == ref_rows
    assert tree_digest(dedup_input) == before
