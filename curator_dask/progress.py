"""Progress, said the same way by every command and by the library: pipelines (any
executor) and dedup workflows alike.

``say(text)`` says one line: through the ``curator_dask.progress`` logger when the
``curator_dask`` logger has handlers of its own and shows INFO records (as the command line
sets it up: its console handler prints ``<time> [curator-dask] <text>``), printed in that same
form on ``stream`` (stderr) otherwise.

:class:`Progress` counts a step's finished work and shows ``done/total unit (%)``, the
documents and their rate, elapsed time and ETA: on a terminal one bar redrawn in place, in
Jupyter an HTML bar updated in place (an IPython display handle), otherwise (a log file, CI,
a pipe) a timestamped line at most every ``interval`` seconds. Each update is also said to
the run hooks (:func:`curator_dask.hooks.progress`). :class:`Reporter` is a run's steps
(``step ...``, ``step ... done in``), its counters and its computations with progress.
Whether anything is shown is ``curator.execution.progress`` (default true), for both halves.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from dask.callbacks import Callback

from curator_dask import hooks

logger = logging.getLogger("curator_dask.progress")

#: What every line starts with, after its time.
PREFIX = "[curator-dask]"
#: The time format of every line.
DATEFMT = "%Y-%m-%d %H:%M:%S"


def say(text: str, stream: TextIO | None = None) -> None:
    """Say one progress line (see the module docstring)."""
    if logging.getLogger("curator_dask").handlers and logger.isEnabledFor(logging.INFO):
        logger.info(text)
    else:
        stamp = time.strftime(DATEFMT)
        out = stream or sys.stderr
        with bar_cleared(out):
            print(f"{stamp} {PREFIX} {text}", file=out, flush=True)


# -- a terminal bar's open line ----------------------------------------------------------------
#: The bar line drawn last on a terminal stream and not ended yet (id(stream): (stream, line)).
_OPEN_BARS: dict[int, tuple[Any, str]] = {}
_OPEN_LOCK = threading.RLock()


def _draw_bar(stream: Any, line: str, end: bool) -> None:
    """Draw a bar ``line`` (``\r`` first) on a terminal ``stream``; ``end`` ends its line."""
    with _OPEN_LOCK:
        stream.write(line + ("\n" if end else ""))
        stream.flush()
        if end:
            _OPEN_BARS.pop(id(stream), None)
        else:
            _OPEN_BARS[id(stream)] = (stream, line)


def columns(stream: Any) -> int | None:
    """The width of the terminal ``stream`` writes to (``COLUMNS`` when set, else the
    terminal's; None when neither is known): a bar is drawn within it, since a line that
    wraps cannot be redrawn in place (``\r`` returns to the start of its last row only)."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return None


@contextlib.contextmanager
def bar_cleared(stream: Any) -> Iterator[None]:
    """Write other lines on ``stream`` within this block: a terminal bar whose line is still
    open there (redrawn in place with ``\r``) is cleared first and drawn again after, so that
    a warning or a message starts its own line instead of ending the bar's."""
    with _OPEN_LOCK:
        drawn = _OPEN_BARS.get(id(stream))
        if drawn is not None and drawn[0] is not stream:
            drawn = None
        if drawn is not None:
            stream.write("\r" + " " * len(drawn[1].lstrip("\r")) + "\r")
        try:
            yield
        finally:
            if drawn is not None and _OPEN_BARS.get(id(stream)) is drawn:
                stream.write(drawn[1])
                stream.flush()


def end_bar(stream: Any) -> None:
    """End the line of a terminal bar left open on ``stream`` (a run stopped by an error,
    whose message comes next); the bar is not drawn again."""
    with _OPEN_LOCK:
        drawn = _OPEN_BARS.pop(id(stream), None)
        if drawn is not None and drawn[0] is stream:
            stream.write("\n")
            stream.flush()


class ConsoleHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The command's console handler: a record written while a terminal bar is drawn on the
    same stream clears the bar's line first (:func:`bar_cleared`)."""

    def emit(self, record: logging.LogRecord) -> None:
        """Write the record on a line of its own."""
        with bar_cleared(self.stream):
            super().emit(record)


def log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    *,
    others: bool = True,
) -> None:
    """Say a Python warning in this voice: curator_dask's as one ``warning:`` line of its
    log, other packages' (when ``others``) on the ``py.warnings`` log, shown under -v."""
    if category.__module__.startswith("curator_dask"):
        logging.getLogger("curator_dask").warning("%s", message)
    elif others:
        logging.getLogger("py.warnings").warning(
            "%s:%s: %s: %s", filename, lineno, category.__name__, message
        )


