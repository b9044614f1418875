"""``nemo_curator.datasets``: :class:`DocumentDataset`, a dask dataframe of documents."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dask
import pandas as pd

from curator_dask.io import read_jsonl, read_parquet, write_jsonl, write_parquet
from curator_dask.io.writers import encode_jsonl
from curator_dask.nemo._paths import get_all_files_paths_under

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
        add_filename: bool | str = False,
        input_meta: str | dict | None = None,
        columns: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> DocumentDataset:
        """Read JSONL files.

        ``add_filename`` adds the base name of the file each document came from, in the
        column ``file_name`` or, when it is a string, in the column it names (as in NeMo).
        ``input_meta`` (a dict or its JSON text, ``{"field": "dtype"}``) casts those
        fields to those dtypes; naming a field the files lack raises ``ValueError``.
        Files whose first record has no text field (``text``, or ``text_field=``) raise
        ``ValueError``: curator_dask's reader sets records without text aside in its
        quarantine, which would leave such a dataset empty.
        """
        text_field = kwargs.get("text_field", "text")
        _require_text_field(_paths(input_files), text_field, "jsonl")
        ds = cls._read(
            read_jsonl, input_files, backend, files_per_partition, blocksize, add_filename,
            columns, kwargs,
        )  # fmt: skip
        if input_meta is not None:
            ds = ds._cast(_parse_meta(input_meta))
        return ds

    @classmethod
    def read_parquet(
        cls,
        input_files: str | Sequence[str],
        backend: str = "pandas",
        files_per_partition: int | None = None,
        blocksize: str | int | None = None,
        add_filename: bool | str = False,
        columns: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> DocumentDataset:
        """Read Parquet files (``add_filename`` as in :meth:`read_json`).

        Files whose schema has no text field raise ``ValueError``, as in :meth:`read_json`.
        """
        _require_text_field(_paths(input_files), kwargs.get("text_field", "text"), "parquet")
        return cls._read(
            read_parquet, input_files, backend, files_per_partition, blocksize, add_filename,
            columns, kwargs,
        )  # fmt: skip

    @classmethod
    def read_custom(
        cls,
        input_files: str | Sequence[str],
        file_type: str,
        read_func_single_partition: Callable[..., Any],
        files_per_partition: int | None = None,
        backend: str | None = None,
        add_filename: bool | str = False,
        columns: Sequence[str] | None = None,
        input_meta: str | dict | None = None,
        **kwargs: Any,
    ) -> DocumentDataset:
        """Read files of any format with a function that reads one partition's files.

        ``input_files`` is a file, a directory (its files ending in ``.<file_type>``) or a
        list of files. Each partition holds ``files_per_partition`` files (default one)
        and is read by ``read_func_single_partition(files, backend=, add_filename=,
        input_meta=, **kwargs)``, which returns a pandas (or cudf) frame; ``columns`` then
        selects columns. The first partition is read on the client for the schema.
        """
        import dask.dataframe as dd

        files = _list_files(input_files, file_type)
        if not files:
            raise FileNotFoundError(f"no .{file_type} files in {input_files!r}")
        n = max(1, files_per_partition or 1)
        groups = [files[i : i + n] for i in range(0, len(files), n)]
        read = _CustomRead(
            read_func_single_partition, backend or "pandas", add_filename, input_meta, columns,
            kwargs,
        )  # fmt: skip
        meta = read(groups[0]).iloc[:0]
        return cls(dd.from_map(read, groups, meta=meta, enforce_metadata=False))

    @classmethod
    def _read(
        cls,
        reader: Any,
        input_files: str | Sequence[str],
        backend: str,
        files_per_partition: int | None,
        blocksize: str | int | None,
        add_filename: bool | str,
        columns: Sequence[str] | None,
        kwargs: dict[str, Any],
    ) -> DocumentDataset:
        """Both readers: NeMo's names mapped onto ``read_jsonl``/``read_parquet``."""
        kwargs = dict(kwargs)
        text_field = kwargs.pop("text_field", "text")
        with dask.config.set({"dataframe.backend": backend}):
            df = reader(
                _paths(input_files),
                columns=columns,
                add_filename=bool(add_filename),
                blocksize=None if files_per_partition else blocksize,
                files_per_partition=files_per_partition,
                text_column=text_field,
                **kwargs,
            )
        if isinstance(add_filename, str) and add_filename != FILENAME_COLUMN:
            df = df.rename(columns={FILENAME_COLUMN: add_filename})
        return cls(df)

    def _cast(self, meta: dict[str, str]) -> DocumentDataset:
        missing = [c for c in meta if c not in self.df.columns]
        if missing:
            raise ValueError(f"input_meta names fields the files do not have: {missing}")
        return DocumentDataset(self.df.astype(meta))

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
        write_to_filename: bool | str = False,
        keep_filename_column: bool = False,
    ) -> None:
        """Write JSONL. This computes the dataset.

        Without ``write_to_filename``: one ``part-<n>.jsonl`` per partition (atomic, with a
        ``_SUCCESS`` summary). With it: every document goes to
        ``output_path/<stem of its file name>.jsonl``, the name read from the ``file_name``
        column, or from the column ``write_to_filename`` names when it is a string (as in
        NeMo). Partitions are computed one after the other and appended, so a file split
        over partitions is whole.
        """
        if not write_to_filename:
            write_jsonl(self._without_filename(keep_filename_column), output_path, mode="overwrite")
            return
        _write_by_filename(
            self.df, output_path, _column(write_to_filename), keep_filename_column, "jsonl"
        )

    def to_parquet(
        self,
        output_path: str,
        write_to_filename: bool | str = False,
        keep_filename_column: bool = False,
    ) -> None:
        """Write Parquet. This computes the dataset.

        Without ``write_to_filename``: one file per partition. With it: one
        ``<stem of the file name>.parquet`` per input file, as :meth:`to_json` does.
        """
        if not write_to_filename:
            write_parquet(
                self._without_filename(keep_filename_column), output_path, mode="overwrite"
            )
            return
        _write_by_filename(
            self.df, output_path, _column(write_to_filename), keep_filename_column, "parquet"
        )

    def _without_filename(self, keep: bool) -> Any:
        df = self.df
        if FILENAME_COLUMN in df.columns and not keep:
            df = df.drop(columns=[FILENAME_COLUMN])
        return df


