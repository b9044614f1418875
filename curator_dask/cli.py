"""The ``curator-dask`` command: parses arguments and calls the public API.

``curator-dask run PIPELINE.yaml`` runs a pipeline described in YAML; :data:`RUN_HELP` (what
``curator-dask run --help`` prints) shows the file's keys. Cluster flags
(:func:`add_cluster_args`) override the ``cluster:`` section. Other subcommands come from the
modules listed in :data:`SUBCOMMAND_MODULES`, each providing
``register(subparsers, add_cluster_args, client_from_args)``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import importlib
import logging
import os
import sys
import traceback
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from curator_dask.errors import ConfigError, RunInterrupted

# Only the standard library at module level: `curator-dask --help` and argument errors must
# not pay for dask.dataframe, numba and pyarrow (tests/test_cli.py times them).
if TYPE_CHECKING:
    from curator_dask.cluster import ClusterConfig
    from curator_dask.pipeline import Pipeline

#: Modules whose ``register(subparsers, add_cluster_args, client_from_args)`` adds
#: subcommands (e.g. ``"curator_dask.dedup.cli"``).
SUBCOMMAND_MODULES: list[str] = [
    "curator_dask.dedup.cli",
    "curator_dask.monitoring.cli",
    "curator_dask.demo",
]

#: Where a bare class name in a pipeline file is looked up, in order.
STAGE_MODULES = (
    "curator_dask.filters",
    "curator_dask.modifiers",
    "curator_dask.classifiers",
    "curator_dask.embeddings",
)
IO_MODULES = ("curator_dask.io",)

_TOP_KEYS = ("name", "description", "reader", "stages", "writer", "execution", "cluster", "config")
_STAGE_KEYS = ("class", "params", "resources", "name", "batch_size")


# -- cluster flags --------------------------------------------------------------------------
def add_cluster_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the flags that choose a cluster (shared by every subcommand); return ``parser``."""
    g = parser.add_argument_group("cluster (default: a local cluster from curator.cluster.*)")
    g.add_argument(
        "--scheduler-address",
        metavar="ADDR",
        help="connect to a running scheduler, e.g. tcp://10.0.0.5:8786 (default: none, a local "
        "cluster)",
    )
    g.add_argument(
        "--scheduler-file",
        metavar="FILE",
        help="connect through a scheduler file (dask scheduler --scheduler-file) (default: none)",
    )
    g.add_argument(
        "--n-workers",
        type=int,
        metavar="N",
        help="local workers, started as asked; with a scheduler, workers to wait for (default: "
        "curator.cluster.n-workers, else sized to the machine; a small input then runs on one "
        "worker of threads in this process, and says so)",
    )
    g.add_argument(
        "--threads-per-worker",
        type=int,
        metavar="N",
        help="threads of each local worker (default: curator.cluster.threads-per-worker, else "
        "sized to the machine)",
    )
    g.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help='per worker, e.g. "8GB" or "auto" (default: curator.cluster.memory-limit, auto: '
        "the machine's memory split between the workers)",
    )
    g.add_argument(
        "--local-directory",
        metavar="DIR",
        help="worker scratch and spill dir (default: dask's temporary-directory)",
    )
    g.add_argument(
        "--gpu",
        action="store_true",
        help="start a local CUDA cluster (one worker per GPU, RMM pool)",
    )
    g.add_argument(
        "--dashboard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve dask's dashboard from the local cluster (default: "
        "curator.cluster.dashboard, off)",
    )
    g.add_argument(
        "--connect-timeout",
        metavar="TIME",
        help="give up on a scheduler that does not answer, or has no workers, after this "
        "long (default: curator.cluster.connect-timeout, 30s)",
    )
    return parser


