"""Fixtures of the io tests: a local S3 endpoint (moto's server) for the integration tests."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, Any]]:
    """A moto S3 server on 127.0.0.1, for the whole session; yields fsspec storage_options."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": f"http://127.0.0.1:{port}",
    }
    try:
        yield options
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A fresh bucket: returns ``("s3://<bucket>", storage_options)``."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3_server)
    name = f"test-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    return f"s3://{name}", s3_server
