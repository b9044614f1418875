"""The public surface of the pinned RAPIDS release, read from its wheels without importing it.

:func:`record` parses every ``.py``/``.pyi`` file (``ast``) and every Cython ``.pyx`` file
(its ``def``/``class`` lines) of the cudf, dask_cudf, dask_cuda, rmm and cuml wheels and
writes, for the public modules: each module's names (with what each name is, followed
through imports and re-exports), each class's attributes (its own and those of the
classes it derives from, inside the release) and each callable's parameters.
``scripts/record_rapids_surface.py`` runs it when RAPIDS is bumped; the JSON it writes is
committed (tests/data/rapids_surface.json).

:func:`package_uses` finds every RAPIDS attribute and keyword argument curator_dask uses,
by a static scan (``import cudf as x`` aliases, ``from dask_cuda import ...``, and the
frame module ``curator_dask._backend.frame_module()`` hands out); :func:`check` holds
them against the recorded surface.
"""

from __future__ import annotations

import ast
import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("cudf", "dask_cudf", "dask_cuda", "rmm", "cuml")
# The pip command that fetches the pinned wheels (CUDA 13 builds; the CUDA 12 ones are
# the same Python code).
PINS = (
    "cudf-cu13==26.10.*",
    "dask-cudf-cu13==26.10.*",
    "dask-cuda==26.10.*",
    "rmm-cu13==26.10.*",
    "cuml-cu13==26.10.*",
)
DOWNLOAD = (
    "pip download --no-deps --only-binary=:all: --python-version 3.12 "
    "--platform manylinux_2_28_x86_64 --implementation cp " + " ".join(PINS)
)
SURFACE = Path(__file__).parent / "data" / "rapids_surface.json"


# -- reading the wheels ---------------------------------------------------------------------
@dataclass
class _Module:
    name: str
    is_package: bool
    names: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (kind, target)
    classes: dict[str, dict] = field(default_factory=dict)
    functions: dict[str, dict] = field(default_factory=dict)
    dynamic: bool = False  # a module-level __getattr__


def _params(args: ast.arguments) -> dict:
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return {"params": names, "varkw": args.kwarg is not None}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):  # Generic[T], Base[...]
        return _dotted(node.value)
    return None


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if not level:
        return target or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _read_py(mod: _Module, source: str) -> None:
    tree = ast.parse(source)
    for node in tree.body:
        _read_stmt(mod, node)


def _read_stmt(mod: _Module, node: ast.stmt) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        mod.names[node.name] = ("function", f"{mod.name}.{node.name}")
        mod.functions[node.name] = _params(node.args)
        if node.name == "__getattr__":
            mod.dynamic = True
    elif isinstance(node, ast.ClassDef):
        mod.names[node.name] = ("class", f"{mod.name}.{node.name}")
        mod.classes[node.name] = _read_class(node)
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                mod.names[alias.asname] = ("import", alias.name)
            else:
                top = alias.name.split(".")[0]
                mod.names.setdefault(top, ("import", top))
    elif isinstance(node, ast.ImportFrom):
        src = _absolute(mod.name, mod.is_package, node.level, node.module)
        for alias in node.names:
            if alias.name == "*":
                mod.names.setdefault("*" + src, ("star", src))
            else:
                mod.names[alias.asname or alias.name] = ("import", f"{src}.{alias.name}")
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                cls = mod.classes.get(t.value.id)  # Class.method = make_method(...)
                if cls is not None:
                    cls["attrs"].add(t.attr)
                continue
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    value = node.value
                    ref = _dotted(value) if value is not None else None
                    mod.names[n.id] = ("alias", ref) if ref else ("value", "")
    elif isinstance(node, (ast.If, ast.Try)):
        bodies = [node.body, node.orelse]
        if isinstance(node, ast.Try):
            bodies += [h.body for h in node.handlers] + [node.finalbody]
        for body in bodies:
            for stmt in body:
                _read_stmt(mod, stmt)


