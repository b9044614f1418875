"""The default heuristic set on the shipped sample: keep rates stay sensible for prose."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from curator_dask.filters import heuristic_filters


@pytest.mark.slow
def test_default_set_keeps_real_prose(sample_path: Path):
    df = pd.read_json(sample_path, lines=True)
    keep_all = pd.Series(True, index=df.index)
    rows = []
    for f in heuristic_filters():
        keep = f.keep_score(f.score(df["text"]))
        keep_all &= keep
        rows.append((f.stage_name, float(keep.mean())))
        by_source = keep.groupby(df["source"]).mean()
        # No single rule may throw out the novels or the speeches.
        assert by_source["janeausten"] >= 0.7, f.stage_name
        assert by_source["sotu"] >= 0.95, f.stage_name
    print("\n".join(f"{name:36s} {rate:.3f}" for name, rate in rows))
    survival = keep_all.groupby(df["source"]).mean()
    print(survival.round(3).to_string())
    assert survival["janeausten"] >= 0.7
    assert survival["sotu"] >= 0.95
    # The set does remove things: short API stubs and markup-heavy sources.
    assert 0.3 <= keep_all.mean() <= 0.8
    assert survival["python-docstrings"] < 0.5
