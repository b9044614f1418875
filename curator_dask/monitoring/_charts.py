"""Two chart kinds for the run report, drawn by matplotlib (PNG) or as plain SVG."""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from html import escape
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


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="{escape(FONT)}" '
        f'font-size="11"><title>{escape(title)}</title>'
        f'<text x="8" y="18" font-size="14" font-weight="bold">{escape(title)}</text>'
        + "".join(body)
        + "</svg>"
    )


def _legend(items: list[tuple[str, str, str]], x: float, y: float) -> list[str]:
    out = []
    for label, color, kind in items:
        if kind == "line" or kind == "dashed":
            dash = ' stroke-dasharray="5,3"' if kind == "dashed" else ""
            out.append(
                f'<line x1="{x}" y1="{y - 4}" x2="{x + 14}" y2="{y - 4}" stroke="{color}" '
                f'stroke-width="2"{dash}/>'
            )
        else:
            out.append(f'<rect x="{x}" y="{y - 9}" width="12" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 18}" y="{y}">{escape(label)}</text>')
        x += 26 + 6.5 * len(label)
    return out


def svg_bars(chart: Bars) -> str:
    """Render :class:`Bars` as inline SVG."""
    n = len(chart.categories)
    label_w = min(220, 20 + 6.6 * max((len(c) for c in chart.categories), default=4))
    plot_x, plot_w, row_h, top = label_w, _W - label_w - 150, 26, 44
    height = top + row_h * n + 40
    totals = np.zeros(n)
    for _, values, _ in chart.series:
        totals = totals + np.asarray(values, dtype="float64")
    ticks = nice_ticks(float(totals.max()) if n else 1.0)
    scale = plot_w / ticks[-1] if ticks[-1] > 0 else 0.0
    body = []
    for t in ticks:
        tx = plot_x + t * scale
        body.append(
            f'<line x1="{tx:.1f}" y1="{top - 4}" x2="{tx:.1f}" y2="{top + row_h * n}" '
            f'stroke="#e5e5e5"/><text x="{tx:.1f}" y="{top + row_h * n + 14}" '
            f'text-anchor="middle" fill="#555">{fmt_num(t)}</text>'
        )
    for i, cat in enumerate(chart.categories):
        y = top + i * row_h
        body.append(
            f'<text x="{plot_x - 6}" y="{y + row_h / 2 + 4}" text-anchor="end">{escape(cat)}</text>'
        )
        x = plot_x
        for label, values, color in chart.series:
            w = float(values[i]) * scale
            if w > 0:
                body.append(
                    f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" '
                    f'fill="{color}"><title>{escape(label)}: {values[i]:,.0f}</title></rect>'
                )
            x += w
        if i < len(chart.notes):
            body.append(
                f'<text x="{x + 6:.1f}" y="{y + row_h / 2 + 4}" fill="#444" font-size="10">'
                f"{escape(chart.notes[i])}</text>"
            )
    if chart.xlabel:
        body.append(
            f'<text x="{plot_x + plot_w / 2}" y="{height - 6}" text-anchor="middle" '
            f'fill="#555">{escape(chart.xlabel)}</text>'
        )
    if len(chart.series) > 1:
        body += _legend([(lbl, c, "area") for lbl, _, c in chart.series], plot_x, 36)
    return _svg(_W, int(height), body, chart.title)


def svg_lines(chart: Lines) -> str:
    """Render :class:`Lines` as inline SVG (step lines, stacked areas)."""
    height, left, right, top, bottom = 280, 64, 16, 50, 40
    plot_w, plot_h = _W - left - right, height - top - bottom
    x = np.asarray(chart.x, dtype="float64")
    stacked = _stacked(chart)
    vmax = max((float(np.nanmax(t)) for _, _, t in stacked if len(t)), default=0.0)
    unit, div = byte_unit(vmax)
    yticks = nice_ticks(vmax / div)
    span = float(x.max() - x.min()) if len(x) else 0.0
    span = span if span > 0 else 1.0
    xticks = [t for t in nice_ticks(span, 6) if t <= span * 1.0001]
    x0 = float(x.min()) if len(x) else 0.0

    def px(v: Any) -> np.ndarray:
        return left + (np.asarray(v) - x0) / span * plot_w

    def py(v: Any) -> np.ndarray:
        return top + plot_h - np.asarray(v) / div / (yticks[-1] or 1) * plot_h

    body = []
    for t in yticks:
        ty = float(py(t * div))
        body.append(
            f'<line x1="{left}" y1="{ty:.1f}" x2="{left + plot_w}" y2="{ty:.1f}" '
            f'stroke="#e5e5e5"/><text x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end" '
            f'fill="#555">{t:g}</text>'
        )
    for t in xticks:
        tx = float(px(x0 + t))
        body.append(
            f'<text x="{tx:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
            f'fill="#555">{t:g}</text>'
        )
    body.append(
        f'<text x="14" y="{top + plot_h / 2}" transform="rotate(-90 14 {top + plot_h / 2})" '
        f'text-anchor="middle" fill="#555">{unit}</text>'
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle" fill="#555">'
        f"{escape(chart.xlabel)}</text>"
    )

    def step_points(xs: np.ndarray, ys: np.ndarray) -> list[tuple[float, float]]:
        pts = []
        for i in range(len(xs)):
            if i:
                pts.append((xs[i], ys[i - 1]))
            pts.append((xs[i], ys[i]))
        return pts

    xs = px(x)
    for s, bottom_y, top_y in stacked:
        upper = step_points(xs, py(top_y))
        if s.kind == "area":
            lower = step_points(xs, py(bottom_y))[::-1]
            pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in upper + lower)
            body.append(f'<polygon points="{pts}" fill="{s.color}" fill-opacity="0.75"/>')
        else:
            dash = ' stroke-dasharray="5,3"' if s.kind == "dashed" else ""
            pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in upper)
            body.append(
                f'<polyline points="{pts}" fill="none" stroke="{s.color}" '
                f'stroke-width="1.8"{dash}/>'
            )
    body.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#888"/>'
    )
    body += _legend([(s.label, s.color, s.kind) for s in chart.series], left, 38)
    return _svg(_W, height, body, chart.title)


def render(chart: Bars | Lines, engine: str) -> str:
    """Render ``chart`` with ``engine`` (``"matplotlib"`` or ``"svg"``) to an HTML fragment."""
    if engine == "matplotlib":
        return mpl_bars(chart) if isinstance(chart, Bars) else mpl_lines(chart)
    if engine == "svg":
        return svg_bars(chart) if isinstance(chart, Bars) else svg_lines(chart)
    raise ValueError(f"engine must be 'matplotlib' or 'svg', got {engine!r}")