def read_parquet_files(path: str) -> Any:
    """A directory of Parquet files as a dask frame, one file per partition, as written.

    For the layer's own intermediate tables (duplicates, signatures, buckets): they have no
    text column, which curator_dask's document reader requires.
    """
    import dask.dataframe as dd

    names = sorted(n for n in os.listdir(path) if n.endswith(".parquet"))
    paths = [os.path.join(path, n) for n in names]
    if not paths:
        raise FileNotFoundError(f"no Parquet files in {path}")
    meta = _read_table(paths[0]).iloc[:0]
    return dd.from_map(_read_table, paths, meta=meta, enforce_metadata=False)


def _read_table(path: str) -> pd.DataFrame:
    """One Parquet file; list columns as Arrow lists (pandas cannot rebuild their dtype
    from the file's pandas metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def lists(t: pa.DataType) -> Any:
        return pd.ArrowDtype(t) if pa.types.is_list(t) or pa.types.is_large_list(t) else None

    return pq.read_table(path).to_pandas(ignore_metadata=True, types_mapper=lists)


def _column(write_to_filename: bool | str) -> str:
    return write_to_filename if isinstance(write_to_filename, str) else FILENAME_COLUMN


def _list_files(input_files: str | Sequence[str], file_type: str) -> list[str]:
    if not isinstance(input_files, (str, os.PathLike)):
        return [str(f) for f in input_files]
    path = str(input_files)
    if os.path.isdir(path):
        return get_all_files_paths_under(
            path, recurse_subdirectories=False, keep_extensions=file_type
        )
    return [path]


class _CustomRead:
    """Reads one partition of :meth:`DocumentDataset.read_custom` (picklable)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        backend: str,
        add_filename: bool | str,
        input_meta: Any,
        columns: Sequence[str] | None,
        kwargs: dict[str, Any],
    ) -> None:
        self.fn = fn
        self.backend = backend
        self.add_filename = add_filename
        self.input_meta = input_meta
        self.columns = list(columns) if columns is not None else None
        self.kwargs = kwargs

    def __call__(self, files: list[str]) -> Any:
        part = self.fn(
            files,
            backend=self.backend,
            add_filename=self.add_filename,
            input_meta=self.input_meta,
            **self.kwargs,
        )
        if self.columns is not None:
            name = self.add_filename if isinstance(self.add_filename, str) else FILENAME_COLUMN
            wanted = self.columns + ([name] if self.add_filename else [])
            part = part[[c for c in wanted if c in part.columns]]
        return part


