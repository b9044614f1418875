"""Real clusters for the integration tests: a ``dask scheduler`` and two ``dask worker``
subprocesses on 127.0.0.1 (one advertising ``GPU=1``), started and killed here."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _procs import start_dask, stop_dask, wait_for_file

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # Subprocesses must import the helpers (tasks and the scheduler preload refer to them).
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    env["DASK_DISTRIBUTED__WORKER__DAEMON"] = "False"
    return env


def _start(args: list[str], log: Path) -> subprocess.Popen:
    return start_dask(args, log, env=_env())


class SubprocessCluster:
    """What the ``subprocess_cluster`` fixture yields."""

    def __init__(self, scheduler_file: Path, address: str, workers: dict[str, str]) -> None:
        self.scheduler_file = scheduler_file
        self.address = address
        self.workers = workers  # name -> address


@pytest.fixture(scope="module")
def subprocess_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubprocessCluster]:
    """``dask scheduler`` + a CPU worker + a worker with ``--resources GPU=1``."""
    from distributed import Client

    tmp = tmp_path_factory.mktemp("cluster")
    sfile = tmp / "scheduler.json"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            _start(
                [
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--no-dashboard",
                    "--scheduler-file",
                    str(sfile),
                    "--preload",
                    "_cluster_helpers",
                ],
                tmp / "scheduler.log",
            )
        )
        wait_for_file(sfile, procs)
        common = [
            "--scheduler-file",
            str(sfile),
            "--host",
            "127.0.0.1",
            "--nthreads",
            "1",
            "--no-dashboard",
            "--memory-limit",
            "1GB",
        ]
        for name, extra in (
            ("cpu-worker", ["--resources", "CPU=1"]),
            ("gpu-worker", ["--resources", "GPU=1"]),
        ):
            procs.append(
                _start(
                    [
                        "worker",
                        *common,
                        "--name",
                        name,
                        "--local-directory",
                        str(tmp / name),
                        *extra,
                    ],
                    tmp / f"{name}.log",
                )
            )
        with Client(scheduler_file=str(sfile), timeout="30s") as client:
            client.wait_for_workers(2, timeout=90)
            info = client.scheduler_info(n_workers=-1)
            workers = {w["name"]: a for a, w in info["workers"].items()}
            address = info["address"]
        yield SubprocessCluster(sfile, address, workers)
    finally:
        for p in reversed(procs):
            stop_dask(p)


@pytest.fixture
def shard_dir(tmp_path: Path, sample_path: Path) -> Path:
    """Six JSONL files of 40 documents each, cut from the shipped sample."""
    with gzip.open(sample_path, "rt", encoding="utf-8") as f:
        recs = [json.loads(next(f)) for _ in range(240)]
    src = tmp_path / "in"
    src.mkdir()
    for i in range(6):
        with open(src / f"shard-{i}.jsonl", "w") as f:
            for rec in recs[i * 40 : (i + 1) * 40]:
                f.write(json.dumps(rec) + "\n")
    return src
