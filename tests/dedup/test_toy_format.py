"""A reader format registered in io reaches the dedup workflows and their command unedited.

The toy TSV reader of ``tests/executor/test_toy_reader.py``, with the text and id column
fields every registered reader takes, is registered with :mod:`curator_dask.io.formats` for
the length of a test: exact dedup reads it (format told from the suffixes, or given), its
bad line is quarantined and counted, and ``curator-dask exact-dedup`` chooses it from a
directory or accepts ``--input-format tsv``. Nothing under ``curator_dask/dedup/`` names it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from curator_dask.dedup import ExactDeduplicationWorkflow
from curator_dask.io import QuarantineWarning, formats

_TOY = Path(__file__).parents[1] / "executor" / "test_toy_reader.py"
_spec = importlib.util.spec_from_file_location("_toy_reader", _TOY)
assert _spec is not None
assert _spec.loader is not None
_toy = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("_toy_reader", _toy)  # dataclasses look their module up
_spec.loader.exec_module(_toy)


@dataclass
class TsvReader(_toy.TsvReader):  # type: ignore[name-defined,misc]
    """The toy reader with the arguments a registered reader takes."""

    text_column: str = "text"
    id_column: str = "id"


@pytest.fixture
def tsv_format() -> Iterator[None]:
    formats.register_reader(TsvReader)
    yield
    formats.unregister_reader("tsv")


def _input(src: Path, bad: bool = True) -> list[str]:
    """Two TSV files; ``doc-k`` and ``dup-k`` share a text for even k, across the files;
    with ``bad``, a line without a tab in the first."""
    src.mkdir()
    rows = [f"doc{k:02d}\tsome words number {k}" for k in range(12)]
    rows += [f"dup{k:02d}\tsome words number {k}" for k in range(0, 12, 2)]
    (src / "a.tsv").write_text(
        "\n".join(rows[:10]) + "\n" + ("no tab on this line\n" if bad else "")
    )
    (src / "b.tsv").write_text("\n".join(rows[10:]) + "\n")
    return sorted(f"dup{k:02d}" for k in range(0, 12, 2))


def _removed(out: Path) -> list[str]:
    return sorted(pd.read_parquet(out / "removed_ids")["id"].astype(str))


def test_exact_dedup_reads_a_registered_format(tmp_path: Path, tsv_format: None) -> None:
    expected = _input(tmp_path / "in")
    assert formats.format_of(str(tmp_path / "in" / "a.tsv")) == "tsv"
    with pytest.warns(QuarantineWarning, match="read_tsv: 1 bad record"):
        result = ExactDeduplicationWorkflow(
            input_path=str(tmp_path / "in"),
            output_path=str(tmp_path / "out"),
            perform_removal=True,
        ).run()
    assert (result.documents, result.removed, result.quarantined) == (18, 6, 1)
    assert _removed(tmp_path / "out") == expected
    kept = pd.read_parquet(tmp_path / "out" / "deduplicated")
    assert sorted(kept["id"]) == [f"doc{k:02d}" for k in range(12)]


def test_a_registered_format_is_no_format_once_unregistered(tmp_path: Path) -> None:
    _input(tmp_path / "in")
    with pytest.raises(FileNotFoundError, match="no files of a known format"):
        formats.choose_format([str(tmp_path / "in")])
    with pytest.raises(ValueError, match="input_format must be one of"):
        ExactDeduplicationWorkflow(
            input_path=str(tmp_path / "in"), output_path=str(tmp_path / "o"), input_format="tsv"
        ).run()


def test_the_dedup_command_chooses_and_accepts_a_registered_format(
    tmp_path: Path, tsv_format: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from curator_dask.cli import main

    expected = _input(tmp_path / "in", bad=False)  # (a warning in a worker thread is
    # an error under pytest; the quarantine is the test above's)
    # told from the suffixes in the directory
    args = ["exact-dedup", str(tmp_path / "in"), "--output", str(tmp_path / "o1"), "--json", "-q"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["documents"], first["removed"], first["quarantined"]) == (18, 6, 0)
    assert _removed(tmp_path / "o1") == expected
    # a name that says nothing, with the format given
    odd = tmp_path / "odd"
    odd.mkdir()
    for name in ("a", "b"):
        (odd / f"{name}.txt").write_bytes((tmp_path / "in" / f"{name}.tsv").read_bytes())
    files = [str(odd / "a.txt"), str(odd / "b.txt")]
    args = ["exact-dedup", *files, "--output", str(tmp_path / "o2"), "--json", "-q"]
    assert main([*args, "--input-format", "tsv"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert (second["documents"], second["removed"]) == (18, 6)
    assert _removed(tmp_path / "o2") == expected
