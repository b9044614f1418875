"""Compose a reader, stages and a writer; :meth:`Pipeline.run` is where computation happens.

>>> from curator_dask.pipeline import Pipeline
>>> Pipeline("empty")
Pipeline('empty', 0 stages; lazy: nothing runs until run())
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from curator_dask.errors import AccountingError
from curator_dask.io.base import Reader, Writer
from curator_dask.results import PipelineResult
from curator_dask.stage import ProcessingStage

if TYPE_CHECKING:
    from curator_dask.executor import Executor


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

    def _repr_html_(self) -> str:
        from curator_dask.explore import pipeline_html

        return pipeline_html(self)

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


__all__ = ["AccountingError", "Pipeline", "PipelineResult"]
