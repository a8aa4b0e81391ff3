"""Compare two plans (as `Plan.to_dict()` gives them): what changed in cost, power, devices and
each workload, as rows, short sentences, rich tables, or plain data for JSON.

A plan without a result (INFEASIBLE, NO_PLAN) has no figures: its values are None, shown as "—".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from rich.table import Table

from planner.plan.types import plain_data

WITH_PLAN = ("OPTIMAL", "FEASIBLE")
MISSING = "—"


# ------------------------------------------------------------------------------------------------
# What is compared, and how each figure reads
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSpec:
    key: str
    label: str
    fmt: str  # format spec of a value
    unit: str = ""  # appended to values and changes
    money: bool = False  # shown as $1,234

    def show(self, v: float | None) -> str:
        if v is None or not math.isfinite(v):
            return MISSING
        return self._abs(v) if v >= 0 else "-" + self._abs(-v)

    def signed(self, v: float | None) -> str:
        if v is None or not math.isfinite(v):
            return MISSING
        return ("+" if v > 0 else "-" if v < 0 else "") + self._abs(abs(v))

    def _abs(self, v: float) -> str:
        text = format(v, self.fmt)
        return f"${text}" if self.money else text + self.unit


PLAN_METRICS = (
    MetricSpec("tco_usd", "total cost", ",.0f", money=True),
    MetricSpec("capex_usd", "capex", ",.0f", money=True),
    MetricSpec("opex_usd_per_year", "opex per year", ",.0f", money=True),
    MetricSpec("power_w", "power at load", ",.0f", " W"),
    MetricSpec("wall_power_w", "power at the wall", ",.0f", " W"),
    MetricSpec("rack_units", "rack units", ",.0f"),
    MetricSpec("devices", "devices", ",.0f"),  # total count, all types
)
WORKLOAD_METRICS = (
    MetricSpec("replicas", "replicas", ",.0f"),
    MetricSpec("tokens_per_s", "tokens/s", ",.0f"),
    MetricSpec("ms_per_token", "ms/token", ",.1f"),
    MetricSpec("ttft_s", "first token (s)", ",.2f"),
    MetricSpec("finish_hours", "finish (h)", ",.1f"),
    MetricSpec("power_w", "power (W)", ",.0f"),
    MetricSpec("tokens_per_joule", "tokens/J at capacity (devices)", ",.3f"),
    MetricSpec("usd_per_million_tokens", "$/M tokens at capacity", ",.4f"),
)
_PLAN_SPECS = {s.key: s for s in PLAN_METRICS}
_WORKLOAD_SPECS = {s.key: s for s in WORKLOAD_METRICS}
# Figures named in a workload's sentence; replicas and power stay in its table.
_WORKLOAD_SENTENCE = (
    "tokens_per_s",
    "ms_per_token",
    "ttft_s",
    "finish_hours",
    "tokens_per_joule",
    "usd_per_million_tokens",
)


# ------------------------------------------------------------------------------------------------
# The comparison
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricRow:
    """One figure in both plans: the values, the change B - A, and that change relative to A, in %."""

    metric: str
    label: str
    a: float | None
    b: float | None
    change: float | None
    change_pct: float | None  # None when a value is missing or A is zero

    @classmethod
    def of(cls, spec: MetricSpec, a: float | None, b: float | None) -> MetricRow:
        change = None if a is None or b is None else b - a
        pct = None if change is None or not a else 100.0 * change / abs(a)
        return cls(spec.key, spec.label, a, b, change, pct)


@dataclass(frozen=True)
class CountChange:
    """How many of one device (or host) type each plan has; None where a plan has no result."""

    type: str
    a: int | None
    b: int | None
    change: int | None


@dataclass(frozen=True)
class WorkloadChange:
    """One workload's figures in both plans, over all the designs that serve it."""

    name: str
    kind: str
    rows: tuple[MetricRow, ...]


