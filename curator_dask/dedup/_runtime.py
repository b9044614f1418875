"""What a dedup workflow's run uses: its input, step cache, progress, client and result.

The workflows' base class, the skeleton of a run, is
:class:`~curator_dask.dedup._common.DedupWorkflow`; this module was ``dedup/_base.py``.
One input (the io readers' listing and format choice,
:mod:`curator_dask.io.formats`, or a dask frame), one fingerprint of it per run (the readers'
own), one step-cache convention (a step directory named by a hash of what the step depends
on, a ``_DONE`` marker, resume), one result type and one progress reporter. Step and output
directories are written, read and published by :mod:`curator_dask.io.parquet_dir`. Every
path is resolved on the client to an absolute path or a URL, and every file goes through
fsspec with the workflow's ``storage_options``, so local disks and ``s3://`` behave the same.
"""

from __future__ import annotations

import contextlib
import html
import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import dask
from dask.base import tokenize
from dask.callbacks import Callback

from curator_dask import config, sizing
from curator_dask.errors import check_columns
from curator_dask.io import formats
from curator_dask.io.layout import join as join  # io's path rules, for the workflows
from curator_dask.io.layout import resolve_path as resolve_path
from curator_dask.io.parquet_dir import get_fs, remove_tree, write_bytes_atomic
from curator_dask.progress import say


# -- the input --------------------------------------------------------------------------------
@dataclass
class DedupInput:
    """A workflow's input, resolved once on the client: a reader over files, or a dask frame.

    ``quarantine_path`` is where the reader sets aside bad records (under the run's cache or
    output directory, never the working directory).
    """

    paths: list[str] | None
    df: Any
    text_column: str
    id_column: str
    blocksize: int | str | None
    input_format: str | None
    storage_options: dict[str, Any] | None
    quarantine_path: str | None = None
    client: Any = field(default=None, repr=False)
    # the column a frame input must have in place of the text (semantic dedup's given
    # embeddings: the text is then never read)
    content_column: str | None = None
    _reader: Any = field(default=None, init=False, repr=False)
    _frame: Any = field(default=None, init=False, repr=False)
    _fingerprint: str | None = field(default=None, init=False, repr=False)

    @classmethod
    def of(cls, workflow: Any, quarantine_path: str | None = None) -> DedupInput:
        """The input of a workflow (its ``input_path``/``df`` and reader fields)."""
        df = getattr(workflow, "df", None)
        raw = getattr(workflow, "input_path", None)
        if df is None and raw is None:
            raise ValueError("give input_path or df")
        paths = None
        if df is None:
            assert raw is not None
            items = [raw] if isinstance(raw, (str, os.PathLike)) else list(raw)
            paths = [resolve_path(p) for p in items]
        fmt = getattr(workflow, "input_format", None)
        if fmt is not None:
            formats.reader_class(fmt)  # a registered format (ValueError naming them)
        return cls(
            paths,
            df,
            workflow.text_column,
            workflow.id_column,
            getattr(workflow, "blocksize", None),
            fmt,
            getattr(workflow, "storage_options", None),
            quarantine_path,
            active_client(getattr(workflow, "client", None)),
            getattr(workflow, "embedding_column", None),
        )

    def reader(self) -> Any:
        """The io reader of the files (None for a dask frame input); made once.

        Without ``blocksize`` the partitions follow the workers' memory limit and number
        (:func:`curator_dask.sizing.default_blocksize`), decided on the client when the
        reader lists the input (within :func:`curator_dask.sizing.workers_of` this input's
        client).
        """
        if self.paths is None:
            return None
        if self._reader is not None and self._reader.quarantine_path == self.quarantine_path:
            return self._reader
        fmt = self.input_format or formats.choose_format(self.paths, self.storage_options)
        self.input_format = fmt
        self._reader = formats.open_reader(
            self.paths,
            fmt,
            text_column=self.text_column,
            id_column=self.id_column,
            blocksize=self.blocksize,
            quarantine_path=self.quarantine_path,
            storage_options=self.storage_options,
        )
        return self._reader

    def check_columns(self) -> None:
        """Raise :class:`~curator_dask.errors.ColumnError` when the input lacks the text or id
        column (a named id column; the default ``"id"`` may be absent in files)."""
        if self.df is not None:
            needed = self.content_column or self.text_column
            check_columns(list(self.df.columns), "the dataframe", needed, self.id_column)
        else:
            with sizing.workers_of(self.client):
                self.reader().check_columns()

    def frame(self) -> Any:
        """The input as a lazy dask frame (built once)."""
        if self._frame is None:
            if self.df is not None:
                self.check_columns()
                self._frame = self.df
            else:
                with sizing.workers_of(self.client):
                    self._frame = self.reader().to_dask()
        return self._frame

    def fingerprint(self) -> str:
        """A key of the input, computed once: the frame's dask token, or each partition's
        :meth:`~curator_dask.io.base.Reader.fingerprint` (io's one rule of "has this input
        changed", the one a resumed pipeline follows: paths, range, and each file's size and
        etag or modification time as listed) with the format and columns."""
        if self._fingerprint is None:
            if self.df is not None:
                self._fingerprint = tokenize(self.df)
            else:
                reader = self.reader()
                with sizing.workers_of(self.client):
                    specs = reader.partitions()
                self._fingerprint = tokenize(
                    [(spec.index, reader.fingerprint(spec)) for spec in specs],
                    self.input_format,
                    self.text_column,
                    self.id_column,
                )
        return self._fingerprint

    def input_locations(self) -> list[str]:
        """The files and directories read (as a reader gives them: the paths, resolved);
        none for a frame."""
        return list(self.paths or [])

    def describe(self) -> Any:
        """What to write in a manifest: the paths, or ``"<dask dataframe>"``."""
        return self.paths if self.paths is not None else "<dask dataframe>"


