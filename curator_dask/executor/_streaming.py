"""The streaming run: a window of partitions in flight, each a chain of tasks to its write.

Every future the run waits on is in one of three states:

``WHOLE``
    a partition's chain ``read -> stage 1 -> ... -> write``; it ends in the partition's
    statistics record.
``PIECE``
    a piece of a partition that ran out of memory (see ``_oom``): ``read piece -> stages``,
    not written; its data stays on the worker until its siblings are done.
``MERGE``
    the write of a split partition's pieces, in row order, as the partition's one file; it
    ends in the partition's record like ``WHOLE``.

A finished ``WHOLE`` or ``MERGE`` lets the next partition in; a failed ``WHOLE`` or ``PIECE``
that ran out of memory is split in two ``PIECE``\\ s; any other failure ends the run.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from curator_dask import hooks
from curator_dask.executor import _oom, _tasks
from curator_dask.executor.base import RunPlan
from curator_dask.io.base import PartitionSpec
from curator_dask.progress import Progress, following_tasks

logger = logging.getLogger("curator_dask.executor")


class State(enum.Enum):
    """What a future in flight computes."""

    WHOLE = "whole"
    PIECE = "piece"
    MERGE = "merge"


@dataclass(frozen=True)
class InFlight:
    """A future the run waits on: its state, partition and (for pieces) the piece."""

    state: State
    index: int
    piece: _tasks.Piece | None = None


class StreamingRun:
    """Run ``todo`` through ``plan`` on ``client`` with at most ``window`` partitions in flight.

    Intermediate futures are not kept: the scheduler frees each partition's data as soon as
    the next step has it, so memory stays near partition size x ``window``.
    """

    def __init__(
        self,
        client: Any,
        plan: RunPlan,
        todo: list[PartitionSpec],
        window: int,
        progress: Progress,
    ) -> None:
        from distributed import as_completed

        self.client = client
        self.plan = plan
        self.pending: Iterator[PartitionSpec] = iter(todo)
        self.window = window
        self.progress = progress
        self._run = hooks.RunInfo(
            "pipeline", plan.pipeline.name, plan.layout.meta_dir, client, plan
        )
        self.running = as_completed()
        self.inflight: dict[str, InFlight] = {}
        self.split: dict[int, _oom.SplitPartition] = {}
        self.max_splits = _oom.max_splits()
        self.records: list[dict[str, Any]] = []
        # the read and stage tasks of whole partitions in flight: key -> (index, step)
        self._steps: dict[str, tuple[int, int]] = {}

    def run(self) -> list[dict[str, Any]]:
        """Submit, wait, split, merge until every partition is written; return the records."""
        for spec in self.pending:
            self._submit_whole(spec)
            if self.running.count() >= self.window:
                break
        try:
            with following_tasks(self.client, self._task_share):
                for fut in self.running:
                    self._finished(fut, self.inflight.pop(fut.key))
        finally:
            self.running.clear()
        return self.records

    def _task_share(self, key: str, share: float) -> None:
        """A read or stage task of a partition in flight said how far it is: the line moves
        (each of the chain's steps an equal share of it), and a finished step is said to the
        run hooks (``on_progress(run, <step>, "partitions", 1, None)``)."""
        where = self._steps.get(key)
        if where is None:  # another run's, a piece's, or a partition already written
            return
        index, step = where
        steps = len(self.plan.stages) + 2  # read, the stages, write
        self.progress.share(index, (step + min(share, 1.0)) / steps)
        if share >= 1.0:
            hooks.progress(self._run, self.plan.key_prefixes[step], "partitions", 1)

    # -- submitting -------------------------------------------------------------------------
    def _add(self, fut: Any, what: InFlight) -> None:
        self.inflight[fut.key] = what
        self.running.add(fut)

    def _stages(self, fut: Any, index: int, piece: str | None) -> Any:
        plan = self.plan
        for k, stage in enumerate(plan.stages, 1):
            if piece is None:
                self._steps[plan.key(k, index)] = (index, k)
            fut = self.client.submit(
                _tasks.stage_task,
                stage,
                fut,
                plan.pipeline.keep_removed,
                key=plan.key(k, index, piece),
                priority=plan.priority(k, index),
                resources=stage.resources.to_dask() or None,
            )
        return fut

    def _submit_whole(self, spec: PartitionSpec) -> None:
        plan, i, last = self.plan, spec.index, len(self.plan.stages) + 1
        self._steps[plan.key(0, i)] = (i, 0)
        fut = self.client.submit(
            _tasks.read_task, plan.reader, spec, key=plan.key(0, i), priority=plan.priority(0, i)
        )
        fut = self._stages(fut, i, None)
        fut = self.client.submit(
            _tasks.write_task,
            plan.writer,
            fut,
            plan.layout,
            plan.token(spec),
            key=plan.key(last, i),
            priority=plan.priority(last, i),
        )
        self._add(fut, InFlight(State.WHOLE, i, _tasks.Piece(spec)))

    def _submit_piece(self, piece: _tasks.Piece) -> None:
        plan, i = self.plan, piece.spec.index
        fut = self.client.submit(
            _tasks.read_piece_task,
            plan.reader,
            piece,
            key=plan.key(0, i, piece.label),
            priority=plan.priority(0, i),
        )
        self._add(self._stages(fut, i, piece.label), InFlight(State.PIECE, i, piece))

    def _submit_merge(self, split: _oom.SplitPartition) -> None:
        plan, i, last = self.plan, split.index, len(self.plan.stages) + 1
        fut = self.client.submit(
            _tasks.write_pieces_task,
            plan.writer,
            split.ordered(),
            plan.layout,
            plan.token(plan.specs[i]),
            split.summary(),
            key=plan.key(last, i, ""),
            priority=plan.priority(last, i),
        )
        self._add(fut, InFlight(State.MERGE, i))

    # -- results ----------------------------------------------------------------------------
    def _finished(self, fut: Any, what: InFlight) -> None:
        if fut.status != "finished":
            self._failed(fut, what)
            return
        if what.state is State.PIECE:
            assert what.piece is not None
            split = self.split[what.index]
            split.done[what.piece.label] = fut  # its data stays on the worker
            if split.complete():
                self._submit_merge(split)
            return
        record = fut.result()
        fut.release()
        for step in range(len(self.plan.stages) + 1):
            self._steps.pop(self.plan.key(step, what.index), None)
        self.records.append(record)
        self.progress.update(record)  # shown, and said to the run hooks
        self.split.pop(what.index, None)
        for spec in self.pending:  # one partition out, the next one in
            self._submit_whole(spec)
            break

    def _failed(self, fut: Any, what: InFlight) -> None:
        exc = fut.exception()
        if what.state is not State.MERGE and _oom.out_of_memory(exc):
            assert what.piece is not None
            assert exc is not None
            hooks.task_failed(self._run, fut.key, retried=True)
            split = self.split.setdefault(
                what.index, _oom.SplitPartition(what.index, self.max_splits)
            )
            halves = split.split(self.plan.reader, what.piece, exc)
            logger.warning(
                "partition %d%s failed with %s (out of memory); computing it in 2 pieces",
                what.index,
                f" piece {what.piece.label}" if what.piece.label else "",
                type(exc).__name__,
            )
            for half in halves:
                self._submit_piece(half)
            return
        hooks.task_failed(self._run, fut.key, retried=False)
        # the caller says the error once (the command line: one line, partition included);
        # the log file keeps this record
        logger.debug("partition %d failed", what.index)
        try:
            fut.result()  # raises the task's exception with its traceback
        except BaseException as e:
            e.add_note(f"in partition {what.index}")
            raise
