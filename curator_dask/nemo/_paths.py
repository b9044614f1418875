"""Listing files and making output folders (``nemo_curator.utils.file_utils`` re-exports them).

Below :mod:`curator_dask.nemo.datasets`, which lists its input with them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence


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
