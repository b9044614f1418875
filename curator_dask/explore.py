"""Look at a corpus and a run by eye: plots for notebooks and documents side by side.

Plots draw with matplotlib (extra ``monitoring``), the engine the run report uses too, on
an ``ax`` you pass or a new figure; each returns the ``Axes`` so a notebook shows it and a
script can save it:

- :func:`plot_scores`: a filter's score histogram, its thresholds and the kept side;
- :func:`plot_lsh_curve`: the S-curve P(candidate) = 1 - (1 - s^r)^b of an LSH shape;
- :func:`plot_jaccard`: the Jaccard similarity of found pairs, with the threshold;
- :func:`plot_group_sizes`: how many duplicate groups have each size;
- :func:`plot_memory`: a run's memory timeline (worker memory by type).

:func:`compare_documents` shows documents side by side (in Jupyter as HTML, elsewhere as
text), marking the words each differs by from the first one: a duplicate group with its
kept document first, or a filter's removed documents.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

import numpy as np
import pandas as pd

KEPT = "#2f7d4f"
REMOVED = "#b3261e"
NEUTRAL = "#5b7fb5"


def _axes(ax: Any, width: float = 7.0, height: float = 3.2) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    return ax


def thresholds_of(flt: Any) -> dict[str, float]:
    """The numeric ``min_*`` / ``max_*`` parameters of a filter (its thresholds)."""
    out = {}
    if dataclasses.is_dataclass(flt):
        for f in dataclasses.fields(flt):
            value = getattr(flt, f.name, None)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if f.name.startswith(("min_", "max_")):
                out[f.name] = float(value)
    return out


def plot_scores(
    scores: pd.Series, flt: Any, *, bins: int = 50, log_x: bool = False, ax: Any = None
) -> Any:
    """Histogram of one filter's scores, kept and removed parts coloured, thresholds dashed.

    Parameters
    ----------
    scores : pandas.Series
        The filter's ``<name>_score`` column (e.g. from the filter with ``score_only=True``).
    flt : Filter
        Decides the kept side through its ``keep_score``; its ``min_*``/``max_*`` parameters
        are drawn as vertical lines.
    bins : int
        Histogram bins.
    log_x : bool
        Logarithmic bins and x axis (for counts such as words).
    ax : matplotlib Axes, optional
        Where to draw; a new figure when None.

    Returns
    -------
    matplotlib Axes
    """
    ax = _axes(ax)
    values = pd.Series(scores).astype(float).replace([np.inf, -np.inf], np.nan).dropna()
    keep = np.asarray(flt.keep_score(values), dtype=bool)
    low, high = (values.min(), values.max()) if len(values) else (0.0, 1.0)
    if log_x:
        low = max(low, 1e-3)
        edges = np.geomspace(low, max(high, low * 1.01), bins + 1)
        ax.set_xscale("log")
    else:
        edges = np.linspace(low, high if high > low else low + 1, bins + 1)
    clipped = values.clip(edges[0], edges[-1])
    ax.hist(
        [clipped[keep], clipped[~keep]],
        bins=edges,
        stacked=True,
        color=[KEPT, REMOVED],
        label=[f"kept ({int(keep.sum()):,})", f"removed ({int((~keep).sum()):,})"],
    )
    for name, value in thresholds_of(flt).items():
        if edges[0] <= value <= edges[-1]:
            ax.axvline(value, color="black", linestyle="--", linewidth=1)
            ax.annotate(
                f"{name}={value:g}",
                (value, 1),
                xycoords=("data", "axes fraction"),
                rotation=90,
                va="top",
                ha="right",
                fontsize=8,
            )
    name = getattr(flt, "stage_name", type(flt).__name__)
    ax.set_title(name, fontsize=10)
    ax.set_xlabel("score")
    ax.set_ylabel("documents")
    ax.legend(fontsize=8, frameon=False)
    return ax


def plot_lsh_curve(
    num_bands: int,
    minhashes_per_band: int,
    jaccard_threshold: float | None = None,
    *,
    others: Iterable[tuple[int, int]] = (),
    ax: Any = None,
) -> Any:
    """The probability that a pair of Jaccard similarity ``s`` becomes an LSH candidate.

    P(candidate) = 1 - (1 - s^r)^b for ``b = num_bands`` bands of ``r = minhashes_per_band``
    MinHashes; ``others`` adds more ``(b, r)`` shapes for comparison (thinner lines).
    """
    from curator_dask.dedup.lsh import candidate_probability

    ax = _axes(ax, 6.0, 3.4)
    s = np.linspace(0, 1, 201)
    for i, (b, r) in enumerate([(num_bands, minhashes_per_band), *others]):
        p = [candidate_probability(float(x), b, r) for x in s]
        ax.plot(s, p, linewidth=2.2 if i == 0 else 1.0, label=f"{b} bands x {r}")
    if jaccard_threshold is not None:
        p_at = candidate_probability(jaccard_threshold, num_bands, minhashes_per_band)
        ax.axvline(jaccard_threshold, color="black", linestyle="--", linewidth=1)
        ax.annotate(
            f"threshold {jaccard_threshold:g}: P = {p_at:.3f}",
            (jaccard_threshold, p_at),
            xytext=(8, -14),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_xlabel("Jaccard similarity s")
    ax.set_ylabel("P(candidate)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title("LSH candidate probability", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    return ax


def plot_jaccard(
    jaccard: Sequence[float] | pd.Series,
    threshold: float | None = None,
    *,
    bins: int = 40,
    ax: Any = None,
) -> Any:
    """Histogram of the Jaccard similarities of found pairs, the threshold dashed."""
    ax = _axes(ax)
    values = np.asarray(jaccard, dtype=float)
    edges = np.linspace(0, 1, bins + 1)
    if threshold is None:
        ax.hist(values, bins=edges, color=NEUTRAL)
    else:
        above = values >= threshold
        ax.hist(
            [values[above], values[~above]],
            bins=edges,
            stacked=True,
            color=[REMOVED, "#999999"],
            label=[f">= {threshold:g} ({int(above.sum()):,})", f"below ({int((~above).sum()):,})"],
        )
        ax.axvline(threshold, color="black", linestyle="--", linewidth=1)
        ax.legend(fontsize=8, frameon=False, loc="upper left")
    ax.set_xlabel("Jaccard similarity")
    ax.set_ylabel("pairs")
    ax.set_title(f"{len(values):,} pairs", fontsize=10)
    return ax


def plot_group_sizes(sizes: Sequence[int] | pd.Series, *, ax: Any = None) -> Any:
    """Bars: how many duplicate groups have each size (documents in the group)."""
    ax = _axes(ax, 6.0, 3.0)
    counts = pd.Series(np.asarray(sizes, dtype=int)).value_counts().sort_index()
    ax.bar(counts.index.astype(str), counts.to_numpy(), color=NEUTRAL)
    ax.set_yscale("log")
    ax.set_xlabel("documents in the group")
    ax.set_ylabel("groups")
    ax.set_title(f"{int(counts.sum()):,} duplicate groups", fontsize=10)
    return ax


def plot_memory(timeline: Any, *, ax: Any = None) -> Any:
    """Worker memory over a run, summed over workers: managed, unmanaged, spilled.

    ``timeline`` is a :class:`~curator_dask.monitoring.MemoryTimeline`, its ``frame()``,
    or a run directory holding ``_timeline.pqt``.
    """
    from curator_dask.io.layout import TIMELINE
    from curator_dask.monitoring.timeline import as_frame, read_timeline

    if isinstance(timeline, (str, bytes)) or hasattr(timeline, "__fspath__"):
        import os

        timeline = read_timeline(os.path.join(os.fsdecode(timeline), TIMELINE))
    frame = as_frame(timeline)
    ax = _axes(ax)
    workers = frame[frame["rss"].notna()]
    if not len(workers):
        ax.set_title("no worker memory samples", fontsize=10)
        return ax
    per_time = workers.groupby("time")[["managed", "unmanaged", "spilled", "rss"]].sum(min_count=1)
    t = (per_time.index - per_time.index.min()).to_numpy(dtype=float)
    gib = 2**30
    ax.stackplot(
        t,
        per_time["managed"].fillna(0) / gib,
        per_time["unmanaged"].fillna(0) / gib,
        labels=["managed", "unmanaged"],
        colors=[NEUTRAL, "#e0a040"],
        alpha=0.85,
    )
    if per_time["spilled"].fillna(0).max() > 0:
        ax.plot(t, per_time["spilled"] / gib, color=REMOVED, linestyle="--", label="spilled")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("GiB")
    n = workers["worker"].nunique()
    ax.set_title(f"worker memory ({n} worker{'s' if n > 1 else ''})", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    return ax


# -- documents side by side ---------------------------------------------------------------
_TOKEN = re.compile(r"\s+|[^\s]+")


@dataclasses.dataclass
class DocumentComparison:
    """Documents side by side; each later one marks where it differs from the first.

    In Jupyter it displays as an HTML table (``_repr_html_``); ``str()`` gives a text form.
    Words only in a later document are marked (green), words of the first one it lacks are
    shown struck through (red).
    """

    ids: list[str]
    texts: list[str]
    labels: list[str]
    title: str = ""
    max_chars: int = 3000

    def differences(self, i: int) -> list[tuple[str, str]]:
        """``(op, text)`` runs of document ``i`` against the first: op in equal/insert/delete."""
        a = _TOKEN.findall(self.texts[0][: self.max_chars])
        b = _TOKEN.findall(self.texts[i][: self.max_chars])
        runs: list[tuple[str, str]] = []
        for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op == "equal":
                runs.append(("equal", "".join(b[b0:b1])))
            if op in ("delete", "replace"):
                runs.append(("delete", "".join(a[a0:a1])))
            if op in ("insert", "replace"):
                runs.append(("insert", "".join(b[b0:b1])))
        return runs

    def similarity(self, i: int) -> float:
        """difflib's ratio of document ``i`` to the first, on words (1.0: the same)."""
        a = _TOKEN.findall(self.texts[0][: self.max_chars])
        b = _TOKEN.findall(self.texts[i][: self.max_chars])
        return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()

    def _repr_html_(self) -> str:
        cells = []
        for i, (doc_id, label) in enumerate(zip(self.ids, self.labels, strict=True)):
            if i == 0:
                body = escape(self.texts[0][: self.max_chars])
                sub = label
            else:
                body = "".join(
                    escape(t)
                    if op == "equal"
                    else f"<ins style='background:#d8f0dc;text-decoration:none'>{escape(t)}</ins>"
                    if op == "insert"
                    else f"<del style='background:#f8d8d5'>{escape(t)}</del>"
                    for op, t in self.differences(i)
                )
                sub = f"{label} &middot; {self.similarity(i):.0%} alike"
            cells.append(
                "<td style='vertical-align:top;text-align:left;min-width:18em'>"
                f"<div style='font-weight:600'>{escape(doc_id)}</div>"
                f"<div style='color:#777;font-size:90%'>{sub}</div>"
                "<div style='white-space:pre-wrap;font-family:monospace;font-size:85%'>"
                f"{body}</div></td>"
            )
        title = f"<caption style='text-align:left'>{escape(self.title)}</caption>"
        return f"<table>{title if self.title else ''}<tr>{''.join(cells)}</tr></table>"

    def __str__(self) -> str:
        lines = [self.title] if self.title else []
        for i, (doc_id, label) in enumerate(zip(self.ids, self.labels, strict=True)):
            lines.append(f"=== {doc_id} ({label})")
            if i == 0:
                lines.append(self.texts[0][: self.max_chars])
            else:
                lines.append(
                    "".join(
                        t if op == "equal" else f"[+{t}+]" if op == "insert" else f"[-{t}-]"
                        for op, t in self.differences(i)
                    )
                )
        return "\n".join(lines)


