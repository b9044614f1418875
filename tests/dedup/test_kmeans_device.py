"""Where semantic dedup's k-means runs (the backend's seam) and how two k-means are compared.

The GPU implementation (cuML's dask ``KMeans``) needs a device: its tests carry ``gpu``.
Everything that decides *which* implementation runs, and the tolerance the GPU's result is
held to (adjusted Rand index, centroids after matching), is checked here on any machine.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pytest

from curator_dask import _backend
from curator_dask.dedup import semantic
from curator_dask.dedup.semantic import (
    KMEANS,
    KMEANS_AGREEMENT,
    SemanticDeduplicationWorkflow,
    adjusted_rand_index,
    kmeans_agreement,
    kmeans_reference,
    matched_centroid_gap,
)
from tests.dedup.test_semantic_kmeans import _frame, _vectors

ROOT = Path(__file__).resolve().parents[2]
KEY = "dedup.kmeans-device"


@pytest.fixture
def fake_cuml(monkeypatch):
    """``cuml`` importable (an empty module): what ``auto`` looks for, without a GPU."""
    monkeypatch.setitem(sys.modules, "cuml", types.ModuleType("cuml"))


def _device(setting, backend="pandas"):
    with dask.config.set({"curator.dedup.kmeans-device": setting, "dataframe.backend": backend}):
        return _backend.device_for(KEY, "cuml")


def test_auto_follows_the_dataframe_backend(fake_cuml):
    assert _device("auto", "pandas") == "host"
    assert _device("auto", "cudf") == "gpu"
    assert _device("host", "cudf") == "host"
    assert _device("gpu", "pandas") == "gpu"


def test_auto_without_cuml_stays_on_the_host_and_gpu_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuml", None)  # import cuml raises ModuleNotFoundError
    assert _device("auto", "cudf") == "host"
    with pytest.raises(ImportError, match=r"cuml is not installed: pip install .*gpu-cu13"):
        _device("gpu", "pandas")


def test_a_setting_outside_auto_host_gpu_is_refused():
    with pytest.raises(ValueError, match=r"must be one of auto\|host\|gpu, got 'cuda'"):
        _device("cuda")


def test_the_default_setting_is_auto():
    assert dask.config.get("curator.dedup.kmeans-device") == "auto"


def _workflow(tmp_path, v):
    return SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
        df=dd.from_pandas(_frame(v), npartitions=3), embedding_column="emb", n_clusters=6,
        seed=2,
    )  # fmt: skip


@pytest.mark.parametrize(("backend", "expected"), [("pandas", "host"), ("cudf", "gpu")])
def test_the_kmeans_step_runs_what_the_seam_picks_and_records_it(
    tmp_path, monkeypatch, fake_cuml, backend, expected
):
    """Under the cudf backend the step calls the GPU implementation, on pandas the host's."""
    v = _vectors(seed=4)
    wf = _workflow(tmp_path, v)
    emb = wf.compute_embeddings()
    called = []
    host = KMEANS["host"]

    def recording(name):
        def run(*args):
            called.append(name)
            return host(*args)  # the host's result stands in for cuML's

        return run

    monkeypatch.setitem(KMEANS, "host", recording("host"))
    monkeypatch.setitem(KMEANS, "gpu", recording("gpu"))
    with dask.config.set({"dataframe.backend": backend}):
        km = wf.compute_clusters(emb)
    assert called == [expected]
    marker = json.loads((Path(km) / "_DONE").read_text())
    assert marker["device"] == expected
    centroids = np.load(Path(km) / "centroids.npy")
    ref, _ = kmeans_reference(v, 6, 2, wf.kmeans_max_iter)
    np.testing.assert_allclose(centroids, ref, rtol=0, atol=1e-6)


def test_the_gpu_implementation_is_given_the_runs_client(monkeypatch, tmp_path):
    seen = {}

    def fake_cuml_kmeans(files, sizes, k, seed, max_iter, so, client):
        seen.update(files=files, k=k, client=client)
        return np.zeros((k, 2), np.float32), 1

    monkeypatch.setattr(semantic, "kmeans_cuml", fake_cuml_kmeans)
    run = types.SimpleNamespace(client="the-client", reporter=None)
    KMEANS["gpu"](["f"], [3], 2, 0, 5, None, run)
    assert seen == {"files": ["f"], "k": 2, "client": "the-client"}


