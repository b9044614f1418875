"""Writers: round trips, atomic part files, modes, markers, quarantine files, clear errors."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import dask
import dask.dataframe as dd
import pandas as pd
import pytest
from dask.dataframe.utils import assert_eq

from curator_dask.io import (
    JsonlWriter,
    ParquetWriter,
    _files,
    read_jsonl,
    read_parquet,
    read_quarantine,
    write_jsonl,
    write_parquet,
    write_quarantine,
)
from curator_dask.io._local import LocalFiles
from curator_dask.io.base import empty_quarantine


@pytest.fixture(autouse=True)
def _sync_scheduler():
    with dask.config.set(scheduler="sync"):
        yield


def _frame(n: int = 30) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [f"doc-{i}" for i in range(n)],
            "text": [f'text {i} / with a slash, é and "quotes"\n{i}' for i in range(n)],
            "score": [i / 3 for i in range(n)],
            "n": list(range(n)),
        }
    ).astype({"id": "string[pyarrow]", "text": "string[pyarrow]"})


@pytest.mark.parametrize(
    ("write", "read", "suffix"),
    [
        (write_jsonl, read_jsonl, "jsonl"),
        (write_parquet, read_parquet, "parquet"),
    ],
)
def test_round_trip(tmp_path: Path, write, read, suffix: str) -> None:
    pdf = _frame()
    df = dd.from_pandas(pdf, npartitions=3)
    results = write(df, str(tmp_path / "out"))
    assert [r.index for r in results] == [0, 1, 2]
    assert sum(r.rows for r in results) == len(pdf)
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [f"part-{i:05d}.{suffix}" for i in range(3)]
    back = read(str(tmp_path / "out"), files_per_partition=1)
    assert back.npartitions == 3
    assert_eq(back, pdf, check_index=False, check_dtype=False)
    marker = json.loads((Path(str(tmp_path / "out") + ".curator") / "_SUCCESS").read_text())
    assert marker["rows_written"] == len(pdf)
    assert marker["partitions"] == 3


def test_jsonl_text_is_plain_utf8(tmp_path: Path) -> None:
    write_jsonl(dd.from_pandas(_frame(2), npartitions=1), str(tmp_path))
    raw = (tmp_path / "part-00000.jsonl").read_bytes()
    assert "é".encode() in raw
    assert b"/ with" in raw  # no "\/" escapes
    assert [json.loads(x)["text"] for x in raw.splitlines()] == _frame(2)["text"].tolist()


def test_crash_before_rename_leaves_no_final_file(tmp_path: Path, monkeypatch) -> None:
    writer = JsonlWriter(str(tmp_path))
    writer.begin()

    def crash(fs, tmp, final):
        assert Path(tmp).exists()  # the data was written under the temporary name
        raise KeyboardInterrupt("worker killed between write and rename")

    monkeypatch.setattr(_files, "_commit", crash)
    with pytest.raises(KeyboardInterrupt):
        writer.write_partition(_frame(), 0)
    assert list(tmp_path.iterdir()) == []  # neither a final name nor a leftover
    monkeypatch.undo()
    # A temporary file left by a killed process (no cleanup ran) is removed by begin()
    # and never read as input.
    (tmp_path / "part-00001.jsonl.tmp-0123456789abcdef0123456789abcdef").write_text("{")
    with pytest.raises(FileNotFoundError, match="holds no files"):
        read_jsonl(str(tmp_path))
    JsonlWriter(str(tmp_path), mode="resume").begin()
    assert list(tmp_path.iterdir()) == []


def test_finish_removes_what_a_killed_attempt_left_mid_run(tmp_path: Path) -> None:
    # A worker killed while writing leaves its temporary file; the partition is written again
    # by another worker, and the finished run holds the documents and its metadata only.
    writer = JsonlWriter(str(tmp_path))
    writer.begin()
    orphans = [
        tmp_path / "part-00001.jsonl.tmp-0123456789abcdef0123456789abcdef",
        Path(str(tmp_path) + ".curator")
        / "_quarantine"
        / "part-00001.jsonl.tmp-ffffffffffffffffffffffffffffffff",
    ]
    for orphan in orphans:
        orphan.parent.mkdir(parents=True, exist_ok=True)
        orphan.write_text('{"id": "half')
    for i in range(2):
        writer.write_partition(_frame(), i)
    writer.finish({"written": 2})
    assert not any(o.exists() for o in orphans)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "part-00000.jsonl",
        "part-00001.jsonl",
    ]
    assert len(read_jsonl(str(tmp_path)).compute()) == 60


def test_resume_skips_finished_partitions(tmp_path: Path, monkeypatch) -> None:
    df = dd.from_pandas(_frame(), npartitions=3)
    write_jsonl(df, str(tmp_path))
    first = (tmp_path / "part-00000.jsonl").read_bytes()
    (tmp_path / "part-00001.jsonl").unlink()  # as if the run died before partition 1
    writer = JsonlWriter(str(tmp_path), mode="resume")
    writer.begin()
    assert not (
        Path(str(tmp_path) + ".curator") / "_SUCCESS"
    ).exists()  # an unfinished run is not marked done
    assert [writer.is_done(i) for i in range(3)] == [True, False, True]
    results = write_jsonl(df, str(tmp_path), mode="resume")
    assert [r.index for r in results] == [1]
    assert (tmp_path / "part-00000.jsonl").read_bytes() == first
    assert len(read_jsonl(str(tmp_path)).compute()) == 30
    marker = json.loads((Path(str(tmp_path) + ".curator") / "_SUCCESS").read_text())
    assert (marker["written"], marker["skipped"]) == (1, 2)
    assert not JsonlWriter(str(tmp_path)).is_done(0)  # overwrite mode never skips


def test_resume_picks_up_a_document_appended_to_an_input_file(tmp_path: Path) -> None:
    """Issue 21 (8): as the CLI's resume does, a changed input redoes its partitions."""
    import hashlib

    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    lines = [json.dumps({"id": f"a{i}", "text": f"doc {i}"}) for i in range(10)]
    (src / "a.jsonl").write_text("\n".join(lines) + "\n")
    (src / "b.jsonl").write_text(json.dumps({"id": "b0", "text": "other"}) + "\n")
    write_jsonl(read_jsonl(str(src), files_per_partition=1), str(out), mode="resume")
    again = write_jsonl(read_jsonl(str(src), files_per_partition=1), str(out), mode="resume")
    assert again == []  # nothing changed: nothing redone
    with open(src / "a.jsonl", "a") as f:
        f.write(json.dumps({"id": "a10", "text": "appended"}) + "\n")
    write_jsonl(read_jsonl(str(src), files_per_partition=1), str(out), mode="resume")

    def digest(rows: list[str]) -> list[str]:
        return sorted(hashlib.sha256(r.encode()).hexdigest() for r in rows)

    got = [x for p in sorted(out.glob("part-*.jsonl")) for x in p.read_text().splitlines()]
    want = [
        *(src / "a.jsonl").read_text().splitlines(),
        *(src / "b.jsonl").read_text().splitlines(),
    ]
    assert len(got) == 12
    assert digest([json.dumps(json.loads(x), sort_keys=True) for x in got]) == digest(
        [json.dumps(json.loads(x), sort_keys=True) for x in want]
    )


