"""bench_kernel_runtime compiles the baseline's kernels the baseline's way."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import bench_kernel_runtime  # noqa: E402


def test_the_baselines_kernels_load_with_the_baselines_own_kernel_settings(
    tmp_path: Path,
) -> None:
    import curator_dask._kernels as ours

    # a baseline whose _kernels differs from this checkout's (another LLVM level)
    package = tmp_path / "curator_dask"
    (package / "dedup").mkdir(parents=True)
    (package / "_kernels.py").write_text("KERNEL_OPT = 'the baseline level'\n")
    kernel_module = "from curator_dask._kernels import KERNEL_OPT\n"
    (package / "_text_kernels.py").write_text(kernel_module)
    (package / "dedup" / "minhash.py").write_text(kernel_module)
    old_kernels, old_minhash = bench_kernel_runtime.load_baseline(tmp_path)
    assert old_kernels.KERNEL_OPT == "the baseline level"  # not this checkout's
    assert old_minhash.KERNEL_OPT == "the baseline level"
    assert sys.modules["curator_dask._kernels"] is ours  # put back for this checkout
    assert ours.KERNEL_OPT != "the baseline level"
