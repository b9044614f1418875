"""The run report: one self-contained HTML page per pipeline run.

:func:`write_run_report` reads (or is given) the run's statistics (``_stats.json``) and its
memory timeline and writes ``<run_dir>/_report.html``: totals, the per-stage funnel of
documents, time per stage, memory and spill over time, GPU memory, and advice. Charts are
PNG images drawn by matplotlib when it is installed (extra ``monitoring``), else SVG drawn
here; either way they are inline, so the file can be mailed or attached to a ticket.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import json
import math
import os
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from curator_dask.io.layout import TIMELINE, run_metadata_dir
from curator_dask.monitoring import _charts
from curator_dask.monitoring.checks import detect_unmanaged_growth, format_bytes
from curator_dask.monitoring.timeline import (
    MemoryTimeline,
    as_frame,
    read_timeline,
    write_timeline,
)

#: File names inside a run directory.
STATS_FILE = "_stats.json"
#: The runs that wrote partitions into the directory, a JSON list (see :func:`append_run`);
#: not ``.jsonl``, so a glob for the data files does not pick it up.
RUNS_FILE = "_runs.json"
TIMELINE_FILE = TIMELINE
REPORT_FILE = "_report.html"

KEPT, REMOVED, QUARANTINED = "#4c9f70", "#d1495b", "#edae49"
MANAGED, UNMANAGED, SPILLED, LIMIT = "#2e86ab", "#a23b72", "#f18f01", "#333333"
PALETTE = ("#2e86ab", "#a23b72", "#f18f01", "#4c9f70", "#6c5b7b", "#c06c84", "#355c7d", "#99b898")


def append_run(run_dir: str | os.PathLike[str], result: Mapping[str, Any]) -> None:
    """Add one run (its wall time and partitions written) to ``<run_dir>/_runs.json``.

    A resumed run's ``_stats.json`` sums every partition but holds only its own wall time;
    this history lets the report give the time of all runs that wrote partitions. A run
    that skipped nothing starts the history anew.
    """
    parts, skipped = _int(result.get("partitions")), _int(result.get("partitions_skipped"))
    run = {
        "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_seconds": float(result.get("wall_seconds") or 0.0),
        "partitions_written": parts - skipped,
        "partitions_skipped": skipped,
    }
    # a run that found nothing done starts the directory's history (overwrite, first run)
    runs = [*read_runs(run_dir), run] if skipped else [run]
    path = Path(run_dir) / RUNS_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    tmp.replace(path)


def read_runs(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The runs listed in ``<run_dir>/_runs.json`` (empty when there is none)."""
    path = Path(run_dir) / RUNS_FILE
    with contextlib.suppress(OSError, ValueError):
        runs = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(runs, list):
            return [r for r in runs if isinstance(r, dict)]
    return []


