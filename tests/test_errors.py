"""Every exception and warning class of the package is defined in errors.py; the modules that
raise them still export them under their old names."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

from curator_dask import errors

PACKAGE = Path(__file__).resolve().parents[1] / "curator_dask"
_BUILTIN_EXCEPTIONS = {
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}


def _exception_classes(path: Path) -> list[str]:
    """Classes whose bases are built-in exceptions or classes named ``*Error``/``*Warning``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
        if any(b in _BUILTIN_EXCEPTIONS or b.endswith(("Error", "Warning")) for b in bases):
            found.append(node.name)
    return found


def test_every_exception_class_is_defined_in_errors_py() -> None:
    elsewhere = {
        f"{path.relative_to(PACKAGE).as_posix()}:{name}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "errors.py" or path.parent != PACKAGE
        for name in _exception_classes(path)
    }
    assert elsewhere == set()
    assert len(_exception_classes(PACKAGE / "errors.py")) >= 12


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("curator_dask.cli", "ConfigError"),
        ("curator_dask.cli", "RunInterrupted"),
        ("curator_dask.cluster", "ClusterConnectError"),
        ("curator_dask.executor", "PartitionMemoryError"),
        ("curator_dask.executor._oom", "PartitionMemoryError"),
        ("curator_dask.executor.dask_executor", "PartitionMemoryError"),
        ("curator_dask.io", "MalformedInputError"),
        ("curator_dask.io", "QuarantineWarning"),
        ("curator_dask.io._common", "MalformedInputError"),
        ("curator_dask.io._files", "TruncatedInputError"),
        ("curator_dask.io.layout", "OutputInUseError"),
        ("curator_dask.monitoring.checks", "CuratorWarning"),
    ],
)
def test_the_old_import_paths_keep_working(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)
