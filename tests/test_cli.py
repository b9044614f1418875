"""The ``curator-dask`` command: pipeline files, their errors, cluster flags, subcommands."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from curator_dask import Filter, Modifier
from curator_dask.cli import main
from curator_dask.cli.cluster_args import add_cluster_args, cluster_config_from_args
from curator_dask.cli.pipeline_file import run_config_from_dict
from curator_dask.cluster import ClusterConfig
from curator_dask.errors import ConfigError


@dataclass(kw_only=True)
class MinWords(Filter):
    min_words: int = 3

    def keep(self, text: pd.Series) -> pd.Series:
        return text.str.split().str.len() >= self.min_words


@dataclass(kw_only=True)
class Upper(Modifier):
    def modify(self, text: pd.Series) -> pd.Series:
        return text.str.upper()


MODULE = Path(__file__).stem  # importable: pytest puts tests/ on sys.path


@dataclass(kw_only=True)
class FailsOnD(Filter):
    """Raises on the partition that holds a document starting with "d"."""

    def keep(self, text: pd.Series) -> pd.Series:
        if text.str.startswith("d").any():
            raise ValueError("a stage that fails")
        return text.str.len() > 0


def write_inputs(tmp_path: Path, records: list[dict], n_files: int = 3) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    per = -(-len(records) // n_files)
    for i in range(n_files):
        with open(src / f"shard-{i}.jsonl", "w") as f:
            for rec in records[i * per : (i + 1) * per]:
                f.write(json.dumps(rec) + "\n")
    return src


def pipeline_dict(src: Path, out: Path, min_words: Any = 50) -> dict[str, Any]:
    return {
        "name": "cli-test",
        "reader": {"class": "JsonlReader", "params": {"paths": str(src), "files_per_partition": 1}},
        "stages": [
            {"class": f"{MODULE}:Upper"},
            {
                "class": f"{MODULE}:MinWords",
                "params": {"min_words": min_words},
                "resources": {"cpus": 1},
            },
        ],
        "writer": {"class": "JsonlWriter", "params": {"path": str(out)}},
    }


@pytest.fixture
def records(sample_records: list[dict]) -> list[dict]:
    return sample_records[:300]


def expected_ids(records: list[dict], min_words: int) -> list[str]:
    return [r["id"] for r in records if len(r["text"].upper().split()) >= min_words]


def output_ids(out: Path) -> list[str]:
    ids = []
    for f in sorted(out.glob("part-*.jsonl")):
        ids += [json.loads(line)["id"] for line in f.read_text().splitlines() if line]
    return ids


# -- config errors name the key ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        (
            lambda d: d["stages"][1]["params"].update(min_words="many"),
            "stages[1].params.min_words",
            "expected int, got 'many'",
        ),
        (
            lambda d: d["stages"][1]["params"].update(min_wrods=3),
            "stages[1].params.min_wrods",
            "has no parameter 'min_wrods'",
        ),
        (
            lambda d: d["stages"][0].update({"class": "NoSuchStage"}),
            "stages[0].class",
            "unknown class 'NoSuchStage'",
        ),
        (
            lambda d: d["stages"][0].update({"class": "no_such_module:X"}),
            "stages[0].class",
            "cannot import module",
        ),
        (
            lambda d: d["stages"][1].update(resources={"gpus": -1}),
            "stages[1].resources.gpus",
            "must be a number >= 0",
        ),
        (
            lambda d: d["stages"][1].update(resources={"tpus": 1}),
            "stages[1].resources.tpus",
            "unknown key",
        ),
        (lambda d: d["stages"][1].update(extra=1), "stages[1].extra", "unknown key"),
        (lambda d: d.pop("reader"), "reader", "required"),
        (lambda d: d["reader"].update(params={}), "reader.params.paths", "required"),
        (
            lambda d: d["reader"].update({"class": f"{MODULE}:Upper"}),
            "reader.class",
            "not a Reader",
        ),
        (
            lambda d: d["writer"]["params"].update(mode="sometimes"),
            "writer.params.mode",
            "mode must be one of",
        ),
        (lambda d: d.update(execution={"mode": "eager"}), "execution.mode", "expected"),
        (lambda d: d.update(cluster={"n_wrokers": 2}), "cluster.n_wrokers", "unknown setting"),
        (lambda d: d.update(stagse=[]), "stagse", "unknown key"),
        (lambda d: d.update(stages={"a": 1}), "stages", "expected a list"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, change: Any, key: str, message: str) -> None:
    data = pipeline_dict(tmp_path, tmp_path / "out")
    change(data)
    with pytest.raises(ConfigError, match=message) as info:
        run_config_from_dict(data)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")


def test_run_config_reads_every_section(tmp_path: Path) -> None:
    data = pipeline_dict(tmp_path, tmp_path / "out", min_words=7)
    data["stages"][1]["resources"] = {"gpus": 0.5}
    data["stages"][1]["name"] = "long_enough"
    data.update(
        execution={"mode": "batch", "max_in_flight": 3},
        cluster={"n_workers": 2, "threads-per-worker": 1},
        config={"curator.io.blocksize": "1MB"},
    )
    run = run_config_from_dict(data)
    stage = run.pipeline.stages[1]
    assert (stage.min_words, stage.resources.gpus, stage.stage_name) == (7, 0.5, "long_enough")
    assert (run.execution_mode, run.max_in_flight) == ("batch", 3)
    assert (run.cluster.n_workers, run.cluster.threads_per_worker) == (2, 1)
    assert run.dask_config == {"curator.io.blocksize": "1MB"}


def test_cli_reports_config_errors_with_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cfg = tmp_path / "p.yaml"
    cfg.write_text(yaml.safe_dump(pipeline_dict(tmp_path, tmp_path / "out", min_words="x")))
    assert main(["run", str(cfg), "--sequential"]) == 2
    err = capsys.readouterr().err
    assert f"{cfg}: stages[1].params.min_words: expected int, got 'x'" in err


# -- cluster flags ---------------------------------------------------------------------------
def test_cluster_flags_override_the_file_and_config() -> None:
    parser = add_cluster_args(argparse.ArgumentParser())
    base = ClusterConfig(n_workers=4, threads_per_worker=2, memory_limit="2GB")
    args = parser.parse_args(["--n-workers", "1", "--local-directory", "/scratch"])
    cfg = cluster_config_from_args(args, base)
    assert (cfg.kind, cfg.n_workers, cfg.threads_per_worker) == ("cpu", 1, 2)
    assert (cfg.memory_limit, cfg.local_directory) == ("2GB", "/scratch")
    cfg = cluster_config_from_args(parser.parse_args(["--scheduler-file", "s.json"]), base)
    assert (cfg.kind, cfg.scheduler_file) == ("scheduler_file", "s.json")
    cfg = cluster_config_from_args(parser.parse_args(["--gpu"]))
    assert cfg.kind == "gpu"
    both = parser.parse_args(["--scheduler-file", "s.json", "--scheduler-address", "tcp://x:1"])
    with pytest.raises(ConfigError, match="--scheduler-address"):
        cluster_config_from_args(both)


def test_subcommand_modules_register(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    module = types.ModuleType("fake_curator_subcommand")

    def register(subparsers: Any, add_args: Any, client_from_args: Any) -> None:
        p = subparsers.add_parser("hello")
        add_args(p)
        p.set_defaults(func=lambda args: seen.update(n=args.n_workers) or 0)

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr("curator_dask.cli.SUBCOMMAND_MODULES", [module.__name__])
    assert main(["hello", "--n-workers", "3"]) == 0
    assert seen == {"n": 3}
    assert main([]) == 2


# -- end to end --------------------------------------------------------------------------------
def test_run_end_to_end_sequential(
    tmp_path: Path, records: list[dict], capsys: pytest.CaptureFixture
) -> None:
    src = write_inputs(tmp_path, records)
    with open(src / "shard-1.jsonl", "a") as f:
        f.write('{"id": "broken", "text": \n')  # one malformed line: quarantined
    out = tmp_path / "out"
    cfg = tmp_path / "p.yaml"
    cfg.write_text(yaml.safe_dump(pipeline_dict(src, out)))
    assert main(["run", str(cfg), "--sequential"]) == 0
    printed = capsys.readouterr()
    assert f"output: {out}" in printed.out
    assert "lazy: nothing runs until run()" in printed.err  # the pipeline is shown first
    assert output_ids(out) == expected_ids(records, 50)
    stats = json.loads((Path(str(out) + ".curator") / "_stats.json").read_text())
    assert (stats["read"], stats["quarantined"]) == (len(records) + 1, 1)
    assert stats["kept"] == len(expected_ids(records, 50))
    assert stats["partitions"] == 3
    assert (Path(str(out) + ".curator") / "_quarantine" / "part-00001.jsonl").exists()
    assert (Path(str(out) + ".curator") / "_SUCCESS").exists()


def test_run_dry_run_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cfg = tmp_path / "p.yaml"
    cfg.write_text(yaml.safe_dump(pipeline_dict(tmp_path, tmp_path / "out")))
    assert main(["run", str(cfg), "--dry-run"]) == 0
    assert "MinWords [cpus=1]" in capsys.readouterr().out  # what was asked for: stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_run_end_to_end_on_a_local_cluster(
    tmp_path: Path, records: list[dict], capsys: pytest.CaptureFixture
) -> None:
    src = write_inputs(tmp_path, records)
    out = tmp_path / "out"
    data = pipeline_dict(src, out, min_words=20)
    data["execution"] = {"mode": "batch"}
    # Worker processes, as for a large input (this one would get threads: see the next test).
    data["cluster"] = {"processes": True}
    cfg = tmp_path / "p.yaml"
    cfg.write_text(yaml.safe_dump(data))
    args = [
        "run",
        str(cfg),
        "--n-workers",
        "1",
        "--threads-per-worker",
        "2",
        "--local-directory",
        str(tmp_path / "scratch"),
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "batch" in captured.out
    assert "in this process" not in captured.err
    assert output_ids(out) == expected_ids(records, 20)
    assert (
        json.loads((Path(str(out) + ".curator") / "_stats.json").read_text())["execution_mode"]
        == "batch"
    )


def test_a_small_input_runs_on_threads_in_the_cli_process(
    tmp_path: Path, records: list[dict], capsys: pytest.CaptureFixture
) -> None:
    src = write_inputs(tmp_path, records)
    out = tmp_path / "out"
    cfg = tmp_path / "p.yaml"
    cfg.write_text(yaml.safe_dump(pipeline_dict(src, out, min_words=20)))
    import dask.config

    # workers not asked for on the command line: the configured 2 become 2 threads here
    two = {"curator.cluster.n-workers": 2, "curator.cluster.threads-per-worker": 1}
    with dask.config.set(two):
        assert main(["run", str(cfg)]) == 0
    err = capsys.readouterr().err
    assert "below curator.cluster.threads-below (64MiB)" in err
    assert "1 worker of 2 threads in this process" in err
    assert output_ids(out) == expected_ids(records, 20)
    # asked for: started as asked
    assert main(["run", str(cfg), "--n-workers", "2", "--threads-per-worker", "1"]) == 0
    assert "in this process" not in capsys.readouterr().err
    assert output_ids(out) == expected_ids(records, 20)


def test_a_failed_partition_is_one_error_in_one_line_that_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # the executor logged "partition N failed" as an error of its own before main()'s line
    src = tmp_path / "in"
    src.mkdir()
    for i, word in enumerate("abcd"):
        (src / f"{i}.jsonl").write_text(json.dumps({"id": word, "text": word * 3}) + "\n")
    spec = pipeline_dict(src, tmp_path / "out")
    spec["stages"] = [{"class": f"{MODULE}:FailsOnD"}]
    cfg = tmp_path / "p.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    assert main(["run", str(cfg)]) == 1
    err = capsys.readouterr().err.splitlines()
    errors = [line for line in err if "error" in line.lower()]
    assert errors == ["curator-dask: error: ValueError: a stage that fails (in partition 3)"], err


@pytest.mark.parametrize("command", ["run", "exact-dedup"])
def test_a_local_directory_that_overlaps_the_output_is_refused(
    tmp_path: Path, records: list[dict], capsys: pytest.CaptureFixture, command: str
) -> None:
    # the workers' scratch and spill directory follows io's overlap rule as the output, the
    # cache and the quarantine do, for pipelines and dedup commands alike
    src = write_inputs(tmp_path, records[:30])
    out = tmp_path / "out"
    cfg = tmp_path / "p.yaml"
    cfg.write_text(yaml.safe_dump(pipeline_dict(src, out, min_words=1)))
    argv = ["run", str(cfg)] if command == "run" else [command, str(src), "--output", str(out)]
    for local, what in ((out / "scratch", "output"), (src / "tmp", "input")):
        assert main([*argv, "--local-directory", str(local), "-q"]) == 1
        err = capsys.readouterr().err
        line = err.splitlines()[0]
        assert "overlaps" in line, err
        assert f"local directory {local}" in line, err
        assert f"{what} " in line, err
        assert not out.exists()  # refused before anything is written
        assert not local.exists()
    assert main([*argv, "--local-directory", str(tmp_path / "scratch"), "-q"]) == 0


def test_a_small_dedup_input_runs_on_threads_and_removes_the_same_documents(
    tmp_path: Path, records: list[dict], capsys: pytest.CaptureFixture
) -> None:
    import dask.config
    import pyarrow.dataset as ds

    src = write_inputs(tmp_path, records)
    removed = {}
    for processes in ("auto", True):
        out, cache = tmp_path / f"out-{processes}", tmp_path / f"cache-{processes}"
        args = ["fuzzy-dedup", str(src), "--output", str(out), "--cache-dir", str(cache)]
        two = {"curator.cluster.n-workers": 2, "curator.cluster.threads-per-worker": 1}
        with dask.config.set({"curator.cluster.processes": processes, **two}):
            assert main(args) == 0
        err = capsys.readouterr().err
        on_threads = "dask's local scheduler of 2 threads in this process" in err
        assert on_threads == (processes == "auto"), err[-2000:]
        table = ds.dataset(out / "removed_ids", format="parquet").to_table()
        removed[processes] = sorted(table.column("id").to_pylist())
    assert removed["auto"]  # the sample holds near-duplicates
    assert removed["auto"] == removed[True]


def test_a_dedup_input_above_the_pipeline_threshold_runs_on_threads_below_the_dedup_one(
    tmp_path: Path, records: list[dict], capsys: pytest.CaptureFixture
) -> None:
    import dask.config

    src = write_inputs(tmp_path, records)
    args = ["fuzzy-dedup", str(src), "--output", str(tmp_path / "o"), "--cache-dir"]
    two = {"curator.cluster.n-workers": 2, "curator.cluster.threads-per-worker": 1}
    # above what a pipeline runs on threads, below the dedup commands' own threshold
    small = {"curator.cluster.threads-below": "1B", "curator.dedup.threads-below": "1GiB"}
    with dask.config.set({**two, **small}):
        assert main([*args, str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert "below curator.dedup.threads-below (1GiB)" in err, err[-2000:]
    assert "dask's local scheduler of 2 threads in this process" in err
    # the dedup threshold unset: the pipeline's applies
    with dask.config.set({**two, **small, "curator.dedup.threads-below": None}):
        assert main([*args, str(tmp_path / "c2")]) == 0
    assert "in this process" not in capsys.readouterr().err


def test_a_command_run_imports_no_scipy_for_dask_or_numba_yet_scipy_imports(
    tmp_path: Path, records: list[dict]
) -> None:
    """dask's and numba's optional SciPy imports are skipped on a command run (~0.7 CPU-s);
    the same removed set; a later import of SciPy works, and numba still has BLAS for np.dot.
    (A run that loads its kernels from numba's cache does not import numba's registries at
    all: their set-up, which asks for SciPy's BLAS, is called here under the same finder.)
    """
    pytest.importorskip("scipy")
    src = write_inputs(tmp_path, records)
    code = f"""
import sys
import numba, numpy as np
from curator_dask.cli import main
from curator_dask._optional_scipy import defer_optional_scipy
assert main(["fuzzy-dedup", {str(src)!r}, "--output", {str(tmp_path / "o")!r},
             "--cache-dir", {str(tmp_path / "c")!r}, "-q"]) == 0
assert "dask.dataframe" in sys.modules
undo = defer_optional_scipy()
from numba.core.registry import cpu_target
cpu_target.target_context.refresh()  # numba's registries, as a compile sets them up
undo()
assert "numba.np.arraymath" in sys.modules
print([m for m in ("scipy.sparse", "scipy.linalg", "scipy.fft") if m in sys.modules])
import scipy.sparse
dot = numba.njit(lambda a, b: np.dot(a, b))
print(scipy.sparse.csr_matrix(np.eye(2)).sum(), dot(np.ones(3), np.ones(3)))
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    # the dask path, which imports dask.dataframe (a small input runs in memory without it)
    env["DASK_CURATOR__DEDUP__IN_MEMORY_BELOW"] = "None"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["[]", "2.0 3.0"], done.stdout[-2000:]
    from curator_dask._optional_scipy import _DeferScipy

    assert not any(isinstance(f, _DeferScipy) for f in sys.meta_path)


def test_bare_class_names_resolve_to_package_stages(tmp_path: Path) -> None:
    from curator_dask.filters import WordCountFilter
    from curator_dask.modifiers import UnicodeNormalizer

    data = pipeline_dict(tmp_path, tmp_path / "out")
    data["stages"] = [
        "UnicodeNormalizer",
        {"class": "WordCountFilter", "params": {"min_words": 10}},
    ]
    run = run_config_from_dict(data)
    first, second = run.pipeline.stages
    assert isinstance(first, UnicodeNormalizer)
    assert isinstance(second, WordCountFilter)
    assert second.min_words == 10
    data["stages"][1]["params"]["min_words"] = 2.5
    with pytest.raises(ConfigError, match=r"stages\[1\]\.params\.min_words: expected int"):
        run_config_from_dict(data)


# -- conventions: version, help, logging, progress ----------------------------------------------
def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    here = Path(__file__).resolve().parent  # this module's stages are in the pipeline file
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent), str(here)])}
    return subprocess.run(
        [sys.executable, "-m", "curator_dask.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def test_version_names_the_libraries(capsys: pytest.CaptureFixture) -> None:
    import dask

    import curator_dask

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"curator-dask {curator_dask.__version__} (")
    assert f"dask {dask.__version__}" in out


HEAVY = ("dask.dataframe", "distributed", "pandas", "pyarrow", "numba", "curator_dask.dedup.exact")


@pytest.mark.parametrize("args", [["--help"], ["fuzzy-dedup", "--help"], ["run"]])
def test_help_and_argument_errors_import_nothing_heavy(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from curator_dask.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr


def test_every_subcommand_help_is_for_users() -> None:
    from curator_dask.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"run", "exact-dedup", "fuzzy-dedup", "report", "monitor", "demo"} <= set(sub.choices)
    for name, subparser in sub.choices.items():
        text = subparser.format_help()
        for developer_markup in (":func:", ":class:", "SUBCOMMAND_MODULES", "register("):
            assert developer_markup not in text, (name, developer_markup)
        for action in subparser._actions:
            if not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
                continue
            if isinstance(action, (argparse._HelpAction, argparse._CountAction)):
                continue
            flat = " ".join(text.split())
            said = f"default: {action.default})" in flat or "default:" in (action.help or "")
            assert said, (name, action.dest)
    fuzzy = " ".join(sub.choices["fuzzy-dedup"].format_help().split())
    for expected in ("(default: 0.8)", "--metrics-port", "-v, --verbose", "--log-file"):
        assert expected in fuzzy


def test_quiet_hides_progress_and_log_file_keeps_it(tmp_path: Path, records: list[dict]) -> None:
    src = write_inputs(tmp_path, records)
    cfg = tmp_path / "p.yaml"
    cfg.write_text(yaml.safe_dump(pipeline_dict(src, tmp_path / "out")))
    loud = _cli("run", str(cfg), "--sequential", "--log-file", str(tmp_path / "run.log"))
    assert loud.returncode == 0, loud.stderr
    lines = [ln for ln in loud.stderr.splitlines() if "[curator-dask]" in ln and "partitions" in ln]
    assert lines
    assert "3/3 partitions (100%)" in lines[-1]
    assert "ETA" in lines[-1]
    assert lines[-1][:4].isdigit()  # a timestamp first: stderr is not a terminal here
    assert "3/3 partitions (100%)" in (tmp_path / "run.log").read_text()
    quiet = _cli("-q", "run", str(cfg), "--sequential")
    assert quiet.returncode == 0, quiet.stderr
    assert "partitions" not in quiet.stderr
    assert "read" in quiet.stdout  # the summary still comes


def test_progress_draws_a_bar_on_a_terminal() -> None:
    from curator_dask.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    progress = Progress("p", 4, stream=stream)
    for _ in range(4):
        progress.update()
    text = stream.getvalue()
    assert text.startswith("\r[")
    assert text.endswith("\n")
    assert "4/4 partitions (100%)" in text
    assert "ETA 00:00" in text
    plain = io.StringIO()
    progress = Progress("p", 4, stream=plain, interval=0)
    progress.update()
    line = plain.getvalue()
    assert line[:4].isdigit()  # a timestamp
    assert "1/4 partitions (25%)" in line
    assert "ETA" in line


def test_hash_methods_written_out_in_the_cli_match_the_workflow() -> None:
    from curator_dask.dedup import cli as dedup_cli
    from curator_dask.dedup import exact

    assert dedup_cli.HASH_METHODS == exact.HASH_METHODS


def test_pipeline_schema_is_a_valid_json_schema_and_checks_ranges(tmp_path: Path) -> None:
    import jsonschema

    from curator_dask.cli.pipeline_file import pipeline_schema

    jsonschema.Draft202012Validator.check_schema(pipeline_schema())
    data = pipeline_dict(tmp_path, tmp_path / "out")
    data["execution"] = {"max_in_flight": 0}
    with pytest.raises(ConfigError, match=r"^execution\.max_in_flight: must be an int >= 1"):
        run_config_from_dict(data)
    data = pipeline_dict(tmp_path, tmp_path / "out")
    data["stages"][0]["batch_size"] = "big"
    with pytest.raises(ConfigError, match=r"^stages\[0\]\.batch_size: expected an int"):
        run_config_from_dict(data)


def test_closing_a_local_cluster_does_not_warn_about_killed_workers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from curator_dask.cluster import _close_quietly

    class Cluster:  # closes as LocalCluster does when a worker exits slowly
        def close(self) -> None:
            log = logging.getLogger("distributed.nanny")
            log.warning("Worker process still alive after 4.0 seconds, killing")
            log.warning("something else")

    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="curator_dask"):
        _close_quietly(Cluster())
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ["something else"]
    assert any("still alive" in r.getMessage() for r in caplog.records)  # kept, at DEBUG
    assert not logging.getLogger("distributed.nanny").filters


