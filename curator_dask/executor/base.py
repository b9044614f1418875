"""What every executor does around the tasks: plan, resume, account, write the statistics."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dask.base import tokenize

from curator_dask import config as _config
from curator_dask import hooks
from curator_dask.executor import _tasks
from curator_dask.io.base import PartitionSpec, Reader, Writer
from curator_dask.io.layout import OutputLease, RunLayout, lease_timeout
from curator_dask.io.writers import unify_schemas
from curator_dask.monitoring import hooks as _monitoring  # noqa: F401  (registers its hooks)
from curator_dask.progress import Progress, end_bar, following_compiles
from curator_dask.results import PipelineResult
from curator_dask.sizing import Workers
from curator_dask.stage import ProcessingStage, parameters_of

logger = logging.getLogger("curator_dask.executor")

MODES = ("streaming", "batch")


# Settings that change how or where a reader/writer works, not the documents it yields.
_NOT_OUTPUT = frozenset({"mode", "storage_options", "quarantine_path"})


class RunnablePipeline(Protocol):
    """What an executor needs of a pipeline (:class:`~curator_dask.pipeline.Pipeline` has it).

    The executor sits below ``pipeline.py`` and never imports it: it runs anything with a
    name, a reader, stages and a writer that can check itself.
    """

    name: str
    reader: Reader | None
    stages: list[ProcessingStage]
    writer: Writer | None
    keep_removed: bool

    def validate(self, need_writer: bool = True) -> None:
        """Raise ``ValueError`` unless there is a reader (and a writer if ``need_writer``)."""


def _object_token(obj: Any) -> str:
    if dataclasses.is_dataclass(obj):
        public = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    else:
        public = dict(vars(obj))
    public = {k: v for k, v in public.items() if not k.startswith("_") and k not in _NOT_OUTPUT}
    try:
        return tokenize(
            type(obj).__module__, type(obj).__qualname__, public, ensure_deterministic=True
        )
    except Exception:  # an attribute dask cannot hash deterministically
        return tokenize(
            type(obj).__module__,
            type(obj).__qualname__,
            {k: repr(v) for k, v in sorted(public.items())},
        )


def _stage_token(stage: ProcessingStage) -> str:
    # Resources and batch size change where and how a stage runs, not what it outputs.
    state = {k: v for k, v in stage.__getstate__().items() if k not in ("resources", "batch_size")}
    try:
        return tokenize(
            type(stage).__module__, type(stage).__qualname__, state, ensure_deterministic=True
        )
    except Exception:
        return stage.token()


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "stage"


@dataclass
class RunPlan:
    """Everything a run needs to know before submitting tasks."""

    pipeline: RunnablePipeline
    mode: str
    specs: list[PartitionSpec]
    layout: RunLayout
    run_id: str
    reader_token: str
    stage_tokens: list[str]
    writer_token: str
    step_names: list[str] = field(default_factory=list)
    key_prefixes: list[str] = field(default_factory=list)

    @property
    def reader(self) -> Reader:
        assert self.pipeline.reader is not None
        return self.pipeline.reader

    @property
    def writer(self) -> Writer:
        assert self.pipeline.writer is not None
        return self.pipeline.writer

    @property
    def stages(self) -> list[ProcessingStage]:
        return self.pipeline.stages

    @property
    def output(self) -> str:
        """The output directory, resolved (absolute path or URL)."""
        return self.layout.root

    def _spec_token(self, spec: PartitionSpec) -> tuple[Any, ...]:
        # the input's identity (paths, range, sizes, modification times or etags): a
        # partition whose input changed is computed again on resume
        return (self.reader_token, spec.index, self.reader.fingerprint(spec))

    def token(self, spec: PartitionSpec) -> str:
        """Identity of a partition's final output: changes when any parameter does."""
        return tokenize(self._spec_token(spec), self.stage_tokens, self.writer_token)

    def step_token(self, spec: PartitionSpec, step: int) -> str:
        """Identity of batch step ``step`` (0 = read) of a partition."""
        return tokenize(self._spec_token(spec), self.stage_tokens[:step])

    def step_dir(self, step: int) -> str:
        """The work folder (under :meth:`RunLayout.work_dir`) where batch step ``step`` writes."""
        return self.step_names[step]

    def batch_task(
        self, spec: PartitionSpec, step: int, token: str
    ) -> tuple[Callable[..., dict[str, Any]], tuple[Any, ...]]:
        """The task that runs batch step ``step`` (0 = read) of a partition, and its arguments.

        ``token`` is :meth:`step_token`; the task returns the step's done marker.
        """
        if step == 0:
            return _tasks.batch_read_task, (self.reader, spec, self.layout, self.step_dir(0), token)
        return _tasks.batch_stage_task, (
            self.stages[step - 1],
            spec.index,
            self.layout,
            self.step_dir(step - 1),
            self.step_dir(step),
            token,
        )

    def batch_write_args(self, spec: PartitionSpec, stats: list[dict[str, Any]]) -> tuple[Any, ...]:
        """The arguments of :func:`_tasks.batch_write_task` for a partition after the last step."""
        return (
            self.writer,
            spec.index,
            self.layout,
            self.step_dir(len(self.stages)),
            stats,
            self.token(spec),
        )

    def key(self, step: int, index: int, piece: str | None = None) -> str:
        """The dask key of one task (its prefix names the step on the dashboard).

        ``piece`` is the label of a piece of a split partition (``""`` for the whole
        partition recomputed in pieces' merge step), giving ``read-00003.01-<run>``.
        """
        tag = f"{index:05d}" if piece is None else f"{index:05d}.{piece or 'merge'}"
        return f"{self.key_prefixes[step]}-{tag}-{self.run_id}"

    def priority(self, step: int, index: int) -> int:
        """Earlier partitions first, and a partition's later steps before new reads."""
        return -index * (len(self.stages) + 2) + step


