"""A small dedup command runs on dask's threaded scheduler in its own process: no distributed
cluster to import, start and stop, the same outputs, the step cache resumed as on a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dask.config
import pyarrow.dataset as ds
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def write_shards(d: Path, records: list[dict], bad_line: str = "") -> Path:
    """``records`` in 3 JSONL files under ``d``; ``bad_line`` (not JSON) ends the second."""
    d.mkdir()
    for i in range(3):
        with open(d / f"shard-{i}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in records[i::3])
            if i == 1 and bad_line:
                f.write(bad_line + "\n")
    return d


@pytest.fixture
def src(tmp_path: Path, sample_records: list[dict]) -> Path:
    """400 documents of the shipped sample (it holds near-duplicates) in 3 JSONL files."""
    return write_shards(tmp_path / "in", sample_records[:400])


def _python(code: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _ids(directory: Path) -> list[str]:
    table = ds.dataset(directory, format="parquet").to_table(columns=["id"])
    return sorted(str(x) for x in table.column("id").to_pylist())


def _cli(args: list[str]) -> str:
    """``curator-dask ARGS --json`` in a fresh process: the printed result, then the heavy
    modules it imported."""
    return _python(
        "import json, sys\n"
        "from curator_dask.cli import main\n"
        f"assert main({[*args, '--json', '-q']!r}) == 0\n"
        "mods = ('distributed', 'tornado', 'partd')\n"
        "print(json.dumps([m for m in mods if m in sys.modules]))\n",
        # the configured 2 workers become 2 threads here (below curator.dedup.threads-below)
        DASK_CURATOR__CLUSTER__N_WORKERS="2",
        DASK_CURATOR__CLUSTER__THREADS_PER_WORKER="1",
    )


@pytest.mark.parametrize("command", ["fuzzy-dedup", "exact-dedup"])
def test_a_small_dedup_command_imports_no_distributed_and_removes_the_same_documents(
    tmp_path: Path, src: Path, command: str
) -> None:
    from curator_dask.cli import main

    def args(name: str) -> list[str]:
        cache = ["--cache-dir", str(tmp_path / f"{name}-cache")] if command == "fuzzy-dedup" else []
        return [command, str(src), "--output", str(tmp_path / name), *cache]

    out, ref_out = tmp_path / "out", tmp_path / "ref-out"
    printed = _cli([*args("out"), "--perform-removal"]).splitlines()
    result, imported = json.loads(printed[-2]), json.loads(printed[-1])
    # no cluster, no shuffle through partd on disk
    assert imported == []
    # the same documents as on a distributed cluster (threads in this process)
    with dask.config.set({"curator.cluster.processes": False}):
        assert main([*args("ref-out"), "--perform-removal", "-q"]) == 0
    removed = _ids(out / "removed_ids")
    assert removed
    assert removed == _ids(ref_out / "removed_ids")
    assert result["removed"] == len(removed)
    kept = _ids(out / "deduplicated")
    assert kept == _ids(ref_out / "deduplicated")
    assert len(kept) + len(removed) == 400  # every document accounted for


def test_a_small_fuzzy_dedup_resumes_from_its_cache(tmp_path: Path, src: Path) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = ["fuzzy-dedup", str(src), "--output", str(out), "--cache-dir", str(cache)]
    first = json.loads(_cli(args).splitlines()[-2])
    removed = _ids(out / "removed_ids")
    assert first["stats"]["minhash_partitions_computed"] > 0
    assert first["stats"]["verify_computed"] == 1
    second = json.loads(_cli(args).splitlines()[-2])
    # every step read from the cache of the first run
    assert second["stats"]["minhash_partitions_computed"] == 0
    assert second["stats"]["lsh_groups_computed"] == 0
    assert second["stats"]["verify_computed"] == 0
    assert second["removed"] == first["removed"]
    assert _ids(out / "removed_ids") == removed


def test_the_shuffle_method_setting_is_what_the_dedup_shuffles_use(
    tmp_path: Path, src: Path
) -> None:
    """``curator.shuffle.method`` reaches dask (it was passed as an option dask ignores, so
    without a client every shuffle went through partd on disk)."""
    code = f"""
import sys
import dask
from curator_dask.dedup import FuzzyDeduplicationWorkflow
# the dask path's shuffles (this small input would run in memory, without them)
with dask.config.set({{"scheduler": "sync", "curator.dedup.in-memory-below": None}}):
    r = FuzzyDeduplicationWorkflow(
        input_path={str(src)!r}, output_path={str(tmp_path / "out")!r},
        cache_path={str(tmp_path / "cache")!r}, perform_removal=True,
    ).run()
print(r.removed, "partd" in sys.modules)
"""
    removed, partd = _python(code).split()
    assert int(removed) > 0
    assert partd == "False"
