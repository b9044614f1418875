"""Texts and frames shared by the filter tests."""

from __future__ import annotations

import pandas as pd
import pytest

from .reference import EDGE_TEXTS


@pytest.fixture(scope="session")
def sample_frame(sample_records: list[dict]) -> pd.DataFrame:
    """A few hundred documents of every source from the shipped sample."""
    df = pd.DataFrame(sample_records)
    parts = [g.head(12) for _, g in df.groupby("source", sort=True)]
    return pd.concat(parts).reset_index(drop=True)


@pytest.fixture(scope="session")
def texts(sample_frame: pd.DataFrame) -> pd.DataFrame:
    """Edge cases plus real documents, with a non-default index."""
    all_texts = EDGE_TEXTS + sample_frame["text"].tolist()
    return pd.DataFrame(
        {"text": all_texts, "n": range(len(all_texts))},
        index=pd.RangeIndex(100, 100 + 2 * len(all_texts), 2),
    )
