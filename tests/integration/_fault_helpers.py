"""Stages, writers and checks for the fault tests (imported by worker subprocesses too).

- :class:`RowLimit` raises ``MemoryError`` on partitions above a row count, and
  :class:`MemoryHog` really allocates memory in proportion to its partition, so a worker
  with a small ``--memory-limit`` is killed by its nanny: the out-of-memory split tests;
- :class:`FailingJsonlWriter` writes half a file and then fails with a chosen ``errno``
  (disk full, permission denied): what a full disk does in the middle of a write;
- :func:`tree_digest`, :func:`tree_bytes`, :func:`incomplete_jsonl`: the checks.
"""

from __future__ import annotations

import errno as errno_mod
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from curator_dask import Modifier, ProcessingStage
from curator_dask.io import JsonlWriter


@dataclass(kw_only=True)
class RowLimit(ProcessingStage):
    """Pass rows through; raise MemoryError on a partition of more than ``max_rows`` rows."""

    max_rows: int | None = None

    def process(self, part: Any) -> Any:
        if self.max_rows is not None and len(part) > self.max_rows:
            raise MemoryError(f"{len(part)} rows do not fit (at most {self.max_rows})")
        return part


@dataclass(kw_only=True)
class MemoryHog(ProcessingStage):
    """Pass rows through after touching ``len(part) / fits_rows`` x the worker's headroom.

    The headroom is what the worker may still use before its nanny terminates it
    (``distributed.worker.memory.terminate`` x memory limit, minus the process's RSS now),
    so a partition of more than ``fits_rows`` rows kills the worker whatever its baseline
    memory, and one of fewer than ``fits_rows / 2`` rows uses at most half the headroom.
    """

    fits_rows: int = 10

    def process(self, part: Any) -> Any:
        import dask
        import psutil
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
        terminate = dask.config.get("distributed.worker.memory.terminate")
        headroom = terminate * limit - psutil.Process().memory_info().rss
        nbytes = int(max(headroom, 0) * len(part) / self.fits_rows)
        block = np.ones(nbytes // 8, dtype=np.float64)  # touches every page
        time.sleep(0.5)  # the nanny polls memory every 100 ms
        del block
        return part


@dataclass(kw_only=True)
class SlowCopy(Modifier):
    """Sleeps per partition, so a run lasts long enough to be killed in the middle."""

    seconds: float = 0.3

    def modify(self, text: pd.Series) -> pd.Series:
        time.sleep(self.seconds)
        return text


@dataclass
class FailingJsonlWriter(JsonlWriter):
    """Writes the first half of a partition's bytes, then fails like a full disk would."""

    errno: int = errno_mod.ENOSPC

    def _encode(self, part: Any, f: Any) -> None:
        from curator_dask.io.writers import encode_jsonl

        data = encode_jsonl(part)
        f.write(data[: len(data) // 2])
        f.flush()
        raise OSError(self.errno, os.strerror(self.errno))


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (relative path -> digest)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


_RUN_RECORDS = tuple(
    f".curator/{n}" for n in ("_stats", "_SUCCESS", "_timeline", "_report", "_runs")
)


def tree_bytes(root: Path, skip: tuple[str, ...] = _RUN_RECORDS) -> dict[str, bytes]:
    """Bytes of every output file and of its metadata folder beside it (``.curator/<name>``),
    without the run's records (statistics hold timings, the memory timeline exists only on a
    cluster)."""
    meta = Path(str(root) + ".curator")
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*"))}
    if meta.is_dir():
        files.update({f".curator/{p.relative_to(meta)}": p for p in sorted(meta.rglob("*"))})
    return {
        name: p.read_bytes()
        for name, p in sorted(files.items())
        if p.is_file() and not name.startswith(skip)
    }


def incomplete_jsonl(path: Path) -> str | None:
    """Why ``path`` is not a complete JSONL file (None when it is, or vanished meanwhile)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if data and not data.endswith(b"\n"):
        return "does not end with a newline"
    for n, line in enumerate(data.splitlines(), 1):
        try:
            json.loads(line)
        except ValueError as e:
            return f"line {n} is not JSON: {e}"
    return None


# -- a scheduler and workers as subprocesses, with chosen settings ------------------------------
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def subprocess_env(**dask_config: str) -> dict[str, str]:
    """The environment of cluster and client subprocesses (``DASK_...`` settings added)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    env["DASK_DISTRIBUTED__WORKER__DAEMON"] = "False"
    env.update(dask_config)
    return env


class Cluster:
    """``dask scheduler`` + ``dask worker`` subprocesses on 127.0.0.1; use as a context."""

    def __init__(
        self,
        tmp: Path,
        n_workers: int = 1,
        worker_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = tmp
        self.n_workers = n_workers
        self.worker_args = worker_args
        self.env = env or subprocess_env()
        self.scheduler_file = tmp / "scheduler.json"
        self.procs: list[Any] = []
        tmp.mkdir(parents=True, exist_ok=True)

    def _start(self, args: list[str], log: str) -> None:
        import subprocess
        import sys

        out = open(self.tmp / log, "wb")  # noqa: SIM115 - closed in __exit__
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("dask")), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )
        proc._log = out  # type: ignore[attr-defined]
        self.procs.append(proc)

    def __enter__(self) -> Cluster:
        from distributed import Client

        try:
            self._start(
                [
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--no-dashboard",
                    "--scheduler-file",
                    str(self.scheduler_file),
                ],
                "scheduler.log",
            )
            deadline = time.monotonic() + 60
            while not self.scheduler_file.exists():
                if time.monotonic() > deadline or self.procs[0].poll() is not None:
                    raise RuntimeError("the scheduler did not start")
                time.sleep(0.1)
            for n in range(self.n_workers):
                self._start(
                    [
                        "worker",
                        "--scheduler-file",
                        str(self.scheduler_file),
                        "--host",
                        "127.0.0.1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--name",
                        f"w{n}",
                        "--local-directory",
                        str(self.tmp / f"w{n}"),
                        *self.worker_args,
                    ],
                    f"worker-{n}.log",
                )
            with Client(scheduler_file=str(self.scheduler_file), timeout="30s") as client:
                client.wait_for_workers(self.n_workers, timeout=90)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        import contextlib
        import signal
        import subprocess

        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=15)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
            proc._log.close()
        self.procs.clear()


class PartialFileWatch:
    """A thread that lists ``out`` every few ms while a run goes on, and reads every final
    ``part-*.jsonl`` name it sees (when new or changed): each must be a complete file."""

    def __init__(self, out: Path, interval: float = 0.02) -> None:
        import threading

        self.out = out
        self.interval = interval
        self.problems: list[str] = []
        self.checked = 0
        self._seen: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PartialFileWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._scan()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._scan()

    def _scan(self) -> None:
        for path in sorted(self.out.glob("part-*.jsonl")):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            sig = (st.st_mtime_ns, st.st_size)
            if self._seen.get(path.name) == sig:
                continue
            self._seen[path.name] = sig
            self.checked += 1
            problem = incomplete_jsonl(path)
            if problem is not None:
                self.problems.append(f"{path.name}: {problem}")


def slow_partition(part: pd.DataFrame, seconds: float = 0.3) -> pd.DataFrame:
    """``map_partitions`` function: a slow identity, so a dedup step lasts long enough."""
    time.sleep(seconds)
    return part