def test_overwrite_clears_an_earlier_run_only(tmp_path: Path) -> None:
    write_parquet(dd.from_pandas(_frame(), npartitions=5), str(tmp_path))
    write_quarantine(_quarantine_rows(2), str(tmp_path), 4)
    (tmp_path / "README.txt").write_text("keep me")
    write_parquet(dd.from_pandas(_frame(), npartitions=2), str(tmp_path))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "README.txt",
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    assert list((Path(str(tmp_path) + ".curator") / "_quarantine").iterdir()) == []


def test_error_mode_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    JsonlWriter(str(tmp_path / "new"), mode="error").begin()  # missing or empty: fine
    (tmp_path / "new" / "x").write_text("")
    with pytest.raises(FileExistsError, match="not empty"):
        JsonlWriter(str(tmp_path / "new"), mode="error").begin()
    with pytest.raises(ValueError, match="mode must be one of"):
        JsonlWriter(str(tmp_path), mode="append")


def test_errors_name_the_path(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match=r"could not prepare output directory .*file/out"):
        JsonlWriter(str(tmp_path / "file" / "out")).begin()

    writer = ParquetWriter(str(tmp_path / "out"))
    writer.begin()

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LocalFiles, "open", full)  # a plain local path's file system
    with pytest.raises(OSError, match=r"could not write .*part-00003\.parquet: No space") as err:
        writer.write_partition(_frame(), 3)
    assert err.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert list((tmp_path / "out").iterdir()) == []


