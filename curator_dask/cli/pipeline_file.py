"""Pipeline files: a YAML file read, checked and built into a :class:`RunConfig`.

``curator-dask run PIPELINE.yaml`` reads one (:data:`curator_dask.cli.RUN_HELP`, what
``curator-dask run --help`` prints, shows the keys). The file's shape is checked against
:func:`pipeline_schema`; what depends on Python (that a class exists, that its parameters fit
its signature) when the pipeline is built. Every mistake is a
:class:`~curator_dask.errors.ConfigError` naming the key at fault.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from curator_dask.errors import ConfigError

if TYPE_CHECKING:
    from curator_dask.cluster import ClusterConfig
    from curator_dask.pipeline import Pipeline

#: Where a bare class name in a pipeline file is looked up, in order.
STAGE_MODULES = (
    "curator_dask.filters",
    "curator_dask.modifiers",
    "curator_dask.classifiers",
    "curator_dask.embeddings",
)
IO_MODULES = ("curator_dask.io",)

_STAGE_KEYS = ("class", "params", "resources", "name", "batch_size")


@dataclass
class RunConfig:
    """A pipeline file, loaded: the pipeline plus how to run it."""

    pipeline: Pipeline
    execution_mode: str | None = None
    max_in_flight: int | None = None
    cluster: ClusterConfig | None = None
    dask_config: dict[str, Any] = field(default_factory=dict)
    #: The parsed file, as written.
    source: Any = None


def strings_in(data: Any) -> list[str]:
    """Every string value in a parsed YAML document."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, Mapping):
        return [s for v in data.values() for s in strings_in(v)]
    if isinstance(data, (list, tuple)):
        return [s for v in data for s in strings_in(v)]
    return []


def load_run_config(path: str | os.PathLike[str]) -> RunConfig:
    """Read a pipeline YAML file (see the module docstring); errors name the key at fault."""
    import yaml

    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        # main() puts the file's name in front
        raise ConfigError("", yaml_error_message(e)) from e
    return run_config_from_dict(data)