def compare_documents(
    texts: Mapping[str, str] | pd.Series,
    *,
    labels: Sequence[str] | None = None,
    title: str = "",
    max_chars: int = 3000,
) -> DocumentComparison:
    """Documents side by side, each marked where it differs from the first.

    Parameters
    ----------
    texts : mapping or pandas.Series
        Id -> text, the reference first (e.g. a duplicate group's kept document, then the
        removed ones; or a few documents a filter removed).
    labels : sequence of str, optional
        One per document (default: "kept" for the first, "removed" for the others).
    title : str
        A caption.
    max_chars : int
        Each text is cut to this many characters before comparing.

    Examples
    --------
    >>> cmp = compare_documents({"a": "the quick brown fox", "b": "the quick red fox"})
    >>> [op for op, _ in cmp.differences(1) if op != "equal"]
    ['delete', 'insert']
    >>> print(cmp)
    === a (kept)
    the quick brown fox
    === b (removed)
    the quick [-brown-][+red+] fox
    """
    items = list(texts.items())
    ids = [str(k) for k, _ in items]
    values = ["" if v is None else str(v) for _, v in items]
    if labels is None:
        labels = ["kept", *(["removed"] * (len(items) - 1))]
    return DocumentComparison(ids, values, list(labels), title, max_chars)


