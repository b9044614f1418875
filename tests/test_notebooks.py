"""Execute every notebook in ``notebooks/`` top to bottom; check they are committed stripped.

Each notebook runs in a fresh kernel of this interpreter (a kernel spec written to a temp
dir and found through ``JUPYTER_PATH``), in a temp working directory with ``TMPDIR`` pointing
inside it, so nothing is left behind. A failing cell fails the test. The cluster notebook
gets a real ``dask scheduler`` and one ``dask worker`` started here as subprocesses on
127.0.0.1, passed to it through ``CURATOR_SCHEDULER_FILE``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _procs import start_dask, stop_dask

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
ALL = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
CLUSTER_NOTEBOOK = "03_connect_to_cluster.ipynb"
KERNEL = "curator-dask-test"
CELL_TIMEOUT = 180  # seconds per cell; the notebooks take a few seconds each

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_notebooks_exist() -> None:
    assert ALL == [
        "01_explore_corpus.ipynb",
        "02_deduplicate.ipynb",
        "03_connect_to_cluster.ipynb",
    ]


@pytest.mark.parametrize("name", ALL)
def test_notebook_is_stripped(name: str) -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, f"{name}: cells {dirty} have outputs or an execution count; strip them"
    timed = [i for i, cell in enumerate(nb.cells) if "execution" in cell.metadata]
    assert not timed, f"{name}: cells {timed} carry execution timestamps; strip them"
    assert all("outputs" not in c for c in nb.cells if c.cell_type == "markdown")


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Install a kernel spec running ``sys.executable`` into a temp prefix; point Jupyter at it."""
    pytest.importorskip("nbclient")
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter")
    install(kernel_name=KERNEL, display_name="curator_dask tests", prefix=str(prefix))
    spec = json.loads((prefix / "share/jupyter/kernels" / KERNEL / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    mp.setenv("JUPYTER_PLATFORM_DIRS", "1")  # jupyter_core's path-migration warning
    mp.delenv("CURATOR_SCHEDULER_ADDRESS", raising=False)
    mp.delenv("CURATOR_SCHEDULER_FILE", raising=False)
    mp.delenv("CURATOR_NOTEBOOK_WORKDIR", raising=False)
    yield prefix
    mp.undo()


def _run_notebook(name: str, workdir: Path, env: dict[str, str]) -> tuple[list[str], int]:
    """Execute a notebook in ``workdir``.

    Returns the text of its outputs, cell by cell, and the number of PNG images shown.
    """
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    tmp = workdir / "tmp"
    tmp.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(tmp))  # the notebooks' tempfile.mkdtemp() lands here
        for key, value in env.items():
            mp.setenv(key, value)
        client = nbclient.NotebookClient(
            nb,
            timeout=CELL_TIMEOUT,
            kernel_name=KERNEL,
            resources={"metadata": {"path": str(workdir)}},
        )
        client.execute()  # raises CellExecutionError naming the failing cell
    texts = []
    images = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        parts = []
        for out in cell.outputs:
            if out.output_type == "stream":
                parts.append(out.text)
            elif "data" in out:
                parts.append(out.data.get("text/plain", ""))
                parts.append(out.data.get("text/html", ""))
                images += "image/png" in out.data
        texts.append("".join(parts))
    return texts, images


def _stderr_warnings(texts: list[str]) -> list[str]:
    return [line for text in texts for line in text.splitlines() if "Warning" in line]


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ALL)
def test_notebook_runs(name: str, kernel_env: Path, tmp_path: Path) -> None:
    """Every notebook, as a reader runs it (the cluster notebook starts a local cluster)."""
    texts, images = _run_notebook(name, tmp_path, {})
    assert not _stderr_warnings(texts), _stderr_warnings(texts)
    shown = "\n".join(texts)
    if name.startswith("01_"):
        if _has_matplotlib():
            assert images == 1, "the score histograms were not drawn"
        assert "<del" in shown or "<ins" in shown or "removed" in shown  # compare_documents
    if name.startswith("02_"):
        if _has_matplotlib():
            assert images == 2, "the LSH curve, Jaccard and group-size plots were not drawn"
        assert "<del" in shown or "<ins" in shown, "the duplicate group shows no differences"
    if name == CLUSTER_NOTEBOOK:
        assert "kind: cpu | local cluster" in shown
        assert "<progress" in shown, "the run's progress bar did not render"
        assert "read 3,846 = kept" in shown or "&#10003; read" in shown  # PipelineResult HTML
        if _has_matplotlib():
            assert images == 1, "the memory timeline was not drawn"
    # Everything written went under the notebook's temp dir, nothing next to it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]
    assert any((tmp_path / "tmp").iterdir())


# -- the cluster notebook against a real scheduler and worker ------------------------------
@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[Path]:
    """A ``dask scheduler`` and one ``dask worker`` on 127.0.0.1; yields the scheduler file."""
    sched_file = tmp_path / "scheduler.json"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            start_dask(
                [
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--dashboard-address",
                    "127.0.0.1:0",
                    "--scheduler-file",
                    str(sched_file),
                ],
                tmp_path / "scheduler.log",
            )
        )
        deadline = time.monotonic() + 60
        while not sched_file.exists():
            if procs[0].poll() is not None or time.monotonic() > deadline:
                pytest.fail((tmp_path / "scheduler.log").read_text())
            time.sleep(0.1)
        procs.append(
            start_dask(
                [
                    "worker",
                    "--scheduler-file",
                    str(sched_file),
                    "--host",
                    "127.0.0.1",
                    "--nthreads",
                    "2",
                    "--memory-limit",
                    "2GB",
                    "--no-dashboard",
                    "--local-directory",
                    str(tmp_path / "worker-space"),
                ],
                tmp_path / "worker.log",
            )
        )
        yield sched_file
    finally:
        for proc in reversed(procs):
            stop_dask(proc)


def _scheduler_task_prefixes(sched_file: Path) -> list[str]:
    from distributed import Client

    with Client(scheduler_file=str(sched_file), timeout="30s") as client:
        return client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))


ENV_VARS = {"scheduler_file": "CURATOR_SCHEDULER_FILE", "address": "CURATOR_SCHEDULER_ADDRESS"}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["scheduler_file", "address"])
def test_cluster_notebook_runs_on_running_scheduler(
    how: str, kernel_env: Path, dask_cluster: Path, tmp_path: Path
) -> None:
    """The cluster notebook, given the scheduler by CURATOR_SCHEDULER_FILE or _ADDRESS."""
    scheduler = json.loads(dask_cluster.read_text())["address"]
    where = str(dask_cluster) if how == "scheduler_file" else scheduler
    workdir = tmp_path / "nb"
    workdir.mkdir()
    texts, _ = _run_notebook(CLUSTER_NOTEBOOK, workdir, {ENV_VARS[how]: where})
    assert not _stderr_warnings(texts), _stderr_warnings(texts)
    joined = "\n".join(texts)
    assert f"kind: {how} | {where}" in joined
    assert f"scheduler: {scheduler}" in joined
    # The pipeline's tasks ran on that scheduler (the notebook closed only its client).
    assert _scheduler_task_prefixes(dask_cluster)
