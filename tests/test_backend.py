"""The backend seam: conversions call what the pinned cudf release has."""

from __future__ import annotations

import sys
import types

import pandas as pd
import pytest

from curator_dask import _backend


def _cudf_26_10_like() -> types.ModuleType:
    """A stand-in with cudf 26.10's conversion surface (no DataFrame/Series.from_pandas).

    In the 26.10 wheel the converter is ``cudf.from_pandas`` (cudf/core/dataframe.py),
    re-exported by ``cudf/__init__.py``; the classes have no such classmethod.
    """
    mod = types.ModuleType("cudf")

    class DataFrame:
        def __init__(self, pdf: pd.DataFrame) -> None:
            self.pdf = pdf

    class Series:
        def __init__(self, ps: pd.Series) -> None:
            self.ps = ps

    def from_pandas(obj: object) -> object:
        return DataFrame(obj) if isinstance(obj, pd.DataFrame) else Series(obj)

    mod.DataFrame, mod.Series, mod.from_pandas = DataFrame, Series, from_pandas
    return mod


def test_to_backend_uses_cudf_from_pandas(monkeypatch):
    fake = _cudf_26_10_like()
    monkeypatch.setitem(sys.modules, "cudf", fake)
    pdf = pd.DataFrame({"id": ["a", "b"], "text": ["x", "y"]})
    got = _backend.to_backend(pdf, "cudf")
    assert isinstance(got, fake.DataFrame)
    assert got.pdf is pdf
    assert _backend.to_backend(got, "cudf") is got  # already cudf: unchanged
    assert _backend.to_backend(pdf, "pandas") is pdf


def test_frame_module_names_the_extra_when_cudf_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "cudf", None)  # import cudf raises ImportError
    with pytest.raises(ImportError, match=r"curator_dask\[gpu"):
        _backend.frame_module("cudf")
