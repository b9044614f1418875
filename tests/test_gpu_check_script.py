"""The GPU proof's own parts that run without a GPU: its commands parse, its hashes compare.

scripts/gpu_check.sh and bench/bench_gpu_e2e.py run only on a CUDA machine; a typo in
the commands they build would be found there, at the cost of a device run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from curator_dask.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import bench_gpu_e2e  # noqa: E402
import gpu_check  # noqa: E402


def _parse(argv: list[str]) -> None:
    i = argv.index("curator_dask.cli")
    build_parser().parse_args(argv[i + 1 :])


@pytest.mark.parametrize("mode", ["cpu", "gpu"], ids=["cpu", "cuda"])  # "gpu" would skip
def test_gpu_check_commands_parse(tmp_path: Path, mode: str) -> None:
    cmds = gpu_check._commands(gpu_check.SAMPLE, str(tmp_path), mode)
    assert set(cmds) == {"run", "exact-dedup", "fuzzy-dedup", "semantic-dedup"}
    for argv, outputs in cmds.values():
        _parse(argv)
        assert ("--gpu" in argv) == (mode == "gpu")
        assert outputs
    assert "sample.jsonl.gz" in (tmp_path / f"pipeline-{mode}.yaml").read_text()


@pytest.mark.parametrize("mode", ["cpu", "gpu"], ids=["cpu", "cuda"])  # "gpu" would skip
def test_gpu_bench_commands_parse(tmp_path: Path, mode: str) -> None:
    data = tmp_path / "corpus"
    data.mkdir()
    files = [str(data / "part-0000.parquet")]
    steps = bench_gpu_e2e._steps(files, str(tmp_path), mode, workers=4)
    for argv, _ in steps.values():
        _parse(argv)
    assert "ParquetReader" in (tmp_path / f"pipeline-{mode}.yaml").read_text()


def test_digest_ignores_row_order_and_files(tmp_path: Path) -> None:
    frame = pd.DataFrame({"id": ["b", "a", "c"], "text": ["x", "y", "z"]})
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    frame.to_parquet(tmp_path / "one" / "part-0.parquet")
    frame.iloc[[2]].to_parquet(tmp_path / "two" / "part-0.parquet")
    frame.iloc[[1, 0]].to_parquet(tmp_path / "two" / "part-1.parquet")
    assert gpu_check.digest(str(tmp_path / "one")) == gpu_check.digest(str(tmp_path / "two"))
    frame.assign(text=["x", "y", "Z"]).to_parquet(tmp_path / "one" / "part-0.parquet")
    assert gpu_check.digest(str(tmp_path / "one")) != gpu_check.digest(str(tmp_path / "two"))


def test_overlap_of_removed_ids(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pd.DataFrame({"id": ["1", "2", "3"]}).to_parquet(tmp_path / "a" / "part-0.parquet")
    pd.DataFrame({"id": ["2", "3", "4"]}).to_parquet(tmp_path / "b" / "part-0.parquet")
    assert gpu_check._overlap(str(tmp_path / "a"), str(tmp_path / "b")) == 0.5


def test_fuzzy_dedup_runs_a_second_time_on_the_gpu_with_device_shingles(tmp_path: Path) -> None:
    """The shingle-device row: fuzzy dedup on the cudf backend with shingles on the GPU."""
    mode, (command, env) = "gpu-shingle", gpu_check.GPU_RUNS["gpu-shingle"]
    assert command == "fuzzy-dedup"
    assert env == {"DASK_DATAFRAME__BACKEND": "cudf", "DASK_CURATOR__DEDUP__SHINGLE_DEVICE": "gpu"}
    argv, outputs = gpu_check._commands(gpu_check.SAMPLE, str(tmp_path), mode)[command]
    _parse(argv)
    assert "--gpu" in argv
    assert all("gpu-shingle" in p for p in outputs)


def _run_record(path: Path, ids: list[str], rc: int = 0) -> dict:
    path.mkdir(parents=True)
    pd.DataFrame({"id": ids, "text": ids}).to_parquet(path / "part-0.parquet")
    return {"rc": rc, "s": 1.0, "outputs": [str(path)], "digest": [gpu_check.digest(str(path))]}


def test_compare_runs_passes_equal_outputs_and_measures_unequal_ones(tmp_path: Path) -> None:
    cpu = _run_record(tmp_path / "cpu", ["1", "2", "3"])
    same = _run_record(tmp_path / "same", ["3", "2", "1"])
    other = _run_record(tmp_path / "other", ["2", "3", "4"])
    assert gpu_check.compare_runs("x", cpu, same)["status"] == "ok"
    row = gpu_check.compare_runs("x gpu-shingle", cpu, other)
    assert (row["status"], row["removed_jaccard"]) == ("FAIL", 0.5)
    failed = gpu_check.compare_runs("x", cpu, dict(same, rc=124))
    assert failed["status"] == "FAIL"
    assert "removed_jaccard" not in failed


def _semantic_cache(cache: Path, v, device: str) -> None:
    import dask
    import dask.dataframe as dd

    from curator_dask.dedup.semantic import SemanticDeduplicationWorkflow
    from tests.dedup.test_semantic_kmeans import _frame

    wf = SemanticDeduplicationWorkflow(
        cache_path=str(cache), output_path=str(cache.parent / f"{cache.name}-out"),
        df=dd.from_pandas(_frame(v), npartitions=2), embedding_column="emb", n_clusters=5,
    )  # fmt: skip
    with dask.config.set({"curator.dedup.kmeans-device": device}):
        wf.compute_clusters(wf.compute_embeddings())


def test_kmeans_row_compares_the_two_runs_clusterings(tmp_path: Path, monkeypatch) -> None:
    """Equal clusterings pass only when the GPU run's k-means ran on the GPU."""
    from curator_dask.dedup import semantic
    from tests.dedup.test_semantic_kmeans import _vectors

    v = _vectors(seed=2)
    _semantic_cache(tmp_path / "cpu", v, "host")
    _semantic_cache(tmp_path / "host", v, "host")
    row = gpu_check.kmeans_row(str(tmp_path / "cpu"), str(tmp_path / "host"))
    assert row["status"] == "FAIL"  # the same clustering, but not from cuML
    assert row["detail"]["ari"] == 1.0
    assert row["detail"]["devices"]["gpu"] == "host"
    # a "GPU" run whose k-means is the host's (cuML stands in): the row passes
    import types

    monkeypatch.setitem(sys.modules, "cuml", types.ModuleType("cuml"))
    monkeypatch.setitem(semantic.KMEANS, "gpu", semantic.KMEANS["host"])
    _semantic_cache(tmp_path / "gpu", v, "gpu")
    row = gpu_check.kmeans_row(str(tmp_path / "cpu"), str(tmp_path / "gpu"))
    assert row["status"] == "ok", row
    assert gpu_check.kmeans_row(str(tmp_path / "cpu"), str(tmp_path / "none"))["status"] == "FAIL"


