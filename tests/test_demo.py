"""The demo job (what `make demo` runs) accounts for every document."""

from __future__ import annotations

import json

import pytest
from distributed import Client, LocalCluster

from curator_dask.cli import main
from curator_dask.demo import BROKEN_RECORDS, run_demo


@pytest.mark.slow
def test_demo_accounts_for_every_document(tmp_path, sample_records):
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster,
        Client(cluster) as client,
    ):
        summary = run_demo(str(tmp_path / "demo"), client=client, blocksize="2MB")
    assert summary["read"] == len(sample_records) + len(BROKEN_RECORDS)
    assert summary["quarantined"] == len(BROKEN_RECORDS)
    removed = summary["removed"]
    assert removed["exact_duplicates"] > 0
    assert removed["fuzzy_duplicates"] > 0
    assert summary["balanced"]
    assert summary["read"] == summary["kept"] + sum(removed.values()) + summary["quarantined"]
    on_disk = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert on_disk == summary
    assert "WordCountFilter" in (tmp_path / "demo" / "filtered" / "_report.html").read_text()


def test_demo_is_a_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "--output" in capsys.readouterr().out
