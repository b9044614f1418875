"""The one place where pandas and cudf partitions meet.

The dataframe backend is dask's own switch, ``dask.config.set({"dataframe.backend": "cudf"})``.
Partition-level code asks this module for the frame library instead of importing
pandas or cudf directly, so a stage written once runs on both.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import dask.config
import pandas as pd


def backend_name() -> str:
    """Return dask's current dataframe backend, ``"pandas"`` or ``"cudf"``."""
    return str(dask.config.get("dataframe.backend", default="pandas"))


#: The first numpy release the pinned RAPIDS (26.10) does not import with: numba-cuda
#: calls ``np.row_stack``, removed in numpy 2.5. The gpu extras pin numpy below
#: :data:`NUMPY_CEILING` (the core's tested range), and 2.3.5 is the release checked.
RAPIDS_NUMPY_BREAKS = (2, 5)
NUMPY_CEILING = "2.4"


def _numpy_version() -> tuple[int, int]:
    import numpy

    major, minor = numpy.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def import_rapids(name: str, required: bool = True) -> ModuleType | None:
    """Import a RAPIDS module (``cudf``, ``dask_cuda``...), or say in one line why not.

    Missing: which extra installs it (``None`` instead when not ``required``). Present
    but failing to import under a numpy the release does not support (numba-cuda's
    ``np.row_stack`` with numpy >= 2.5): which numpy to install, not numba's traceback.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] != name.split(".")[0]:
            raise _numpy_error(name, err) or err from err
        if not required:
            return None
        raise ImportError(
            f"{name} is not installed: pip install 'curator_dask[gpu-cu13]' (CUDA 13 driver) "
            "or 'curator_dask[gpu-cu12]' (CUDA 12); see docs/gpu.md"
        ) from err
    except Exception as err:
        raise _numpy_error(name, err) or err from err


def _numpy_error(name: str, err: BaseException) -> ImportError | None:
    import numpy

    if _numpy_version() < RAPIDS_NUMPY_BREAKS and "row_stack" not in str(err):
        return None
    return ImportError(
        f"{name} cannot be imported with numpy {numpy.__version__}: RAPIDS 26.10's numba-cuda "
        f"needs numpy < {RAPIDS_NUMPY_BREAKS[0]}.{RAPIDS_NUMPY_BREAKS[1]} (np.row_stack is "
        f"gone); install the numpy the gpu extras pin: pip install 'numpy>=2.0,<{NUMPY_CEILING}' "
        f"(2.3.5 is tested) [{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}]"
    )


#: The settings :func:`device_for` accepts by default: ``auto`` follows the dataframe backend.
DEVICES = ("auto", "host", "gpu")
#: The settings that mean the host (fuzzy dedup's ``minhash-device`` says ``cpu``).
HOST_SETTINGS = ("host", "cpu")


def device_for(key: str, library: str, settings: tuple[str, ...] = DEVICES) -> str:
    """Where a step with a host and a GPU implementation runs: ``"host"`` or ``"gpu"``.

    The one seam for such choices (semantic dedup's k-means, fuzzy dedup's signatures and
    shingles): the step reads its ``curator.<key>`` setting here and keeps one table of
    implementations, never an ``if gpu`` of its own. ``settings`` are the values the key
    takes, its default first (``auto|host|gpu``; fuzzy dedup's ``minhash-device`` says
    ``cpu`` for the host, its ``shingle-device`` has no ``auto``). ``auto`` follows dask's
    dataframe backend: ``gpu`` under cudf when ``library`` (the GPU implementation's
    package, e.g. ``cuml``) imports, else ``host``, since both give the same result (each
    step says to what tolerance); ``gpu`` requires ``library`` and says in one line which
    extra installs it; ``host`` (``cpu``) never touches it.

    >>> import dask
    >>> with dask.config.set({"curator.dedup.kmeans-device": "auto"}):
    ...     device_for("dedup.kmeans-device", "cuml")  # the pandas backend
    'host'
    """
    setting = str(dask.config.get(f"curator.{key}", default=settings[0]))
    if setting not in settings:
        raise ValueError(f"curator.{key} must be one of {'|'.join(settings)}, got {setting!r}")
    if setting in HOST_SETTINGS or (setting == "auto" and backend_name() == "pandas"):
        return "host"
    return "gpu" if import_rapids(library, required=setting == "gpu") is not None else "host"


def import_error(module: str) -> str | None:
    """None where ``module`` imports in this process, else why not, in one line.

    What :func:`device_on_workers` runs on each worker.

    >>> import_error("json") is None
    True
    >>> import_error("curator_dask_no_such_module")
    "ModuleNotFoundError: No module named 'curator_dask_no_such_module'"
    """
    try:
        importlib.import_module(module)
    except Exception as err:
        text = str(err).splitlines()[0] if str(err) else ""
        return f"{type(err).__name__}: {text}"
    return None


def device_on_workers(device: str, key: str, module: str, client: Any) -> tuple[str, str | None]:
    """``device`` as :func:`device_for` picked it, checked on the workers that run the step.

    :func:`device_for` imports the GPU library in the client's process. A worker's process
    can still fail to import it (another library path, a shared library loaded first by
    another package), and a task that carries the library's objects then kills each worker
    that unpickles it, until the scheduler gives up. So before such a step every worker of
    ``client`` imports ``module``: where all do, ``(device, None)``; where one does not,
    ``("host", note)`` under ``auto`` (``note`` names the first such worker and its error,
    for the caller to say), and an ``ImportError`` saying the same when ``curator.<key>`` is
    ``gpu``. ``host``, or no client (one process), is returned as it is.
    """
    if device != "gpu" or client is None:
        return device, None
    answers = client.run(import_error, module)
    failed = sorted((w, e) for w, e in answers.items() if e)
    if not failed:
        return device, None
    worker, err = failed[0]
    where = f"{module} does not import on {len(failed)} of {len(answers)} workers ({worker}: {err})"
    if str(dask.config.get(f"curator.{key}", default="auto")) == "gpu":
        raise ImportError(f"curator.{key} is gpu, but {where}; see docs/gpu.md")
    return "host", f"{where}: this step runs on the host"


def frame_module(name: str | None = None) -> ModuleType:
    """Return the module (``pandas`` or ``cudf``) that builds partitions for ``name``."""
    name = name or backend_name()
    if name == "pandas":
        return pd
    mod = import_rapids(name)
    assert mod is not None
    return mod


def to_backend(part: Any, name: str | None = None) -> Any:
    """Convert a pandas partition to the current backend (no-op on pandas)."""
    mod = frame_module(name)
    if mod is pd or isinstance(part, (mod.DataFrame, mod.Series)):
        return part
    # cudf's converter is the module-level ``cudf.from_pandas`` (frames, series and
    # indexes alike); its DataFrame and Series classes have no ``from_pandas``.
    return mod.from_pandas(part)


def to_pandas(part: Any) -> pd.DataFrame:
    """Return ``part`` as pandas (cudf partitions are copied to host)."""
    if isinstance(part, (pd.DataFrame, pd.Series)):
        return part
    return part.to_pandas()


def array_module(obj: Any) -> ModuleType:
    """Return numpy or cupy, whichever holds ``obj``'s data."""
    mod = type(obj).__module__.split(".")[0]
    if mod in ("cudf", "cupy"):
        import cupy

        return cupy
    import numpy

    return numpy
