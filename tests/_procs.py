"""Start and stop ``dask scheduler`` / ``dask worker`` processes for tests (127.0.0.1 only)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DASK = str(Path(sys.executable).with_name("dask"))


def start_dask(
    args: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen:
    """Run ``dask ARGS`` in its own process group (in directory ``cwd``), output to ``log``."""
    out = open(log, "wb")  # noqa: SIM115 - closed in stop_dask
    proc = subprocess.Popen(
        [DASK, *args],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    proc._curator_log = out  # type: ignore[attr-defined]
    return proc


def stop_dask(proc: subprocess.Popen) -> None:
    """Stop a process from :func:`start_dask` and its children: SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    proc._curator_log.close()  # type: ignore[attr-defined]


def wait_for_file(path: Path, procs: list[subprocess.Popen], timeout: float = 60) -> None:
    """Wait until ``path`` exists; fail early if one of ``procs`` exited."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args} exited with {p.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout}s")
        time.sleep(0.1)