@dataclass(frozen=True)
class Comparison:
    """Plan B against plan A: figures, device and host counts, workloads, and what changed in words."""

    label_a: str
    label_b: str
    problem_a: str
    problem_b: str
    status_a: str
    status_b: str
    objective_a: str
    objective_b: str
    metrics: tuple[MetricRow, ...]
    devices: tuple[CountChange, ...]
    nodes: tuple[CountChange, ...]
    workloads: tuple[WorkloadChange, ...]
    binding_a: tuple[str, ...]
    binding_b: tuple[str, ...]
    summary: tuple[str, ...]


def has_plan(plan: dict[str, Any]) -> bool:
    """Whether a plan dict carries a result (OPTIMAL or FEASIBLE)."""
    return plan.get("status") in WITH_PLAN


def compare_plans(
    a: dict[str, Any], b: dict[str, Any], *, label_a: str = "A", label_b: str = "B"
) -> Comparison:
    """What changes from plan `a` to plan `b` (both `Plan.to_dict()` outputs)."""
    ok_a, ok_b = has_plan(a), has_plan(b)
    metrics = tuple(
        MetricRow.of(
            s, _plan_value(a, s.key) if ok_a else None, _plan_value(b, s.key) if ok_b else None
        )
        for s in PLAN_METRICS
    )
    wa = _workloads(a) if ok_a else {}
    wb = _workloads(b) if ok_b else {}
    # Every workload named by either plan; a plan without a result names none, so take the other's.
    workloads = []
    for name in list(wa) + [n for n in wb if n not in wa]:
        fa, fb = wa.get(name, {}), wb.get(name, {})
        rows = tuple(
            MetricRow.of(s, fa.get(s.key), fb.get(s.key))
            for s in WORKLOAD_METRICS
            if fa.get(s.key) is not None or fb.get(s.key) is not None
        )
        kind = str(fa.get("kind") or fb.get("kind") or "")
        workloads.append(WorkloadChange(name, kind, rows))
    c = Comparison(
        label_a=label_a,
        label_b=label_b,
        problem_a=str(a.get("problem", "")),
        problem_b=str(b.get("problem", "")),
        status_a=str(a.get("status", "")),
        status_b=str(b.get("status", "")),
        objective_a=str(a.get("objective_name", "")),
        objective_b=str(b.get("objective_name", "")),
        metrics=metrics,
        devices=_counts(a, b, "devices"),
        nodes=_counts(a, b, "nodes"),
        workloads=tuple(workloads),
        binding_a=tuple(a.get("binding_constraints", [])) if ok_a else (),
        binding_b=tuple(b.get("binding_constraints", [])) if ok_b else (),
        summary=(),
    )
    return replace(c, summary=tuple(_summary(c)))


def _plan_value(plan: dict[str, Any], key: str) -> float | None:
    if key == "devices":
        return float(sum(int(d["count"]) for d in plan.get("devices", [])))
    v = plan.get(key)
    return None if v is None else float(v)


def _counts(a: dict[str, Any], b: dict[str, Any], key: str) -> tuple[CountChange, ...]:
    """Per type, the count in each plan: A's types first, in A's order, then those new in B."""
    ca, cb = _count_by_type(a, key), _count_by_type(b, key)
    types = list(ca or {}) + [t for t in cb or {} if t not in (ca or {})]
    out = []
    for t in types:
        na = None if ca is None else ca.get(t, 0)
        nb = None if cb is None else cb.get(t, 0)
        out.append(CountChange(t, na, nb, None if na is None or nb is None else nb - na))
    return tuple(out)


def _count_by_type(plan: dict[str, Any], key: str) -> dict[str, int] | None:
    if not has_plan(plan):
        return None
    counts: dict[str, int] = {}
    for line in plan.get(key, []):
        counts[line["type"]] = counts.get(line["type"], 0) + int(line["count"])
    return counts


