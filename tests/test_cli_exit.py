"""The ``curator-dask`` program ends a dedup command without the interpreter's teardown of
its modules (``cli.console_main``), having flushed what it printed and logged; a failed
command exits as usual."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _program(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``curator-dask ARGS`` as the console script runs it, with an object whose finalizer
    says ``teardown`` when the interpreter's teardown frees it."""
    code = (
        "import os, sys\n"
        "class Teardown:\n"
        "    def __del__(self):\n"
        "        os.write(2, b'teardown\\n')\n"
        "kept = Teardown()\n"
        f"sys.argv = ['curator-dask', *{args!r}]\n"
        "from curator_dask.cli import console_main\n"
        "console_main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_dedup_command_ends_without_the_teardown_its_output_whole(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    texts = ["a b c", "d e f", "a b c"]
    src.write_text(
        "".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts))
    )
    log = tmp_path / "run.log"
    done = _program(
        ["exact-dedup", str(src), "--output", str(tmp_path / "out"), "--json",
         "--log-file", str(log)]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["removed"] == 1  # printed whole
    assert "step output done" in log.read_text()  # logged whole
    assert "teardown" not in done.stderr


def test_a_failed_command_exits_as_usual(tmp_path: Path) -> None:
    done = _program(["exact-dedup", str(tmp_path / "missing"), "--output", str(tmp_path / "o")])
    assert done.returncode != 0
    assert "teardown" in done.stderr
