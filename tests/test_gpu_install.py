"""A RAPIDS that cannot import under this numpy is reported in one line that names the fix.

On a CUDA 13 image with numpy 2.5, ``import cudf`` fails inside numba-cuda
(``np.row_stack`` is gone). Simulated here with stand-in ``cudf``/``dask_cuda`` packages
that fail the same way, and numpy's reported version set to 2.5.2.
"""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

import numpy
import pytest

from curator_dask import _backend
from curator_dask.cli import main
from curator_dask.cluster import ClusterConfig, get_client

# what numba-cuda raises while cudf imports it
_NUMBA_FAILURE = "raise AttributeError(\"module 'numpy' has no attribute 'row_stack'\")\n"


@pytest.fixture
def broken_rapids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("cudf", "dask_cuda"):
        pkg = tmp_path / name
        pkg.mkdir()
        (pkg / "__init__.py").write_text(_NUMBA_FAILURE)
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(numpy, "__version__", "2.5.2")
    return tmp_path


def _is_the_numpy_message(msg: str) -> None:
    assert "\n" not in msg
    assert "numpy 2.5.2" in msg
    assert "numpy>=2.0,<2.4" in msg
    assert "row_stack" in msg


def test_backend_switch_names_the_numpy_to_install(broken_rapids: Path) -> None:
    with pytest.raises(ImportError) as info:
        _backend.frame_module("cudf")
    assert str(info.value).startswith("cudf cannot be imported with numpy 2.5.2")
    _is_the_numpy_message(str(info.value))


def test_gpu_cluster_start_names_the_numpy_to_install(broken_rapids: Path) -> None:
    with pytest.raises(ImportError) as info, get_client(ClusterConfig(kind="gpu")):
        pass
    _is_the_numpy_message(str(info.value))


def test_cli_gpu_run_prints_one_line(
    broken_rapids: Path, sample_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        f"reader: {{class: JsonlReader, params: {{paths: {sample_path}}}}}\n"
        f"writer: {{class: ParquetWriter, params: {{path: {tmp_path / 'out'}}}}}\n"
    )
    assert main(["run", str(pipeline), "--gpu"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("curator-dask: error:")]
    assert len(errors) == 1
    _is_the_numpy_message(errors[0])
    assert not any("Traceback" in line for line in err)


def test_other_import_failures_are_left_alone(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "cudf"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('no CUDA driver found')\n")
    monkeypatch.delitem(sys.modules, "cudf", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="no CUDA driver"):
        _backend.frame_module("cudf")


def test_the_gpu_extras_pin_the_numpy_the_message_names() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parent.parent / "setup.cfg")
    extras = cfg["options.extras_require"]
    for extra in ("gpu", "gpu-cu12", "gpu-cu13"):
        assert f"numpy>=2.0,<{_backend.NUMPY_CEILING}" in extras[extra].split("\n"), extra


def test_the_gpu_extras_install_no_crossfit() -> None:
    """crossfit 0.0.9 cannot run on the pinned cudf 26.10 (docs/gpu.md, "crossfit"): its
    outputs are built with ``cudf.core.column.ListColumn(...)``, which 26.10 refuses
    ("must be instantiated via from_pylibcudf"), and its tokenizer imports
    ``cudf.core.subword_tokenizer``, gone; its own GPU extra names cu12 builds only. The
    project's torch path is the one kept, so the extras do not install it."""
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parent.parent / "setup.cfg")
    extras = cfg["options.extras_require"]
    for extra in ("gpu", "gpu-cu12", "gpu-cu13"):
        names = [line.strip().split(">")[0].split("=")[0] for line in extras[extra].split("\n")]
        assert "crossfit" not in names, extra


def test_gpu_cluster_without_cudf_still_asks_only_for_dask_cuda(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cudf", None)  # not installed
    monkeypatch.setitem(sys.modules, "dask_cuda", None)
    with (
        pytest.raises(ImportError, match="dask_cuda is not installed"),
        get_client(ClusterConfig(kind="gpu")),
    ):
        pass
