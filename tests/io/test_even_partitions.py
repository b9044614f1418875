"""A default split gives every worker thread its share of an input, in ranges of one size."""

from __future__ import annotations

from pathlib import Path

from curator_dask import sizing
from curator_dask.io import JsonlReader
from curator_dask.io.file_reader import FileInfo, byte_ranges

GiB = 2**30


def _one_file(tmp_path: Path, size: int) -> Path:
    line = '{"id": "%07d", "text": "' + "w " * 60 + '"}\n'
    lines, n, total = [], 0, 0
    while total < size:
        lines.append(line % n)
        total += len(lines[-1])
        n += 1
    (tmp_path / "in.jsonl").write_text("".join(lines))
    return tmp_path / "in.jsonl"


def test_two_workers_of_one_thread_get_four_partitions_not_five(tmp_path: Path) -> None:
    # 209 MB on the 2-worker box became 5 partitions: 4 of a quarter (rounded down) and a
    # sliver of the last bytes. Here 9 MB that 4 does not divide.
    path = _one_file(tmp_path, 9 * 2**20 + 3)
    size = path.stat().st_size
    assert size % 4
    specs = JsonlReader(str(path)).partitions(sizing.Workers(16 * GiB, 1, 2))
    assert len(specs) == 4
    lengths = [s.end - s.start for s in specs]
    assert max(lengths) - min(lengths) <= 1
    assert sum(lengths) == size


def test_byte_ranges_are_as_few_as_the_blocksize_allows_and_of_one_length() -> None:
    f = FileInfo("x.jsonl", 1000)
    assert byte_ranges(f, 600) == [(0, 500), (500, 1000)]
    assert byte_ranges(f, 1000) == [(0, 1000)]
    assert byte_ranges(f, 333) == [(0, 250), (250, 500), (500, 750), (750, 1000)]
    assert byte_ranges(FileInfo("y.jsonl", 10), 3) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert byte_ranges(FileInfo("z.jsonl.gz", 1000), 10) is None
