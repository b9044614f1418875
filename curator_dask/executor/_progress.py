"""A progress display a person can follow on stderr (``curator.execution.progress``).

On a terminal it is one bar redrawn in place; in Jupyter an HTML progress bar updated in
place; otherwise (a log file, CI, a pipe) one
timestamped line at most every ``interval`` seconds (a ``curator_dask.progress`` log record
when the ``curator_dask`` logger has handlers of its own and shows INFO records, as the
CLI sets it up). Both show the partitions done, the
percentage, the elapsed time and an ETA from the mean time per partition so far.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from curator_dask.progress import say

_BAR = 24


def _clock(value: float) -> str:
    seconds = round(value)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


# Why not distributed.progress: it follows futures by key prefix and shows tasks, not the
# documents read and kept per partition that the records carry; it also needs the futures
# of a whole run up front, where the streaming executor submits a bounded window. The same
# display serves SequentialExecutor, which has no scheduler at all.
def _in_jupyter() -> bool:
    """True inside a Jupyter kernel (where a bar is an HTML element, not a terminal line)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
    return type(shell).__name__ == "ZMQInteractiveShell"


class Progress:
    """Counts finished partitions and shows ``done/total, %, elapsed, ETA`` (and documents)."""

    def __init__(
        self,
        name: str,
        total: int,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = 1.0,
    ) -> None:
        self.name = name
        self.total = total
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.interval = interval
        self.done = 0
        self.read = 0
        self.kept = 0
        self.t0 = time.perf_counter()
        self._last = 0.0
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self._handle: Any = None  # a Jupyter display, updated in place
        self.jupyter = stream is None and _in_jupyter()

    def message(self, text: str) -> None:
        """Say one line (when enabled): :func:`curator_dask.progress.say`."""
        if self.enabled:
            say(text, self.stream)

    def _show_html(self, text: str) -> None:
        from html import escape

        from IPython.display import HTML, display

        value = self.done / max(self.total, 1)
        html = HTML(
            f"<progress value='{value:.4f}' max='1' style='width:20em'></progress> "
            f"<span style='font-family:monospace'>{escape(text)}</span>"
        )
        if self._handle is None:
            self._handle = display(html, display_id=True)
        else:
            self._handle.update(html)

    def status(self, step: str = "", with_docs: bool = False) -> str:
        """The current state as one line of text."""
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        total = max(self.total, 1)
        pct = 100.0 * self.done / total
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        what = f"{step}: " if step else ""
        docs = (
            f", {self.read:,} docs read ({self.read / elapsed:,.0f}/s), {self.kept:,} kept"
            if with_docs
            else ""
        )
        eta_text = "--:--" if eta is None else _clock(eta)
        return (
            f"{self.name} {what}{self.done}/{self.total} partitions ({pct:.0f}%){docs}, "
            f"elapsed {_clock(elapsed)}, ETA {eta_text}"
        )

    def update(self, record: dict[str, Any] | None = None, step: str = "") -> None:
        """Count one finished partition (with its record, if it is a final write)."""
        self.done += 1
        if record is not None:
            self.read += int(record["stages"][0]["docs_in"])
            self.kept += int(record["rows"])
        if not self.enabled:
            return
        now = time.perf_counter()
        last = self.done >= self.total
        if self.jupyter:
            if now - self._last >= 0.2 or last:
                self._last = now
                self._show_html(self.status(step, record is not None))
        elif self.tty:
            if now - self._last >= 0.1 or last:
                self._last = now
                filled = int(_BAR * self.done / max(self.total, 1))
                bar = "#" * filled + "." * (_BAR - filled)
                line = f"\r[{bar}] {self.status(step, record is not None)}"
                self.stream.write(line + ("\n" if last else ""))
                self.stream.flush()
        elif now - self._last >= self.interval or last:
            self._last = now
            self.message(self.status(step, record is not None))
