"""Fixtures of the dedup tests."""

from __future__ import annotations

import dask
import pytest


@pytest.fixture(autouse=True)
def _sync_scheduler():
    with dask.config.set(scheduler="sync"):
        yield
