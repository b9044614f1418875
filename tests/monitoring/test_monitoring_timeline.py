"""MemoryTimeline against the local process tree and a real in-process cluster."""

from __future__ import annotations

import math
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from curator_dask.monitoring import MemoryTimeline, read_timeline
from curator_dask.monitoring.timeline import TIMELINE_COLUMNS

MIB = 2**20


def test_local_process_rss_follows_allocation() -> None:
    with MemoryTimeline(interval_s=0.05, gpu=False) as timeline:
        before = len(timeline)
        block = np.ones(96 * MIB // 8)  # 96 MiB, touched so it is resident
        timeline.sample()
        now = timeline.frame()
        held = now.loc[now["worker"] == "local", "rss"].iloc[-1]
        del block
        time.sleep(0.15)
    # other tests' long-lived child processes (schedulers, workers) may appear as pid:N rows
    frame = timeline.frame()
    frame = frame[frame["worker"] == "local"].reset_index(drop=True)
    assert before >= 1  # the sample taken at start (the thread may have added one already)
    assert list(frame.columns) == list(TIMELINE_COLUMNS)
    assert set(frame["worker"]) == {"local"}
    assert frame["time"].is_monotonic_increasing
    assert frame["time"].iloc[0] == pytest.approx(0, abs=0.05)
    assert len(frame) >= 4  # start, explicit, >= 1 from the thread, stop
    assert held - frame["rss"].iloc[0] >= 80 * MIB
    # without dask there is no managed memory to tell apart
    assert frame["managed"].isna().all()
    assert frame["unmanaged"].isna().all()
    assert not timeline.running
    assert timeline.errors == 0


def test_local_process_tree_includes_children() -> None:
    # The child says when its interpreter is up: sampled just after the fork, on a busy
    # machine, it may not have loaded Python yet (a few hundred kB).
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "up\n"
        timeline = MemoryTimeline(gpu=False)
        timeline.sample()
        frame = timeline.frame()
    finally:
        child.kill()
        child.wait()
    row = frame[frame["worker"] == f"pid:{child.pid}"]
    assert len(row) == 1
    assert row["rss"].iloc[0] > MIB


def test_write_and_read_back(tmp_path: Path) -> None:
    timeline = MemoryTimeline(gpu=False)
    timeline.sample()
    timeline.sample()
    frame = timeline.frame()
    for name in ("t.parquet", "t.json"):
        back = read_timeline(timeline.write(tmp_path / name))
        pd.testing.assert_frame_equal(back, frame, check_exact=False)


def test_cluster_workers_managed_and_limit(client: Any) -> None:
    workers = set(client.scheduler_info()["workers"])
    data = client.submit(np.ones, 8 * MIB, pure=False, workers=[sorted(workers)[0]])
    data.result()
    with MemoryTimeline(client, interval_s=0.1, gpu=False) as timeline:
        deadline = time.monotonic() + 10
        # managed bytes reach the scheduler with the next worker heartbeat
        while time.monotonic() < deadline and not (timeline.frame()["managed"] >= 60 * MIB).any():
            time.sleep(0.1)
    frame = timeline.frame()
    del data
    assert set(frame["worker"]) == workers
    assert (frame["memory_limit"] == 8e9).all()
    assert (frame["rss"] > 0).all()
    assert (frame["managed"] <= frame["rss"]).all()
    np.testing.assert_allclose(frame["unmanaged"], frame["rss"] - frame["managed"])
    holder = frame[frame["worker"] == sorted(workers)[0]]
    assert holder["managed"].max() >= 64 * MIB  # the 64 MiB array is managed memory
    assert (frame["spilled"] == 0).all()
    assert timeline.errors == 0


def test_cluster_spill_is_recorded() -> None:
    import dask
    from distributed import Client, LocalCluster

    # target-based spilling only: no pause, so the in-process workers keep running
    cfg = {
        "distributed.worker.memory.target": 0.3,
        "distributed.worker.memory.spill": False,
        "distributed.worker.memory.pause": False,
        "distributed.worker.memory.terminate": False,
    }
    with (
        dask.config.set(cfg),
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            memory_limit="100MB",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster) as c,
        MemoryTimeline(c, interval_s=0.1, gpu=False) as timeline,
    ):
        futures = [c.submit(np.full, 2 * MIB, i, pure=False) for i in range(3)]  # 3 x 16 MiB
        c.gather(futures)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (timeline.frame()["spilled"] > 0).any():
            time.sleep(0.1)
        del futures
    frame = timeline.frame()
    assert frame["spilled"].max() >= 16 * MIB


