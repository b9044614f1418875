"""The dedup workflows spell the reader's partition size ``blocksize``, as the readers and the
command line do; ``input_blocksize=`` still works, with a DeprecationWarning."""

from __future__ import annotations

import argparse
import dataclasses
import warnings

import pytest

from curator_dask.dedup import (
    ExactDeduplicationWorkflow,
    FuzzyDeduplicationWorkflow,
    SemanticDeduplicationWorkflow,
)
from curator_dask.dedup._runtime import DedupInput
from curator_dask.dedup.cli import register
from curator_dask.io import JsonlReader

WORKFLOWS = [ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow, SemanticDeduplicationWorkflow]
#: The arguments each workflow needs besides its input.
NEEDS: dict[type, dict[str, str]] = {
    ExactDeduplicationWorkflow: {},
    FuzzyDeduplicationWorkflow: {},
    SemanticDeduplicationWorkflow: {"output_path": "out", "cache_path": "cache"},
}


@pytest.mark.parametrize("cls", WORKFLOWS)
def test_one_field_named_blocksize(cls: type) -> None:
    names = [f.name for f in dataclasses.fields(cls)]
    assert "blocksize" in names
    assert "input_blocksize" not in names
    assert "blocksize" in [f.name for f in dataclasses.fields(JsonlReader)]


@pytest.mark.parametrize("cls", WORKFLOWS)
def test_the_old_name_warns_and_sets_blocksize(cls: type) -> None:
    with pytest.deprecated_call(match="input_blocksize"):
        old = cls(input_path="in", input_blocksize="2MB", **NEEDS[cls])
    assert old.blocksize == "2MB"
    new = cls(input_path="in", blocksize="2MB", **NEEDS[cls])
    assert repr(old) == repr(new)  # the same parameters, the same cache keys
    with pytest.deprecated_call():
        assert old.input_blocksize == "2MB"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cls(input_path="in", input_blocksize="2MB", **NEEDS[cls])
    assert seen[0].filename == __file__  # the warning names the caller's line
    with pytest.deprecated_call(), pytest.raises(ValueError, match="not both"):
        cls(input_path="in", blocksize="1MB", input_blocksize="2MB", **NEEDS[cls])


def test_the_reader_gets_the_workflows_blocksize(tmp_path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": "1", "text": "x"}\n')
    wf = ExactDeduplicationWorkflow(str(tmp_path), blocksize="3MB")
    assert DedupInput.of(wf).reader().blocksize == "3MB"


def test_the_command_line_flag_is_the_field() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    register(sub, lambda p: None, lambda *a, **k: None)
    for command in ("exact-dedup", "fuzzy-dedup", "semantic-dedup"):
        args = parser.parse_args(
            [command, "in", "--output", "o", "--cache-dir", "c", "--blocksize", "5MB"]
            if command != "exact-dedup"
            else [command, "in", "--output", "o", "--blocksize", "5MB"]
        )
        assert args.blocksize == "5MB"
        with pytest.raises(SystemExit):
            parser.parse_args([command, "in", "--output", "o", "--input-blocksize", "5MB"])
