"""The demo job (what `make demo` runs) accounts for every document."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert (
        "WordCountFilter"
        in (Path(str(tmp_path / "demo" / "filtered") + ".curator") / "_report.html").read_text()
    )


def test_demo_is_a_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "--output" in capsys.readouterr().out


def test_demo_output_never_loses_files_it_did_not_write(tmp_path):
    from curator_dask.demo import DEMO_ENTRIES, clear_previous_run

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work")
    with pytest.raises(FileExistsError, match="not written by the demo"):
        clear_previous_run(str(mine))
    assert (mine / "thesis.txt").read_text() == "years of work"

    # a directory the demo wrote, with a file of the user's added since
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / ".curator-demo").write_text(json.dumps(list(DEMO_ENTRIES)))
    (demo / "filtered").mkdir()
    (demo / "filtered" / "part-00000.parquet").write_bytes(b"x")
    (demo / "summary.json").write_text("{}")
    (demo / "notes.txt").write_text("keep")
    clear_previous_run(str(demo))
    assert sorted(p.name for p in demo.iterdir()) == [".curator-demo", "notes.txt"]