def cluster_config_from_args(
    args: argparse.Namespace, base: ClusterConfig | None = None
) -> ClusterConfig:
    """Combine ``base`` (default: ``curator.cluster.*``) with the cluster flags in ``args``."""
    from curator_dask.cluster import ClusterConfig

    cfg = base if base is not None else ClusterConfig.from_dask_config()
    changes: dict[str, Any] = {}
    address = getattr(args, "scheduler_address", None)
    scheduler_file = getattr(args, "scheduler_file", None)
    if address and scheduler_file:
        raise ConfigError("--scheduler-address", "give either it or --scheduler-file")
    if address:
        changes.update(kind="address", address=address)
    elif scheduler_file:
        changes.update(kind="scheduler_file", scheduler_file=scheduler_file)
    elif getattr(args, "gpu", False):
        changes["kind"] = "gpu"
    names = ("n_workers", "threads_per_worker", "memory_limit", "local_directory")
    for name in (*names, "connect_timeout", "dashboard"):
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    asked = any(getattr(args, n, None) is not None for n in ("n_workers", "threads_per_worker"))
    if asked and cfg.processes == "auto":
        # workers asked for on the command line are started as asked: the one-worker
        # in-process shortcut of processes="auto" is for when nothing was asked
        changes["processes"] = True
    try:
        return dataclasses.replace(cfg, **changes) if changes else cfg
    except ValueError as e:
        flag = next((f"--{n.replace('_', '-')}" for n in changes if n in str(e)), "cluster")
        raise ConfigError(flag, str(e)) from None


@contextlib.contextmanager
def client_from_args(
    args: argparse.Namespace,
    base: ClusterConfig | None = None,
    input_bytes: Callable[[], float | None] | None = None,
    threads_below: str | None = None,
) -> Iterator[Any]:
    """Yield a :class:`distributed.Client` for the cluster flags; clean up on exit.

    With ``processes: auto`` and ``input_bytes`` (the input's estimated in-memory bytes, or
    None when large or unknown), a small input runs on one worker of threads in this process,
    as ``run`` does (:meth:`~curator_dask.cluster.ClusterConfig.for_input`).
    ``threads_below`` names a config key that says "small" instead of
    ``curator.cluster.threads-below`` (the dedup commands': ``curator.dedup.threads-below``).
    """
    import dask.config
    from dask.utils import format_bytes

    from curator_dask.cluster import get_client

    config = cluster_config_from_args(args, base)
    key = "curator.cluster.threads-below"
    if threads_below is not None and dask.config.get(threads_below, None) is not None:
        key = threads_below
        config = dataclasses.replace(config, threads_below=dask.config.get(key))
    if config.processes == "auto" and config.kind == "cpu" and input_bytes is not None:
        nbytes = input_bytes()
        config = config.for_input(nbytes)
        if config.processes is False:
            logging.getLogger("curator_dask").info(
                "input of %s is below %s (%s): the local cluster is "
                "1 worker of %d threads in this process",
                format_bytes(int(nbytes or 0)),
                key,
                config.threads_below,
                config.threads_per_worker,
            )
    with get_client(config) as client:
        yield client


# -- pipeline files -------------------------------------------------------------------------
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


def _strings(data: Any) -> list[str]:
    """Every string value in a parsed YAML document."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, Mapping):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, (list, tuple)):
        return [s for v in data for s in _strings(v)]
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


# -- help, version, logging ------------------------------------------------------------------
RUN_HELP = """\
Run the pipeline described in a YAML file: read, apply the stages in order, write. Progress
goes to stderr, the summary to stdout; run metadata goes beside the output, to
<output>.curator/ (_stats.json, _quarantine/; the HTML report _report.html only with
curator.monitoring.report: true in config:, else `curator-dask report OUTPUT` draws it).
A file looks like this:

    name: demo
    reader:
      class: JsonlReader            # from curator_dask.io, or "package.module:Class"
      params: {paths: data/, blocksize: 64MB}
    stages:
      - class: UnicodeNormalizer    # from curator_dask.filters / modifiers / classifiers
      - class: WordCountFilter
        params: {min_words: 50}
        resources: {cpus: 1}        # or {gpus: 1}, {gpu_memory_gb: 8}
      - class: my_package.stages:MyStage
    writer:
      class: JsonlWriter
      params: {path: out/, mode: resume}
    execution: {mode: streaming, max_in_flight: 8}   # optional
    cluster: {n_workers: 4, threads_per_worker: 1}   # optional; the flags below override it
    config: {curator.io.blocksize: 128MB}            # optional dask config for the run