# -- steps ------------------------------------------------------------------------------------
@dataclass
class StepCache:
    """Step directories under a root: ``<root>/<name>-<key>/``, finished when ``_DONE`` exists.

    A step directory without its marker holds a partial result and is cleared before the step
    runs again; one with it is reused as is (resume).
    """

    root: str
    storage_options: dict[str, Any] | None = None

    def dir(self, name: str, *depends_on: Any) -> str:
        """The directory of step ``name`` for what it ``depends_on``."""
        return join(self.root, f"{name}-{tokenize(*depends_on)[:16]}")

    def is_done(self, directory: str) -> bool:
        """True when ``directory`` holds the marker."""
        fs, d = get_fs(directory, self.storage_options)
        return bool(fs.exists(join(d, "_DONE")))

    def read_done(self, directory: str) -> dict[str, Any]:
        """The JSON of the marker."""
        fs, d = get_fs(directory, self.storage_options)
        return dict(json.loads(fs.cat_file(join(d, "_DONE"))))

    def mark_done(self, directory: str, info: dict[str, Any] | None = None) -> None:
        """Write the marker (atomically)."""
        write_bytes_atomic(
            json.dumps(info or {}, default=str).encode(), join(directory, "_DONE"),
            self.storage_options,
        )  # fmt: skip

    def clear(self, directory: str) -> None:
        """Delete a partial step directory."""
        remove_tree(directory, self.storage_options)


# -- progress ---------------------------------------------------------------------------------
class Reporter:
    """Progress a person can follow on stderr: steps, a line per step, a summary table.

    Lines are printed when ``curator.dedup.progress`` is true (default), at most one
    progress line a second per step.
    """

    def __init__(self, name: str, client: Any = None, stream: TextIO | None = None) -> None:
        self.name = name
        self.client = client
        self.enabled = bool(config.get("dedup.progress", True))
        self.stream = stream or sys.stderr
        self.seconds: dict[str, float] = {}
        self.t0 = time.perf_counter()

    def say(self, text: str) -> None:
        """Say one line, as pipelines do (:func:`curator_dask.progress.say`)."""
        if self.enabled:
            say(f"{self.name}: {text}", self.stream)

    def start(self) -> None:
        """Announce the run (with the dashboard link of a distributed client)."""
        from curator_dask.cluster import dashboard_link

        link = dashboard_link(self.client)
        self.say(f"started{f'; dashboard {link}' if link else ''}")

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time a step, printing its name as it starts and its time as it ends."""
        self.say(f"step {name} ...")
        t = time.perf_counter()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t
        self.say(f"step {name} done in {self.seconds[name]:.1f}s")

    def counter(self, label: str, total: int, unit: str) -> _Counter:
        """A done/total counter printing rate and ETA."""
        return _Counter(self, label, total, unit)

    def compute(
        self, tasks: Sequence[Any], label: str, unit: str = "partitions", docs: bool = False
    ) -> list[Any]:
        """Compute dask ``tasks`` (delayed objects), printing ``done/total`` as they finish.

        With ``docs``, each task's result is a frame with a ``rows`` column, and the line
        also counts the documents done and their rate.
        """
        tasks = list(tasks)
        counter = self.counter(label, len(tasks), unit)
        if not tasks:
            return []
        client = self.client
        if client is not None:
            from distributed import as_completed

            futures = client.compute(tasks)
            for done in as_completed(futures):
                counter.tick(rows=_rows(done.result()) if docs else None)
            return list(client.gather(futures))
        keys = {t.key for t in tasks}
        with _LocalProgress(keys, counter, docs):
            return list(dask.compute(*tasks))

    def total(self) -> float:
        """Seconds since :meth:`start`."""
        return time.perf_counter() - self.t0


def monitor(hook: str, *args: Any) -> None:
    """Call ``curator_dask.monitoring.hooks.<hook>(*args)`` (live metrics); never fails a run."""
    try:
        from curator_dask.monitoring import hooks

        getattr(hooks, hook)(*args)
    except Exception:
        logging.getLogger("curator_dask.dedup").debug("hook %s failed", hook, exc_info=True)


class _Counter:
    def __init__(self, reporter: Reporter, label: str, total: int, unit: str) -> None:
        self.r, self.label, self.total, self.unit = reporter, label, total, unit
        self.done = 0
        self.t0 = time.perf_counter()
        self.last = 0.0
        monitor("on_dedup_progress", reporter.name, label, unit, 0)

    def tick(self, n: int = 1, rows: int | None = None) -> None:
        self.done += n
        if rows is not None:
            self.rows = getattr(self, "rows", 0) + rows
        monitor("on_dedup_progress", self.r.name, self.label, self.unit, n)
        now = time.perf_counter()
        if now - self.last < 1.0 and self.done < self.total:
            return
        self.last = now
        elapsed = max(now - self.t0, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        docs = getattr(self, "rows", None)
        said = "" if docs is None else f", {docs:,} docs ({docs / elapsed:,.1f} docs/s)"
        self.r.say(
            f"  {self.label}: {self.done}/{self.total} {self.unit}{said}, "
            f"{rate:.2f}/s, elapsed {elapsed:.0f}s, eta {eta:.0f}s"
        )


class _LocalProgress(Callback):
    """Counts finished output tasks under the local (threaded / synchronous) schedulers."""

    def __init__(self, keys: set[Any], counter: _Counter, docs: bool = False) -> None:
        super().__init__()
        self.keys = keys
        self.counter = counter
        self.docs = docs

    def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, id: Any) -> None:
        if key in self.keys:
            self.counter.tick(rows=_rows(result) if self.docs else None)


def _rows(result: Any) -> int | None:
    """The ``rows`` a task's result frame says it wrote (None when it says nothing)."""
    try:
        return int(result["rows"].sum())
    except Exception:  # not such a frame: the line counts partitions only
        return None


