"""How a failed or interrupted command is told: an exit status and one or two lines."""

from __future__ import annotations

import errno
from typing import Any

from curator_dask.errors import ConfigError


def _finished_partitions(writer: Any) -> tuple[int, str] | None:
    """Partitions with their statistics record written (what a resumed run skips)."""
    try:
        layout = writer.layout
        stats_dir = layout.partition_stats_path(0).rsplit("/", 1)[0]
        fs, root = layout.fs(stats_dir)
        names = fs.glob(root.rstrip("/") + "/part-*.json") if fs.exists(root) else []
        return len(names), layout.root
    except Exception:  # the message is best effort; never hide the interrupt
        return None


def interrupted_message(err: KeyboardInterrupt) -> str:
    writer = getattr(err, "writer", None)
    done = _finished_partitions(writer) if writer is not None else None
    if done is None:
        return "curator-dask: interrupted (Ctrl-C)"
    n, root = done
    mode = getattr(writer, "mode", None)
    how = (
        "run the same command again to continue"
        if mode == "resume"
        else "set the writer's mode: resume and run again to continue from there"
    )
    return (
        f"curator-dask: interrupted (Ctrl-C): {n} partition(s) finished in {root}\n"
        f"curator-dask: {how} (finished partitions are not redone)"
    )


def _one_line(err: BaseException, limit: int = 400) -> str:
    text = str(err).strip().splitlines()
    line = text[0] if text else ""
    if isinstance(err, OSError) and err.filename and str(err.filename) not in line:
        line = f"{line}: {err.filename}" if line else str(err.filename)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe_error(err: BaseException) -> tuple[int, str]:
    """Exit status and the one or two lines that tell a user what went wrong and what to do.

    2 for a usage error (arguments, the pipeline file), 1 for everything at run time.
    """
    from curator_dask.cluster import ClusterConnectError

    name = type(err).__name__
    msg = _one_line(err)
    if isinstance(err, ConfigError) or name in ("ColumnError", "MissingExtraError"):
        return 2, f"curator-dask: error: {msg}"
    if isinstance(err, ClusterConnectError):
        return 1, f"curator-dask: error: {msg}"
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return 1, (
            f"curator-dask: error: no S3 credentials: {msg}\n"
            "curator-dask: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, or "
            "storage_options {key, secret}"
        )
    object_store = any(f"{p}://" in msg for p in ("s3", "gs", "gcs", "abfs", "az"))
    if name == "ClientError" or (isinstance(err, PermissionError) and object_store):
        return 1, (
            f"curator-dask: error: the object store refused the request: {msg}\n"
            "curator-dask: check the credentials, the bucket name and its permissions"
        )
    if isinstance(err, FileNotFoundError):
        if "bucket" in msg.lower():
            return 1, f"curator-dask: error: {msg}"
        return 1, f"curator-dask: error: {msg}\ncurator-dask: check the path and that it exists"
    if isinstance(err, PermissionError):
        return 1, (
            f"curator-dask: error: permission denied: {msg}\n"
            "curator-dask: check the permissions of that path, or write elsewhere"
        )
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        return 1, (
            f"curator-dask: error: disk full: {msg}\n"
            "curator-dask: free space or write elsewhere; with mode: resume a rerun keeps "
            "the finished partitions"
        )
    if isinstance(err, OSError) and (
        err.errno == errno.EBUSY or "reduce your request rate" in msg.lower()
    ):  # s3fs's SlowDown (503) once its retries and botocore's ran out
        return 1, (
            f"curator-dask: error: the object store kept throttling the requests (SlowDown) "
            f"after its retries: {msg}\n"
            "curator-dask: run again later or with fewer workers (with mode: resume a rerun "
            "keeps the finished partitions)"
        )
    known = (
        "AccountingError",
        "MalformedInputError",
        "TruncatedInputError",
        "QuarantineShareError",
    )
    if name in known or isinstance(err, (OSError, MemoryError)):
        return 1, f"curator-dask: error: {msg}"
    # where it failed (the executor's note on a task's exception, e.g. "in partition 3")
    where = next((n for n in getattr(err, "__notes__", ()) if n.startswith("in partition ")), "")
    return 1, (
        f"curator-dask: error: {name}: {msg}{f' ({where})' if where else ''}\n"
        "curator-dask: run again with --debug for the traceback"
    )