def make_plan(
    pipeline: RunnablePipeline,
    mode: str,
    workers: Workers | None = None,
    written: Mapping[str, str | None] | None = None,
) -> RunPlan:
    """Validate ``pipeline``, list its partitions and compute the resume tokens.

    ``workers``: the workers the run will have, handed to the reader's listing (its default
    blocksize is sized for them, :func:`curator_dask.sizing.default_blocksize`).
    ``written``: other places the run writes (name -> location, e.g. the local cluster's
    ``local directory``), kept apart from the input and the output by io's overlap rule.
    """
    pipeline.validate(need_writer=True)
    assert pipeline.reader is not None
    assert pipeline.writer is not None
    if mode not in MODES:
        raise ValueError(f"execution_mode must be one of {MODES}, got {mode!r}")
    if pipeline.keep_removed and mode != "streaming":
        raise ValueError("keep_removed=True needs execution_mode='streaming'")
    layout = pipeline.writer.layout
    # before any file is touched
    layout.check_not_overlapping(pipeline.reader.input_locations(), written)
    specs = sorted(pipeline.reader.partitions(workers=workers), key=lambda s: s.index)
    pipeline.reader.check_columns(specs)  # a wrong column name fails here, before any work
    if pipeline.writer.per_input_file:
        sources = [pipeline.reader.source_name(s) for s in specs]
        if any(n is None for n in sources) or len(set(sources)) != len(sources):
            raise ValueError(
                "per_input_file=True writes one output file per input file: give the reader "
                "files_per_partition=1 (whole files, no byte ranges) and distinct file names"
            )
        pipeline.writer.name_partitions([n for n in sources if n is not None])
        layout = pipeline.writer.layout
    if [s.index for s in specs] != list(range(len(specs))):
        raise ValueError(
            f"{type(pipeline.reader).__name__}.partitions() must number partitions 0..n-1, "
            f"got {[s.index for s in specs][:10]}"
        )
    seen: dict[str, int] = {}
    names = [f"00-{_slug(type(pipeline.reader).__name__)}"]
    for k, stage in enumerate(pipeline.stages, 1):
        slug = _slug(stage.stage_name)
        seen[slug] = seen.get(slug, 0) + 1
        if seen[slug] > 1:
            slug = f"{slug}_{seen[slug]}"
        names.append(f"{k:02d}-{slug}")
    return RunPlan(
        pipeline=pipeline,
        mode=mode,
        specs=specs,
        layout=layout,
        run_id=uuid.uuid4().hex[:8],
        reader_token=_object_token(pipeline.reader),
        stage_tokens=[_stage_token(s) for s in pipeline.stages],
        writer_token=_object_token(pipeline.writer),
        step_names=names,
        key_prefixes=["read", *(n.split("-", 1)[1] for n in names[1:]), "write"],
    )


