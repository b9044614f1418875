"""One rule for both halves: a pipeline run and a dedup workflow answer alike.

The output-overlap rule (io's ``RunLayout.check_not_overlapping``) and the "has this input
changed" rule (the readers' ``Reader.fingerprint``) were written twice, once for pipelines
and once for the dedup workflows; each test here runs both halves on the same input.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import dask
import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem

from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.executor import SequentialExecutor
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")


def _text(k: int) -> str:
    return " ".join(WORDS[(k + i) % len(WORDS)] + str(k) for i in range(30))


def _write(path: Path, ids: list[str], texts: list[str]) -> None:
    lines = [json.dumps({"id": i, "text": t}) for i, t in zip(ids, texts, strict=True)]
    path.write_text("\n".join(lines) + "\n")


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("workflow", ["exact", "fuzzy"])
def test_a_quarantine_directory_in_the_input_is_refused_by_both_halves(
    tmp_path: Path, workflow: str
) -> None:
    # the input folder holds part-*.jsonl files, and curator.io.quarantine-dir names it: a
    # run would write (and replace) its quarantine files among the input's
    src = tmp_path / "in"
    src.mkdir()
    _write(src / "part-00000.jsonl", ["a", "b", "c"], [_text(1), _text(1), _text(2)])
    with (src / "part-00000.jsonl").open("a") as f:
        f.write("{not json\n")
    before = _tree_digest(src)
    with dask.config.set({"curator.io.quarantine-dir": str(src)}):
        pipeline = Pipeline("p", [JsonlReader(str(src)), JsonlWriter(str(tmp_path / "p"))])
        with pytest.raises(ValueError, match=r"quarantine directory .* overlaps the input"):
            pipeline.run(SequentialExecutor(progress=False))
        if workflow == "exact":
            dedup = ExactDeduplicationWorkflow(str(src), output_path=str(tmp_path / "d"))
        else:
            dedup = FuzzyDeduplicationWorkflow(
                str(src), output_path=str(tmp_path / "d"), cache_path=str(tmp_path / "c")
            )
        with pytest.raises(ValueError, match=r"quarantine directory .* overlaps the input"):
            dedup.run()
    assert _tree_digest(src) == before
    assert not (tmp_path / "d").exists()
    assert not (tmp_path / "c").exists()


def test_a_quarantine_directory_in_the_cache_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    _write(src / "a.jsonl", ["a", "b"], [_text(1), _text(1)])
    cache = tmp_path / "cache"
    with (
        dask.config.set({"curator.io.quarantine-dir": str(cache / "q")}),
        pytest.raises(ValueError, match=r"quarantine directory .* overlaps the cache directory"),
    ):
        FuzzyDeduplicationWorkflow(
            str(src), output_path=str(tmp_path / "d"), cache_path=str(cache)
        ).run()


class EtagFileSystem(LocalFileSystem):
    """Local files under ``etagfs://`` whose listing gives an ETag (the md5 of the bytes)
    beside the modification time, as object stores do."""

    protocol = "etagfs"

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        path = str(path)
        if path.startswith("etagfs://"):
            path = path[len("etagfs://") :]
        return str(super()._strip_protocol(path))

    def info(self, path: Any, **kwargs: Any) -> dict[str, Any]:
        out = dict(super().info(path, **kwargs))
        if out["type"] == "file":
            out["ETag"] = hashlib.md5(Path(out["name"]).read_bytes()).hexdigest()
        return out


@pytest.fixture
def etagfs() -> None:
    # a protocol of its own name: registering it changes nothing else in this process
    fsspec.register_implementation("etagfs", EtagFileSystem, clobber=True)


def _rewrite(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and move its modification time on (as a copy would)."""
    stamp = path.stat().st_mtime + 100
    path.write_bytes(data)
    os.utime(path, (stamp, stamp))


def test_an_input_rewritten_unchanged_is_reused_and_a_changed_one_redone_by_both_halves(
    tmp_path: Path, etagfs: None
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    _write(src / "a.jsonl", ["a", "b"], [_text(1), _text(1)])
    _write(src / "b.jsonl", ["c", "d"], [_text(2), _text(3)])
    url = "etagfs://" + str(src)

    def pipeline_skips() -> int:
        reader = JsonlReader(url, files_per_partition=1)
        p = Pipeline("p", [reader, JsonlWriter(str(tmp_path / "p"), mode="resume")])
        return p.run(SequentialExecutor(progress=False)).partitions_skipped

    def dedup_cache() -> str:
        return FuzzyDeduplicationWorkflow(
            url, output_path=str(tmp_path / "d"), cache_path=str(tmp_path / "c")
        ).cache_dir()

    assert pipeline_skips() == 0
    first = dedup_cache()
    # the same bytes copied over a file: its ETag says it is unchanged, its mtime moved
    _rewrite(src / "a.jsonl", (src / "a.jsonl").read_bytes())
    assert pipeline_skips() == 2
    assert dedup_cache() == first
    # other bytes of the same size: changed
    data = (src / "b.jsonl").read_bytes()
    _rewrite(src / "b.jsonl", data.replace(b'"d"', b'"e"'))
    assert pipeline_skips() == 1
    assert dedup_cache() != first


def test_a_local_clusters_directory_inside_the_output_is_refused_from_python(
    tmp_path: Path,
) -> None:
    """Called from Python on the user's own local cluster, both halves learn its workers'
    local directory (scratch and spill) and refuse one inside the output, as the command
    does with ``--local-directory``: before anything is written."""
    from distributed import Client, LocalCluster

    from curator_dask.executor import DaskExecutor

    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    _write(src / "a.jsonl", ["a", "b"], [_text(1), _text(1)])
    scratch = out / "scratch"
    refused = r"output .*out overlaps the local directory .*out/scratch/"
    with (
        LocalCluster(
            n_workers=1, processes=False, local_directory=str(scratch), dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        before = sorted(p.relative_to(out) for p in out.rglob("*"))
        dedup = ExactDeduplicationWorkflow(input_path=str(src), output_path=str(out), client=client)
        with pytest.raises(ValueError, match=refused):
            dedup.run()
        pipeline = Pipeline("p", [JsonlReader(str(src)), JsonlWriter(str(out))])
        with pytest.raises(ValueError, match=refused):
            pipeline.run(DaskExecutor(client=client))
        assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # nothing written
        # a directory apart from the output: the same calls run
        other = tmp_path / "elsewhere"
        assert (
            ExactDeduplicationWorkflow(input_path=str(src), output_path=str(other), client=client)
            .run()
            .removed
            == 1
        )
