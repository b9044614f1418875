"""Run a pipeline in this process, one partition after another (tests and debugging)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from curator_dask.executor import _tasks
from curator_dask.executor.base import Executor, RunPlan
from curator_dask.io.base import PartitionSpec
from curator_dask.stage import teardown_all


class SequentialExecutor(Executor):
    """Run every task in this process, in order, without dask distributed.

    The tasks, files, resume and statistics are exactly those of
    :class:`~curator_dask.executor.DaskExecutor`; only placement and parallelism are
    missing (stage resources are ignored). A breakpoint in a stage stops here.

    Parameters
    ----------
    progress : bool, optional
        Print a progress line on stderr; default ``curator.execution.progress``.

    Examples
    --------
    >>> result = pipeline.run(SequentialExecutor())  # doctest: +SKIP
    """

    @contextlib.contextmanager
    def _session(self, plan: RunPlan) -> Iterator[Any]:
        _tasks.setup_on_node(plan.stages)
        try:
            yield None
        finally:
            teardown_all()

    def _run_streaming(
        self, session: Any, plan: RunPlan, todo: list[PartitionSpec]
    ) -> list[dict[str, Any]]:
        progress = self._progress(plan, len(todo))
        records = []
        for spec in todo:
            carry = _tasks.read_task(plan.reader, spec)
            for stage in plan.stages:
                carry = _tasks.stage_task(stage, carry, plan.pipeline.keep_removed)
            rec = _tasks.write_task(plan.writer, carry, plan.layout, plan.token(spec))
            records.append(rec)
            progress.update(rec)
        return records

    def _run_batch(
        self, session: Any, plan: RunPlan, todo: list[PartitionSpec]
    ) -> list[dict[str, Any]]:
        stats: dict[int, list[dict[str, Any]]] = {s.index: [] for s in todo}
        for step, step_dir, progress in self._batch_steps(plan, len(todo)):
            for spec in todo:
                token = plan.step_token(spec, step)
                marker = _tasks.batch_done(plan.layout, step_dir, spec.index, token)
                if marker is None:
                    task, args = plan.batch_task(spec, step, token)
                    marker = task(*args)
                stats[spec.index].append(marker["stats"])
                progress.update()
        records = []
        write = self._progress(plan, len(todo), step="write")
        write.enabled = False  # the steps' lines said it; the hooks still hear each partition
        for spec in todo:
            rec = _tasks.batch_write_task(*plan.batch_write_args(spec, stats[spec.index]))
            records.append(rec)
            write.update(rec)
        return records
