"""Base of filters that apply several rules at once (C4, FineWeb)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curator_dask.stage import Filter


@dataclass(kw_only=True)
class RuleSetFilter(Filter):
    """A filter made of named rules; its score is the number of rules a document fails.

    Subclasses implement :meth:`rule_scores` (one column of measurements per rule) and
    :meth:`rule_failures` (one boolean column per rule). Look at :meth:`rule_scores` in a
    notebook to choose thresholds; ``score_only=True`` writes the failure count.
    """

    def rule_scores(self, text: Any) -> Any:
        """Return a frame of per-rule measurements, one row per document."""
        raise NotImplementedError

    def rule_failures(self, scores: Any) -> Any:
        """Return a boolean frame: True where a document fails a rule."""
        raise NotImplementedError

    def score(self, text: Any) -> Any:
        fails = self.rule_failures(self.rule_scores(text))
        return fails.astype("int64").sum(axis=1).astype("int64")

    def keep_score(self, score: Any) -> Any:
        return score == 0
