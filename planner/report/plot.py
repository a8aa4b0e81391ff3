"""Charts of what-if results (sweeps, Pareto frontiers, cumulative cost) written as PNG or SVG.

Plain data in (the rows the sweep and frontier commands build), one file out. Figures use
matplotlib's object API on an Agg canvas, never pyplot, so no global backend is switched and no
display is needed. Style settings apply only while a chart is drawn and saved, and the output
depends only on the data: the default style (not the user's matplotlibrc), a fixed SVG hash
salt, no dates or software versions in the metadata. SVG text stays text (svg.fonttype "none").
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.style
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from planner.errors import InputError
from planner.report.labels import place_labels
from planner.schema.files import new_mode, out_target

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}  # file suffix -> matplotlib format
WITH_PLAN = ("OPTIMAL", "FEASIBLE")
DPI = 100  # PNG pixels per inch: an 8 in wide chart is 800 px
WIDTH_IN = 8.0
PANEL_HEIGHT_IN = 2.6
# Pure red marks infeasible points and nothing else, so they stand out (and tests can find them).
INFEASIBLE_COLOR = "#ff0000"
NO_PLAN_COLOR = "#7f7f7f"  # time limit reached without a plan: unknown, not infeasible
# Line colours: matplotlib's default cycle without C3 (tab:red), too close to the infeasible mark.
SERIES_COLORS = ("C0", "C1", "C2", "C4", "C5", "C6", "C8", "C9", "C7")


METRIC_LABELS = {
    "tco_usd": "Total cost (USD)",
    "capex_usd": "Capital cost (USD)",
    "opex_usd_per_year": "Operating cost (USD/year)",
    "tokens_per_s": "Throughput (tokens/s)",
    "power_w": "Wall power (W)",  # sweep and frontier rows carry power at the wall
    "wall_power_w": "Wall power (W)",
    "tokens_per_joule": "Tokens per joule",
    "usd_per_million_tokens": "Cost per million tokens (USD)",
    "ms_per_token": "Time per output token (ms)",
    "ttft_s": "Time to first token (s)",
    "finish_hours": "Training time (h)",
    "rack_units": "Rack units",
    "objective": "Objective",
}

# Readable names of problem fields that are often varied; the unit comes from the suffix.
PARAMETER_NAMES = {
    "budget_usd": "Budget",
    "capex_usd": "Capex ceiling",
    "power_w": "Power ceiling",
    "max_devices": "Maximum devices",
    "max_rack_units": "Maximum rack units",
    "memory_headroom": "Memory headroom",
    "max_tensor_parallel": "Maximum tensor parallelism",
    "max_stages": "Maximum pipeline stages",
    "lifetime_years": "Lifetime",
    "utilization": "Utilization",
    "electricity_usd_per_kwh": "Electricity price",
    "pue": "PUE",
    "max_ms_per_token": "Latency ceiling",
    "min_tokens_per_s": "Required throughput",
    "max_ttft_s": "Time-to-first-token ceiling",
    "context_tokens": "Context",
    "prompt_tokens": "Prompt",
    "concurrency": "Concurrency",
    "token_budget": "Training tokens",
    "deadline_hours": "Deadline",
    "seq_len": "Sequence length",
    "micro_batch": "Micro-batch",
}

# Longest first: "_usd_per_kwh" must win over "_kwh".
UNIT_SUFFIXES = (
    ("_usd_per_kwh", "USD/kWh"),
    ("_usd_per_hour", "USD/h"),
    ("_usd_per_year", "USD/year"),
    ("_ms_per_token", "ms/token"),
    ("_tokens_per_s", "tokens/s"),
    ("_usd", "USD"),
    ("_kwh", "kWh"),
    ("_kw", "kW"),
    ("_w", "W"),
    ("_tokens", "tokens"),
    ("_ms", "ms"),
    ("_hours", "h"),
    ("_years", "years"),
    ("_s", "s"),
    ("_gb", "GB"),
    ("_bytes", "bytes"),
    ("_pct", "%"),
)
_WORDS = {"max": "maximum", "min": "minimum", "ttft": "time to first token", "pue": "PUE"}


# ------------------------------------------------------------------------------------------------
# Labels
# ------------------------------------------------------------------------------------------------


def axis_label(key: str) -> str:
    """A readable axis label with its unit, for a metric key or a dotted parameter path.

    >>> axis_label("tco_usd"), axis_label("constraints.budget_usd")
    ('Total cost (USD)', 'Budget (USD)')
    """
    if key in METRIC_LABELS:
        return METRIC_LABELS[key]
    parts = [p for p in re.split(r"[.\[\]]+", key) if p]
    if not parts:
        return key
    field = parts[-1]
    unit = next((u for suffix, u in UNIT_SUFFIXES if field.endswith(suffix)), None)
    if field in PARAMETER_NAMES:
        name = PARAMETER_NAMES[field]
    else:
        stem = field
        for suffix, _ in UNIT_SUFFIXES:
            if stem.endswith(suffix) and len(stem) > len(suffix):
                stem = stem[: -len(suffix)]
                break
        words = " ".join(_WORDS.get(w, w) for w in stem.split("_") if w)
        name = words[:1].upper() + words[1:]
    middle = ".".join(parts[1:-1])
    if middle:
        name += f" of workload {middle}" if parts[0] == "workloads" else f", {middle}"
    return f"{name} ({unit})" if unit else name


def value_text(v: Any) -> str:
    """A parameter value as it reads in a legend: 500,000 or 0.12 or fp8."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def _tick(v: float, _pos: int | None = None) -> str:
    """Tick labels with thousands separators and no scientific offset."""
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.6g}"


