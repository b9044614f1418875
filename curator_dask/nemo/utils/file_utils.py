"""``nemo_curator.utils.file_utils``: listing files, output folders, splitting by a field."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any


def mkdir(d: str) -> None:
    """Make ``d`` and its parents (no error when it exists)."""
    os.makedirs(d, exist_ok=True)


def expand_outdir_and_mkdir(outdir: str) -> str:
    """The absolute path of ``outdir`` (``~`` expanded), made if missing."""
    path = os.path.abspath(os.path.expanduser(outdir))
    mkdir(path)
    return path


def filter_files_by_extension(
    files_list: Sequence[str], keep_extensions: str | Sequence[str]
) -> list[str]:
    """The files of ``files_list`` ending in one of ``keep_extensions`` (with or without dot).

    Warns when a file was left out, as NeMo does.
    """
    exts = [keep_extensions] if isinstance(keep_extensions, str) else list(keep_extensions)
    suffixes = tuple(e if e.startswith(".") else f".{e}" for e in exts)
    kept = [f for f in files_list if f.endswith(suffixes)]
    if len(kept) != len(files_list):
        warnings.warn(
            f"skipped {len(files_list) - len(kept)} file(s) not ending in {suffixes}",
            stacklevel=2,
        )
    return kept


def get_all_files_paths_under(
    root: str,
    recurse_subdirectories: bool = True,
    followlinks: bool = False,
    keep_extensions: str | Sequence[str] | None = None,
) -> list[str]:
    """Every file under ``root``, sorted (subfolders too unless ``recurse_subdirectories=False``).

    Without recursion the entries of ``root`` itself are listed, folders included, as in
    NeMo.
    """
    if recurse_subdirectories:
        paths = [
            os.path.join(dirpath, name)
            for dirpath, _, names in os.walk(root, followlinks=followlinks)
            for name in names
        ]
    else:
        with os.scandir(root) as entries:
            paths = [entry.path for entry in entries]
    paths.sort()
    if keep_extensions is not None:
        paths = filter_files_by_extension(paths, keep_extensions)
    return paths


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


__all__ = [
    "expand_outdir_and_mkdir",
    "filter_files_by_extension",
    "get_all_files_paths_under",
    "mkdir",
    "separate_by_metadata",
]
