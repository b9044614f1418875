"""The GPU proof's own parts that run without a GPU: its commands parse, its hashes compare.

scripts/gpu_check.sh and bench/bench_gpu_e2e.py run only on a CUDA machine; a typo in
the commands they build would be found there, at the cost of a device run.
"""

from __future__ import annotations

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
