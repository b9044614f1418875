"""What a user sees when something they control is wrong: one or two lines, exit 1 or 2,
never a traceback (unless ``--debug``), never a hang.

Every case runs ``curator-dask`` as a subprocess, as a user does, with a time limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _audit import ROOT, audit, cli, doc_hash

HERE = Path(__file__).resolve().parent


def _spec(tmp: Path, paths: str, out: str, **extra: Any) -> Path:
    spec: dict[str, Any] = {
        "reader": {"class": "JsonlReader", "params": {"paths": paths}},
        "writer": {"class": "JsonlWriter", "params": {"path": out}},
        **extra,
    }
    f = tmp / "pipeline.yaml"
    f.write_text(yaml.safe_dump(spec))
    return f


def _docs(path: Path, n: int = 20, words: int = 5) -> list[dict[str, str]]:
    docs = [{"id": f"d{i}", "text": " ".join(["word"] * words) + f" {i}"} for i in range(n)]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return docs


def _user_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """The run failed with ``code``, said so in at most two lines naming ``needles``."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("curator-dask:")]
    assert proc.returncode == code, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert 1 <= len(lines) <= 2, proc.stderr
    text = "\n".join(lines)
    for needle in needles:
        assert needle in text, text
    return text


# -- inputs ---------------------------------------------------------------------------------
def test_missing_input_file(tmp_path: Path) -> None:
    f = _spec(tmp_path, str(tmp_path / "nothere.jsonl"), str(tmp_path / "out"))
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    _user_error(proc, 1, "nothere.jsonl", "check the path")


def test_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    f = _spec(tmp_path, str(tmp_path / "empty"), str(tmp_path / "out"))
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    _user_error(proc, 1, "empty", "holds no files ending in .jsonl")


def test_glob_without_match(tmp_path: Path) -> None:
    f = _spec(tmp_path, str(tmp_path / "x*.jsonl"), str(tmp_path / "out"))
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    _user_error(proc, 1, "no files match", "x*.jsonl")


def test_a_bad_pipeline_file_is_a_usage_error(tmp_path: Path) -> None:
    _docs(tmp_path / "in.jsonl")
    f = _spec(tmp_path, "in.jsonl", "out", config={"curator.io.blocksiz": "1MB"})
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    _user_error(proc, 2, "config.curator.io.blocksiz", "unknown setting")


