"""Errors a run raises on purpose (each names what to check)."""

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
