"""Actionable warnings, on synthetic timelines and sizes."""

from __future__ import annotations

import doctest
import importlib
from typing import Any

import numpy as np
import pandas as pd
import pytest

from curator_dask.monitoring import (
    CuratorWarning,
    MemoryTimeline,
    check_partition_size,
    detect_unmanaged_growth,
    gpu_oom_message,
    is_gpu_oom,
    warn_gpu_oom,
)
from curator_dask.monitoring.timeline import timeline_frame

MIB, GIB = 2**20, 2**30


def test_partition_near_memory_limit_warns_with_blocksize() -> None:
    with pytest.warns(CuratorWarning, match=r"blocksize='256MiB'") as rec:
        got = check_partition_size(3 * GIB, 4 * GIB, blocksize=1 * GIB)
    assert got == "256MiB"  # 4 GiB * 0.5 / 2 / (3 GiB in memory per 1 GiB on disk) -> 341 MiB
    assert "3.0 GiB" in str(rec[0].message)
    assert "4.0 GiB" in str(rec[0].message)


def test_partition_size_counts_concurrent_tasks() -> None:
    assert check_partition_size(600 * MIB, 4 * GIB) is None  # one task: fits
    with pytest.warns(CuratorWarning, match="4 at a time per worker.*fewer threads"):
        got = check_partition_size(600 * MIB, 4 * GIB, tasks_per_worker=4)
    assert got == "256MiB"


@pytest.mark.parametrize("limit", [None, 0])
def test_partition_size_without_limit_checks_nothing(limit: Any) -> None:
    assert check_partition_size(100 * GIB, limit) is None


def test_suggested_blocksize_is_at_least_one_mib() -> None:
    with pytest.warns(CuratorWarning):
        assert check_partition_size(100 * MIB, 50 * MIB, blocksize=MIB) == "1MiB"


def _timeline(series: dict[str, list[float]], column: str = "unmanaged") -> pd.DataFrame:
    rows = []
    for worker, values in series.items():
        for i, v in enumerate(values):
            row = {"time": i * 1.0, "timestamp": pd.Timestamp(0, tz="UTC"), "worker": worker,
                   "rss": v + 100 * MIB}  # fmt: skip
            if column == "unmanaged":
                row.update(managed=100 * MIB, unmanaged=v)
            rows.append(row)
    return timeline_frame(rows)


def _noise(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 2 * MIB, n)


def test_leak_is_found() -> None:
    n = 30
    leak = list(300 * MIB + np.arange(n) * 20 * MIB + _noise(n))
    flat = list(300 * MIB + _noise(n, 1))
    with pytest.warns(CuratorWarning, match=r"(?s)leak.*tcp://a:1") as rec:
        found = detect_unmanaged_growth(_timeline({"tcp://a:1": leak, "tcp://b:1": flat}))
    assert [f.worker for f in found] == ["tcp://a:1"]
    assert found[0].growth_bytes == pytest.approx(29 * 20 * MIB, abs=10 * MIB)
    assert found[0].samples == n
    assert found[0].seconds == n - 1
    assert "tcp://b:1" not in str(rec[0].message)


@pytest.mark.parametrize(
    "shape",
    ["flat", "step", "sawtooth", "small", "short", "drop"],
)
def test_no_leak_reported(shape: str) -> None:
    n = 30
    base = 300 * MIB + _noise(n)
    series = {
        "flat": base,
        # a model loaded once: one step, then flat
        "step": base + np.where(np.arange(n) >= 5, 1 * GIB, 0),
        # memory freed after each partition
        "sawtooth": base + (np.arange(n) % 6) * 100 * MIB,
        # grows, but by less than min_growth_bytes
        "small": base + np.arange(n) * 5 * MIB,
        # too few samples to tell
        "short": (300 + np.arange(5) * 100) * MIB,
        # grows, then is released
        "drop": base + np.minimum(np.arange(n), 20) * 40 * MIB - np.where(
            np.arange(n) > 25, 600 * MIB, 0),
    }[shape]  # fmt: skip
    assert detect_unmanaged_growth(_timeline({"w": list(series)})) == []


def test_leak_found_from_rss_without_unmanaged() -> None:
    n = 20
    leak = list(200 * MIB + np.arange(n) * 30 * MIB + _noise(n))
    with pytest.warns(CuratorWarning):
        found = detect_unmanaged_growth(_timeline({"local": leak}, column="rss"))
    assert [f.worker for f in found] == ["local"]


def test_detect_accepts_a_timeline_object_and_can_stay_quiet() -> None:
    timeline = MemoryTimeline(gpu=False)
    timeline.sample()
    assert detect_unmanaged_growth(timeline, warn=False) == []
    frame = _timeline({"w": list(np.arange(10) * 100 * MIB)})
    found = detect_unmanaged_growth(frame, warn=False)  # no warning raised under -W error
    assert len(found) == 1


def test_gpu_oom_message_suggests_half_the_batch() -> None:
    msg = gpu_oom_message("QualityClassifier", 256, gpu_used_bytes=79 * GIB,
                          gpu_total_bytes=80 * GIB)  # fmt: skip
    assert msg.startswith("QualityClassifier: the GPU ran out of memory (GPU memory 79.0 GiB")
    assert "model_inference_batch_size=128 (now 256)" in msg
    assert "model_inference_batch_size=1 " in gpu_oom_message("S", 1)
    assert "halve it" in gpu_oom_message("S")
    with pytest.warns(CuratorWarning, match="model_inference_batch_size=32"):
        warn_gpu_oom("S", 64)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (MemoryError("std::bad_alloc: out_of_memory: RMM failure at: arena.hpp"), True),
        (type("OutOfMemoryError", (RuntimeError,), {})("boom"), True),
        (RuntimeError("cudaErrorMemoryAllocation: out of memory"), True),
        (ValueError("bad value"), False),
        (MemoryError(""), False),  # host memory: not a GPU OOM
    ],
)
def test_is_gpu_oom(exc: BaseException, expected: bool) -> None:
    assert is_gpu_oom(exc) is expected


@pytest.mark.parametrize("name", ["checks", "metrics", "report", "timeline"])
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"curator_dask.monitoring.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_a_run_too_short_to_tell_a_leak_from_a_warm_up_reports_nothing() -> None:
    n = 30
    ramp = _timeline({"w": list(300 * MIB + np.arange(n) * 20 * MIB + _noise(n))})
    # 4 partitions a worker: the ramp may be imports and kernels compiled on a busy machine
    assert detect_unmanaged_growth(ramp, partitions_per_worker=4) == []
    with pytest.warns(CuratorWarning, match="leak"):
        found = detect_unmanaged_growth(ramp, partitions_per_worker=40)
    assert [f.worker for f in found] == ["w"]
