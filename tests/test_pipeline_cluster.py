"""ClusterConfig and get_client: config sources, local clusters, resources, TLS, GPU errors."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import dask
import pytest

from curator_dask.cluster import ClusterConfig, get_client, make_cluster, worker_hosts


def test_from_dict_accepts_dashes_and_names_unknown_keys() -> None:
    cfg = ClusterConfig.from_dict({"n-workers": 3, "threads_per_worker": 2})
    assert (cfg.n_workers, cfg.threads_per_worker) == (3, 2)
    with pytest.raises(ValueError, match=r"cluster\.n_wrokers: unknown setting"):
        ClusterConfig.from_dict({"n_wrokers": 3})


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        ClusterConfig(kind="k8s")
    with pytest.raises(ValueError, match="needs address="):
        ClusterConfig(kind="address")
    with pytest.raises(ValueError, match="needs scheduler_file="):
        ClusterConfig(kind="scheduler_file")
    with pytest.raises(ValueError, match="n_workers must be an int >= 0"):
        ClusterConfig(n_workers=-1)


def test_from_dask_config_reads_curator_cluster_and_overrides() -> None:
    with dask.config.set({"curator.cluster.n-workers": 5, "curator.cluster.memory-limit": "3GB"}):
        cfg = ClusterConfig.from_dask_config(threads_per_worker=2, local_directory=None)
    assert (cfg.n_workers, cfg.memory_limit, cfg.threads_per_worker) == (5, "3GB", 2)
    assert cfg.local_directory is None
    assert cfg.host == "127.0.0.1"  # private by default


def test_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("cluster:\n  kind: scheduler_file\n  scheduler-file: /s.json\n")
    cfg = ClusterConfig.from_yaml(path)
    assert (cfg.kind, cfg.scheduler_file) == ("scheduler_file", "/s.json")


def test_sized_to_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("curator_dask.cluster._cpu_count", lambda: 2)
    assert ClusterConfig().sized() == (2, 1)
    monkeypatch.setattr("curator_dask.cluster._cpu_count", lambda: 16)
    assert ClusterConfig().sized() == (8, 2)
    assert ClusterConfig(n_workers=3, threads_per_worker=4).sized() == (3, 4)


def test_worker_kwargs_carry_lifetime_and_spill_dir() -> None:
    cfg = ClusterConfig(
        local_directory="/scratch", lifetime="2h", lifetime_stagger="5m", lifetime_restart=True
    )
    assert cfg.worker_kwargs() == {
        "local_directory": "/scratch",
        "lifetime": "2h",
        "lifetime_stagger": "5m",
        "lifetime_restart": True,
    }
    assert ClusterConfig().worker_kwargs() == {}


def test_local_cpu_cluster_advertises_cpu_resources(tmp_path: Path) -> None:
    cfg = ClusterConfig(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        dashboard_address=None,
        local_directory=str(tmp_path),
        lifetime="1 hour",
        lifetime_stagger="1 minute",
    )
    with get_client(cfg) as client:
        info = client.scheduler_info(n_workers=-1)["workers"]
        assert len(info) == 2
        assert all(w["resources"] == {"CPU": 1} for w in info.values())
        assert worker_hosts(client, {"CPU": 1})  # one per host
        assert worker_hosts(client, {"GPU": 1}) == []
        lifetimes = client.run(lambda dask_worker: dask_worker.lifetime)
        assert all(3500 < t < 3700 for t in lifetimes.values())
        cluster = client.cluster
    assert cluster.status.name == "closed"


def test_tls_with_a_temporary_certificate() -> None:
    pytest.importorskip("cryptography")  # Security.temporary() needs it
    cfg = ClusterConfig(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None, security=True
    )
    with get_client(cfg) as client:
        assert client.scheduler.address.startswith("tls://127.0.0.1:")
        assert client.submit(sum, [1, 2]).result() == 3


def test_security_from_a_mapping(tmp_path: Path) -> None:
    from distributed import Security

    sec = ClusterConfig(
        security={"tls-ca-file": str(tmp_path / "ca.pem"), "require_encryption": True}
    ).security_object()
    assert isinstance(sec, Security)
    assert sec.tls_ca_file == str(tmp_path / "ca.pem")
    assert sec.require_encryption is True
    assert ClusterConfig().security_object() is None


def test_gpu_kind_without_dask_cuda_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # import dask_cuda -> ImportError
    with pytest.raises(ImportError, match=r"curator_dask\[gpu-cu13\]"):
        make_cluster(ClusterConfig(kind="gpu"))


def test_make_cluster_is_for_local_kinds_only() -> None:
    with pytest.raises(ValueError, match="local clusters only"):
        make_cluster(ClusterConfig(kind="address", address="tcp://127.0.0.1:1"))


# -- processes="auto": threads in this process for a small input --------------------------
def test_auto_processes_follow_the_input_size() -> None:
    auto = ClusterConfig(processes="auto", n_workers=2, threads_per_worker=2, memory_limit="2GB")
    small = auto.for_input(1_000_000)
    assert (small.processes, small.n_workers, small.threads_per_worker) == (False, 1, 4)
    assert small.memory_limit == 4 * 10**9  # what the two workers would have had
    assert auto.for_input(64 * 2**20).processes is True  # threads_below is exclusive
    assert auto.for_input(None).processes is True  # unknown size: processes
    fraction = dataclasses.replace(auto, memory_limit=0.3).for_input(10)
    assert fraction.memory_limit == pytest.approx(0.6)
    for setting in (
        {"threads_below": None},
        {"lifetime": "1h"},
        {"adaptive_maximum": 3},
        {"security": True},
    ):
        cfg = dataclasses.replace(auto, **setting).for_input(10)
        assert (cfg.processes, cfg.n_workers) == (True, 2), setting
    explicit = ClusterConfig(processes=True, n_workers=2)
    assert explicit.for_input(10) is explicit
    with pytest.raises(ValueError, match="processes must be true, false or 'auto'"):
        ClusterConfig(processes="yes")


def test_the_shipped_default_is_auto_and_threads_run_in_this_process() -> None:
    cfg = ClusterConfig.from_dask_config(n_workers=2)
    assert cfg.processes == "auto"
    with get_client(cfg.for_input(10_000)) as client:
        pids = set(client.run(os.getpid).values())
        assert pids == {os.getpid()}
        assert list(client.nthreads().values()) == [2 * cfg.sized()[1]]