def load_run(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """Read a run directory's ``_stats.json`` and, if present, its memory timeline.

    ``run_dir`` is the output directory or its metadata folder (``<output>.curator/``).
    """
    run_dir = Path(run_metadata_dir(run_dir))
    stats_path = run_dir / STATS_FILE
    if not stats_path.exists():
        raise FileNotFoundError(
            f"{stats_path} not found: is {run_dir} the output directory of a pipeline run?"
        )
    stats = json.loads(stats_path.read_text())
    stats.setdefault("runs", read_runs(run_dir))
    timeline = None
    for name in (TIMELINE_FILE, "_timeline.json"):
        if (run_dir / name).exists():
            timeline = read_timeline(run_dir / name)
            break
    return stats, timeline


def write_run_report(
    run_dir: str | os.PathLike[str],
    stats: Mapping[str, Any] | None = None,
    timeline: MemoryTimeline | pd.DataFrame | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    engine: str = "auto",
) -> Path:
    """Write the HTML report of a run and return its path.

    Parameters
    ----------
    run_dir : path
        The run's output directory (local). Writes ``<run_dir>/_report.html`` and, when a
        timeline is given, ``<run_dir>/_timeline.pqt`` so the report can be drawn again
        later (``curator-dask report RUN_DIR``).
    stats : mapping, optional
        The run statistics, as written to ``<run_dir>/_stats.json``: ``pipeline``,
        ``stages`` (each :meth:`StageStats.to_dict <curator_dask.stage.StageStats.to_dict>`),
        ``read``, ``kept``, ``removed``, ``quarantined``, ``wall_seconds``; other keys are
        listed under "Run details". Read from ``_stats.json`` when None.
    timeline : MemoryTimeline or DataFrame, optional
        Memory samples of the run; read from ``<run_dir>/_timeline.pqt`` when None and
        present.
    path : path, optional
        Write the report here instead.
    engine : {"auto", "matplotlib"}
        Chart renderer; ``auto`` uses matplotlib when installed.

    Returns
    -------
    pathlib.Path
        The HTML file.

    Examples
    --------
    >>> import tempfile
    >>> stats = {"pipeline": "demo", "read": 10, "kept": 7, "removed": 3, "quarantined": 0,
    ...          "stages": [{"name": "WordCountFilter", "docs_in": 10, "docs_out": 7,
    ...                      "quarantined": 0, "removed": 3, "seconds": 0.2,
    ...                      "partitions": 2, "extra": {}}]}
    >>> out = write_run_report(tempfile.mkdtemp(), stats)
    >>> "WordCountFilter" in out.read_text()
    True
    """
    run_dir = Path(run_metadata_dir(run_dir))  # an output directory: its <output>.curator/ folder
    run_dir.mkdir(parents=True, exist_ok=True)
    if stats is None:
        stats, loaded = load_run(run_dir)
        if timeline is None:
            timeline = loaded
    elif timeline is None and (run_dir / TIMELINE_FILE).exists():
        timeline = read_timeline(run_dir / TIMELINE_FILE)
    elif timeline is not None:
        frame = as_frame(timeline)
        if len(frame):
            write_timeline(frame, run_dir / TIMELINE_FILE)
    if engine == "auto":
        engine = "matplotlib" if _charts.have_matplotlib() else "none"
    html = render_report_html(stats, as_frame(timeline), engine=engine, run_dir=run_dir)
    out = Path(path) if path is not None else run_dir / REPORT_FILE
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out


# -- page ---------------------------------------------------------------------------------
def render_report_html(
    stats: Mapping[str, Any],
    timeline: pd.DataFrame,
    *,
    engine: str = "matplotlib",
    run_dir: Path | None = None,
) -> str:
    """Return the report page as a string (see :func:`write_run_report`)."""
    stages = [_stage_row(s) for s in stats.get("stages", [])]
    name = _run_name(stats)
    sections = [_summary(stats, stages, timeline, run_dir)]
    if stages:
        charts = _render(_funnel(stages), engine) + _render(_times(stages), engine)
        table = _stage_table(stages, stats.get("parameters"))
        sections.append(_section("Stages", charts + table))
        examples = _removed_examples(stages)
        if examples:
            sections.append(_section("Removed documents, a few per stage", examples))
    reasons = quarantine_by_reason(run_dir) if run_dir is not None else {}
    if reasons:
        sections.append(_section("Quarantine by reason", _quarantine_table(reasons)))
    mem = _memory_charts(timeline)
    if mem:
        note = ""
        if _int(stats.get("partitions_skipped")) and _int(stats.get("partitions")) == _int(
            stats.get("partitions_skipped")
        ):
            note = (
                "<p class=muted>This run found every partition written; the memory below is "
                "from the last run that computed partitions.</p>"
            )
        charts = "".join(_render(c, engine) for c in mem)
        sections.append(_section("Memory", note + charts))
    elif stages:
        sections.append(
            _section(
                "Memory",
                "<p class=muted>No memory timeline was recorded for this run "
                "(run it with a <code>MemoryTimeline</code>).</p>",
            )
        )
    advice = _advice(stats, stages, timeline)
    if advice:
        items = "".join(f"<li>{a}</li>" for a in advice)
        sections.append(_section("Advice", f"<ul class=advice>{items}</ul>"))
    details = {k: v for k, v in stats.items() if k not in _KNOWN_KEYS}
    if details:
        sections.append(_section("Run details", _details_table(details)))
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = f" &middot; {escape(str(run_dir))}" if run_dir is not None else ""
    return _PAGE.format(
        title=escape(name),
        css=_CSS,
        body="".join(sections),
        footer=f"curator_dask run report &middot; generated {generated}{where}",
    )


def _render(chart: _charts.Bars | _charts.Lines, engine: str) -> str:
    if engine == "none":  # no matplotlib (the monitoring extra): the tables say it all
        note = "install matplotlib (extra monitoring) for the chart"
        return f"<p class=muted>{escape(chart.title)}: {note}.</p>"
    return _charts.render(chart, engine)


def _run_name(stats: Mapping[str, Any]) -> str:
    # PipelineResult.to_dict() calls it "name"; hand-written stats may say "pipeline"
    return str(stats.get("pipeline") or stats.get("name") or "pipeline run")


_KNOWN_KEYS = {
    "pipeline",
    "name",
    "stages",
    "read",
    "kept",
    "removed",
    "quarantined",
    "wall_seconds",
    "balanced",
    "parameters",
    "compile_seconds",
    "runs",
}


def _section(title: str, body: str) -> str:
    return f"<section><h2>{escape(title)}</h2>{body}</section>"


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def _stage_row(s: Mapping[str, Any]) -> dict[str, Any]:
    docs_in, docs_out, quarantined = (
        _int(s.get(k)) for k in ("docs_in", "docs_out", "quarantined")
    )
    removed = _int(s["removed"]) if "removed" in s else docs_in - docs_out - quarantined
    return {
        "name": str(s.get("name", "?")),
        "docs_in": docs_in,
        "docs_out": docs_out,
        "quarantined": quarantined,
        "removed": removed,
        "seconds": float(s.get("seconds") or 0.0),
        "compile_seconds": float(s.get("compile_seconds") or 0.0),
        "partitions": _int(s.get("partitions")),
        "extra": dict(s.get("extra") or {}),
        "examples": list(s.get("examples") or []),
    }


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def _card(label: str, value: str, sub: str = "", cls: str = "") -> str:
    sub_html = f"<div class=sub>{sub}</div>" if sub else ""
    return f"<div class='card {cls}'><div class=label>{label}</div><div class=value>{value}</div>{sub_html}</div>"  # noqa: E501


def _time_cards(stats: Mapping[str, Any], stages: list[dict[str, Any]]) -> list[str]:
    """Wall time of this run and, after resumed runs, of every run that wrote partitions."""
    if stats.get("wall_seconds") is None:
        return []
    wall = float(stats["wall_seconds"])
    parts, skipped = _int(stats.get("partitions")), _int(stats.get("partitions_skipped"))
    runs = [r for r in stats.get("runs") or [] if _int(r.get("partitions_written"))]
    compiled = _compile_seconds(stages)
    compile_card = (
        [_card("Compile", _duration(compiled), "numba kernels, first run on this machine")]
        if compiled >= 0.05
        else []
    )
    if not skipped:
        return [_card("Wall time", _duration(wall)), *compile_card]
    cards = [
        _card(
            "This run",
            _duration(wall),
            f"wrote {parts - skipped:,} of {parts:,} partitions; {skipped:,} were done before",
        )
    ]
    if runs:
        total = sum(float(r.get("wall_seconds") or 0.0) for r in runs)
        cards.append(_card("Wall time, all runs", _duration(total), f"{len(runs)} run(s)"))
    compute = sum(s["seconds"] for s in stages)
    cards.append(_card("Stage time", _duration(compute), "summed over partitions and runs"))
    return [*cards, *compile_card]


def _compile_seconds(stages: list[dict[str, Any]]) -> float:
    """Seconds the stages spent compiling kernels (not in their ``seconds``)."""
    return sum(s["compile_seconds"] for s in stages)


def _workers(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["rss"].notna()]


def _summary(
    stats: Mapping[str, Any],
    stages: list[dict[str, Any]],
    frame: pd.DataFrame,
    run_dir: Path | None,
) -> str:
    read = stats.get("read", stages[0]["docs_in"] if stages else None)
    kept = stats.get("kept", stages[-1]["docs_out"] if stages else None)
    removed = stats.get("removed", sum(s["removed"] for s in stages) if stages else None)
    quarantined = stats.get(
        "quarantined", sum(s["quarantined"] for s in stages) if stages else None
    )
    cards = []
    if read is not None:
        cards.append(_card("Read", f"{_int(read):,}", "documents"))
    for label, value, cls in (
        ("Kept", kept, "kept"),
        ("Removed", removed, "removed"),
        ("Quarantined", quarantined, "quarantined"),
    ):
        if value is not None:
            cards.append(_card(label, f"{_int(value):,}", _pct(_int(value), _int(read)), cls))
    cards.extend(_time_cards(stats, stages))
    workers = _workers(frame)
    if len(workers):
        per_time = workers.groupby("time")[["rss", "spilled"]].sum(min_count=1)
        n_workers = workers["worker"].nunique()
        cards.append(
            _card(
                "Peak memory",
                format_bytes(per_time["rss"].max()),
                f"{n_workers} process{'es' if n_workers > 1 else ''}",
            )
        )
        spilled = per_time["spilled"].max()
        if not math.isnan(spilled):
            cards.append(
                _card(
                    "Peak spilled", format_bytes(spilled), "on disk", "warn" if spilled > 0 else ""
                )
            )
    gpu = frame[frame["gpu_used"].notna()]
    if len(gpu):
        peak = gpu.groupby("time")["gpu_used"].sum().max()
        total = gpu.groupby("time")["gpu_total"].sum().max()
        cards.append(
            _card(
                "Peak GPU memory",
                format_bytes(peak),
                f"of {format_bytes(total)}" if total > 0 else "",
            )
        )
    status = ""
    if run_dir is not None and (run_dir / "_SUCCESS").exists():
        status = "<span class='badge ok'>complete</span>"
    check = ""
    if None not in (read, kept, removed, quarantined):
        total = _int(kept) + _int(removed) + _int(quarantined)
        if total == _int(read):
            check = (
                f"<p class=ok>&#10003; Every document is accounted for: read {_int(read):,}"
                f" = kept + removed + quarantined.</p>"
            )
        else:
            check = (
                f"<p class=bad>&#10007; Accounting does not add up: read {_int(read):,}, "
                f"but kept + removed + quarantined = {total:,}.</p>"
            )
    name = escape(_run_name(stats))
    return (
        f"<header><h1>{name} {status}</h1></header><div class=cards>{''.join(cards)}</div>{check}"
    )


def _funnel(stages: list[dict[str, Any]]) -> _charts.Bars:
    notes = []
    for s in stages:
        lost = s["removed"] + s["quarantined"]
        note = f"{s['docs_in']:,} \u2192 {s['docs_out']:,}"
        if lost and s["docs_in"]:
            note += f"  (\u2212{100 * lost / s['docs_in']:.1f}%)"
        notes.append(note)
    return _charts.Bars(
        "Documents through each stage",
        [s["name"] for s in stages],
        [
            ("kept", [max(0, s["docs_out"]) for s in stages], KEPT),
            ("removed", [max(0, s["removed"]) for s in stages], REMOVED),
            ("quarantined", [s["quarantined"] for s in stages], QUARANTINED),
        ],
        xlabel="documents",
        notes=notes,
    )


def _times(stages: list[dict[str, Any]]) -> _charts.Bars:
    total = sum(s["seconds"] for s in stages) or 1.0
    notes = []
    for s in stages:
        rate = s["docs_in"] / s["seconds"] if s["seconds"] > 0 else float("nan")
        rate_s = f", {_charts.fmt_num(round(rate))} docs/s" if math.isfinite(rate) else ""
        notes.append(f"{s['seconds']:.2f} s ({100 * s['seconds'] / total:.0f}%){rate_s}")
    return _charts.Bars(
        "Task time per stage (summed over partitions)",
        [s["name"] for s in stages],
        [("seconds", [s["seconds"] for s in stages], MANAGED)],
        xlabel="seconds",
        notes=notes,
    )


def _memory_charts(frame: pd.DataFrame) -> list[_charts.Lines]:
    charts: list[_charts.Lines] = []
    workers = _workers(frame)
    if len(workers):
        totals = workers.groupby("time").sum(numeric_only=True, min_count=1).sort_index()
        x = totals.index.to_numpy(dtype="float64")
        series = []
        if totals["managed"].notna().any():
            series.append(_charts.Line("managed", totals["managed"].to_numpy(), MANAGED, "area"))
            series.append(
                _charts.Line("unmanaged", totals["unmanaged"].to_numpy(), UNMANAGED, "area")
            )
        else:
            series.append(
                _charts.Line("process memory (RSS)", totals["rss"].to_numpy(), MANAGED, "area")
            )
        if totals["spilled"].notna().any():
            series.append(
                _charts.Line("spilled to disk", totals["spilled"].to_numpy(), SPILLED, "line")
            )
        n = workers["worker"].nunique()
        title = "Memory of all workers" if n > 1 else "Memory"
        limit = totals["memory_limit"].max()
        if not math.isnan(limit):
            label = "memory limit (sum)" if n > 1 else "memory limit"
            if limit <= 4 * totals["rss"].max():
                series.append(
                    _charts.Line(label, totals["memory_limit"].to_numpy(), LIMIT, "dashed")
                )
            else:  # drawn, it would squash the usage into a flat line at the bottom
                title += f" ({label} {format_bytes(limit)}, far above)"
        charts.append(_charts.Lines(title, x, series))
        if n > 1:
            col = "unmanaged" if workers["unmanaged"].notna().any() else "rss"
            wide = workers.pivot_table(
                index="time", columns="worker", values=col, aggfunc="last"
            ).sort_index()
            peaks = wide.max().sort_values(ascending=False)
            lines = [
                _charts.Line(str(w), wide[w].to_numpy(), PALETTE[i % len(PALETTE)], "line")
                for i, w in enumerate(peaks.index[: len(PALETTE)])
            ]
            label = "Unmanaged memory per worker" if col == "unmanaged" else "Memory per process"
            if len(peaks) > len(PALETTE):
                label += f" (the {len(PALETTE)} largest of {len(peaks)})"
            charts.append(_charts.Lines(label, wide.index.to_numpy(dtype="float64"), lines))
    gpu = frame[frame["gpu_used"].notna()]
    if len(gpu):
        wide = gpu.pivot_table(
            index="time", columns="worker", values="gpu_used", aggfunc="last"
        ).sort_index()
        lines = [
            _charts.Line(str(w), wide[w].to_numpy(), PALETTE[i % len(PALETTE)], "line")
            for i, w in enumerate(wide.columns[: len(PALETTE)])
        ]
        cap = gpu.groupby("time")["gpu_total"].max().reindex(wide.index)
        if cap.notna().any():
            lines.append(_charts.Line("capacity (one GPU)", cap.to_numpy(), LIMIT, "dashed"))
        charts.append(_charts.Lines("GPU memory used", wide.index.to_numpy(dtype="float64"), lines))
    return charts


def _params_text(params: Mapping[str, Any]) -> str:
    """``min_words=50, max_words=100000``: the parameters that are set (not None/False/"")."""
    shown = [
        f"{escape(str(k))}={escape(json.dumps(v) if not isinstance(v, str) else v)}"
        for k, v in params.items()
        if v not in (None, False, "", [], {})
    ]
    return ", ".join(shown)


def _stage_table(
    stages: list[dict[str, Any]], parameters: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    parameters = parameters or {}
    head = (
        "<tr><th>#</th><th class=l>stage</th><th>partitions</th><th>docs in</th>"
        "<th>docs out</th><th>removed</th><th>quarantined</th><th>kept</th>"
        "<th>seconds</th><th>compile s</th><th>docs/s</th><th class=l>counters</th>"
        "<th class=l>parameters</th></tr>"
    )
    rows = []
    for i, s in enumerate(stages):
        rate = f"{s['docs_in'] / s['seconds']:,.0f}" if s["seconds"] > 0 else "&ndash;"
        extra = ", ".join(
            f"{escape(str(k))}={v:,}"
            if isinstance(v, int)
            else f"{escape(str(k))}={escape(str(v))}"
            for k, v in sorted(s["extra"].items())
        )
        rows.append(
            f"<tr><td>{i + 1}</td><td class=l>{escape(s['name'])}</td>"
            f"<td>{s['partitions']:,}</td><td>{s['docs_in']:,}</td><td>{s['docs_out']:,}</td>"
            f"<td>{s['removed']:,}</td><td>{s['quarantined']:,}</td>"
            f"<td>{_pct(s['docs_out'], s['docs_in'])}</td><td>{s['seconds']:,.2f}</td>"
            f"<td>{s['compile_seconds']:,.2f}</td><td>{rate}</td><td class=l>{extra}</td>"
            f"<td class='l params'>{_params_text(parameters.get(s['name'], {}))}</td></tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _removed_examples(stages: list[dict[str, Any]]) -> str:
    """Per stage that removed documents, the few examples its statistics kept."""
    blocks = []
    for s in stages:
        if not s["examples"]:
            continue
        rows = "".join(
            f"<tr><td class=l><code>{escape(str(e.get('id', '')))}</code></td>"
            f"<td class='l doc'>{escape(str(e.get('text', '')))}</td></tr>"
            for e in s["examples"]
        )
        blocks.append(
            f"<h3>{escape(s['name'])} &middot; removed {s['removed']:,}</h3>"
            f"<table class=examples><tr><th class=l>id</th><th class=l>text (start)</th></tr>"
            f"{rows}</table>"
        )
    return "".join(blocks)


def quarantine_by_reason(run_dir: str | os.PathLike[str], limit: int = 1_000_000) -> dict[str, int]:
    """Count the quarantined records of a run by their ``reason`` (the first ``limit``)."""
    from curator_dask.io.layout import QUARANTINE_DIR

    folder = Path(run_metadata_dir(run_dir)) / QUARANTINE_DIR
    counts: dict[str, int] = {}
    if not folder.is_dir():
        return counts
    seen = 0
    for path in sorted(folder.glob("part-*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    reason = str(json.loads(line).get("reason", "unknown"))
                except (ValueError, AttributeError):
                    reason = "unreadable quarantine line"
                counts[reason] = counts.get(reason, 0) + 1
                seen += 1
                if seen >= limit:
                    return counts
    return counts


def _quarantine_table(counts: Mapping[str, int]) -> str:
    total = sum(counts.values())
    rows = "".join(
        f"<tr><td class=l>{escape(reason)}</td><td>{n:,}</td><td>{_pct(n, total)}</td></tr>"
        for reason, n in sorted(counts.items(), key=lambda kv: -kv[1])
    )
    return (
        "<table><tr><th class=l>reason</th><th>records</th><th>share</th></tr>"
        f"{rows}</table><p class=muted>The records themselves are in "
        "<code>_quarantine/</code>, each with its file, line and reason.</p>"
    )


def _details_table(details: Mapping[str, Any]) -> str:
    rows = []
    for k, v in details.items():
        text = v if isinstance(v, str) else json.dumps(v, indent=1, default=str)
        rows.append(
            f"<tr><th class=l>{escape(str(k))}</th><td class=l><code>"
            f"{escape(text)}</code></td></tr>"
        )
    return f"<table class=details>{''.join(rows)}</table>"


def _advice(
    stats: Mapping[str, Any], stages: list[dict[str, Any]], frame: pd.DataFrame
) -> list[str]:
    out = []
    for g in detect_unmanaged_growth(frame, warn=False):
        out.append(
            f"<b>Possible memory leak</b>: {escape(g.describe())}. Unmanaged memory "
            "grew all through the run; look for objects kept between tasks."
        )
    workers = _workers(frame)
    if len(workers):
        peak_spill = workers.groupby("time")["spilled"].sum(min_count=1).max()
        if peak_spill and peak_spill > 0:
            out.append(
                f"<b>Workers spilled</b> up to {format_bytes(peak_spill)} to disk. "
                "Spilling is slow: give workers more memory, run fewer threads per "
                "worker, or read smaller partitions (<code>blocksize</code>)."
            )
        limited = workers[workers["memory_limit"].notna()]
        if len(limited):
            frac = (limited["rss"] / limited["memory_limit"]).groupby(limited["worker"]).max()
            high = frac[frac >= 0.8].sort_values(ascending=False)
            for w, f in high.head(3).items():
                out.append(
                    f"<b>{escape(str(w))}</b> reached {100 * f:.0f}% of its memory "
                    "limit: past 95% dask pauses or restarts the worker."
                )
    gpu = frame[frame["gpu_used"].notna() & frame["gpu_total"].notna()]
    if len(gpu):
        frac = (gpu["gpu_used"] / gpu["gpu_total"]).groupby(gpu["worker"]).max()
        for w, f in frac[frac >= 0.9].items():
            out.append(
                f"<b>{escape(str(w))}</b> used {100 * f:.0f}% of GPU memory: if a GPU "
                "stage fails with out-of-memory, lower its "
                "<code>model_inference_batch_size</code>."
            )
    q = [s for s in stages if s["quarantined"]]
    if q:
        names = ", ".join(escape(s["name"]) for s in q)
        out.append(
            f"{sum(s['quarantined'] for s in q):,} records were quarantined ({names}): "
            "see <code>_quarantine/</code> in the run directory for the raw records and "
            "the reason."
        )
    compiled = _compile_seconds(stages)
    if compiled >= 1:
        out.append(
            f"<b>Compiling kernels</b> took {_duration(compiled)}: numba compiles each kernel "
            "on its first call on a machine and caches it (<code>NUMBA_CACHE_DIR</code>, else "
            "beside the package or in the user's cache), so later runs load it instead. That "
            "time is not counted in the stage times."
        )
    # stage seconds exclude compiling: a stage whose time was mostly its first-run compile
    # is not the one to speed up
    slowest = max(stages, key=lambda s: s["seconds"], default=None)
    total = sum(s["seconds"] for s in stages)
    # only worth saying for runs long enough to care
    if slowest is not None and total >= 10 and len(stages) > 1 and slowest["seconds"] > 0.5 * total:
        out.append(
            f"<b>{escape(slowest['name'])}</b> took "
            f"{100 * slowest['seconds'] / total:.0f}% of the task time: it is the "
            "stage to speed up or to give more workers."
        )
    return out


_CSS = """
body{font-family:FONT;margin:0;background:#f6f7f9;color:#1d1d1f}
main{max-width:820px;margin:0 auto;padding:24px 20px 40px}
h1{font-size:24px;margin:8px 0 16px} h2{font-size:16px;margin:0 0 12px;color:#333}
section{background:#fff;border-radius:8px;padding:16px 18px;margin:16px 0;
box-shadow:0 1px 2px rgba(0,0,0,.08)}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:#fff;border-radius:8px;padding:10px 14px;min-width:104px;
box-shadow:0 1px 2px rgba(0,0,0,.08);border-top:3px solid #bbb}
.card.kept{border-top-color:#4c9f70}.card.removed{border-top-color:#d1495b}
.card.quarantined{border-top-color:#edae49}.card.warn{border-top-color:#f18f01}
.label{font-size:11px;text-transform:uppercase;color:#666;letter-spacing:.04em}
.value{font-size:20px;font-weight:600;margin-top:2px}.sub{font-size:11px;color:#777}
.chart{display:block;max-width:100%;height:auto;margin:4px 0 14px}
table{border-collapse:collapse;width:100%;font-size:12px}
th,td{padding:5px 7px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{color:#555;font-weight:600}.l{text-align:left}
.details td{white-space:pre-wrap}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11px}
.ok{color:#2f7d4f}.bad{color:#b3261e}.muted{color:#777}
td.doc{white-space:pre-wrap;font-size:12px;max-width:60em}td.params{font-size:12px}
.badge{font-size:11px;font-weight:600;padding:2px 8px;border-radius:10px;vertical-align:middle}
.badge.ok{background:#e3f3e8}.badge.bad{background:#fbe4e2}
.advice li{margin:6px 0;font-size:13px}
footer{font-size:11px;color:#888;text-align:center}
""".replace("FONT", _charts.FONT)

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} &middot; curator_dask report</title>
<style>{css}</style></head>
<body><main>{body}<footer>{footer}</footer></main></body></html>
"""
