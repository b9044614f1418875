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


def _every_filter():
    from curator_dask import filters as F

    skip = {"Filter", "TokenCountFilter", "TokenizerFertilityFilter", "PerExtensionFilter"}
    special = {
        "C4BadWordsFilter": lambda: F.C4BadWordsFilter(bad_words=["badword", "two words"]),
        "HistogramFilter": lambda: F.HistogramFilter(lang="en"),
        "LengthRatioFilter": None,  # two columns: not a text score
    }
    for name in F.__all__:
        cls = getattr(F, name)
        if name in skip or not isinstance(cls, type) or special.get(name, cls) is None:
            continue
        yield special.get(name, cls)()


@pytest.mark.gpu
def test_every_filter_scores_every_text_on_cudf_to_1e6(sample_records):
    """All texts (Unicode included) and every filter: scores within 1e-6, same keep mask."""
    cudf = pytest.importorskip("cudf")
    texts = list(EDGE_TEXTS) + [r["text"] for r in sample_records[:300]]
    cpu = pd.Series(texts, index=range(7, 7 + len(texts)))
    gpu = cudf.from_pandas(cpu)
    wrong = []  # every filter is tried: one GPU run says all that differs
    for f in _every_filter():
        try:
            if f.has_score():
                want = f.score(cpu).to_numpy(dtype="float64")
                got = f.score(gpu).to_pandas().to_numpy(dtype="float64")
                bad = np.flatnonzero(~np.isclose(got, want, rtol=0, atol=1e-6, equal_nan=True))
                if len(bad):
                    i = bad[0]
                    wrong.append(
                        f"{f.stage_name}: {len(bad)}/{len(want)} scores differ, e.g. "
                        f"{texts[i][:60]!r}: gpu {got[i]} cpu {want[i]}"
                    )
                    continue
            keep_cpu = f.keep(cpu).fillna(False).to_numpy(dtype=bool)
            keep_gpu = f.keep(gpu).fillna(False).to_pandas().to_numpy(dtype=bool)
            if (keep_cpu != keep_gpu).any():
                wrong.append(f"{f.stage_name}: keep masks differ")
        except Exception as err:
            wrong.append(f"{f.stage_name}: {type(err).__name__}: {str(err)[:200]}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.gpu
def test_every_modifier_rewrites_every_text_on_cudf_like_pandas(sample_records):
    cudf = pytest.importorskip("cudf")
    from curator_dask.modifiers import CitationRemover, MojibakeFixer, UnicodeNormalizer

    texts = list(EDGE_TEXTS) + [r["text"] for r in sample_records[:300]]
    cpu = pd.Series(texts)
    gpu = cudf.from_pandas(cpu)
    modifiers = [
        WhitespaceNormalizer(),
        LineRemover(pattern="^a line$"),
        C4LineModifier(),
        CitationRemover(),
        MojibakeFixer(),
        UnicodeNormalizer(form="NFKC"),
        UnicodeNormalizer(form="NFD"),
    ]
    wrong = []
    for m in modifiers:
        try:
            got, want = m.modify(gpu).to_pandas().tolist(), m.modify(cpu).tolist()
        except Exception as err:
            wrong.append(f"{type(m).__name__}: {type(err).__name__}: {str(err)[:200]}")
            continue
        bad = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
        if bad:
            wrong.append(f"{type(m).__name__}: {len(bad)} texts differ, e.g. {want[bad[0]][:60]!r} "
                         f"-> gpu {got[bad[0]][:60]!r}")  # fmt: skip
    assert not wrong, "\n".join(wrong)