# ------------------------------------------------------------------------------------------------
# Charts
# ------------------------------------------------------------------------------------------------


def plot_sweep(
    rows: list[dict[str, Any]],
    x: str,
    ys: list[str],
    path: Path,
    *,
    title: str,
    second: str | None = None,
) -> None:
    """One panel per metric in `ys` against the varied parameter `x`, written to `path`.

    Rows without a plan sit on the x axis as crosses (red: proved infeasible; grey: no plan in
    time). The device mix is written at the first point of each new mix. With `second` (a
    two-parameter sweep) there is one line per value of that parameter.
    """
    fmt = chart_format(path)
    if not ys:
        raise ValueError("plot_sweep needs at least one metric in `ys`")
    with _style():
        fig = _figure(0.9 + PANEL_HEIGHT_IN * len(ys))
        axes: list[Axes] = list(fig.subplots(len(ys), 1, sharex=True, squeeze=False)[:, 0])
        positions, categories = _x_positions([r.get(x) for r in rows])
        groups = _groups(rows, positions, second, numeric=categories is None)
        for gi, (label, members) in enumerate(groups):
            color = SERIES_COLORS[gi % len(SERIES_COLORS)]
            for ax, key in zip(axes, ys, strict=True):
                _draw_series(ax, members, key, color, label)
            _mark_no_plan(axes, members)
            changes = _annotate_mixes(axes, ys, members, color if second else "0.15")
            if second is None:
                for pos in changes[1:]:
                    for ax in axes:
                        ax.axvline(pos, color="0.75", linestyle=":", linewidth=0.8, zorder=0)
        for ax, key in zip(axes, ys, strict=True):
            ax.set_ylabel(axis_label(key))
            ax.yaxis.set_major_formatter(FuncFormatter(_tick))
            ax.grid(True, color="0.92")
        bottom = axes[-1]
        bottom.set_xlabel(axis_label(x))
        if categories is None:
            bottom.xaxis.set_major_formatter(FuncFormatter(_tick))
        else:
            bottom.set_xticks(range(len(categories)), categories)
        if not rows:
            _note(axes[0], "no points")
        _legend(axes[0], title=axis_label(second) if second else None)
        fig.suptitle(title)
        _save(fig, path, fmt)


def plot_frontier(points: list[dict[str, Any]], x: str, y: str, path: Path, *, title: str) -> None:
    """Pareto points of metric `y` against metric `x`: a step line, markers, the device mix at each."""
    fmt = chart_format(path)
    with _style():
        fig = _figure(5.0)
        ax = fig.subplots()
        pts = sorted(
            (
                (float(p[x]), float(p[y]), str(p.get("devices") or ""), p.get("status"))
                for p in points
                if p.get("status", "OPTIMAL") in WITH_PLAN
                and _is_number(p.get(x))
                and _is_number(p.get(y))
            ),
            key=lambda t: (t[0], t[1]),
        )
        if pts:
            xs = [p[0] for p in pts]
            vs = [p[1] for p in pts]
            # "post": from each point on, its value is what that much x buys, until the next point.
            ax.step(xs, vs, where="post", color="C0", alpha=0.6, label="Pareto frontier")
            ax.plot(xs, vs, linestyle="none", marker="o", color="C0")
            _hollow(ax, [(p[0], p[1]) for p in pts if p[3] == "FEASIBLE"], "C0")
            for i, (px, py, mix, _) in enumerate(pts):
                if mix:
                    _annotate(ax, mix, px, py, i, "0.15", leftward=_far_right(px, xs))
            ax.legend(loc="best", fontsize=8)
        else:
            _note(ax, "no feasible plan")
        ax.set_xlabel(axis_label(x))
        ax.set_ylabel(axis_label(y))
        ax.xaxis.set_major_formatter(FuncFormatter(_tick))
        ax.yaxis.set_major_formatter(FuncFormatter(_tick))
        ax.grid(True, color="0.92")
        ax.set_title(title)
        _save(fig, path, fmt)


