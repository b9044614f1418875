"""The functions that run inside tasks: read, stage, write, and their batch-mode forms.

Each returns its statistics as a value (never a counter mutated in a partition); the
client sums them. The per-partition record a write task returns is also stored with the
run's metadata (:meth:`~curator_dask.io.layout.RunLayout.partition_stats_path`) so a
resumed run can account for partitions it skips. Every file is named and written by the
run's :class:`~curator_dask.io.layout.RunLayout`.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask import _backend, config, progress
from curator_dask._kernels import compile_seconds
from curator_dask.io.base import PartitionSpec, Reader, Writer, empty_quarantine
from curator_dask.io.layout import META_PARQUET, RunLayout, part_name
from curator_dask.stage import (
    ProcessingStage,
    StageStats,
    maskable,
    materialise,
    ready_stage,
    release_arrow_memory,
    run_masked,
    run_stage,
)


# -- streaming mode ---------------------------------------------------------------------------
@dataclass
class Carry:
    """What travels along one partition's chain of tasks."""

    index: int
    part: Any
    quarantine: pd.DataFrame | None
    stats: list[dict[str, Any]] = field(default_factory=list)
    removed: list[Any] | None = None  # with keep_removed: what each stage dropped
    #: The rows of ``part`` still kept (a boolean array) while a chain of filters runs on
    #: it without copying it (:func:`~curator_dask.stage.run_masked`); None: every row.
    keep: Any | None = None

    def materialised(self) -> Carry:
        """This carry with only its kept rows in ``part`` (copied once) and no mask."""
        if self.keep is None:
            return self
        return replace(self, part=materialise(self.part, self.keep), keep=None)


def _dropped(part: Any, out: Any, stage: ProcessingStage, n_removed: int) -> Any | None:
    """The rows of ``part`` that ``stage`` dropped, with a ``removed_by`` column.

    None when they cannot be told apart: a stage that renumbers its rows (the index of its
    output is not a subset of its input's).
    """
    gone = part[~part.index.isin(out.index)]
    if len(gone) != n_removed:
        return None
    return gone.assign(removed_by=stage.stage_name)


def read_task(reader: Reader, spec: PartitionSpec) -> Carry:
    """Read one partition; the reader's statistics are the chain's first entry."""
    t0 = time.perf_counter()
    result = reader.read_partition(spec)
    data = result.data
    n_quarantined = len(result.quarantine)
    stats = StageStats(
        type(reader).__name__,
        docs_in=int(result.docs_read),
        docs_out=len(data),
        quarantined=n_quarantined,
        seconds=time.perf_counter() - t0,
    )
    progress.task_share(1.0)  # the partition's progress moves before it is written
    return Carry(spec.index, data, result.quarantine, [stats.to_dict()])


def stage_task(stage: ProcessingStage, carry: Carry, keep_removed: bool = False) -> Carry:
    """Run one stage (set up once in this process) on the carried partition.

    With ``keep_removed`` the rows the stage dropped travel on with the partition, tagged
    with the stage's name, to be written by the write task.

    Consecutive filters share the partition they were given: each narrows the carry's
    running mask (:func:`~curator_dask.stage.run_masked`) and the kept rows are copied
    once, before the next stage that is not such a filter or the write; the statistics
    are those of filtering stage by stage. Says its progress as it goes
    (:func:`curator_dask.progress.task_share`): when done, and after each slice of a stage
    with a ``batch_size`` or a row-wise one (``curator.execution.slice-rows``).
    """
    ready = ready_stage(stage)
    if maskable(ready, carry.part):
        release_arrow_memory()  # what the task before this one (a reader) left behind
        part, keep, stats = run_masked(ready, carry.part, carry.keep)  # type: ignore[arg-type]
        removed = carry.removed
        if keep_removed:
            removed = list(removed or [])
            before = np.ones(len(part), bool) if carry.keep is None else carry.keep
            rows = np.flatnonzero(before & ~keep)
            if len(rows):  # the rows as this stage got them: no column of its own
                removed.append(carry.part.iloc[rows].assign(removed_by=stage.stage_name))
        progress.task_share(1.0)
        return replace(
            carry, part=part, keep=keep, stats=[*carry.stats, stats.to_dict()], removed=removed
        )
    c0 = compile_seconds()
    carry = carry.materialised()  # copying the kept rows may compile a kernel too
    out, stats = run_stage(
        ready,
        carry.part,
        lambda done, total: progress.task_share(done / total),
        slice_rows=config.get("execution.slice-rows"),
    )
    stats = replace(stats, compile_seconds=compile_seconds() - c0)
    removed = carry.removed
    if keep_removed:
        removed = list(removed or [])
        if stats.removed:
            gone = _dropped(carry.part, out, stage, stats.removed)
            if gone is None:
                raise ValueError(
                    f"keep_removed: stage {stage.stage_name!r} renumbers its rows, so the "
                    "documents it removed cannot be told apart; keep the input's index"
                )
            removed.append(gone)
    progress.task_share(1.0)
    return replace(carry, part=out, stats=[*carry.stats, stats.to_dict()], removed=removed)


