"""Out-of-memory splitting (executor/_oom.py): pieces, labels, limits."""

from __future__ import annotations

import pytest

from curator_dask.executor import PartitionMemoryError
from curator_dask.executor._oom import SplitPartition, split_piece
from curator_dask.executor._tasks import Piece
from curator_dask.io.base import PartitionSpec, Reader


class Whole(Reader):
    """A reader that cannot read less than a partition (the default ``split``)."""


class Ranges(Reader):
    def split(self, spec: PartitionSpec) -> tuple[PartitionSpec, PartitionSpec] | None:
        assert spec.start is not None
        assert spec.end is not None
        mid = (spec.start + spec.end) // 2
        return (
            PartitionSpec(spec.index, spec.paths, spec.start, mid),
            PartitionSpec(spec.index, spec.paths, mid, spec.end),
        )


def test_a_whole_partition_is_split_into_row_slices() -> None:
    spec = PartitionSpec(3, ("a.jsonl",))
    a, b = split_piece(Whole(), Piece(spec))
    assert (a.label, a.rows, b.label, b.rows) == ("0", (0, 2), "1", (1, 2))
    c, d = split_piece(Whole(), b)  # the second half, halved again
    assert (c.label, c.rows, d.rows) == ("10", (2, 4), (3, 4))
    assert c.spec == spec  # the same read, fewer rows kept


def test_a_range_partition_is_split_into_narrower_reads() -> None:
    spec = PartitionSpec(0, ("a.jsonl",), 0, 100)
    a, b = split_piece(Ranges(), Piece(spec))
    assert (a.spec.start, a.spec.end, b.spec.start, b.spec.end) == (0, 50, 50, 100)
    assert a.rows is None
    assert b.rows is None


def test_split_partition_tracks_pieces_and_stops_at_the_limit() -> None:
    spec = PartitionSpec(7, ("big.jsonl",))
    split = SplitPartition(7, limit=2)
    halves = split.split(Whole(), Piece(spec), MemoryError("x"))
    assert split.labels == {"0", "1"}
    split.done["1"] = "future-1"
    assert not split.complete()
    quarters = split.split(Whole(), halves[0], MemoryError("y"))
    assert split.labels == {"00", "01", "1"}
    split.done.update({"01": "future-01", "00": "future-00"})
    assert split.complete()
    assert split.ordered() == ["future-00", "future-01", "future-1"]  # row order
    assert split.summary() == {"splits": 2, "pieces": ["00", "01", "1"], "reasons": ["MemoryError"]}
    with pytest.raises(PartitionMemoryError, match=r"partition 7 \(big.jsonl\).*max-splits = 2"):
        split.split(Whole(), quarters[0], MemoryError("z"))