def plot_cumulative_cost(
    months: list[float],
    series: dict[str, list[float]],
    path: Path,
    *,
    title: str,
    breakeven: dict[str, float] | None = None,
) -> None:
    """Cumulative cost (USD) over months for each option, with dashed lines at break-even months."""
    fmt = chart_format(path)
    for name, costs in series.items():
        if len(costs) != len(months):
            raise ValueError(f"series `{name}` has {len(costs)} values for {len(months)} months")
    with _style():
        fig = _figure(5.0)
        ax = fig.subplots()
        for i, (name, costs) in enumerate(series.items()):
            ax.plot(months, costs, color=SERIES_COLORS[i % len(SERIES_COLORS)], label=name)
        for name, month in (breakeven or {}).items():
            if not _is_number(month):
                continue  # no break-even within reach: nothing to draw
            text = f"break-even {name}: {month:,.1f} months"
            ax.axvline(month, color="0.3", linestyle="--", linewidth=1, label=text)
            ann = ax.annotate(
                f"{month:,.1f} mo",
                xy=(month, 1.0),
                xycoords=ax.get_xaxis_transform(),
                xytext=(3, -12),
                textcoords="offset points",
                fontsize=7,
                color="0.3",
            )
            ann.set_in_layout(False)
        if not series:
            _note(ax, "no options")
        else:
            ax.legend(loc="best", fontsize=8)
        ax.set_xlabel("Months")
        ax.set_ylabel("Cumulative cost (USD)")
        ax.yaxis.set_major_formatter(FuncFormatter(_tick))
        ax.grid(True, color="0.92")
        ax.set_title(title)
        _save(fig, path, fmt)


# ------------------------------------------------------------------------------------------------
# Pieces
# ------------------------------------------------------------------------------------------------

_Member = tuple[float, dict[str, Any]]  # x position, row
_HOLLOW_LABEL = "feasible, not proved optimal"
_MARK_LABELS = (_HOLLOW_LABEL, "infeasible", "no plan (time limit)")


def chart_format(path: Path) -> str:
    """The image format named by the file's suffix, or an InputError listing the accepted ones."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        accepted = " or ".join(f"`{s}`" for s in FORMATS)
        raise InputError(
            f"chart `{path}`: unknown image format `{path.suffix or '(no suffix)'}`; "
            f"name the file with {accepted}"
        )
    out_target(path, "--plot")  # a folder, a FIFO or a missing folder fails here, before work
    return fmt


@contextlib.contextmanager
def _style() -> Iterator[None]:
    """matplotlib's default style plus our fixed settings, for the duration of one chart."""
    with (
        matplotlib.style.context("default"),
        mpl.rc_context(
            {
                "svg.fonttype": "none",  # text as <text> elements, not glyph paths
                "svg.hashsalt": "planner",  # element ids from a fixed salt, not a random uuid
                "font.size": 9.0,
            }
        ),
    ):
        yield


def _figure(height_in: float) -> Figure:
    fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)  # attaches itself to the figure: rendering without pyplot or a display
    return fig


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _x_positions(values: Sequence[Any]) -> tuple[list[float], list[str] | None]:
    """Numeric x values as they are; otherwise one slot per distinct value, in first-seen order."""
    if all(_is_number(v) for v in values):
        return [float(v) for v in values], None
    categories: list[str] = []
    for v in values:
        if value_text(v) not in categories:
            categories.append(value_text(v))
    return [float(categories.index(value_text(v))) for v in values], categories


def _groups(
    rows: list[dict[str, Any]], positions: list[float], second: str | None, *, numeric: bool
) -> list[tuple[str | None, list[_Member]]]:
    """Rows split into lines (one per value of `second`), each sorted along x."""
    grouped: dict[str, list[_Member]] = {}
    if second is None:
        grouped[""] = list(zip(positions, rows, strict=True))
    else:
        keyed = list(zip(positions, rows, strict=True))
        seconds: list[Any] = [r.get(second) for r in rows]
        if all(_is_number(v) for v in seconds):
            order = sorted(range(len(rows)), key=lambda i: float(seconds[i]))
        else:
            order = list(range(len(rows)))
        for i in order:
            grouped.setdefault(value_text(seconds[i]), []).append(keyed[i])
    out: list[tuple[str | None, list[_Member]]] = []
    for label, members in grouped.items():
        if numeric:
            members = sorted(members, key=lambda m: m[0])
        out.append((label if second is not None else None, members))
    return out


def _has_plan(row: dict[str, Any]) -> bool:
    return row.get("status") in WITH_PLAN


def _y(row: dict[str, Any], key: str) -> float:
    v: Any = row.get(key)
    return float(v) if _has_plan(row) and _is_number(v) else math.nan


