"""``nemo_curator.utils.file_utils``: listing files, output folders, splitting by a field."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from curator_dask.nemo._paths import (
    expand_outdir_and_mkdir,
    filter_files_by_extension,
    get_all_files_paths_under,
    mkdir,
)

__all__ = [
    "expand_outdir_and_mkdir",
    "filter_files_by_extension",
    "get_all_files_paths_under",
    "mkdir",
    "separate_by_metadata",
]


def _merge_counts(first: dict[Any, int], second: dict[Any, int]) -> dict[Any, int]:
    out = dict(first)
    for key, n in second.items():
        out[key] = out.get(key, 0) + n
    return out


def _write_by_meta(
    before: tuple[dict[Any, int], set[str]],
    part: Any,
    output_dir: str,
    metadata_field: str,
    remove_metadata: bool,
    output_type: str,
    include_values: Sequence[str] | None,
    exclude_values: Sequence[str] | None,
    filename_col: str,
) -> tuple[dict[Any, int], set[str]]:
    from curator_dask._backend import to_pandas
    from curator_dask.nemo.datasets import write_partition_by_filename

    part = to_pandas(part)
    started = before[1]
    counts = part[metadata_field].value_counts(sort=False).to_dict()
    if include_values:
        counts = {k: v for k, v in counts.items() if k in include_values}
    elif exclude_values:
        counts = {k: v for k, v in counts.items() if k not in exclude_values}
    for value in counts:
        folder = expand_outdir_and_mkdir(os.path.join(output_dir, str(value)))
        piece = part[(part[metadata_field] == value).to_numpy()]
        if remove_metadata:
            piece = piece.drop(columns=[metadata_field])
        started = write_partition_by_filename(
            piece, folder, filename_col, output_type, started=started
        )
    return _merge_counts(before[0], {k: int(v) for k, v in counts.items()}), started


def separate_by_metadata(
    input_data: Any,
    output_dir: str,
    metadata_field: str,
    remove_metadata: bool = False,
    output_type: str = "jsonl",
    input_type: str = "jsonl",
    include_values: Sequence[str] | None = None,
    exclude_values: Sequence[str] | None = None,
    filename_col: str = "file_name",
) -> Any:
    """Write each document to ``<output_dir>/<its metadata_field value>/<its file name>``.

    ``input_data`` is a dask dataframe with a ``filename_col`` column, or a directory read
    with ``add_filename``. Returns a delayed ``{value: documents written}`` (compute it to
    write), as NeMo does. ``include_values`` and ``exclude_values`` choose values; giving
    both raises ``ValueError`` (NeMo printed an error and returned None).
    """
    from dask import delayed

    if include_values is not None and exclude_values is not None:
        raise ValueError("include_values and exclude_values are mutually exclusive")
    output_dir = expand_outdir_and_mkdir(output_dir)
    if isinstance(input_data, (str, os.PathLike)):
        from curator_dask.nemo.utils.distributed_utils import read_data

        input_data = read_data(
            get_all_files_paths_under(str(input_data), keep_extensions=input_type),
            file_type=input_type,
            backend="pandas",
            add_filename=filename_col,
        )
    # One partition after the other (each task waits for the counts of the one before):
    # parts of one input file may sit in two partitions, and both append to its output.
    state: Any = ({}, set())
    for part in input_data.to_delayed():
        state = delayed(_write_by_meta)(
            state,
            part,
            output_dir,
            metadata_field,
            remove_metadata,
            output_type,
            include_values,
            exclude_values,
            filename_col,
        )
    return delayed(_counts_of)(state)


def _counts_of(state: tuple[dict[Any, int], set[str]]) -> dict[Any, int]:
    return state[0]
