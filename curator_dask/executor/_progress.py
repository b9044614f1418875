"""A progress line a person can follow on stderr (``curator.execution.progress``)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class Progress:
    """Prints ``partitions done/total, documents read and kept, rate`` at most once a second."""

    def __init__(
        self, name: str, total: int, enabled: bool = True, stream: TextIO | None = None
    ) -> None:
        self.name = name
        self.total = total
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.done = 0
        self.read = 0
        self.kept = 0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def message(self, text: str) -> None:
        """Print one line (when enabled)."""
        if self.enabled:
            print(f"[curator-dask] {text}", file=self.stream, flush=True)

    def update(self, record: dict[str, Any] | None = None, step: str = "") -> None:
        """Count one finished partition (with its record, if it is a final write)."""
        self.done += 1
        if record is not None:
            self.read += int(record["stages"][0]["docs_in"])
            self.kept += int(record["rows"])
        now = time.perf_counter()
        if self.enabled and (now - self._last >= 1.0 or self.done == self.total):
            self._last = now
            elapsed = max(now - self.t0, 1e-9)
            what = f"{step}: " if step else ""
            docs = (
                f", {self.read:,} docs read ({self.read / elapsed:,.0f}/s), {self.kept:,} kept"
                if record is not None
                else ""
            )
            self.message(
                f"{self.name} {what}{self.done}/{self.total} partitions{docs}, {elapsed:.1f}s"
            )
