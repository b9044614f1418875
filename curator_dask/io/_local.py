"""Plain local paths without importing fsspec.

Importing fsspec (with asyncio, ssl and email, which it imports) costs a command run about
0.07 CPU-s and 3 MB (issue 22; ``bench/bench_fuzzy_cost.py``), and a run on local files
needs none of it. :class:`LocalFiles` is fsspec's ``LocalFileSystem`` for the methods this
package calls on local paths: the same code on ``os``, ``shutil`` and ``open``, so the same
absolute paths, ``info`` dicts (``mtime`` is what a resume compares) and order. Any other
method, ``open`` with more than a binary mode, or a glob with more than ``*`` and ``?`` in
its last part, is fsspec's own, imported then.
:func:`curator_dask.io._files.get_fs` gives it for a plain POSIX path without storage
options; a URL (``s3://``, ``file://``, chained) or a Windows path goes to fsspec.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import stat
from typing import Any

#: The prefixes that make a path something other than a plain local one for fsspec.
_NOT_PLAIN = ("file:", "local:", "data:")


def is_plain(path: str, storage_options: dict[str, Any] | None) -> bool:
    """True for a local POSIX path that fsspec would give to its ``LocalFileSystem``
    unchanged: no protocol, no chaining (``::``), no storage options."""
    return (
        os.sep == "/"
        and not storage_options
        and "://" not in path
        and "::" not in path
        and not path.startswith(_NOT_PLAIN)
    )


def strip(path: Any) -> str:
    """fsspec's ``LocalFileSystem._strip_protocol`` of a plain POSIX path: absolute
    (against the working directory, ``~`` expanded; ``..`` kept), no trailing ``/``."""
    path = os.fspath(path)
    if not path.startswith("/"):
        if path.startswith("~"):
            path = os.path.expanduser(path)
        else:
            path = path[2:] if path.startswith("./") else "" if path == "." else path
            path = f"{os.getcwd()}/{path}"
    return path.rstrip("/") or "/"


class LocalFiles:
    """fsspec's ``LocalFileSystem``, for the methods this package calls (see the module)."""

    protocol = ("file", "local")
    root_marker = "/"
    sep = "/"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_fsspec_local(), name)

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return LocalFiles, ()

    def _strip_protocol(self, path: Any) -> str:
        return strip(path)

    def unstrip_protocol(self, name: str) -> str:
        return f"file://{strip(name)}"

    def info(self, path: Any, **kwargs: Any) -> dict[str, Any]:
        if isinstance(path, os.DirEntry):
            out = path.stat(follow_symlinks=False)
            link = path.is_symlink()
            if path.is_dir(follow_symlinks=False):
                kind = "directory"
            elif path.is_file(follow_symlinks=False):
                kind = "file"
            else:
                kind = "other"
            size = out.st_size
            if link:
                try:
                    size = path.stat(follow_symlinks=True).st_size
                except OSError:
                    size = 0
            name = strip(path.path)
        else:
            name = strip(path)
            out = os.stat(name, follow_symlinks=False)
            link = stat.S_ISLNK(out.st_mode)
            if link:
                out = os.stat(name, follow_symlinks=True)
            size = out.st_size
            if stat.S_ISDIR(out.st_mode):
                kind = "directory"
            elif stat.S_ISREG(out.st_mode):
                kind = "file"
            else:
                kind = "other"
        result = {
            "name": name,
            "size": size,
            "type": kind,
            "created": getattr(out, "st_birthtime", out.st_ctime),
            "islink": link,
        }
        for field in ("mode", "uid", "gid", "mtime", "ino", "nlink"):
            result[field] = getattr(out, f"st_{field}")
        if link:
            result["destination"] = os.readlink(name)
        return result

    def ls(self, path: Any, detail: bool = False, **kwargs: Any) -> list[Any]:
        path = strip(path)
        path_info = self.info(path)
        if path_info["type"] != "directory":
            return [path_info] if detail else [path_info["name"]]
        infos: list[Any] = []
        with os.scandir(path) as entries:
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):  # gone since listed
                    infos.append(self.info(entry) if detail else strip(entry.path))
        return infos

    def find(
        self,
        path: Any,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        """The files under ``path`` (folders too with ``withdirs``; ``maxdepth`` levels of
        folders listed), sorted by name; a file ``path`` is its own answer. Folders that
        cannot be listed are left out, as fsspec leaves them."""
        if maxdepth is not None and maxdepth < 1:
            raise ValueError("maxdepth must be at least 1")
        root = strip(path)
        found: dict[str, Any] = {}
        if withdirs and root and self.isdir(root):
            found[root] = self.info(root)
        todo = [(root, 1)]  # (folder, its level)
        while todo:
            folder, level = todo.pop()
            try:
                entries = self.ls(folder, detail=True)
            except OSError:
                continue
            for entry in entries:
                name = entry["name"]
                if entry["type"] != "directory" or name == folder:
                    found[name] = entry
                    continue
                if withdirs:
                    found[name] = entry
                if maxdepth is None or level < maxdepth:
                    todo.append((name, level + 1))
        if not found and self.isfile(root):
            found[root] = {}
        names = sorted(found)
        return {name: found[name] for name in names} if detail else names

    def glob(self, path: Any, maxdepth: int | None = None, **kwargs: Any) -> Any:
        """fsspec's glob; here (with its result) for a pattern whose last part alone has
        ``*`` or ``?`` (``<dir>/part-*.jsonl``), else fsspec's own."""
        path = os.fspath(path)
        folder, _, pattern = strip(path).rpartition("/")
        if maxdepth is not None or path.endswith("/") or "[" in path or "**" in path:
            return _fsspec_local().glob(path, maxdepth=maxdepth, **kwargs)
        if any(c in folder for c in "*?") or not any(c in pattern for c in "*?"):
            return _fsspec_local().glob(path, **kwargs)
        found = self.find(folder or "/", maxdepth=1, withdirs=True, detail=True)
        matched = {
            name: info
            for name, info in sorted(found.items())
            if name.rpartition("/")[0] == folder
            and fnmatch.fnmatchcase(name.rpartition("/")[2], pattern)
        }
        return matched if kwargs.get("detail") else list(matched)

    def exists(self, path: Any, **kwargs: Any) -> bool:
        try:
            self.info(path)
        except Exception:  # as fsspec: any error is "not there"
            return False
        return True

    def isdir(self, path: Any) -> bool:
        return os.path.isdir(strip(path))

    def isfile(self, path: Any) -> bool:
        return os.path.isfile(strip(path))

    def size(self, path: Any) -> int | None:
        return self.info(path).get("size", None)  # type: ignore[no-any-return]

    def open(self, path: Any, mode: str = "rb", **kwargs: Any) -> Any:
        if kwargs or mode not in ("rb", "wb", "ab", "xb"):
            return _fsspec_local().open(path, mode, **kwargs)
        return open(strip(path), mode)

    def cat_file(
        self, path: Any, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        with self.open(path, "rb", **kwargs) as f:
            if start is not None:
                f.seek(start if start >= 0 else max(0, os.fstat(f.fileno()).st_size + start))
            if end is not None:
                if end < 0:
                    end = os.fstat(f.fileno()).st_size + end
                return f.read(end - f.tell())  # type: ignore[no-any-return]
            return f.read()  # type: ignore[no-any-return]

    def pipe_file(self, path: Any, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        if mode == "create" and self.exists(path):
            raise FileExistsError
        with self.open(path, "wb", **kwargs) as f:
            f.write(value)

    def makedirs(self, path: Any, exist_ok: bool = False) -> None:
        os.makedirs(strip(path), exist_ok=exist_ok)

    def rmdir(self, path: Any) -> None:
        os.rmdir(strip(path))

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        targets = [strip(p) for p in (path if isinstance(path, list) else [path])]
        for target in targets:
            if not self.isdir(target):
                os.remove(target)  # FileNotFoundError where it is not there
                continue
            if not recursive:
                raise ValueError(f"{target} is a folder: rm(..., recursive=True) removes it")
            if os.path.abspath(target) == os.getcwd():
                raise ValueError(f"{target} is the working directory: not removed")
            shutil.rmtree(target)

    def mv(self, path1: Any, path2: Any, recursive: bool = True, **kwargs: Any) -> None:
        shutil.move(strip(path1), strip(path2))


def _fsspec_local() -> Any:
    from fsspec.implementations.local import LocalFileSystem

    return LocalFileSystem()