def _draw_series(ax: Axes, members: list[_Member], key: str, color: str, label: str | None) -> None:
    """The line through one series' points; NaN (no plan, no value) breaks the line there."""
    xs = [m[0] for m in members]
    vs = [_y(m[1], key) for m in members]
    if not any(math.isfinite(v) for v in vs):
        return
    ax.plot(xs, vs, marker="o", markersize=5, color=color, label=label)
    _hollow(
        ax,
        [(m[0], _y(m[1], key)) for m in members if m[1].get("status") == "FEASIBLE"],
        color,
    )


def _hollow(ax: Axes, pts: list[tuple[float, float]], color: str) -> None:
    """Hollow markers over points that are feasible but not proved optimal."""
    pts = [p for p in pts if math.isfinite(p[1])]
    if pts:
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            linestyle="none",
            marker="o",
            markersize=5,
            markerfacecolor="white",
            color=color,
            label=_HOLLOW_LABEL,
        )


def _mark_no_plan(axes: list[Axes], members: list[_Member]) -> None:
    """Crosses on the x axis of every panel where a row has no plan."""
    infeasible = [m[0] for m in members if m[1].get("status") == "INFEASIBLE"]
    unknown = [m[0] for m in members if not _has_plan(m[1]) and m[1].get("status") != "INFEASIBLE"]
    for ax in axes:
        for xs, color, label in (
            (infeasible, INFEASIBLE_COLOR, "infeasible"),
            (unknown, NO_PLAN_COLOR, "no plan (time limit)"),
        ):
            if xs:
                # x in data units, y in axes units: the cross sits on the x axis whatever the scale.
                ax.plot(
                    xs,
                    [0.0] * len(xs),
                    transform=ax.get_xaxis_transform(),
                    linestyle="none",
                    marker="x",
                    markersize=9,
                    markeredgewidth=2.5,
                    color=color,
                    clip_on=False,
                    zorder=5,
                    label=label,
                )


def _annotate_mixes(
    axes: list[Axes], ys: list[str], members: list[_Member], color: str
) -> list[float]:
    """Write the device mix at the first point of each new mix; return those x positions."""
    changes: list[float] = []
    last: str | None = None
    for pos, row in members:
        mix = str(row.get("devices") or "")
        if not _has_plan(row) or not mix or mix == last:
            continue
        last = mix
        changes.append(pos)
        # The topmost panel with a value at this point carries the label.
        for ax, key in zip(axes, ys, strict=True):
            v = _y(row, key)
            if math.isfinite(v):
                leftward = _far_right(pos, [m[0] for m in members])
                _annotate(ax, mix, pos, v, len(changes) - 1, color, leftward=leftward)
                break
    return changes


def _annotate(
    ax: Axes, text: str, x: float, y: float, i: int, color: str, *, leftward: bool
) -> None:
    """A small label beside a point, alternately above and below so neighbours overlap less.

    Points in the right part of the chart get their label on their left, inside the figure.
    """
    ann = ax.annotate(
        text,
        xy=(x, y),
        xytext=(-4 if leftward else 4, 7 if i % 2 == 0 else -13),
        textcoords="offset points",
        ha="right" if leftward else "left",
        fontsize=7,
        color=color,
    )
    ann.set_in_layout(False)  # long labels may run past the axes; they must not squash it


def _far_right(x: float, xs: Sequence[float]) -> bool:
    """Whether x lies in the right third of the span of xs."""
    lo, hi = min(xs), max(xs)
    return hi > lo and x > lo + 0.65 * (hi - lo)


def _note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def _legend(ax: Axes, *, title: str | None) -> None:
    """One entry per label (a mark drawn in several series counts once), series before marks."""
    handles, labels = ax.get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for h, lab in zip(handles, labels, strict=True):
        seen.setdefault(lab, h)
    order = sorted(seen, key=lambda lab: lab in _MARK_LABELS)  # stable: series keep their order
    if order:
        ax.legend([seen[k] for k in order], order, loc="best", fontsize=8, title=title)


def _save(fig: Figure, path: Path, fmt: str) -> None:
    """Write the chart atomically: a temporary file beside `path`, then a rename over it."""
    target, st = out_target(path, "--plot")  # through links, regular files only
    # Metadata without dates or versions, so the same data gives the same bytes.
    metadata: dict[str, Any] = {
        "svg": {"Date": None},
        "pdf": {"CreationDate": None, "Producer": None},
        "png": {"Software": None},
    }[fmt]
    place_labels(fig)
    try:
        mode = new_mode(st)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
        try:
            fig.savefig(tmp, format=fmt, dpi=DPI, metadata=metadata)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise InputError(f"chart `{path}`: cannot write it ({e.strerror or e})") from e