def test_sampler_errors_are_counted_not_raised() -> None:
    class Broken:
        status = "running"

        def scheduler_info(self, **kw: Any) -> dict:
            raise OSError("scheduler gone")

    timeline = MemoryTimeline(Broken(), interval_s=0.01, gpu=False)
    with timeline:
        time.sleep(0.05)
    assert len(timeline) == 0
    assert timeline.errors >= 2


def test_thread_ends_with_closed_client() -> None:
    class Closed:
        status = "closed"

        def scheduler_info(self, **kw: Any) -> dict:
            return {"workers": {}}

    timeline = MemoryTimeline(Closed(), interval_s=0.01, gpu=False).start()
    thread = timeline._thread
    assert thread is not None
    thread.join(timeout=2)
    assert not thread.is_alive()
    timeline.stop()


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        MemoryTimeline(interval_s=0)


def _fake_nvml(used: list[int], total: int) -> types.ModuleType:
    """An NVML module with the four calls the timeline uses (for machines without GPUs)."""
    mod = types.ModuleType("pynvml")
    mod.nvmlInit = lambda: None  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: len(used)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(  # type: ignore[attr-defined]
        used=used[h], total=total, free=total - used[h]
    )
    return mod


def test_gpu_rows_from_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([3 * 2**30, 5 * 2**30], 16 * 2**30))
    with MemoryTimeline(interval_s=10) as timeline:
        pass
    gpu = timeline.frame().query("worker.str.startswith('gpu:')", engine="python")
    assert sorted(set(gpu["worker"])) == ["gpu:0", "gpu:1"]
    assert gpu.groupby("worker")["gpu_used"].first().tolist() == [3 * 2**30, 5 * 2**30]
    assert (gpu["gpu_total"] == 16 * 2**30).all()
    assert gpu["rss"].isna().all()


def test_no_gpu_rows_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with MemoryTimeline(interval_s=10) as timeline:
        pass
    assert timeline.frame()["gpu_used"].isna().all()


def test_gpu_reported_by_workers_is_not_sampled_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([2**30], 2**34))

    class WithGpu:
        status = "running"

        def scheduler_info(self, **kw: Any) -> dict:
            metrics = {
                "memory": 200 * MIB,
                "managed_bytes": 50 * MIB,
                "spilled_bytes": {"memory": 10 * MIB, "disk": 8 * MIB},
                "gpu_memory_used": 2**31,
                "gpu-memory-total": 2**34,
            }
            return {"workers": {"tcp://w:1": {"metrics": metrics, "memory_limit": 0}}}

    timeline = MemoryTimeline(WithGpu(), interval_s=10).start().stop()
    frame = timeline.frame()
    assert set(frame["worker"]) == {"tcp://w:1"}
    row = frame.iloc[0]
    assert row["managed"] == 40 * MIB  # managed bytes less those spilled
    assert row["unmanaged"] == 160 * MIB
    assert row["spilled"] == 8 * MIB
    assert row["gpu_used"] == 2**31
    assert math.isnan(row["memory_limit"])  # 0 means no limit


@pytest.mark.gpu
def test_real_nvml_reports_gpu_memory() -> None:
    import ctypes

    import pynvml  # noqa: F401  (the gpu extra installs nvidia-ml-py)

    # allocate 1 GiB with the CUDA driver API: needs only the driver, not cupy or torch
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    assert cuda.cuInit(0) == 0
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
    try:
        with MemoryTimeline(interval_s=0.1) as timeline:
            time.sleep(0.3)
            assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), 1 << 30) == 0
            time.sleep(0.3)
            timeline.sample()
            assert cuda.cuMemFree_v2(ptr) == 0
    finally:
        cuda.cuCtxDestroy_v2(ctx)
    gpu = timeline.frame().dropna(subset=["gpu_used"])
    assert "gpu:0" in set(gpu["worker"])
    assert (gpu["gpu_total"] > gpu["gpu_used"]).all()
    assert gpu["gpu_used"].max() - gpu["gpu_used"].min() >= 0.9 * (1 << 30)
    assert timeline.errors == 0
