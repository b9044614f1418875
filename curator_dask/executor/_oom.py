"""Out-of-memory splitting: a partition that kills its worker is recomputed in pieces.

A piece is a binary-tree label over a partition (``""`` whole, ``"0"``/``"1"`` its halves,
``"01"`` the second half of the first half); sorting the labels gives the pieces in row
order. A piece is read narrower where the reader can (:meth:`Reader.split`), else as row
slices of what the reader reads. When every piece of a partition is done, the pieces are
written together as the partition's one file (``_tasks.write_pieces_task``).
"""

from __future__ import annotations

from typing import Any

from curator_dask import config as _config
from curator_dask.errors import PartitionMemoryError
from curator_dask.executor._tasks import Piece
from curator_dask.io.base import PartitionSpec, Reader


def max_splits() -> int:
    """``curator.execution.max-splits``: how many times a partition may be halved."""
    n = _config.get("execution.max-splits", 3)
    n = 3 if n is None else int(n)
    if n < 0:
        raise ValueError(f"curator.execution.max-splits must be >= 0, got {n}")
    return n


def out_of_memory(exc: BaseException | None) -> bool:
    """A worker killed (by its nanny at the memory limit, or the kernel), or a MemoryError."""
    from distributed import KilledWorker

    from curator_dask.monitoring.checks import is_gpu_oom  # imported when a task fails

    if isinstance(exc, (KilledWorker, MemoryError)):
        return True
    return exc is not None and is_gpu_oom(exc)


def describe(spec: PartitionSpec) -> str:
    """``a.jsonl, b.jsonl [0:1024]``: the files of a partition, for messages."""
    names = ", ".join(p.rsplit("/", 1)[-1] for p in spec.paths[:3])
    if len(spec.paths) > 3:
        names += f", ... ({len(spec.paths)} files)"
    if spec.start is not None:
        names += f" [{spec.start}:{spec.end}]"
    return names


def split_piece(reader: Reader, piece: Piece) -> tuple[Piece, Piece]:
    """Cut ``piece`` in two halves: narrower reads where the reader can
    (:meth:`~curator_dask.io.base.Reader.split`), else two row slices of what it reads."""
    a, b = piece.label + "0", piece.label + "1"
    halves = reader.split(piece.spec) if piece.rows is None else None
    if halves is not None:
        return Piece(halves[0], a), Piece(halves[1], b)
    k, m = piece.rows or (0, 1)
    return Piece(piece.spec, a, (2 * k, 2 * m)), Piece(piece.spec, b, (2 * k + 1, 2 * m))


class SplitPartition:
    """The pieces of one partition being recomputed after running out of memory."""

    def __init__(self, index: int, limit: int) -> None:
        self.index = index
        self.limit = limit
        self.labels: set[str] = set()
        self.done: dict[str, Any] = {}  # label -> the piece's future (its data on a worker)
        self.splits = 0
        self.reasons: list[str] = []

    def split(self, reader: Reader, piece: Piece, exc: BaseException) -> tuple[Piece, Piece]:
        """Record that ``piece`` failed with ``exc``; return its halves.

        Raises :class:`PartitionMemoryError` when ``piece`` is already as small as
        ``curator.execution.max-splits`` allows.
        """
        if len(piece.label) >= self.limit:
            raise PartitionMemoryError(
                f"partition {self.index} ({describe(piece.spec)}) still failed with "
                f"{type(exc).__name__} after {len(piece.label)} split(s) into pieces of "
                f"1/{2 ** len(piece.label)} (curator.execution.max-splits = {self.limit}); "
                f"use smaller partitions (blocksize) or give workers more memory: {exc}"
            ) from exc
        halves = split_piece(reader, piece)
        self.labels.discard(piece.label)
        self.labels.update(h.label for h in halves)
        self.splits += 1
        self.reasons.append(type(exc).__name__)
        return halves

    def complete(self) -> bool:
        """True when every piece is computed: time to write them as one file."""
        return set(self.done) == self.labels

    def ordered(self) -> list[Any]:
        """The pieces' futures in row order."""
        return [self.done[label] for label in sorted(self.done)]

    def summary(self) -> dict[str, Any]:
        """What the partition's statistics record says about the split."""
        return {
            "splits": self.splits,
            "pieces": sorted(self.labels),
            "reasons": sorted(set(self.reasons)),
        }
