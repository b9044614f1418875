"""A small fuzzy or exact dedup runs its steps on pandas frames in one process (below
``curator.dedup.in-memory-below``): no dask dataframe, the same step functions, step cache,
outputs and accounting as the dask path."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import dask.config
import pandas as pd
import pyarrow.dataset as ds
import pytest

from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.dedup._runtime import DedupResult
from curator_dask.io import QuarantineWarning
from tests.dedup.test_small_local import write_shards

ROOT = Path(__file__).resolve().parent.parent.parent
DASK_PATH = {"curator.dedup.in-memory-below": None}


@pytest.fixture
def src(tmp_path: Path, sample_records: list[dict]) -> Path:
    """300 documents of the shipped sample (it holds near-duplicates) in 3 JSONL files, and
    one line that is not JSON (quarantined)."""
    return write_shards(tmp_path / "in", sample_records[:300], bad_line="{not json")


def _ids(directory: Path) -> list[str]:
    table = ds.dataset(directory, format="parquet").to_table(columns=["id"])
    return sorted(str(x) for x in table.column("id").to_pylist())


def _groups(directory: Path) -> list[tuple[str, str]]:
    table = ds.dataset(directory, format="parquet").to_table(columns=["id", "group"])
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "group")), strict=True))


def _workflow(src: Path, tmp_path: Path, name: str, **kw: object) -> FuzzyDeduplicationWorkflow:
    return FuzzyDeduplicationWorkflow(
        input_path=str(src),
        output_path=str(tmp_path / name),
        cache_path=str(tmp_path / f"{name}-cache"),
        perform_removal=True,
        duplicate_groups=True,
        **kw,  # type: ignore[arg-type]
    )


def _run(
    wf: FuzzyDeduplicationWorkflow | ExactDeduplicationWorkflow, reads: bool = True
) -> DedupResult:
    """``wf.run()``; when it ``reads`` the input, the bad line is warned of."""
    if not reads:
        return wf.run()
    with pytest.warns(QuarantineWarning, match="1 bad record"):
        return wf.run()


@pytest.mark.parametrize("command", ["fuzzy-dedup", "exact-dedup"])
def test_a_small_dedup_command_imports_no_dask_dataframe(
    tmp_path: Path, src: Path, command: str
) -> None:
    """Nor curator's metrics, which nothing reads without --metrics-port or a cluster."""
    out = tmp_path / "out"
    cache = ["--cache-dir", str(tmp_path / "cache")] if command == "fuzzy-dedup" else []
    args = [command, str(src), "--output", str(out), *cache, "--perform-removal", "--json", "-q"]
    code = (
        "import json, sys\n"
        "from curator_dask.cli import main\n"
        f"args = {args!r}\n"
        "assert main(args) == 0\n"
        "mods = ('dask.dataframe', 'dask.array', 'distributed', 'prometheus_client')\n"
        "print(json.dumps([m for m in mods if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout.splitlines()
    result, imported = json.loads(printed[-2]), json.loads(printed[-1])
    assert imported == []
    removed = _ids(out / "removed_ids")
    assert removed
    assert result["removed"] == len(removed)
    # every record accounted for: kept + removed + quarantined = read
    assert result["quarantined"] == 1
    assert len(_ids(out / "deduplicated")) + len(removed) + 1 == 301


def test_in_memory_and_dask_paths_write_the_same_outputs(tmp_path: Path, src: Path) -> None:
    small = _workflow(src, tmp_path, "small")
    got = _run(small)
    assert small._in_memory is not None  # the input is below the setting
    with dask.config.set({"curator.dedup.in-memory-below": "1KiB"}):  # above it: dask
        ref_wf = _workflow(src, tmp_path, "ref")
        ref = _run(ref_wf)
    assert ref_wf._in_memory is None
    for name in ("removed_ids", "duplicate_groups"):
        assert _groups(tmp_path / "small" / name) == _groups(tmp_path / "ref" / name)
    assert _groups(tmp_path / "small" / "removed_ids")
    assert _ids(tmp_path / "small" / "deduplicated") == _ids(tmp_path / "ref" / "deduplicated")
    for key in ("documents", "removed", "kept", "duplicate_groups", "quarantined"):
        assert got[key] == ref[key], key
    assert got["quarantined"] == 1
    assert got["kept"] + got["removed"] + got["quarantined"] == 301
    assert set(got.seconds) == set(ref.seconds)  # the same steps reported
    steps = got.stats.keys() - {"plan"}
    assert steps <= ref.stats.keys()
    assert {k: got.stats[k] for k in steps if k != "verify_sets"} == {
        k: ref.stats[k] for k in steps if k != "verify_sets"
    }


def test_an_interrupted_in_memory_run_resumes_from_its_cache(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from curator_dask.dedup import fuzzy

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:  # stopped after the candidate check
        m.setattr(fuzzy, "components_in_memory", interrupted)
        with pytest.raises(KeyboardInterrupt):
            _run(_workflow(src, tmp_path, "out"))
    assert not (tmp_path / "out" / "removed_ids").exists()
    again = _workflow(src, tmp_path, "out")
    result = _run(again, reads=False)
    assert again._in_memory is not None
    assert result.stats["minhash_partitions_computed"] == 0
    assert result.stats["lsh_groups_computed"] == 0
    assert result.stats["verify_computed"] == 0
    # the dask path reads the same step cache (the steps' files are the same)
    with dask.config.set(DASK_PATH):
        on_dask = _workflow(src, tmp_path, "out")
        resumed = _run(on_dask, reads=False)
    assert on_dask._in_memory is None
    assert resumed.stats["verify_computed"] == 0
    fresh = _workflow(src, tmp_path, "fresh")
    with dask.config.set(DASK_PATH):
        _run(fresh)
    assert _ids(tmp_path / "out" / "removed_ids") == _ids(tmp_path / "fresh" / "removed_ids")
    assert result["removed"] == resumed["removed"] == len(_ids(tmp_path / "fresh" / "removed_ids"))


def test_exact_in_memory_and_dask_paths_write_the_same_outputs(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (src / "shard-0.jsonl").write_text((src / "shard-0.jsonl").read_text() * 2)

    def workflow(name: str) -> ExactDeduplicationWorkflow:
        return ExactDeduplicationWorkflow(
            input_path=str(src),
            output_path=str(tmp_path / name),
            perform_removal=True,
            duplicate_groups=True,
        )

    def shuffled(*args: object) -> None:
        raise AssertionError("the dask path's shuffle")

    with monkeypatch.context() as m:  # the small run shuffles nothing
        m.setattr(ExactDeduplicationWorkflow, "members", shuffled)
        got = _run(workflow("small"))
    with dask.config.set(DASK_PATH):
        ref = _run(workflow("ref"))
    for name in ("removed_ids", "duplicate_groups"):
        assert _groups(tmp_path / "small" / name) == _groups(tmp_path / "ref" / name)
    assert _ids(tmp_path / "small" / "deduplicated") == _ids(tmp_path / "ref" / "deduplicated")
    for key in ("documents", "removed", "kept", "duplicate_groups", "quarantined"):
        assert got[key] == ref[key], key
    assert got["removed"] >= 100  # shard-0's 100 documents twice
    assert got["kept"] + got["removed"] + got["quarantined"] == 401


def _own_numba_cache(directory: Path) -> dict[str, str]:
    """The environment of a process whose numba cache is ``directory``, seeded with the
    package's cached kernels (numba's cache beside its modules), so that a first run there
    compiles only what those lack (nothing, mostly). No other process writes into it: what
    another process does to the package's cache (a first compile, a kernel's other
    signature, caches removed, a module's source changed) cannot take a kernel out of it
    between the two runs."""
    from numba.core.caching import UserProvidedCacheLocator

    for built in (ROOT / "curator_dask").rglob("__pycache__"):
        # numba's folder for the modules of ``built.parent`` under NUMBA_CACHE_DIR
        sub = UserProvidedCacheLocator.get_suitable_cache_subpath(str(built.parent / "m.py"))
        (directory / sub).mkdir(parents=True, exist_ok=True)
        for f in [*built.glob("*.nbi"), *built.glob("*.nbc")]:  # each written whole
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile: compiled then
                shutil.copyfile(f, directory / sub / f.name)
    return {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(directory)}


def test_a_small_dedup_command_loads_its_cached_kernels_without_numbas_compiler(
    tmp_path: Path, src: Path
) -> None:
    """With its kernels in numba's cache (a first run puts them there), a run loads them
    without refreshing numba's CPU target: no typing and lowering registries
    (``numba.np.arraymath``, ``numba.typed``, cffi's C parser) and no compile of numba's
    runtime module. Nor SciPy (numba's version check) nor ``pyarrow.dataset`` (a Parquet
    file read through it); nor ``numba.np.arrayobj``, whose environments the kernels'
    cached data names, nor any kernel's LLVM bitcode parsed; nor Jinja2 (dask's widgets),
    nor fsspec and asyncio (local files).
    The run removes what it did, and kernels compiled afterwards in the same process work:
    one that raises from ``np.empty``, one that links a cached kernel in (its bitcode
    parsed then).
    Both runs are processes of their own with a numba cache of this test's own
    (:func:`_own_numba_cache`). A first run in this process wrote nothing where an earlier
    test had loaded the kernels here: the second then found them only if the package's
    cache still held each one for the source on disk, and compiled (failed) where another
    process had changed it meanwhile."""
    code = (
        "import json, sys\n"
        "import llvmlite.binding as ll\n"
        "parsed, parse = [], ll.parse_bitcode\n"
        "ll.parse_bitcode = lambda data: parsed.append(len(data)) or parse(data)\n"
        "from curator_dask.cli import main\n"
        "assert main(sys.argv[1:]) == 0\n"
        "from numba.core.runtime import rtsys\n"
        "mods = ('numba.np.arraymath', 'numba.typed.listobject', 'cffi', 'scipy',\n"
        "        'pyarrow.dataset', 'numba.np.arrayobj', 'jinja2', 'fsspec', 'asyncio')\n"
        "print(json.dumps([m for m in mods if m in sys.modules] + ['rtsys'] * rtsys._init\n"
        "                 + ['bitcode'] * len(parsed)))\n"
        "import numba, numpy as np\n"
        "from curator_dask.dedup.minhash import jaccard_sorted\n"
        "print(numba.njit(lambda n: np.arange(n).sum())(10))\n"
        "try:\n"
        "    numba.njit(lambda n: np.empty(n, np.int64).size)(-1)\n"
        "except ValueError as e:\n"
        "    print(e)\n"
        "a, b = np.array([1, 2, 3], np.uint64), np.array([2, 3, 4], np.uint64)\n"
        "print(numba.njit(lambda a, b: jaccard_sorted(a, b))(a, b), bool(parsed))\n"
    )
    env = _own_numba_cache(tmp_path / "numba")

    def run(name: str, code: str) -> subprocess.CompletedProcess[str]:
        out = str(tmp_path / name)
        args = ["fuzzy-dedup", str(src), "--output", out, "--cache-dir", f"{out}-c", "-q"]
        done = subprocess.run(
            [sys.executable, "-c", code, *args, "--perform-removal"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    first = "import sys\nfrom curator_dask.cli import main\nassert main(sys.argv[1:]) == 0\n"
    run("first", first)  # the kernels cached (compiled where the seed lacks them)
    done = run("second", code)
    imported, compiled_after, raised, linked = done.stdout.splitlines()[-4:]
    assert json.loads(imported) == []  # every kernel from the cache
    assert compiled_after == "45"
    assert raised == "negative dimensions not allowed"
    assert linked == "0.5 True"
    assert _ids(tmp_path / "second" / "removed_ids") == _ids(tmp_path / "first" / "removed_ids")
    assert _ids(tmp_path / "second" / "removed_ids")
    kept = _ids(tmp_path / "second" / "deduplicated")
    assert len(kept) + len(_ids(tmp_path / "second" / "removed_ids")) + 1 == 301  # 1 quarantined


@pytest.mark.parametrize("method", ["fuzzy", "exact"])
def test_an_in_memory_run_gives_back_what_its_steps_freed_before_its_outputs(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """The steps before the output step free their frames, but glibc's allocator and
    Arrow's keep the pages for reuse: the output step, the run's peak, would stack on top of
    them. An in-memory run gives them back once, before any output is written (and every
    step-cache file read gives Arrow's back); the outputs are those of the dask path."""
    from curator_dask import stage
    from curator_dask.io import parquet_dir

    trims: list[bool] = []
    arrow: list[int] = []
    monkeypatch.setattr(
        stage,
        "_malloc_trim",
        lambda: lambda pad: trims.append((out / "removed_ids").exists()),
        raising=False,
    )
    real = parquet_dir.release_arrow_memory
    monkeypatch.setattr(parquet_dir, "release_arrow_memory", lambda: arrow.append(1) or real())
    out = tmp_path / method
    if method == "fuzzy":
        wf: Any = _workflow(src, tmp_path, method)
    else:
        wf = ExactDeduplicationWorkflow(
            input_path=str(src), output_path=str(out), perform_removal=True
        )
    got = _run(wf)
    assert trims == [False]  # once (only an in-memory run does), before the first output
    files = sorted((out / "removed_ids").glob("*.parquet"))
    before = len(arrow)
    parquet_dir.read_part_frames([str(f) for f in files], pd.DataFrame({"id": []}))
    assert len(arrow) - before == len(files)  # a read gives Arrow's freed pages back
    assert got.removed == len(_ids(out / "removed_ids")) > 0
    assert len(_ids(out / "deduplicated")) + got.removed + got.quarantined == 301


def test_a_dedup_command_imports_its_workflow_without_the_garbage_collector(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing the workflow (pandas, pyarrow, numba) makes no garbage, only objects that
    live as long as the process: the collector is off while it imports, and what exists is
    frozen after (later collections skip it); the run then collects as usual."""
    import gc
    import types

    from curator_dask.cli import main
    from curator_dask.dedup import cli as dedup_cli

    collecting: list[bool] = []

    def import_module(name: str) -> Any:
        collecting.append(gc.isenabled())
        return importlib.import_module(name)

    monkeypatch.setattr(dedup_cli, "importlib", types.SimpleNamespace(import_module=import_module))
    frozen: list[int] = []
    from curator_dask.dedup import _runtime  # the frozen count, read as the run opens its input

    of = _runtime.DedupInput.of

    def reading(*args: Any, **kwargs: Any) -> Any:
        frozen.append(gc.get_freeze_count())
        return of(*args, **kwargs)

    monkeypatch.setattr(_runtime.DedupInput, "of", staticmethod(reading))
    out = str(tmp_path / "out")
    try:
        with warnings.catch_warnings():  # the bad line: the command says it
            warnings.simplefilter("ignore", QuarantineWarning)
            assert main(["fuzzy-dedup", str(src), "--output", out, "--cache-dir", f"{out}-c"]) == 0
        assert collecting == [False]
        assert gc.isenabled()
        assert frozen
        assert min(frozen) > 0  # frozen while the command ran
        assert gc.get_freeze_count() == 0  # and given back when main returned
    finally:
        gc.unfreeze()  # this test process's objects, back to the collector
    assert _ids(tmp_path / "out" / "removed_ids")
