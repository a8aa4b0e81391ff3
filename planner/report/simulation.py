"""A simulation beside the serving model: percentile tables, JSON and a latency chart."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from planner.catalog import Catalog
from planner.plan.types import WorkloadPlan
from planner.report.json_text import finite
from planner.report.plot import _figure, _save, _style, chart_format
from planner.schema.problem import Problem
from planner.simulate import SimulationReport, analytic, simulation_notes

METRICS = (
    ("ttft", "time to first token, s"),
    ("tpot", "time per output token, s"),
    ("e2e", "end to end, s"),
)


def simulation_summary(
    rep: SimulationReport,
    problem: Problem,
    cat: Catalog,
    groups: list[WorkloadPlan],
    *,
    load: float,
) -> dict[str, Any]:
    """Per replica group: simulated and analytic percentiles; fleet: pooled percentiles,
    output tokens/s, the longest queue and the highest KV use."""
    out_groups = []
    unbounded = []
    for g in rep.groups:
        wp = groups[g.plan_index]
        model = analytic(problem, cat, wp, load=load, plan_groups=groups)
        if any(math.isinf(v) for m, _ in METRICS for v in model[m].values()):
            unbounded.append(f"`{g.workload}` {g.label}")
        res = g.result
        sim = {m: {str(p): float(v) for p, v in _pct(getattr(res, m)).items()} for m, _ in METRICS}
        out_groups.append(
            {
                "workload": g.workload,
                "replica": g.label,
                "replicas": wp.replicas,
                "engines": g.engines,
                "requests": len(res.e2e),
                "simulated": sim,
                "model": {m: {str(p): v for p, v in model[m].items()} for m, _ in METRICS},
                "max_queue": max((q for _, q in res.queue), default=0),
                "max_kv_share": max((k for _, k in res.kv_share), default=0.0),
            }
        )
    # Standard JSON: an unbounded model figure (no steady state) or one of no samples is None
    # (null), which the note above and the table (`unbounded`, `-`) say in words.
    return finite(
        {
            "seed": rep.seed,
            "requests": rep.requests,
            "load": load,
            "output_tokens_per_s": rep.tokens_per_s,
            "fleet": {m: {str(p): v for p, v in rep.percentiles(m).items()} for m, _ in METRICS},
            "groups": out_groups,
            "notes": simulation_notes(rep, problem, groups, load) + _unbounded_note(unbounded),
        }
    )


def _unbounded_note(groups: list[str]) -> list[str]:
    """Why a model figure reads `unbounded` (null in JSON)."""
    if not groups:
        return []
    return [
        f"the serving model has no steady state for {', '.join(groups)} at this traffic (more "
        "work arrives than its engines do): its queue grows without bound, so its model figures "
        "are unbounded (null in JSON); the simulated ones are those of the replayed requests"
    ]


def _pct(xs: list[float]) -> dict[int, float]:
    if not xs:
        return {p: float("nan") for p in (50, 90, 95, 99)}
    return {p: float(np.percentile(xs, p)) for p in (50, 90, 95, 99)}


def simulation_renderable(summary: dict[str, Any]) -> Group:
    parts: list[Any] = [
        Text(
            f"simulated {summary['requests']:,} requests (seed {summary['seed']}, load "
            f"{summary['load']:g}): {summary['output_tokens_per_s']:,.0f} output tokens/s"
        )
    ]
    parts += [Text(f"note: {n}", style="bold") for n in summary.get("notes", [])]
    fleet = Table(title="every request of the plan")
    fleet.add_column("figure")
    for p in ("50", "95", "99"):
        fleet.add_column(f"p{p} simulated", justify="right")
    for m, label in METRICS:
        fleet.add_row(label, *(_s(summary["fleet"][m][p]) for p in ("50", "95", "99")))
    parts.append(fleet)
    for g in summary["groups"]:
        lanes = g["engines"] // max(1, g["replicas"])
        per = f", each {lanes} pipelined micro-batches" if lanes > 1 else ""
        t = Table(title=f"{g['workload']}: {g['replicas']} replica(s) of {g['replica']}{per}")
        t.add_column("figure")
        for p in ("50", "95", "99"):
            t.add_column(f"p{p} simulated", justify="right")
            t.add_column(f"p{p} model", justify="right")
        for m, label in METRICS:
            row = [label]
            for p in ("50", "95", "99"):
                row += [_s(g["simulated"][m][p]), _s(g["model"][m][p], "unbounded")]
            t.add_row(*row)
        parts.append(t)
        parts.append(
            Text(
                f"  longest queue {g['max_queue']} requests, KV in use at most "
                f"{g['max_kv_share']:.0%} of the engine's cache"
            )
        )
    return Group(*parts)


def _s(x: float | None, none: str = "-") -> str:
    """A figure in seconds; `none` where the summary has None: `-` for a simulated figure (no
    samples), `unbounded` for a model one (no steady state: a queue past its capacity)."""
    return none if x is None else f"{x:.3f}"


def save_latency_plot(rep: SimulationReport, path: Path) -> None:
    """Distribution of simulated TTFT and end-to-end latency (one histogram each)."""
    fmt = chart_format(path)
    with _style():
        fig = _figure(5.2)
        axes = fig.subplots(2, 1)
        for ax, (attr, label) in zip(axes, (METRICS[0], METRICS[2]), strict=True):
            xs = [x for g in rep.groups for x in getattr(g.result, attr)]
            if xs:
                ax.hist(xs, bins=60, color="C0")
                for p, style in ((50, ":"), (95, "--"), (99, "-.")):
                    v = float(np.percentile(xs, p))
                    ax.axvline(v, color="C3", linestyle=style, label=f"p{p} {v:.3g} s")
                ax.legend(fontsize=8)
            ax.set_xlabel(label)
            ax.set_ylabel("requests")
        _save(fig, path, fmt)
