"""The package's import graph has no cycle and no arrow going up docs/architecture.md's layers.

The graph is read from the source with :mod:`ast` (nothing is imported): every ``import``
and ``from ... import`` of a ``curator_dask`` module counts, those inside functions and
``if TYPE_CHECKING:`` blocks included, since a lazy import is still an arrow between layers.
The layer order is the table under "Layer order" in ``docs/architecture.md``: top row first,
each row listing modules and packages (a package covers its submodules; ``__init__`` is
the top-level package).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "curator_dask"


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """``{dotted module name: file}`` of every module of the package."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _target(name: str, modules: dict[str, Path]) -> str:
    # the module itself, else the package that holds the imported name
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: the package modules it imports}``, read statically from the source."""
    modules = module_files(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        arrows = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                arrows |= {
                    _target(a.name, modules) for a in node.names if a.name.split(".")[0] == PACKAGE
                }
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != PACKAGE:
                    continue
                for alias in node.names:  # `from pkg import submodule` is an arrow to it
                    sub = f"{source}.{alias.name}"
                    arrows.add(sub if sub in modules else _target(source, modules))
        arrows.discard(name)
        graph[name] = arrows
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def documented_layers(root: Path = ROOT) -> list[list[str]]:
    """The rows of the "Layer order" table in docs/architecture.md, top first."""
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("### Layer order", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    layers = []
    for row in rows:
        cells = row.strip("|").split("|")
        layers.append(re.findall(r"`([\w.]+)`", cells[1]))
    return layers


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The row (0 = top) of ``module``: its longest listed prefix."""
    best: tuple[int, int] | None = None
    for k, names in enumerate(layers):
        for entry in names:
            full = PACKAGE if entry == "__init__" else f"{PACKAGE}.{entry}"
            covers = module == full or (entry != "__init__" and module.startswith(full + "."))
            if covers and (best is None or len(full) > best[0]):
                best = (len(full), k)
    return None if best is None else best[1]


def upward_arrows(graph: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """``"a -> b"`` for every import of a module in a higher layer (a smaller row)."""
    return [
        f"{a} -> {b}"
        for a in sorted(graph)
        for b in sorted(graph[a])
        if layer_of(b, layers) < layer_of(a, layers)  # type: ignore[operator]
    ]


def test_graph_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import low\n")
    (pkg / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from curator_dask.high import X\n"
    )
    (pkg / "high.py").write_text("def f():\n    import curator_dask.sub.low\n")
    (pkg / "sub" / "low.py").write_text("from ..low import y\n")
    graph = import_graph(tmp_path)
    assert graph["curator_dask.low"] == {"curator_dask.high"}
    assert graph["curator_dask.high"] == {"curator_dask.sub.low"}
    assert graph["curator_dask.sub"] == {"curator_dask.sub.low"}
    assert graph["curator_dask.sub.low"] == {"curator_dask.low"}
    assert cycles(graph) == [["curator_dask.high", "curator_dask.low", "curator_dask.sub.low"]]


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_every_module_has_a_documented_layer() -> None:
    layers = documented_layers()
    assert len(layers) >= 5
    missing = [m for m in import_graph() if layer_of(m, layers) is None]
    assert missing == [], "place these modules in docs/architecture.md's layer table"


def test_no_arrow_goes_up_the_layers() -> None:
    assert upward_arrows(import_graph(), documented_layers()) == []


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("curator_dask.executor.base", "curator_dask.pipeline"),
        ("curator_dask.dedup.cli", "curator_dask.executor.dask_executor"),
        ("curator_dask.io.quarantine", "curator_dask.io.base"),
        ("curator_dask.io.layout", "curator_dask.io.base"),
        ("curator_dask.nemo.datasets", "curator_dask.nemo.utils.file_utils"),
    ],
)
def test_former_arrows_stay_gone(module: str, imported: str) -> None:
    # the arrows that made the cycles and the upward arrow of issue 25
    assert imported not in import_graph()[module]


def test_private_modules_stay_in_their_package() -> None:
    # docs/architecture.md: a private module is used only inside its own package
    outside = []
    for a, targets in import_graph().items():
        for b in targets:
            parts = b.split(".")
            private = [i for i, p in enumerate(parts) if i and p.startswith("_")]
            if private:
                package = ".".join(parts[: private[0]])
                if not (a == package or a.startswith(package + ".")):
                    outside.append(f"{a} -> {b}")
    assert outside == []


def test_package_modules_are_imported_under_real_names() -> None:
    # `from curator_dask import text as S` hid what S was; an alias says what it holds
    short = []
    for name, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                source = getattr(node, "module", None) or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}" if source else alias.name
                    if full.startswith(PACKAGE) and alias.asname and len(alias.asname) < 3:
                        short.append(f"{name}: {full} as {alias.asname}")
    assert short == []
