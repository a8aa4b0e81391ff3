"""The summary of a Monte-Carlo study (planner.whatif.study) as tables: cost quantiles, and the
share of samples whose plan uses, buys or rents each device type."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from planner.whatif.study import Study


def _usd(v: float) -> str:
    return f"${v:,.0f}"


def _pct(v: float) -> str:
    return f"{v:.0%}"


def study_renderable(st: Study, title: str) -> Any:
    s = st.summary
    statuses = ", ".join(f"{n} {k}" for k, n in s["statuses"].items())
    cost = Table(title="total cost", title_justify="left")
    cost.add_column("statistic")
    cost.add_column("cost (USD)", justify="right")
    for k, v in s["cost_usd"].items():
        cost.add_row(k, _usd(v))
    if not s["cost_usd"]:
        cost.add_row("—", "no sample has a plan")
    devices = Table(title=f"share of the {s['samples']} samples whose plan", title_justify="left")
    devices.add_column("device")
    for label in ("uses it", "buys it", "rents it", "median count"):
        devices.add_column(label, justify="right")
    for name, d in s["devices"].items():
        devices.add_row(
            name,
            _pct(d["share_used"]),
            _pct(d["share_buying"]),
            _pct(d["share_renting"]),
            f"{d['median_count']:g}",
        )
    lines: list[Any] = [
        title,
        cost,
        devices,
        f"samples: {s['solved']} of {s['samples']} solved ({statuses})",
    ]
    if st.interrupted:
        lines.append("interrupted (Ctrl-C): the summary covers the samples solved before it")
    return Group(*lines)


def study_document(st: Study, seed: int, specs: list[str]) -> dict[str, Any]:
    """The study as JSON: what was drawn, the summary and every sample."""
    return {
        "seed": seed,
        "distributions": specs,
        "factors": st.factors,
        "interrupted": st.interrupted,
        "summary": st.summary,
        "samples": st.samples,
    }
