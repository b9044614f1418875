"""The example pipeline file in examples/ runs as documented."""

from __future__ import annotations

import json
import os
from pathlib import Path

from curator_dask.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_example_pipeline_runs(tmp_path, monkeypatch, capsys, sample_records):
    monkeypatch.chdir(ROOT)
    config = (ROOT / "examples" / "pipeline.yaml").read_text()
    out = tmp_path / "sample-clean"
    # same file, output redirected to the test's directory
    local = tmp_path / "pipeline.yaml"
    local.write_text(config.replace("out/sample-clean", os.fspath(out)))
    assert main(["run", os.fspath(local), "--sequential"]) == 0
    stats = json.loads((Path(str(out) + ".curator") / "_stats.json").read_text())
    assert stats["read"] == len(sample_records)
    assert stats["read"] == stats["kept"] + stats["removed"] + stats["quarantined"]
    assert 0 < stats["kept"] < stats["read"]
    assert "sample-clean" in capsys.readouterr().out