class ConsoleFormatter(logging.Formatter):
    """``<time> [curator-dask] <message>`` for curator_dask's records (``warning:`` or
    ``error:`` in front of those levels), ``<time> [<logger>] <level>: <message>`` for
    other libraries' records."""

    def __init__(self) -> None:
        super().__init__(datefmt=DATEFMT)

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (plus its traceback, if any)."""
        when = self.formatTime(record, self.datefmt)
        text = record.getMessage()
        if record.exc_info:
            text = f"{text}\n{self.formatException(record.exc_info)}"
        level = record.levelname.lower()
        if record.name == "curator_dask" or record.name.startswith("curator_dask."):
            said = text if record.levelno < logging.WARNING else f"{level}: {text}"
            return f"{when} {PREFIX} {said}"
        return f"{when} [{record.name}] {level}: {text}"


# -- the display ------------------------------------------------------------------------------
_BAR = 24


def enabled() -> bool:
    """``curator.execution.progress``: whether runs show their progress (default true)."""
    from curator_dask import config

    return bool(config.get("execution.progress", True))


def _clock(value: float) -> str:
    seconds = round(value)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


# Why not distributed.progress: it follows futures by key prefix and shows tasks, not the
# documents read and kept per partition that the records carry; it also needs the futures
# of a whole run up front, where the streaming executor submits a bounded window. The same
# display serves SequentialExecutor, which has no scheduler at all.
def in_jupyter() -> bool:
    """True inside a Jupyter kernel (where a bar is an HTML element, not a terminal line)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    shell = get() if get is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


