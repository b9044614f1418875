"""A real cluster for the reliability cases that need one: ``dask scheduler`` and two
``dask worker`` subprocesses on 127.0.0.1, each worker with its own directory."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _procs import start_dask, stop_dask, wait_for_file

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@pytest.fixture(scope="module")
def scheduler_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The scheduler file of a running scheduler with two single-thread workers."""
    from distributed import Client

    tmp = tmp_path_factory.mktemp("cluster")
    sfile = tmp / "scheduler.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    env["DASK_DISTRIBUTED__WORKER__DAEMON"] = "False"
    procs: list[subprocess.Popen] = []
    try:
        args = ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"]
        procs.append(start_dask([*args, "--scheduler-file", str(sfile)], tmp / "s.log", env))
        wait_for_file(sfile, procs)
        for i in range(2):
            (tmp / f"w{i}").mkdir()
            worker = ["worker", "--scheduler-file", str(sfile), "--host", "127.0.0.1"]
            worker += ["--nthreads", "1", "--no-dashboard", "--memory-limit", "1GB"]
            worker += ["--local-directory", str(tmp / f"w{i}")]
            procs.append(start_dask(worker, tmp / f"w{i}.log", env))
        with Client(scheduler_file=str(sfile), timeout="30s") as client:
            client.wait_for_workers(2, timeout=90)
        yield sfile
    finally:
        for p in reversed(procs):
            stop_dask(p)
