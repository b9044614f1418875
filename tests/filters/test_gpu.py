"""On a GPU, every filter and modifier gives the CPU's results on cudf partitions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from curator_dask.filters import C4QualityFilter, FineWebQualityFilter, heuristic_filters
from curator_dask.modifiers import C4LineModifier, LineRemover, WhitespaceNormalizer

from .reference import EDGE_TEXTS

ASCII_TEXTS = [t for t in EDGE_TEXTS if t.isascii()]


@pytest.mark.gpu
def test_filters_on_cudf_equal_pandas():
    cudf = pytest.importorskip("cudf")
    cpu = pd.Series(ASCII_TEXTS, index=range(5, 5 + len(ASCII_TEXTS)))
    gpu = cudf.from_pandas(cpu)
    for f in [*heuristic_filters(), C4QualityFilter(), FineWebQualityFilter()]:
        want = f.score(cpu).to_numpy(dtype="float64")
        got = f.score(gpu).to_pandas().to_numpy(dtype="float64")
        np.testing.assert_allclose(got, want, err_msg=f.stage_name)


@pytest.mark.gpu
def test_modifiers_on_cudf_equal_pandas():
    cudf = pytest.importorskip("cudf")
    cpu = pd.Series(ASCII_TEXTS)
    gpu = cudf.from_pandas(cpu)
    for m in (WhitespaceNormalizer(), LineRemover(pattern="^a line$"), C4LineModifier()):
        assert m.modify(gpu).to_pandas().tolist() == m.modify(cpu).tolist()
