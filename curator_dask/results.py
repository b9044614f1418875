"""What a run did: :class:`PipelineResult`, summed from the per-partition records."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from curator_dask.errors import AccountingError
from curator_dask.stage import StageStats


@dataclass
class PipelineResult:
    """What a run did: per-stage statistics and the document accounting.

    ``stages`` holds the reader first and the writer last, each summed over partitions.
    Totals: ``read`` (records the reader saw), ``quarantined`` (rejected input),
    ``removed`` (dropped by stages), ``kept`` (written); ``read == kept + removed +
    quarantined`` is checked by :meth:`check`. ``splits`` counts the out-of-memory splits
    of partitions (``split_partitions``) that the executor recomputed in pieces (see
    ``docs/faults.md``).
    """

    name: str
    stages: list[StageStats]
    read: int
    kept: int
    removed: int
    quarantined: int
    wall_seconds: float
    output_path: str
    partitions: int
    partitions_skipped: int = 0
    execution_mode: str = "streaming"
    stats_path: str | None = None
    #: The folder of the run's metadata (statistics, quarantine, report), beside the documents.
    metadata_path: str | None = None
    partition_mismatches: list[int] = field(default_factory=list)
    splits: int = 0
    split_partitions: list[int] = field(default_factory=list)
    #: Constructor parameters of the reader, each stage and the writer, by stage name.
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The folder of the quarantined records (each names its file and the reason).
    quarantine_path: str | None = None

    @classmethod
    def from_records(
        cls,
        name: str,
        records: Iterable[dict[str, Any]],
        *,
        wall_seconds: float,
        output_path: str,
        partitions_skipped: int = 0,
        execution_mode: str = "streaming",
    ) -> PipelineResult:
        """Sum per-partition records (as returned by the write tasks)."""
        records = sorted(records, key=lambda r: r["index"])
        summed: list[StageStats] | None = None
        read = kept = removed = quarantined = 0
        mismatches = []
        splits = 0
        split_partitions = []
        for rec in records:
            if rec.get("split"):
                splits += int(rec["split"].get("splits", 0))
                split_partitions.append(int(rec["index"]))
            stats = [StageStats.from_dict(d) for d in rec["stages"]]
            if summed is None:
                summed = stats
            else:
                if [s.name for s in stats] != [s.name for s in summed]:
                    raise ValueError(
                        f"partition {rec['index']} has stages {[s.name for s in stats]}, "
                        f"others {[s.name for s in summed]}"
                    )
                summed = [a + b for a, b in zip(summed, stats, strict=True)]
            reader, middle, _writer = stats[0], stats[1:-1], stats[-1]
            p_read = reader.docs_in
            p_quar = sum(s.quarantined for s in stats)
            p_removed = sum(s.removed for s in middle)
            p_kept = int(rec["rows"])
            if p_read != p_kept + p_removed + p_quar:
                mismatches.append(int(rec["index"]))
            read += p_read
            quarantined += p_quar
            removed += p_removed
            kept += p_kept
        return cls(
            name=name,
            stages=summed or [],
            read=read,
            kept=kept,
            removed=removed,
            quarantined=quarantined,
            wall_seconds=wall_seconds,
            output_path=output_path,
            partitions=len(records),
            partitions_skipped=partitions_skipped,
            execution_mode=execution_mode,
            partition_mismatches=mismatches,
            splits=splits,
            split_partitions=split_partitions,
        )

    @property
    def compile_seconds(self) -> float:
        """Seconds the stages spent compiling numba kernels (a kernel's first call on a
        machine; later runs load it from the cache), apart from their ``seconds``."""
        return sum(s.compile_seconds for s in self.stages)

    @property
    def balanced(self) -> bool:
        """True when ``read == kept + removed + quarantined``."""
        return self.read == self.kept + self.removed + self.quarantined and not (
            self.partition_mismatches
        )

    def check(self) -> None:
        """Raise :class:`AccountingError` if a document is unaccounted for."""
        if not self.balanced:
            raise AccountingError(
                f"pipeline {self.name!r}: read={self.read} but kept={self.kept} + "
                f"removed={self.removed} + quarantined={self.quarantined} = "
                f"{self.kept + self.removed + self.quarantined}; partitions out of balance: "
                f"{self.partition_mismatches}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (what ``_stats.json`` holds)."""
        d = {k: v for k, v in dataclasses.asdict(self).items() if k != "stages"}
        d["stages"] = [s.to_dict() for s in self.stages]
        d["compile_seconds"] = self.compile_seconds
        d["balanced"] = self.balanced
        return d

    def to_json(self) -> str:
        """Return :meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)

    def summary(self) -> str:
        """A table a person can read: one line per stage, then the totals."""
        width = max([len("stage"), *(len(s.name) for s in self.stages)])
        compiled = self.compile_seconds >= 0.005  # a column only when something compiled
        lines = [
            f"{'stage':<{width}} {'in':>10} {'out':>10} {'removed':>9} {'quar.':>7} {'seconds':>9}"
            + (f" {'compile':>8}" if compiled else "")
        ]
        for s in self.stages:
            lines.append(
                f"{s.name:<{width}} {s.docs_in:>10,} {s.docs_out:>10,} {s.removed:>9,} "
                f"{s.quarantined:>7,} {s.seconds:>9.2f}"
                + (f" {s.compile_seconds:>8.2f}" if compiled else "")
            )
        lines.append(
            f"read {self.read:,} = kept {self.kept:,} + removed {self.removed:,} + "
            f"quarantined {self.quarantined:,}  ({'ok' if self.balanced else 'MISMATCH'})"
        )
        lines.append(
            f"{self.partitions} partitions ({self.partitions_skipped} already done), "
            f"{self.execution_mode}, {self.wall_seconds:.1f}s wall"
        )
        if compiled:
            lines.append(
                f"compile {self.compile_seconds:.1f} s: kernels compiled on their first call on "
                "this machine (C or numba, cached for later runs), not counted in the stage "
                "seconds"
            )
        if self.splits:
            lines.append(
                f"{self.splits} out-of-memory split(s): partitions {self.split_partitions} "
                "were recomputed in pieces"
            )
        lines.append(f"output: {self.output_path}")
        if self.quarantined and self.quarantine_path:
            # a corrupt compressed file or a bad line: say where its records went
            lines.append(
                f"quarantine: {self.quarantine_path} ({self.quarantined:,} record(s), "
                "each with its file and reason)"
            )
        if self.stats_path:
            lines.append(f"stats:  {self.stats_path}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        from curator_dask.explore import result_html

        return result_html(self)
