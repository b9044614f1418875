"""``nemo_curator.datasets``: :class:`DocumentDataset`, a dask dataframe of documents."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import dask
import pandas as pd

from curator_dask.io import read_jsonl, read_parquet, write_jsonl, write_parquet
from curator_dask.io.writers import encode_jsonl

FILENAME_COLUMN = "file_name"


def _paths(input_files: str | Sequence[str]) -> list[str]:
    return [str(input_files)] if isinstance(input_files, (str, os.PathLike)) else list(input_files)


class DocumentDataset:
    """A dataset of documents: a dask dataframe in :attr:`df`, one row per document.

    Reading goes through :func:`curator_dask.io.read_jsonl` / :func:`read_parquet`
    (byte-range partitions, a quarantine for malformed lines, an ``id`` column of
    string ids added when the files have none); writing through the curator writers.

    Parameters
    ----------
    dataset_df : dask.dataframe.DataFrame
        The documents.
    """

    def __init__(self, dataset_df: Any) -> None:
        self.df = dataset_df

    def __len__(self) -> int:
        return len(self.df)

    def persist(self) -> DocumentDataset:
        """Persist the dataframe in the cluster's memory."""
        return DocumentDataset(self.df.persist())

    def head(self, n: int = 5) -> pd.DataFrame:
        """The first ``n`` documents, as pandas."""
        return self.df.head(n)

    @classmethod
    def read_json(
        cls,
        input_files: str | Sequence[str],
        backend: str = "pandas",
        files_per_partition: int | None = None,
        blocksize: str | int | None = None,
        add_filename: bool = False,
        input_meta: Any = None,
        columns: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> DocumentDataset:
        """Read JSONL files (``input_meta`` is accepted and ignored: types are inferred)."""
        return cls._read(
            read_jsonl, input_files, backend, files_per_partition, blocksize, add_filename,
            columns, kwargs,
        )  # fmt: skip

    @classmethod
    def read_parquet(
        cls,
        input_files: str | Sequence[str],
        backend: str = "pandas",
        files_per_partition: int | None = None,
        blocksize: str | int | None = None,
        add_filename: bool = False,
        columns: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> DocumentDataset:
        """Read Parquet files."""
        return cls._read(
            read_parquet, input_files, backend, files_per_partition, blocksize, add_filename,
            columns, kwargs,
        )  # fmt: skip

    @classmethod
    def _read(
        cls,
        reader: Any,
        input_files: str | Sequence[str],
        backend: str,
        files_per_partition: int | None,
        blocksize: str | int | None,
        add_filename: bool,
        columns: Sequence[str] | None,
        kwargs: dict[str, Any],
    ) -> DocumentDataset:
        """Both readers: NeMo's names mapped onto ``read_jsonl``/``read_parquet``."""
        with dask.config.set({"dataframe.backend": backend}):
            df = reader(
                _paths(input_files),
                columns=columns,
                add_filename=add_filename,
                blocksize=None if files_per_partition else blocksize,
                files_per_partition=files_per_partition,
                text_column=kwargs.pop("text_field", "text"),
                **kwargs,
            )
        return cls(df)

    @classmethod
    def from_pandas(
        cls, data: pd.DataFrame, npartitions: int | None = 1, chunksize: int | None = None
    ) -> DocumentDataset:
        """A dataset from a pandas frame."""
        import dask.dataframe as dd

        return cls(dd.from_pandas(data, npartitions=npartitions, chunksize=chunksize))

    def to_pandas(self) -> pd.DataFrame:
        """Compute the whole dataset into one pandas frame."""
        return self.df.compute()

    def to_json(
        self,
        output_path: str,
        write_to_filename: bool = False,
        keep_filename_column: bool = False,
    ) -> None:
        """Write JSONL. This computes the dataset.

        Without ``write_to_filename``: one ``part-<n>.jsonl`` per partition (atomic, with a
        ``_SUCCESS`` summary). With it: every document goes to ``output_path/<file_name>``
        (the column :meth:`read_json` adds with ``add_filename=True``); partitions are
        computed one after the other and appended, so a file split over partitions is
        whole.
        """
        if not write_to_filename:
            df = self.df
            if FILENAME_COLUMN in df.columns and not keep_filename_column:
                df = df.drop(columns=[FILENAME_COLUMN])
            write_jsonl(df, output_path, mode="overwrite")
            return
        _write_by_filename(self.df, output_path, keep_filename_column, encode_jsonl)

    def to_parquet(
        self,
        output_path: str,
        write_to_filename: bool = False,
        keep_filename_column: bool = False,
    ) -> None:
        """Write Parquet: one file per partition (``write_to_filename`` is not supported)."""
        if write_to_filename:
            raise NotImplementedError(
                "to_parquet(write_to_filename=True) is not supported; use to_json or "
                "write one Parquet file per partition"
            )
        df = self.df
        if FILENAME_COLUMN in df.columns and not keep_filename_column:
            df = df.drop(columns=[FILENAME_COLUMN])
        write_parquet(df, output_path, mode="overwrite")


def _write_by_filename(df: Any, output_path: str, keep_column: bool, encode: Any) -> None:
    if FILENAME_COLUMN not in df.columns:
        raise ValueError(
            f"write_to_filename needs a {FILENAME_COLUMN!r} column (read with add_filename=True)"
        )
    os.makedirs(output_path, exist_ok=True)
    started: set[str] = set()
    for i in range(df.npartitions):
        part = df.get_partition(i).compute()
        for name, group in part.groupby(FILENAME_COLUMN, sort=False):
            out = group if keep_column else group.drop(columns=[FILENAME_COLUMN])
            target = os.path.join(output_path, os.path.basename(str(name)))
            with open(target, "ab" if target in started else "wb") as f:
                f.write(encode(out))
            started.add(target)