def _parse_meta(input_meta: str | dict) -> dict[str, str]:
    meta = json.loads(input_meta) if isinstance(input_meta, str) else dict(input_meta)
    return {str(k): str(v) for k, v in meta.items()}


def _first_file(paths: list[str]) -> str | None:
    for path in paths:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if not n.startswith((".", "_")))
            files = [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
            if files:
                return files[0]
        elif os.path.isfile(path):
            return path
    return None


def _require_text_field(paths: list[str], text_field: str, file_type: str) -> None:
    """Refuse local files whose first record (JSONL) or schema (Parquet) has no text field."""
    first = _first_file(paths)
    if first is None:
        return  # remote or glob paths: the reader's quarantine reports such records
    try:
        if file_type == "parquet":
            import pyarrow.parquet as pq

            fields = list(pq.read_schema(first).names)
        else:
            import fsspec

            with fsspec.open(first, "rt", compression="infer", encoding="utf-8") as f:
                line = next((ln for ln in f if ln.strip()), "")
            record = json.loads(line) if line else None
            if not isinstance(record, dict):
                return
            fields = list(record)
    except (OSError, ValueError, UnicodeDecodeError):
        return  # unreadable or malformed: the reader reports it
    if text_field not in fields:
        raise ValueError(
            f"{first}: the records have no {text_field!r} field (fields: {sorted(fields)}); "
            "name the text field with text_field="
        )


def _write_by_filename(
    df: Any, output_path: str, column: str, keep_column: bool, output_type: str
) -> None:
    if column not in df.columns:
        raise ValueError(
            f"write_to_filename needs a {column!r} column (read with add_filename=True, or "
            f"add_filename={column!r})"
        )
    os.makedirs(output_path, exist_ok=True)
    started: set[str] = set()
    for i in range(df.npartitions):
        part = df.get_partition(i).compute()
        started = write_partition_by_filename(
            part, output_path, column, output_type, keep_column, started
        )


def write_partition_by_filename(
    part: Any,
    output_dir: str,
    column: str,
    output_type: str,
    keep_column: bool = False,
    started: set[str] | None = None,
) -> set[str]:
    """Write one partition's documents to ``<output_dir>/<stem of their file name>.<type>``.

    A file named in ``started`` (written earlier in this run) is appended to; any other is
    overwritten. Returns ``started`` with this partition's files added.
    """
    from curator_dask._backend import to_pandas

    part = to_pandas(part)
    started = set() if started is None else set(started)
    for name, group in part.groupby(column, sort=False):
        out = group if keep_column else group.drop(columns=[column])
        target = os.path.join(output_dir, f"{Path(str(name)).stem}.{output_type}")
        append = target in started
        if output_type == "jsonl":
            with open(target, "ab" if append else "wb") as f:
                f.write(encode_jsonl(out))
        elif output_type == "parquet":
            if append:
                out = pd.concat([pd.read_parquet(target), out], ignore_index=True)
            tmp = f"{target}.tmp"
            out.to_parquet(tmp, index=False)
            os.replace(tmp, target)
        else:
            raise ValueError(f"output_type must be 'jsonl' or 'parquet', got {output_type!r}")
        started.add(target)
    return started
