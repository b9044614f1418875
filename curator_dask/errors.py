"""The exceptions and warnings the package raises on purpose (each message names what to check).

Every class is defined here and nowhere else; the modules that raise them also export them
under their old names (``curator_dask.io.MalformedInputError``,
``curator_dask.cluster.ClusterConnectError``, ...), so imports of either path keep working.
"""

from __future__ import annotations


class AccountingError(RuntimeError):
    """Raised when ``read != kept + removed + quarantined`` after a run."""


class ColumnError(ValueError):
    """The input has no column of the name the run was told to use (text or id column).

    Raised on the client, before anything is computed, from the reader's metadata (a
    Parquet schema, the first records of a JSONL file) or a dask frame's columns; the
    message names the columns that were found.
    """


class QuarantineShareError(RuntimeError):
    """A run set aside at least ``curator.io.max-quarantined-fraction`` of what it read.

    ``result`` is the run's result (what was written stays written).
    """

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class MalformedInputError(ValueError):
    """A bad input record met with ``on_error="raise"``; the message names file and line."""


class TruncatedInputError(OSError):
    """A compressed input ended early or is corrupt."""


class OutputInUseError(RuntimeError):
    """Another job holds the lease on this output directory."""


class PartitionMemoryError(MemoryError):
    """A partition ran out of memory even in the smallest pieces allowed.

    Raised by :class:`~curator_dask.executor.DaskExecutor` when the pieces of a partition
    split ``curator.execution.max-splits`` times still kill their worker (or raise
    :class:`MemoryError`).
    """


class ClusterConnectError(ConnectionError):
    """The scheduler could not be reached, did not answer, or has no workers.

    The message is one line that says what to check.
    """


class ConfigError(ValueError):
    """A pipeline file is wrong; the message starts with the key at fault."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``run``: carries the writer, to say how far the run got."""

    def __init__(self, writer: object) -> None:
        super().__init__()
        self.writer = writer


class QuarantineWarning(UserWarning):
    """Records of a partition were quarantined (issued by ``to_dask()`` reads)."""


class CuratorWarning(UserWarning):
    """A condition in a run that the user can fix (partition size, memory, batch size)."""


def check_columns(
    found: list[str], where: str, text_column: str, id_column: str | None = None
) -> None:
    """Raise :class:`ColumnError` when ``text_column`` (or ``id_column``) is not in ``found``.

    The message names the columns found (the doctest elides them).

    ``id_column`` is None when the id may be absent (the readers generate ids where the
    input has none: the default ``"id"``).

    >>> check_columns(["id", "body"], "a.jsonl", "text")
    Traceback (most recent call last):
    ...
    curator_dask.errors.ColumnError: text column 'text' not found in a.jsonl; columns found: id, ...
    """
    for kind, name in (("text", text_column), ("id", id_column)):
        if name is not None and name not in found:
            shown = ", ".join(map(str, found[:20])) + (", ..." if len(found) > 20 else "")
            raise ColumnError(
                f"{kind} column {name!r} not found in {where}; columns found: {shown or '(none)'}"
            )


def check_quarantine_share(read: int, quarantined: int, where: str, result: object = None) -> None:
    """Raise :class:`QuarantineShareError` when ``quarantined`` reaches the configured share
    of ``read`` (``curator.io.max-quarantined-fraction``; 1: all of it; ``null``: never)."""
    from curator_dask import config

    limit = config.get("io.max-quarantined-fraction", 1.0)
    if limit is None or read <= 0 or quarantined < float(limit) * read:
        return
    raise QuarantineShareError(
        f"{quarantined:,} of the {read:,} records read were quarantined "
        f"({quarantined / read:.0%}, curator.io.max-quarantined-fraction is {float(limit):g}); "
        f"see the reasons in {where}",
        result,
    )


class MissingExtraError(ImportError):
    """A feature asked for needs a package of an extra that is not installed; the message
    says which and gives the install line. Raised before any work or cluster starts."""


#: The package each URL protocol needs (fsspec's implementations), and the extra or
#: package to install for it.
PROTOCOL_PACKAGES = {
    "s3": ("s3fs", "curator_dask[s3]"),
    "s3a": ("s3fs", "curator_dask[s3]"),
    "gs": ("gcsfs", "gcsfs"),
    "gcs": ("gcsfs", "gcsfs"),
    "abfs": ("adlfs", "adlfs"),
    "az": ("adlfs", "adlfs"),
}


def require(modules: tuple[str, ...], install: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` unless every module in ``modules`` imports.

    >>> require(("json",), "curator_dask[x]", "--flag")
    >>> try:
    ...     require(("no_such_module_here",), "curator_dask[x]", "--flag")
    ... except MissingExtraError as e:
    ...     print(e)
    --flag needs no_such_module_here, which is not installed: pip install 'curator_dask[x]'
    """
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise MissingExtraError(
                f"{feature} needs {name}, which is not installed: pip install '{install}'"
            ) from None


def require_protocols(paths: list[str]) -> None:
    """Raise :class:`MissingExtraError` when a URL in ``paths`` needs a filesystem package
    that is not installed (``s3://`` without ``s3fs``: the ``s3`` extra)."""
    for path in paths:
        protocol = path.split("://", 1)[0].lower() if "://" in path else ""
        if protocol in PROTOCOL_PACKAGES:
            module, install = PROTOCOL_PACKAGES[protocol]
            require((module,), install, f"{protocol}:// ({path})")
