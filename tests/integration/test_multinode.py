"""The README's batch commands on a real multi-process cluster, as a user runs them.

A ``dask scheduler`` and three ``dask worker`` processes, each started in a directory of its
own (as on a real cluster, where no worker shares the client's working directory), run
``curator-dask run``, ``exact-dedup`` and ``fuzzy-dedup`` unchanged, with paths given relatively
(relative to where the command runs) and with inputs and outputs on a local S3 endpoint
(moto). The outputs, read back with pandas, equal those of a single-process run.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _procs import start_dask, stop_dask, wait_for_file

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
N_WORKERS = 3


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["DASK_DISTRIBUTED__WORKER__DAEMON"] = "False"
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    """A moto S3 server the worker processes reach on 127.0.0.1; yields storage_options."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield {
            "key": "testing",
            "secret": "testing",
            "endpoint_url": f"http://127.0.0.1:{port}",
        }
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Scheduler and three workers, each in its own working directory; yields the
    scheduler file."""
    from distributed import Client

    tmp = tmp_path_factory.mktemp("multinode")
    sfile = tmp / "scheduler" / "scheduler.json"
    procs: list[subprocess.Popen] = []
    env = _env()
    try:
        (tmp / "scheduler").mkdir()
        procs.append(
            start_dask(
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
                tmp / "scheduler.log",
                env=env,
                cwd=tmp / "scheduler",
            )
        )
        wait_for_file(sfile, procs)
        for i in range(N_WORKERS):
            home = tmp / f"worker-{i}"
            home.mkdir()
            procs.append(
                start_dask(
                    [
                        "worker",
                        "--scheduler-file",
                        str(sfile),
                        "--host",
                        "127.0.0.1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--memory-limit",
                        "1GB",
                        "--name",
                        f"w{i}",
                        "--local-directory",
                        "scratch",
                    ],
                    tmp / f"worker-{i}.log",
                    env=env,
                    cwd=home,
                )
            )
        with Client(scheduler_file=str(sfile), timeout="30s") as client:
            client.wait_for_workers(N_WORKERS, timeout=120)
        yield sfile
    finally:
        for p in reversed(procs):
            stop_dask(p)
    for i in range(N_WORKERS):  # nothing was written relative to a worker's directory
        left = sorted(p.name for p in (tmp / f"worker-{i}").iterdir())
        assert left == ["scratch"], left


@pytest.fixture(scope="module")
def corpus(sample_records: list[dict]) -> list[dict]:
    """300 documents from the sample, with exact duplicates and a broken record."""
    recs = sample_records[:300]
    return [*recs, *recs[:20]]


def _write_input(folder: Path, recs: list[dict]) -> None:
    folder.mkdir(parents=True)
    half = len(recs) // 2
    (folder / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs[:half]))
    with gzip.open(folder / "b.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs[half:]))
        f.write('{"id": "broken", "text": \n')


PIPELINE = """\
name: clean
reader: {{class: JsonlReader, params: {{paths: {inp}, blocksize: 64kB{so}}}}}
stages:
  - class: UnicodeNormalizer
  - {{class: WordCountFilter, params: {{min_words: 50}}, resources: {{cpus: 1}}}}
writer: {{class: ParquetWriter, params: {{path: {out}, mode: resume{so}}}}}
"""


# the README's fuzzy-dedup command, unchanged but for the cluster flag
FUZZY = [
    "fuzzy-dedup",
    "data/",
    "--output",
    "out-fuzzy/",
    "--cache-dir",
    "cache/",
    "--word-ngrams",
    "5",
    "--false-positive-check",
]


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "curator_dask.cli", *args]
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.sort_values("id").reset_index(drop=True)
    return frame[sorted(frame.columns)].astype(str)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory, corpus: list[dict]) -> Path:
    """The single-process run of the same commands (the reference)."""
    home = tmp_path_factory.mktemp("single")
    _write_input(home / "data", corpus)
    (home / "pipeline.yaml").write_text(PIPELINE.format(inp="data/", out="out/clean", so=""))
    _cli(["run", "pipeline.yaml", "--n-workers", "1", "--threads-per-worker", "1"], home)
    _cli(["exact-dedup", "data/", "--output", "out-exact/", "--n-workers", "1"], home)
    _cli([*FUZZY, "--n-workers", "1"], home)
    return home


def test_readme_commands_with_relative_local_paths(
    cluster: Path, single: Path, tmp_path: Path, corpus: list[dict]
) -> None:
    home = tmp_path / "client"
    _write_input(home / "data", corpus)
    (home / "pipeline.yaml").write_text(PIPELINE.format(inp="data/", out="out/clean", so=""))
    sfile = os.path.relpath(cluster, home)
    _cli(["run", "pipeline.yaml", "--scheduler-file", sfile], home)
    _cli(["exact-dedup", "data/", "--output", "out-exact/", "--scheduler-file", sfile], home)
    _cli([*FUZZY, "--scheduler-file", sfile], home)

    got, want = pd.read_parquet(home / "out" / "clean"), pd.read_parquet(single / "out" / "clean")
    assert len(got) > 0
    pd.testing.assert_frame_equal(_canonical(got), _canonical(want))
    stats = json.loads((Path(str(home / "out" / "clean") + ".curator") / "_stats.json").read_text())
    ref = json.loads((Path(str(single / "out" / "clean") + ".curator") / "_stats.json").read_text())
    for key in ("read", "kept", "removed", "quarantined"):
        assert stats[key] == ref[key], key
    assert stats["quarantined"] == 1
    removed = pd.read_parquet(home / "out-exact" / "removed_ids")
    ref_removed = pd.read_parquet(single / "out-exact" / "removed_ids")
    assert sorted(removed["id"]) == sorted(ref_removed["id"])
    assert len(removed) >= 20  # the 20 copies, and any duplicates the sample holds
    fuzzy = pd.read_parquet(home / "out-fuzzy" / "removed_ids")
    ref_fuzzy = pd.read_parquet(single / "out-fuzzy" / "removed_ids")
    assert sorted(fuzzy["id"]) == sorted(ref_fuzzy["id"])
    assert len(fuzzy) >= 20
    assert not (home.parent / "cache").exists()  # the cache is where the command ran
    assert (home / "cache").is_dir()


def test_readme_run_with_inputs_and_outputs_on_s3(
    cluster: Path, single: Path, tmp_path: Path, s3: dict[str, Any], corpus: list[dict]
) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(**s3)
    fs.mkdir("bucket")
    local = tmp_path / "upload"
    _write_input(local / "data", corpus)
    for name in ("a.jsonl", "b.jsonl.gz"):
        fs.put_file(str(local / "data" / name), f"bucket/data/{name}")
    home = tmp_path / "client"
    home.mkdir()
    so = f", storage_options: {json.dumps(s3)}"
    (home / "pipeline.yaml").write_text(
        PIPELINE.format(inp="s3://bucket/data/", out="s3://bucket/out/clean", so=so)
    )
    _cli(["run", "pipeline.yaml", "--scheduler-file", str(cluster)], home)
    assert sorted(p.name for p in home.iterdir()) == ["pipeline.yaml"]  # no local ./s3:/...
    got = pd.read_parquet("s3://bucket/out/clean", storage_options=s3)
    want = pd.read_parquet(single / "out" / "clean")
    pd.testing.assert_frame_equal(_canonical(got), _canonical(want))
    stats = json.loads(fs.cat_file("bucket/out/clean.curator/_stats.json"))
    assert (stats["read"], stats["quarantined"]) == (len(corpus) + 1, 1)
