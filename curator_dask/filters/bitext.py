"""Filters of parallel text (a source and a target column)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curator_dask import text as textkit
from curator_dask.stage import Filter


@dataclass(kw_only=True)
class LengthRatioFilter(Filter):
    """Drop pairs whose word counts differ by a factor of ``max_ratio`` or more (Moses).

    Parameters
    ----------
    src_column, tgt_column : str
        The two text columns.
    max_ratio : float
        A pair is kept when max(src/tgt, tgt/src) words is below it.

    Score: max(src words / tgt words, tgt words / src words); ``inf`` when one side has
    no words and the other has some, 1 when both are empty.
    """

    src_column: str = "src"
    tgt_column: str = "tgt"
    max_ratio: float = 3.0

    def process(self, part: Any) -> Any:
        src = textkit.count(textkit.as_text(part[self.src_column]), textkit.WORD)
        tgt = textkit.count(textkit.as_text(part[self.tgt_column]), textkit.WORD)
        hi = src.where(src >= tgt, tgt).astype("float64")
        lo = src.where(src < tgt, tgt).astype("float64")
        score = (hi / lo).where(lo > 0, float("inf")).where(hi > 0, 1.0)
        score = textkit.restore_index(score, part.index)
        mask = score < self.max_ratio
        if self.invert:
            mask = ~mask
        col = self.score_column or (f"{self.stage_name}_score" if self.score_only else None)
        if col:
            part = part.assign(**{col: score})
        if self.score_only:
            return part.assign(**{f"{self.stage_name}_keep": mask})
        return textkit.filter_rows(part, mask)
