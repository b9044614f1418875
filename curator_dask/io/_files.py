"""File listing, byte-range reads and decompression shared by readers and writers."""

from __future__ import annotations

import bz2
import contextlib
import errno
import lzma
import os
import posixpath
import uuid
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from curator_dask.errors import TruncatedInputError
from curator_dask.io._local import LocalFiles, is_plain, strip

#: Compression recognised by file-name suffix; such files are always read whole.
COMPRESSION_SUFFIXES = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}

_GLOB_CHARS = ("*", "?", "[")
#: The suffix of a run's metadata folder, the output's sibling (``out`` -> ``out.curator``);
#: see :mod:`curator_dask.io.layout`.
META_SUFFIX = ".curator"
# Object stores write an object only when its upload completes, so a direct write is atomic
# there, while a rename would be a copy plus a delete.
_OBJECT_STORE_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "abfs", "az", "adl", "oss"}


@dataclass(frozen=True)
class FileInfo:
    """A listed input file: full path (with protocol for remote files) and size in bytes.

    ``version`` is what changes when the file is rewritten: the modification time, or the
    object store's etag (empty when the file system gives neither).
    """

    path: str
    size: int
    version: str = ""


def _version(entry: dict[str, Any]) -> str:
    for key in ("ETag", "etag", "md5Hash", "generation", "mtime", "LastModified", "updated"):
        value = entry.get(key)
        if value not in (None, ""):
            return f"{key}={value}"
    return ""


def part_name(index: int, suffix: str = "") -> str:
    """The file name of partition ``index``: ``part-00042.jsonl`` (the only place it is formed).

    >>> part_name(42, ".jsonl")
    'part-00042.jsonl'
    """
    return f"part-{index:05d}{suffix}"


def compression_of(path: str) -> str | None:
    """Return the compression implied by ``path``'s suffix, or None."""
    return COMPRESSION_SUFFIXES.get(os.path.splitext(path)[1].lower())


def basename(path: str) -> str:
    """Return the last component of a local or remote path."""
    return posixpath.basename(path.rstrip("/")) or path


def _is_hidden(rel: str) -> bool:
    parts = [part for part in rel.split("/") if part]
    # a run's metadata folder beside its output (io.layout.META_SUFFIX) is never input
    return any(p.startswith((".", "_")) for p in parts) or any(
        p.endswith(META_SUFFIX) for p in parts[:-1]
    )