def active_client(client: Any = None) -> Any:
    """``client``, else the active distributed client, else None (local scheduler)."""
    if client is not None:
        return client
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


# -- the result -------------------------------------------------------------------------------
@dataclass
class DedupResult:
    """What a dedup workflow's ``run()`` found and wrote.

    ``documents`` were deduplicated (read and valid); ``quarantined`` records were set aside
    by the reader (see ``paths["quarantine"]``); ``removed`` documents are listed in
    ``paths["removed_ids"]``, so ``documents + quarantined == kept + removed + quarantined``
    accounts for every record read. ``seconds`` holds each step's time and ``total``.
    ``result["removed"]`` works like the summary dict of earlier versions.
    """

    method: str
    documents: int
    removed: int
    duplicate_groups: int
    quarantined: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        """Documents that remain."""
        return self.documents - self.removed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: counts, ``seconds``, ``paths``, ``stats``, and each path and
        detail also at the top level (``removed_ids``, ``cache_dir``, ...)."""
        out: dict[str, Any] = {
            "method": self.method,
            "documents": self.documents,
            "quarantined": self.quarantined,
            "removed": self.removed,
            "kept": self.kept,
            "duplicate_groups": self.duplicate_groups,
            "seconds": dict(self.seconds),
            "paths": dict(self.paths),
            "stats": dict(self.stats),
        }
        for k, v in {**self.paths, **self.details}.items():
            out.setdefault(k, v)
        return out

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def get(self, key: str, default: Any = None) -> Any:
        """``to_dict().get(key, default)``."""
        return self.to_dict().get(key, default)

    def _rows(self) -> list[tuple[str, str]]:
        rows = [
            ("documents read", f"{self.documents + self.quarantined:,}"),
            ("quarantined", f"{self.quarantined:,}"),
            ("duplicate groups", f"{self.duplicate_groups:,}"),
            ("removed", f"{self.removed:,}"),
            ("kept", f"{self.kept:,}"),
        ]
        rows += [(k, str(v)) for k, v in self.details.items()]
        rows += [(f"{k} (s)", f"{v:.1f}") for k, v in self.seconds.items()]
        rows += [(k, v) for k, v in self.paths.items()]
        return rows

    def __repr__(self) -> str:
        rows = self._rows()
        w = max(len(k) for k, _ in rows)
        lines = [f"DedupResult ({self.method})"] + [f"  {k:<{w}}  {v}" for k, v in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self._rows()
        )
        return f"<b>DedupResult ({html.escape(self.method)})</b><table>{cells}</table>"