def duplicate_group(
    docs: pd.DataFrame | pd.Series,
    removed_ids: pd.DataFrame,
    group: str,
    *,
    text_column: str = "text",
    max_docs: int = 4,
) -> DocumentComparison:
    """One duplicate group side by side: the kept document, then (some of) the removed ones.

    ``removed_ids`` is a dedup workflow's ``removed_ids`` frame (columns ``id`` and
    ``group``, the kept document's id); ``docs`` holds the texts indexed by id.
    """
    text = docs[text_column] if isinstance(docs, pd.DataFrame) else docs
    members = removed_ids.loc[removed_ids["group"] == group, "id"].tolist()[: max_docs - 1]
    ids = [group, *members]
    n_all = int((removed_ids["group"] == group).sum())
    return compare_documents(
        {i: text.loc[i] for i in ids},
        title=f"group {group}: kept 1, removed {n_all}",
    )


# -- rich display of pipelines and their results ------------------------------------------
_TABLE = "border-collapse:collapse;font-size:90%"
_CELL = "padding:2px 8px;text-align:{align};border-bottom:1px solid #ddd"


def _row(values: Sequence[Any], header: bool = False) -> str:
    tag = "th" if header else "td"
    cells = []
    for i, v in enumerate(values):
        align = "left" if i < 2 or (isinstance(v, str) and not v[:1].isdigit()) else "right"
        cells.append(f"<{tag} style='{_CELL.format(align=align)}'>{v}</{tag}>")
    return f"<tr>{''.join(cells)}</tr>"


