"""The chart of a Monte-Carlo study: how the cost is spread over the samples (a histogram with
its 5th, 50th and 95th percentiles) and how often each device type is used and bought."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.ticker import FuncFormatter, PercentFormatter

from planner.report.plot import _figure, _note, _save, _style, _tick, chart_format

PERCENTILES = (("p5", ":"), ("p50", "--"), ("p95", ":"))


def plot_study(summary: dict[str, Any], costs: list[float], path: Path, *, title: str) -> None:
    """Two panels: the cost histogram with percentile lines, and per device the share of
    samples whose plan uses it and buys it (bars, longest first)."""
    fmt = chart_format(path)
    devices = summary["devices"]
    with _style():
        fig = _figure(2.6 + 0.9 + 0.28 * max(3, len(devices)))
        top, bottom = fig.subplots(
            2, 1, gridspec_kw={"height_ratios": [2.6, 0.28 * max(3, len(devices))]}
        )
        if costs:
            top.hist(costs, bins=min(40, max(5, len(costs) // 5)), color="C0", alpha=0.75)
            lo, hi = top.get_xlim()
            for key, style in PERCENTILES:
                v = summary["cost_usd"][key]
                top.axvline(v, color="0.2", linestyle=style, linewidth=1)
                left = v > lo + 0.6 * (hi - lo)  # labels in the right part read leftward
                top.annotate(
                    f"{key} ${v:,.0f}",
                    xy=(v, 1.0),
                    xycoords=("data", "axes fraction"),
                    xytext=(-3 if left else 3, -10 if key != "p50" else -22),
                    textcoords="offset points",
                    ha="right" if left else "left",
                    fontsize=7,
                    color="0.2",
                )
        else:
            _note(top, "no sample has a plan")
        top.set_xlabel("total cost over the horizon (USD)")
        top.set_ylabel("samples")
        top.xaxis.set_major_formatter(FuncFormatter(_tick))
        top.grid(True, color="0.92")
        names = list(devices)[::-1]  # the most used on top
        ys = range(len(names))
        used = [devices[n]["share_used"] for n in names]
        bought = [devices[n]["share_buying"] for n in names]
        bottom.barh(ys, used, height=0.7, color="C0", alpha=0.35, label="plan uses it")
        bottom.barh(ys, bought, height=0.35, color="C1", label="plan buys it")
        bottom.set_yticks(list(ys), names)
        bottom.set_xlim(0, 1)
        bottom.xaxis.set_major_formatter(PercentFormatter(1.0))
        bottom.set_xlabel(f"share of the {summary['samples']} samples")
        bottom.grid(True, axis="x", color="0.92")
        if names:
            bottom.legend(loc="lower right", fontsize=8)
        else:
            _note(bottom, "no device chosen")
        fig.suptitle(title)
        _save(fig, path, fmt)
