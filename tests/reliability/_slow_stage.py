"""A stage that takes a while per partition (imported by CLI subprocesses in the tests)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd

from curator_dask import Modifier


@dataclass(kw_only=True)
class SlowStage(Modifier):
    """Sleeps ``seconds`` per partition; changes nothing."""

    seconds: float = 0.5

    def modify(self, text: pd.Series) -> pd.Series:
        time.sleep(self.seconds)
        return text
