"""A new dedup method gets its ``curator-dask`` subcommand from its parameters alone:
``dedup/cli.py`` names no method (docs/architecture.md, "files to touch")."""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from curator_dask.dedup import _params
from curator_dask.dedup._params import Command
from curator_dask.dedup.cli import register

CLI = Path(__file__).resolve().parents[2] / "curator_dask" / "dedup" / "cli.py"


@dataclass
class ToyParams:
    """Parameters of a toy method.

    Parameters
    ----------
    input_path : str
        The input.
    output_path : str
        Where the result goes.
    shingle : int
        Shingle length.
    mode : str
        How to compare.
    """

    command: ClassVar[Command] = Command(
        "toy-dedup", "curator_dask.dedup.exact:ExactDeduplicationWorkflow", "a toy method",
        choices={"mode": ("a", "b")},
    )  # fmt: skip
    input_path: str | None = None
    output_path: str = "out"
    shingle: int = 3
    mode: str = "a"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(), lambda p: None, lambda *a, **k: None)
    return parser


def test_a_method_added_to_the_table_gets_its_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_params, "COMMANDS", [*_params.COMMANDS, ToyParams])
    monkeypatch.setattr("curator_dask.dedup.cli.COMMANDS", _params.COMMANDS)
    args = _parser().parse_args(["toy-dedup", "in", "--output", "o", "--shingle", "5"])
    assert (args.input, args.output_path, args.shingle, args.mode) == (["in"], "o", 5, None)
    with pytest.raises(SystemExit):  # the choices of its Command
        _parser().parse_args(["toy-dedup", "in", "--output", "o", "--mode", "c"])
    with pytest.raises(SystemExit):  # output_path is required by default
        _parser().parse_args(["toy-dedup", "in"])


def test_the_cli_module_names_no_method() -> None:
    names = {
        node.value
        for node in ast.walk(ast.parse(CLI.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    named = {n for n in names if n.endswith("-dedup") or "DeduplicationWorkflow" in n}
    assert named == set()
    assert [p.command.name for p in _params.COMMANDS] == [  # type: ignore[attr-defined]
        "exact-dedup",
        "fuzzy-dedup",
        "semantic-dedup",
    ]
