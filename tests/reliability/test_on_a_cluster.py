"""The reliability cases on a real cluster: scheduler and workers are subprocesses (each
worker in its own directory), the run goes through ``DaskExecutor`` and through
``curator-dask run --scheduler-file``; the audit is the same as on one machine."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import test_bad_files
import test_compressed
import yaml
from _audit import MIN_WORDS, audit, cli, pipeline_spec

pytestmark = pytest.mark.integration


def _library(reader: dict[str, Any], out: Path, sfile: Path) -> None:
    from distributed import Client

    from curator_dask.executor import DaskExecutor
    from curator_dask.filters import WordCountFilter
    from curator_dask.io import JsonlReader, JsonlWriter
    from curator_dask.pipeline import Pipeline

    pipeline = Pipeline(
        "reliability",
        [JsonlReader(**reader), WordCountFilter(min_words=MIN_WORDS), JsonlWriter(str(out))],
    )
    with Client(scheduler_file=str(sfile), timeout="30s") as client:
        pipeline.run(DaskExecutor(client=client, progress=False))


def _cli(reader: dict[str, Any], out: Path, sfile: Path) -> None:
    spec = out.parent / f"{out.name}.yaml"
    spec.write_text(yaml.safe_dump(pipeline_spec(reader, out)))
    proc = cli(["run", str(spec), "--scheduler-file", str(sfile), "-q"], cwd=out.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("how", ["library", "cli"])
def test_bad_files_on_a_cluster(tmp_path: Path, scheduler_file: Path, how: str) -> None:
    src = tmp_path / "in"
    expected = test_bad_files._make(src)
    reader = {"paths": str(src), "files_per_partition": 5}
    out = tmp_path / "out"
    (_library if how == "library" else _cli)(reader, out, scheduler_file)
    test_bad_files._check(out, expected, one_partition=True)


@pytest.mark.parametrize("how", ["library", "cli"])
def test_a_corrupt_gzip_member_on_a_cluster(tmp_path: Path, scheduler_file: Path, how: str) -> None:
    docs = test_compressed._docs(seed=3, n_docs=4500)
    thirds = [docs[:1500], docs[1500:3000], docs[3000:]]
    members = [gzip.compress(test_compressed._body(t)) for t in thirds]
    members[1] = test_compressed._flip(members[1], 0.9)
    src = tmp_path / "in"
    src.mkdir()
    (src / "docs.jsonl.gz").write_bytes(b"".join(members))
    out = tmp_path / "out"
    (_library if how == "library" else _cli)({"paths": str(src)}, out, scheduler_file)
    test_compressed._check(audit(out), docs, set(range(1500)), min_doubt=300)


def test_big_ids_on_a_cluster(tmp_path: Path, scheduler_file: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    big = [2**64 + i for i in range(5)]
    lines = [json.dumps({"id": v, "text": f"one two three {v}"}) for v in big]
    (src / "a.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    _cli({"paths": str(src)}, out, scheduler_file)
    got = audit(out)
    got.balanced()
    assert [d["id"] for d in got.kept] == [str(v) for v in big]