def test_the_device_benchmarks_include_cuml_kmeans_on_a_million_vectors() -> None:
    args = gpu_check.argparse.Namespace(no_bench=False, kmeans_vectors=1_000_000, out="o")
    names = [name for name, _, _ in gpu_check._device_benches(args)]
    assert names == ["bench_minhash_gpu", "k-means 1,000,000 vectors"]
    argv = gpu_check._device_benches(args)[1][1]
    assert argv[0].endswith("bench_kmeans_gpu.py")
    assert argv[argv.index("--vectors") + 1] == "1000000"


def test_gpu_bench_steps_reach_its_own_cluster_and_shingle_on_the_device(tmp_path: Path) -> None:
    files = [str(tmp_path / "corpus" / "part-0000.parquet")]
    steps = bench_gpu_e2e._steps(files, str(tmp_path), "gpu", 4, "/x/scheduler.json")
    assert bench_gpu_e2e.SHINGLE_STEP in steps
    for argv, _ in steps.values():
        _parse(argv)
        assert argv[argv.index("--scheduler-file") + 1] == "/x/scheduler.json"
        assert "--gpu" not in argv
    host, device = steps["fuzzy"], steps[bench_gpu_e2e.SHINGLE_STEP]
    assert host[1] != device[1]  # their own outputs


