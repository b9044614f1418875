"""One hook registry and one progress display for pipelines and dedup workflows alike
(``curator_dask.hooks``, ``curator_dask.progress``): the same events reach one registered
callback from both halves, the same bar on a terminal, the same HTML display in Jupyter."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
import types
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

from curator_dask.dedup import ExactDeduplicationWorkflow
from curator_dask.executor import SequentialExecutor
from curator_dask.hooks import RunCallback, RunInfo
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline
from curator_dask.stage import Filter

#: Progress shown, the result table not printed.
SHOWN = {"curator.execution.progress": True, "curator.dedup.summary": False}
TEXTS = ["dup", "a", "b", "c", "a", "e", "f", "dup", "dup"]


class Recorder(RunCallback):
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_start(self, run: RunInfo) -> None:
        self.events.append(("start", run.kind, run.name))

    def on_progress(self, run: RunInfo, step: str, unit: str, n: int, record: Any) -> None:
        self.events.append(("progress", run.kind, step, unit, n, record is not None))

    def on_finish(self, run: RunInfo, result: Any) -> None:
        self.events.append(("finish", run.kind, type(result).__name__))

    def on_failed(self, run: RunInfo) -> None:
        self.events.append(("failed", run.kind))


class Odd(Filter):
    def keep(self, text: pd.Series) -> pd.Series:
        return text.str.len() % 2 == 1


def _inputs(src: Path) -> None:
    src.mkdir()
    for f in range(3):
        rows = [{"id": f"{f}-{i}", "text": TEXTS[3 * f + i]} for i in range(3)]
        (src / f"part-{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _pipeline(src: Path, out: Path) -> Pipeline:
    return Pipeline(
        "p",
        [JsonlReader(str(src), files_per_partition=1), Odd(), JsonlWriter(str(out))],
    )


def _dedup(out: Path) -> ExactDeduplicationWorkflow:
    pdf = pd.DataFrame({"id": [f"d{i}" for i in range(9)], "text": TEXTS})
    return ExactDeduplicationWorkflow(output_path=str(out), df=dd.from_pandas(pdf, npartitions=3))


def test_one_callback_registered_once_hears_a_pipeline_and_a_dedup_run(tmp_path: Path) -> None:
    _inputs(tmp_path / "src")
    with Recorder() as rec, dask.config.set(scheduler="sync"):
        _pipeline(tmp_path / "src", tmp_path / "out").run(SequentialExecutor(progress=False))
        _dedup(tmp_path / "dedup").run()
    pipe = [e for e in rec.events if e[1] == "pipeline"]
    dedup = [e for e in rec.events if e[1] == "dedup"]
    # the same shape from both halves: start, per-partition progress, finish
    assert pipe[0] == ("start", "pipeline", "p")
    assert pipe[-1] == ("finish", "pipeline", "PipelineResult")
    written = [e for e in pipe if e[0] == "progress" and e[5]]
    assert written == [("progress", "pipeline", "write", "partitions", 1, True)] * 3
    assert dedup[0] == ("start", "dedup", "exact-dedup")
    assert dedup[-1] == ("finish", "dedup", "DedupResult")
    hashed = [e for e in dedup if e[0] == "progress" and e[2] == "hash"]
    assert [e[4] for e in hashed] == [0, 1, 1, 1]  # the counter starts at 0, one per partition
    assert all(e[3] == "partitions" for e in hashed)
    # unregistered: no more events
    n = len(rec.events)
    _dedup(tmp_path / "again").run()
    assert len(rec.events) == n


def test_a_failing_run_says_so_and_a_failing_callback_does_not_fail_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(RunCallback):
        def on_progress(self, *args: Any) -> None:
            raise RuntimeError("hook bug")

    class Poison(Filter):
        def keep(self, text: pd.Series) -> pd.Series:
            raise ValueError("poisoned")

    _inputs(tmp_path / "src")
    with Recorder() as rec, Broken(), caplog.at_level(logging.ERROR, "curator_dask.hooks"):
        result = _dedup(tmp_path / "dedup").run()  # every progress event raises in Broken
        bad = Pipeline(
            "bad",
            [JsonlReader(str(tmp_path / "src")), Poison(), JsonlWriter(str(tmp_path / "o"))],
        )
        with pytest.raises(Exception, match="poisoned"):
            bad.run(SequentialExecutor(progress=False))
    assert result.removed == 3
    assert "hook bug" in caplog.text
    assert rec.events[-1] == ("failed", "pipeline")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _terminal_of_no_known_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake terminal has no width unless a test sets ``COLUMNS`` (a shell exports it,
    and pytest-xdist's workers have it as 80, which cut the bars these tests read)."""
    monkeypatch.delenv("COLUMNS", raising=False)


