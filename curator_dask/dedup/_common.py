"""Helpers shared by the dedup workflows: input, shuffle method, cache keys, outputs."""

from __future__ import annotations

import glob
import json
import os
import uuid
from collections.abc import Sequence
from typing import Any

import dask
import numpy as np
import pandas as pd
from dask.base import tokenize

from curator_dask import config

UID_SHIFT = 32  # uid = partition << 32 | row


def shuffle_method(client: Any = None) -> str:
    """The dask shuffle method: ``curator.shuffle.method``, p2p only with a distributed client.

    p2p spills to disk but needs a distributed scheduler; with the local (synchronous or
    threaded) scheduler ``"p2p"`` falls back to ``"tasks"``.
    """
    method = str(config.get("shuffle.method", "p2p"))
    if method == "p2p" and client is None:
        try:
            from distributed import default_client

            default_client()
        except (ImportError, ValueError):
            return "tasks"
    return method


def _hidden(rel: str) -> bool:
    # Markers, statistics and quarantine of a writer's output (_SUCCESS, _stats/, _quarantine/)
    # and temporary files (.x) are not input.
    return any(part.startswith(("_", ".")) for part in rel.split(os.sep))


def input_files(input_path: str | Sequence[str]) -> list[str]:
    """Expand a path, directory or glob (or a list of them) into sorted file paths."""
    paths = [input_path] if isinstance(input_path, (str, os.PathLike)) else list(input_path)
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            out += sorted(
                f
                for f in glob.glob(os.path.join(p, "**", "*"), recursive=True)
                if os.path.isfile(f) and not _hidden(os.path.relpath(f, p))
            )
        elif any(c in p for c in "*?["):
            out += sorted(glob.glob(p))
        else:
            out.append(p)
    return out


def input_fingerprint(input_path: str | Sequence[str] | None, df: Any = None) -> str:
    """A key for the input: paths, sizes and mtimes of the files (or the dask frame's token)."""
    if df is not None:
        return tokenize(df)
    stats: list[tuple[str, int | None, int | None]] = []
    for f in input_files(input_path or []):
        try:
            st = os.stat(f)
            stats.append((os.path.abspath(f), st.st_size, st.st_mtime_ns))
        except OSError:  # remote paths: the path itself is the key
            stats.append((f, None, None))
    return tokenize(stats)


def read_input(
    input_path: str | Sequence[str] | None,
    df: Any,
    text_column: str,
    id_column: str,
    input_blocksize: int | str | None,
    input_format: str | None = None,
) -> Any:
    """Return the input as a dask dataframe: ``df`` as is, or read ``input_path``."""
    if df is not None:
        return df
    if input_path is None:
        raise ValueError("give input_path or df")
    files = input_files(input_path)
    fmt = input_format or (
        "parquet" if files and all(f.endswith(".parquet") for f in files) else "jsonl"
    )
    from curator_dask.io import read_jsonl, read_parquet

    read = read_parquet if fmt == "parquet" else read_jsonl
    return read(files, text_column=text_column, id_column=id_column, blocksize=input_blocksize)


def with_uid(part: pd.DataFrame, partition_info: dict | None = None) -> pd.DataFrame:
    """Add ``_uid = partition << 32 | row``: unique, and the partition is recoverable."""
    i = (partition_info or {}).get("number", 0)
    uid = (np.int64(i) << UID_SHIFT) + np.arange(len(part), dtype=np.int64)
    return part.assign(_uid=uid)