def _fake_rapids(monkeypatch, pool: int | None, peak: int, spilled: int) -> None:
    """Stand-ins for the rmm and cudf names worker_gpu_memory reads (no GPU here)."""
    import types

    stats = types.SimpleNamespace(current_bytes=peak // 2, peak_bytes=peak)
    upstream = types.SimpleNamespace(pool_size=lambda: pool) if pool else object()
    adaptor = types.SimpleNamespace(upstream_mr=upstream)
    rmm = types.ModuleType("rmm")
    rmm.mr = types.SimpleNamespace(get_current_device_resource=lambda: adaptor)
    rmm.statistics = types.SimpleNamespace(get_statistics=lambda: stats)
    monkeypatch.setitem(sys.modules, "rmm", rmm)
    manager = types.SimpleNamespace(
        statistics=types.SimpleNamespace(
            spill_totals={("gpu", "cpu"): (spilled, 0.5), ("cpu", "gpu"): (spilled // 4, 0.1)}
        )
    )
    names = ["cudf", "cudf.core", "cudf.core.buffer", "cudf.core.buffer.spill_manager"]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules[names[-1]].get_global_manager = lambda: manager  # type: ignore[attr-defined]


def test_worker_memory_reads_the_pool_rmm_statistics_and_cudf_spills(monkeypatch) -> None:
    _fake_rapids(monkeypatch, pool=8 << 30, peak=3 << 30, spilled=1 << 30)
    got = bench_gpu_e2e.worker_gpu_memory()
    assert got["pool_bytes"] == 8 << 30
    assert (got["rmm_peak_bytes"], got["rmm_current_bytes"]) == (3 << 30, 3 << 29)
    assert (got["spilled_bytes"], got["unspilled_bytes"]) == (1 << 30, 1 << 28)
    _fake_rapids(monkeypatch, pool=None, peak=0, spilled=0)
    assert bench_gpu_e2e.worker_gpu_memory()["pool_bytes"] is None


def test_memory_delta_takes_the_largest_worker_and_the_spills_of_the_step() -> None:
    mb = 2**20
    before = {"w1": {"spilled_bytes": 100 * mb}, "w2": {"spilled_bytes": 0}}
    after = {
        "w1": {"pool_bytes": 900 * mb, "rmm_peak_bytes": 300 * mb, "spilled_bytes": 150 * mb},
        "w2": {"pool_bytes": 1000 * mb, "rmm_peak_bytes": 200 * mb, "spilled_bytes": 20 * mb},
    }
    got = bench_gpu_e2e.memory_delta(before, after)
    assert got == {
        "workers": 2, "rmm_pool_mb": 1000.0, "rmm_peak_mb": 300.0, "spilled_mb": 70.0,
        "unspilled_mb": 0.0,
    }  # fmt: skip


def test_the_device_shingles_row_is_compared_with_the_cpus_fuzzy() -> None:
    def run(digest: str, wall: float) -> dict:
        return {"rc": 0, "wall_s": wall, "digest": [[5, digest]], "gpu_peak_mb": 10}

    results = {
        "steps": {
            "fuzzy": {"gpu": run("a", 2.0), "cpu": run("a", 40.0)},
            bench_gpu_e2e.SHINGLE_STEP: {"gpu": dict(run("a", 1.0), memory={"rmm_pool_mb": 9})},
        }
    }
    lines = bench_gpu_e2e.summarize(results, cores=4)
    row = results["steps"][bench_gpu_e2e.SHINGLE_STEP]
    assert row["equal"] is True
    assert row["equal_host_shingles"] is True
    assert row["gpu_over_cpu"] == 40.0
    assert len(lines) == 3
    assert " 9 " in lines[2]
    results["steps"][bench_gpu_e2e.SHINGLE_STEP]["gpu"]["digest"] = [[5, "b"]]
    bench_gpu_e2e.summarize(results, cores=4)
    assert row["equal"] is False


def test_gpu_bench_commands_keep_the_callers_path_after_the_checkout(monkeypatch) -> None:
    # RAPIDS carried to a device goes into a target folder on PYTHONPATH; a step that
    # dropped it could not import cudf (seen on the H200, 2026-11-27)
    monkeypatch.setenv("PYTHONPATH", "/var/tmp/site")
    for mode, name in [("gpu", "fuzzy"), ("gpu", bench_gpu_e2e.SHINGLE_STEP), ("cpu", "exact")]:
        env = bench_gpu_e2e.step_env(mode, name)
        assert env["PYTHONPATH"].split(os.pathsep) == [bench_gpu_e2e.ROOT, "/var/tmp/site"]
    assert (
        bench_gpu_e2e.step_env("gpu", bench_gpu_e2e.SHINGLE_STEP)[
            "DASK_CURATOR__DEDUP__SHINGLE_DEVICE"
        ]
        == "gpu"
    )
    assert "DASK_DATAFRAME__BACKEND" not in bench_gpu_e2e.step_env("cpu", "fuzzy")
    monkeypatch.delenv("PYTHONPATH")
    assert bench_gpu_e2e.step_env("cpu", "fuzzy")["PYTHONPATH"] == bench_gpu_e2e.ROOT


def test_the_semantic_step_runs_on_the_corpus_first_documents(tmp_path: Path, monkeypatch) -> None:
    # CPU workers embed tens of documents a second: a million would outlast any device call
    monkeypatch.setattr(bench_gpu_e2e, "_file_docs", lambda: 3)
    data = tmp_path / "corpus"
    data.mkdir()
    files = []
    for f in range(2):
        path = data / f"part-{f:04d}.parquet"
        pd.DataFrame(
            {"id": [f"d{f}{i}" for i in range(3)], "text": ["a b", "c d", "e f"]}
        ).to_parquet(path, index=False)
        files.append(str(path))
    folder, n = bench_gpu_e2e.semantic_subset(files, str(tmp_path / "work"), 4)
    assert n == 4
    assert pd.read_parquet(folder)["id"].tolist() == ["d00", "d01", "d02", "d10"]
    steps = bench_gpu_e2e._steps(files, str(tmp_path), "cpu", 4, None, folder)
    assert steps["semantic"][0][4] == folder  # the command's input
    assert steps["fuzzy"][0][4] == str(data)  # the others keep the whole corpus
    assert bench_gpu_e2e.semantic_subset(files, str(tmp_path / "work"), 0) == (str(data), 6)


def test_the_first_steps_rmm_statistics_stay_on_top_of_cudfs_spill_resource(monkeypatch) -> None:
    # RMM reads statistics from the topmost resource only, and cudf's spill manager pushes
    # its own on the worker's first cudf buffer: the H200 run lost the first step's peak
    import types

    class Stats:
        def __init__(self, upstream: object) -> None:
            self.upstream_mr, self.allocation_counts = upstream, "counts"

    stack = {"mr": object()}  # the pool
    rmm = types.ModuleType("rmm")
    rmm.mr = types.SimpleNamespace(get_current_device_resource=lambda: stack["mr"])

    def enable() -> None:
        if not isinstance(stack["mr"], Stats):
            stack["mr"] = Stats(stack["mr"])

    def get() -> object:
        return stack["mr"].allocation_counts if isinstance(stack["mr"], Stats) else None

    rmm.statistics = types.SimpleNamespace(
        enable_statistics=enable,
        get_statistics=get,
        push_statistics=lambda: get(),
        pop_statistics=lambda: get(),
    )
    monkeypatch.setitem(sys.modules, "rmm", rmm)
    made = []

    def get_global_manager() -> object:
        if not made:  # cudf: the first call makes the manager and spills on demand
            made.append(types.SimpleNamespace(statistics=types.SimpleNamespace(spill_totals={})))
            stack["mr"] = types.SimpleNamespace(upstream_mr=stack["mr"])
        return made[0]

    names = ["cudf", "cudf.core", "cudf.core.buffer", "cudf.core.buffer.spill_manager"]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules[names[-1]].get_global_manager = get_global_manager  # type: ignore[attr-defined]
    bench_gpu_e2e.start_step()
    get_global_manager()  # the step's first cudf buffer
    assert rmm.statistics.get_statistics() == "counts"


@pytest.mark.parametrize("carried", [True, False])
def test_the_script_preloads_a_carried_nvjitlink_in_every_process(
    tmp_path: Path, carried: bool
) -> None:
    """cuML's libcuvs needs a newer libnvJitLink than torch cu130's (H200, 2026-11-27): the
    carried one is preloaded for every process the script starts; none is set otherwise."""
    site = tmp_path / "site"
    lib = site / "nvidia" / "cu13" / "lib" / "libnvJitLink.so.13"
    if carried:
        lib.parent.mkdir(parents=True)
        lib.write_bytes(b"")
    seen = tmp_path / "seen.txt"
    fake = tmp_path / "python3"  # every "$PY ..." of the script: records what it was given
    fake.write_text(f'#!/bin/sh\necho "LD_PRELOAD=$LD_PRELOAD $*" >> {seen}\n')
    fake.chmod(0o755)
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "PY": str(fake),
        "SITE": str(site), "OUT": str(tmp_path / "out"),
    }  # fmt: skip
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh")],
        cwd=tmp_path, env=env, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    calls = seen.read_text().splitlines()
    assert any("gpu_check.py" in c for c in calls)
    assert any("pytest" in c for c in calls)
    started = [c for c in calls if "pytest" in c or "gpu_check.py" in c or "__version__" in c]
    assert len(started) >= 3
    for call in started:  # all but the install's own probes (does cudf import?)
        assert call.startswith(f"LD_PRELOAD={lib} " if carried else "LD_PRELOAD= "), call
