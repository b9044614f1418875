"""What a dedup workflow's run uses: its input, step cache, progress, client and result.

The workflows' base class, the skeleton of a run, is
:class:`~curator_dask.dedup._common.DedupWorkflow`; this module was ``dedup/_base.py``.
One input (the io readers' listing and format choice,
:mod:`curator_dask.io.formats`, or a dask frame), one fingerprint of it per run (the readers'
own), one step-cache convention (a step directory named by a hash of what the step depends
on, a ``_DONE`` marker, resume) and one result type; the progress display is
:class:`curator_dask.progress.Reporter`, as pipelines'. Step and output directories are
written, read and published by :mod:`curator_dask.io.parquet_dir`. Every path is resolved on
the client to an absolute path or a URL, and every file goes through the file system that
``io``'s ``get_fs`` gives for it with the workflow's ``storage_options`` (fsspec's, or its
local one without fsspec for a plain path), so local disks and ``s3://`` behave the same.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from typing import Any

from dask.base import tokenize

from curator_dask import sizing
from curator_dask.cluster import active_client as active_client
from curator_dask.cluster import local_directories as local_directories
from curator_dask.errors import check_columns
from curator_dask.io import formats
from curator_dask.io.layout import join as join  # io's path rules, for the workflows
from curator_dask.io.layout import resolve_path as resolve_path
from curator_dask.io.parquet_dir import get_fs, remove_tree, write_bytes_atomic
from curator_dask.progress import Reporter as Reporter  # the one progress display


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
        reader lists the input, for the workers of this input's client
        (:func:`curator_dask.sizing.workers_of`).
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
            self.reader().check_columns(self.reader().partitions(sizing.workers_of(self.client)))

    def frame(self) -> Any:
        """The input as a lazy dask frame (built once)."""
        if self._frame is None:
            if self.df is not None:
                self.check_columns()
                self._frame = self.df
            else:
                self._frame = self.reader().to_dask(sizing.workers_of(self.client))
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
                specs = reader.partitions(sizing.workers_of(self.client))
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


# -- the result -------------------------------------------------------------------------------
@dataclass
class DedupResult:
    """What a dedup workflow's ``run()`` found and wrote.

    ``documents`` were deduplicated (read and valid); ``quarantined`` records were set aside
    by the reader (see ``paths["quarantine"]``); ``removed`` documents are listed in
    ``paths["removed_ids"]``, so ``documents + quarantined == kept + removed + quarantined``
    accounts for every record read. ``seconds`` holds each step's time, ``total``, and
    ``compile``: the part of the steps' time spent compiling kernels (first run on a machine).
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
