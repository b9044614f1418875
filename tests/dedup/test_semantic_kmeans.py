"""Semantic dedup's distributed k-means and pairwise step against a single-process reference."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_dask.dedup.semantic import (
    SemanticDeduplicationWorkflow,
    kmeans_distributed,
    kmeans_reference,
    semantic_reference,
)


def _vectors(n_topics: int = 12, per_topic: int = 20, dim: int = 16, seed: int = 0):
    """Unit vectors around topic centres; some rows are near-copies of others."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_topics, dim))
    rows = []
    for c in centres:
        for _ in range(per_topic):
            rows.append(c + rng.normal(scale=0.6, size=dim))
    v = np.array(rows)
    copies = rng.choice(len(v), size=len(v) // 4, replace=False)
    v = np.concatenate([v, v[copies] + rng.normal(scale=0.01, size=(len(copies), dim))])
    v = v[rng.permutation(len(v))]
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _frame(v: np.ndarray) -> pd.DataFrame:
    emb = pd.Series(pd.arrays.ArrowExtensionArray(pa.array(list(v), type=pa.list_(pa.float32()))))
    return pd.DataFrame({"id": [f"v{i:04d}" for i in range(len(v))], "emb": emb})


@pytest.mark.parametrize(("keep", "nparts"), [("hard", 3), ("first", 5), ("easy", 1)])
def test_removed_set_equals_single_process_reference(tmp_path, keep, nparts):
    v = _vectors()
    pdf = _frame(v)
    res = SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
        df=dd.from_pandas(pdf, npartitions=nparts), embedding_column="emb",
        n_clusters=8, eps=0.02, keep=keep, seed=3, duplicate_groups=True,
    ).run()  # fmt: skip
    got = pd.read_parquet(tmp_path / "o" / "removed_ids")
    # uids are partition << 32 | row: their order is the input order, as the reference's
    expected = semantic_reference(pdf["id"], v, 8, 0.02, keep, seed=3, max_iter=100)
    assert dict(zip(got["id"], got["group"], strict=True)) == expected
    assert res.removed == len(expected) >= 40
    groups = pd.read_parquet(tmp_path / "o" / "duplicate_groups")
    assert set(groups["id"]) == set(expected) | set(expected.values())
    assert res.documents == len(v)


def test_distributed_kmeans_equals_reference(tmp_path):
    v = _vectors(seed=1)
    pdf = _frame(v)
    wf = SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
        df=dd.from_pandas(pdf, npartitions=4), embedding_column="emb", n_clusters=10, seed=5,
    )  # fmt: skip
    emb_dir = wf.compute_embeddings()
    from curator_dask.io.layout import join
    from curator_dask.io.parquet_dir import count_rows, parquet_files

    files = parquet_files(join(emb_dir, "data"), None)
    sizes = [count_rows([f], None) for f in files]
    assert len(files) == 4
    got, it = kmeans_distributed(files, sizes, 10, 5, 100, None, wf._run().reporter)
    ref, it_ref = kmeans_reference(v, 10, 5, 100)
    assert it == it_ref > 1
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)


@pytest.mark.integration
def test_on_worker_processes_equals_reference(tmp_path):
    from distributed import Client, LocalCluster

    v = _vectors(seed=2)
    pdf = _frame(v)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
        as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        res = SemanticDeduplicationWorkflow(
            cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
            df=dd.from_pandas(pdf, npartitions=3), embedding_column="emb",
            n_clusters=6, eps=0.02, keep="first", client=client,
        ).run()  # fmt: skip
    got = pd.read_parquet(tmp_path / "o" / "removed_ids")
    expected = semantic_reference(pdf["id"], v, 6, 0.02, "first", seed=42, max_iter=100)
    assert dict(zip(got["id"], got["group"], strict=True)) == expected
    assert res.removed == len(expected) > 0


@pytest.mark.integration
def test_cache_and_outputs_on_s3(s3_bucket):
    url, so = s3_bucket
    v = _vectors(seed=4)
    pdf = _frame(v)
    res = SemanticDeduplicationWorkflow(
        cache_path=f"{url}/cache", output_path=f"{url}/out", storage_options=so,
        df=dd.from_pandas(pdf, npartitions=3), embedding_column="emb",
        n_clusters=6, eps=0.02, keep="first", perform_removal=True,
    ).run()  # fmt: skip
    got = pd.read_parquet(f"{url}/out/removed_ids", storage_options=so)
    expected = semantic_reference(pdf["id"], v, 6, 0.02, "first", seed=42, max_iter=100)
    assert dict(zip(got["id"], got["group"], strict=True)) == expected
    import pyarrow.dataset as pads
    import s3fs

    # pandas cannot rebuild a list<float> column from its own metadata (pandas#57411): read
    # the kept documents back with pyarrow
    fs = s3fs.S3FileSystem(**so)
    kept = pads.dataset(f"{url[5:]}/out/deduplicated", filesystem=fs, format="parquet")
    assert kept.count_rows() + res.removed == len(pdf)


