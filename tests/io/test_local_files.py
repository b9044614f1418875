"""Plain local paths go through :class:`curator_dask.io._local.LocalFiles`, fsspec's local
file system without importing fsspec: every method the package calls answers as fsspec's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from curator_dask.io._files import get_fs, split_protocol
from curator_dask.io._local import LocalFiles


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Files, folders, a hidden file, links to a file and a folder, a broken link; the
    working directory is the tree's parent (relative paths)."""
    root = tmp_path / "tree"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "one.jsonl").write_bytes(b'{"id": 1}\n{"id": 2}\n')
    (root / "a" / "b" / "two.jsonl").write_bytes(b"x" * 100)
    (root / ".hidden").write_bytes(b"h")
    (root / "empty").mkdir()
    (root / "to_file").symlink_to(root / "a" / "one.jsonl")
    (root / "to_dir").symlink_to(root / "a")
    (root / "broken").symlink_to(root / "nowhere")
    monkeypatch.chdir(tmp_path)
    return root


def _same(got: Any, want: Any) -> None:
    if isinstance(want, list) and want and isinstance(want[0], dict):
        got, want = sorted(got, key=lambda i: i["name"]), sorted(want, key=lambda i: i["name"])
    elif isinstance(want, list):
        got, want = sorted(got), sorted(want)
    assert got == want


def test_local_files_answer_as_fsspecs_local_file_system(tree: Path) -> None:
    ours, theirs = LocalFiles(), LocalFileSystem()
    names = ["tree", "./tree", "tree/", str(tree), "tree/a/one.jsonl", "tree/to_file"]
    names += ["tree/to_dir", "tree/broken", "tree/missing", "tree/empty", "tree/a/../a"]
    for name in names:
        for method in ("exists", "isdir", "isfile"):
            assert getattr(ours, method)(name) == getattr(theirs, method)(name), (method, name)
        for method, kwargs in [
            ("info", {}),
            ("size", {}),
            ("ls", {"detail": False}),
            ("ls", {"detail": True}),
            ("find", {}),
            ("find", {"detail": True}),
            ("find", {"withdirs": True, "maxdepth": 1}),
            ("find", {"withdirs": True, "maxdepth": 2}),
        ]:
            try:
                want = getattr(theirs, method)(name, **kwargs)
            except OSError as err:
                with pytest.raises(type(err)):
                    getattr(ours, method)(name, **kwargs)
                continue
            _same(getattr(ours, method)(name, **kwargs), want)
            if method == "find" and kwargs.get("detail"):
                assert list(getattr(ours, method)(name, **kwargs)) == list(want)  # order
    one = "tree/a/one.jsonl"
    for start, end in [(None, None), (3, None), (3, 9), (-5, None), (0, -3), (5, 1000)]:
        assert ours.cat_file(one, start=start, end=end) == theirs.cat_file(one, start, end)
    for pattern in ["tree/a/*.jsonl", "tree/*", "tree/?o_*", "tree/*/", "tree/a/*.none"]:
        assert ours.glob(pattern) == theirs.glob(pattern), pattern
        assert ours.glob(pattern, detail=True) == theirs.glob(pattern, detail=True), pattern
    for pattern in ["tree/**/*.jsonl", "tree/*/*.jsonl", "tree/[at]*", "nowhere/*", "*"]:
        assert ours.glob(pattern) == theirs.glob(pattern), pattern
    assert ours.unstrip_protocol("tree/a") == theirs.unstrip_protocol("tree/a")


def test_local_files_write_move_and_remove_as_fsspec(tree: Path) -> None:
    fs = LocalFiles()
    fs.makedirs("out/x", exist_ok=True)
    fs.makedirs("out/x", exist_ok=True)
    with pytest.raises(FileExistsError):
        fs.makedirs("out/x")
    with fs.open("out/x/f.bin", "wb") as f:
        f.write(b"abc")
    fs.pipe_file("out/x/g.bin", b"def")
    with pytest.raises(FileExistsError):
        fs.pipe_file("out/x/g.bin", b"again", mode="create")
    with fs.open("out/x/f.bin", "rb") as f:
        assert f.read() == b"abc"
    with fs.open("out/x/f.bin", "r", encoding="utf-8") as f:  # text: fsspec's open
        assert f.read() == "abc"
    fs.mv("out/x", "out/y", recursive=True)
    assert sorted(os.listdir("out/y")) == ["f.bin", "g.bin"]
    with pytest.raises(ValueError, match="recursive"):
        fs.rm("out/y")
    fs.rm(["out/y/f.bin", "out/y/g.bin"])
    fs.rmdir("out/y")
    fs.rm("out", recursive=True)
    assert not os.path.exists("out")
    with pytest.raises(FileNotFoundError):
        fs.rm("out")


def test_only_a_plain_local_path_skips_fsspec(tree: Path) -> None:
    fs, path = get_fs("tree/a", None)
    assert isinstance(fs, LocalFiles)
    assert path == f"{tree}/a"
    for url, options in [(f"file://{tree}/a", None), ("tree/a", {"auto_mkdir": True})]:
        fs, path = get_fs(url, options)
        assert isinstance(fs, LocalFileSystem)
        assert path == f"{tree}/a"
    fs, path = get_fs("memory://bucket/key", None)
    assert type(fs).__name__ == "MemoryFileSystem"
    assert split_protocol("s3://b/k") == ("s3", "b/k")
    assert split_protocol("C://x") == (None, "C://x")  # a drive letter is no protocol
    assert split_protocol("/data/x") == (None, "/data/x")