def _workloads(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per workload name, its figures over all the designs serving it.

    A plan lists one entry per design, so a workload may appear several times. Replicas, tokens/s
    and power add up; latency, first token and finish time are the slowest design's; tokens per
    joule is total tokens over total power; cost per token is the token-weighted mean.
    """
    parts: dict[str, list[dict[str, Any]]] = {}
    for w in plan.get("workloads", []):
        parts.setdefault(w["name"], []).append(w)
    out: dict[str, dict[str, Any]] = {}
    for name, ws in parts.items():
        tokens = sum(float(w["tokens_per_s"]) for w in ws)
        power = sum(float(w["power_w"]) for w in ws)
        key = "usd_per_million_tokens_at_capacity"
        priced = [w for w in ws if w.get(key) is not None]
        priced_tokens = sum(float(w["tokens_per_s"]) for w in priced)
        usd_per_m = (
            sum(float(w[key]) * float(w["tokens_per_s"]) for w in priced) / priced_tokens
            if priced_tokens > 0
            else None
        )
        out[name] = {
            "kind": ws[0].get("kind"),
            "replicas": float(sum(int(w["replicas"]) for w in ws)),
            "tokens_per_s": tokens,
            "ms_per_token": _slowest(ws, "ms_per_token"),
            "ttft_s": _slowest(ws, "ttft_s"),
            "finish_hours": _slowest(ws, "finish_hours"),
            "power_w": power,
            "tokens_per_joule": tokens / power if power > 0 else None,
            "usd_per_million_tokens": usd_per_m,
        }
    return out


def _slowest(ws: list[dict[str, Any]], key: str) -> float | None:
    vals = [float(w[key]) for w in ws if w.get(key) is not None]
    return max(vals) if vals else None


# ------------------------------------------------------------------------------------------------
# Sentences
# ------------------------------------------------------------------------------------------------


def _summary(c: Comparison) -> list[str]:
    """Short sentences on what changed, most important first."""
    la, lb = c.label_a, c.label_b
    ok_a, ok_b = c.status_a in WITH_PLAN, c.status_b in WITH_PLAN
    out: list[str] = []
    if c.objective_a != c.objective_b:
        out.append(f"{la} optimises {c.objective_a}, {lb} optimises {c.objective_b}")
    if not ok_a and not ok_b:
        out.append(f"neither has a plan ({la}: {c.status_a}, {lb}: {c.status_b})")
        return out
    if not ok_a:
        out.append(f"{la} has no plan ({c.status_a}); {lb} is {c.status_b}")
        return out
    if not ok_b:
        out.append(f"{lb} has no plan ({c.status_b}); {la} is {c.status_a}")
        return out

    rows = {r.metric: r for r in c.metrics}
    cost = rows["tco_usd"]
    if cost.change is not None and cost.a is not None:
        if _changed(cost, _PLAN_SPECS["tco_usd"]):
            less = "less" if cost.change < 0 else "more"
            out.append(f"{lb} costs {_usd(abs(cost.change))} {less}{_pct(cost)}")
        else:
            out.append(f"{lb} costs the same as {la} ({_usd(cost.a)})")
    wall = rows["wall_power_w"]
    if wall.change is not None and _changed(wall, _PLAN_SPECS["wall_power_w"]):
        more = "more" if wall.change > 0 else "less"
        out.append(f"{lb} draws {abs(wall.change):,.0f} W {more} at the wall{_pct(wall)}")
    devices = _device_sentence(c.devices)
    out.append(f"{lb} {devices}" if devices else "same devices")
    for w in c.workloads:
        parts = []
        for r in w.rows:
            spec = _WORKLOAD_SPECS[r.metric]
            if r.metric in _WORKLOAD_SENTENCE and _changed(r, spec):
                parts.append(f"{r.label} {spec.show(r.a)} -> {spec.show(r.b)}")
        if parts:
            out.append(f"{w.name}: " + ", ".join(parts))
    if c.binding_a != c.binding_b:
        before = ", ".join(c.binding_a) or "none"
        after = ", ".join(c.binding_b) or "none"
        out.append(f"binding constraints: {before} -> {after}")
    return out


def _usd(v: float) -> str:
    return f"${v:,.0f}"


def _pct(r: MetricRow) -> str:
    return "" if r.change_pct is None else f" ({r.change_pct:+.1f} %)"


def _changed(r: MetricRow, spec: MetricSpec) -> bool:
    """Whether a figure changed as a reader sees it (float noise below display precision is not)."""
    return spec.show(r.a) != spec.show(r.b)


def _device_sentence(devices: tuple[CountChange, ...]) -> str:
    """ "drops 8x h100-sxm, adds 12x mi300x and has 2 more l40s (2 -> 4)", or "" if nothing moved."""
    drops = [f"{d.a}x {d.type}" for d in devices if d.a and not d.b]
    adds = [f"{d.b}x {d.type}" for d in devices if d.b and not d.a]
    counts = [
        f"{abs(d.b - d.a)} {'more' if d.b > d.a else 'fewer'} {d.type} ({d.a} -> {d.b})"
        for d in devices
        if d.a and d.b and d.a != d.b
    ]
    parts = []
    if drops:
        parts.append("drops " + " + ".join(drops))
    if adds:
        parts.append("adds " + " + ".join(adds))
    if counts:
        parts.append("has " + ", ".join(counts))
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


def comparison_tables(c: Comparison) -> list[Table]:
    """The comparison as rich tables: what changed, plan figures, devices and hosts, workloads."""
    la, lb = c.label_a, c.label_b
    tables: list[Table] = []
    if c.summary:
        what = Table(title="what changed", title_justify="left", show_header=False)
        what.add_column("sentence")
        for line in c.summary:
            what.add_row(line)
        tables.append(what)

    plan = Table(title=f"{la}: {c.problem_a}  vs  {lb}: {c.problem_b}", title_justify="left")
    _metric_columns(plan, la, lb)
    plan.add_row("status", c.status_a, c.status_b, "", "")
    plan.add_row("objective", c.objective_a, c.objective_b, "", "")
    for r in c.metrics:
        _metric_row(plan, r, _PLAN_SPECS[r.metric])
    plan.add_row(
        "binding constraints",
        _binding(c.binding_a, c.status_a),
        _binding(c.binding_b, c.status_b),
        "",
        "",
    )
    tables.append(plan)

    if c.devices or c.nodes:
        dev = Table(title="devices and hosts", title_justify="left")
        for col in ("type", la, lb, "change"):
            dev.add_column(col, justify="left" if col == "type" else "right")
        for d in c.devices:
            dev.add_row(d.type, _count(d.a), _count(d.b), _count_change(d.change))
        for n in c.nodes:
            dev.add_row(f"{n.type} (host)", _count(n.a), _count(n.b), _count_change(n.change))
        tables.append(dev)

    for w in c.workloads:
        title = f"workload {w.name} ({w.kind})" if w.kind else f"workload {w.name}"
        t = Table(title=title, title_justify="left")
        _metric_columns(t, la, lb)
        for r in w.rows:
            _metric_row(t, r, _WORKLOAD_SPECS[r.metric])
        tables.append(t)
    return tables


def comparison_dict(c: Comparison) -> dict[str, Any]:
    """The comparison as plain data, JSON-ready: missing values are None (null)."""
    return plain_data(c)


def _metric_columns(t: Table, la: str, lb: str) -> None:
    t.add_column("figure")
    for col in (la, lb, "change", "change %"):
        t.add_column(col, justify="right")


def _metric_row(t: Table, r: MetricRow, spec: MetricSpec) -> None:
    t.add_row(
        r.label,
        spec.show(r.a),
        spec.show(r.b),
        spec.signed(r.change),
        MISSING if r.change_pct is None else f"{r.change_pct:+.1f} %",
    )


def _binding(names: tuple[str, ...], status: str) -> str:
    if status not in WITH_PLAN:
        return MISSING
    return ", ".join(names) or "none"


def _count(n: int | None) -> str:
    return MISSING if n is None else str(n)


def _count_change(n: int | None) -> str:
    if n is None:
        return MISSING
    return f"{n:+d}" if n else "0"