def _quarantine_rows(n: int) -> pd.DataFrame:
    q = empty_quarantine()
    rows = pd.DataFrame(
        {
            "file": [f"in/{i}.jsonl" for i in range(n)],
            "line": list(range(1, n + 1)),
            "byte_offset": [10 * i for i in range(n)],
            "reason": ["malformed JSON"] * n,
            "raw": [b"{bad \xff" for _ in range(n)],
        }
    )
    return pd.concat([q, rows], ignore_index=True).astype(q.dtypes.to_dict())


def test_write_and_read_quarantine(tmp_path: Path) -> None:
    assert write_quarantine(empty_quarantine(), str(tmp_path), 0) is None
    path = write_quarantine(_quarantine_rows(3), str(tmp_path), 7)
    assert path == str(Path(str(tmp_path) + ".curator") / "_quarantine" / "part-00007.jsonl")
    q = read_quarantine(str(tmp_path))
    assert q["line"].tolist() == [1, 2, 3]
    assert q["raw"].tolist() == ["{bad \\xff"] * 3  # bytes decoded with backslashreplace
    assert q["partition"].tolist() == [7] * 3
    # An empty frame for the same index removes the stale file of an earlier run.
    write_quarantine(empty_quarantine(), str(tmp_path), 7)
    assert read_quarantine(str(tmp_path)).empty


def test_writers_are_picklable_and_accept_pandas(tmp_path: Path) -> None:
    import pickle

    writer = pickle.loads(pickle.dumps(ParquetWriter(str(tmp_path), compression="snappy")))
    writer.begin()
    res = writer.write_partition(_frame(4), 12)
    assert res.path.endswith("part-00012.parquet")
    assert res.rows == 4
    writer.finish({"read": 4})
    assert json.loads((Path(str(tmp_path) + ".curator") / "_SUCCESS").read_text()) == {"read": 4}
    assert len(write_jsonl(_frame(3), str(tmp_path / "j"))) == 1


@pytest.mark.gpu
def test_cudf_partitions_are_written_like_pandas(tmp_path: Path) -> None:
    cudf = pytest.importorskip("cudf")
    pdf = _frame()
    for cls in (JsonlWriter, ParquetWriter):
        cpu = cls(str(tmp_path / f"cpu-{cls.__name__}"))
        gpu = cls(str(tmp_path / f"gpu-{cls.__name__}"))
        cpu.begin()
        gpu.begin()
        a = cpu.write_partition(pdf, 0)
        b = gpu.write_partition(cudf.from_pandas(pdf), 0)
        assert a.rows == b.rows
        if cls is JsonlWriter:
            assert Path(a.path).read_bytes() == Path(b.path).read_bytes()
        else:
            pd.testing.assert_frame_equal(pd.read_parquet(a.path), pd.read_parquet(b.path))


def test_a_parquet_part_is_written_straight_to_its_file_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dedup step's part file (``write_parquet_atomic``) goes to disk without the whole file
    in memory (before: a buffer and a copy of it as Python bytes, twice the file), appears
    only complete, and a failed write leaves nothing behind."""
    import tracemalloc

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curator_dask.io.parquet_dir import write_parquet_atomic

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"text": [rng.bytes(2000).hex() for _ in range(1000)]})  # 4 MB
    path = tmp_path / "sub" / "part-00000.parquet"
    write_parquet_atomic(frame.iloc[:2], str(tmp_path / "warm.parquet"))  # imports, caches
    tracemalloc.start()
    try:
        write_parquet_atomic(frame, str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert path.stat().st_size > 4_000_000
    assert peak < 1_000_000  # no copy of the file among Python's objects
    assert pq.read_table(path).to_pandas()["text"].tolist() == frame["text"].tolist()
    assert [p.name for p in path.parent.iterdir()] == [path.name]

    def fail_midway(table: pa.Table, where: object, **_: object) -> None:
        with pa.output_stream(where) if isinstance(where, str) else where as out:
            out.write(b"PAR1 half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", fail_midway)
    with pytest.raises(OSError, match=r"part-00001\.parquet: No space left"):
        write_parquet_atomic(frame, str(tmp_path / "sub" / "part-00001.parquet"))
    assert [p.name for p in path.parent.iterdir()] == [path.name]