class Progress:
    """Counts a step's finished work and shows ``done/total``, %, documents, elapsed, ETA.

    ``name`` starts every line (a pipeline's name, a workflow's), ``step`` names the step
    (``"hash"``, ``"minhash"``; a pipeline's written partitions: empty on the line, ``"write"``
    to the hooks), ``unit`` what is counted. With ``run``, every update (and the start, as
    ``n == 0``) is said to the run hooks. Safe to update from several threads.
    """

    def __init__(
        self,
        name: str,
        total: int,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = 1.0,
        *,
        unit: str = "partitions",
        step: str = "",
        run: hooks.RunInfo | None = None,
    ) -> None:
        self.name = name
        self.total = total
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.interval = interval
        self.unit = unit
        self.step = step
        self.run = run
        self.done = 0
        self.read = 0
        self.kept = 0
        self.rows: int | None = None  # documents the finished units hold (when said)
        self.batches = 0  # batches said by units still running or done (batch())
        self.batch_rows = 0
        self.partial: dict[int, float] = {}  # share done of units still running (share())
        self._ended: set[int] = set()  # units whose record came (a late share is ignored)
        self.t0 = time.perf_counter()
        self._last = 0.0
        self._lock = threading.RLock()
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self._handle: Any = None  # a Jupyter display, updated in place
        self.jupyter = stream is None and in_jupyter()
        # IPython sends a display to the cell its thread belongs to: the bar is drawn from the
        # thread that made it (a share said from the client's event thread waits for the next
        # update there)
        self._owner = threading.get_ident()
        self._records = False
        if run is not None:
            hooks.progress(run, step or "write", unit, 0)

    def message(self, text: str) -> None:
        """Say one line (when enabled): :func:`say`."""
        if self.enabled:
            say(text, self.stream)

    def _show_html(self, text: str) -> None:
        from html import escape

        from IPython.display import HTML, display

        value = min(self.fraction_done() / max(self.total, 1), 1.0)
        html = HTML(
            f"<progress value='{value:.4f}' max='1' style='width:20em'></progress> "
            f"<span style='font-family:monospace'>{escape(text)}</span>"
        )
        if self._handle is None:
            self._handle = display(html, display_id=True)
        else:
            self._handle.update(html)

    def fraction_done(self) -> float:
        """Units done, plus the shares said of those still running (:meth:`share`)."""
        with self._lock:
            return self.done + sum(self.partial.values())

    def status(self, step: str = "", with_docs: bool = False) -> str:
        """The current state as one line of text."""
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        total = max(self.total, 1)
        done = min(self.fraction_done(), total)
        pct = 100.0 * done / total
        eta = elapsed / done * max(self.total - done, 0) if done else None
        step = step or self.step
        what = f"{step}: " if step else ""
        docs = ""
        if with_docs or self._records:
            docs = f", {self.read:,} docs read ({self.read / elapsed:,.0f}/s), {self.kept:,} kept"
        elif self.rows is not None or self.batches:
            # the batches of running units count before the unit does; the units' own
            # counts are exact once they are done
            n = max(self.rows or 0, self.batch_rows)
            batches = f" in {self.batches:,} batches" if self.batches else ""
            docs = f", {n:,} docs{batches} ({n / elapsed:,.0f}/s)"
        eta_text = "--:--" if eta is None else _clock(eta)
        now = ", compiling kernels..." if compiling() else ""
        return (
            f"{self.name} {what}{self.done}/{self.total} {self.unit} ({pct:.0f}%){docs}, "
            f"elapsed {_clock(elapsed)}, ETA {eta_text}{now}"
        )

    def update(
        self,
        record: Mapping[str, Any] | None = None,
        step: str = "",
        n: int = 1,
        rows: int | None = None,
    ) -> None:
        """Count ``n`` finished units (a written partition with its ``record``; ``rows``:
        the documents they hold)."""
        with self._lock:
            self.done += n
            if record is not None:
                unit = int(record.get("index", -1))
                self.partial.pop(unit, None)
                self._ended.add(unit)
                self._records = True
                self.read += int(record["stages"][0]["docs_in"])
                self.kept += int(record["rows"])
            if rows is not None:
                self.rows = (self.rows or 0) + int(rows)
            self._show(step)
        if self.run is not None:
            hooks.progress(self.run, self.step or "write", self.unit, n, record)

    def tick(self, n: int = 1, rows: int | None = None) -> None:
        """Count ``n`` finished units (:meth:`update` without a record)."""
        self.update(n=n, rows=rows)

    def batch(self, docs: int) -> None:
        """Count a batch of ``docs`` documents finished inside a unit still running (a model's
        forward pass): the line shows the documents so far and their rate between units."""
        with self._lock:
            self.batches += 1
            self.batch_rows += int(docs)
            self._show("", final=False)
        if self.run is not None:
            hooks.progress(self.run, self.step or "write", "documents", int(docs))

    def share(self, unit: int, share: float) -> None:
        """Say that ``share`` (0 to 1) of unit ``unit`` (a partition's index), still running,
        is done: the line moves between finished units (a partition's read and stages)."""
        with self._lock:
            if unit in self._ended:
                return
            self.partial[unit] = max(self.partial.get(unit, 0.0), min(float(share), 1.0))
            self._show("", final=False)

    def _show(self, step: str, final: bool = True) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        last = final and self.done >= self.total
        if self.jupyter:
            if threading.get_ident() != self._owner:
                return
            if now - self._last >= 0.2 or last:
                self._last = now
                self._show_html(self.status(step))
        elif self.tty:
            if now - self._last >= 0.1 or last:
                self._last = now
                filled = int(_BAR * min(self.fraction_done(), self.total) / max(self.total, 1))
                bar = "#" * filled + "." * (_BAR - filled)
                line = f"[{bar}] {self.status(step)}"
                width = columns(self.stream)
                if width is not None:  # within the terminal, less the cursor's column
                    line = line[: max(width - 1, 1)]
                _draw_bar(self.stream, "\r" + line, last)
        elif now - self._last >= self.interval or last:
            self._last = now
            self.message(self.status(step))


