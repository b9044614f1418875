"""Fixtures for the monitoring tests: a small in-process cluster and a synthetic run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from curator_dask.monitoring.timeline import timeline_frame

GIB = 2**30


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A two-worker in-process cluster (threads, no nanny)."""
    from distributed import Client, LocalCluster

    # In-process workers measure the whole pytest process, which late in a full run is larger
    # than a small limit's spill threshold: they would spill every test array at once. A large
    # limit keeps the thresholds (and so the spill metrics) but out of reach.
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            memory_limit="8GB",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


STAGES = [
    ("JsonlReader", 1000, 990, 10, 0, 2.0),
    ("WordCountFilter", 990, 800, 0, 190, 0.5),
    ("ExactDuplicateFilter", 800, 700, 0, 100, 1.5),
    ("JsonlWriter", 700, 700, 0, 0, 0.4),
]


def make_stats(name: str = "synthetic-run") -> dict[str, Any]:
    """A ``_stats.json`` dict in the pipeline's schema (4 stages, balanced)."""
    stages = [
        {
            "name": n,
            "docs_in": i,
            "docs_out": o,
            "quarantined": q,
            "removed": r,
            "seconds": s,
            "partitions": 4,
            "extra": {},
        }
        for n, i, o, q, r, s in STAGES
    ]
    return {
        "pipeline": name,
        "stages": stages,
        "read": 1000,
        "kept": 700,
        "removed": 290,
        "quarantined": 10,
        "wall_seconds": 3.2,
    }


def make_timeline(
    n: int = 40, workers: int = 2, leak_worker: int | None = None, gpu: bool = True
) -> pd.DataFrame:
    """A timeline frame: ``workers`` workers (one leaking if asked) and one GPU."""
    rng = np.random.default_rng(0)
    rows = []
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    for i in range(n):
        t = i * 0.5
        for w in range(workers):
            managed = 0.2 * GIB * (1 + np.sin(t / 3 + w))
            unmanaged = 0.3 * GIB + rng.normal(0, 2**20)
            if w == leak_worker:
                unmanaged += i * 0.02 * GIB
            rows.append(
                {
                    "time": t,
                    "timestamp": t0 + pd.Timedelta(seconds=t),
                    "worker": f"tcp://127.0.0.1:{4000 + w}",
                    "rss": managed + unmanaged,
                    "managed": managed,
                    "unmanaged": unmanaged,
                    "spilled": 0.05 * GIB if 10 < i < 20 else 0.0,
                    "memory_limit": 4 * GIB,
                    "gpu_used": np.nan,
                    "gpu_total": np.nan,
                }
            )
        if gpu:
            rows.append(
                {
                    "time": t,
                    "timestamp": t0 + pd.Timedelta(seconds=t),
                    "worker": "gpu:0",
                    "rss": np.nan,
                    "managed": np.nan,
                    "unmanaged": np.nan,
                    "spilled": np.nan,
                    "memory_limit": np.nan,
                    "gpu_used": (1 + 10 * (15 < i < 30)) * GIB,
                    "gpu_total": 16 * GIB,
                }
            )
    return timeline_frame(rows)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished run's output directory: _stats.json and _SUCCESS, no report yet."""
    d = tmp_path / "out"
    d.mkdir()
    (d / "_stats.json").write_text(json.dumps(make_stats()))
    (d / "_SUCCESS").write_text("{}")
    return d


@pytest.fixture
def synthetic_stats() -> Any:
    """The :func:`make_stats` factory."""
    return make_stats


@pytest.fixture
def synthetic_timeline() -> Any:
    """The :func:`make_timeline` factory."""
    return make_timeline