def _heartbeat_failure(name: str = "distributed.worker") -> None:
    """Log what a worker logs when its heartbeat meets a scheduler that closed: distributed's
    CommClosedError raised from tornado's StreamClosedError, with the traceback."""
    from distributed.comm.core import CommClosedError
    from tornado.iostream import StreamClosedError

    try:
        try:
            raise StreamClosedError()
        except StreamClosedError as e:
            raise CommClosedError("in <TCP (closed) ConnectionPool.heartbeat_worker>") from e
    except CommClosedError:
        logging.getLogger(name).exception("Failed to communicate with scheduler during heartbeat.")


def test_a_worker_process_keeps_a_heartbeat_to_a_closed_scheduler_off_its_stderr() -> None:
    """The preload of the command's worker processes (no -v/--debug): a heartbeat that meets
    the scheduler a failed run's shutdown closed says no ``StreamClosedError`` traceback on
    the worker's stderr (the terminal); distributed's other errors still show."""
    from curator_dask import _task_failures

    shown = io.StringIO()
    stderr = logging.StreamHandler(shown)  # a worker process's distributed handler
    dist = logging.getLogger("distributed")
    before = {h: list(h.filters) for h in dist.handlers}
    dist.addHandler(stderr)
    try:
        _task_failures.dask_setup(None)
        _heartbeat_failure()
        logging.getLogger("distributed.worker").error("another error")
    finally:
        dist.removeHandler(stderr)
        for h, filters in before.items():  # this process's handlers as they were
            h.filters[:] = filters
    assert "another error" in shown.getvalue()
    assert "heartbeat" not in shown.getvalue(), shown.getvalue()
    assert "StreamClosedError" not in shown.getvalue()