# -- batches inside a task --------------------------------------------------------------------
#: The distributed event topic of :func:`batch_done`.
BATCH_TOPIC = "curator-dask-batch"
_BATCH_SINKS: list[Progress] = []


def batch_done(docs: int) -> None:
    """Say, from inside a task, that a batch of ``docs`` documents is done (a model's forward
    pass): on a distributed worker an event (``BATCH_TOPIC``) the client's :class:`Reporter`
    follows; in this process (local scheduler) straight to the counters listening."""
    worker = None
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        pass
    if worker is not None:
        worker.log_event(BATCH_TOPIC, {"docs": int(docs)})
        return
    for counter in list(_BATCH_SINKS):
        counter.batch(docs)


#: The distributed event topic of :func:`task_share`.
TASK_TOPIC = "curator-dask-task"
_TASK_FOLLOWERS: dict[int, list[Callable[[str, float], None]]] = {}
_FOLLOW_LOCK = threading.Lock()


def task_share(share: float = 1.0) -> None:
    """Say, from inside a task on a distributed worker, that ``share`` (0 to 1) of it is done
    (1: it is finished): an event (:data:`TASK_TOPIC`) with the task's key, which
    :func:`following_tasks` hands on (a pipeline's stage of a partition, or a batch of its
    rows). Outside a distributed task, nothing."""
    try:
        from distributed import get_worker

        worker = get_worker()
        key = worker.get_current_task()
    except (ImportError, ValueError, AttributeError, KeyError):
        return
    worker.log_event(TASK_TOPIC, {"key": str(key), "share": float(share)})


@contextlib.contextmanager
def following_tasks(client: Any, on_share: Callable[[str, float], None]) -> Iterator[None]:
    """Within this block, ``on_share(key, share)`` for every :func:`task_share` said on
    ``client``'s workers (several runs on one client each hear every task's; they keep
    those whose keys are theirs)."""
    cid = id(client)

    def on_event(event: Any) -> None:
        _, msg = event
        for follower in list(_TASK_FOLLOWERS.get(cid, ())):
            follower(str(msg.get("key")), float(msg.get("share", 1.0)))

    with _FOLLOW_LOCK:
        followers = _TASK_FOLLOWERS.setdefault(cid, [])
        if not followers:
            client.subscribe_topic(TASK_TOPIC, on_event)
        followers.append(on_share)
    try:
        yield
    finally:
        with _FOLLOW_LOCK:
            followers.remove(on_share)
            if not followers:
                del _TASK_FOLLOWERS[cid]
                with contextlib.suppress(Exception):
                    client.unsubscribe_topic(TASK_TOPIC)


@contextlib.contextmanager
def _following_batches(counter: Progress, client: Any) -> Iterator[None]:
    def on_event(event: Any) -> None:
        _, msg = event
        counter.batch(int(msg.get("docs", 0)))

    _BATCH_SINKS.append(counter)
    if client is not None:
        client.subscribe_topic(BATCH_TOPIC, on_event)
    try:
        yield
    finally:
        _BATCH_SINKS.remove(counter)
        if client is not None:
            with contextlib.suppress(Exception):
                client.unsubscribe_topic(BATCH_TOPIC)


# -- kernels compiling -----------------------------------------------------------------------
#: The kernels compiling now, as this process and the workers followed say (name: count).
_COMPILING: dict[str, int] = {}
_COMPILING_LOCK = threading.Lock()


def compiling() -> bool:
    """True while a followed process compiles a numba kernel (:func:`following_compiles`)."""
    return bool(_COMPILING)