def done_records(plan: RunPlan) -> dict[int, dict[str, Any]]:
    """Partitions written by an earlier run with the same parameters, with their statistics.

    A partition counts as done when the writer says so *and* its statistics file carries
    this run's token; otherwise it is computed again (its output is replaced atomically).
    """
    done: dict[int, dict[str, Any]] = {}
    stale = 0
    for spec in plan.specs:
        if not plan.writer.is_done(spec.index):
            continue
        rec = plan.layout.read_json(plan.layout.partition_stats_path(spec.index))
        if rec is not None and rec.get("token") == plan.token(spec):
            done[spec.index] = rec
        else:
            stale += 1
    if stale:
        logger.warning(
            "%d written partitions of %s have no statistics or were written with other "
            "parameters; computing them again",
            stale,
            plan.output,
        )
    return done


def run_info(plan: RunPlan, client: Any = None) -> hooks.RunInfo:
    """A pipeline run as the run hooks see it (:mod:`curator_dask.hooks`)."""
    return hooks.RunInfo("pipeline", plan.pipeline.name, plan.layout.meta_dir, client, plan)


class Executor:
    """Base of executors: runs a :class:`~curator_dask.pipeline.Pipeline`.

    Subclasses implement :meth:`_session` (where tasks run), :meth:`_run_streaming` and
    :meth:`_run_batch`; this class plans the run, skips partitions already written (resume),
    sums the statistics returned by the tasks, writes the run's statistics, checks that
    every document is accounted for and calls the writer's ``finish``.
    """

    def __init__(self, progress: bool | None = None) -> None:
        self.progress = progress

    def _progress_enabled(self) -> bool:
        if self.progress is not None:
            return bool(self.progress)
        return bool(_config.get("execution.progress", True))

    def _progress(self, plan: RunPlan, n: int, client: Any = None, step: str = "") -> Progress:
        """The progress display of ``n`` partitions of ``step`` (empty: written partitions),
        saying each to the run hooks."""
        return Progress(
            plan.pipeline.name, n, self._progress_enabled(), step=step, run=run_info(plan, client)
        )

    def _batch_steps(
        self, plan: RunPlan, n: int, client: Any = None
    ) -> Iterator[tuple[int, str, Progress]]:
        """Each batch step (0 = read) with its work directory and a progress line for ``n``."""
        for step in range(len(plan.stages) + 1):
            progress = self._progress(plan, n, client, plan.step_names[step])
            yield step, plan.step_dir(step), progress

    def execute(
        self, pipeline: RunnablePipeline, execution_mode: str | None = None
    ) -> PipelineResult:
        """Run ``pipeline`` and return its :class:`~curator_dask.results.PipelineResult`."""
        t0 = time.perf_counter()
        mode = execution_mode or _config.get("execution.mode", "streaming")
        plan = make_plan(pipeline, mode, self._planned_workers(), self._scratch_locations())
        with OutputLease(plan.layout, plan.run_id, timeout_s=lease_timeout()):
            return self._execute(plan, mode, t0)

    def _execute(self, plan: RunPlan, mode: str, t0: float) -> PipelineResult:
        plan.writer.begin()
        removed = plan.layout.prune(len(plan.specs))
        if removed:
            logger.warning(
                "%d files of partitions that no longer have an input were removed from %s",
                len(removed),
                plan.output,
            )
        done = done_records(plan)
        todo = [s for s in plan.specs if s.index not in done]
        if not todo:  # everything was written before: no cluster needed
            records = self._conform(None, plan, done)
            result = self._summarise(plan, records, len(done), t0)
        else:
            with self._session(plan) as session:
                run = run_info(plan, session)
                hooks.start(run)
                try:
                    # a kernel's first call on a machine compiles it: said apart from the work
                    with following_compiles(session, self._progress_enabled()):
                        if mode == "streaming":
                            new = self._run_streaming(session, plan, todo)
                        else:
                            new = self._run_batch(session, plan, todo)
                    new_records = {r["index"]: r for r in new}
                    records = self._conform(session, plan, {**done, **new_records})
                    result = self._summarise(plan, records, len(done), t0)
                except BaseException:
                    end_bar(sys.stderr)  # its bars' stream: the error starts a line
                    hooks.failed(run)
                    raise
                hooks.finish(run, result)
        result.check()
        plan.writer.finish(result.to_dict())
        if mode == "batch" and not _config.get("execution.keep-work", False):
            plan.layout.remove(plan.layout.work_dir(), recursive=True)
        return result

    def _conform(
        self, session: Any, plan: RunPlan, records: dict[int, dict[str, Any]]
    ) -> dict[int, dict[str, Any]]:
        """Give every part file of the run one schema: the union of theirs (io.writers).

        Only the files whose schema differs are rewritten (by the writer's ``conform``), e.g.
        a partition of broken records that lacks a column the others have, or an empty one.
        """
        schemas = {i: _tasks.decode_schema(rec.get("schema")) for i, rec in records.items()}
        known = {i: s for i, s in sorted(schemas.items()) if s is not None}
        if not known:
            return records
        schema = unify_schemas(list(known.values()))
        # an empty partition has no file to conform (see the writers)
        todo = [i for i, s in known.items() if records[i]["rows"] and not s.equals(schema)]
        if not todo:
            return records
        args = [(plan.writer, plan.layout, records[i], schema) for i in todo]
        fixed = self._map(session, _tasks.conform_task, args)
        return {**records, **{int(r["index"]): r for r in fixed}}

    def _map(
        self, session: Any, fn: Callable[..., dict[str, Any]], args: list[tuple[Any, ...]]
    ) -> list[dict[str, Any]]:
        """Run ``fn(*a)`` for each ``a`` in ``args`` (here, in this process)."""
        return [fn(*a) for a in args]

    def _summarise(
        self,
        plan: RunPlan,
        records: dict[int, dict[str, Any]],
        skipped: int,
        t0: float,
    ) -> PipelineResult:
        """Sum the records of skipped and new partitions; write the run's statistics."""
        result = PipelineResult.from_records(
            plan.pipeline.name,
            records.values(),
            wall_seconds=time.perf_counter() - t0,
            output_path=plan.output,
            partitions_skipped=skipped,
            execution_mode=plan.mode,
        )
        result.parameters = {
            name: parameters_of(obj)
            for name, obj in zip(
                [s.name for s in result.stages],
                [plan.reader, *plan.stages, plan.writer],
                strict=False,
            )
        }
        result.metadata_path = plan.layout.meta_dir
        result.quarantine_path = plan.layout.quarantine_dir
        result.stats_path = plan.layout.write_bytes(
            plan.layout.stats_path, result.to_json().encode("utf-8")
        )
        return result

    # -- what subclasses provide ------------------------------------------------------
    def _planned_workers(self) -> Workers | None:
        """The workers the run will have, when known before the input is listed (None: the
        reader sizes for the active client's, if any)."""
        return None

    def _scratch_locations(self) -> dict[str, str | None]:
        """Places the run's workers write besides the output (name -> location), for the
        overlap rule; default none."""
        return {}

    @contextlib.contextmanager
    def _session(self, plan: RunPlan) -> Iterator[Any]:
        raise NotImplementedError
        yield

    def _run_streaming(
        self, session: Any, plan: RunPlan, todo: list[PartitionSpec]
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _run_batch(
        self, session: Any, plan: RunPlan, todo: list[PartitionSpec]
    ) -> list[dict[str, Any]]:
        raise NotImplementedError
