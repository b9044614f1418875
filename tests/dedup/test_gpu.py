"""GPU results equal CPU results (run with ``pytest -m gpu tests/dedup`` on a CUDA machine)."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow
from curator_dask.dedup.minhash import minhash_permutations, minhash_signatures, shingle_hashes

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("use_64", [False, True])
def test_gpu_signatures_equal_cpu(sample_records, use_64):
    cupy = pytest.importorskip("cupy")
    text = pd.Series([r["text"] for r in sample_records])
    h, o = shingle_hashes(text, 5, "word")
    perms = minhash_permutations(260, 42, use_64)
    cpu = minhash_signatures(h, o, perms, use_64)
    gpu = minhash_signatures(cupy.asarray(h), cupy.asarray(o), cupy.asarray(perms), use_64)
    np.testing.assert_array_equal(cupy.asnumpy(gpu), cpu)


def test_gpu_removed_set_equals_cpu(tmp_path, sample_records):
    pytest.importorskip("cudf")
    pytest.importorskip("dask_cudf")
    pdf = pd.DataFrame(sample_records)[["id", "text"]]
    kw = {"word_ngrams": 5, "false_positive_check": True}
    cpu = FuzzyDeduplicationWorkflow(
        cache_path=str(tmp_path / "c1"),
        output_path=str(tmp_path / "o1"),
        df=dd.from_pandas(pdf, npartitions=4),
        **kw,
    ).run()
    with dask.config.set({"dataframe.backend": "cudf"}):
        gdf = dd.from_pandas(pdf, npartitions=4).to_backend("cudf")
        gpu = FuzzyDeduplicationWorkflow(
            cache_path=str(tmp_path / "c2"), output_path=str(tmp_path / "o2"), df=gdf, **kw
        ).run()
    a = set(pd.read_parquet(tmp_path / "o1" / "removed_ids")["id"])
    b = set(pd.read_parquet(tmp_path / "o2" / "removed_ids")["id"].to_list())
    assert a == b
    assert cpu["removed"] == gpu["removed"]


def test_gpu_signature_step_gives_cpu_removed_set(tmp_path, sample_records):
    """pandas partitions, signatures forced onto the GPU (cupy): same removed set."""
    pytest.importorskip("cupy")
    pdf = pd.DataFrame(sample_records)[["id", "text"]]
    kw = {"word_ngrams": 5, "false_positive_check": True}
    removed = []
    for device in ("cpu", "gpu"):
        with dask.config.set({"curator.dedup.minhash-device": device}):
            FuzzyDeduplicationWorkflow(
                cache_path=str(tmp_path / f"c-{device}"),
                output_path=str(tmp_path / f"o-{device}"),
                df=dd.from_pandas(pdf, npartitions=4),
                **kw,
            ).run()
        removed.append(set(pd.read_parquet(tmp_path / f"o-{device}" / "removed_ids")["id"]))
    assert removed[0] == removed[1]
    assert len(removed[0]) > 400


def test_gpu_device_shingles_give_the_cpu_removed_set(tmp_path, sample_records):
    """cudf partitions with the shingles hashed on the GPU too: the CPU's removed ids."""
    pytest.importorskip("cudf")
    pytest.importorskip("dask_cudf")
    pdf = pd.DataFrame(sample_records)[["id", "text"]]
    kw = {"word_ngrams": 5, "false_positive_check": True}
    FuzzyDeduplicationWorkflow(
        cache_path=str(tmp_path / "c1"),
        output_path=str(tmp_path / "o1"),
        df=dd.from_pandas(pdf, npartitions=4),
        **kw,
    ).run()
    config = {"dataframe.backend": "cudf", "curator.dedup.shingle-device": "gpu"}
    with dask.config.set(config):
        gdf = dd.from_pandas(pdf, npartitions=4).to_backend("cudf")
        FuzzyDeduplicationWorkflow(
            cache_path=str(tmp_path / "c2"), output_path=str(tmp_path / "o2"), df=gdf, **kw
        ).run()
    a = set(pd.read_parquet(tmp_path / "o1" / "removed_ids")["id"])
    b = set(pd.read_parquet(tmp_path / "o2" / "removed_ids")["id"].to_list())
    assert a == b
    assert len(a) > 400