def _read_class(node: ast.ClassDef) -> dict:
    attrs: set[str] = set()
    init: dict | None = None
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            attrs.add(stmt.name)
            if stmt.name == "__init__":
                init = _params(stmt.args)
            for sub in ast.walk(stmt):  # self.x = ... in any method
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    attrs.add(sub.attr)
        elif isinstance(stmt, ast.ClassDef):
            attrs.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            attrs.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    bases = [b for b in (_dotted(x) for x in node.bases) if b]
    return {"attrs": attrs, "bases": bases, "init": init}


_PYX_CLASS = re.compile(r"^(?:cdef\s+|cpdef\s+)?class\s+(\w+)\s*([(:])", re.M)
_PYX_FROM = re.compile(r"^from\s+([\w.]+)\s+c?import\s+(\(|[^\n]+)", re.M)
_PYX_DEF = re.compile(r"^([ \t]*)(?:cp)?def\s+(?:[\w.\[\], ]+\s+)?(\w+)\s*\(", re.M)


def _balanced(source: str, start: int) -> str:
    """The text inside the parentheses opening just before ``start``."""
    depth, i = 1, start
    while i < len(source) and depth:
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        i += 1
    return source[start : i - 1]


def _read_pyx(mod: _Module, source: str) -> None:
    """Names from a Cython file: top-level classes and functions, methods of classes."""
    for m in _PYX_FROM.finditer(source):
        names = m.group(2)
        if names.startswith("("):
            names = _balanced(source, m.start(2) + 1)
        src = _absolute(
            mod.name,
            mod.is_package,
            len(m.group(1)) - len(m.group(1).lstrip(".")),
            m.group(1).lstrip(".") or None,
        )
        for item in re.sub(r"#[^\n]*", "", names).split(","):
            words = item.split()
            if words and words[0] != "*":
                mod.names.setdefault(words[-1], ("import", f"{src}.{words[0]}"))
    events = [(m.start(), "class", m) for m in _PYX_CLASS.finditer(source)]
    events += [(m.start(), "def", m) for m in _PYX_DEF.finditer(source)]
    current: str | None = None
    for _, kind, m in sorted(events, key=lambda e: e[0]):
        if kind == "class":
            current = m.group(1)
            inside = _balanced(source, m.end()) if m.group(2) == "(" else ""
            bases = [b.strip() for b in inside.split(",") if b.strip() and "=" not in b]
            mod.names[current] = ("class", f"{mod.name}.{current}")
            mod.classes[current] = {"attrs": set(), "bases": bases, "init": None}
            continue
        indent, name = m.group(1), m.group(2)
        args = re.sub(r"#[^\n]*", "", _balanced(source, m.end()))
        words = [a.split("=")[0].split() for a in args.split(",")]
        names = [w[-1].lstrip("*") for w in words if w]
        params = {
            "params": [n for n in names if n and n not in ("self", "cls")],
            "varkw": "**" in args,
        }
        if not indent:
            current = None
            mod.names[name] = ("function", f"{mod.name}.{name}")
            mod.functions[name] = params
        elif current is not None:
            mod.classes[current]["attrs"].add(name)
            if name == "__init__":
                mod.classes[current]["init"] = params


def read_wheels(paths: Iterable[Path]) -> tuple[dict[str, _Module], dict[str, str]]:
    """Parse the wheels; return the modules and ``{distribution: version}``."""
    modules: dict[str, _Module] = {}
    versions: dict[str, str] = {}
    for path in paths:
        with zipfile.ZipFile(path) as whl:
            for info in whl.infolist():
                name = info.filename
                if name.endswith(".dist-info/METADATA"):
                    meta = whl.read(info).decode("utf-8", "replace")
                    dist = re.search(r"^Name: (.+)$", meta, re.M)
                    ver = re.search(r"^Version: (.+)$", meta, re.M)
                    if dist and ver:
                        versions[dist.group(1).strip()] = ver.group(1).strip()
                    continue
                if not name.endswith((".py", ".pyi", ".pyx")) or name.split("/")[0] not in PACKAGES:
                    continue
                stem = name.rsplit(".", 1)[0]
                parts = stem.split("/")
                is_package = parts[-1] == "__init__"
                dotted = ".".join(parts[:-1] if is_package else parts)
                mod = modules.setdefault(dotted, _Module(dotted, is_package))
                text = whl.read(info).decode("utf-8", "replace")
                try:
                    (_read_pyx if name.endswith(".pyx") else _read_py)(mod, text)
                except SyntaxError:
                    continue
    for dotted in list(modules):  # submodules are attributes of their package
        parent, _, child = dotted.rpartition(".")
        if parent in modules:
            modules[parent].names.setdefault(child, ("module", dotted))
    return modules, versions


