"""Real clusters for the integration tests: a ``dask scheduler`` and two ``dask worker``
subprocesses on 127.0.0.1 (one advertising ``GPU=1``), started and killed here."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DASK = str(Path(sys.executable).with_name("dask"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # Subprocesses must import the helpers (tasks and the scheduler preload refer to them).
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    env["DASK_DISTRIBUTED__WORKER__DAEMON"] = "False"
    return env


def _start(args: list[str], log: Path) -> subprocess.Popen:
    out = open(log, "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [DASK, *args],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=_env(),
        start_new_session=True,
    )
    proc._curator_log = out  # type: ignore[attr-defined]
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    proc._curator_log.close()  # type: ignore[attr-defined]


def _wait_for_file(path: Path, procs: list[subprocess.Popen], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args} exited with {p.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout}s")
        time.sleep(0.1)


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
        _wait_for_file(sfile, procs)
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
            _stop(p)


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
