"""``nemo_curator.utils.distributed_utils``: get_client, read_data, write_to_disk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def get_client(
    cluster_type: str = "cpu",
    scheduler_address: str | None = None,
    scheduler_file: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | float | None = None,
    **kwargs: Any,
) -> Any:
    """Return a :class:`distributed.Client` (NeMo's signature; the caller closes it).

    ``scheduler_address`` or ``scheduler_file`` connect to a running cluster; otherwise a
    local ``cluster_type`` ("cpu" or "gpu") cluster is started through
    :func:`curator_dask.cluster.make_cluster`. Other NeMo keywords (``rmm_pool_size``,
    ``protocol``, ...) are accepted; the GPU ones go to ``device_memory_limit`` and the
    rest are ignored.
    """
    from distributed import Client

    from curator_dask.cluster import ClusterConfig, make_cluster

    if scheduler_address:
        return Client(scheduler_address)
    if scheduler_file:
        return Client(scheduler_file=scheduler_file)
    if cluster_type not in ("cpu", "gpu"):
        raise ValueError(f"cluster_type must be 'cpu' or 'gpu', got {cluster_type!r}")
    options: dict[str, Any] = {
        "kind": cluster_type,
        "n_workers": n_workers,
        "threads_per_worker": threads_per_worker,
    }
    if memory_limit is not None:
        options["memory_limit"] = memory_limit
    if kwargs.get("rmm_pool_size") is not None and cluster_type == "gpu":
        options["device_memory_limit"] = kwargs["rmm_pool_size"]
    if "processes" in kwargs:
        options["processes"] = kwargs["processes"]
    cluster = make_cluster(ClusterConfig(**options))
    return Client(cluster)


def read_data(
    input_files: str | Sequence[str],
    file_type: str = "jsonl",
    backend: str = "pandas",
    files_per_partition: int | None = None,
    add_filename: bool | str = False,
    input_meta: str | dict | None = None,
    columns: Sequence[str] | None = None,
    read_func_single_partition: Callable[..., Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Read JSONL, Parquet or (with ``read_func_single_partition``) any files into a dask
    dataframe; see :class:`~curator_dask.nemo.datasets.DocumentDataset`'s readers."""
    from curator_dask.nemo.datasets import DocumentDataset

    if read_func_single_partition is not None:
        return DocumentDataset.read_custom(
            input_files,
            file_type,
            read_func_single_partition,
            files_per_partition=files_per_partition,
            backend=backend,
            add_filename=add_filename,
            columns=columns,
            input_meta=input_meta,
            **kwargs,
        ).df
    if file_type == "parquet":
        return DocumentDataset.read_parquet(
            input_files,
            backend=backend,
            files_per_partition=files_per_partition,
            add_filename=add_filename,
            columns=columns,
            **kwargs,
        ).df
    if file_type not in ("jsonl", "json"):
        raise ValueError(
            f"file_type {file_type!r}: read 'jsonl' or 'parquet', or pass "
            "read_func_single_partition"
        )
    return DocumentDataset.read_json(
        input_files,
        backend=backend,
        files_per_partition=files_per_partition,
        add_filename=add_filename,
        input_meta=input_meta,
        columns=columns,
        **kwargs,
    ).df


def write_to_disk(
    df: Any,
    output_path: str,
    write_to_filename: bool | str = False,
    output_type: str = "jsonl",
    keep_filename_column: bool = False,
) -> None:
    """Write a dask dataframe as JSONL or Parquet. This computes ``df``.

    ``write_to_filename`` (True, or the name of the column holding the file names)
    writes each document to the file it came from, in either format.
    """
    from curator_dask.nemo.datasets import DocumentDataset

    ds = DocumentDataset(df)
    if output_type == "parquet":
        ds.to_parquet(output_path, write_to_filename, keep_filename_column)
    elif output_type == "jsonl":
        ds.to_json(output_path, write_to_filename, keep_filename_column)
    else:
        raise ValueError(f"output_type must be 'jsonl' or 'parquet', got {output_type!r}")


def single_partition_write_with_filename(
    df: Any,
    output_file_dir: str,
    keep_filename_column: bool = False,
    output_type: str = "jsonl",
    filename_col: str = "file_name",
) -> None:
    """Write one (pandas or cudf) partition to ``<output_file_dir>/<file name stem>.<type>``."""
    import os

    from curator_dask.nemo.datasets import write_partition_by_filename

    os.makedirs(output_file_dir, exist_ok=True)
    write_partition_by_filename(
        df, output_file_dir, filename_col, output_type, keep_filename_column
    )


def load_object_on_worker(
    attr: str, load_object_function: Callable[..., Any], load_object_kwargs: dict[str, Any]
) -> Any:
    """Load an object once per worker process (kept on the dask worker, or in this process)."""
    try:
        from distributed import get_worker

        holder: Any = get_worker()
    except (ImportError, ValueError):
        holder = _LOCAL
    if not hasattr(holder, attr):
        setattr(holder, attr, load_object_function(**load_object_kwargs))
    return getattr(holder, attr)


class _Local:
    """Holds objects loaded outside a dask worker."""


_LOCAL = _Local()
