"""``nemo_curator.utils.duplicates_removal``: :func:`remove_duplicates`."""

from __future__ import annotations

from typing import Any

import pandas as pd


def _all_but_first(part: pd.DataFrame, group_field: str) -> pd.DataFrame:
    return part[part[group_field].duplicated(keep="first").to_numpy()]


def remove_duplicates(
    left: Any,
    duplicates: Any,
    id_field: str,
    group_field: str,
    perform_shuffle: bool = False,
) -> Any:
    """Drop from ``left`` every duplicate but the first of its group (lazy).

    As in NeMo, the first member of a group is the first row of the group in its
    partition of ``duplicates``: the duplicates that ``ExactDuplicates`` and
    ``FuzzyDuplicates`` return hold each group in one partition. For a table whose groups
    straddle partitions, ``perform_shuffle=True`` gathers every group first; without it,
    one member per partition of a straddling group is kept, as in NeMo.

    Parameters
    ----------
    left : dask.dataframe.DataFrame
        The documents.
    duplicates : dask.dataframe.DataFrame
        ``id_field`` and ``group_field`` of every member of every duplicate group.
    id_field, group_field : str
        The id column (in both frames) and the group column of ``duplicates``.
    perform_shuffle : bool
        Shuffle ``duplicates`` on ``group_field`` first.

    Returns
    -------
    dask.dataframe.DataFrame
        ``left`` without the removed documents, in its partitions and order. Unlike
        NeMo (a broadcast join, which refuses a ``left`` of fewer partitions than
        ``duplicates``), the ids travel by a hash shuffle, so any partition counts work.
    """
    from curator_dask.dedup import remove_duplicates as remove_listed

    dups = duplicates[[id_field, group_field]]
    if perform_shuffle:
        dups = dups.shuffle(on=[group_field], ignore_index=True)
    gone = dups.map_partitions(_all_but_first, group_field, meta=dups._meta)
    return remove_listed(
        left,
        gone,
        keep=None,
        id_column=id_field,
        group_column=group_field,
        duplicates_id_column=id_field,
    )


__all__ = ["remove_duplicates"]
