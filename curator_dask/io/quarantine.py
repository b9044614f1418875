"""Quarantine files: the bad input records a read set aside, one JSONL file per partition.

Each line is a JSON object with the keys of :data:`QUARANTINE_COLUMNS`: ``file`` (the input
file), ``line`` (1-based line number in that file, -1 when unknown; for Parquet the 0-based
row number),
``byte_offset`` (of the record in the decompressed file, -1 for Parquet), ``reason`` and
``raw`` (the record's original bytes decoded as UTF-8 with ``backslashreplace``).
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

import pandas as pd

from curator_dask.io._files import get_fs, part_name, write_bytes

#: Columns of a quarantine record (one row per rejected input record).
QUARANTINE_COLUMNS = ("file", "line", "byte_offset", "reason", "raw")


def empty_quarantine() -> pd.DataFrame:
    """Return an empty quarantine frame with the standard columns."""
    return pd.DataFrame(
        {
            "file": pd.Series([], dtype="string"),
            "line": pd.Series([], dtype="int64"),
            "byte_offset": pd.Series([], dtype="int64"),
            "reason": pd.Series([], dtype="string"),
            "raw": pd.Series([], dtype="object"),
        }
    )


def quarantine_part_name(index: int) -> str:
    """``part-00042.jsonl`` for partition 42."""
    return part_name(index, ".jsonl")


def encode_quarantine(frame: pd.DataFrame) -> bytes:
    """Serialise quarantine rows as JSONL bytes."""
    lines = []
    for file, line, offset, reason, raw in zip(
        *(frame[c].tolist() for c in QUARANTINE_COLUMNS), strict=True
    ):
        if isinstance(raw, (bytes, bytearray, memoryview)):
            raw = bytes(raw).decode("utf-8", errors="backslashreplace")
        rec = {
            "file": str(file),
            "line": int(line),
            "byte_offset": int(offset),
            "reason": str(reason),
            "raw": "" if raw is None else str(raw),
        }
        lines.append(json.dumps(rec, ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode("utf-8", errors="surrogatepass") if lines else b""


def write_quarantine_file(
    frame: pd.DataFrame, directory: str, index: int, storage_options: dict[str, Any] | None
) -> str | None:
    """Write ``frame`` to ``<directory>/part-<index>.jsonl`` (atomic); remove a stale one if empty.

    Returns the path written, or None when ``frame`` is empty.
    """
    fs, root = get_fs(directory, storage_options)
    final = posixpath.join(root.rstrip("/"), quarantine_part_name(index))
    if not len(frame):
        if fs.exists(final):
            fs.rm(final)
        return None
    fs.makedirs(root, exist_ok=True)
    write_bytes(fs, final, encode_quarantine(frame))
    return final if "://" not in directory else fs.unstrip_protocol(final)


def read_quarantine(path: str, storage_options: dict[str, Any] | None = None) -> pd.DataFrame:
    """Load quarantined records into one pandas frame.

    Parameters
    ----------
    path : str
        A quarantine file, a directory of ``part-*.jsonl`` quarantine files, or an output
        directory (the ``_quarantine/`` folder of its ``<path>.curator/`` beside it).
    storage_options : dict, optional
        Passed to fsspec.

    Returns
    -------
    pandas.DataFrame
        Columns ``file, line, byte_offset, reason, raw`` (``raw`` as the text stored in the
        file), plus ``partition`` (the index in the file name, -1 if it has none). Empty when
        nothing was quarantined.

    Examples
    --------
    >>> read_quarantine("/no/such/dir").empty
    True
    """
    fs, root = get_fs(path, storage_options)
    if fs.isfile(root):
        files = [root]
    elif fs.isdir(root):
        # an output directory: its metadata folder's quarantine (io.layout: beside it, or
        # inside it in older versions), or the oldest layout's _quarantine/ in it
        top = root.rstrip("/")
        subs = [top + ".curator/_quarantine"] + [
            posixpath.join(top, d) for d in (".curator/_quarantine", "_quarantine")
        ]
        base = next((sub for sub in subs if fs.isdir(sub)), root)
        files = sorted(p for p in fs.glob(posixpath.join(base.rstrip("/"), "part-*.jsonl")))
    else:
        files = []
    frames = []
    for name in files:
        data = fs.cat_file(name)
        recs = [json.loads(line) for line in data.splitlines() if line.strip()]
        if not recs:
            continue
        part = pd.DataFrame.from_records(recs, columns=list(QUARANTINE_COLUMNS))
        stem = posixpath.basename(name)
        digits = stem[len("part-") : -len(".jsonl")]
        part["partition"] = int(digits) if digits.isdigit() else -1
        frames.append(part)
    if not frames:
        out = empty_quarantine()
        out["raw"] = out["raw"].astype("string")
        out["partition"] = pd.Series([], dtype="int64")
        return out
    out = pd.concat(frames, ignore_index=True)
    return out.astype(
        {
            "file": "string",
            "line": "int64",
            "byte_offset": "int64",
            "reason": "string",
            "raw": "string",
            "partition": "int64",
        }
    )
