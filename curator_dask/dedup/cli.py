"""The ``exact-dedup``, ``fuzzy-dedup`` and ``semantic-dedup`` subcommands of ``curator-dask``.

Every option comes from a field of the workflow's dataclass: its flag (``--num-bands`` for
``num_bands``), type, default and help (the field's entry in the class docstring). Adding a
dedup method to the CLI is its parameters' :class:`~curator_dask.dedup._params.Command` and
one entry in :data:`~curator_dask.dedup._params.COMMANDS`; this module is not touched.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import re
from collections.abc import Callable
from typing import Any

from curator_dask._lazy import imports_without_gc
from curator_dask.dedup._params import BAND_SHAPES, COMMANDS, HASH_METHODS

#: Flags that keep their historical names.
_FLAG_NAMES = {
    "output_path": "--output",
    "cache_path": "--cache-dir",
}
#: Fields that are not options (Python objects, or the positional input).
_NOT_OPTIONS = {"input_path", "df", "client", "stats"}
#: Options that exclude each other.
_EXCLUSIVE = (("char_ngrams", "word_ngrams"),)
_CHOICES: dict[str, tuple[str, ...]] = {
    "hash_method": HASH_METHODS,
    "band_shape": tuple(BAND_SHAPES),
    "normalization": ("simple", "none"),
}


def _field_help(cls: type) -> dict[str, str]:
    """Each parameter's first sentence from the numpydoc ``Parameters`` section."""
    return {name: text for name, (text, _) in _field_docs(cls).items()}


def _field_docs(cls: type) -> dict[str, tuple[str, str | None]]:
    """Each parameter's first sentence, and what its documentation says its default is.

    The default is the text after ``; default`` in the first sentence, or of a later
    sentence starting with ``Default``; None when the documentation says nothing.
    """
    doc = cls.__doc__ or ""
    out: dict[str, tuple[str, str | None]] = {}
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^    ([a-z_][a-z0-9_, ]*) : ", line)
        if not m:
            continue
        text = []
        for nxt in lines[i + 1 :]:
            if not nxt.startswith("        "):
                break
            text.append(nxt.strip())
        # user text: no Sphinx roles or literal markup
        paragraph = re.sub(r":\w+:`~?([^`]+)`", r"\1", " ".join(text)).replace("``", "")
        sentences = [s.rstrip(".") for s in paragraph.split(". ")]
        first, default = sentences[0], None
        inline = re.search(r"; default:? (.+)$", first)
        if inline:
            first, default = first[: inline.start()], inline.group(1)
        later = next((s for s in sentences[1:] if s.startswith("Default")), None)
        if default is None and later is not None:
            default = re.sub(r"^Default:? ", "", later)
        for name in m.group(1).split(","):
            out[name.strip()] = (first.replace("%", "%%"), default and default.replace("%", "%%"))
    return out