A mistake in the file is reported with the key at fault, e.g.
"stages[2].params.min_words: expected int, got 'many'", and exit status 2.
"""

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_HANDLERS: list[logging.Handler] = []
#: (logger, handler) added to another library's own logger, and (handler, filter) put on
#: another library's handler, by setup_logging (taken off by _remove_handlers).
_ADDED: list[tuple[logging.Logger, logging.Handler]] = []
_FILTERED: list[tuple[logging.Handler, logging.Filter]] = []


class _OthersAtLeast(logging.Filter):
    """Pass curator_dask's records, and other libraries' from ``level`` up: what the
    terminal shows of dask's warnings when the log file gets more of them."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name == "curator_dask" or record.name.startswith("curator_dask.")
        return ours or record.levelno >= self.level


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option with a default says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and "%(default)" not in text
            and not any(default is v for v in (None, False, True))  # 1.0 == True
            and default != argparse.SUPPRESS
            and not isinstance(action, argparse._CountAction)
        ):
            text = f"{text} (default: %(default)s)" if text else "default: %(default)s"
        if isinstance(action, argparse._StoreTrueAction) and "default" not in text:
            text = f"{text} (default: off)"
        return text or " "  # argparse prints nothing for an empty help


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = HelpFormatter
        super().__init__(*args, **kwargs)


def version_string() -> str:
    """``curator-dask X (dask Y, distributed Z, pandas W, Python V)``, without importing them."""
    from importlib import metadata

    from curator_dask import __version__

    parts = []
    for name in ("dask", "distributed", "pandas", "pyarrow"):
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} missing")
    py = ".".join(map(str, sys.version_info[:3]))
    return f"curator-dask {__version__} ({', '.join(parts)}, Python {py})"