def yaml_error_message(err: Exception) -> str:
    """``line L, column C: not valid YAML: what`` on one line (1-based, as editors count).

    >>> import yaml
    >>> try:
    ...     yaml.safe_load("a: b: c")
    ... except yaml.YAMLError as e:
    ...     print(yaml_error_message(e))
    line 1, column 5: not valid YAML: mapping values are not allowed here
    """
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    return f"{where}not valid YAML: {problem}" + (f" ({context})" if context else "")


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``known`` to ``name``, else ``""``.

    >>> did_you_mean("WordCountFiltr", ["WordCountFilter", "UrlFilter"])
    "; did you mean 'WordCountFilter'?"
    """
    import difflib

    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def run_config_from_dict(data: Any) -> RunConfig:
    """Build a :class:`RunConfig` from the parsed YAML mapping.

    The ``config:`` section is resolved first and is in force while the reader, stages and
    writer are built (their defaults, e.g. ``curator.io.blocksize``, come from it);
    :func:`main` sets it again for the run.
    """
    import dask.config

    if not isinstance(data, Mapping):
        raise ConfigError("", f"a pipeline file holds a mapping, got {type(data).__name__}")
    validate_structure(data)
    dask_config = data.get("config") or {}
    _mapping(dask_config, "config")
    _check_config_keys(dask_config)
    # The file's config applies to everything, the readers' and stages' defaults included:
    # it is in force while they are built here, and again while the run goes (_cmd_run).
    with dask.config.set(dict(dask_config)):
        return _run_config(data, dict(dask_config))


def _check_config_keys(dask_config: Mapping[str, Any]) -> None:
    """A ``curator.*`` key that is not a setting is a typo: name it."""
    import dask.config

    missing = object()
    for key in dask_config:
        is_ours = isinstance(key, str) and key.startswith("curator.")
        if is_ours and dask.config.get(key, default=missing) is missing:
            section, _, _ = key.rpartition(".")
            siblings = dask.config.get(section, default={}) or {}
            names = [f"{section}.{k}" for k in siblings] if isinstance(siblings, dict) else []
            hint = did_you_mean(key, names)
            raise ConfigError(
                f"config.{key}", f"unknown setting{hint} (see curator_dask/curator.yaml)"
            )


def _run_config(data: Mapping[str, Any], dask_config: dict[str, Any]) -> RunConfig:
    import dask.config

    from curator_dask.cluster import ClusterConfig
    from curator_dask.io.base import Reader, Writer
    from curator_dask.pipeline import Pipeline
    from curator_dask.stage import ProcessingStage

    for key in ("reader", "writer"):
        if key not in data:
            raise ConfigError(key, "required")
    name = data.get("name", "pipeline")
    pipeline = Pipeline(name, description=data.get("description"))
    pipeline.add_stage(_build(data["reader"], "reader", IO_MODULES, Reader))
    stages = data.get("stages") or []
    if not isinstance(stages, list):
        raise ConfigError("stages", f"expected a list, got {type(stages).__name__}")
    for i, spec in enumerate(stages):
        pipeline.add_stage(_build(spec, f"stages[{i}]", STAGE_MODULES, ProcessingStage))
    pipeline.add_stage(_build(data["writer"], "writer", IO_MODULES, Writer))

    execution = data.get("execution") or {}
    _mapping(execution, "execution")
    _no_unknown(execution, ("mode", "max_in_flight", "max-in-flight"), "execution")
    mode = execution.get("mode")
    if mode is not None and mode not in ("streaming", "batch"):
        raise ConfigError("execution.mode", f"expected 'streaming' or 'batch', got {mode!r}")
    max_in_flight = execution.get("max_in_flight", execution.get("max-in-flight"))
    if max_in_flight is not None and (not isinstance(max_in_flight, int) or max_in_flight < 1):
        raise ConfigError("execution.max_in_flight", f"expected an int >= 1, got {max_in_flight!r}")
    cluster = None
    if data.get("cluster") is not None:
        _mapping(data["cluster"], "cluster")
        names = [f.name for f in dataclasses.fields(ClusterConfig)]
        for key in data["cluster"]:
            if str(key).replace("-", "_") not in names:
                hint = did_you_mean(str(key).replace("-", "_"), names)
                raise ConfigError(
                    f"cluster.{key}", f"unknown setting{hint} (known: {', '.join(names)})"
                )
        try:
            cluster = ClusterConfig.from_dict(
                {**(dask.config.get("curator.cluster", {}) or {}), **data["cluster"]}
            )
        except (TypeError, ValueError) as e:
            bad = next((k for k in data["cluster"] if str(k).replace("-", "_") in str(e)), None)
            raise ConfigError(f"cluster.{bad}" if bad else "cluster", str(e)) from e
    return RunConfig(pipeline, mode, max_in_flight, cluster, dask_config, data)


# -- the file's structure, as a JSON Schema ------------------------------------------------
def pipeline_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a pipeline file's structure.

    It checks keys, types and simple ranges; what depends on Python (that a class exists,
    that its parameters fit its signature) is checked when the pipeline is built.
    """
    from curator_dask.cluster import ClusterConfig
    from curator_dask.stage import Resources

    optional_int = {"type": ["integer", "null"], "minimum": 1}
    resources = {
        "type": ["object", "null"],
        "properties": {
            f.name: {"type": "number", "minimum": 0} for f in dataclasses.fields(Resources)
        },
        "additionalProperties": False,
    }
    component = {
        "type": ["string", "object"],
        "properties": {
            "class": {"type": "string"},
            "params": {"type": ["object", "null"]},
            "resources": resources,
            "name": {"type": ["string", "null"]},
            "batch_size": optional_int,
        },
        "required": ["class"],
        "additionalProperties": False,
    }
    cluster_keys = [f.name for f in dataclasses.fields(ClusterConfig)]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "curator-dask pipeline file",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": ["string", "null"]},
            "reader": component,
            "stages": {"type": ["array", "null"], "items": component},
            "writer": component,
            "execution": {
                "type": ["object", "null"],
                "properties": {
                    "mode": {"enum": ["streaming", "batch", None]},
                    "max_in_flight": optional_int,
                    "max-in-flight": optional_int,
                },
                "additionalProperties": False,
            },
            "cluster": {
                "type": ["object", "null"],
                "properties": {
                    k: {} for name in cluster_keys for k in (name, name.replace("_", "-"))
                },
                "additionalProperties": False,
            },
            "config": {"type": ["object", "null"]},
        },
        "required": ["reader", "writer"],
        "additionalProperties": False,
    }