_BROKEN_CUML = """
import os
# imports in the test's process only: a worker process fails as a worker did on an H200
# (2026-11-27) where torch had loaded an older libnvJitLink before cuML's libraries
if os.getpid() != int(os.environ["CURATOR_TEST_CUML_PID"]):
    raise ImportError("libcuml.so: cannot open shared object file: No such file or directory")
"""


@pytest.fixture
def cuml_on_the_client_only(tmp_path, monkeypatch):
    """A ``cuml`` package that imports in this process and fails in every other one."""
    pkg = tmp_path / "site" / "cuml"
    (pkg / "dask").mkdir(parents=True)
    (pkg / "__init__.py").write_text(_BROKEN_CUML)
    (pkg / "dask" / "__init__.py").write_text("")
    (pkg / "dask" / "cluster.py").write_text("class KMeans:\n    pass\n")
    monkeypatch.setenv("CURATOR_TEST_CUML_PID", str(os.getpid()))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), *sys.path]))
    for name in [m for m in sys.modules if m == "cuml" or m.startswith("cuml.")]:
        monkeypatch.delitem(sys.modules, name)
    import cuml.dask.cluster  # noqa: F401 - it imports here
    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, Client(cluster) as client:  # fmt: skip
        yield client


def test_workers_that_cannot_import_cuml_keep_kmeans_on_the_host(
    tmp_path, monkeypatch, cuml_on_the_client_only
):
    """cuML imports here but not on the workers: auto says so and runs the host's k-means
    (before, the estimator's tasks killed each worker that unpickled them, until the run
    was stopped); the step records where it ran, and its result is the host's."""
    v = _vectors(seed=4)
    wf = _workflow(tmp_path, v)
    wf.client = cuml_on_the_client_only
    emb = wf.compute_embeddings()
    called = []
    host = KMEANS["host"]

    def gpu(*args):
        called.append("gpu")
        raise AssertionError("cuML's k-means was sent to workers that cannot import it")

    def recording_host(*args):
        called.append("host")
        return host(*args)

    monkeypatch.setitem(KMEANS, "gpu", gpu)
    monkeypatch.setitem(KMEANS, "host", recording_host)
    said = []
    monkeypatch.setattr("curator_dask.progress.Reporter.say", lambda self, text: said.append(text))
    with dask.config.set({"dataframe.backend": "cudf"}):
        km = wf.compute_clusters(emb)
    assert called == ["host"]
    assert json.loads((Path(km) / "_DONE").read_text())["device"] == "host"
    (note,) = [t for t in said if "k-means" in t]
    assert "cuml.dask.cluster does not import on 2 of 2 workers" in note
    assert "libcuml.so: cannot open shared object file" in note
    ref, _ = kmeans_reference(v, 6, 2, wf.kmeans_max_iter)
    np.testing.assert_allclose(np.load(Path(km) / "centroids.npy"), ref, rtol=0, atol=1e-6)


def test_kmeans_device_gpu_with_workers_that_cannot_import_cuml_is_an_error(
    cuml_on_the_client_only,
):
    with (
        dask.config.set({"curator.dedup.kmeans-device": "gpu"}),
        pytest.raises(ImportError, match=r"kmeans-device is gpu, but cuml.dask.cluster does not "
                      r"import on 2 of 2 workers \(tcp://.*: ImportError: libcuml.so"),
    ):  # fmt: skip
        _backend.device_on_workers("gpu", KEY, "cuml.dask.cluster", cuml_on_the_client_only)


def test_workers_that_import_the_library_keep_the_device(cuml_on_the_client_only):
    assert _backend.device_on_workers("gpu", KEY, "json", cuml_on_the_client_only) == (
        "gpu",
        None,
    )
    assert _backend.device_on_workers("host", KEY, "cuml", cuml_on_the_client_only) == (
        "host",
        None,
    )
    assert _backend.device_on_workers("gpu", KEY, "cuml", None) == ("gpu", None)


