"""Shared fixtures and the ``gpu`` and ``c_compiler`` markers' auto-skips."""

from __future__ import annotations

import gzip
import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "curator_dask" / "data" / "sample.jsonl.gz"
SAMPLE_TRUTH = ROOT / "tests" / "data" / "sample_truth"


def _cuda_available() -> bool:
    if os.environ.get("CURATOR_DASK_FORCE_NO_GPU"):
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        pass
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from curator_dask._ckernels import compiler

    missing = {}
    if not _cuda_available():
        missing["gpu"] = "needs a CUDA GPU (none found)"
    if compiler() is None:
        missing["c_compiler"] = (
            "needs a C compiler ($CC, cc, gcc or clang on PATH; none found) to build the C "
            "kernels; numba's kernels, which run without one, are tested by the rest"
        )
    for item in items:
        for marker, reason in missing.items():
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def sample_path() -> Path:
    """The 4,000-document sample corpus shipped with the package."""
    return SAMPLE


@pytest.fixture(scope="session")
def sample_records() -> list[dict]:
    """The shipped sample as a list of dicts."""
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="session")
def sample_truth_clusters() -> list[list[str]]:
    """Near-duplicate clusters (word 5-grams, Jaccard >= 0.8) of the shipped sample."""
    with gzip.open(SAMPLE_TRUTH / "clusters.jsonl.gz", "rt") as f:
        return [json.loads(line)["ids"] for line in f]


@pytest.fixture(scope="session")
def sample_truth_exact_groups() -> list[list[str]]:
    """Groups of byte-identical texts in the shipped sample."""
    with gzip.open(SAMPLE_TRUTH / "exact_groups.jsonl.gz", "rt") as f:
        return [json.loads(line)["ids"] for line in f]


def score_removed(removed: set[str], clusters: list[list[str]]) -> dict[str, float]:
    """Score removed ids against truth clusters (the rule of the shared corpus README)."""
    cluster_of = {i: c for c, ids in enumerate(clusters) for i in ids}
    per: dict[int, int] = {}
    wrong = 0
    for r in removed:
        c = cluster_of.get(r)
        if c is None:
            wrong += 1
        else:
            per[c] = per.get(c, 0) + 1
    correct = sum(min(k, len(clusters[c]) - 1) for c, k in per.items())
    target = sum(len(c) - 1 for c in clusters)
    return {
        "removed": len(removed),
        "correct": correct,
        "outside_truth": wrong,
        "precision": correct / len(removed) if removed else 0.0,
        "recall": correct / target if target else 0.0,
    }


# -- a local S3 endpoint (moto's server), for the io and reliability tests ------------------
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
