"""A reader over a dask DataFrame the user already has: the same run, accounting and files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dask.base import tokenize

from curator_dask.errors import check_columns
from curator_dask.io.base import PartitionSpec, Reader, ReadResult, empty_quarantine

if TYPE_CHECKING:
    from curator_dask.sizing import Workers


@dataclass
class DataFrameReader(Reader):
    """Read the partitions of an existing dask DataFrame, one pipeline partition each.

    The pipeline sees partition ``i`` of ``df`` as its partition ``i``; every row counts as
    read (nothing is quarantined: the frame was parsed already), so the accounting
    ``read = kept + removed + quarantined`` holds as for files. Each task computes only its
    own partition's part of ``df``'s graph (``df.to_delayed()``), in the task, with the
    synchronous scheduler.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        The documents; must hold ``text_column`` (and ``id_column`` if ids are needed).
    text_column, id_column : str
        Names of the text and id columns.

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd
    >>> df = dd.from_pandas(pd.DataFrame({"id": ["a", "b"], "text": ["x", "y"]}), npartitions=2)
    >>> [len(DataFrameReader(df).read_partition(s).data) for s in DataFrameReader(df).partitions()]
    [1, 1]
    """

    df: Any = field(repr=False)
    text_column: str = "text"
    id_column: str = "id"

    def __post_init__(self) -> None:
        check_columns(list(self.df.columns), "the dataframe", self.text_column)

    def partitions(self, workers: Workers | None = None) -> list[PartitionSpec]:
        """One partition per partition of ``df`` (its graph culled to that partition; the
        frame's partitions are as they are, whatever the ``workers``)."""
        parts = self.df.to_delayed(optimize_graph=True)
        return [
            PartitionSpec(i, (), extra={"part": part, "key": str(part.key)})
            for i, part in enumerate(parts)
        ]

    def read_partition(self, spec: PartitionSpec) -> ReadResult:
        """Compute partition ``spec.index`` of ``df`` (here, synchronously)."""
        data = spec.extra["part"].compute(scheduler="sync")
        return ReadResult(data, empty_quarantine(), len(data))

    def to_dask(self, workers: Workers | None = None) -> Any:
        """The frame itself."""
        return self.df

    def fingerprint(self, spec: PartitionSpec) -> Any:
        """The partition's dask key: it changes when the frame's graph does."""
        return spec.extra["key"]

    def __getstate__(self) -> dict[str, Any]:
        # the tasks carry their own partition's graph in the spec, not the whole frame
        return {k: v for k, v in self.__dict__.items() if k != "df"}

    def __dask_tokenize__(self) -> Any:
        return tokenize(type(self).__name__, self.text_column, self.id_column)
