"""Server-drawn charts: the geometry of small inline SVG charts, computed here and drawn by
templates/console/dashboard/_chart.html. No script and no library: a chart is part of the page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

WIDTH = 600
HEIGHT = 160
_LEFT = 64  # room for the y axis' labels
_BOTTOM = 18  # room for the x axis' labels
_TOP = 8


@dataclass(frozen=True)
class Series:
    """`kind`: "bar" (stacked with the other bars) or "line"; `css`: its class (colour)."""

    name: str
    values: Sequence[float | None]
    kind: str = "bar"
    css: str = "s1"


@dataclass
class Chart:
    title: str
    description: str
    left: int = _LEFT
    width: int = WIDTH
    height: int = HEIGHT
    rects: list[dict[str, object]] = field(default_factory=list)
    lines: list[dict[str, object]] = field(default_factory=list)
    dots: list[dict[str, object]] = field(default_factory=list)
    y_ticks: list[dict[str, object]] = field(default_factory=list)
    x_ticks: list[dict[str, object]] = field(default_factory=list)
    legend: list[Series] = field(default_factory=list)


def _nice(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10ⁿ at or above `value` (a round top for the y axis)."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 0.1
    while magnitude > value:
        magnitude /= 10
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value * 100:g}%"
    return f"{value:g}{unit}"


def time_chart(
    *, title: str, description: str, labels: Sequence[str], series: Sequence[Series], unit: str = "",
    every: int = 10,
) -> Chart:
    """Bars (stacked) and lines over the same x positions, one per label; `every`: label one x in
    so many. Values of None leave a gap in a line; a value with none beside it (a single interval
    with calls) is drawn as a dot, which a line of one point would not be."""
    chart = Chart(title, description, legend=list(series))
    count = max(1, len(labels))
    plot_w, plot_h = WIDTH - _LEFT, HEIGHT - _BOTTOM - _TOP
    step = plot_w / count
    stacked = [sum(s.values[i] or 0 for s in series if s.kind == "bar") for i in range(len(labels))]
    highest = max([*stacked, *(v or 0 for s in series if s.kind == "line" for v in s.values), 0])
    top = _nice(highest) if unit != "%" else max(0.01, min(1.0, _nice(highest * 100) / 100))

    def y(value: float) -> float:
        return round(_TOP + plot_h - plot_h * value / top, 1)

    base = [0.0] * len(labels)
    for s in series:
        if s.kind != "bar":
            continue
        for i, value in enumerate(s.values):
            if value:
                chart.rects.append({
                    "x": round(_LEFT + i * step + step * 0.1, 1), "y": y(base[i] + value),
                    "w": round(step * 0.8, 1), "h": round(y(base[i]) - y(base[i] + value), 1),
                    "css": s.css, "tip": f"{labels[i]}: {_fmt(value, unit)} {s.name}",
                })
                base[i] += value
    for s in series:
        if s.kind != "line":
            continue
        for run in _runs(s.values):
            if len(run) == 1:
                i, value = run[0]
                chart.dots.append({"cx": round(_LEFT + i * step + step / 2, 1), "cy": y(value), "css": s.css,
                                   "tip": f"{labels[i]}: {_fmt(round(value, 4), unit)} {s.name}"})
            else:
                points = [f"{round(_LEFT + i * step + step / 2, 1)},{y(value)}" for i, value in run]
                chart.lines.append({"points": " ".join(points), "css": s.css})
    chart.y_ticks = [{"y": y(top * f), "label": _fmt(round(top * f, 4), unit)} for f in (0, 0.5, 1)]
    chart.x_ticks = [
        {"x": round(_LEFT + i * step + step / 2, 1), "label": label}
        for i, label in enumerate(labels) if i % every == 0
    ]
    return chart


def _runs(values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """The stretches of consecutive values that are not None, each as (x index, value)."""
    runs: list[list[tuple[int, float]]] = []
    run: list[tuple[int, float]] | None = None
    for i, value in enumerate(values):
        if value is None:
            run = None
            continue
        if run is None:
            run = []
            runs.append(run)
        run.append((i, value))
    return runs


def bar_list(*, title: str, items: Sequence[tuple[str, float]], row_height: int = 22) -> Chart:
    """Horizontal bars, one per (label, value), longest first as given."""
    chart = Chart(title, title, height=max(row_height, row_height * len(items)))
    highest = max((value for _, value in items), default=0) or 1
    label_w = 200
    for i, (label, value) in enumerate(items):
        chart.rects.append({
            "x": label_w, "y": i * row_height + 3, "w": round((WIDTH - label_w - 60) * value / highest, 1),
            "h": row_height - 6, "css": "s1", "tip": f"{label}: {value:g}", "label": label, "value": f"{value:g}",
            "text_y": i * row_height + row_height - 7,
        })
    return chart