def pipeline_html(pipeline: Any) -> str:
    """An HTML table of a :class:`~curator_dask.pipeline.Pipeline`: step, kind, parameters."""
    from curator_dask.stage import parameters_of

    def params(obj: Any) -> str:
        shown = {k: v for k, v in parameters_of(obj).items() if v not in (None, False, "")}
        return escape(", ".join(f"{k}={v!r}" for k, v in shown.items()))

    rows = [_row(["#", "step", "runs on", "parameters"], header=True)]
    if pipeline.reader is not None:
        rows.append(
            _row(["read", escape(type(pipeline.reader).__name__), "", params(pipeline.reader)])
        )
    for i, stage in enumerate(pipeline.stages, 1):
        res = escape(str(getattr(stage, "resources", "")))
        rows.append(_row([str(i), escape(stage.stage_name), res, params(stage)]))
    if pipeline.writer is not None:
        rows.append(
            _row(["write", escape(type(pipeline.writer).__name__), "", params(pipeline.writer)])
        )
    head = f"<b>Pipeline {escape(pipeline.name)}</b> <i>(lazy: nothing runs until run())</i>"
    return f"<div>{head}<table style='{_TABLE}'>{''.join(rows)}</table></div>"


def result_html(result: Any) -> str:
    """An HTML summary of a :class:`~curator_dask.pipeline.PipelineResult`."""
    rows = [_row(["stage", "", "in", "out", "removed", "quarantined", "seconds"], header=True)]
    for s in result.stages:
        rows.append(
            _row(
                [
                    escape(s.name),
                    "",
                    f"{s.docs_in:,}",
                    f"{s.docs_out:,}",
                    f"{s.removed:,}",
                    f"{s.quarantined:,}",
                    f"{s.seconds:.2f}",
                ]
            )
        )
    ok = result.balanced
    check = (
        f"<span style='color:{KEPT if ok else REMOVED}'>"
        f"{'&#10003;' if ok else '&#10007;'} read {result.read:,} = kept {result.kept:,} + "
        f"removed {result.removed:,} + quarantined {result.quarantined:,}</span>"
    )
    skipped = (
        f", {result.partitions_skipped} done before"
        if getattr(result, "partitions_skipped", 0)
        else ""
    )
    tail = (
        f"{result.partitions} partitions{skipped}, {escape(result.execution_mode)}, "
        f"{result.wall_seconds:.1f} s wall &middot; output "
        f"<code>{escape(result.output_path)}</code>"
    )
    return (
        f"<div><b>{escape(result.name)}</b><table style='{_TABLE}'>{''.join(rows)}</table>"
        f"<div>{check}</div><div style='color:#777'>{tail}</div></div>"
    )
