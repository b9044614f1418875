"""Time spent compiling numba kernels is reported apart from the stages' work."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np
import pandas as pd
import pytest

from curator_dask import _ckernels, _kernels
from curator_dask.monitoring.report import render_report_html
from curator_dask.monitoring.timeline import as_frame
from curator_dask.progress import Progress, following_compiles
from curator_dask.results import PipelineResult
from curator_dask.stage import ProcessingStage, StageStats, run_stage

ROOT = Path(__file__).resolve().parent.parent


def _fresh_kernel():  # type: ignore[no-untyped-def]
    """A kernel no process has compiled (a new function object: numba's cache is not asked)."""

    def body(x):  # type: ignore[no-untyped-def]
        total = 0
        for i in range(x.shape[0]):
            total += x[i] * (i % 7)
        return total

    return numba.njit(body)


class _Compiles(ProcessingStage):
    """A stage whose first call compiles a kernel."""

    def process(self, part: pd.DataFrame) -> pd.DataFrame:
        _fresh_kernel()(np.arange(len(part), dtype=np.int64))
        return part


def test_stage_seconds_exclude_the_compile_and_count_it_apart() -> None:
    _kernels.listen()
    part = pd.DataFrame({"text": ["a b", "c d e"]})
    t0 = time.perf_counter()
    _, stats = run_stage(_Compiles(), part)
    wall = time.perf_counter() - t0
    assert stats.compile_seconds > 0.01  # numba compiled the kernel
    assert stats.seconds < stats.compile_seconds  # the work itself is tiny
    assert stats.seconds + stats.compile_seconds <= wall + 1e-6
    # the compile time travels with the statistics and is summed over partitions
    again = StageStats.from_dict(stats.to_dict())
    assert again.compile_seconds == stats.compile_seconds
    assert (stats + again).compile_seconds == 2 * stats.compile_seconds


def test_following_compiles_says_one_line_and_totals_the_compile() -> None:
    _kernels.listen()
    stream = io.StringIO()
    with following_compiles(None, True, stream) as seen:
        _fresh_kernel()(np.arange(3, dtype=np.int64))
        _fresh_kernel()(np.arange(3, dtype=np.int64))
    assert seen.kernels == ["body", "body"]
    assert seen.seconds > 0.01
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert "compiling kernels..." in lines[0]


def test_the_progress_line_says_compiling_while_a_kernel_compiles() -> None:
    _kernels.listen()
    counter = Progress("run", 2, stream=io.StringIO())
    seen_while = []

    def sink(state: str, kernel: str, seconds: float) -> None:
        if state == "start":
            seen_while.append(counter.status())

    with following_compiles(None, False):
        _kernels.compile_sinks().append(sink)  # told after following_compiles' own sink
        try:
            _fresh_kernel()(np.arange(3, dtype=np.int64))
        finally:
            _kernels.compile_sinks().remove(sink)
        after = counter.status()
    assert seen_while
    assert seen_while[0].endswith("compiling kernels..."), seen_while
    assert "compiling" not in after


def _result(compile_seconds: float) -> PipelineResult:
    stages = [
        StageStats("JsonlReader", 10, 10, 0, 0.5),
        StageStats("WordCountFilter", 10, 7, 0, 0.2, compile_seconds=compile_seconds),
        StageStats("JsonlWriter", 7, 7, 0, 0.1),
    ]
    return PipelineResult("demo", stages, 10, 7, 3, 0, 1.0, "out", 1)


def test_the_summary_and_stats_show_compile_time_apart() -> None:
    first = _result(12.34)
    assert first.compile_seconds == 12.34
    assert first.to_dict()["compile_seconds"] == 12.34
    text = first.summary()
    assert "compile 12.3 s" in text
    assert text.splitlines()[0].split()[-1] == "compile"
    warm = _result(0.0)
    assert warm.to_dict()["compile_seconds"] == 0.0
    assert "compile" not in warm.summary()


def test_the_report_does_not_advise_speeding_up_a_stage_whose_time_was_its_compile() -> None:
    stats = _result(0.0).to_dict()
    stats["stages"][1].update(seconds=0.4, compile_seconds=30.0)  # a first run: all compile
    stats["stages"][0]["seconds"] = 6.0
    stats["stages"][2]["seconds"] = 5.0
    html = render_report_html(stats, as_frame(None), engine="none")
    assert "WordCountFilter</b> took" not in html
    assert "Compiling kernels</b> took 30.0 s" in html
    assert "Compile" in html  # the card


# A pipeline on a machine whose caches are empty, then again with them warm (a new process
# each time, as a later run is): the stats say the compile apart, the progress line says it.
_RUN = """
import json, sys
from distributed import Client
from curator_dask.executor import DaskExecutor
from curator_dask.filters import WordCountFilter
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.pipeline import Pipeline

src, out = sys.argv[1], sys.argv[2]
stages = [JsonlReader(src), WordCountFilter(min_words=3), JsonlWriter(out)]
with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
    result = Pipeline("compile", stages).run(executor=DaskExecutor(client=c, progress=True))
print(result.summary())
"""


@pytest.mark.parametrize("c_kernels", ["false", "auto"], ids=["numba", "c"])
def test_a_first_run_reports_its_compile_and_a_warm_run_none(tmp_path: Path, c_kernels) -> None:
    """numba's kernels, or (``auto``) the C library built once per machine where a compiler
    is, numba's kernels where none is: either way the compile is reported apart."""
    numba_only = c_kernels == "false" or _ckernels.compiler() is None
    src = tmp_path / "in.jsonl"
    docs = [{"id": str(i), "text": " ".join(["word"] * (i % 5))} for i in range(40)]
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),  # a machine that never compiled them
        "DASK_CURATOR__CACHE_DIR": str(tmp_path / "curator"),
        "DASK_CURATOR__C_KERNELS": c_kernels,
    }

    def run(name: str) -> tuple[dict, str]:  # type: ignore[type-arg]
        out = tmp_path / name
        proc = subprocess.run(
            [sys.executable, "-c", _RUN, str(src), str(out)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        stats = json.loads((tmp_path / f"{name}.curator" / "_stats.json").read_text())
        return stats, proc.stdout + proc.stderr

    cold, said = run("cold")
    by_name = {s["name"]: s for s in cold["stages"]}
    compiled = by_name["WordCountFilter"]["compile_seconds"]
    assert compiled > 0.05, cold["stages"]
    if numba_only:  # 40 documents: numba's compile is most of the stage's time
        assert by_name["WordCountFilter"]["seconds"] < compiled
    assert cold["compile_seconds"] >= compiled
    assert "compiling kernels..." in said
    assert f"compile {cold['compile_seconds']:.1f} s" in said
    assert cold["kept"] == sum(len(d["text"].split()) >= 3 for d in docs)

    warm, said = run("warm")
    assert warm["compile_seconds"] == 0.0, warm["stages"]  # loaded from the cache
    assert "compiling kernels" not in said
    assert warm["kept"] == cold["kept"]


def test_a_dedup_step_counts_the_compiles_of_every_call_that_computes_in_it() -> None:
    """A step's kernels compiled by ``dask.compute`` (the dedup workflows' direct calls) are
    counted with those of :meth:`Reporter.compute`, once each."""
    import dask

    from curator_dask.progress import Reporter

    _kernels.listen()
    stream = io.StringIO()
    reporter = Reporter("fuzzy-dedup", stream=stream)
    reporter.enabled = True

    def compiles(n: int) -> int:
        return int(_fresh_kernel()(np.arange(n, dtype=np.int64)))

    with following_compiles(None, False) as everything, reporter.step("lsh"):
        reporter.compute([dask.delayed(compiles)(3)], "buckets")
        (direct,) = dask.compute(dask.delayed(compiles)(4), scheduler="threads")
    assert direct == 0 * 0 + 1 * 1 + 2 * 2 + 3 * 3
    assert everything.kernels == ["body", "body"]
    assert reporter.compile_seconds == pytest.approx(everything.seconds)  # both, once each
    assert reporter.compile_seconds > 0.05
    lines = stream.getvalue().splitlines()
    done = [line for line in lines if "step lsh done" in line]
    assert f"of which {reporter.compile_seconds:.1f}s compiling kernels" in done[0]
    assert sum("compiling kernels..." in line for line in lines) == 1
