"""A stage that fails as a full disk does (imported by CLI subprocesses in the tests)."""

from __future__ import annotations

import errno
from dataclasses import dataclass

import pandas as pd

from curator_dask import Modifier


@dataclass(kw_only=True)
class DiskFullStage(Modifier):
    """Raises ``OSError(ENOSPC)`` naming a file, as a writer on a full disk does."""

    def modify(self, text: pd.Series) -> pd.Series:
        raise OSError(errno.ENOSPC, "could not write /o/part-00000.jsonl: No space left on device")
