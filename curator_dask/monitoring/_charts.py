"""Two chart kinds for the run report, drawn by matplotlib (PNG embedded in the page)."""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FONT = "-apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


@dataclass
class Bars:
    """Horizontal stacked bars: one row per category, one segment per series."""

    title: str
    categories: list[str]
    series: list[tuple[str, list[float], str]]  # (label, values, colour)
    xlabel: str = ""
    notes: list[str] = field(default_factory=list)  # text right of each bar


@dataclass
class Line:
    """One series of a :class:`Lines` chart."""

    label: str
    y: np.ndarray
    color: str
    kind: str = "line"  # "area" (stacked with the other areas), "line", "dashed"


@dataclass
class Lines:
    """Series over a shared x axis (seconds); y values in bytes."""

    title: str
    x: np.ndarray
    series: list[Line]
    xlabel: str = "seconds since start"


def byte_unit(vmax: float) -> tuple[str, float]:
    """The binary unit that suits values up to ``vmax``: (name, divisor)."""
    for name, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if vmax >= 1024**power:
            return name, float(1024**power)
    return "B", 1.0


def nice_ticks(vmax: float, n: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``vmax``."""
    if not vmax > 0 or not math.isfinite(vmax):
        return [0.0, 1.0]
    raw = vmax / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    top = step * math.ceil(vmax / step - 1e-9)
    return [i * step for i in range(round(top / step) + 1)]


def fmt_num(v: float) -> str:
    """Compact number: 1234 -> 1.2k, 2500000 -> 2.5M."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.1f}{suffix}"
    return f"{v:g}"


def _stacked(lines: Lines) -> list[tuple[Line, np.ndarray, np.ndarray]]:
    """(series, bottom, top) for each series; areas stack, lines start at 0."""
    base = np.zeros(len(lines.x))
    out = []
    for s in lines.series:
        y = np.nan_to_num(np.asarray(s.y, dtype="float64"))
        if s.kind == "area":
            out.append((s, base, base + y))
            base = base + y
        else:
            out.append((s, np.zeros(len(y)), y))
    return out


# -- matplotlib ---------------------------------------------------------------------------
def have_matplotlib() -> bool:
    """True when matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _mpl_png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img class="chart" alt="" src="data:image/png;base64,{data}">'


def _mpl_figure(width: float, height: float) -> tuple[Any, Any]:
    # Figure + Agg canvas directly: no pyplot, no global state, safe in a thread
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    return fig, ax


def mpl_bars(chart: Bars) -> str:
    """Render :class:`Bars` as an inline PNG ``<img>``."""
    n = len(chart.categories)
    fig, ax = _mpl_figure(7.6, 0.9 + 0.42 * max(n, 1))
    y = np.arange(n)
    left = np.zeros(n)
    for label, values, color in chart.series:
        v = np.asarray(values, dtype="float64")
        ax.barh(y, v, left=left, color=color, label=label, height=0.62)
        left = left + v
    ax.set_yticks(y, chart.categories)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(chart.xlabel)
    ax.xaxis.set_major_formatter(lambda v, _: fmt_num(v))
    vmax = float(left.max()) if n else 1.0
    ax.set_xlim(0, vmax * 1.32 if vmax > 0 else 1)
    for yi, (total, note) in enumerate(zip(left, chart.notes, strict=False)):
        ax.text(total + vmax * 0.01, yi, note, va="center", fontsize=8, color="#444")
    _mpl_title(ax, chart.title, len(chart.series) > 1, len(chart.series))
    return _mpl_png(fig)


def mpl_lines(chart: Lines) -> str:
    """Render :class:`Lines` as an inline PNG ``<img>``."""
    fig, ax = _mpl_figure(7.6, 3.0)
    stacked = _stacked(chart)
    vmax = max((float(np.nanmax(top)) for _, _, top in stacked if len(top)), default=1.0)
    unit, div = byte_unit(vmax)
    x = np.asarray(chart.x, dtype="float64")
    for s, bottom, top in stacked:
        if s.kind == "area":
            ax.fill_between(
                x,
                bottom / div,
                top / div,
                color=s.color,
                alpha=0.75,
                label=s.label,
                linewidth=0,
                step="post",
            )
        else:
            ax.step(
                x,
                top / div,
                where="post",
                color=s.color,
                label=s.label,
                linestyle="--" if s.kind == "dashed" else "-",
                linewidth=1.6,
            )
    ax.set_xlabel(chart.xlabel)
    ax.set_ylabel(unit)
    ax.set_ylim(0, vmax / div * 1.08 if vmax > 0 else 1)
    ax.set_xlim(x.min() if len(x) else 0, x.max() if len(x) and x.max() > x.min() else 1)
    _mpl_title(ax, chart.title, True, len(chart.series))
    return _mpl_png(fig)


def _mpl_title(ax: Any, title: str, legend: bool, n: int) -> None:
    # the legend goes between the title and the plot, where it never hides data
    ax.set_title(
        title,
        loc="left",
        fontsize=11,
        fontweight="bold",
        pad=20 if legend else 6,
    )
    if legend:
        ax.legend(
            loc="lower left",
            bbox_to_anchor=(0, 1.0),
            fontsize=8,
            frameon=False,
            ncols=min(5, n),
            borderaxespad=0.2,
            handlelength=1.6,
        )


# -- plain SVG ----------------------------------------------------------------------------
_W = 760


def render(chart: Bars | Lines, engine: str = "matplotlib") -> str:
    """Render ``chart`` with matplotlib to an HTML fragment (an embedded PNG).

    matplotlib is the one chart engine: the report's charts and the notebook plots of
    :mod:`curator_dask.explore` both use it (it also serves interactive use in Jupyter).
    """
    if engine != "matplotlib":
        raise ValueError(f"engine must be 'matplotlib', got {engine!r}")
    return mpl_bars(chart) if isinstance(chart, Bars) else mpl_lines(chart)