_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an int",
    "number": "a number",
    "null": "nothing",
}


def validate_structure(data: Any) -> None:
    """Check ``data`` against :func:`pipeline_schema`; raise :class:`ConfigError` at the key.

    Uses the ``jsonschema`` library: the schema is the one description of the file's shape
    (importing it costs about 80 ms, paid by ``run`` only, never by ``--help``).
    """
    import jsonschema

    validator = jsonschema.Draft202012Validator(pipeline_schema())
    errors = sorted(
        validator.iter_errors(data), key=lambda e: (len(e.absolute_path), _path(e.absolute_path))
    )
    if errors:
        raise _config_error(errors[0])


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _config_error(err: Any) -> ConfigError:
    path = _path(err.absolute_path)
    kind, value, instance = err.validator, err.validator_value, err.instance
    if kind == "additionalProperties":
        known = list(err.schema.get("properties", {}))
        extra = sorted(str(k) for k in instance if k not in known)[0]
        hint = did_you_mean(extra, known)
        if path == "cluster":
            names = ", ".join(k for k in known if "-" not in k)
            return ConfigError(_join(path, extra), f"unknown setting{hint} (known: {names})")
        return ConfigError(_join(path, extra), f"unknown key{hint} (known: {', '.join(known)})")
    if kind == "required":
        missing = next(k for k in value if k not in instance)
        return ConfigError(_join(path, missing), "required")
    if kind == "type":
        types = value if isinstance(value, list) else [value]
        wanted = " or ".join(_TYPE_NAMES.get(str(t), str(t)) for t in types if t != "null")
        return ConfigError(path, f"expected {wanted}, got {type(instance).__name__}")
    if kind == "enum":
        wanted = " or ".join(repr(v) for v in value if v is not None)
        return ConfigError(path, f"expected {wanted}, got {instance!r}")
    if kind == "minimum":
        what = "an int" if isinstance(instance, int) and path.endswith("in_flight") else "a number"
        return ConfigError(path, f"must be {what} >= {value}, got {instance!r}")
    return ConfigError(path, err.message)


def _mapping(value: Any, key: str) -> None:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"expected a mapping, got {type(value).__name__}")