class CompileTime:
    """What :func:`following_compiles` saw: ``seconds`` of compiling, ``kernels`` compiled."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.kernels: list[str] = []


@contextlib.contextmanager
def following_compiles(
    client: Any = None, enabled: bool = True, stream: TextIO | None = None
) -> Iterator[CompileTime]:
    """Follow the kernel compiles of this process and of ``client``'s workers while a run
    computes: the first says one line ``compiling kernels...`` (when ``enabled``), the
    progress lines end in ``compiling kernels...`` while one runs, and the context's
    :class:`CompileTime` totals them. Compiling happens on a kernel's first call on a machine
    (:mod:`curator_dask._kernels`)."""
    from curator_dask import _kernels

    seen = CompileTime()
    lock = threading.Lock()

    def on_compile(state: str, kernel: str, seconds: float) -> None:
        with lock:
            first = not seen.kernels and state == "start"
            if state == "start":
                seen.kernels.append(kernel)
            else:
                seen.seconds += float(seconds)
        with _COMPILING_LOCK:
            if state == "start":
                _COMPILING[kernel] = _COMPILING.get(kernel, 0) + 1
            elif _COMPILING.get(kernel, 0) > 1:
                _COMPILING[kernel] -= 1
            else:
                _COMPILING.pop(kernel, None)
        logger.debug("kernel %s: compile %s", kernel, state)
        if first and enabled:
            say(
                "compiling kernels... (their first run on this machine; cached for later runs)",
                stream,
            )

    def on_event(event: Any) -> None:
        _, msg = event
        on_compile(str(msg.get("state")), str(msg.get("kernel")), float(msg.get("seconds", 0)))

    if "numba" in sys.modules:  # else the kernel modules listen as they are imported
        _kernels.listen()
    sinks = _kernels.compile_sinks()
    sinks.append(on_compile)
    subscribed = client is not None and hasattr(client, "subscribe_topic")
    if subscribed:
        client.subscribe_topic(_kernels.COMPILE_TOPIC, on_event)
    try:
        yield seen
    finally:
        sinks.remove(on_compile)
        if subscribed:
            with contextlib.suppress(Exception):
                client.unsubscribe_topic(_kernels.COMPILE_TOPIC)
        with _COMPILING_LOCK:
            for kernel in set(seen.kernels):
                _COMPILING.pop(kernel, None)


# -- a run's steps ----------------------------------------------------------------------------
class Reporter:
    """A run's steps as a person follows them, and their counters (:class:`Progress`).

    ``step ... `` as a step starts, ``step ... done in <s>`` as it ends (its seconds kept in
    :attr:`seconds`), a counter per computation. Every line starts with ``name``; shown when
    ``curator.execution.progress`` is true. Its counters say their progress to the run hooks
    as ``run`` (by default a ``"dedup"`` run named ``name`` on ``client``).
    """

    def __init__(
        self,
        name: str,
        client: Any = None,
        stream: TextIO | None = None,
        run: hooks.RunInfo | None = None,
    ) -> None:
        self.name = name
        self.client = client
        self.enabled = enabled()
        self.stream = stream or sys.stderr
        self.run = run or hooks.RunInfo("dedup", name, client=client)
        self.seconds: dict[str, float] = {}
        #: Seconds its processes spent compiling kernels (first run on a machine), in its
        #: steps (whatever computes there: :meth:`compute`, ``dask.compute``, the client's
        #: own calls) and in computations outside a step.
        self.compile_seconds = 0.0
        self._following = 0
        self.t0 = time.perf_counter()

    def say(self, text: str) -> None:
        """Say one line ``<name>: <text>`` (:func:`say`)."""
        if self.enabled:
            say(f"{self.name}: {text}", self.stream)

    def start(self) -> None:
        """Announce the run (with the dashboard link of a distributed client) and say
        ``on_start`` to the run hooks."""
        from curator_dask.cluster import dashboard_link

        link = dashboard_link(self.client)
        self.say(f"started{f'; dashboard {link}' if link else ''}")
        hooks.start(self.run)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time a step, printing its name as it starts and its time as it ends; the kernels
        compiled while it runs (in this process and on the client's workers, whichever call
        computes) are counted here, once, in :attr:`compile_seconds`."""
        self.say(f"step {name} ...")
        t = time.perf_counter()
        c = self.compile_seconds
        with self._following_compiles():
            yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t
        compiled = self.compile_seconds - c
        of_which = f", of which {compiled:.1f}s compiling kernels" if compiled >= 0.05 else ""
        self.say(f"step {name} done in {self.seconds[name]:.1f}s{of_which}")

    def counter(self, label: str, total: int, unit: str) -> Progress:
        """A counter of ``total`` units of step ``label`` (:class:`Progress`)."""
        stream = None if self.stream is sys.stderr else self.stream
        return Progress(self.name, total, self.enabled, stream, unit=unit, step=label, run=self.run)

    def compute(
        self,
        tasks: Sequence[Any],
        label: str,
        unit: str = "partitions",
        docs: bool = False,
        batches: bool = False,
    ) -> list[Any]:
        """Compute dask ``tasks`` (delayed objects), counting them as they finish.

        With ``docs``, each task's result is a frame with a ``rows`` column, and the line
        also counts the documents done and their rate. With ``batches``, the tasks' batches
        (:func:`batch_done`) are counted as they finish, between the tasks.
        """
        tasks = list(tasks)
        counter = self.counter(label, len(tasks), unit)
        if not tasks:
            return []
        client = self.client
        follow = _following_batches(counter, client) if batches else contextlib.nullcontext()
        with follow, self._following_compiles():
            return self._compute(tasks, counter, docs, batches)

    @contextlib.contextmanager
    def _following_compiles(self) -> Iterator[None]:
        """Count the kernels compiled meanwhile in :attr:`compile_seconds`; inside a step,
        the step counts them (nested, they would be counted twice)."""
        if self._following:
            yield
            return
        stream = None if self.stream is sys.stderr else self.stream
        self._following += 1
        try:
            with following_compiles(self.client, self.enabled, stream) as compiled:
                try:
                    yield
                finally:
                    self.compile_seconds += compiled.seconds
        finally:
            self._following -= 1

    def _compute(self, tasks: list[Any], counter: Progress, docs: bool, batches: bool) -> list[Any]:
        client = self.client
        if client is not None:
            from distributed import as_completed

            futures = client.compute(tasks)
            for i, done in enumerate(as_completed(futures)):
                result = done.result()
                if batches and docs and i == len(futures) - 1:
                    _await_batches(counter, (counter.rows or 0) + (_rows(result) or 0))
                _count(counter, result, docs)
            return list(client.gather(futures))
        import dask

        keys = {t.key for t in tasks}
        with _LocalProgress(keys, counter, docs):
            return list(dask.compute(*tasks))

    def finish(self, result: Any) -> None:
        """Say ``on_finish`` to the run hooks."""
        hooks.finish(self.run, result)

    def failed(self) -> None:
        """Say ``on_failed`` to the run hooks, and end the line of a terminal bar the run
        left drawn (the error comes next; a later line does not draw the bar again)."""
        end_bar(self.stream)
        hooks.failed(self.run)

    def total(self) -> float:
        """Seconds since :meth:`start`."""
        return time.perf_counter() - self.t0


def _await_batches(counter: Progress, rows: int, timeout: float = 2.0) -> None:
    """Wait (at most ``timeout`` seconds) for the workers' batch events of ``rows``
    documents, still on their way to the client as the last task finishes."""
    deadline = time.monotonic() + timeout
    while counter.batch_rows < rows and time.monotonic() < deadline:
        time.sleep(0.02)


def _count(counter: Progress, result: Any, docs: bool) -> None:
    """Count one finished task (with the documents its result frame says, if ``docs``)."""
    counter.update(rows=_rows(result) if docs else None)


def _rows(result: Any) -> int | None:
    """The ``rows`` a task's result frame says it wrote (None when it says nothing)."""
    try:
        return int(result["rows"].sum())
    except Exception:  # not such a frame: the line counts partitions only
        return None


class _LocalProgress(Callback):
    """Counts finished output tasks under the local (threaded / synchronous) schedulers."""

    def __init__(self, keys: set[Any], counter: Progress, docs: bool) -> None:
        super().__init__()
        self.keys = keys
        self.counter = counter
        self.docs = docs

    def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, id: Any) -> None:
        if key in self.keys:
            _count(self.counter, result, self.docs)
