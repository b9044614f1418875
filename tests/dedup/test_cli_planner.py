from __future__ import annotations

import argparse
import contextlib
import re

import pandas as pd
import pytest

from curator_dask.dedup import cli
from curator_dask.dedup.planner import estimate_peak, plan_lsh


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()

    def add_cluster_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--scheduler-address", default=None)

    @contextlib.contextmanager
    def client_from_args(args, input_bytes=None, threads_below=None, local_scheduler=False):
        yield None

    cli.register(sub, add_cluster_args, client_from_args)
    return parser


def test_exact_dedup_command(tmp_path, sample_path, capsys):
    args = _parser().parse_args(["exact-dedup", str(sample_path), "--output", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert re.search(r"documents read +4,000", out)  # the result table, on stdout
    assert re.search(r"removed +399", out)
    assert len(pd.read_parquet(tmp_path / "removed_ids")) == 399


def test_fuzzy_dedup_command(tmp_path, sample_path, capsys):
    args = _parser().parse_args(
        [
            "fuzzy-dedup",
            str(sample_path),
            "--output",
            str(tmp_path / "o"),
            "--cache-dir",
            str(tmp_path / "c"),
            "--word-ngrams",
            "5",
            "--num-bands",
            "30",
            "--minhashes-per-band",
            "8",
            "--false-positive-check",
            "--keep",
            "longest",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert re.search(r"documents read +4,000", out)
    assert 500 <= len(pd.read_parquet(tmp_path / "o" / "removed_ids")) <= 560


def test_ngram_flags_are_exclusive():
    with pytest.raises(SystemExit):
        _parser().parse_args(
            [
                "fuzzy-dedup",
                "x",
                "--output",
                "o",
                "--cache-dir",
                "c",
                "--char-ngrams",
                "5",
                "--word-ngrams",
                "5",
            ]
        )


def test_planner_fits_the_budget():
    gib = 2**30
    small = plan_lsh(1_000, num_bands=20, n_workers=2, worker_memory=4 * gib)
    assert small.bands_per_iteration == 20
    assert small.num_band_groups == 1
    big = plan_lsh(
        20_000_000, num_bands=20, n_workers=2, worker_memory=8 * gib, memory_fraction=0.5
    )
    assert 1 <= big.bands_per_iteration < 20
    assert big.estimated_peak_per_worker <= big.budget_per_worker
    assert estimate_peak(10**6, 2) > estimate_peak(10**6, 1)
    # more workers share the load
    assert plan_lsh(20_000_000, 20, 8, 8 * gib).bands_per_iteration > big.bands_per_iteration


def test_planner_warns_when_one_band_does_not_fit():
    gib = 2**30
    with pytest.warns(UserWarning, match="even one band per LSH pass") as got:
        plan = plan_lsh(2_000_000_000, num_bands=20, n_workers=1, worker_memory=2 * gib)
    assert plan.bands_per_iteration == 1
    assert plan.estimated_peak_per_worker > plan.budget_per_worker
    assert len(got) == 1
    assert got[0].lineno == 0  # printed without a source line


def test_planner_is_quiet_when_the_plan_fits_the_memory_limit(recwarn):
    gib = 2**30
    # 4,000 documents on 1 GiB workers: over the 50 % budget's margin, far under the limit
    plan_lsh(4_000, num_bands=30, n_workers=2, worker_memory=1 * gib, memory_fraction=0.4)
    assert not [w for w in recwarn if "LSH pass" in str(w.message)]


def test_semantic_dedup_command(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import json

    texts = [
        "The train to Edinburgh departs from platform four at noon.",
        "Photosynthesis converts light energy into chemical energy.",
        "The train to Edinburgh departs from platform four at noon.",
        "Stir the flour into the melted butter and cook for two minutes.",
    ]
    src = tmp_path / "docs.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    args = _parser().parse_args(
        ["semantic-dedup", str(src), "--output", str(tmp_path / "o"), "--cache-dir",
         str(tmp_path / "c"), "--n-clusters", "2", "--eps", "0.01", "--keep", "first"]
    )  # fmt: skip
    assert args.func(args) == 0
    assert re.search(r"documents read +4\n", capsys.readouterr().out)
    got = pd.read_parquet(tmp_path / "o" / "removed_ids")
    assert got.to_dict("records") == [{"id": "d2", "group": "d0"}]


def test_planner_with_a_spilling_shuffle_does_not_grow_with_the_corpus():
    gib = 2**30
    plans = [
        plan_lsh(n, 30, n_workers=2, worker_memory=2 * gib, docs_per_partition=120_000)
        for n in (400_000, 6_400_000, 1_000_000_000)
    ]
    assert len({(p.bands_per_iteration, p.estimated_peak_per_worker) for p in plans}) == 1
    assert plans[0].estimated_peak_per_worker <= plans[0].budget_per_worker
    # in memory (no spilling), the same corpus sizes need ever fewer bands per pass
    in_memory = [plan_lsh(n, 30, 2, 2 * gib).bands_per_iteration for n in (400_000, 6_400_000)]
    assert in_memory[1] < in_memory[0]
    # twice the threads hold twice the partitions
    two = plan_lsh(10**9, 30, 2, 2 * gib, docs_per_partition=120_000, threads_per_worker=2)
    assert two.bands_per_iteration < plans[0].bands_per_iteration


def test_planner_splits_the_bands_evenly():
    gib = 2**30
    plan = plan_lsh(
        1_000_000, num_bands=30, n_workers=2, worker_memory=2 * gib, docs_per_partition=100_000
    )
    bpi, groups = plan.bands_per_iteration, plan.num_band_groups
    assert groups > 1
    # equal passes: no pass is a stub of the others
    assert (bpi - 1) * groups < 30 <= bpi * groups
    assert plan.estimated_peak_per_worker <= plan.budget_per_worker