# -- resolving names --------------------------------------------------------------------------
class _Resolver:
    def __init__(self, modules: dict[str, _Module]) -> None:
        self.modules = modules

    def split(self, dotted: str) -> tuple[str | None, list[str]]:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            if head in self.modules:
                return head, parts[i:]
        return None, parts

    def resolve(self, dotted: str, depth: int = 0) -> tuple[str, str]:
        """(kind, canonical name): kind module/class/function/value/external/missing."""
        if depth > 30:
            return "value", dotted
        head, rest = self.split(dotted)
        if head is None:
            return "external", dotted
        if not rest:
            return "module", head
        mod = self.modules[head]
        first, more = rest[0], rest[1:]
        entry = mod.names.get(first)
        if entry is None:
            for kind, src in mod.names.values():  # from x import *
                if kind == "star" and src != head:
                    k, target = self.resolve(f"{src}.{first}", depth + 1)
                    if k not in ("missing", "external"):
                        return self._more(k, target, more, depth)
            return ("value", f"{head}.{first}") if mod.dynamic else ("missing", dotted)
        kind, target = entry
        if kind in ("import", "alias", "module"):
            if target == dotted:
                return "missing", dotted
            k, canon = self.resolve(target, depth + 1)
            return self._more(k, canon, more, depth)
        if kind == "class":
            return self._more("class", target, more, depth)
        if kind == "function":
            return ("function", target) if not more else ("value", f"{target}.{'.'.join(more)}")
        return "value", f"{head}.{first}"

    def _more(self, kind: str, target: str, more: list[str], depth: int) -> tuple[str, str]:
        if not more:
            return kind, target
        if kind == "module":
            return self.resolve(f"{target}.{'.'.join(more)}", depth + 1)
        if kind == "class":
            return "member", f"{target}:{'.'.join(more)}"
        return kind, f"{target}.{'.'.join(more)}"

    def class_info(self, canon: str, seen: set[str] | None = None) -> tuple[set[str], list[str]]:
        """(attributes with inherited ones, bases outside the release)."""
        seen = seen if seen is not None else set()
        if canon in seen:
            return set(), []
        seen.add(canon)
        mod_name, _, cls_name = canon.rpartition(".")
        mod = self.modules.get(mod_name)
        if mod is None or cls_name not in mod.classes:
            return set(), [canon]
        info = mod.classes[cls_name]
        attrs = set(info["attrs"])
        external: list[str] = []
        for base in info["bases"]:
            if base in ("object", "Generic", "Protocol", "ABC"):
                continue
            kind, target = self.resolve(f"{mod_name}.{base}")
            if kind == "class":
                more, ext = self.class_info(target, seen)
                attrs |= more
                external += ext
            else:
                entry = mod.names.get(base.split(".")[0])
                external.append(entry[1] if entry else base)
        return attrs, external


def _public(dotted: str) -> bool:
    parts = dotted.split(".")
    return not any(p.startswith("_") or p in ("tests", "testing", "benchmarks") for p in parts[1:])


#: Modules recorded whether or not the package uses them yet (the design's k-means).
ALWAYS = ("cuml.cluster", "cuml.dask.cluster")


