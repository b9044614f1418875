"""The functions that run inside tasks: read, stage, write, and their batch-mode forms.

Each returns its statistics as a value (never a counter mutated in a partition); the
client sums them. The per-partition record a write task returns is also stored next to the
output (``<output>/_stats/part-xxxxx.json``) so a resumed run can account for partitions
it skips.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
from fsspec.core import url_to_fs

from curator_dask import _backend
from curator_dask import config as _config
from curator_dask.io.base import PartitionSpec, Reader, Writer, empty_quarantine
from curator_dask.io.quarantine import write_quarantine_file
from curator_dask.stage import ProcessingStage, StageStats, ready_stage, run_stage

STATS_DIR = "_stats"
WORK_DIR = "_work"
QUARANTINE_DIR = "_quarantine"
_OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "abfs", "az", "adl", "oss"}


def part_name(index: int, suffix: str) -> str:
    """``part-00003.json`` style names, matching the writers' output names."""
    return f"part-{index:05d}{suffix}"


# -- small file helpers (fsspec, so outputs on object stores work too) ----------------------
def _fs(path: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    return url_to_fs(path, **(storage_options or {}))


def _join(root: str, *names: str) -> str:
    return "/".join([root.rstrip("/"), *names])


def _is_object_store(fs: Any) -> bool:
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return any(p in _OBJECT_STORES for p in protocols)


def write_bytes_atomic(fs: Any, path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so a reader never sees a partial file."""
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    if _is_object_store(fs):  # an object appears only when its upload completes
        with fs.open(path, "wb") as f:
            f.write(data)
        return
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with fs.open(tmp, "wb") as f:
        f.write(data)
    fs.mv(tmp, path)


def read_json(fs: Any, path: str) -> dict[str, Any] | None:
    """Return the JSON object at ``path``, or None if it is missing or unreadable."""
    try:
        with fs.open(path, "rb") as f:
            return json.loads(f.read())
    except (FileNotFoundError, ValueError):
        return None


def stats_path(output: str, index: int) -> str:
    """Where the statistics of partition ``index`` are stored."""
    return _join(output, STATS_DIR, part_name(index, ".json"))


def write_quarantine(
    frame: pd.DataFrame | None,
    output: str,
    index: int,
    storage_options: dict[str, Any] | None = None,
) -> str | None:
    """Write partition ``index``'s quarantine records (or remove a stale file if none).

    The directory is ``curator.io.quarantine-dir`` if set, else ``<output>/_quarantine``;
    the format is that of :func:`curator_dask.io.write_quarantine`.
    """
    qdir = _config.get("io.quarantine-dir") or _join(output, QUARANTINE_DIR)
    if frame is None:
        frame = empty_quarantine()
    return write_quarantine_file(frame, qdir, index, storage_options)


# -- streaming mode ---------------------------------------------------------------------------
@dataclass
class Carry:
    """What travels along one partition's chain of tasks."""

    index: int
    part: Any
    quarantine: pd.DataFrame | None
    stats: list[dict[str, Any]] = field(default_factory=list)


def read_task(reader: Reader, spec: PartitionSpec) -> Carry:
    """Read one partition; the reader's statistics are the chain's first entry."""
    t0 = time.perf_counter()
    result = reader.read_partition(spec)
    data = result.data
    n_quarantined = len(result.quarantine)
    stats = StageStats(
        type(reader).__name__,
        docs_in=int(result.docs_read),
        docs_out=len(data),
        quarantined=n_quarantined,
        seconds=time.perf_counter() - t0,
    )
    return Carry(spec.index, data, result.quarantine, [stats.to_dict()])


def stage_task(stage: ProcessingStage, carry: Carry) -> Carry:
    """Run one stage (set up once in this process) on the carried partition."""
    out, stats = run_stage(ready_stage(stage), carry.part)
    return replace(carry, part=out, stats=[*carry.stats, stats.to_dict()])


def write_task(
    writer: Writer,
    carry: Carry,
    output: str,
    token: str,
    storage_options: dict[str, Any] | None = None,
    note: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the partition, its quarantine records and its statistics; return the record.

    The statistics file is written last: a partition counts as done for a resumed run only
    when its output and its statistics are both there. ``note`` is added to the record
    (e.g. ``{"split": ...}`` for a partition computed in pieces).
    """
    t0 = time.perf_counter()
    n_in = len(carry.part)
    written = writer.write_partition(carry.part, carry.index)
    if carry.quarantine is not None:
        write_quarantine(carry.quarantine, output, carry.index, storage_options)
    stats = StageStats(
        type(writer).__name__,
        docs_in=n_in,
        docs_out=int(written.rows),
        seconds=time.perf_counter() - t0,
    )
    record = {
        "index": carry.index,
        "token": token,
        "path": written.path,
        "rows": int(written.rows),
        "stages": [*carry.stats, stats.to_dict()],
        "finished_at": time.time(),
        **(note or {}),
    }
    fs, root = _fs(output, storage_options)
    write_bytes_atomic(
        fs, stats_path(root, carry.index), json.dumps(record, indent=1).encode("utf-8")
    )
    return record


# -- pieces: a partition split after running out of memory -------------------------------
@dataclass(frozen=True)
class Piece:
    """Part of partition ``spec.index``, computed on its own after an out-of-memory failure.

    ``label`` is the piece's path in the binary split tree (``""`` the whole partition,
    ``"0"``/``"1"`` its halves, ``"01"`` the second half of the first half), so sorting the
    labels gives the pieces in row order. ``spec`` is what is read: a narrower byte range
    (JSONL) or row-group range (Parquet) when the partition is such a range, else the
    partition itself, of which only the ``rows = (k, m)`` slice (the k-th of m equal row
    slices) is kept after reading.
    """

    spec: PartitionSpec
    label: str = ""
    rows: tuple[int, int] | None = None


def _range_reader(reader: Reader) -> bool:
    # Readers whose PartitionSpec.start/end may be cut anywhere in between: JSONL byte
    # ranges (a line belongs to the range it starts in) and Parquet row-group ranges.
    from curator_dask.io import JsonlReader, ParquetReader

    return isinstance(reader, (JsonlReader, ParquetReader))


def split_piece(reader: Reader, piece: Piece) -> tuple[Piece, Piece]:
    """Cut ``piece`` in two halves (by range where the reader allows it, else by rows)."""
    spec = piece.spec
    a, b = piece.label + "0", piece.label + "1"
    if (
        piece.rows is None
        and spec.start is not None
        and spec.end is not None
        and spec.end - spec.start >= 2
        and _range_reader(reader)
    ):
        mid = (spec.start + spec.end) // 2
        return Piece(replace(spec, end=mid), a), Piece(replace(spec, start=mid), b)
    k, m = piece.rows or (0, 1)
    return Piece(spec, a, (2 * k, 2 * m)), Piece(spec, b, (2 * k + 1, 2 * m))


def read_piece_task(reader: Reader, piece: Piece) -> Carry:
    """Read one piece of a split partition (the quarantine goes with its first row slice)."""
    t0 = time.perf_counter()
    carry = read_task(reader, piece.spec)
    if piece.rows is None:
        return carry
    k, m = piece.rows
    n = len(carry.part)
    lo, hi = n * k // m, n * (k + 1) // m
    part = carry.part.iloc[lo:hi]
    quarantine = carry.quarantine if k == 0 else None
    n_quarantined = 0 if quarantine is None else len(quarantine)
    stats = StageStats(
        type(reader).__name__,
        docs_in=(hi - lo) + n_quarantined,
        docs_out=hi - lo,
        quarantined=n_quarantined,
        seconds=time.perf_counter() - t0,
    )
    return Carry(carry.index, part, quarantine, [stats.to_dict()])


def _concat_frames(parts: list[Any]) -> Any:
    nonempty = [p for p in parts if len(p)] or parts[:1]
    if len(nonempty) == 1:
        return nonempty[0]
    if isinstance(nonempty[0], pd.DataFrame):
        return pd.concat(nonempty)
    return _backend.frame_module().concat(nonempty)


def _sum_stats(stats: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    from curator_dask.pipeline import _stats_from_dict

    out = []
    for column in zip(*stats, strict=True):
        total = _stats_from_dict(column[0])
        for d in column[1:]:
            total = total + _stats_from_dict(d)
        out.append(replace(total, partitions=1).to_dict())  # still one partition
    return out


def write_pieces_task(
    writer: Writer,
    carries: list[Carry],
    output: str,
    token: str,
    storage_options: dict[str, Any] | None = None,
    split: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the pieces of a split partition, in order, as that partition's one file.

    The output file, quarantine file and statistics file have the names and contents an
    unsplit run gives them (the statistics also hold ``split``), so resume and downstream
    readers see no difference.
    """
    part = _concat_frames([c.part for c in carries])
    quarantines = [c.quarantine for c in carries if c.quarantine is not None]
    quarantines = [q for q in quarantines if len(q)] or quarantines[:1] or [empty_quarantine()]
    quarantine = (
        pd.concat(quarantines, ignore_index=True) if len(quarantines) > 1 else quarantines[0]
    )
    carry = Carry(carries[0].index, part, quarantine, _sum_stats([c.stats for c in carries]))
    return write_task(writer, carry, output, token, storage_options, {"split": split or {}})


# -- batch mode ---------------------------------------------------------------------------------
def _write_frame(fs: Any, path: str, part: Any) -> None:
    buf = io.BytesIO()
    part.to_parquet(buf)
    write_bytes_atomic(fs, path, buf.getvalue())


def _read_frame(fs: Any, path: str) -> Any:
    with fs.open(path, "rb") as f:
        data = f.read()
    return _backend.frame_module().read_parquet(io.BytesIO(data))


def _marker(fs: Any, step_dir: str, index: int, token: str, stats: dict[str, Any]) -> dict:
    marker = {"index": index, "token": token, "stats": stats}
    write_bytes_atomic(
        fs, _join(step_dir, part_name(index, ".done.json")), json.dumps(marker).encode()
    )
    return marker


def batch_done(
    step_dir: str, index: int, token: str, storage_options: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Return the completion marker of a batch step for ``index`` if it matches ``token``."""
    fs, root = _fs(step_dir, storage_options)
    marker = read_json(fs, _join(root, part_name(index, ".done.json")))
    if marker is None or marker.get("token") != token:
        return None
    if not fs.exists(_join(root, part_name(index, ".parquet"))):
        return None
    return marker


def batch_read_task(
    reader: Reader,
    spec: PartitionSpec,
    step_dir: str,
    output: str,
    token: str,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Batch step 0: read a partition to Parquet, write its quarantine records."""
    carry = read_task(reader, spec)
    write_quarantine(carry.quarantine, output, spec.index, storage_options)
    fs, root = _fs(step_dir, storage_options)
    _write_frame(fs, _join(root, part_name(spec.index, ".parquet")), carry.part)
    return _marker(fs, root, spec.index, token, carry.stats[0])


def batch_stage_task(
    stage: ProcessingStage,
    index: int,
    in_dir: str,
    step_dir: str,
    token: str,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Batch step k: run a stage on the previous step's Parquet file of one partition."""
    fs, in_root = _fs(in_dir, storage_options)
    part = _read_frame(fs, _join(in_root, part_name(index, ".parquet")))
    out, stats = run_stage(ready_stage(stage), part)
    _, root = _fs(step_dir, storage_options)
    _write_frame(fs, _join(root, part_name(index, ".parquet")), out)
    return _marker(fs, root, index, token, stats.to_dict())


def batch_write_task(
    writer: Writer,
    index: int,
    in_dir: str,
    stage_stats: list[dict[str, Any]],
    output: str,
    token: str,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Batch last step: write the final partition with the statistics of every step."""
    fs, in_root = _fs(in_dir, storage_options)
    part = _read_frame(fs, _join(in_root, part_name(index, ".parquet")))
    # Step 0 already wrote the quarantine records: carry none, so they are kept.
    carry = Carry(index, part, None, list(stage_stats))
    return write_task(writer, carry, output, token, storage_options)


# -- worker setup -------------------------------------------------------------------------
def setup_on_node(stages: list[ProcessingStage]) -> None:
    """Run every stage's ``setup_on_node`` (called on one worker per host)."""
    for stage in stages:
        stage.setup_on_node()
