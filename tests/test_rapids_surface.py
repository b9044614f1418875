"""Every RAPIDS name the package uses exists in the pinned release (no GPU, no RAPIDS).

The release's surface is recorded from its wheels by scripts/record_rapids_surface.py
into tests/data/rapids_surface.json; see tests/_rapids_surface.py.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import _rapids_surface as R

ROOT = Path(__file__).resolve().parent.parent


def _surface() -> dict:
    return json.loads(R.SURFACE.read_text(encoding="utf-8"))


def test_every_rapids_name_the_package_uses_is_in_the_pinned_release():
    uses = R.scanned_uses(ROOT)
    names = {u.name for u in uses}
    # the scan sees through curator_dask._backend and `from dask_cuda import ...`
    assert "cudf.from_pandas" in names
    assert "dask_cuda.LocalCUDACluster" in names
    assert any(u.name == "dask_cuda.LocalCUDACluster" and u.kwargs for u in uses)
    problems = R.check(uses, _surface())
    assert not problems, "\n".join(problems)


def test_the_recorded_release_is_the_pinned_one():
    setup = (ROOT / "setup.cfg").read_text(encoding="utf-8")
    surface = _surface()
    for dist, version in surface["versions"].items():
        series = ".".join(version.split(".")[:2])
        assert f"{dist}=={series}.*" in setup or f"{dist}[cu13]=={series}.*" in setup, dist
    for pin in R.PINS:
        assert pin.split("==")[0] in surface["versions"]


_OLD_CALLS = """
import cudf as gdf
from curator_dask import _backend
from curator_dask._backend import frame_module


def to_backend(part):
    mod = frame_module()
    return mod.DataFrame.from_pandas(part)


def series(values):
    return gdf.Series.from_pandas(values)


def concat(parts):
    return _backend.frame_module().concat(parts)


def convert(pdf):
    return gdf.from_pandas(pdf, nan_as_nul=False)
"""


def test_the_check_catches_the_slips_seen_on_a_gpu(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "old.py").write_text(_OLD_CALLS)
    uses = R.package_uses(pkg)
    problems = R.check(uses, _surface())
    text = "\n".join(problems)
    assert re.search(r"old.py:\d+: cudf.DataFrame.from_pandas: .*no attribute 'from_pandas'", text)
    assert re.search(r"old.py:\d+: cudf.Series.from_pandas: .*no attribute 'from_pandas'", text)
    assert "nan_as_nul'" in text  # a keyword cudf.from_pandas does not take
    assert "concat" not in text  # cudf.concat exists
    assert len(problems) == 3


def _wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)
    return path


def test_the_recorder_follows_reexports_inheritance_and_cython(tmp_path):
    whl = _wheel(
        tmp_path / "cudf_cu13-26.10.2-cp311-abi3-manylinux_2_28_x86_64.whl",
        {
            "cudf_cu13-26.10.2.dist-info/METADATA": "Name: cudf-cu13\nVersion: 26.10.2\n",
            "cudf/__init__.py": "from cudf.core.frame import DataFrame, from_pandas\n"
            "from cudf.core import frame\nfrom cudf._fast import Fast\n",
            "cudf/core/__init__.py": "",
            "cudf/core/frame.py": "from .base import Base\n"
            "class DataFrame(Base):\n"
            "    def __init__(self, data=None, *, index=None):\n        self.cols = data\n"
            "    def to_arrow(self, preserve_index=None): ...\n"
            "DataFrame.ne = object()\n"
            "def from_pandas(obj, nan_as_null=None): ...\n",
            "cudf/core/base.py": "import pandas as pd\nclass Base:\n    def to_pandas(self): ...\n",
            "cudf/_fast.pyx": "from cudf.core.base import Base\n"
            "cdef class Fast(\n    Base,\n):\n"
            "    def __init__(self, int n,\n                 k=3):\n        pass\n"
            "    cpdef double run(self, x): ...\n",
        },
    )
    surface = R.record([whl], [R.Use("x", "cudf.core.frame.DataFrame")], out=None)
    assert surface["versions"] == {"cudf-cu13": "26.10.2"}
    names = surface["modules"]["cudf"]["names"]
    assert names["DataFrame"] == "class:cudf.core.frame.DataFrame"
    assert names["from_pandas"] == "function:cudf.core.frame.from_pandas"
    frame = surface["classes"]["cudf.core.frame.DataFrame"]
    assert {"to_arrow", "to_pandas", "ne", "cols"} <= set(frame["attrs"])
    assert "from_pandas" not in frame["attrs"]
    assert frame["init"] == {"params": ["data", "index"], "varkw": False}
    fast = surface["classes"]["cudf._fast.Fast"]
    assert {"run", "to_pandas"} <= set(fast["attrs"])
    assert fast["init"]["params"] == ["n", "k"]
    ok = R.check(
        [R.Use("a", "cudf.from_pandas", ("nan_as_null",)), R.Use("b", "cudf.frame.DataFrame")],
        surface,
    )
    assert ok == []
    bad = R.check([R.Use("c", "cudf.DataFrame", ("columns",))], surface)
    assert len(bad) == 1
    assert "columns" in bad[0]