def test_a_worker_of_threads_leaves_the_log_files_records_to_it(tmp_path: Path) -> None:
    """Threads mode: the command's workers run in its own process, where the preload finds
    the ``--log-file`` handler among distributed's: the file keeps a failed task's ``Compute
    Failed`` and a closed connection's traceback; the terminal's handler drops them."""
    from curator_dask import _task_failures

    shown = io.StringIO()
    terminal = logging.StreamHandler(shown)
    to_file = logging.FileHandler(tmp_path / "run.log")
    dist = logging.getLogger("distributed")
    before = {h: list(h.filters) for h in dist.handlers}
    dist.addHandler(terminal)
    dist.addHandler(to_file)
    try:
        _task_failures.dask_setup(None)
        _task_failures.dask_setup(None)  # a second worker of the same process
        _heartbeat_failure()
        logging.getLogger("distributed.worker").error("Compute Failed\nKey: x")
    finally:
        dist.removeHandler(terminal)
        dist.removeHandler(to_file)
        to_file.close()
        for h, filters in before.items():  # this process's handlers as they were
            h.filters[:] = filters
    logged = (tmp_path / "run.log").read_text()
    assert "StreamClosedError" in logged
    assert "Compute Failed" in logged
    assert shown.getvalue() == ""
    assert len(terminal.filters) == 1