def json_object(text: str) -> dict[str, Any]:
    """A command-line JSON object (argparse names the option in front of the error)."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"anon\": true}}', got {text!r}"
        )
    return value


def _parse_type(annotation: str) -> Callable[[str], Any]:
    if "dict" in annotation:
        return json_object
    if "float" in annotation:
        return float
    if annotation.startswith("int") and "str" not in annotation:
        return int
    return str


def add_workflow_command(
    subparsers: Any,
    name: str,
    cls: type,
    workflow: str,
    help_text: str,
    add_cluster_args: Callable[[argparse.ArgumentParser], None],
    client_from_args: Callable[..., Any],
    required: tuple[str, ...] = ("output_path",),
    choices: dict[str, tuple[str, ...]] | None = None,
) -> argparse.ArgumentParser:
    """Add subcommand ``name`` running ``workflow(**options).run()``.

    The options come from the fields of ``cls`` (the workflow's parameter dataclass);
    ``workflow`` (``"module:Class"``) is imported only when the command runs.
    """
    from curator_dask.io.formats import reader_formats

    # the formats registered when the command is built (io.formats: each reader's own)
    formats = reader_formats()
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    parser.add_argument(
        "input",
        nargs="+",
        help=f"{'/'.join(formats)} files, a directory or a glob (local or s3://)",
    )
    docs = _field_docs(cls)
    all_choices = {**_CHOICES, "input_format": formats, **(choices or {})}
    dests: list[str] = []
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    target: dict[str, Any] = {}
    for group in _EXCLUSIVE:
        if set(group) <= names:
            mx = parser.add_mutually_exclusive_group()
            target.update(dict.fromkeys(group, mx))
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not f.init or f.name in _NOT_OPTIONS:
            continue
        flag = _FLAG_NAMES.get(f.name, "--" + f.name.replace("_", "-"))
        default = f.default if f.default is not dataclasses.MISSING else None
        text, said = docs.get(f.name, ("", None))
        kw: dict[str, Any] = {"dest": f.name, "help": text}
        annotation = str(f.type)
        # every option's default shown once: the field's, else what its documentation says
        if annotation == "bool":
            kw["action"] = argparse.BooleanOptionalAction
            kw["default"] = None
            kw["help"] += f" (default: {'on' if default else 'off'})"
        else:
            kw["type"] = _parse_type(annotation)
            kw["default"] = None
            if f.name in all_choices:
                kw["choices"] = all_choices[f.name]
            if f.name in required:
                kw["required"] = True
            elif default is not None:
                kw["help"] += f" (default: {default})"
            else:
                kw["help"] += f" (default: {said or 'none'})"
        target.get(f.name, parser).add_argument(flag, **kw)
        dests.append(f.name)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the result as one JSON object on stdout (for scripts) instead of the table",
    )
    add_cluster_args(parser)
    parser.set_defaults(func=lambda a: _run(workflow, a, dests, client_from_args))
    return parser


def register(
    subparsers: Any,
    add_cluster_args: Callable[[argparse.ArgumentParser], None],
    client_from_args: Callable[..., Any],
) -> None:
    """Add a subcommand for each dedup method of :data:`~curator_dask.dedup._params.COMMANDS`
    (``exact-dedup``, ``fuzzy-dedup``, ``semantic-dedup``) to ``subparsers``.

    ``add_cluster_args(parser)`` adds the cluster flags; ``client_from_args(args,
    input_bytes=...)`` is a context manager yielding a distributed Client (or None for the
    local scheduler); ``input_bytes()`` estimates the input's in-memory size (None: large or
    unknown), which lets a small input run on threads: with ``threads_below`` (the config
    key of "small") and ``local_scheduler=True`` on dask's threaded scheduler, yielding None.
    """
    for params in COMMANDS:
        command = params.command  # type: ignore[attr-defined]
        add_workflow_command(
            subparsers,
            command.name,
            params,
            command.workflow,
            command.help,
            add_cluster_args,
            client_from_args,
            required=command.required,
            choices=command.choices,
        )


def _unread_metrics(args: argparse.Namespace, client: Any) -> dict[str, Any]:
    """Settings that skip curator's Prometheus metrics where nothing can read them: a run on
    dask's threaded scheduler (no client, so no scheduler dashboard in this process serving
    ``/metrics``) without ``--metrics-port``. Importing prometheus_client alone is about
    0.1 CPU-s of a small run."""
    if client is None and getattr(args, "metrics_port", None) is None:
        return {"curator.monitoring.prometheus": False}
    return {}


def _run(
    workflow: str, args: argparse.Namespace, dests: list[str], client_from_args: Callable[..., Any]
) -> int:
    module, name = workflow.split(":")
    with imports_without_gc():  # the workflow's pandas, pyarrow, numba: no garbage to collect
        cls = getattr(importlib.import_module(module), name)
    options = {d: getattr(args, d) for d in dests if getattr(args, d) is not None}
    from curator_dask.dedup._runtime import DedupInput
    from curator_dask.errors import check_quarantine_share, require, require_protocols

    # said before a cluster starts: a missing package, a wrong column
    paths = [*args.input, *(str(options.get(k, "")) for k in ("output_path", "cache_path"))]
    require_protocols(paths)
    command = next((p.command for p in COMMANDS if p.command.workflow == workflow), None)  # type: ignore[attr-defined]
    if command and command.needs and not options.get(command.needs_unless or ""):
        what = f" ({command.needs_what})" if command.needs_what else ""
        require(command.needs, command.install, command.name + what)
    # listed without a cluster: a wrong column fails before one starts
    instance = cls(input_path=args.input, **options)
    inp = DedupInput.of(instance)
    inp.check_columns()
    # the local cluster's scratch and spill directory (--local-directory, else
    # curator.cluster.local-directory) apart from the input, output and cache, as for `run`
    from curator_dask.cluster import ClusterConfig

    cluster = ClusterConfig.from_dask_config()
    connects = cluster.kind in ("address", "scheduler_file") or any(
        getattr(args, k, None) for k in ("scheduler_address", "scheduler_file")
    )
    local = getattr(args, "local_directory", None) or cluster.local_directory
    instance._check_apart(inp, {} if connects else {"local directory": local})

    def input_bytes() -> float | None:
        # the input's estimated size: a small one runs on threads
        from curator_dask.sizing import input_bytes as estimate

        return estimate(inp.reader())

    import dask.config

    # exact and fuzzy dedup spend their time in kernels that release the GIL: threads in
    # this process up to a larger input than a pipeline (their Command's threads_below)
    below = command.threads_below if command else "curator.dedup.threads-below"
    # ... on dask's threaded scheduler: no distributed cluster to start, import or stop
    kw: dict[str, Any] = {"threads_below": below, "local_scheduler": True} if below else {}
    # the result goes to stdout once: the table for a person, or --json for a script
    with (
        client_from_args(args, input_bytes=input_bytes, **kw) as client,
        dask.config.set({"curator.dedup.summary": False}),
        dask.config.set(_unread_metrics(args, client)),
    ):
        result = cls(input_path=args.input, client=client, **options).run()  # type: ignore[call-arg]
    print(json.dumps(result.to_dict(), default=str) if args.json else repr(result))
    read = result.documents + result.quarantined
    where = result.paths.get("quarantine", args.output_path)
    check_quarantine_share(read, result.quarantined, where)
    return 0
