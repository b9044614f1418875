"""The GPU proof's own parts that run without a GPU: its commands parse, its hashes compare.

scripts/gpu_check.sh and bench/bench_gpu_e2e.py run only on a CUDA machine; a typo in
the commands they build would be found there, at the cost of a device run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from curator_dask.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import bench_gpu_e2e  # noqa: E402
import gpu_check  # noqa: E402


def _parse(argv: list[str]) -> None:
    i = argv.index("curator_dask.cli")
    build_parser().parse_args(argv[i + 1 :])


@pytest.mark.parametrize("mode", ["cpu", "gpu"], ids=["cpu", "cuda"])  # "gpu" would skip
def test_gpu_check_commands_parse(tmp_path: Path, mode: str) -> None:
    cmds = gpu_check._commands(gpu_check.SAMPLE, str(tmp_path), mode)
    assert set(cmds) == {"run", "exact-dedup", "fuzzy-dedup", "semantic-dedup"}
    for argv, outputs in cmds.values():
        _parse(argv)
        assert ("--gpu" in argv) == (mode == "gpu")
        assert outputs
    assert "sample.jsonl.gz" in (tmp_path / f"pipeline-{mode}.yaml").read_text()


@pytest.mark.parametrize("mode", ["cpu", "gpu"], ids=["cpu", "cuda"])  # "gpu" would skip
def test_gpu_bench_commands_parse(tmp_path: Path, mode: str) -> None:
    data = tmp_path / "corpus"
    data.mkdir()
    files = [str(data / "part-0000.parquet")]
    steps = bench_gpu_e2e._steps(files, str(tmp_path), mode, workers=4)
    for argv, _ in steps.values():
        _parse(argv)
    assert "ParquetReader" in (tmp_path / f"pipeline-{mode}.yaml").read_text()


def test_digest_ignores_row_order_and_files(tmp_path: Path) -> None:
    frame = pd.DataFrame({"id": ["b", "a", "c"], "text": ["x", "y", "z"]})
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    frame.to_parquet(tmp_path / "one" / "part-0.parquet")
    frame.iloc[[2]].to_parquet(tmp_path / "two" / "part-0.parquet")
    frame.iloc[[1, 0]].to_parquet(tmp_path / "two" / "part-1.parquet")
    assert gpu_check.digest(str(tmp_path / "one")) == gpu_check.digest(str(tmp_path / "two"))
    frame.assign(text=["x", "y", "Z"]).to_parquet(tmp_path / "one" / "part-0.parquet")
    assert gpu_check.digest(str(tmp_path / "one")) != gpu_check.digest(str(tmp_path / "two"))


def test_overlap_of_removed_ids(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pd.DataFrame({"id": ["1", "2", "3"]}).to_parquet(tmp_path / "a" / "part-0.parquet")
    pd.DataFrame({"id": ["2", "3", "4"]}).to_parquet(tmp_path / "b" / "part-0.parquet")
    assert gpu_check._overlap(str(tmp_path / "a"), str(tmp_path / "b")) == 0.5
