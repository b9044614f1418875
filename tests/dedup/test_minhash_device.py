"""Where fuzzy dedup's step 1 signs and shingles: the backend's one seam, no GPU needed.

``curator.dedup.minhash-device`` (auto|cpu|gpu) and ``curator.dedup.shingle-device``
(host|gpu) are read through :func:`curator_dask._backend.device_for`, as semantic dedup's
k-means is; ``gpu`` without its library stops before anything runs, in one line naming
the extra.
"""

from __future__ import annotations

import sys
import types

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

from curator_dask import FuzzyDeduplicationWorkflow, _backend
from curator_dask.dedup import fuzzy


def _workflow(tmp_path):
    df = dd.from_pandas(pd.DataFrame({"id": ["a", "b"], "text": ["x y z w", "x y z w"]}), 1)
    return FuzzyDeduplicationWorkflow(
        cache_path=str(tmp_path / "c"), output_path=str(tmp_path / "o"), df=df, word_ngrams=2
    )


def _nothing_written(tmp_path):
    return not list((tmp_path / "c").rglob("*.parquet"))


def test_the_workflow_reads_both_settings_through_the_seam(tmp_path, monkeypatch):
    asked = []

    def device_for(key, library, settings=_backend.DEVICES):
        asked.append((key, library, settings))
        if len(asked) == 2:
            raise RuntimeError("both asked")
        return "host"

    monkeypatch.setattr(_backend, "device_for", device_for)
    with pytest.raises(RuntimeError, match="both asked"):
        _workflow(tmp_path).run()
    assert asked == [
        ("dedup.minhash-device", "cupy", ("auto", "cpu", "gpu")),
        ("dedup.shingle-device", "cudf", ("host", "gpu")),
    ]


@pytest.mark.parametrize(
    ("backend", "minhash", "shingle", "expected"),
    [
        ("pandas", "auto", "host", ("host", "host")),
        ("cudf", "auto", "host", ("gpu", "host")),
        ("cudf", "cpu", "gpu", ("host", "gpu")),
        ("pandas", "gpu", "gpu", ("gpu", "gpu")),
    ],
)
def test_auto_follows_the_backend(monkeypatch, backend, minhash, shingle, expected):
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    monkeypatch.setitem(sys.modules, "cudf", types.ModuleType("cudf"))
    config = {
        "dataframe.backend": backend,
        "curator.dedup.minhash-device": minhash,
        "curator.dedup.shingle-device": shingle,
    }
    with dask.config.set(config):
        assert fuzzy.minhash_devices() == expected


def test_auto_without_cupy_stays_on_the_host(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ModuleNotFoundError
    with dask.config.set({"dataframe.backend": "cudf", "curator.dedup.minhash-device": "auto"}):
        assert fuzzy.minhash_devices() == ("host", "host")


def test_gpu_signatures_without_cupy_stop_in_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with (
        dask.config.set({"curator.dedup.minhash-device": "gpu"}),
        pytest.raises(ImportError, match=r"^cupy is not installed: pip install .*gpu-cu13") as err,
    ):
        _workflow(tmp_path).run()
    assert "\n" not in str(err.value)
    assert _nothing_written(tmp_path)


def test_gpu_shingles_without_cudf_stop_in_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "cudf", None)
    with (
        dask.config.set({"curator.dedup.shingle-device": "gpu"}),
        pytest.raises(ImportError, match=r"^cudf is not installed: pip install .*gpu-cu13"),
    ):
        _workflow(tmp_path).run()
    assert _nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("minhash-device", "host", r"minhash-device must be one of auto\|cpu\|gpu, got 'host'"),
        ("shingle-device", "auto", r"shingle-device must be one of host\|gpu, got 'auto'"),
    ],
)
def test_a_setting_outside_its_values_is_refused(tmp_path, key, value, message):
    with (
        dask.config.set({f"curator.dedup.{key}": value}),
        pytest.raises(ValueError, match=message),
    ):
        _workflow(tmp_path).run()
    assert _nothing_written(tmp_path)