def test_dedup_progress_is_the_pipelines_bar_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with dask.config.set(scheduler="sync", **SHOWN):
        _dedup(tmp_path / "dedup").run()
    text = term.getvalue()
    # one bar per step, redrawn in place: the pipelines' bar and line
    bars = [line for line in text.split("\n") if line.startswith("\r[")]
    assert any("exact-dedup hash: 3/3 partitions (100%)" in b for b in bars), text
    hash_bar = next(b for b in bars if "hash:" in b)
    assert hash_bar.endswith("ETA 00:00")  # redrawn in place, ended by one newline
    assert not [ln for ln in text.splitlines() if ln[:4].isdigit() and "hash:" in ln]
    # the steps still say when they start and end
    assert "exact-dedup: step hash ..." in text


def test_dedup_and_pipeline_progress_is_one_html_display_each_in_jupyter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[Any] = []

    class Handle:
        def __init__(self, html: Any) -> None:
            self.html = [html]

        def update(self, html: Any) -> None:
            self.html.append(html)

    def display(html: Any, display_id: bool = False) -> Handle:
        assert display_id
        shown.append(Handle(html))
        return shown[-1]

    class HTML:
        def __init__(self, data: str) -> None:
            self.data = data

    class ZMQInteractiveShell:
        pass

    ipython = types.ModuleType("IPython")
    ipython.get_ipython = ZMQInteractiveShell  # type: ignore[attr-defined]
    display_mod = types.ModuleType("IPython.display")
    display_mod.HTML = HTML  # type: ignore[attr-defined]
    display_mod.display = display  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display_mod)
    _inputs(tmp_path / "src")
    with dask.config.set(scheduler="sync", **SHOWN):
        _dedup(tmp_path / "dedup").run()
        n_dedup = len(shown)
        _pipeline(tmp_path / "src", tmp_path / "out").run(SequentialExecutor())
    hashed = [h for h in shown[:n_dedup] if "exact-dedup hash:" in h.html[0].data]
    assert len(hashed) == 1  # one display for the step, updated in place
    assert "<progress" in hashed[0].html[-1].data
    assert "3/3 partitions (100%)" in hashed[0].html[-1].data
    (pipe,) = shown[n_dedup:]
    assert "p 3/3 partitions (100%)" in pipe.html[-1].data


def test_a_jupyter_bar_is_drawn_from_the_thread_that_made_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """IPython sends a display to the cell of the thread that makes it: a share said from the
    client's event thread (a partition's step done) must not make the bar's display there."""
    import threading

    from curator_dask.progress import Progress

    drawn: list[tuple[int, str]] = []

    class ZMQInteractiveShell:
        pass

    ipython = types.ModuleType("IPython")
    ipython.get_ipython = ZMQInteractiveShell  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setattr(
        Progress, "_show_html", lambda self, text: drawn.append((threading.get_ident(), text))
    )
    bar = Progress("p", 2)
    assert bar.jupyter
    other = threading.Thread(target=bar.share, args=(0, 0.5))
    other.start()
    other.join()
    assert drawn == []  # the event thread only moved the count
    bar.update(n=1)
    assert [who for who, _ in drawn] == [threading.get_ident()]
    assert "1/2 partitions (75%)" in drawn[-1][1]  # the share counted: 1 done + 0.5 of one


