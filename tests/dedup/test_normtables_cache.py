"""The normalisation tables are built once per machine and loaded by every later process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dask.config
import numpy as np
import pytest

from curator_dask.dedup import _normtables

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def built() -> _normtables.NormTables:
    return _normtables._build()


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, built: _normtables.NormTables) -> list[int]:
    """A process that has not loaded the tables yet; counts the builds (the real tables)."""
    builds: list[int] = []

    def build() -> _normtables.NormTables:
        builds.append(1)
        return built

    monkeypatch.setattr(_normtables, "_build", build)
    _normtables._load_or_build.cache_clear()
    yield builds
    _normtables._load_or_build.cache_clear()


def _equal(a: _normtables.NormTables, b: _normtables.NormTables) -> bool:
    return all(
        np.array_equal(x, y) and (not hasattr(x, "dtype") or x.dtype == y.dtype)
        for x, y in zip(a, b, strict=True)
    )


def test_a_second_process_loads_the_tables_it_does_not_build_them(tmp_path: Path) -> None:
    code = (
        "import time\n"
        "from curator_dask.dedup import _normtables as m\n"
        "t = time.process_time(); tables = m.norm_tables()\n"
        "print(time.process_time() - t, int(tables.cls.sum()), int(tables.out_off[-1]))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DASK_CURATOR__CACHE_DIR": str(tmp_path / "cache"),
    }
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [
        f"normtables-{_normtables._digest()}.npz"
    ]
    assert runs[0][1:] == runs[1][1:]  # the same tables
    # built (about a second of CPU) the first time, loaded the second
    assert float(runs[1][0]) < float(runs[0][0]) / 4


def test_loaded_tables_equal_built_ones(tmp_path: Path, fresh: list[int], built) -> None:
    with dask.config.set({"curator.cache-dir": str(tmp_path)}):
        first = _normtables.norm_tables()
        _normtables._load_or_build.cache_clear()
        second = _normtables.norm_tables()
    assert fresh == [1]  # built once, then read from the file
    assert _equal(first, built)
    assert _equal(second, built)
    assert type(second.max_tokens) is int


def test_a_changed_builder_or_unicode_version_is_a_new_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: list[int]
) -> None:
    with dask.config.set({"curator.cache-dir": str(tmp_path)}):
        _normtables.norm_tables()
        digest = _normtables._digest()
        edited = tmp_path / "edited.py"
        edited.write_text(Path(_normtables.__file__).read_text() + "\n# changed\n")
        monkeypatch.setattr(_normtables, "__file__", str(edited))
        assert _normtables._digest() != digest
        _normtables._load_or_build.cache_clear()
        _normtables.norm_tables()
        monkeypatch.setattr(_normtables.unicodedata, "unidata_version", "0.0.0")
        _normtables._load_or_build.cache_clear()
        _normtables.norm_tables()
    assert fresh == [1, 1, 1]
    assert len(list(tmp_path.glob("normtables-*.npz"))) == 3


def test_a_damaged_entry_is_rebuilt_and_replaced(
    tmp_path: Path, fresh: list[int], built: _normtables.NormTables
) -> None:
    path = tmp_path / f"normtables-{_normtables._digest()}.npz"
    path.write_bytes(b"PK\x03\x04 not a whole file")
    with dask.config.set({"curator.cache-dir": str(tmp_path)}):
        assert _equal(_normtables.norm_tables(), built)
        _normtables._load_or_build.cache_clear()
        assert _equal(_normtables.norm_tables(), built)
    assert fresh == [1]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_without_a_usable_cache_each_process_builds(
    tmp_path: Path, fresh: list[int], built: _normtables.NormTables
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for setting in (False, str(blocker / "cache")):
        with dask.config.set({"curator.cache-dir": setting}):
            _normtables._load_or_build.cache_clear()
            assert _equal(_normtables.norm_tables(), built)
    assert fresh == [1, 1]


def _python(code: str, **env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def test_the_fast_code_point_table_is_derived_once_per_machine(tmp_path: Path) -> None:
    code = (
        "import hashlib\n"
        "from curator_dask.dedup import minhash as m\n"
        "calls = []\n"
        "derive = m._fast_kinds\n"
        "m._fast_kinds = lambda *a: calls.append(1) or derive(*a)\n"
        "kinds, cps = m._fast_table()\n"
        "print(len(calls), kinds.dtype, cps.dtype,\n"
        "      hashlib.sha256(kinds.tobytes() + cps.tobytes()).hexdigest())\n"
    )
    cache = {"DASK_CURATOR__CACHE_DIR": str(tmp_path / "cache")}
    first, second = (_python(code, **cache) for _ in range(2))
    assert first[0] == "1"  # derived
    assert second[0] == "0"  # loaded from the file: not derived again
    assert first[1:] == second[1:] == ["uint8", "int32", first[3]]
    assert len(list((tmp_path / "cache").glob("fasttable-*.npz"))) == 1
    # without a cache directory: derived in the process, the same arrays
    from curator_dask.dedup import minhash

    with dask.config.set({"curator.cache-dir": False}):
        minhash._fast_table.cache_clear()
        kinds, cps = minhash._fast_table()
    minhash._fast_table.cache_clear()
    t = minhash.norm_tables()
    want = minhash._fast_kinds(
        t.cls, t.out_off, t.out_data, t.last_starter, t.ends_starter, t.tail_marks
    )
    assert np.array_equal(kinds, want[0])
    assert np.array_equal(cps, want[1])
