"""Run a case through the library and the CLI, then audit the output files by hand.

The audit does not trust the run's own numbers: it reads every data file and quarantine
file back itself (``json``), hashes each document, and checks them against the input the
test wrote and against ``_stats.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
#: Documents of fewer words are removed by the pipeline's filter.
MIN_WORDS = 3


def doc_hash(doc_id: Any, text: str) -> str:
    """The identity of a document: its id and its text, byte for byte."""
    return hashlib.sha256(json.dumps([doc_id, text]).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Audit:
    """What an output directory holds, read back by the test."""

    kept: list[dict[str, Any]]
    quarantine: list[dict[str, Any]]
    stats: dict[str, Any]
    success: bool
    hashes: Counter[str] = field(default_factory=Counter)

    def balanced(self) -> None:
        """``read = kept + removed + quarantined``, and the files agree with the numbers."""
        s = self.stats
        assert self.success, "no _SUCCESS"
        assert s["read"] == s["kept"] + s["removed"] + s["quarantined"], s
        assert len(self.kept) == s["kept"], (len(self.kept), s["kept"])
        assert len(self.quarantine) == s["quarantined"], (len(self.quarantine), s)
        dupes = [h for h, n in self.hashes.items() if n > 1]
        assert not dupes, f"{len(dupes)} documents written twice"


def audit(out: Path) -> Audit:
    kept: list[dict[str, Any]] = []
    for part in sorted(out.glob("part-*.jsonl")):
        with open(part, encoding="utf-8", errors="surrogatepass") as f:
            kept.extend(json.loads(line) for line in f if line.strip())
    quarantine: list[dict[str, Any]] = []
    for part in sorted((Path(str(out) + ".curator") / "_quarantine").glob("part-*.jsonl")):
        with open(part, encoding="utf-8", errors="surrogatepass") as f:
            quarantine.extend(json.loads(line) for line in f if line.strip())
    stats = (
        json.loads((Path(str(out) + ".curator") / "_stats.json").read_text())
        if (Path(str(out) + ".curator") / "_stats.json").exists()
        else {}
    )
    hashes = Counter(doc_hash(d.get("id"), d["text"]) for d in kept)
    return Audit(
        kept, quarantine, stats, (Path(str(out) + ".curator") / "_SUCCESS").exists(), hashes
    )


def pipeline_spec(reader: dict[str, Any], out: Path, **config: Any) -> dict[str, Any]:
    """A pipeline file's mapping: the reader, a word-count filter, a JSONL writer."""
    spec: dict[str, Any] = {
        "name": "reliability",
        "reader": {"class": "JsonlReader", "params": reader},
        "stages": [{"class": "WordCountFilter", "params": {"min_words": MIN_WORDS}}],
        "writer": {"class": "JsonlWriter", "params": {"path": str(out)}},
    }
    if config:
        spec["config"] = config
    return spec


def run_library(reader: dict[str, Any], out: Path) -> Audit:
    """The pipeline built with the Python API, run in this process."""
    from curator_dask.executor import SequentialExecutor
    from curator_dask.filters import WordCountFilter
    from curator_dask.io import JsonlReader, JsonlWriter
    from curator_dask.pipeline import Pipeline

    Pipeline(
        "reliability",
        [JsonlReader(**reader), WordCountFilter(min_words=MIN_WORDS), JsonlWriter(str(out))],
    ).run(SequentialExecutor())
    return audit(out)


def cli(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``curator-dask ARGS`` as a user runs it (a subprocess importing this tree)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "curator_dask.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_cli(reader: dict[str, Any], out: Path, *extra: str, **config: Any) -> Audit:
    """The same pipeline as a pipeline file, run with ``curator-dask run``."""
    spec_file = out.parent / f"{out.name}.yaml"
    spec_file.write_text(yaml.safe_dump(pipeline_spec(reader, out, **config)))
    proc = cli(["run", str(spec_file), *(extra or ("--sequential",))], cwd=out.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return audit(out)