def test_log_file_gets_dask_warnings_the_terminal_does_not_show(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import warnings

    import distributed  # noqa: F401  (imported first, as a test run or a notebook has it)

    from curator_dask.cli.console import _remove_handlers, setup_logging

    log = tmp_path / "run.log"
    setup_logging(log_file=str(log))
    try:
        logging.getLogger("distributed.nanny").warning("Worker process 7 was killed by signal 9")
        logging.getLogger("distributed.shuffle._scheduler_plugin").warning("Shuffle x initialized")
        logging.getLogger("dask.dataframe").warning("a dask warning")
        with warnings.catch_warnings():  # (this suite makes warnings errors)
            warnings.simplefilter("always")
            warnings.warn_explicit("a warning from dask's code", UserWarning, "dask/base.py", 1)
        logging.getLogger("curator_dask.progress").info("our line")
    finally:
        _remove_handlers()
    text = log.read_text()
    for said in ("killed by signal 9", "Shuffle x initialized", "a dask warning", "dask's code"):
        assert said in text, text
    err = capfd.readouterr().err
    assert "our line" in err
    for said in ("killed by signal 9", "Shuffle x", "a dask warning", "dask's code"):
        assert said not in err, err


def test_a_commands_log_file_gets_the_shuffle_warnings_its_terminal_does_not_show(
    tmp_path: Path,
) -> None:
    import subprocess

    _inputs(tmp_path / "src")
    log = tmp_path / "run.log"
    cmd = [sys.executable, "-m", "curator_dask.cli", "exact-dedup", str(tmp_path / "src")]
    cmd += ["--output", str(tmp_path / "out"), "--log-file", str(log), "--json"]
    # a distributed cluster in the command's process (a small input runs on dask's local
    # scheduler otherwise, with no p2p shuffle to log)
    env = {**os.environ, "DASK_CURATOR__CLUSTER__PROCESSES": "False"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["removed"] == 3
    # the p2p shuffle's warnings of the scheduler (in the command's process)
    shuffles = [ln for ln in log.read_text().splitlines() if "_scheduler_plugin" in ln]
    assert any("initialized" in ln for ln in shuffles), log.read_text()
    assert "Shuffle" not in done.stderr
    assert re.search(r"exact-dedup hash: (\d+)/\1 partitions \(100%\)", done.stderr)


def _screen(text: str) -> list[str]:
    """The lines a terminal shows of ``text``: each line as its last ``\\r`` leaves it (what
    a bar's clearing spaces leave after the text written over them, stripped)."""
    return [line.rsplit("\r", 1)[-1].removeprefix("\x1b[K").rstrip() for line in text.split("\n")]


def test_a_warning_said_while_a_terminal_bar_is_drawn_starts_its_own_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A warning (the command's ``warnings.showwarning``) and the ``compiling kernels...``
    line said while a bar is drawn on the same terminal clear the bar's line first: each
    starts a line of its own, and the bar is drawn again after it."""
    import warnings

    from curator_dask.cli.console import _remove_handlers, setup_logging
    from curator_dask.errors import QuarantineWarning
    from curator_dask.progress import Progress, following_compiles

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    setup_logging()
    try:
        bar = Progress("p", 4, stream=term)
        bar.update()
        with warnings.catch_warnings():  # (this suite makes warnings errors)
            warnings.simplefilter("always")
            warnings.warn("a record quarantined", QuarantineWarning, stacklevel=1)
        with following_compiles() as seen:
            from curator_dask import _kernels

            for sink in list(_kernels.compile_sinks()):
                sink("start", "k", 0.0)
        assert seen.kernels == ["k"]
        for _ in range(3):
            bar._last = 0.0  # each update drawn (not throttled)
            bar.update()
    finally:
        _remove_handlers()
    shown = _screen(term.getvalue())
    warned = next(line for line in shown if "a record quarantined" in line)
    assert warned[:4].isdigit(), shown  # a timestamp first, not the bar's text
    assert "[curator-dask] warning: a record quarantined" in warned
    compiling = next(line for line in shown if "compiling kernels" in line)
    assert compiling[:4].isdigit(), shown
    # the bar is drawn again under each line (until the next clears it), and ends at 4/4
    text = term.getvalue()
    assert re.search(r"a record quarantined\n\r\[#+\.+\] p 1/4 partitions", text), text
    assert shown[-2].startswith("["), shown
    assert "4/4 partitions (100%)" in shown[-2]
    assert shown[-1] == ""


def test_a_line_printed_without_the_command_clears_the_bar_and_an_error_ends_it() -> None:
    """Without the command's logging, ``say`` prints its line: it too clears a bar drawn on
    the stream first; ``end_bar`` (before a failed command's error) ends the bar's line,
    and the bar is not drawn after the error."""
    from curator_dask import progress
    from curator_dask.progress import Progress, say

    term = Terminal()
    bar = Progress("p", 4, stream=term)
    bar.update()
    say("a message", term)
    shown = _screen(term.getvalue())
    message = next(line for line in shown if "a message" in line)
    assert message[:4].isdigit(), shown
    progress.end_bar(term)
    term.write("error: disk full\n")
    say("after", term)
    shown = _screen(term.getvalue())
    assert shown[shown.index(message) + 1].startswith("[")  # drawn again, then ended
    assert "error: disk full" in shown
    assert shown[-2].endswith("[curator-dask] after"), shown
    assert shown[-2][:4].isdigit()
    assert not shown[-1]


def test_a_worker_process_line_erases_the_bar_it_lands_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker process of a command's local cluster writes on the terminal the command's
    bar is drawn on, past the command's clearing: its warnings and distributed's records
    (the ``_worker_warnings`` preload) erase the line they land on instead of running on
    from the bar's text; the bar is drawn again on the next line."""
    import multiprocessing
    import warnings

    from curator_dask import _optional_scipy, _worker_warnings
    from curator_dask.errors import QuarantineWarning
    from curator_dask.progress import Progress

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())  # a worker's
    monkeypatch.setattr(_optional_scipy, "defer_optional_scipy", lambda: None)
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # put back after
    package, dist = logging.getLogger("curator_dask"), logging.getLogger("distributed")
    monkeypatch.setattr(package, "handlers", [])
    monkeypatch.setattr(package, "propagate", package.propagate)
    memory = logging.StreamHandler(term)
    memory.setFormatter(logging.Formatter("distributed.worker - %(levelname)s - %(message)s"))
    monkeypatch.setattr(dist, "handlers", [memory])
    _worker_warnings.dask_setup(None)
    level = package.level
    package.setLevel(logging.WARNING)  # (an earlier test's command may have raised root's)
    try:
        bar = Progress("p", 4, stream=term)  # the command's (another process's in a real run)
        bar.update()
        with warnings.catch_warnings():  # (this suite makes warnings errors)
            warnings.simplefilter("always")
            warnings.warn("a record quarantined", QuarantineWarning, stacklevel=1)
        logging.getLogger("distributed.worker").warning("Unmanaged memory use is high")
        bar._last = 0.0
        bar.update()
    finally:
        package.setLevel(level)
    shown = _screen(term.getvalue())
    assert shown[0][:4].isdigit(), shown  # the warning's time first, not the bar's text
    assert shown[0].endswith("[curator-dask] warning: a record quarantined"), shown
    assert shown[1] == "distributed.worker - WARNING - Unmanaged memory use is high", shown
    assert shown[2].startswith("["), shown
    assert "p 2/4 partitions" in shown[2], shown


def test_a_bar_is_drawn_within_the_terminals_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bar line wider than the terminal would wrap, and ``\r`` redraws only its last row:
    every draw fits the terminal's width (less one column)."""
    from curator_dask.progress import Progress

    monkeypatch.setenv("COLUMNS", "50")
    term = Terminal()
    bar = Progress("a-pipeline-with-a-long-name", 4, stream=term, step="a long step name")
    for _ in range(4):
        bar._last = 0.0
        bar.update()
    draws = [d for d in term.getvalue().replace("\n", "\r").split("\r") if d]
    assert len(draws) == 4, draws
    assert all(len(d) <= 49 for d in draws), draws
    assert draws[-1] == "[" + "#" * 24 + "] a-pipeline-with-a-long"  # cut at 49


def test_a_failed_library_run_ends_its_bar_and_a_later_line_does_not_draw_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside the command (which ends the bar before its error), a pipeline or a dedup
    workflow that fails ends its terminal bar's line: the traceback and the next lines said
    on the terminal start lines of their own and are not followed by the dead bar."""
    from curator_dask.progress import Reporter, say

    class PoisonE(Filter):
        def keep(self, text: pd.Series) -> pd.Series:
            if (text == "e").any():  # the second of three partitions
                raise ValueError("poisoned")
            return text.str.len() > 0

    _inputs(tmp_path / "src")
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    reader = JsonlReader(str(tmp_path / "src"), files_per_partition=1)
    bad = Pipeline("bad", [reader, PoisonE(), JsonlWriter(str(tmp_path / "o"))])
    with dask.config.set(**SHOWN), pytest.raises(ValueError, match="poisoned"):
        bad.run(SequentialExecutor(progress=True))
    assert re.search(r"\r\[#+\.+\] bad 1/3 partitions", term.getvalue()), term.getvalue()
    say("next", term)
    shown = _screen(term.getvalue())
    assert shown[-3].startswith("["), shown  # the bar's line ended, not erased
    assert "bad 1/3" in shown[-3], shown
    assert shown[-2].endswith("[curator-dask] next"), shown
    assert shown[-1] == "", shown  # and not drawn again
    # a dedup workflow's reporter, as the workflows' run ends when it raises
    reporter = Reporter("exact-dedup")
    reporter.enabled = True
    counter = reporter.counter("hash", 3, "partitions")
    counter.update()
    reporter.failed()
    say("after", term)
    shown = _screen(term.getvalue())
    assert "exact-dedup hash: 1/3" in shown[-3], shown
    assert shown[-2].endswith("[curator-dask] after"), shown
    assert shown[-1] == "", shown