def test_debug_prints_the_traceback(tmp_path: Path) -> None:
    f = _spec(tmp_path, str(tmp_path / "nothere.jsonl"), str(tmp_path / "out"))
    proc = cli(["run", str(f), "--sequential", "--debug"], cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr


def test_runtime_errors_of_other_kinds_are_short(tmp_path: Path) -> None:
    """Disk full and permission denied as the writer reports them (a real full disk or,
    as root, a real permission error cannot be made here; the writer's own errors are
    tested in tests/integration/test_faults_io.py)."""
    import errno as errno_mod

    from curator_dask.cli.failures import describe_error

    full = OSError(errno_mod.ENOSPC, "could not write /o/part-00001.jsonl: No space left")
    code, msg = describe_error(full)
    assert code == 1
    assert "/o/part-00001.jsonl" in msg
    assert "free space" in msg
    assert len(msg.splitlines()) == 2
    denied = PermissionError(errno_mod.EACCES, "could not write /o/part-00001.jsonl: denied")
    code, msg = describe_error(denied)
    assert code == 1
    assert "/o/part-00001.jsonl" in msg
    assert "permissions" in msg


# -- the pipeline file's config: section -------------------------------------------------
def test_config_section_applies_to_the_reader(tmp_path: Path) -> None:
    """``curator.io.max-document-bytes`` from the file quarantines the long document, in
    both the library loader and the CLI (it used to be set only after the reader was
    built, so the reader's default ignored it)."""
    long = {"id": "long", "text": "word " * 40}
    short = {"id": "short", "text": "one two three"}
    (tmp_path / "in.jsonl").write_text(json.dumps(long) + "\n" + json.dumps(short) + "\n")
    f = _spec(
        tmp_path,
        str(tmp_path / "in.jsonl"),
        str(tmp_path / "out"),
        config={"curator.io.max-document-bytes": 100, "curator.io.blocksize": "1KB"},
    )
    from curator_dask.cli.pipeline_file import load_run_config

    run = load_run_config(f)
    assert run.pipeline.reader.max_document_bytes == 100
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = audit(tmp_path / "out")
    got.balanced()
    assert [d["id"] for d in got.kept] == ["short"]
    assert len(got.quarantine) == 1
    assert "exceeds max_document_bytes=100" in got.quarantine[0]["reason"]


# -- clusters -------------------------------------------------------------------------------
@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield int(srv.getsockname()[1])
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


@pytest.fixture
def http_port() -> Iterator[int]:
    """An HTTP server, as a dashboard port is (it waits for a request, then answers)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N ..."
    port = int(line.split(" port ")[1].split()[0])
    yield port
    proc.terminate()
    proc.wait(10)


def _timed(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    proc = cli(args, cwd=cwd, timeout=90)
    return proc, time.monotonic() - start


@pytest.mark.parametrize("server", ["silent_port", "http_port"])
def test_a_port_that_is_not_a_scheduler_fails_within_the_timeout(
    tmp_path: Path, server: str, request: pytest.FixtureRequest
) -> None:
    port = request.getfixturevalue(server)
    _docs(tmp_path / "in.jsonl")
    f = _spec(tmp_path, "in.jsonl", "out")
    args = ["run", str(f), "--scheduler-address", f"tcp://127.0.0.1:{port}", "-q"]
    proc, took = _timed([*args, "--connect-timeout", "3s"], tmp_path)
    _user_error(proc, 1, f"127.0.0.1:{port}", "did not answer as a dask scheduler", "8786")
    assert took < 30  # 3 s + the start of a Python process


def test_the_default_timeout_is_at_most_30_seconds() -> None:
    from curator_dask.cluster import ClusterConfig, connect_timeout

    cfg = ClusterConfig.from_dask_config(kind="address", address="tcp://127.0.0.1:1")
    assert connect_timeout(cfg) <= 30


def test_a_missing_scheduler_file_fails_within_the_timeout(tmp_path: Path) -> None:
    _docs(tmp_path / "in.jsonl")
    f = _spec(tmp_path, "in.jsonl", "out")
    sfile = tmp_path / "nope.json"
    args = ["run", str(f), "--scheduler-file", str(sfile), "--connect-timeout", "2", "-q"]
    proc, took = _timed(args, tmp_path)
    _user_error(proc, 1, str(sfile), "does not exist", "dask scheduler --scheduler-file")
    assert took < 30


def test_zero_workers_is_a_usage_error(tmp_path: Path) -> None:
    _docs(tmp_path / "in.jsonl")
    f = _spec(tmp_path, "in.jsonl", "out")
    proc, took = _timed(["run", str(f), "--n-workers", "0", "-q"], tmp_path)
    _user_error(proc, 2, "--n-workers", "n_workers >= 1")
    assert took < 30


@pytest.mark.integration
@pytest.mark.parametrize("workers", ["threads", "processes"])
def test_a_failed_task_prints_the_one_line_error_without_the_workers_traceback(
    tmp_path: Path, workers: str
) -> None:
    """Issue 21 (7): a disk-full error raised in a task (in-process workers, and worker
    processes) prints the project's two lines, not distributed's ``Compute Failed ...
    Traceback`` block; ``--log-file`` keeps the block (in-process workers), ``-v`` shows
    the traceback."""
    _docs(tmp_path / "in.jsonl")
    cluster = {} if workers == "threads" else {"threads_below": None}
    f = _spec(
        tmp_path,
        str(tmp_path / "in.jsonl"),
        str(tmp_path / "out"),
        stages=[{"class": "_failing_stage:DiskFullStage"}],
        cluster=cluster,
    )
    log = tmp_path / "run.log"
    proc = cli(["run", str(f), "--log-file", str(log)], cwd=HERE, timeout=120)
    _user_error(proc, 1, "disk full", "/o/part-00000.jsonl")
    assert "Compute Failed" not in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    if workers == "threads":
        assert "Compute Failed" in log.read_text()
    loud = cli(["run", str(f), "-v"], cwd=HERE, timeout=120)
    assert loud.returncode == 1
    assert "Traceback" in loud.stderr


@pytest.mark.integration
def test_a_thousand_local_workers_are_capped_by_the_cores_with_a_notice(tmp_path: Path) -> None:
    """Issue 21 (6): ``--n-workers 1000`` on a local cluster of processes starts at most one
    worker per core (and per 512 MiB), says so in one line, and the run completes."""
    import psutil

    from curator_dask.cluster import _cpu_count

    docs = _docs(tmp_path / "in.jsonl")
    # a cluster of processes even for this small input (the threads-below shortcut off)
    f = _spec(tmp_path, "in.jsonl", "out", cluster={"threads_below": None})
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    err_file = tmp_path / "stderr.txt"
    with open(err_file, "w") as err:  # a file: a pipe nobody reads could fill up
        proc = subprocess.Popen(
            [sys.executable, "-m", "curator_dask.cli", "run", str(f), "--n-workers", "1000"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        most = 0
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 120
        try:
            while proc.poll() is None:
                assert time.monotonic() < deadline, "the run did not finish"
                with contextlib.suppress(psutil.Error):
                    most = max(most, len(parent.children(recursive=True)))
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                for child in parent.children(recursive=True):
                    child.kill()
                proc.kill()
                proc.wait()
    stderr = err_file.read_text()
    assert proc.returncode == 0, stderr[-2000:]
    cap = _cpu_count()
    notices = [x for x in stderr.splitlines() if "local workers asked for" in x]
    assert len(notices) == 1, stderr[-2000:]
    assert f"1000 local workers asked for; starting {cap} ({cap} cores" in notices[0]
    # each worker is a nanny and its worker process; a helper or two besides
    assert most <= 2 * cap + 2, most
    assert audit(tmp_path / "out").stats["kept"] == len(docs)


@pytest.mark.integration
def test_a_scheduler_without_workers_fails_within_the_timeout(tmp_path: Path) -> None:
    from _procs import start_dask, stop_dask, wait_for_file

    sfile = tmp_path / "scheduler.json"
    sched = start_dask(
        [
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(sfile),
        ],
        tmp_path / "scheduler.log",
    )
    try:
        wait_for_file(sfile, [sched])
        _docs(tmp_path / "in.jsonl")
        f = _spec(tmp_path, "in.jsonl", "out")
        args = ["run", str(f), "--scheduler-file", str(sfile), "--connect-timeout", "3", "-q"]
        proc, took = _timed(args, tmp_path)
        _user_error(proc, 1, "0 worker(s)", "dask worker")
        assert took < 30
    finally:
        stop_dask(sched)


# -- Ctrl-C -------------------------------------------------------------------------------
def test_ctrl_c_says_how_far_the_run_got_and_resume_finishes_it(tmp_path: Path) -> None:
    """SIGINT once two partitions are done; the message counts them; the rerun (mode
    resume) skips them and the output has every document once."""
    src = tmp_path / "in"
    src.mkdir()
    docs: list[dict[str, str]] = []
    for i in range(6):
        docs += [{"id": f"f{i}-{j}", "text": f"alpha beta gamma {i} {j}"} for j in range(5)]
        (src / f"f{i}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[-5:]))
    out = tmp_path / "out"
    spec = {
        "reader": {"class": "JsonlReader", "params": {"paths": str(src), "files_per_partition": 1}},
        "stages": [{"class": "_slow_stage:SlowStage", "params": {"seconds": 1.0}}],
        "writer": {"class": "JsonlWriter", "params": {"path": str(out), "mode": "resume"}},
    }
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(spec))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "curator_dask.cli", "run", str(f), "--sequential", "-q"]
    # Ctrl-C in a terminal: the default disposition. A test run started in the background
    # by a shell without job control (`bash .ci/run &`) ignores SIGINT, and so would the CLI
    # it starts; a batch job in the background is meant to, so the CLI keeps what it inherits.
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while len(list((Path(str(out) + ".curator") / "_stats").glob("part-*.json"))) < 2:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    finished = len(list((Path(str(out) + ".curator") / "_stats").glob("part-*.json")))
    lines = [ln for ln in err.splitlines() if ln.startswith("curator-dask:")]
    assert len(lines) == 2, err
    assert f"{finished} partition(s) finished" in lines[0]
    assert "run the same command again" in lines[1]
    assert not (Path(str(out) + ".curator") / "_SUCCESS").exists()
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"({finished} already done)" in again.stdout
    got = audit(out)
    got.balanced()
    assert sorted(got.hashes) == sorted(doc_hash(d["id"], d["text"]) for d in docs)
