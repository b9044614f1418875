"""SciPy, which dask and numba import only if it is there, is not imported on a command run.

``dask.array`` and ``dask.dataframe`` (imported by every command that reads data) import
``scipy.sparse`` and ``scipy.fftpack`` when SciPy is installed, to register sparse matrices
as a chunk type and to wrap SciPy's FFTs; numba's first kernel call imports
``scipy.linalg.cython_blas`` to find out whether ``np.convolve`` may call BLAS; ``import
numba`` imports SciPy's top-level package to check that its version is 1.0 or later (0.03
CPU-s and 3 MB). curator_dask uses none of these, but a run pays about 0.7 CPU-s and 25 MB
for them (issue 22; ``bench/bench_fuzzy_cost.py``). SciPy is installed by the ``models``
extra.

:func:`defer_optional_scipy` makes exactly those optional imports fail as if SciPy were
absent, as it is in a base install: an import of SciPy from anywhere else (a user's stage,
scikit-learn) is untouched, and so is an ``np.dot`` in a numba kernel (numba looks for BLAS
again when it compiles one). What is lost is the optional part: in the process, dask arrays
of SciPy sparse chunks are not recognised as such, and ``np.convolve``/``np.correlate`` in a
numba kernel use numba's loop instead of BLAS. ``curator-dask`` calls it for its own process
and (:mod:`curator_dask._worker_warnings`) its local worker processes; a library user's
process is left as it is.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

#: Modules whose import of SciPy is optional and unused here.
_OPTIONAL_IN = ("dask.array", "dask.dataframe", "numba.np.arraymath")
#: Modules (exactly these, not their submodules) whose import of SciPy is optional and unused.
_OPTIONAL_EXACT = ("numba",)
#: Frames skipped to find who imports (numba's arraymath asks through numba.np.linalg).
_PASS_THROUGH = ("importlib", "_frozen_importlib", "numba.np.linalg")


class _DeferScipy:
    """A meta path finder that refuses SciPy to the modules of ``_OPTIONAL_IN`` only."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "scipy" and not name.startswith("scipy."):
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").startswith(_PASS_THROUGH):
            frame = frame.f_back  # type: ignore[assignment]
        importer = frame.f_globals.get("__name__", "") if frame is not None else ""
        if importer.startswith(_OPTIONAL_IN) or importer in _OPTIONAL_EXACT:
            raise ImportError(f"{name}: optional for {importer}, not imported by curator-dask")
        return None


def defer_optional_scipy() -> Callable[[], None]:
    """Refuse SciPy to dask's and numba's optional imports; return what undoes it.

    Does nothing when it is in place already.
    """
    if any(isinstance(f, _DeferScipy) for f in sys.meta_path):
        return lambda: None
    finder = _DeferScipy()
    sys.meta_path.insert(0, finder)  # type: ignore[arg-type]

    def undo() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)  # type: ignore[arg-type]

    return undo