# -- the tolerance ----------------------------------------------------------------------------
def test_adjusted_rand_index_known_values():
    a = np.array([0, 0, 1, 1, 2, 2, 2])
    assert adjusted_rand_index(a, a) == 1.0
    assert adjusted_rand_index(a, np.array([7, 7, 3, 3, 9, 9, 9])) == 1.0  # renamed labels
    # sklearn.metrics.adjusted_rand_score gives 0.475 for this pair (checked by hand too:
    # pairs together in both 2, in a 5, in b 5, of 21; expected 25/21)
    assert adjusted_rand_index(a, np.array([1, 1, 0, 0, 2, 2, 0])) == pytest.approx(0.475)
    rng = np.random.default_rng(0)
    assert abs(adjusted_rand_index(rng.integers(0, 5, 5000), rng.integers(0, 5, 5000))) < 0.01
    with pytest.raises(ValueError, match="different lengths"):
        adjusted_rand_index(a, a[:3])


def test_centroids_are_matched_before_they_are_compared():
    c = np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]])
    assert matched_centroid_gap(c, c[[2, 0, 1]]) == 0.0
    assert matched_centroid_gap(c, c[[2, 0, 1]] + 1e-4) == pytest.approx(1e-4)
    assert matched_centroid_gap(c, c[:2]) == float("inf")


def test_two_kmeans_of_the_same_start_agree_and_another_start_does_not():
    v = _vectors(n_topics=8, per_topic=40, seed=7)
    ref, _ = kmeans_reference(v, 8, 1, 100)
    # float rounding of another summation order: far inside the tolerance
    same = kmeans_agreement(v, ref, ref[::-1] + 1e-5)
    assert same["equal"]
    assert same["ari"] == 1.0
    assert same["centroid_gap"] <= KMEANS_AGREEMENT["centroid_atol"]
    # another initialisation is another local optimum: not the same clustering
    other, _ = kmeans_reference(v, 8, 99, 100)
    diff = kmeans_agreement(v, ref, other)
    assert not diff["equal"]


def test_kmeans_bench_compares_host_with_reference_without_a_gpu(tmp_path):
    """bench/bench_kmeans_gpu.py end to end on CPU (the reference stands in for cuML)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_kmeans_gpu

    rc = bench_kmeans_gpu.main(
        ["--vectors", "3000", "--dim", "16", "--centres", "12", "--clusters", "8",
         "--files", "3", "--workers", "1", "--pair", "host", "reference",
         "--out", str(tmp_path)]
    )  # fmt: skip
    result = json.loads((tmp_path / "kmeans_gpu.json").read_text())
    assert rc == 0
    assert result["status"] == "ok"
    assert result["agreement"]["ari"] == 1.0
    assert result["host"]["iterations"] == result["reference"]["iterations"]


@pytest.mark.gpu
def test_semantic_dedup_under_the_cudf_backend_clusters_with_cuml_like_the_host(tmp_path):
    """The workflow on a CUDA cluster, cudf backend, auto: cuML runs and agrees (tolerance)."""
    pytest.importorskip("cuml")
    dask_cuda = pytest.importorskip("dask_cuda")
    from distributed import Client

    v = _vectors(n_topics=10, per_topic=60, seed=3)
    host_wf = _workflow(tmp_path / "host", v)
    host_km = host_wf.compute_clusters(host_wf.compute_embeddings())
    with dask_cuda.LocalCUDACluster(n_workers=1) as cluster, Client(cluster) as client:
        wf = _workflow(tmp_path / "gpu", v)
        wf.client = client
        emb = wf.compute_embeddings()
        with dask.config.set({"dataframe.backend": "cudf"}):
            km = wf.compute_clusters(emb)
    assert json.loads((Path(km) / "_DONE").read_text())["device"] == "gpu"
    got = kmeans_agreement(
        v, np.load(Path(host_km) / "centroids.npy"), np.load(Path(km) / "centroids.npy")
    )
    assert got["equal"], got
