"""Compose a reader, stages and a writer; :meth:`Pipeline.run` is where computation happens.

>>> from curator_dask.pipeline import Pipeline
>>> Pipeline("empty")
Pipeline('empty', 0 stages; lazy: nothing runs until run())
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from curator_dask.io.base import Reader, Writer
from curator_dask.stage import ProcessingStage, StageStats

if TYPE_CHECKING:
    from curator_dask.executor import Executor


class AccountingError(RuntimeError):
    """Raised when ``read != kept + removed + quarantined`` after a run."""


class Pipeline:
    """A reader, processing stages and a writer, run partition by partition.

    Building a pipeline computes nothing. :meth:`run` streams every input partition through
    ``read -> stage 1 -> ... -> write`` on a dask cluster and returns a
    :class:`PipelineResult`; :meth:`to_dask` gives the same computation as a lazy dask
    dataframe for notebooks.

    Parameters
    ----------
    name : str
        Names the run in logs, statistics and the dashboard.
    stages : sequence, optional
        ``[reader, stage, ..., writer]``; more can be added with :meth:`add_stage`. The
        first must be a :class:`~curator_dask.io.base.Reader`, the last a
        :class:`~curator_dask.io.base.Writer` (a pipeline without a writer can only be
        used through :meth:`to_dask`).
    description : str, optional
        Free text shown in the repr.

    Examples
    --------
    >>> from curator_dask.io import JsonlReader, JsonlWriter  # doctest: +SKIP
    >>> from curator_dask.filters import WordCountFilter  # doctest: +SKIP
    >>> p = Pipeline("demo", [JsonlReader("in/"), WordCountFilter(min_words=50),
    ...                       JsonlWriter("out/")])  # doctest: +SKIP
    >>> result = p.run()  # doctest: +SKIP
    >>> result.kept  # doctest: +SKIP
    """

    def __init__(
        self,
        name: str,
        stages: Sequence[Any] | None = None,
        description: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.reader: Reader | None = None
        self.stages: list[ProcessingStage] = []
        self.writer: Writer | None = None
        for stage in stages or ():
            self.add_stage(stage)

    def add_stage(self, stage: Any) -> Pipeline:
        """Append a reader (first only), a stage, or a writer (last only); return ``self``."""
        if isinstance(stage, Reader):
            if self.reader is not None:
                raise ValueError(
                    f"pipeline {self.name!r}: a second reader {type(stage).__name__} was "
                    "added; a pipeline has one reader, first"
                )
            if self.stages or self.writer is not None:
                raise ValueError(
                    f"pipeline {self.name!r}: the reader {type(stage).__name__} must be the "
                    "first stage"
                )
            self.reader = stage
        elif isinstance(stage, Writer):
            if self.writer is not None:
                raise ValueError(
                    f"pipeline {self.name!r}: a second writer {type(stage).__name__} was "
                    "added; a pipeline has one writer, last"
                )
            self.writer = stage
        elif isinstance(stage, ProcessingStage):
            if self.writer is not None:
                raise ValueError(
                    f"pipeline {self.name!r}: stage {stage.stage_name!r} was added after the "
                    f"writer {type(self.writer).__name__}; the writer must be last"
                )
            self.stages.append(stage)
        else:
            raise TypeError(
                f"pipeline {self.name!r}: expected a Reader, ProcessingStage or Writer, got "
                f"{type(stage).__name__}"
            )
        return self

    # -- inspection -------------------------------------------------------------------
    def __repr__(self) -> str:
        lines = [
            f"Pipeline({self.name!r}, {len(self.stages)} stages; lazy: nothing runs until run())"
        ]
        if self.description:
            lines.append(f"  {self.description}")
        if self.reader is not None:
            lines.append(f"  read:  {_describe_io(self.reader)}")
        for i, stage in enumerate(self.stages, 1):
            lines.append(f"  {i:>3}.  {stage.describe()}")
        if self.writer is not None:
            lines.append(f"  write: {_describe_io(self.writer)}")
        if len(lines) == 1:
            return lines[0]
        return "\n".join(lines)

    def validate(self, need_writer: bool = True) -> None:
        """Raise ``ValueError`` unless there is a reader (and a writer if ``need_writer``)."""
        if self.reader is None:
            raise ValueError(f"pipeline {self.name!r} has no reader: add one first")
        if need_writer and self.writer is None:
            raise ValueError(
                f"pipeline {self.name!r} has no writer: add one last to run() it, or use "
                "to_dask() to get the lazy dataframe"
            )

    # -- computation -------------------------------------------------------------------
    def to_dask(self) -> Any:
        """Return the lazy dask dataframe: the reader's, with every stage applied.

        Nothing computes; the writer, if any, is not applied. Placement by resources is
        not applied either (see :meth:`run`).
        """
        self.validate(need_writer=False)
        assert self.reader is not None
        df = self.reader.to_dask()
        for stage in self.stages:
            df = stage(df)
        return df

    def run(
        self,
        executor: Executor | None = None,
        execution_mode: str | None = None,
    ) -> PipelineResult:
        """Run the pipeline: this is where everything is read, computed and written.

        Parameters
        ----------
        executor : Executor, optional
            Where to run; default a :class:`~curator_dask.executor.DaskExecutor` on a local
            cluster sized to the machine (``curator.cluster.*``), shut down afterwards.
        execution_mode : {"streaming", "batch"}, optional
            Default ``curator.execution.mode``. Streaming moves each partition through all
            stages before the window lets the next one in (memory ~ partition size x
            partitions in flight); batch runs each stage over all partitions, materialised
            to Parquet under ``<output>/_work/``.

        Returns
        -------
        PipelineResult
            Also written to ``<output>/_stats.json``. Partitions already written by an
            earlier run with the same parameters are skipped and still counted.
        """
        self.validate(need_writer=True)
        if executor is None:
            from curator_dask.executor import DaskExecutor

            executor = DaskExecutor()
        return executor.execute(self, execution_mode=execution_mode)


def _describe_io(obj: Any) -> str:
    path = getattr(obj, "path", None) or getattr(obj, "paths", None)
    return f"{type(obj).__name__}({path!r})" if path is not None else type(obj).__name__


@dataclass
class PipelineResult:
    """What a run did: per-stage statistics and the document accounting.

    ``stages`` holds the reader first and the writer last, each summed over partitions.
    Totals: ``read`` (records the reader saw), ``quarantined`` (rejected input),
    ``removed`` (dropped by stages), ``kept`` (written); ``read == kept + removed +
    quarantined`` is checked by :meth:`check`. ``splits`` counts the out-of-memory splits
    of partitions (``split_partitions``) that the executor recomputed in pieces (see
    ``docs/faults.md``).
    """

    name: str
    stages: list[StageStats]
    read: int
    kept: int
    removed: int
    quarantined: int
    wall_seconds: float
    output_path: str
    partitions: int
    partitions_skipped: int = 0
    execution_mode: str = "streaming"
    stats_path: str | None = None
    partition_mismatches: list[int] = field(default_factory=list)
    splits: int = 0
    split_partitions: list[int] = field(default_factory=list)

    @classmethod
    def from_records(
        cls,
        name: str,
        records: Iterable[dict[str, Any]],
        *,
        wall_seconds: float,
        output_path: str,
        partitions_skipped: int = 0,
        execution_mode: str = "streaming",
    ) -> PipelineResult:
        """Sum per-partition records (as returned by the write tasks)."""
        records = sorted(records, key=lambda r: r["index"])
        summed: list[StageStats] | None = None
        read = kept = removed = quarantined = 0
        mismatches = []
        splits = 0
        split_partitions = []
        for rec in records:
            if rec.get("split"):
                splits += int(rec["split"].get("splits", 0))
                split_partitions.append(int(rec["index"]))
            stats = [_stats_from_dict(d) for d in rec["stages"]]
            if summed is None:
                summed = stats
            else:
                if [s.name for s in stats] != [s.name for s in summed]:
                    raise ValueError(
                        f"partition {rec['index']} has stages {[s.name for s in stats]}, "
                        f"others {[s.name for s in summed]}"
                    )
                summed = [a + b for a, b in zip(summed, stats, strict=True)]
            reader, middle, _writer = stats[0], stats[1:-1], stats[-1]
            p_read = reader.docs_in
            p_quar = sum(s.quarantined for s in stats)
            p_removed = sum(s.removed for s in middle)
            p_kept = int(rec["rows"])
            if p_read != p_kept + p_removed + p_quar:
                mismatches.append(int(rec["index"]))
            read += p_read
            quarantined += p_quar
            removed += p_removed
            kept += p_kept
        return cls(
            name=name,
            stages=summed or [],
            read=read,
            kept=kept,
            removed=removed,
            quarantined=quarantined,
            wall_seconds=wall_seconds,
            output_path=output_path,
            partitions=len(records),
            partitions_skipped=partitions_skipped,
            execution_mode=execution_mode,
            partition_mismatches=mismatches,
            splits=splits,
            split_partitions=split_partitions,
        )

    @property
    def balanced(self) -> bool:
        """True when ``read == kept + removed + quarantined``."""
        return self.read == self.kept + self.removed + self.quarantined and not (
            self.partition_mismatches
        )

    def check(self) -> None:
        """Raise :class:`AccountingError` if a document is unaccounted for."""
        if not self.balanced:
            raise AccountingError(
                f"pipeline {self.name!r}: read={self.read} but kept={self.kept} + "
                f"removed={self.removed} + quarantined={self.quarantined} = "
                f"{self.kept + self.removed + self.quarantined}; partitions out of balance: "
                f"{self.partition_mismatches}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (what ``_stats.json`` holds)."""
        d = {k: v for k, v in dataclasses.asdict(self).items() if k != "stages"}
        d["stages"] = [s.to_dict() for s in self.stages]
        d["balanced"] = self.balanced
        return d

    def to_json(self) -> str:
        """Return :meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)

    def summary(self) -> str:
        """A table a person can read: one line per stage, then the totals."""
        width = max([len("stage"), *(len(s.name) for s in self.stages)])
        lines = [
            f"{'stage':<{width}} {'in':>10} {'out':>10} {'removed':>9} {'quar.':>7} {'seconds':>9}"
        ]
        for s in self.stages:
            lines.append(
                f"{s.name:<{width}} {s.docs_in:>10,} {s.docs_out:>10,} {s.removed:>9,} "
                f"{s.quarantined:>7,} {s.seconds:>9.2f}"
            )
        lines.append(
            f"read {self.read:,} = kept {self.kept:,} + removed {self.removed:,} + "
            f"quarantined {self.quarantined:,}  ({'ok' if self.balanced else 'MISMATCH'})"
        )
        lines.append(
            f"{self.partitions} partitions ({self.partitions_skipped} already done), "
            f"{self.execution_mode}, {self.wall_seconds:.1f}s wall"
        )
        if self.splits:
            lines.append(
                f"{self.splits} out-of-memory split(s): partitions {self.split_partitions} "
                "were recomputed in pieces"
            )
        lines.append(f"output: {self.output_path}")
        if self.stats_path:
            lines.append(f"stats:  {self.stats_path}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _stats_from_dict(d: dict[str, Any]) -> StageStats:
    return StageStats(
        d["name"],
        int(d["docs_in"]),
        int(d["docs_out"]),
        int(d.get("quarantined", 0)),
        float(d.get("seconds", 0.0)),
        int(d.get("partitions", 1)),
        dict(d.get("extra") or {}),
    )
