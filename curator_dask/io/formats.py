"""The reader formats: which reader reads an input, told from the file names.

Every file reader registers itself here (:func:`register_reader`, one line after its class);
the table of formats is then built from each reader's own ``format_name`` and ``suffixes``.
Whatever chooses a reader by format (the dedup workflows' ``input_format``, their command's
``--input-format`` choices) asks this module, so a new format reaches them without an edit
of theirs.

Examples
--------
>>> from curator_dask.io.formats import format_of, reader_formats
>>> reader_formats()[:2]
('jsonl', 'parquet')
>>> format_of("s3://bucket/docs/part-0.jsonl.gz"), format_of("/d/x.parq"), format_of("/d/x.txt")
('jsonl', 'parquet', None)
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Sequence
from typing import Any, TypeVar

from curator_dask.io._files import get_fs, list_files

#: The keyword arguments every registered reader accepts (a workflow builds its reader so).
READER_ARGUMENTS = (
    "text_column",
    "id_column",
    "blocksize",
    "quarantine_path",
    "storage_options",
)

_READERS: dict[str, type] = {}
#: The built-in formats and the module whose import registers each one's reader: their
#: names are known before any reader is imported (the CLI's --help lists them without
#: importing pandas); a reader module is imported when its format is first needed.
_BUILTIN = {"jsonl": "curator_dask.io.jsonl", "parquet": "curator_dask.io.parquet"}


def _load_builtins() -> None:
    for name, module in _BUILTIN.items():
        if name not in _READERS:
            importlib.import_module(module)


_GLOB_CHARS = ("*", "?", "[")

R = TypeVar("R", bound=type)


def register_reader(cls: R) -> R:
    """Make ``cls`` (a :class:`~curator_dask.io.FileReader`) the reader of its format.

    The format is ``cls.format_name``; its files are those whose names end in one of
    ``cls.suffixes`` (case insensitive). ``cls`` takes the input paths first and the
    keyword arguments :data:`READER_ARGUMENTS`. Returns ``cls``, so it can decorate the
    class. Registering a format again replaces its reader.
    """
    name = getattr(cls, "format_name", "")
    if not name or not getattr(cls, "suffixes", ()):
        raise ValueError(f"{cls.__name__} needs a format_name and suffixes to be registered")
    if dataclasses.is_dataclass(cls):
        fields = {f.name for f in dataclasses.fields(cls)}
        missing = [a for a in READER_ARGUMENTS if a not in fields]
        if missing:
            raise TypeError(f"{cls.__name__} lacks the reader arguments {', '.join(missing)}")
    _READERS[name] = cls
    return cls


def unregister_reader(name: str) -> None:
    """Forget the format ``name`` (a test's toy format, say); no error if unknown."""
    _READERS.pop(name, None)


def reader_formats() -> tuple[str, ...]:
    """The registered formats, in the order they were registered."""
    return tuple(dict.fromkeys([*_BUILTIN, *_READERS]))


def reader_class(name: str) -> type:
    """The reader of format ``name``; ``ValueError`` naming the formats if unknown."""
    _load_builtins()
    try:
        return _READERS[name]
    except KeyError:
        raise ValueError(f"input_format must be one of {reader_formats()}, got {name!r}") from None


def format_of(path: str) -> str | None:
    """The format of a file from its name (its longest matching suffix), or None."""
    _load_builtins()
    name = path.lower()
    best, length = None, 0
    for fmt, cls in _READERS.items():
        for suffix in cls.suffixes:  # type: ignore[attr-defined]
            if name.endswith(suffix.lower()) and len(suffix) > length:
                best, length = fmt, len(suffix)
    return best


def _known() -> str:
    return ", ".join(repr(f) for f in reader_formats())


def choose_format(paths: Sequence[str], storage_options: dict[str, Any] | None = None) -> str:
    """The one format of the input ``paths``, from the file names.

    A file or glob is judged by its own suffix (a glob without one, by what it matches); a
    directory by the files the readers' listing finds in it (each format's suffixes; hidden
    and ``_`` names skipped). Mixed or unknown formats raise ``ValueError`` asking for
    ``input_format``; a missing input or an empty directory ``FileNotFoundError``.
    """
    _load_builtins()
    found: set[str] = set()
    for p in paths:
        fmt = format_of(p)
        if fmt is not None:
            found.add(fmt)
            continue
        fs, root = get_fs(p, storage_options)
        if any(c in root for c in _GLOB_CHARS):
            kinds = {format_of(m) for m in fs.glob(root)}
            if None in kinds or not kinds:
                raise ValueError(
                    f"cannot tell the format of the files matching {p!r} from their names; "
                    f"give input_format (one of {_known()})"
                )
            found |= {k for k in kinds if k is not None}
        elif fs.isdir(root):
            in_dir = set()
            for name, cls in _READERS.items():
                with contextlib.suppress(FileNotFoundError):
                    if list_files(p, cls.suffixes, storage_options):  # type: ignore[attr-defined]
                        in_dir.add(name)
            if not in_dir:
                raise FileNotFoundError(
                    f"directory {p!r} holds no files of a known format ({_known()})"
                )
            found |= in_dir
        else:
            if not fs.exists(root):
                raise FileNotFoundError(f"input not found: {p!r}")
            raise ValueError(
                f"cannot tell the format of {p!r} from its name; "
                f"give input_format (one of {_known()})"
            )
    if len(found) != 1:
        raise ValueError(
            f"the input mixes formats ({', '.join(sorted(found))}); give input_format, "
            "or one format per run"
        )
    return found.pop()


def open_reader(
    paths: Sequence[str],
    input_format: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **arguments: Any,
) -> Any:
    """The reader of ``paths``: of ``input_format``, else of :func:`choose_format`'s.

    ``arguments`` are among :data:`READER_ARGUMENTS` (``storage_options`` aside).
    """
    _load_builtins()
    fmt = input_format or choose_format(paths, storage_options)
    return reader_class(fmt)(paths, storage_options=storage_options, **arguments)


__all__ = [
    "READER_ARGUMENTS",
    "choose_format",
    "format_of",
    "open_reader",
    "reader_class",
    "reader_formats",
    "register_reader",
    "unregister_reader",
]