def write_parquet_atomic(frame: pd.DataFrame, path: str) -> str:
    """Write ``frame`` to ``path`` through a temporary name and a rename."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)
    return path


def mark_done(directory: str, info: dict[str, Any] | None = None) -> None:
    """Write the completion marker ``_DONE`` (JSON) in ``directory``."""
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f"_DONE.tmp-{uuid.uuid4().hex}")
    with open(tmp, "w") as f:
        json.dump(info or {}, f)
    os.replace(tmp, os.path.join(directory, "_DONE"))


def is_done(directory: str) -> bool:
    """True when ``directory`` holds a completion marker."""
    return os.path.exists(os.path.join(directory, "_DONE"))


def read_done(directory: str) -> dict[str, Any]:
    """The JSON of a completion marker."""
    with open(os.path.join(directory, "_DONE")) as f:
        return json.load(f)


def choose_keepers(part: pd.DataFrame, keep: str) -> pd.DataFrame:
    """Rows ``label, id[, n_chars]`` of whole groups -> removed rows ``id, group``.

    ``keep="first"`` keeps the smallest id, ``"last"`` the largest, ``"longest"`` the most
    characters (ties: smallest id). ``group`` is the id of the document kept.
    """
    if keep == "first":
        part = part.sort_values(["label", "id"], kind="stable")
    elif keep == "last":
        part = part.sort_values(["label", "id"], ascending=[True, False], kind="stable")
    elif keep == "longest":
        part = part.sort_values(["label", "n_chars", "id"], ascending=[True, False, True])
    else:
        raise ValueError(f"keep must be 'first', 'last' or 'longest', got {keep!r}")
    first = ~part["label"].duplicated()
    kept_id = part["id"].where(first).ffill()
    gone = ~first.to_numpy()
    removed = part[gone]
    out = pd.DataFrame({"id": removed["id"].to_numpy(), "group": kept_id[gone].to_numpy()})
    out = out.astype({"id": part["id"].dtype, "group": part["id"].dtype})
    if "_uid" in part.columns:
        out["_uid"] = removed["_uid"].to_numpy(np.int64)
    return out


def removed_meta(id_dtype: Any) -> pd.DataFrame:
    """Empty ``id, group, _uid`` frame."""
    return pd.DataFrame(
        {
            "id": pd.Series([], dtype=id_dtype),
            "group": pd.Series([], dtype=id_dtype),
            "_uid": pd.Series([], dtype="int64"),
        }
    )


def write_removed(
    removed: Any, output_path: str, work_dir: str | None = None
) -> tuple[str, int, int]:
    """Write removed rows (dask frame ``id, group[, _uid]``) to ``<output_path>/removed_ids/``.

    When ``work_dir`` is given, the ``_uid`` column goes to ``<work_dir>/removed_uids/`` in the
    same computation (used by :func:`remove_documents`). Returns the directory, the number of
    removed documents and the number of duplicate groups.
    """
    out = os.path.join(output_path, "removed_ids")
    tasks = [
        removed[["id", "group"]].to_parquet(out, write_index=False, overwrite=True, compute=False)
    ]
    if work_dir is not None:
        tasks.append(
            removed[["_uid"]].to_parquet(
                os.path.join(work_dir, "removed_uids"),
                write_index=False,
                overwrite=True,
                compute=False,
            )
        )
    dask.compute(*tasks)
    got = pd.read_parquet(out, columns=["group"])
    n_removed = len(got)
    n_groups = int(got["group"].nunique()) if n_removed else 0
    return out, n_removed, n_groups


def remove_documents(df: Any, removed_uids: Any, output_path: str, client: Any = None) -> str:
    """Write ``df`` without the documents in ``removed_uids`` (dask frame ``_uid``).

    The removed uids are routed to the partition they came from (``uid >> 32``) by a
    range shuffle, then each input partition drops its own: no broadcast of the id list.
    """
    n = df.npartitions
    rm = removed_uids.assign(_part=removed_uids["_uid"] // (1 << UID_SHIFT))
    rm = rm.set_index("_part", divisions=[*list(range(n)), n], sort=True)

    def _drop(part: pd.DataFrame, gone: pd.DataFrame, partition_info: dict | None = None):
        part = with_uid(part, partition_info)
        keep = ~part["_uid"].isin(gone["_uid"].to_numpy())
        return part[keep.to_numpy()].drop(columns="_uid")

    kept = df.map_partitions(_drop, rm, meta=df._meta, align_dataframes=False)
    out = os.path.join(output_path, "deduplicated")
    kept.to_parquet(out, write_index=False, overwrite=True)
    return out


def scheduler_for(client: Any = None) -> Any:
    """A context manager running dask computations on ``client`` (or the active scheduler)."""
    import contextlib

    if client is None:
        return contextlib.nullcontext()
    return dask.config.set(scheduler=client)
