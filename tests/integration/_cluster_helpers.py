"""Helpers imported by scheduler and worker subprocesses (``PYTHONPATH`` includes this dir).

- a scheduler preload that records, for every task that starts processing, the worker it
  was sent to and the resources it was restricted to;
- stages, a reader and a writer that log timestamps, for the placement and streaming tests.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd
from distributed.diagnostics.plugin import SchedulerPlugin

from curator_dask import Filter, Modifier
from curator_dask.io import JsonlReader, JsonlWriter
from curator_dask.io.base import PartitionSpec, ReadResult, WriteResult

PLUGIN_NAME = "curator-placement-log"


class PlacementLog(SchedulerPlugin):
    """Scheduler plugin: (key, worker, resource restrictions) of tasks sent to workers."""

    name = PLUGIN_NAME

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.records: list[dict[str, Any]] = []

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if finish != "processing":
            return
        ts = self.scheduler.tasks.get(key)
        if ts is None or ts.processing_on is None:
            return
        self.records.append(
            {
                "key": str(key),
                "worker": ts.processing_on.address,
                "resources": dict(ts.resource_restrictions or {}),
            }
        )


def dask_setup(scheduler: Any) -> None:
    """Preload entry point of ``dask scheduler --preload``."""
    scheduler.add_plugin(PlacementLog(scheduler))


def placement_records(dask_scheduler: Any) -> list[dict[str, Any]]:
    """Run on the scheduler with ``client.run_on_scheduler``."""
    return list(dask_scheduler.plugins[PLUGIN_NAME].records)


@dataclass(kw_only=True)
class TitleCase(Modifier):
    """A CPU stage."""

    def modify(self, text: pd.Series) -> pd.Series:
        return text.str.title()


@dataclass(kw_only=True)
class LongDocs(Filter):
    """Declared with Resources(gpus=1) in the tests: runs only on a GPU worker."""

    min_chars: int = 200

    def keep(self, text: pd.Series) -> pd.Series:
        return text.str.len() >= self.min_chars


def _log(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(f"{line} {time.time():.6f} {os.getpid()}\n")


@dataclass
class LoggingJsonlReader(JsonlReader):
    """Logs ``read <index> <time>`` when a partition read starts."""

    log: str = ""

    def read_partition(self, spec: PartitionSpec) -> ReadResult:
        _log(self.log, f"read {spec.index}")
        return super().read_partition(spec)


@dataclass
class LoggingJsonlWriter(JsonlWriter):
    """Logs ``wrote <index> <time>`` when a partition file is in place."""

    log: str = ""

    def write_partition(self, part: Any, index: int) -> WriteResult:
        result = super().write_partition(part, index)
        _log(self.log, f"wrote {index}")
        return result


def read_log(path: str) -> list[tuple[str, int, float]]:
    """Parse a log written by the logging reader/writer."""
    out = []
    with open(path) as f:
        for line in f:
            what, index, t, _pid = line.split()
            out.append((what, int(index), float(t)))
    return out


def jsonl_ids(out: Any) -> list[Any]:
    """Ids in an output directory, in partition order."""
    import json
    from pathlib import Path

    ids = []
    for f in sorted(Path(out).glob("part-*.jsonl")):
        ids += [json.loads(line)["id"] for line in f.read_text().splitlines() if line]
    return ids


def expected_ids(src: Any, min_chars: int) -> list[Any]:
    """What TitleCase -> LongDocs(min_chars) keeps, computed with plain pandas."""
    from pathlib import Path

    frames = [pd.read_json(f, lines=True) for f in sorted(Path(src).glob("shard-*.jsonl"))]
    df = pd.concat(frames)
    return df[df["text"].str.title().str.len() >= min_chars]["id"].tolist()


@dataclass(kw_only=True)
class SlowCopy(Modifier):
    """Sleeps per partition, so a run lasts long enough to lose a worker in the middle."""

    seconds: float = 0.3

    def modify(self, text: pd.Series) -> pd.Series:
        time.sleep(self.seconds)
        return text
