"""Stages: lazy, partition-wise transforms that declare the resources they need.

A stage is written against one partition (a pandas or cudf frame). Subclass one base
and implement one method:

- :class:`ProcessingStage` -- ``process(part) -> part``;
- :class:`Filter` -- ``keep(text) -> bool Series`` (or ``score`` + ``keep_score``);
- :class:`Modifier` -- ``modify(text) -> Series``;

or decorate a function with :func:`processing_stage`.

State that a stage builds in :meth:`ProcessingStage.setup` (a model, a tokenizer) goes in
attributes whose names start with ``_``: they are never pickled, so they never travel
inside a task graph, and :meth:`setup` runs once per worker process.
"""

from __future__ import annotations

import copy
import ctypes
import dataclasses
import functools
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from dask.base import tokenize

from curator_dask._kernels import compile_seconds

S = TypeVar("S", bound="ProcessingStage")


@dataclass(frozen=True)
class Resources:
    """What one task of a stage needs on a dask worker.

    Parameters
    ----------
    cpus : float
        Threads the task occupies (informational on CPU-only clusters).
    gpus : float
        GPUs per task; fractions let several tasks share one GPU (``0.25`` -> four).
        Tasks are only placed on workers that advertise a ``GPU`` resource.
    gpu_memory_gb : float
        GPU memory the task needs, as an alternative to ``gpus``; tasks are only placed
        on workers that advertise ``GPU_MEMORY_GB``. Exclusive with ``gpus``.

    Examples
    --------
    >>> Resources(gpus=0.5).to_dask()
    {'GPU': 0.5}
    >>> Resources().to_dask()
    {}
    """

    cpus: float = 1.0
    gpus: float = 0.0
    gpu_memory_gb: float = 0.0

    def __post_init__(self) -> None:
        for name in ("cpus", "gpus", "gpu_memory_gb"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Resources.{name} must be a number >= 0, got {value!r}")
        if self.gpus and self.gpu_memory_gb:
            raise ValueError(
                "Resources: give either gpus or gpu_memory_gb, not both "
                f"(got gpus={self.gpus}, gpu_memory_gb={self.gpu_memory_gb})"
            )

    @property
    def requires_gpu(self) -> bool:
        """True when the stage must run on a GPU worker."""
        return bool(self.gpus or self.gpu_memory_gb)

    def to_dask(self) -> dict[str, float]:
        """Return the ``resources=`` mapping for :meth:`distributed.Client.submit`.

        CPU-only stages ask for nothing, so they can run anywhere and never hold a GPU.
        """
        if self.gpus:
            return {"GPU": float(self.gpus)}
        if self.gpu_memory_gb:
            return {"GPU_MEMORY_GB": float(self.gpu_memory_gb)}
        return {}


@dataclass(frozen=True)
class StageStats:
    """Counts and timing of one stage over one partition (or summed over many).

    ``seconds`` is the stage's work; ``compile_seconds`` the time it spent compiling numba
    kernels on their first call on a machine (:func:`curator_dask._kernels.compile_seconds`),
    not counted in ``seconds``.
    """

    name: str
    docs_in: int = 0
    docs_out: int = 0
    quarantined: int = 0
    seconds: float = 0.0
    partitions: int = 1
    extra: dict[str, int] = field(default_factory=dict)
    #: A few documents the stage removed (``id`` and the start of the text), for the report.
    examples: tuple[dict[str, str], ...] = ()
    compile_seconds: float = 0.0

    @property
    def removed(self) -> int:
        """Documents this stage dropped on purpose (not quarantined)."""
        return self.docs_in - self.docs_out - self.quarantined

    def __add__(self, other: StageStats) -> StageStats:
        if other.name != self.name:
            raise ValueError(f"cannot add stats of {other.name!r} to {self.name!r}")
        extra = dict(self.extra)
        for k, v in other.extra.items():
            extra[k] = extra.get(k, 0) + v
        return StageStats(
            self.name,
            self.docs_in + other.docs_in,
            self.docs_out + other.docs_out,
            self.quarantined + other.quarantined,
            self.seconds + other.seconds,
            self.partitions + other.partitions,
            extra,
            (self.examples + other.examples)[:REMOVED_EXAMPLES],
            self.compile_seconds + other.compile_seconds,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (``examples`` only when there are some)."""
        d = dataclasses.asdict(self)
        d["removed"] = self.removed
        if self.examples:
            d["examples"] = [dict(e) for e in self.examples]
        else:
            d.pop("examples")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StageStats:
        """The inverse of :meth:`to_dict` (``removed`` is derived, not read)."""
        return cls(
            d["name"],
            int(d["docs_in"]),
            int(d["docs_out"]),
            int(d.get("quarantined", 0)),
            float(d.get("seconds", 0.0)),
            int(d.get("partitions", 1)),
            dict(d.get("extra") or {}),
            tuple(dict(e) for e in d.get("examples") or ()),
            float(d.get("compile_seconds", 0.0)),
        )


@dataclass(kw_only=True)
class ProcessingStage:
    """Base of every stage: a transform of one partition.

    Parameters
    ----------
    name : str, optional
        Shown in reprs and statistics; defaults to the class name.
    resources : Resources
        Where the stage's tasks may run (see :class:`Resources`).
    batch_size : int, optional
        If set, :meth:`process` is called on slices of at most this many rows.
    """

    name: str | None = None
    resources: Resources = field(default_factory=Resources)
    batch_size: int | None = None

    # -- the methods a subclass implements ------------------------------------------
    def process(self, part: Any) -> Any:
        """Transform one partition and return the result."""
        raise NotImplementedError(f"{type(self).__name__} must implement process(part)")

    def setup_on_node(self) -> None:
        """Run once per machine before any task (e.g. download weights to local disk)."""

    def setup(self) -> None:
        """Run once per worker process before the first task (e.g. load a model)."""

    def teardown(self) -> None:
        """Release what :meth:`setup` acquired."""

    @property
    def row_wise(self) -> bool:
        """True when each output row is its input row's alone, every row kept (a
        :class:`Modifier` that keeps the base's :meth:`process`): the executor may then
        run it on slices of a partition (``curator.execution.slice-rows``) and say its
        progress between them. False here."""
        return False

    def process_with_stats(self, part: Any) -> tuple[Any, dict[str, int]]:
        """Like :meth:`process`, and return extra integer counters for the run statistics."""
        return self.process(part), {}

    def output_meta(self, meta: Any) -> Any:
        """Return the empty output frame for an empty input ``meta`` (used by dask).

        The default runs the stage on ``meta``; override when that would need ``setup``.
        """
        return run_stage(self, meta)[0]

    # -- helpers ----------------------------------------------------------------------
    @property
    def stage_name(self) -> str:
        """The name used in statistics and reprs."""
        return self.name or type(self).__name__

    def with_(
        self: S,
        *,
        name: str | None = None,
        resources: Resources | None = None,
        batch_size: int | None = None,
    ) -> S:
        """Return a copy with a new name, resources or batch size; ``self`` is unchanged.

        Examples
        --------
        >>> from curator_dask.filters import WordCountFilter
        >>> f = WordCountFilter().with_(resources=Resources(cpus=2))
        >>> f.resources.cpus
        2
        """
        new = copy.copy(self)
        if name is not None:
            new.name = name
        if resources is not None:
            if not isinstance(resources, Resources):
                raise TypeError(f"resources must be a Resources, got {type(resources).__name__}")
            new.resources = resources
        if batch_size is not None:
            if batch_size < 1:
                raise ValueError(f"batch_size must be >= 1, got {batch_size}")
            new.batch_size = batch_size
        return new

    def token(self) -> str:
        """A deterministic hash of the stage's public parameters."""
        return tokenize(type(self).__module__, type(self).__qualname__, self.__getstate__())

    def __getstate__(self) -> dict[str, Any]:
        # Attributes starting with "_" are runtime state built by setup(): never pickled.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __call__(self, df: Any) -> Any:
        """Apply the stage lazily to a dask dataframe (notebook use); nothing computes."""
        meta = self.output_meta(df._meta)
        return df.map_partitions(_apply_partition, self, meta=meta, enforce_metadata=False)

    def describe(self) -> str:
        """One line for reprs: name and resources."""
        r = self.resources
        where = (
            f"gpus={r.gpus}"
            if r.gpus
            else (f"gpu_memory_gb={r.gpu_memory_gb}" if r.gpu_memory_gb else f"cpus={r.cpus}")
        )
        return f"{self.stage_name} [{where}]"


# -- worker-side execution ----------------------------------------------------------------
_READY: dict[str, ProcessingStage] = {}
_READY_LOCK = threading.Lock()


#: The last stage objects looked up, by identity: (the object, its state then, its ready one).
_SEEN: dict[int, tuple[Any, dict[str, Any], ProcessingStage]] = {}


def ready_stage(stage: ProcessingStage) -> ProcessingStage:
    """Return the set-up instance of ``stage`` for this process, calling ``setup`` once.

    The instance is found by the token of the stage's parameters; an object seen before
    whose parameters still compare equal is found without hashing them again (a task
    per stage and partition asks for it).
    """
    seen = _SEEN.get(id(stage))
    if seen is not None and seen[0]() is stage and stage.__getstate__() == seen[1]:
        return seen[2]
    key = stage.token()
    got = _READY.get(key)
    if got is None:
        with _READY_LOCK:
            got = _READY.get(key)
            if got is None:
                got = copy.copy(stage)
                got.setup()
                _READY[key] = got
    state = stage.__getstate__()
    if all(_immutable(v) for v in state.values()):  # else a change in place goes unseen
        if len(_SEEN) >= 256:
            _SEEN.clear()
        _SEEN[id(stage)] = (weakref.ref(stage), dict(state), got)
    return got


def _immutable(value: Any) -> bool:
    """True for values that compare by content and cannot change in place."""
    if value is None or isinstance(value, (str, bytes, int, float, bool, Resources)):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(v) for v in value)
    return False


def teardown_all() -> None:
    """Tear down every stage set up in this process (run on workers at the end of a run)."""
    with _READY_LOCK:
        for stage in _READY.values():
            stage.teardown()
        _READY.clear()
        _SEEN.clear()


def release_arrow_memory() -> None:
    """Give the pages Arrow's allocator freed back to the system (it keeps them for reuse,
    which makes a worker's RSS creep up over many partitions); pipelines' stages and the
    dedup workflows' tasks call it."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def release_freed_memory() -> None:
    """:func:`release_arrow_memory`, and the freed pages that the C library's allocator
    keeps (glibc's ``malloc_trim``; nothing elsewhere). It walks the heap (milliseconds),
    so it is for between the steps of a run in one process, not for every partition."""
    release_arrow_memory()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # a C library without it (musl)
        return None


def maskable(stage: ProcessingStage, part: Any) -> bool:
    """True when ``stage`` can run on ``part`` with a running mask (:func:`run_masked`).

    A :class:`Filter` whose :meth:`~Filter.process` is the base's, without a
    ``batch_size``, on a pandas frame with unique column names.
    """
    return (
        isinstance(stage, Filter)
        and type(stage).process is Filter.process
        and not stage.batch_size
        and isinstance(part, pd.DataFrame)
        and part.columns.is_unique
    )


def run_masked(
    stage: Filter, part: pd.DataFrame, keep: Any | None
) -> tuple[pd.DataFrame, Any, StageStats]:
    """Run a set-up filter on the rows of ``part`` where ``keep``, without copying any row.

    A chain of filters passes the partition it was given from one filter to the next
    with a running mask (``keep``: a boolean numpy array, one entry per row of ``part``,
    or None for every row), and the kept rows are copied once, by
    :func:`materialise`, where the chain ends. Returns ``part`` (with the filter's score
    column when it writes one), the new mask and the statistics :func:`run_stage` gives
    for the same rows: ``docs_in`` the rows kept so far, ``docs_out`` those this filter
    keeps too, the same examples. Measures are computed for the kept rows only
    (:func:`curator_dask.text.only_rows`).
    """
    from curator_dask.text import only_rows

    t0 = time.perf_counter()
    c0 = compile_seconds()
    before = np.ones(len(part), bool) if keep is None else keep
    with only_rows(part[stage.text_column], keep):
        out, mask = stage.keep_mask(part)
    if isinstance(mask, pd.Series) and not (
        mask.index is part.index or mask.index.equals(part.index)
    ):
        # Aligned on the index as pandas' part[mask] aligns it (and raising where it raises).
        positions = pd.Series(np.arange(len(part)), index=part.index)[mask].to_numpy()
        flags = np.zeros(len(part), bool)
        flags[positions] = True
    else:
        flags = np.asarray(mask, dtype=bool)
    if stage.score_only:
        out = out.assign(**{f"{stage.stage_name}_keep": mask})
        after = before
    else:
        after = before & flags
    n_in, n_out = int(before.sum()), int(after.sum())
    examples: tuple[dict[str, str], ...] = ()
    if n_out < n_in:
        gone = np.flatnonzero(before & ~after)[:REMOVED_EXAMPLES]
        examples = _examples(stage, part.iloc[gone])
    compiled = compile_seconds() - c0  # apart from the work, as in run_stage
    seconds = max(time.perf_counter() - t0 - compiled, 0.0)
    stats = StageStats(stage.stage_name, n_in, n_out, 0, seconds, 1, {}, (), compiled)
    return out, after, dataclasses.replace(stats, examples=examples)


def materialise(part: Any, keep: Any | None) -> Any:
    """The rows of ``part`` where ``keep`` (a chain's running mask; None: all of them)."""
    if keep is None:
        return part
    from curator_dask.text import filter_rows

    return filter_rows(part, keep)


def run_stage(
    stage: ProcessingStage,
    part: Any,
    on_rows: Callable[[int, int], None] | None = None,
    slice_rows: int | None = None,
) -> tuple[Any, StageStats]:
    """Run a set-up ``stage`` on one partition; return the output and its statistics.

    A stage with a ``batch_size`` runs on slices of that many rows; a :attr:`row_wise`
    one (a modifier) on slices of ``slice_rows`` (None: whole), which gives the same
    output. ``on_rows(done, total)`` is called after each slice (the rows done so far, of
    the partition's): how a task says its progress before it ends.
    """
    t0 = time.perf_counter()
    c0 = compile_seconds()
    release_arrow_memory()  # what the task before this one (a reader) left behind
    n_in = len(part)
    extra: dict[str, int] = {}
    rows = stage.batch_size or (slice_rows if stage.row_wise else None)
    if rows and n_in > rows:
        outs = []
        for start in range(0, n_in, rows):
            out, ex = stage.process_with_stats(part.iloc[start : start + rows])
            outs.append(out)
            for k, v in ex.items():
                extra[k] = extra.get(k, 0) + v
            if on_rows is not None:
                on_rows(min(start + rows, n_in), n_in)
        out = _concat(outs)
    else:
        out, extra = stage.process_with_stats(part)
    # Arrow's allocator (mimalloc or jemalloc) keeps what the stage freed for reuse; a
    # chain of stages then holds several partitions' worth of freed pages. Give them
    # back (a few ms) so a worker's resident memory follows its live partitions.
    release_arrow_memory()
    # a kernel's first call on this machine compiles it: reported apart, not as the work
    compiled = compile_seconds() - c0
    seconds = max(time.perf_counter() - t0 - compiled, 0.0)
    removed_some = len(out) < n_in and isinstance(stage, Filter)
    examples = _removed_examples(stage, part, out) if removed_some else ()
    stats = StageStats(
        stage.stage_name, n_in, len(out), 0, seconds, 1, dict(extra), examples, compiled
    )
    return out, stats


_SECRET = re.compile(r"storage_options|key|secret|token|password|credential", re.IGNORECASE)


def parameters_of(obj: Any) -> dict[str, Any]:
    """The constructor parameters of a stage, reader or writer, as JSON-able values.

    Dataclass fields that the constructor takes (``resources`` and private ones left out);
    values that JSON cannot hold are given as their ``repr``. What the report shows as
    "what produced this".

    >>> from curator_dask.filters import WordCountFilter
    >>> parameters_of(WordCountFilter(min_words=20))["min_words"]
    20
    """
    if not dataclasses.is_dataclass(obj):
        return {}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.init or f.name.startswith("_") or f.name == "resources":
            continue
        if _SECRET.search(f.name):  # credentials must not reach _stats.json
            continue
        value = getattr(obj, f.name, None)
        if isinstance(value, (str, int, float, bool)) or value is None:
            out[f.name] = value
        elif isinstance(value, (list, tuple)) and all(
            isinstance(v, (str, int, float, bool)) for v in value
        ):
            out[f.name] = list(value)
        else:
            out[f.name] = repr(value)[:200]
    return out


#: How many removed documents a stage's statistics keep (summed stats keep the first ones).
REMOVED_EXAMPLES = 3
_EXAMPLE_CHARS = 400


def _removed_examples(stage: ProcessingStage, part: Any, out: Any) -> tuple[dict[str, str], ...]:
    """The first few rows of ``part`` whose index is not in ``out`` (id and start of text)."""
    text_column = getattr(stage, "text_column", "text")
    if not hasattr(part, "columns") or text_column not in part.columns:
        return ()
    try:
        gone = part[~part.index.isin(out.index)].head(REMOVED_EXAMPLES)
        if hasattr(gone, "to_pandas"):  # cudf
            gone = gone.to_pandas()
    except Exception:  # an index that cannot be compared: no examples, never a failed run
        return ()
    return _examples(stage, gone)


def _examples(stage: ProcessingStage, gone: Any) -> tuple[dict[str, str], ...]:
    """Id and start of text of the removed rows ``gone`` (a pandas frame)."""
    text_column = getattr(stage, "text_column", "text")
    if text_column not in gone.columns:
        return ()
    id_column = "id" if "id" in gone.columns else None
    return tuple(
        {
            "id": str(row[id_column]) if id_column else str(idx),
            "text": str(row[text_column])[:_EXAMPLE_CHARS],
        }
        for idx, row in gone.iterrows()
    )


def _concat(parts: list[Any]) -> Any:
    if isinstance(parts[0], (pd.DataFrame, pd.Series)):
        return pd.concat(parts)
    mod = __import__(type(parts[0]).__module__.split(".")[0])
    return mod.concat(parts)


def _apply_partition(part: Any, stage: ProcessingStage) -> Any:
    return run_stage(ready_stage(stage), part)[0]


# -- the three ways to extend --------------------------------------------------------------
@dataclass(kw_only=True)
class Filter(ProcessingStage):
    """Keep the documents for which :meth:`keep` is True.

    Implement ``keep(text) -> bool Series``, or ``score(text) -> Series`` plus
    ``keep_score(score) -> bool Series`` to expose a score.

    Parameters
    ----------
    text_column : str
        Column holding the text.
    score_column : str, optional
        If set and the filter has a score, write it to this column.
    score_only : bool
        Keep every document; only write the score (and ``<name>_keep``) columns, so a
        notebook user can look at distributions before choosing thresholds.
    invert : bool
        Keep the documents the filter would drop.
    """

    text_column: str = "text"
    score_column: str | None = None
    score_only: bool = False
    invert: bool = False

    def score(self, text: Any) -> Any:
        """Return a numeric score per document (optional)."""
        raise NotImplementedError

    def keep_score(self, score: Any) -> Any:
        """Return the keep mask for scores from :meth:`score`."""
        raise NotImplementedError

    def keep(self, text: Any) -> Any:
        """Return a boolean Series: True for documents to keep."""
        return self.keep_score(self.score(text))

    @property
    def score_output_column(self) -> str | None:
        """The column the score is written to (``None`` when no score is written)."""
        if not self.has_score():
            return None
        return self.score_column or (f"{self.stage_name}_score" if self.score_only else None)

    def has_score(self) -> bool:
        """True when the subclass implements :meth:`score`."""
        return type(self).score is not Filter.score

    def keep_mask(self, part: Any) -> tuple[Any, Any]:
        """``part`` with the score column (when one is written) and the boolean keep mask.

        What :meth:`process` computes before it keeps the rows (``score_only`` aside:
        the mask is the filter's, never all True).
        """
        text = part[self.text_column]
        if self.has_score():
            scores = self.score(text)
            mask = self.keep_score(scores)
            col = self.score_output_column
            if col:
                part = part.assign(**{col: scores})
        else:
            mask = self.keep(text)
        mask = mask.fillna(False).astype(bool)
        if self.invert:
            mask = ~mask
        return part, mask

    def process(self, part: Any) -> Any:
        part, mask = self.keep_mask(part)
        if self.score_only:
            return part.assign(**{f"{self.stage_name}_keep": mask})
        # Imported here: the string kit loads numba, which a stage without text need not.
        from curator_dask.text import filter_rows

        return filter_rows(part, mask)


@dataclass(kw_only=True)
class Modifier(ProcessingStage):
    """Rewrite the text column with :meth:`modify`."""

    text_column: str = "text"

    def modify(self, text: Any) -> Any:
        """Return the new text Series (same index)."""
        raise NotImplementedError(f"{type(self).__name__} must implement modify(text)")

    def process(self, part: Any) -> Any:
        return part.assign(**{self.text_column: self.modify(part[self.text_column])})

    @property
    def row_wise(self) -> bool:
        """True unless a subclass replaces :meth:`process` (``modify`` maps each document
        on its own)."""
        return type(self).process is Modifier.process


@dataclass(kw_only=True)
class FunctionStage(ProcessingStage):
    """A stage made from a function of one partition (see :func:`processing_stage`)."""

    fn: Callable[[Any], Any]

    def process(self, part: Any) -> Any:
        return self.fn(part)

    @property
    def stage_name(self) -> str:
        return self.name or str(getattr(self.fn, "__name__", "function"))


def processing_stage(
    fn: Callable[[Any], Any] | None = None,
    *,
    name: str | None = None,
    resources: Resources | None = None,
    batch_size: int | None = None,
) -> Any:
    """Turn a function of one partition into a stage.

    Examples
    --------
    >>> import pandas as pd
    >>> @processing_stage(resources=Resources(cpus=1))
    ... def add_length(part):
    ...     return part.assign(n_chars=part["text"].str.len())
    >>> add_length.process(pd.DataFrame({"text": ["ab"]}))["n_chars"].tolist()
    [2]
    """

    def wrap(f: Callable[[Any], Any]) -> FunctionStage:
        return FunctionStage(
            fn=f, name=name, resources=resources or Resources(), batch_size=batch_size
        )

    return wrap(fn) if fn is not None else wrap
