"""Compose a reader, stages and a writer; :meth:`Pipeline.run` is where computation happens.

>>> from curator_dask.pipeline import Pipeline
>>> Pipeline("empty")
Pipeline('empty', 0 stages; lazy: nothing runs until run())
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from curator_dask.errors import AccountingError
from curator_dask.io.base import Reader, Writer
from curator_dask.results import PipelineResult
from curator_dask.stage import ProcessingStage

if TYPE_CHECKING:
    from curator_dask.executor import Executor

logger = logging.getLogger("curator_dask.pipeline")


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
    keep_removed : bool
        Also write what each stage removed, with a ``removed_by`` column naming the stage,
        to ``<output>.curator/_removed/part-<index>.parquet`` (streaming mode), for
        inspection: ``pd.read_parquet(output + ".curator/_removed")``.

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
        *,
        keep_removed: bool = False,
    ) -> None:
        self.name = name
        self.description = description
        self.keep_removed = bool(keep_removed)
        self.reader: Reader | None = None
        self.stages: list[ProcessingStage] = []
        self.writer: Writer | None = None
        for stage in stages or ():
            self.add_stage(stage)

    @classmethod
    def from_dataframe(
        cls,
        df: Any,
        stages: Sequence[Any] = (),
        name: str = "dataframe",
        *,
        text_column: str = "text",
        id_column: str = "id",
        description: str | None = None,
    ) -> Pipeline:
        """A pipeline that starts from a dask DataFrame you already have.

        ``df``'s partitions are the pipeline's partitions
        (:class:`~curator_dask.io.dataframe.DataFrameReader`); ``stages`` are the stages and
        the writer, as after the reader in the constructor. The accounting and the files
        written are those of a file input.

        Examples
        --------
        >>> import pandas as pd, dask.dataframe as dd
        >>> df = dd.from_pandas(pd.DataFrame({"id": ["a"], "text": ["x"]}), npartitions=1)
        >>> Pipeline.from_dataframe(df, name="mine").reader  # doctest: +ELLIPSIS
        DataFrameReader(text_column='text', id_column='id')
        """
        from curator_dask.io.dataframe import DataFrameReader

        reader = DataFrameReader(df, text_column=text_column, id_column=id_column)
        return cls(name, [reader, *stages], description=description)

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
            Where to run; default the active dask client when there is one (dask's
            convention: the last ``Client(...)`` created; the run says so on stderr and
            leaves it open), else a :class:`~curator_dask.executor.DaskExecutor` on a local
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
            from curator_dask.cluster import active_client
            from curator_dask.executor import DaskExecutor

            client = active_client()
            if client is not None:  # said once, in the progress voice
                from curator_dask.progress import say

                where = getattr(client, "scheduler", None)
                address = getattr(where, "address", client)
                say(f"{self.name}: using the active dask client ({address})")
            executor = DaskExecutor(client=client)
        return executor.execute(self, execution_mode=execution_mode)


def _describe_io(obj: Any) -> str:
    path = getattr(obj, "path", None) or getattr(obj, "paths", None)
    return f"{type(obj).__name__}({path!r})" if path is not None else type(obj).__name__


__all__ = ["AccountingError", "Pipeline", "PipelineResult"]