def test_closing_a_local_cluster_keeps_closed_connections_off_the_terminal(
    tmp_path: Path,
) -> None:
    """A failed run's local cluster closes while a heartbeat is in flight: the shutdown's
    ``StreamClosedError`` traceback goes to the log file's handler, not to the terminal's
    (distributed's own stderr handler), and the terminal shows it again after the close."""
    from curator_dask.cluster import _close_quietly

    class Cluster:  # closes as LocalCluster does with a heartbeat in flight
        def close(self) -> None:
            _heartbeat_failure("distributed.core")
            logging.getLogger("distributed.core").error("something else")

    shown = io.StringIO()
    terminal = logging.StreamHandler(shown)
    to_file = logging.FileHandler(tmp_path / "run.log")
    dist = logging.getLogger("distributed")
    dist.addHandler(terminal)
    dist.addHandler(to_file)
    try:
        _close_quietly(Cluster())
        assert "something else" in shown.getvalue()
        assert "StreamClosedError" not in shown.getvalue(), shown.getvalue()
        _heartbeat_failure("distributed.core")  # after the close: not hidden
    finally:
        dist.removeHandler(terminal)
        dist.removeHandler(to_file)
        to_file.close()
    assert "StreamClosedError" in shown.getvalue()
    logged = (tmp_path / "run.log").read_text()
    assert logged.count("StreamClosedError") >= 2, logged
    assert not terminal.filters


def test_building_the_parser_looks_up_no_package_version(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The version line (four packages' metadata) is made when --version asks, not by every
    command's parser."""
    from importlib import metadata

    from curator_dask.cli import build_parser

    looked_up: list[str] = []
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: looked_up.append(name) or real(name))
    build_parser().parse_args(["report", "out"])
    assert looked_up == []
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--version"])
    assert looked_up == ["dask", "distributed", "pandas", "pyarrow"]
    assert capsys.readouterr().out.startswith("curator-dask ")
