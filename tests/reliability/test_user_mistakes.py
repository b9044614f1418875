"""A user's mistakes fail fast: a wrong column name is an error before any work (exit 2, the
columns found named), and a run that quarantines what it read does not pass for a success.

The command-line cases run ``curator-dask`` as a subprocess, as a user does. A scheduler
address where nothing listens shows that no cluster was asked for: had the command tried,
it would fail on the connection (exit 1), not on the column (exit 2).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from _audit import cli

from curator_dask.errors import ColumnError


def _docs(folder: Path, n: int = 12, bad: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": f"d{i}", "text": f"words {i}", "url": "u"}) for i in range(n)]
    lines += [json.dumps({"id": f"b{i}", "text": i}) for i in range(bad)]
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def _nowhere() -> list[str]:
    return ["--scheduler-address", _closed_port(), "--connect-timeout", "1s"]


def _column_error(proc: Any, *needles: str) -> None:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("curator-dask:")]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("exact-dedup", []),
        ("fuzzy-dedup", ["--cache-dir", "cache"]),
        ("semantic-dedup", ["--cache-dir", "cache"]),
    ],
)
@pytest.mark.parametrize(
    ("flag", "kind"), [("--text-column", "text column 'content'"), ("--id-column", "id column")]
)
def test_dedup_wrong_column_exits_2_before_a_cluster(
    tmp_path: Path, command: str, extra: list[str], flag: str, kind: str
) -> None:
    _docs(tmp_path / "data")
    args = [command, "data", "--output", "out", *extra, flag, "content", *_nowhere()]
    proc = cli(args, cwd=tmp_path)
    _column_error(proc, kind, "columns found: id, text, url", "a.jsonl")
    assert not (tmp_path / "out").exists()


def test_pipeline_file_wrong_column_exits_2_before_a_cluster(tmp_path: Path) -> None:
    _docs(tmp_path / "data")
    spec = {
        "reader": {"class": "JsonlReader", "params": {"paths": "data", "text_column": "content"}},
        "stages": ["WordCountFilter"],
        "writer": {"class": "JsonlWriter", "params": {"path": "out"}},
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(spec))
    proc = cli(["run", "p.yaml", *_nowhere()], cwd=tmp_path)
    _column_error(proc, "text column 'content'", "columns found: id, text, url")
    assert not (tmp_path / "out").exists()


def test_library_wrong_columns_raise_before_any_work(tmp_path: Path) -> None:
    from curator_dask import Pipeline
    from curator_dask.dedup import ExactDeduplicationWorkflow
    from curator_dask.executor import SequentialExecutor
    from curator_dask.io import JsonlReader, JsonlWriter, ParquetReader, read_jsonl, read_parquet

    data = _docs(tmp_path / "data")
    pq_dir = tmp_path / "pq"
    pq_dir.mkdir()
    pd.read_json(data / "a.jsonl", lines=True).to_parquet(pq_dir / "a.parquet")
    with pytest.raises(ColumnError, match=r"text column 'content'.*columns found: id, text, url"):
        read_jsonl(str(data), text_column="content")
    with pytest.raises(ColumnError, match=r"text column 'content'.*columns found: id, text, url"):
        read_parquet(str(pq_dir), text_column="content")
    with pytest.raises(ColumnError, match=r"id column 'doc'.*columns found: id, text, url"):
        ParquetReader(str(pq_dir), id_column="doc").check_columns()
    # the default id column may be absent (ids are generated), a named one may not
    JsonlReader(str(data), id_column="id").check_columns()
    pipeline = Pipeline("p")
    pipeline.add_stage(JsonlReader(str(data), text_column="content"))
    pipeline.add_stage(JsonlWriter(str(tmp_path / "out")))
    with pytest.raises(ColumnError, match="columns found"):
        pipeline.run(SequentialExecutor())
    assert not (tmp_path / "out").exists()
    flow = ExactDeduplicationWorkflow(
        input_path=str(data), output_path=str(tmp_path / "e"), id_column="doc"
    )
    with pytest.raises(ColumnError, match=r"id column 'doc'"):
        flow.run()


def test_right_columns_still_run(tmp_path: Path) -> None:
    _docs(tmp_path / "data", n=12, bad=3)
    proc = cli(["exact-dedup", "data", "--output", "out", "-q"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("command", ["exact-dedup", "run"])
def test_all_quarantined_exits_1(tmp_path: Path, command: str) -> None:
    _docs(tmp_path / "data", n=0, bad=4)
    if command == "run":
        spec = {
            "reader": {"class": "JsonlReader", "params": {"paths": "data"}},
            "writer": {"class": "JsonlWriter", "params": {"path": "out"}},
        }
        (tmp_path / "p.yaml").write_text(yaml.safe_dump(spec))
        args = ["run", "p.yaml", "--sequential"]
    else:
        args = ["exact-dedup", "data", "--output", "out"]
    proc = cli(args, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "4 of the 4 records read were quarantined" in last, proc.stderr
    assert "max-quarantined-fraction" in last
    assert "_quarantine" in last


def test_quarantine_share_is_configurable(tmp_path: Path) -> None:
    _docs(tmp_path / "data", n=3, bad=3)
    spec: dict[str, Any] = {
        "reader": {"class": "JsonlReader", "params": {"paths": "data"}},
        "writer": {"class": "JsonlWriter", "params": {"path": "out"}},
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(spec))
    assert cli(["run", "p.yaml", "--sequential", "-q"], cwd=tmp_path).returncode == 0
    spec["config"] = {"curator.io.max-quarantined-fraction": 0.5}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(spec))
    proc = cli(["run", "p.yaml", "--sequential", "-q"], cwd=tmp_path)
    assert proc.returncode == 1
    assert "3 of the 6 records read were quarantined (50%" in proc.stderr


def test_a_first_file_of_broken_records_is_not_a_wrong_column(tmp_path: Path) -> None:
    """The columns are judged on the files that have the text column, when one of the first
    files has it: a first file of broken records is quarantine, not a usage error."""
    from curator_dask.io import ParquetReader, read_jsonl

    src = _docs(tmp_path / "in")
    (src / "0-broken.jsonl").write_text('{"id": "x", "text": \n{"id": "y"}\n')
    from curator_dask.io import QuarantineWarning

    df = read_jsonl(str(src), quarantine_path=str(tmp_path / "q"))
    with pytest.warns(QuarantineWarning, match="2 bad record"):
        kept = df.compute()
    assert len(kept) == 12
    pq_dir = tmp_path / "pq"
    pq_dir.mkdir()
    pd.DataFrame({"id": ["z"], "body": ["b"]}).to_parquet(pq_dir / "0.parquet")
    pd.read_json(src / "a.jsonl", lines=True).to_parquet(pq_dir / "a.parquet")
    ParquetReader(str(pq_dir)).check_columns()


# -- errors that say what to do ----------------------------------------------------------------
def _usage_error(proc: Any, *needles: str) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("curator-dask")]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    text = "\n".join(lines)
    for needle in needles:
        assert needle in text, text
    return text


def test_a_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "reader:\n  class: JsonlReader\n   params: {paths: data}\nwriter: JsonlWriter\n"
    )
    proc = cli(["run", "p.yaml"], cwd=tmp_path)
    _usage_error(proc, "p.yaml: line 3, column 10: not valid YAML: mapping values")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (
            {"reader": {"class": "JsonlReadr"}},
            "unknown class 'JsonlReadr'; did you mean 'JsonlReader'?",
        ),
        ({"stages": [{"class": "WordCountFiltr"}]}, "did you mean 'WordCountFilter'?"),
        (
            {"stages": [{"class": "WordCountFilter", "params": {"min_word": 3}}]},
            "no parameter 'min_word'; did you mean 'min_words'?",
        ),
        ({"stagez": []}, "stagez: unknown key; did you mean 'stages'?"),
        (
            {"cluster": {"n_worker": 2}},
            "cluster.n_worker: unknown setting; did you mean 'n_workers'?",
        ),
        (
            {"config": {"curator.io.blocksiz": "1MB"}},
            "unknown setting; did you mean 'curator.io.blocksize'?",
        ),
    ],
)
def test_a_mistyped_name_gets_a_suggestion(
    tmp_path: Path, spec: dict[str, Any], needle: str
) -> None:
    _docs(tmp_path / "data")
    data: dict[str, Any] = {
        "reader": {"class": "JsonlReader", "params": {"paths": "data"}},
        "writer": {"class": "JsonlWriter", "params": {"path": "out"}},
    }
    for key, value in spec.items():
        if key == "reader":
            data["reader"] = {**data["reader"], **value}
        else:
            data[key] = value
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    _usage_error(cli(["run", "p.yaml", "--dry-run"], cwd=tmp_path), needle)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("{bad", "argument --storage-options: not valid JSON (Expecting property name"),
        ("[1]", "argument --storage-options: expected a JSON object"),
    ],
)
def test_a_bad_json_option_names_the_option(tmp_path: Path, value: str, needle: str) -> None:
    _docs(tmp_path / "data")
    proc = cli(["exact-dedup", "data", "--output", "o", "--storage-options", value], cwd=tmp_path)
    assert proc.returncode == 2
    assert needle in proc.stderr, proc.stderr
    assert "invalid loads value" not in proc.stderr


_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # as if the package were not installed
from curator_dask.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(
    ("missing", "args", "needle"),
    [
        (
            "prometheus_client",
            ["exact-dedup", "data", "--output", "o", "--metrics-port", "0"],
            "--metrics-port needs prometheus_client, which is not installed: "
            "pip install 'curator_dask[monitoring]'",
        ),
        (
            "s3fs",
            ["exact-dedup", "s3://bucket/in", "--output", "o"],
            "s3:// (s3://bucket/in) needs s3fs, which is not installed: "
            "pip install 'curator_dask[s3]'",
        ),
        (
            "s3fs",
            ["run", "s3.yaml"],
            "needs s3fs, which is not installed: pip install 'curator_dask[s3]'",
        ),
        (
            "torch",
            ["semantic-dedup", "data", "--output", "o", "--cache-dir", "c"],
            "semantic-dedup (embeddings) needs torch, which is not installed: "
            "pip install 'curator_dask[models]'",
        ),
    ],
)
def test_a_missing_extra_is_named_with_its_install_line_before_a_cluster(
    tmp_path: Path, missing: str, args: list[str], needle: str
) -> None:
    import subprocess
    import sys

    from _audit import ROOT

    _docs(tmp_path / "data")
    spec = {
        "reader": {"class": "JsonlReader", "params": {"paths": "s3://bucket/in"}},
        "writer": {"class": "JsonlWriter", "params": {"path": "out"}},
    }
    (tmp_path / "s3.yaml").write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT, missing, *args, *_nowhere()],
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    _usage_error(proc, needle)
    assert not (tmp_path / "o").exists()


def test_explicit_workers_are_started_as_asked() -> None:
    import argparse

    import dask.config

    from curator_dask.cli.cluster_args import cluster_config_from_args

    with dask.config.set({"curator.cluster.processes": "auto"}):
        asked = cluster_config_from_args(argparse.Namespace(n_workers=2))
        nothing = cluster_config_from_args(argparse.Namespace())
    assert (asked.processes, asked.n_workers) == (True, 2)
    assert nothing.processes == "auto"
    assert asked.for_input(1000).processes is True
    assert nothing.for_input(1000).processes is False


@pytest.mark.parametrize("command", ["run", "exact-dedup", "fuzzy-dedup", "semantic-dedup"])
def test_every_option_says_its_default_once(command: str) -> None:
    from curator_dask.cli import build_parser
    from curator_dask.cli.console import HelpFormatter

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    formatter = HelpFormatter(command)
    for action in sub._actions:
        if not action.option_strings or action.dest in ("help", "verbose", "quiet"):
            continue
        if action.required:  # no default to say
            continue
        text = formatter._get_help_string(action)
        said = text.count("(default:") + text.startswith("default:")
        assert said == 1, (action.dest, text)


# -- one voice on the terminal -----------------------------------------------------------------
_LINE = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[curator-dask\] "


@pytest.mark.parametrize("command", ["run", "exact-dedup", "fuzzy-dedup"])
def test_every_command_speaks_one_format_and_prints_its_result_once(
    tmp_path: Path, command: str
) -> None:
    """Progress, notices and curator_dask's warnings are ``<time> [curator-dask] ...`` lines
    on stderr (a bad record's QuarantineWarning included, no Python warning dump); stdout
    holds the result once, as a table or, with ``--json``, one JSON object."""
    import re

    _docs(tmp_path / "data", n=30, bad=2)
    spec = {
        "reader": {"class": "JsonlReader", "params": {"paths": "data"}},
        "stages": ["WordCountFilter"],
        "writer": {"class": "JsonlWriter", "params": {"path": "out"}},
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(spec))
    args = {
        "run": ["run", "p.yaml"],
        "exact-dedup": ["exact-dedup", "data", "--output", "out"],
        "fuzzy-dedup": ["fuzzy-dedup", "data", "--output", "out", "--cache-dir", "c"],
    }[command]
    proc = cli(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines
    odd = [ln for ln in lines if not re.match(_LINE, ln)]
    assert not odd, proc.stderr
    assert "Warning:" not in proc.stderr  # no `file:line: QuarantineWarning:` dump
    if command == "run":
        assert proc.stdout.count("read 32 = kept") == 1, proc.stdout
        return
    assert proc.stdout.count("documents read") == 1, proc.stdout
    assert "DedupResult" not in proc.stderr
    quiet = cli([*args, "--json", "-qq"], cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    result = json.loads(quiet.stdout)  # the whole of stdout is one JSON object
    assert (result["documents"], result["quarantined"]) == (30, 2)
    assert quiet.stderr == ""


def test_worker_processes_say_warnings_in_the_same_voice(tmp_path: Path) -> None:
    """A bad record read in a worker process (workers asked for: processes) is one
    ``<time> [curator-dask] warning: ...`` line, not Python's warning dump from a dask file."""
    import re

    _docs(tmp_path / "data", n=30, bad=2)
    proc = cli(["exact-dedup", "data", "--output", "out", "--n-workers", "1"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert not [ln for ln in lines if not re.match(_LINE, ln)], proc.stderr
    assert any("warning: read_jsonl: 2 bad record(s)" in ln for ln in lines), proc.stderr
