"""``nemo_curator.utils.distributed_utils``: get_client, read_data, write_to_disk."""

from __future__ import annotations

from collections.abc import Sequence
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
    add_filename: bool = False,
    **kwargs: Any,
) -> Any:
    """Read JSONL or Parquet files into a dask dataframe."""
    from curator_dask.nemo.datasets import DocumentDataset

    read = DocumentDataset.read_parquet if file_type == "parquet" else DocumentDataset.read_json
    return read(
        input_files,
        backend=backend,
        files_per_partition=files_per_partition,
        add_filename=add_filename,
        **kwargs,
    ).df


def write_to_disk(
    df: Any,
    output_path: str,
    write_to_filename: bool = False,
    output_type: str = "jsonl",
    keep_filename_column: bool = False,
) -> None:
    """Write a dask dataframe as JSONL or Parquet. This computes ``df``."""
    from curator_dask.nemo.datasets import DocumentDataset

    ds = DocumentDataset(df)
    if output_type == "parquet":
        ds.to_parquet(output_path, write_to_filename, keep_filename_column)
    else:
        ds.to_json(output_path, write_to_filename, keep_filename_column)
