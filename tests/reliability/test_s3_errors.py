"""Object storage (a local moto S3 server): the output is audited as on a disk, a missing
bucket is an error and is never created, and an ``s3://`` output leaves nothing local."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from _audit import audit, cli, doc_hash

pytestmark = pytest.mark.integration


def _fs(options: dict[str, Any]) -> Any:
    import s3fs

    return s3fs.S3FileSystem(**options)


def _spec(src: str, out: str, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "reader": {"class": "JsonlReader", "params": {"paths": src, "storage_options": options}},
        "stages": [{"class": "WordCountFilter", "params": {"min_words": 3}}],
        "writer": {"class": "JsonlWriter", "params": {"path": out, "storage_options": options}},
    }


def _input(bucket: str, options: dict[str, Any]) -> list[dict[str, str]]:
    docs = [{"id": f"d{i}", "text": "one two three " * (i % 3) + f"n{i}"} for i in range(30)]
    body = "".join(json.dumps(d) + "\n" for d in docs) + "{broken\n"
    _fs(options).pipe(f"{bucket}/in/a.jsonl", body.encode())
    return docs


def test_s3_in_s3_out_every_document_accounted_for_and_nothing_local(
    tmp_path: Path, s3_bucket: tuple[str, dict[str, Any]]
) -> None:
    bucket, options = s3_bucket
    docs = _input(bucket, options)
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(_spec(f"{bucket}/in", f"{bucket}/out", options)))
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]  # no ./s3:/...
    local = tmp_path / "copy"
    _fs(options).get(f"{bucket}/out/", str(local), recursive=True)
    _fs(options).get(f"{bucket}/out.curator/", str(local) + ".curator", recursive=True)
    got = audit(local)
    got.balanced()
    kept = {doc_hash(d["id"], d["text"]) for d in docs if len(d["text"].split()) >= 3}
    assert set(got.hashes) == kept
    assert [q["raw"] for q in got.quarantine] == ["{broken"]
    assert got.stats["read"] == len(docs) + 1


def test_a_missing_output_bucket_is_an_error_and_is_not_created(
    tmp_path: Path, s3_bucket: tuple[str, dict[str, Any]]
) -> None:
    bucket, options = s3_bucket
    _input(bucket, options)
    missing = bucket.replace("test-", "absent-")
    fs = _fs(options)
    from curator_dask.executor import SequentialExecutor
    from curator_dask.io import JsonlReader, JsonlWriter
    from curator_dask.pipeline import Pipeline

    pipeline = Pipeline(
        "s3",
        [
            JsonlReader(f"{bucket}/in", storage_options=options),
            JsonlWriter(f"{missing}/out", storage_options=options),
        ],
    )
    with pytest.raises(FileNotFoundError, match=missing.removeprefix("s3://")):
        pipeline.run(SequentialExecutor())
    assert not fs.exists(missing.removeprefix("s3://"))
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(_spec(f"{bucket}/in", f"{missing}/out", options)))
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("curator-dask:")]
    assert len(lines) in (1, 2)
    assert missing.removeprefix("s3://") in lines[0]
    assert "never creates buckets" in lines[0]
    fs.invalidate_cache()
    assert not fs.exists(missing.removeprefix("s3://"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


def test_a_missing_input_bucket_names_it(
    tmp_path: Path, s3_bucket: tuple[str, dict[str, Any]]
) -> None:
    bucket, options = s3_bucket
    missing = bucket.replace("test-", "gone-")
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(_spec(f"{missing}/in", f"{bucket}/out", options)))
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("curator-dask:")]
    assert 1 <= len(lines) <= 2
    assert missing.removeprefix("s3://") in lines[0]


def test_refused_credentials_are_one_clear_message() -> None:
    """What s3fs raises for a bad key (moto accepts any key, so the error is built here)."""
    from botocore.exceptions import ClientError, NoCredentialsError

    from curator_dask.cli.failures import describe_error

    code, msg = describe_error(NoCredentialsError())
    assert code == 1
    assert "AWS_ACCESS_KEY_ID" in msg
    denied = ClientError(
        {"Error": {"Code": "InvalidAccessKeyId", "Message": "The key does not exist"}},
        "ListObjectsV2",
    )
    code, msg = describe_error(denied)
    assert code == 1
    assert "InvalidAccessKeyId" in msg
    assert "credentials" in msg
    assert len(msg.splitlines()) == 2
    code, msg = describe_error(PermissionError("Access Denied: s3://b/out/part-00000.jsonl"))
    assert "s3://b/out/part-00000.jsonl" in msg
    assert "credentials" in msg


@pytest.fixture
def strict_s3(tmp_path: Path) -> Any:
    """A moto server that checks credentials (it knows none, so every key is refused)."""
    import os
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0")
    log = open(tmp_path / "moto.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.2)
    yield {"key": "nobody", "secret": "wrong", "endpoint_url": f"http://127.0.0.1:{port}"}
    proc.terminate()
    proc.wait(10)
    log.close()


def test_refused_credentials_name_the_path(tmp_path: Path, strict_s3: dict[str, Any]) -> None:
    spec = _spec("s3://data/in", str(tmp_path / "out"), strict_s3)
    spec["writer"]["params"].pop("storage_options")
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(spec))
    proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("curator-dask:")]
    assert len(lines) == 2, proc.stderr
    assert "s3://data/in" in lines[0]
    assert "refused" in lines[0]
    assert "credentials" in lines[1]


def _through_proxy(
    bucket: str, options: dict[str, Any], every: int, reset_every: int
) -> tuple[Any, dict[str, Any]]:
    from _flaky_s3 import FlakyProxy

    proxy = FlakyProxy(options["endpoint_url"], every=every, reset_every=reset_every)
    return proxy, {**options, "endpoint_url": proxy.start()}


def test_throttling_and_connection_resets_are_retried_and_nothing_is_lost(
    tmp_path: Path, s3_bucket: tuple[str, dict[str, Any]]
) -> None:
    """Issue 21 (9): every 3rd request answered ``503 SlowDown``, every 7th connection
    reset, by a proxy in front of the moto server; the run retries with backoff (s3fs and
    botocore) and its output, read back, holds every document once."""
    bucket, options = s3_bucket
    docs = _input(bucket, options)
    proxy, flaky = _through_proxy(bucket, options, every=3, reset_every=7)
    try:
        f = tmp_path / "p.yaml"
        f.write_text(yaml.safe_dump(_spec(f"{bucket}/in", f"{bucket}/out", flaky)))
        proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path, timeout=300)
    finally:
        proxy.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proxy.injected["slowdown"] > 0
    assert proxy.injected["reset"] > 0
    local = tmp_path / "copy"
    _fs(options).get(f"{bucket}/out/", str(local), recursive=True)
    _fs(options).get(f"{bucket}/out.curator/", str(local) + ".curator", recursive=True)
    got = audit(local)
    got.balanced()
    kept = {doc_hash(d["id"], d["text"]) for d in docs if len(d["text"].split()) >= 3}
    assert set(got.hashes) == kept
    assert got.stats["read"] == len(docs) + 1


def test_throttling_that_does_not_stop_is_a_clear_error(
    tmp_path: Path, s3_bucket: tuple[str, dict[str, Any]]
) -> None:
    """Issue 21 (9): every request throttled: exit 1 after the retries, two lines naming
    the location and what to do, no traceback, nothing written."""
    bucket, options = s3_bucket
    _input(bucket, options)
    proxy, flaky = _through_proxy(bucket, options, every=1, reset_every=0)
    try:
        f = tmp_path / "p.yaml"
        f.write_text(yaml.safe_dump(_spec(f"{bucket}/in", f"{bucket}/out", flaky)))
        proc = cli(["run", str(f), "--sequential", "-q"], cwd=tmp_path, timeout=300)
    finally:
        proxy.stop()
    assert proc.returncode == 1
    assert proxy.injected["slowdown"] >= 2  # it was retried
    lines = [x for x in proc.stderr.splitlines() if x.startswith("curator-dask:")]
    assert len(lines) == 2, proc.stderr[-2000:]
    assert "kept throttling the requests (SlowDown) after its retries" in lines[0]
    assert f"{bucket}/in" in lines[0]
    assert "run again later" in lines[1]
    assert "Traceback" not in proc.stderr
    assert not _fs(options).exists(f"{bucket.removeprefix('s3://')}/out")