def list_files(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    suffixes: Iterable[str],
    storage_options: dict[str, Any] | None = None,
) -> list[FileInfo]:
    """Expand paths, directories and globs into a sorted, de-duplicated list of files.

    A local file is listed once however it is named (``./``, ``..``, symlinks: the same
    resolved path), under the first of its names.

    Directories are searched recursively for files ending in one of ``suffixes`` (case
    insensitive), skipping names that start with ``.`` or ``_`` (``_SUCCESS``,
    ``_quarantine/``, temporary files). Globs and explicit files are taken as given.
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ValueError("no input paths given")
    suffixes = tuple(s.lower() for s in suffixes)
    found: dict[str, FileInfo] = {}
    for item in items:
        url = os.fspath(item)
        try:
            fs, infos = _list_one(url, suffixes, storage_options)
        except OSError as err:
            if not isinstance(err, PermissionError):
                if err.errno == errno.EBUSY:  # an object store still throttling: say where
                    raise OSError(err.errno, f"listing {url}: {err.strerror or err}") from err
                raise
            # object stores say "access denied" / "key does not exist" without the path
            if url in str(err):
                raise
            message = f"access to {url} refused: {err.strerror or err}"
            if err.errno is None:
                raise PermissionError(message) from err
            raise PermissionError(err.errno, message) from err
        local = _is_local(fs)
        for e in infos:
            full = _full_path(fs, e["name"])
            # one file named twice (``d/a``, ``d/./a``, a symlink to it) is read once, under
            # the first name given; object keys are distinct as they are
            key = os.path.realpath(full) if local else full
            if key not in found:
                name = os.path.normpath(full) if local else full
                found[key] = FileInfo(name, int(e.get("size") or 0), _version(e))
    return sorted(found.values(), key=lambda f: f.path)


def _list_one(
    url: str, suffixes: tuple[str, ...], storage_options: dict[str, Any] | None
) -> tuple[Any, list[dict[str, Any]]]:
    fs, root = get_fs(url, storage_options)
    if any(c in root for c in _GLOB_CHARS):
        entries = fs.glob(root, detail=True)
        infos = [e for e in entries.values() if e.get("type") != "directory"]
        if not infos:
            raise FileNotFoundError(f"no files match {url!r}")
    elif fs.isdir(root):
        entries = fs.find(root, detail=True)
        base = root.rstrip("/") + "/"
        infos = [
            e
            for name, e in entries.items()
            if e.get("type") != "directory"
            and name.lower().endswith(suffixes)
            and not _is_hidden(name[len(base) :] if name.startswith(base) else name)
        ]
        if not infos:
            shown = ", ".join(suffixes[:4]) + (", ..." if len(suffixes) > 4 else "")
            raise FileNotFoundError(f"directory {url!r} holds no files ending in {shown}")
    else:
        try:
            infos = [fs.info(root)]
        except FileNotFoundError:
            raise FileNotFoundError(f"input file not found: {url!r}") from None
    return fs, infos


def _full_path(fs: Any, name: str) -> str:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        return name
    return fs.unstrip_protocol(name)


_LOCAL = LocalFiles()


def get_fs(path: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """Return ``(filesystem, path within it)`` for a local or remote path.

    The one place a path gets its file system: fsspec's for a URL, storage options or a
    chain; for a plain local path, :class:`~curator_dask.io._local.LocalFiles` (fsspec's
    local file system without importing fsspec).
    """
    path = os.fspath(path)
    if is_plain(path, storage_options):
        return _LOCAL, strip(path)
    from fsspec.core import url_to_fs

    return url_to_fs(path, **(storage_options or {}))  # type: ignore[no-any-return]


def split_protocol(path: str) -> tuple[str | None, str]:
    """``(protocol or None, the rest)``, as fsspec splits a URL (a Windows drive letter is no
    protocol).

    >>> split_protocol("s3://bucket/key"), split_protocol("/data/x")
    (('s3', 'bucket/key'), (None, '/data/x'))
    """
    if "://" in path:
        protocol, rest = path.split("://", 1)
        if len(protocol) > 1:
            return protocol, rest
    if path.startswith("data:"):
        protocol, rest = path.split(":", 1)
        return protocol, rest
    return None, path


def is_object_store(fs: Any) -> bool:
    """True when writes to ``fs`` are atomic per object (no rename needed)."""
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return bool(protocols & _OBJECT_STORE_PROTOCOLS)


def read_range(fs: Any, path: str, start: int, end: int) -> tuple[bytes, int]:
    """Read the lines of ``path`` that *start* in ``[start, end)``.

    Returns ``(data, offset)``: whole lines (the last one possibly without a newline at end
    of file) and the file offset of ``data[0]``. A line that begins before ``end`` is read to
    its end even when that lies past ``end``; a line that begins before ``start`` belongs to
    the previous range.
    """
    lo = start - 1 if start > 0 else 0
    buf = fs.cat_file(path, start=lo, end=end)
    if start > 0:
        nl = buf.find(b"\n")
        if nl < 0:
            return b"", start
        buf = buf[nl + 1 :]
        offset = lo + nl + 1
    else:
        offset = 0
    if buf and not buf.endswith(b"\n"):
        # The last line started inside the range: read on until its newline or EOF.
        pieces = [buf]
        pos, chunk = end, 1 << 20
        size = fs.size(path)  # object stores refuse a range that starts past the end
        while pos < size:
            more = fs.cat_file(path, start=pos, end=min(pos + chunk, size))
            if not more:
                break
            nl = more.find(b"\n")
            if nl >= 0:
                pieces.append(more[: nl + 1])
                break
            pieces.append(more)
            pos += len(more)
            chunk = min(chunk * 2, 64 << 20)
        buf = b"".join(pieces)
    return buf, offset


#: Bytes fed to a decompressor at a time; after an error the unit is decoded again in
#: steps of ``_RECOVERY_STEP`` to find the step that fails, and once more with that step fed
#: one byte at a time, so that nothing the decoder hands out before the error is lost with
#: the call that raised it (a gzip checksum fails after the member's last data byte).
_STEP = 1 << 20
_RECOVERY_STEP = 512

#: Bytes that follow the last data of a member/frame/stream (checksums, sizes): a corrupt
#: stream that stops within them has handed out all its data.
_TRAILER = {"gzip": 8, "zstd": 4, "bz2": 10, "xz": 0}


def _decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, auto-detected
    if kind == "bz2":
        return bz2.BZ2Decompressor()
    if kind == "xz":
        return lzma.LZMADecompressor()
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()
    raise ValueError(f"unknown compression {kind!r}")


@dataclass(frozen=True)
class Decompressed:
    """A decompressed file, and how much of it can be trusted.

    ``data`` is everything that could be decoded. ``intact`` is the length of its prefix
    known to be the original bytes: the whole of ``data`` unless the stream was corrupt, in
    which case it ends where the last integrity check passed. ``problem`` says what was
    wrong (None: nothing), ``stopped_at`` is the compressed byte offset where decoding
    stopped and ``size`` the compressed size. ``trailer`` is the size of the format's
    checksum trailer: a stream that stopped no more than that before its end handed out
    all its data (its checksum failed).
    """

    data: bytes
    intact: int
    problem: str | None = None
    stopped_at: int = 0
    size: int = 0
    trailer: int = 0


def is_codec_error(err: BaseException) -> bool:
    """True for the errors a decompressor raises on bad data (zstd's is no OSError)."""
    if isinstance(err, (zlib.error, OSError, EOFError, ValueError, lzma.LZMAError)):
        return True
    return type(err).__name__ == "ZstdError"  # zstandard's error derives from Exception


def _decode_unit(
    kind: str, data: memoryview, step: int, bytewise_from: int | None = None
) -> tuple[Any, list[bytes], int, BaseException | None]:
    """Decode one member/frame/stream: (decoder, output chunks, bytes fed, error or None).

    From ``bytewise_from`` on, the data is fed one byte at a time.
    """
    d = _decompressor(kind)
    out: list[bytes] = []
    pos = 0
    try:
        while pos < len(data) and not d.eof:
            end = pos + step
            if bytewise_from is not None:
                end = min(end, bytewise_from) if pos < bytewise_from else pos + 1
            out.append(d.decompress(data[pos:end]))
            pos = min(end, len(data))
    except Exception as err:
        if not is_codec_error(err):
            raise
        return d, out, pos, err
    return d, out, pos, None


def decompress(data: bytes, kind: str, path: str) -> Decompressed:
    """Decompress a whole file (concatenated members/frames included).

    Never raises for bad data: returns what could be decoded and a description of the
    problem (see :class:`Decompressed`). A truncated stream is intact up to where it ends.
    After a corrupt stream (a decoding error or a failed checksum), the data decoded from
    the member/frame/stream that failed is not trusted: gzip, zstd and xz hand data out
    before the checksum that covers it is verified, and a flipped bit often decodes to
    plausible but wrong text. bz2 is the exception: it releases a (900 kB) block only after
    the block's CRC matched, so its data up to the failing block is intact.
    """
    done: list[bytes] = []  # the data of finished, checked units
    done_len = 0
    rest = memoryview(data)
    base = 0  # compressed offset of ``rest``
    while True:
        d, out, pos, err = _decode_unit(kind, rest, _STEP)
        if err is not None:
            d, out, pos, err2 = _decode_unit(kind, rest, _RECOVERY_STEP)
            # bz2 releases a block only after its CRC matched, and a step's output is lost
            # with its error; the other formats stream data out before the check at the end
            # of their member/frame/block.
            intact = sum(map(len, out)) if kind == "bz2" else 0
            if err2 is not None:
                d, out, pos, err2 = _decode_unit(kind, rest, _STEP, bytewise_from=pos)
            err = err2 or err
            decoded = b"".join(out)
            where = base + pos
            return Decompressed(
                b"".join(done) + decoded,
                done_len + intact,
                f"corrupt {kind} data in {path} at compressed byte {where}: {err}",
                where,
                len(data),
                _TRAILER[kind],
            )
        decoded = b"".join(out)
        if not d.eof:
            if not len(rest) and not done:
                return Decompressed(b"", 0, None, 0, 0)  # an empty file: no stream at all
            everything = b"".join(done) + decoded
            return Decompressed(
                everything,
                len(everything),
                f"truncated {kind} file {path}: stream ended early",
                len(data),
                len(data),
            )
        done.append(decoded)
        done_len += len(decoded)
        unused = bytes(d.unused_data) + bytes(rest[pos:])
        if not unused.strip(b"\x00"):  # trailing zero padding is allowed
            break
        base = len(data) - len(unused)
        rest = memoryview(unused)
    whole = done[0] if len(done) == 1 else b"".join(done)  # no copy for one member
    return Decompressed(whole, done_len, None, len(data), len(data))


def _commit(fs: Any, tmp: str, final: str) -> None:
    """Move a finished temporary file to its final name (atomic on local disks)."""
    if _is_local(fs):
        os.replace(tmp, final)
    else:
        fs.mv(tmp, final)


def _is_local(fs: Any) -> bool:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return bool(protocols & {"file", "local"})


def path_error(err: OSError, verb: str, path: str) -> OSError:
    """An OSError of the same kind (PermissionError, ...) whose message names ``path``."""
    detail = err.strerror or str(err) or type(err).__name__
    if err.errno is not None:
        new = OSError(err.errno, f"could not {verb} {path}: {detail}")
    else:
        new = OSError(f"could not {verb} {path}: {detail}")
    return new


@contextmanager
def atomic_output(fs: Any, final: str) -> Iterator[Any]:
    """Open ``final`` for writing so that it appears only complete, or not at all.

    On local (and other renaming) filesystems the data goes to ``<final>.tmp-<uuid>`` in
    the same directory, which is renamed to ``final`` once closed. On object stores (S3,
    GCS, Azure) an object becomes visible only when its upload completes, so ``final`` is
    written directly. On any error the temporary file is removed and an :class:`OSError`
    naming the path is raised.
    """
    tmp = final if is_object_store(fs) else f"{final}.tmp-{uuid.uuid4().hex}"
    try:
        with fs.open(tmp, "wb") as f:
            yield f
        if tmp != final:
            _commit(fs, tmp, final)
    except BaseException as err:
        if tmp != final:
            with contextlib.suppress(Exception):
                fs.rm(tmp)
        if isinstance(err, OSError) and not isinstance(err, TruncatedInputError):
            raise path_error(err, "write", final) from err
        raise


@contextmanager
def atomic_target(fs: Any, final: str) -> Iterator[Any]:
    """As :func:`atomic_output`, but on a local disk yields the temporary file's path for a
    writer that opens it itself (pyarrow's: no Python file object in between, which is
    handed a copy of each buffer written); elsewhere the open file."""
    if not _is_local(fs):
        with atomic_output(fs, final) as f:
            yield f
        return
    tmp = f"{final}.tmp-{uuid.uuid4().hex}"
    try:
        yield tmp
        _commit(fs, tmp, final)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(err, OSError) and not isinstance(err, TruncatedInputError):
            raise path_error(err, "write", final) from err
        raise


def write_bytes(fs: Any, final: str, data: bytes) -> None:
    """Write ``data`` to ``final`` atomically (see :func:`atomic_output`)."""
    with atomic_output(fs, final) as f:
        f.write(data)