def write_task(
    writer: Writer,
    carry: Carry,
    layout: RunLayout,
    token: str,
    note: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the partition, its quarantine records and its statistics; return the record.

    The statistics file is written last: a partition counts as done for a resumed run only
    when its output and its statistics are both there. ``note`` is added to the record
    (e.g. ``{"split": ...}`` for a partition computed in pieces).
    """
    t0 = time.perf_counter()
    c0 = compile_seconds()
    carry = carry.materialised()
    n_in = len(carry.part)
    written = writer.write_partition(carry.part, carry.index)
    if carry.quarantine is not None:
        layout.write_quarantine(carry.quarantine, carry.index)
    if carry.removed is not None:
        frames = [f for f in carry.removed if len(f)]
        layout.write_removed(_concat_frames(frames) if frames else None, carry.index)
    compiled = compile_seconds() - c0  # a first run's kernel compile, apart from the work
    stats = StageStats(
        type(writer).__name__,
        docs_in=n_in,
        docs_out=int(written.rows),
        seconds=max(time.perf_counter() - t0 - compiled, 0.0),
        compile_seconds=compiled,
    )
    record = {
        "index": carry.index,
        "token": token,
        "path": written.path,
        "rows": int(written.rows),
        "schema": encode_schema(written.schema),
        "stages": [*carry.stats, stats.to_dict()],
        "finished_at": time.time(),
        **(note or {}),
    }
    layout.write_json(layout.partition_stats_path(carry.index), record)
    return record


def encode_schema(schema: bytes | None) -> str | None:
    """A serialised arrow schema as text for a JSON record."""
    return None if schema is None else base64.b64encode(schema).decode("ascii")


def decode_schema(text: str | None) -> pa.Schema | None:
    """The arrow schema of :func:`encode_schema`'s text."""
    if not text:
        return None
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def conform_task(
    writer: Writer, layout: RunLayout, record: dict[str, Any], schema: pa.Schema
) -> dict[str, Any]:
    """Rewrite one written partition to the run's schema; store and return its new record."""
    new = writer.conform(int(record["index"]), schema)
    record = {**record, "schema": encode_schema(new)}
    layout.write_json(layout.partition_stats_path(int(record["index"])), record)
    return record


# -- pieces: a partition split after running out of memory -------------------------------
@dataclass(frozen=True)
class Piece:
    """Part of partition ``spec.index``, computed on its own after an out-of-memory failure.

    ``label`` is the piece's path in the binary split tree (``""`` the whole partition,
    ``"0"``/``"1"`` its halves, ``"01"`` the second half of the first half), so sorting the
    labels gives the pieces in row order. ``spec`` is what is read: a narrower byte range
    (JSONL) or row-group range (Parquet) when the partition is such a range, else the
    partition itself, of which only the ``rows = (k, m)`` slice (the k-th of m equal row
    slices) is kept after reading.
    """

    spec: PartitionSpec
    label: str = ""
    rows: tuple[int, int] | None = None


def read_piece_task(reader: Reader, piece: Piece) -> Carry:
    """Read one piece of a split partition (the quarantine goes with its first row slice)."""
    t0 = time.perf_counter()
    carry = read_task(reader, piece.spec)
    if piece.rows is None:
        return carry
    k, m = piece.rows
    n = len(carry.part)
    lo, hi = n * k // m, n * (k + 1) // m
    part = carry.part.iloc[lo:hi]
    quarantine = carry.quarantine if k == 0 else None
    n_quarantined = 0 if quarantine is None else len(quarantine)
    stats = StageStats(
        type(reader).__name__,
        docs_in=(hi - lo) + n_quarantined,
        docs_out=hi - lo,
        quarantined=n_quarantined,
        seconds=time.perf_counter() - t0,
    )
    return Carry(carry.index, part, quarantine, [stats.to_dict()])


def _concat_frames(parts: list[Any]) -> Any:
    nonempty = [p for p in parts if len(p)] or parts[:1]
    if len(nonempty) == 1:
        return nonempty[0]
    if isinstance(nonempty[0], pd.DataFrame):
        return pd.concat(nonempty)
    return _backend.frame_module().concat(nonempty)


def _sum_stats(stats: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for column in zip(*stats, strict=True):
        total = StageStats.from_dict(column[0])
        for d in column[1:]:
            total = total + StageStats.from_dict(d)
        out.append(replace(total, partitions=1).to_dict())  # still one partition
    return out


def write_pieces_task(
    writer: Writer,
    carries: list[Carry],
    layout: RunLayout,
    token: str,
    split: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the pieces of a split partition, in order, as that partition's one file.

    The output file, quarantine file and statistics file have the names and contents an
    unsplit run gives them (the statistics also hold ``split``), so resume and downstream
    readers see no difference.
    """
    carries = [c.materialised() for c in carries]
    part = _concat_frames([c.part for c in carries])
    quarantines = [c.quarantine for c in carries if c.quarantine is not None]
    quarantines = [q for q in quarantines if len(q)] or quarantines[:1] or [empty_quarantine()]
    quarantine = (
        pd.concat(quarantines, ignore_index=True) if len(quarantines) > 1 else quarantines[0]
    )
    carry = Carry(carries[0].index, part, quarantine, _sum_stats([c.stats for c in carries]))
    if any(c.removed is not None for c in carries):
        carry.removed = [f for c in carries for f in (c.removed or [])]
    return write_task(writer, carry, layout, token, {"split": split or {}})


# -- batch mode ---------------------------------------------------------------------------------
def _step_file(layout: RunLayout, step_dir: str, index: int, suffix: str) -> str:
    return layout.work_dir(step_dir, part_name(index, suffix))


def _marker(layout: RunLayout, step_dir: str, index: int, token: str, stats: dict) -> dict:
    marker = {"index": index, "token": token, "stats": stats}
    layout.write_json(_step_file(layout, step_dir, index, ".done.json"), marker)
    return marker


def batch_done(layout: RunLayout, step_dir: str, index: int, token: str) -> dict[str, Any] | None:
    """Return the completion marker of a batch step for ``index`` if it matches ``token``."""
    marker = layout.read_json(_step_file(layout, step_dir, index, ".done.json"))
    if marker is None or marker.get("token") != token:
        return None
    if not layout.exists(_step_file(layout, step_dir, index, META_PARQUET)):
        return None
    return marker


def batch_read_task(
    reader: Reader, spec: PartitionSpec, layout: RunLayout, step_dir: str, token: str
) -> dict[str, Any]:
    """Batch step 0: read a partition to Parquet, write its quarantine records."""
    carry = read_task(reader, spec)
    layout.write_quarantine(carry.quarantine, spec.index)
    layout.write_frame(_step_file(layout, step_dir, spec.index, META_PARQUET), carry.part)
    return _marker(layout, step_dir, spec.index, token, carry.stats[0])


def batch_stage_task(
    stage: ProcessingStage,
    index: int,
    layout: RunLayout,
    in_dir: str,
    step_dir: str,
    token: str,
) -> dict[str, Any]:
    """Batch step k: run a stage on the previous step's Parquet file of one partition."""
    part = layout.read_frame(
        _step_file(layout, in_dir, index, META_PARQUET), _backend.frame_module()
    )
    out, stats = run_stage(ready_stage(stage), part)
    layout.write_frame(_step_file(layout, step_dir, index, META_PARQUET), out)
    return _marker(layout, step_dir, index, token, stats.to_dict())


def batch_write_task(
    writer: Writer,
    index: int,
    layout: RunLayout,
    in_dir: str,
    stage_stats: list[dict[str, Any]],
    token: str,
) -> dict[str, Any]:
    """Batch last step: write the final partition with the statistics of every step."""
    part = layout.read_frame(
        _step_file(layout, in_dir, index, META_PARQUET), _backend.frame_module()
    )
    # Step 0 already wrote the quarantine records: carry none, so they are kept.
    carry = Carry(index, part, None, list(stage_stats))
    return write_task(writer, carry, layout, token)


# -- worker setup -------------------------------------------------------------------------
def setup_on_node(stages: list[ProcessingStage]) -> None:
    """Run every stage's ``setup_on_node`` (called on one worker per host)."""
    for stage in stages:
        stage.setup_on_node()