def _no_unknown(data: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    for key in data:
        if key not in known:
            at = f"{where}.{key}" if where else str(key)
            hint = did_you_mean(key, known)
            raise ConfigError(at, f"unknown key{hint} (known: {', '.join(known)})")


def resolve_class(name: str, modules: Sequence[str], key: str) -> Any:
    """Find ``name`` (``Class`` in ``modules``, or ``package.module:Attr``)."""
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ConfigError(key, f"cannot import module {module_name!r}: {e}") from e
        try:
            return getattr(module, attr)
        except AttributeError as e:
            raise ConfigError(key, f"module {module_name!r} has no {attr!r}") from e
    known: list[str] = []
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            return getattr(module, name)
        known += [n for n in getattr(module, "__all__", dir(module)) if n[:1].isupper()]
    hint = did_you_mean(name, known)
    raise ConfigError(
        key,
        f"unknown class {name!r}{hint} (not in {', '.join(modules)}); write "
        "'package.module:Class' for your own",
    )


def _build(spec: Any, key: str, modules: Sequence[str], base: type) -> Any:
    from curator_dask.stage import ProcessingStage, Resources

    if isinstance(spec, str):
        spec = {"class": spec}
    _mapping(spec, key)
    _no_unknown(spec, _STAGE_KEYS, key)
    if "class" not in spec:
        raise ConfigError(f"{key}.class", "required")
    cls_name = spec["class"]
    if not isinstance(cls_name, str):
        raise ConfigError(f"{key}.class", f"expected a string, got {cls_name!r}")
    target = resolve_class(cls_name, modules, f"{key}.class")
    params = spec.get("params") or {}
    _mapping(params, f"{key}.params")
    if isinstance(target, ProcessingStage):  # e.g. a @processing_stage function
        if params:
            raise ConfigError(
                f"{key}.params", f"{cls_name} is a stage object, not a class: it takes no params"
            )
        obj = target
    elif isinstance(target, type):
        if not issubclass(target, base):
            raise ConfigError(f"{key}.class", f"{cls_name} is not a {base.__name__}")
        obj = _instantiate(target, dict(params), f"{key}.params")
    else:
        raise ConfigError(f"{key}.class", f"{cls_name} is not a class")
    if not isinstance(obj, base):
        raise ConfigError(
            f"{key}.class", f"{cls_name} is a {type(obj).__name__}, not a {base.__name__}"
        )
    if isinstance(obj, ProcessingStage):
        changes: dict[str, Any] = {}
        if spec.get("resources") is not None:
            res = spec["resources"]
            _mapping(res, f"{key}.resources")
            known = [f.name for f in dataclasses.fields(Resources)]
            _no_unknown(res, known, f"{key}.resources")
            try:
                changes["resources"] = Resources(**res)
            except ValueError as e:
                bad = next((k for k in res if f"Resources.{k}" in str(e)), None)
                raise ConfigError(
                    f"{key}.resources.{bad}" if bad else f"{key}.resources", str(e)
                ) from e
        for name in ("name", "batch_size"):
            if spec.get(name) is not None:
                changes[name] = spec[name]
        if changes:
            try:
                obj = obj.with_(**changes)
            except (TypeError, ValueError) as e:
                raise ConfigError(key, str(e)) from e
    else:
        for name in ("resources", "name", "batch_size"):
            if name in spec:
                raise ConfigError(f"{key}.{name}", "only processing stages take this")
    return obj


def _instantiate(cls: type, params: dict[str, Any], key: str) -> Any:
    if dataclasses.is_dataclass(cls):
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        for name in params:
            if name not in fields:
                hint = did_you_mean(name, list(fields))
                raise ConfigError(
                    f"{key}.{name}",
                    f"{cls.__name__} has no parameter {name!r}{hint} (parameters: "
                    f"{', '.join(n for n in fields if n != 'resources')})",
                )
        for name, f in fields.items():
            missing = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if missing and name not in params:
                raise ConfigError(f"{key}.{name}", f"required by {cls.__name__}")
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # an annotation that cannot be evaluated here: skip type checks
            hints = {}
        for name, value in params.items():
            expected = hints.get(name)
            if expected is not None and not _matches(value, expected):
                raise ConfigError(
                    f"{key}.{name}", f"expected {_hint_name(expected)}, got {value!r}"
                )
    try:
        return cls(**params)
    except (TypeError, ValueError) as e:
        msg = str(e)
        bad = next(
            (n for n in params if f"'{n}'" in msg or f"{n} " in msg or msg.startswith(n)), None
        )
        raise ConfigError(f"{key}.{bad}" if bad else key, msg) from e


def _matches(value: Any, hint: Any) -> bool:
    """A small structural check of YAML values against a type hint (unknown hints pass)."""
    if hint is Any or hint is object:
        return True
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_matches(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    container = origin or hint
    if container in (list, tuple, set, frozenset, Sequence):
        if isinstance(value, str):
            return container is Sequence and (not args or args[0] is str)
        if not isinstance(value, (list, tuple)):
            return False
        if container is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return True
        return not args or all(_matches(v, args[0]) for v in value)
    if container in (dict, Mapping):
        return isinstance(value, Mapping)
    if container is os.PathLike:
        return isinstance(value, str)
    return True


def _hint_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")