def record(wheels: Iterable[Path], uses: Iterable[Use] = (), out: Path | None = SURFACE) -> dict:
    """Read the wheels' public surface; write to ``out`` the part ``uses`` needs.

    Kept: the top-level modules, the modules in :data:`ALWAYS`, every module a use
    passes through, and the classes and functions those modules name.
    """
    full = surface_of(wheels)
    keep = {m for m in full["modules"] if m in PACKAGES} | set(ALWAYS)
    for use in uses:
        keep |= _modules_on_path(use.name, full)
    modules = {m: full["modules"][m] for m in sorted(keep) if m in full["modules"]}
    named = {v.partition(":")[2] for m in modules.values() for v in m["names"].values()}
    surface = {
        "versions": full["versions"],
        "download": DOWNLOAD,
        "modules": modules,
        "classes": {k: v for k, v in full["classes"].items() if k in named},
        "functions": {k: v for k, v in full["functions"].items() if k in named},
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(surface, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    return surface


def _modules_on_path(name: str, surface: dict) -> set[str]:
    parts = name.split(".")
    seen = {parts[0]}
    current = parts[0]
    for part in parts[1:]:
        entry = surface["modules"].get(current, {}).get("names", {}).get(part, "")
        kind, _, target = entry.partition(":")
        if kind != "module":
            break
        current = target
        seen.add(current)
    return seen


def surface_of(wheels: Iterable[Path]) -> dict:
    """The whole public surface of the wheels (modules, classes, functions)."""
    modules, versions = read_wheels(wheels)
    r = _Resolver(modules)
    surface: dict = {"versions": versions, "modules": {}, "classes": {}, "functions": {}}
    wanted_classes: set[str] = set()
    for dotted in sorted(modules):
        if not _public(dotted):
            continue
        mod = modules[dotted]
        names: dict[str, str] = {}
        for name in sorted(mod.names):
            if name.startswith(("*", "_")) and name != "__getattr__":
                continue
            kind, target = r.resolve(f"{dotted}.{name}")
            if kind == "external":
                continue  # numpy, pandas, ... imported for internal use
            names[name] = f"{kind}:{target}" if kind in ("module", "class", "function") else kind
            if kind == "class":
                wanted_classes.add(target)
            elif kind == "function":
                mname, _, fname = target.rpartition(".")
                if mname in modules and fname in modules[mname].functions:
                    surface["functions"][target] = modules[mname].functions[fname]
        surface["modules"][dotted] = {"names": names, "dynamic": mod.dynamic}
    for canon in sorted(wanted_classes):
        attrs, external = r.class_info(canon)
        mname, _, cname = canon.rpartition(".")
        info = modules[mname].classes.get(cname, {}) if mname in modules else {}
        init = info.get("init")
        if init is None:  # inherited __init__
            for base in _mro(r, canon):
                bmod, _, bcls = base.rpartition(".")
                binfo = modules[bmod].classes.get(bcls, {}) if bmod in modules else {}
                if binfo.get("init") is not None:
                    init = binfo["init"]
                    break
        surface["classes"][canon] = {
            "attrs": sorted(a for a in attrs if not a.startswith("_")),
            "external_bases": sorted(set(external)),
            "init": init,
        }
    return surface


def _mro(r: _Resolver, canon: str) -> Iterator[str]:
    mod_name, _, cls_name = canon.rpartition(".")
    mod = r.modules.get(mod_name)
    if mod is None or cls_name not in mod.classes:
        return
    for base in mod.classes[cls_name]["bases"]:
        kind, target = r.resolve(f"{mod_name}.{base}")
        if kind == "class" and target != canon:
            yield target
            yield from _mro(r, target)


# -- what curator_dask uses ---------------------------------------------------------------------
@dataclass(frozen=True)
class Use:
    """One RAPIDS name the package uses: ``cudf.from_pandas``, with keyword arguments."""

    where: str
    name: str
    kwargs: tuple[str, ...] = ()


def _is_frame_module_call(node: ast.expr) -> bool:
    """``frame_module(...)``, ``_backend.frame_module(...)``: cudf, under the cudf backend."""
    if isinstance(node, ast.IfExp):
        return _is_frame_module_call(node.body) or _is_frame_module_call(node.orelse)
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "frame_module"


def _imported(node: ast.expr) -> str | None:
    """``pytest.importorskip("cudf")``, ``importlib.import_module("cudf")``: ``"cudf"``."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    arg = node.args[0].value
    if name in ("importorskip", "import_module") and isinstance(arg, str):
        return arg if arg.split(".")[0] in PACKAGES else None
    return None


def _file_uses(path: Path, rel: str) -> list[Use]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}
    uses: list[Use] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top in PACKAGES:
                    aliases[a.asname or top] = a.name if a.asname else top
                    uses.append(Use(f"{rel}:{node.lineno}", a.name))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] in PACKAGES:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    uses.append(Use(f"{rel}:{node.lineno}", f"{node.module}.{a.name}"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            module = "cudf" if _is_frame_module_call(node.value) else _imported(node.value)
            if module:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        aliases[t.id] = module
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
        if isinstance(node, ast.Call):
            inner.discard(id(node.func))

    def chain(node: ast.expr) -> str | None:
        if isinstance(node, ast.Attribute):
            base = chain(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Name):
            return aliases.get(node.id)
        if _is_frame_module_call(node):
            return "cudf"
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            dotted = chain(node)
            if dotted:
                uses.append(Use(f"{rel}:{node.lineno}", dotted))
        if isinstance(node, ast.Call):
            dotted = chain(node.func)
            kwargs = tuple(k.arg for k in node.keywords if k.arg)
            if dotted and kwargs:
                uses.append(Use(f"{rel}:{node.lineno}", dotted, kwargs))
    return uses


def package_uses(root: Path) -> list[Use]:
    """Every RAPIDS name (and keyword argument) used under the package directory ``root``."""
    uses: list[Use] = []
    for path in sorted(root.rglob("*.py")):
        uses += _file_uses(path, str(path.relative_to(root.parent)))
    return sorted(set(uses), key=lambda u: (u.name, u.where))


# -- checking ------------------------------------------------------------------------------------
def check(uses: Iterable[Use], surface: dict) -> list[str]:
    """What in ``uses`` the recorded surface does not have, one line each."""
    problems = []
    for use in uses:
        why = _check_one(use, surface)
        if why:
            problems.append(f"{use.where}: {use.name}: {why}")
    return problems


def _check_one(use: Use, surface: dict) -> str | None:
    modules, classes, functions = surface["modules"], surface["classes"], surface["functions"]
    parts = use.name.split(".")
    if parts[0] not in modules:
        return f"{parts[0]} is not in the recorded surface"
    current, kind, i = parts[0], "module", 1
    while i < len(parts):
        part = parts[i]
        if kind == "module":
            mod = modules.get(current)
            if mod is None:
                return f"module {current} not recorded (rerun scripts/record_rapids_surface.py)"
            entry = mod["names"].get(part)
            if entry is None or entry == "missing":
                if mod["dynamic"]:
                    return None
                return f"{current} has no {part!r} in the pinned release"
            kind, _, current = entry.partition(":")
            if kind not in ("module", "class", "function"):
                return None  # a constant or an object of unknown type: nothing more to check
        elif kind == "class":
            info = classes.get(current)
            if info is None:
                return f"class {current} not recorded"
            if part not in info["attrs"]:
                if info["external_bases"]:
                    return None  # may come from a base outside RAPIDS (distributed, sklearn)
                return f"{current} has no attribute {part!r} in the pinned release"
            return None  # the attribute's own type is not followed
        else:
            return None
        i += 1
    if use.kwargs:
        sig = functions.get(current) if kind == "function" else None
        if kind == "class":
            sig = (classes.get(current) or {}).get("init")
        if sig and not sig["varkw"]:
            bad = [k for k in use.kwargs if k not in sig["params"]]
            if bad:
                return f"{current} takes no keyword argument(s) {bad}"
    return None


def scanned_uses(root: Path) -> list[Use]:
    """The uses in the package, its tests and benchmarks under the repository ``root``."""
    uses: list[Use] = []
    for sub in ("curator_dask", "tests", "bench"):
        if (root / sub).is_dir():
            uses += package_uses(root / sub)
    return uses


def main(argv: list[str], root: Path) -> int:
    """``record_rapids_surface.py [WHEEL_DIR]``: download (or read) the wheels, record."""
    import shlex
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(argv[0]) if argv else Path(tmp)
        if not argv:
            cmd = [sys.executable, "-m", *shlex.split(DOWNLOAD), "-d", str(folder)]
            subprocess.run(cmd, check=True)
        wheels = sorted(folder.glob("*.whl"))
        if not wheels:
            print(f"no wheels in {folder}", file=sys.stderr)
            return 1
        surface = record(wheels, scanned_uses(root))
    print(
        f"{SURFACE}: {len(surface['modules'])} modules, {len(surface['classes'])} classes, "
        f"{len(surface['functions'])} functions from {surface['versions']}"
    )
    return 0