def add_logging_args(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """Add ``-v/-q/--log-level/--log-file`` (``suppress``: no defaults, for subcommands)."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    g = parser.add_argument_group("output")
    g.add_argument(
        "-v",
        "--verbose",
        action="count",
        help="more detail: -v debug messages of curator_dask, -vv also dask's",
        **({"default": argparse.SUPPRESS} if suppress else {"default": 0}),
    )
    g.add_argument(
        "-q",
        "--quiet",
        action="count",
        help="less: -q warnings only (no progress), -qq errors only",
        **({"default": argparse.SUPPRESS} if suppress else {"default": 0}),
    )
    g.add_argument(
        "--log-level",
        type=str.upper,
        choices=_LEVELS,
        metavar="LEVEL",
        help=f"level of curator_dask's messages, one of {', '.join(_LEVELS)} "
        "(default: INFO, or as -v/-q say)",
        **default,
    )
    g.add_argument(
        "--log-file",
        metavar="FILE",
        help="also append every message (debug included) to FILE (default: none)",
        **default,
    )
    g.add_argument(
        "--debug",
        action="store_true",
        help="print the traceback of an error (also with -v)",
        **default,
    )


_SHOWWARNING: list[Any] = []
#: Levels of other libraries' loggers before main() set them (restored when it returns).
_SAVED_LEVELS: dict[str, int] = {}
#: The dask preload that gives local worker processes the command's warning display.
_WORKER_PRELOAD = "curator_dask._worker_warnings"
#: The dask preload that keeps a failed task's traceback block off the terminal.
_TASK_PRELOAD = "curator_dask._task_failures"
_SAVED_PRELOAD: list[list[str]] = []
#: ``curator.execution.progress`` before -q turned it off (restored when main() returns).
_SAVED_PROGRESS: list[Any] = []


def _log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` of the command line
    (:func:`curator_dask.progress.log_warning`)."""
    from curator_dask.progress import log_warning

    log_warning(message, category, filename, lineno)


def setup_logging(
    verbose: int = 0,
    quiet: int = 0,
    level: str | None = None,
    log_file: str | None = None,
    debug: bool = False,
) -> int:
    """Send curator_dask's (and dask's) log records to stderr and ``log_file``; return the level.

    curator_dask logs at ``level`` (default INFO, -v DEBUG, -q WARNING, -qq ERROR), every line
    as ``<time> [curator-dask] <message>`` (:class:`curator_dask.progress.ConsoleFormatter`),
    progress included (INFO records of ``curator_dask.progress``, so -q hides them). dask and
    distributed say only their errors unless -v (their warnings: p2p shuffles, workers
    restarted) or -vv (everything); Python warnings of other packages likewise, and
    curator_dask's own warnings become one line each.
    Without ``debug`` (``--debug``/``-v``), distributed's ``Compute Failed`` report of a
    failed task stays off the console (the log file keeps it): the user gets main()'s
    one-line error.
    """
    import warnings

    from curator_dask.progress import ConsoleFormatter

    if level is None:
        level = _LEVELS[min(max(1 - verbose + quiet, 0), len(_LEVELS) - 1)]
    ours = logging.getLevelName(level)
    theirs = logging.DEBUG if verbose >= 2 else logging.WARNING if verbose else logging.ERROR
    # with a log file, dask's and distributed's warnings (p2p shuffles, a worker killed and
    # restarted, Python warnings from their code) are logged for the file; the terminal
    # still shows them only under -v
    logged = min(theirs, logging.WARNING) if log_file else theirs
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(ConsoleFormatter())
    console.setLevel(min(ours, theirs))
    console.addFilter(_OthersAtLeast(theirs))
    if not (debug or verbose > 0):
        # a task's failure reaches the user as the one-line error (main); the traceback of
        # an in-process worker's "Compute Failed" goes to the log file, or -v/--debug
        from curator_dask._task_failures import HideTaskFailures

        console.addFilter(HideTaskFailures())
    handlers: list[logging.Handler] = [console]
    if log_file:
        to_file = logging.FileHandler(log_file)
        to_file.setFormatter(
            logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
        )
        to_file.setLevel(logging.DEBUG)
        handlers.append(to_file)
    root = logging.getLogger()
    package = logging.getLogger("curator_dask")
    _remove_handlers()  # main() called again in one process (tests, notebooks)
    _HANDLERS[:] = handlers
    _SHOWWARNING[:] = [warnings.showwarning]
    warnings.showwarning = _log_warning
    # curator_dask's records go to handlers on its own logger (that is also how its progress
    # display knows to log rather than print); everything else reaches them through root
    for h in handlers:
        root.addHandler(h)
        package.addHandler(h)
    package.propagate = False
    root.setLevel(logged)
    # distributed installs its own stderr handler (propagate=False) when first imported, from
    # the `logging` config; say our levels there so that import does not undo them.
    import dask.config

    dask.config.set(
        {
            "logging": {
                "distributed": logging.getLevelName(theirs).lower(),
                # distributed logs every p2p shuffle's start and end at WARNING
                "distributed.shuffle._scheduler_plugin": "error",
                "bokeh": "error",
                "tornado": "critical",
            }
        }
    )
    # worker processes a local cluster starts say their warnings the same way, and (unless
    # -v/--debug) keep distributed's "Compute Failed" report of a failed task to themselves
    wanted = [_WORKER_PRELOAD] if debug or verbose > 0 else [_WORKER_PRELOAD, _TASK_PRELOAD]
    preload = list(dask.config.get("distributed.worker.preload", []) or [])
    missing = [p for p in wanted if p not in preload]
    if missing:
        _SAVED_PRELOAD[:] = [preload]
        dask.config.set({"distributed.worker.preload": [*preload, *missing]})
    logging.getLogger("curator_dask").setLevel(ours if not log_file else logging.DEBUG)
    if log_file:
        # that config is also what the worker processes start with (their stderr is the
        # terminal); this process sets distributed's logging up now, so that the levels
        # below (the log file's) are not reset by its first import later
        with contextlib.suppress(ImportError):
            import distributed  # noqa: F401
    for name in ("distributed", "dask", "py.warnings"):
        _SAVED_LEVELS.setdefault(name, logging.getLogger(name).level)
        logging.getLogger(name).setLevel(logged)
    shuffle = "distributed.shuffle._scheduler_plugin"
    _SAVED_LEVELS.setdefault(shuffle, logging.getLogger(shuffle).level)
    logging.getLogger(shuffle).setLevel(logging.WARNING if log_file else logging.ERROR)
    # distributed imported before this call has its own stderr handler and does not
    # propagate: the same level rule there, and the log file beside it
    dist = logging.getLogger("distributed")
    if not dist.propagate:
        for h in dist.handlers:
            if h not in handlers:
                shown = _OthersAtLeast(theirs)
                h.addFilter(shown)
                _FILTERED.append((h, shown))
        for h in handlers[1:]:
            dist.addHandler(h)
            _ADDED.append((dist, h))
    if ours > logging.INFO:  # until _remove_handlers: main() may be called in a process
        _SAVED_PROGRESS[:] = [dask.config.get("curator.execution.progress", True)]
        dask.config.set({"curator.execution.progress": False})
    return ours


# -- commands -----------------------------------------------------------------------------
def _cmd_run(args: argparse.Namespace) -> int:
    from curator_dask.executor import DaskExecutor, SequentialExecutor

    run = load_run_config(args.config)
    from curator_dask.errors import require_protocols

    require_protocols(_strings(run.source))  # s3:// without s3fs: said before anything starts
    mode = args.execution_mode or run.execution_mode
    if args.dry_run:  # the pipeline is what was asked for: the result, on stdout
        print(repr(run.pipeline))
        return 0
    for line in repr(run.pipeline).splitlines():  # a log line each, as progress is
        logging.getLogger("curator_dask.cli").info("%s", line)
    import dask.config

    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(dask.config.set(run.dask_config))
            if args.sequential:
                result = run.pipeline.run(SequentialExecutor(), execution_mode=mode)
            else:
                # The executor starts (and stops) the cluster: it knows the input's size,
                # which decides processes="auto" (ClusterConfig.for_input).
                cluster = cluster_config_from_args(args, base=run.cluster)
                executor = DaskExecutor(cluster=cluster, max_in_flight=run.max_in_flight)
                result = run.pipeline.run(executor, execution_mode=mode)
    except KeyboardInterrupt:
        raise RunInterrupted(run.pipeline.writer) from None
    print(result.summary())
    from curator_dask.errors import check_quarantine_share

    writer = run.pipeline.writer
    where = writer.layout.quarantine_dir if writer is not None else "the quarantine"
    with dask.config.set(run.dask_config):  # the file's config says the share too
        check_quarantine_share(result.read, result.quarantined, where, result)
    return 0


#: Subcommands that get ``--metrics-port`` from :func:`main` (``monitor`` has its own).
_SERVE_METRICS = ("run", "exact-dedup", "fuzzy-dedup", "semantic-dedup", "demo")


def add_metrics_port_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--metrics-port`` (serve curator's Prometheus metrics while the command runs)."""
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve curator_dask's Prometheus metrics on this port while the command runs "
        "(0: any free port; the address is logged; needs the monitoring extra) (default: off)",
    )
    parser.add_argument(
        "--metrics-addr",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to serve the metrics on (0.0.0.0: reachable from other machines)",
    )
    parser.set_defaults(_serve_metrics=True)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every registered subcommand."""
    parser = _Parser(
        prog="curator-dask",
        description="Curate text datasets for LLM training on Dask.",
        epilog="`curator-dask COMMAND --help` describes each command and its defaults.",
    )
    parser.add_argument("--version", action="version", version=version_string())
    add_logging_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = sub.add_parser(
        "run",
        help="run a pipeline described in a YAML file",
        description=RUN_HELP,
    )
    run.add_argument("config", help="pipeline YAML file")
    run.add_argument(
        "--execution-mode",
        choices=("streaming", "batch"),
        help="default: the file's execution.mode, else curator.execution.mode (streaming)",
    )
    run.add_argument(
        "--sequential",
        action="store_true",
        help="run in this process without a cluster (debugging)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="check the file and print the pipeline; run nothing"
    )
    add_cluster_args(run)
    run.set_defaults(func=_cmd_run)
    for module_name in SUBCOMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(sub, add_cluster_args, client_from_args)
    for name in _SERVE_METRICS:
        if name in sub.choices:
            add_metrics_port_arg(sub.choices[name])
    for subparser in sub.choices.values():
        add_logging_args(subparser, suppress=True)
        for action in subparser._actions:
            if action.help is None and action.option_strings:
                action.help = ""  # HelpFormatter adds the default, if there is one
    return parser


@contextlib.contextmanager
def _metrics_server(args: argparse.Namespace) -> Iterator[None]:
    port = getattr(args, "metrics_port", None)
    if not getattr(args, "_serve_metrics", False) or port is None:
        yield
        return
    from curator_dask.monitoring.metrics import start_metrics_server

    with start_metrics_server(port, addr=args.metrics_addr) as server:
        logging.getLogger("curator_dask.cli").warning("metrics: %s", server.url)
        yield


def _finished_partitions(writer: Any) -> tuple[int, str] | None:
    """Partitions with their statistics record written (what a resumed run skips)."""
    try:
        layout = writer.layout
        stats_dir = layout.partition_stats_path(0).rsplit("/", 1)[0]
        fs, root = layout.fs(stats_dir)
        names = fs.glob(root.rstrip("/") + "/part-*.json") if fs.exists(root) else []
        return len(names), layout.root
    except Exception:  # the message is best effort; never hide the interrupt
        return None


def _interrupted_message(err: KeyboardInterrupt) -> str:
    writer = getattr(err, "writer", None)
    done = _finished_partitions(writer) if writer is not None else None
    if done is None:
        return "curator-dask: interrupted (Ctrl-C)"
    n, root = done
    mode = getattr(writer, "mode", None)
    how = (
        "run the same command again to continue"
        if mode == "resume"
        else "set the writer's mode: resume and run again to continue from there"
    )
    return (
        f"curator-dask: interrupted (Ctrl-C): {n} partition(s) finished in {root}\n"
        f"curator-dask: {how} (finished partitions are not redone)"
    )


def _one_line(err: BaseException, limit: int = 400) -> str:
    text = str(err).strip().splitlines()
    line = text[0] if text else ""
    if isinstance(err, OSError) and err.filename and str(err.filename) not in line:
        line = f"{line}: {err.filename}" if line else str(err.filename)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe_error(err: BaseException) -> tuple[int, str]:
    """Exit status and the one or two lines that tell a user what went wrong and what to do.

    2 for a usage error (arguments, the pipeline file), 1 for everything at run time.
    """
    from curator_dask.cluster import ClusterConnectError

    name = type(err).__name__
    msg = _one_line(err)
    if isinstance(err, ConfigError) or name in ("ColumnError", "MissingExtraError"):
        return 2, f"curator-dask: error: {msg}"
    if isinstance(err, ClusterConnectError):
        return 1, f"curator-dask: error: {msg}"
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return 1, (
            f"curator-dask: error: no S3 credentials: {msg}\n"
            "curator-dask: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, or "
            "storage_options {key, secret}"
        )
    object_store = any(f"{p}://" in msg for p in ("s3", "gs", "gcs", "abfs", "az"))
    if name == "ClientError" or (isinstance(err, PermissionError) and object_store):
        return 1, (
            f"curator-dask: error: the object store refused the request: {msg}\n"
            "curator-dask: check the credentials, the bucket name and its permissions"
        )
    if isinstance(err, FileNotFoundError):
        if "bucket" in msg.lower():
            return 1, f"curator-dask: error: {msg}"
        return 1, f"curator-dask: error: {msg}\ncurator-dask: check the path and that it exists"
    if isinstance(err, PermissionError):
        return 1, (
            f"curator-dask: error: permission denied: {msg}\n"
            "curator-dask: check the permissions of that path, or write elsewhere"
        )
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        return 1, (
            f"curator-dask: error: disk full: {msg}\n"
            "curator-dask: free space or write elsewhere; with mode: resume a rerun keeps "
            "the finished partitions"
        )
    if isinstance(err, OSError) and (
        err.errno == errno.EBUSY or "reduce your request rate" in msg.lower()
    ):  # s3fs's SlowDown (503) once its retries and botocore's ran out
        return 1, (
            f"curator-dask: error: the object store kept throttling the requests (SlowDown) "
            f"after its retries: {msg}\n"
            "curator-dask: run again later or with fewer workers (with mode: resume a rerun "
            "keeps the finished partitions)"
        )
    known = (
        "AccountingError",
        "MalformedInputError",
        "TruncatedInputError",
        "QuarantineShareError",
    )
    if name in known or isinstance(err, (OSError, MemoryError)):
        return 1, f"curator-dask: error: {msg}"
    return 1, (
        f"curator-dask: error: {name}: {msg}\n"
        "curator-dask: run again with --debug for the traceback"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``curator-dask``; returns the exit status.

    Errors a user can cause print one or two lines (what, where, what to do) and return 1
    (at run time) or 2 (usage); ``--debug`` or ``-v`` also prints the traceback.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    debug = bool(getattr(args, "debug", False) or (getattr(args, "verbose", 0) or 0) > 0)
    setup_logging(args.verbose, args.quiet, args.log_level, args.log_file, debug)
    from curator_dask._optional_scipy import defer_optional_scipy

    undo_scipy = defer_optional_scipy()  # dask's and numba's optional SciPy: ~0.7 CPU-s
    try:
        if (
            getattr(args, "_serve_metrics", False)
            and getattr(args, "metrics_port", None) is not None
        ):
            from curator_dask.errors import require

            require(("prometheus_client",), "curator_dask[monitoring]", "--metrics-port")
        with _metrics_server(args):
            return int(args.func(args) or 0)
    except KeyboardInterrupt as e:
        if debug:
            traceback.print_exc()
        print(_interrupted_message(e), file=sys.stderr)
        return 1
    except Exception as e:
        if debug:
            traceback.print_exc()
        code, message = describe_error(e)
        where = getattr(args, "config", None)
        if isinstance(e, ConfigError) and where:
            message = message.replace("error: ", f"error: {where}: ", 1)
        print(message, file=sys.stderr)
        return code
    finally:
        undo_scipy()
        _remove_handlers()


def _remove_handlers() -> None:
    """Take main()'s log handlers off again (main() called in a process that goes on)."""
    root = logging.getLogger()
    package = logging.getLogger("curator_dask")
    for h in _HANDLERS:
        root.removeHandler(h)
        package.removeHandler(h)
        h.close()
    if _HANDLERS:
        package.propagate = True
        package.setLevel(logging.NOTSET)
    _HANDLERS.clear()
    if _SHOWWARNING:
        import warnings

        warnings.showwarning = _SHOWWARNING.pop()
    for name, level in _SAVED_LEVELS.items():
        logging.getLogger(name).setLevel(level)
    _SAVED_LEVELS.clear()
    if _SAVED_PROGRESS:
        import dask.config

        dask.config.set({"curator.execution.progress": _SAVED_PROGRESS.pop()})
    for logger, handler in _ADDED:
        logger.removeHandler(handler)
    _ADDED.clear()
    for handler, shown in _FILTERED:
        handler.removeFilter(shown)
    _FILTERED.clear()
    if _SAVED_PRELOAD:
        import dask.config

        dask.config.set({"distributed.worker.preload": _SAVED_PRELOAD.pop()})


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
