"""``nemo_curator.modules.add_id``: :class:`AddId`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from curator_dask.nemo.datasets import DocumentDataset


def _add_id_part(
    part: pd.DataFrame,
    id_field: str,
    prefix: str,
    start: int | None,
    partition_info: dict | None = None,
) -> pd.DataFrame:
    n = len(part)
    if start is None:
        number = (partition_info or {}).get("number", 0)
        ids = [f"{prefix}-{number:04d}{i:010d}" for i in range(n)]
    else:
        ids = [f"{prefix}-{start + i:010d}" for i in range(n)]
    return part.assign(**{id_field: pd.Series(ids, index=part.index, dtype="str")})


class AddId:
    """Add an ``id_field`` of unique string ids ``<id_prefix>-<number>``.

    With ``start_index`` the numbers run ``start_index, start_index + 1, ...`` through
    the dataset in order (this computes the partition lengths); without it they are
    the partition number (4 digits) then the row within it (10 digits).
    """

    def __init__(
        self, id_field: str, id_prefix: str = "doc_id", start_index: int | None = None
    ) -> None:
        self.id_field = id_field
        self.id_prefix = id_prefix
        self.start_index = start_index

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        df = dataset.df
        if self.start_index is None:
            return DocumentDataset(
                df.map_partitions(_add_id_part, self.id_field, self.id_prefix, None)
            )
        lengths = df.map_partitions(len).compute().tolist()
        starts = (self.start_index + np.concatenate([[0], np.cumsum(lengths)[:-1]])).tolist()
        parts = [
            df.get_partition(i).map_partitions(
                _add_id_part, self.id_field, self.id_prefix, int(starts[i])
            )
            for i in range(df.npartitions)
        ]
        import dask.dataframe as dd

        return DocumentDataset(dd.concat(parts))


__all__ = ["AddId"]
