"""The sizing policy lives in one module, and one function turns a reader's blocksize into bytes."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest

from curator_dask import config, sizing
from curator_dask.io import JsonlReader, ParquetReader

PACKAGE = Path(__file__).resolve().parents[1] / "curator_dask"


def test_the_old_config_names_are_the_sizing_functions() -> None:
    for name in (
        "BASE_WORKER_BYTES",
        "blocksize_for_memory",
        "default_blocksize",
        "tightest_worker",
        "worker_resources",
        "workers_of",
    ):
        assert getattr(config, name) is getattr(sizing, name)


def test_only_sizing_reads_the_sizing_settings() -> None:
    # every curator.io.* setting that sizes partitions is read in sizing.py and nowhere else
    keys = {
        "io.blocksize",
        "io.blocksize-from-memory",
        "io.peak-per-partition-byte",
        "io.memory-fraction",
        "io.split-above",
        "io.partitions-per-thread",
    }
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and text.removeprefix("curator.") in keys:
                readers.add(path.relative_to(PACKAGE).as_posix())
    assert readers == {"sizing.py"}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_readers_take_their_default_blocksize_from_one_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    frame = pd.DataFrame({"id": [str(i) for i in range(2000)], "text": ["some text"] * 2000})
    if fmt == "jsonl":
        frame.to_json(tmp_path / "a.jsonl", orient="records", lines=True)
        reader: JsonlReader | ParquetReader = JsonlReader(str(tmp_path))
    else:
        frame.to_parquet(tmp_path / "a.parquet", row_group_size=100)
        reader = ParquetReader(str(tmp_path))
    size = (tmp_path / f"a.{fmt}").stat().st_size
    asked = []

    def default(client=None, expansion=1.0, input_bytes=None, workers=None):
        asked.append((expansion, input_bytes))
        return max(1, size // 4)

    monkeypatch.setattr(sizing, "default_blocksize", default)
    specs = reader.partitions()
    assert asked == [(type(reader).expansion, float(size))]  # asked once, for this listing
    assert len(specs) >= 3  # cut by what the one place said
    assert reader.partition_bytes == max(1, size // 4)
    # a given blocksize is used as given, never the default
    given = JsonlReader(str(tmp_path), blocksize="1MB") if fmt == "jsonl" else None
    if given is not None:
        given.partitions()
        assert given.partition_bytes == 1_000_000
        assert len(asked) == 1


def test_resolve_blocksize_checks_what_it_is_given() -> None:
    assert sizing.resolve_blocksize(1234) == 1234
    assert sizing.resolve_blocksize("2KiB") == 2048
    assert sizing.resolve_blocksize("64MB", files_per_partition=None) == 64_000_000
    assert sizing.resolve_blocksize(None, files_per_partition=3) is None
    with pytest.raises(ValueError, match="blocksize must be > 0 bytes"):
        sizing.resolve_blocksize(0)