def test_cache_layout_is_part_of_every_step_key(tmp_path, monkeypatch):
    from curator_dask.dedup import semantic

    pdf = _frame(_vectors(n_topics=2, per_topic=5))
    wf = SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
        df=dd.from_pandas(pdf, npartitions=2), embedding_column="emb", n_clusters=2,
    )  # fmt: skip
    now = wf.step_dirs()
    monkeypatch.setattr(semantic, "CACHE_LAYOUT", semantic.CACHE_LAYOUT + 1)
    other = wf.step_dirs()
    assert all(now[step] != other[step] for step in ("embeddings", "kmeans", "duplicates"))


def test_embeddings_in_another_layout_are_refused_not_misread(tmp_path):
    v = _vectors(n_topics=2, per_topic=10)
    pdf = _frame(v)
    wf = SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
        df=dd.from_pandas(pdf, npartitions=2), embedding_column="emb", n_clusters=2,
    )  # fmt: skip
    emb_dir = wf.compute_embeddings()
    from curator_dask.io.parquet_dir import parquet_files

    files = parquet_files(f"{emb_dir}/data", None)
    back = np.concatenate([np.frombuffer(b, np.float32).reshape(1, -1) for f in files
                           for b in pq.read_table(f).column("vector").to_pylist()])  # fmt: skip
    np.testing.assert_array_equal(back, v)
    # a cache file as layout 1 wrote it: the vectors as a list<float> column "embedding"
    old = pa.table({"id": pdf["id"][:3], "_uid": np.arange(3), "embedding": pa.array(list(v[:3]))})
    pq.write_table(old, files[0])
    with pytest.raises(ValueError, match="layout"):
        wf.compute_clusters(emb_dir)


def test_embeddings_of_different_lengths_are_an_error(tmp_path):
    rows = list(_vectors(n_topics=2, per_topic=5))
    rows[3] = rows[3][:8]
    emb = pd.arrays.ArrowExtensionArray(pa.array(rows, type=pa.list_(pa.float32())))
    pdf = pd.DataFrame({"id": [f"v{i}" for i in range(len(rows))], "emb": emb})
    wf = SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
        df=dd.from_pandas(pdf, npartitions=2), embedding_column="emb", n_clusters=2,
    )  # fmt: skip
    with pytest.raises(ValueError, match="different lengths"):
        wf.run()


def test_empty_partitions_and_empty_input(tmp_path):
    v = _vectors(seed=6)
    pdf = _frame(v)
    cut = pdf["id"].iloc[len(pdf) // 4 + 5]
    df = dd.from_pandas(pdf, npartitions=4)
    df = df[df["id"] >= cut]  # the first partition is empty (ids are sorted)
    assert len(df.partitions[0]) == 0
    res = SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"), df=df,
        embedding_column="emb", n_clusters=8, eps=0.02, keep="first", seed=3,
    ).run()  # fmt: skip
    left = (pdf["id"] >= cut).to_numpy()
    expected = semantic_reference(pdf["id"][left], v[left], 8, 0.02, "first", seed=3, max_iter=100)
    got = pd.read_parquet(tmp_path / "o" / "removed_ids")
    assert dict(zip(got["id"], got["group"], strict=True)) == expected
    assert res.documents == int(left.sum())
    assert res.removed == len(expected) > 0

    none = dd.from_pandas(pdf, npartitions=2)
    res = SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c2"), output_path=str(tmp_path / "o2"),
        df=none[none["id"] == "absent"], embedding_column="emb", n_clusters=8,
    ).run()  # fmt: skip
    assert (res.documents, res.removed) == (0, 0)


def test_a_frame_of_given_embeddings_needs_that_column_not_the_text(tmp_path):
    """Given embeddings stand in for the text; a frame without them is refused before work."""
    from curator_dask.errors import ColumnError

    pdf = _frame(_vectors()).rename(columns={"emb": "vectors"})
    with pytest.raises(ColumnError, match=r"'emb' not found.*columns found: id, vectors"):
        SemanticDeduplicationWorkflow(
            cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
            df=dd.from_pandas(pdf, npartitions=2), embedding_column="emb", n_clusters=4,
        ).run()  # fmt: skip


@pytest.mark.gpu
def test_cuml_kmeans_on_gpu_workers_equals_reference(tmp_path):
    """cuML's dask KMeans from the same initial rows: the reference's centroids (1e-4)."""
    pytest.importorskip("cuml")
    dask_cuda = pytest.importorskip("dask_cuda")
    from distributed import Client

    from curator_dask.dedup.semantic import kmeans_cuml
    from curator_dask.io.layout import join
    from curator_dask.io.parquet_dir import count_rows, parquet_files

    v = _vectors(seed=1)
    wf = SemanticDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"),
        df=dd.from_pandas(_frame(v), npartitions=4), embedding_column="emb", n_clusters=10,
        seed=5,
    )  # fmt: skip
    files = parquet_files(join(wf.compute_embeddings(), "data"), None)
    sizes = [count_rows([f], None) for f in files]
    ref, _ = kmeans_reference(v, 10, 5, 100)
    with dask_cuda.LocalCUDACluster(n_workers=1) as cluster, Client(cluster) as client:
        got, it = kmeans_cuml(files, sizes, 10, 5, 100, None, client)
    assert it >= 1
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)
    from curator_dask.dedup.semantic import kmeans_agreement

    agreement = kmeans_agreement(v, ref, got)
    assert agreement["equal"], agreement
