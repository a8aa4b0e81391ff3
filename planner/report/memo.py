"""A plan as a Markdown purchase memo, as CSV (bill of materials, then per-workload figures) and
as YAML. Every figure is read from the Plan and its summary properties (plan/types.py), with its
unit in the heading or the column name."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import yaml

from planner.plan.types import Plan
from planner.schema.problem import Problem


def _usd(x: float) -> str:
    return f"${x:,.0f}"


def _opt(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def plan_markdown(plan: Plan, problem: Problem) -> str:
    """Decision, bill of materials, costs, per-workload figures, assumptions and confidence."""
    lines = [f"# Purchase memo: {plan.problem}", ""]
    if not plan.has_plan:
        lines += [f"**Decision:** no plan ({plan.status}).", ""]
        lines += [f"- {n}" for n in plan.notes]
        return "\n".join(lines) + "\n"
    devices = ", ".join(f"{d.count} x {d.type}" for d in plan.devices)
    lines += [
        f"**Decision:** {devices}, total cost over the horizon {_usd(plan.tco_usd)} "
        f"(objective `{plan.objective_name}`).",
        "",
        "## Bill of materials",
        "",
        "| item | count | bought | unit price (USD) | total (USD) |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {d.type}{f' in {d.instance} ({d.devices_per_instance} each)' if d.instance else ''} "
        f"| {d.count} | {d.bought} | {_usd(d.unit_price_usd)} | {_usd(d.total_usd)} |"
        for d in plan.devices
    ]
    lines += [
        f"| {n.type}{': ' + n.name if n.name else ''} (hosts {n.hosts}) | {n.count} | | "
        f"{_usd(n.unit_price_usd)} | {_usd(n.total_usd)} |"
        for n in plan.nodes
    ]
    c = plan.costs
    lines += [
        "",
        f"Links: {', '.join(plan.links) or 'none'}.",
        "",
        "## Costs over the horizon",
        "",
        "| kind | USD |",
        "|---|---:|",
        f"| devices and hosts bought | {_usd(c.capex_usd)} |",
        f"| maintenance | {_usd(c.maintenance_usd)} |",
        f"| energy (on premises, x PUE) | {_usd(c.energy_usd)} |",
        f"| rent (on demand, reserved, spot) | "
        f"{_usd(c.rent_on_demand_usd + c.rent_reserved_usd + c.rent_spot_usd)} |",
        f"| training jobs | {_usd(c.training_usd)} |",
        f"| colocation (rack space and power capacity) | "
        f"{_usd(c.rack_space_usd + c.facility_power_usd)} |",
        f"| **total** | **{_usd(c.total_usd)}** |",
        "",
        f"Power at load {plan.power_w:,.0f} W, at the wall {plan.wall_power_w:,.0f} W; "
        f"{plan.rack_units} rack units; cost per million tokens served "
        f"{_opt(plan.usd_per_million_tokens, ',.4f')} USD.",
        "",
        "## Workloads",
        "",
        "| workload | model | engine | confidence | replicas | tokens/s | ms/token | TTFT (s) |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {w.name} | {w.model} | {w.runtime} | {w.confidence.text if w.confidence else '-'} "
        f"| {w.replicas} | {w.tokens_per_s:,.0f} "
        f"| {_opt(w.ms_per_token, '.1f')} | {_opt(w.ttft_s, '.2f')} |"
        for w in plan.workloads
    ]
    lines += _phases(plan) + _recipes(plan)
    h = problem.horizon
    lines += [
        "",
        "## Assumptions",
        "",
        f"- horizon {h.lifetime_years:g} years, utilization {h.utilization:.0%}, "
        f"electricity {h.electricity_usd_per_kwh:g} USD/kWh, PUE {h.pue:g}",
        f"- binding constraints: {', '.join(plan.binding_constraints) or 'none'}",
        *(f"- {n}" for n in plan.notes),
        "",
        "## Confidence",
        "",
        f"Solver status {plan.status}"
        + (f", gap {plan.gap:.2%}" if plan.gap else ", proved optimal")
        + "; every figure re-checked by the verifier from the catalog and the estimator.",
        *_backing(plan),
    ]
    return "\n".join(lines) + "\n"


def _phases(plan: Plan) -> list[str]:
    """The problem's phases on one fleet, each with its hours and devices (none: nothing)."""
    if not plan.phases:
        return []
    return ["", "One fleet, one phase after another:", ""] + [
        f"- {ph.name} ({', '.join(ph.workloads)}): {ph.hours:,.0f} h on "
        + (", ".join(f"{n} x {d}" for d, n in ph.devices.items()) or "no devices on premises")
        for ph in plan.phases
    ]


def _backing(plan: Plan) -> list[str]:
    """How well published measurements back each serving design's figures."""
    return [
        "",
        "Backing of the serving figures by published measurements (calibration rows of the "
        "devices under their engine around their batch): `measured` at this batch, "
        "`interpolated` between measured batches, `extrapolated` beyond them or from another "
        "engine, `prior` from the device class's fitted factors alone; the band is the 10th to "
        "90th percentile of the estimate's error on those rows.",
        "",
        *(f"- {w.name}: {w.confidence.text}" for w in plan.workloads if w.confidence is not None),
    ]


def _recipes(plan: Plan) -> list[str]:
    """Per serving design: the engine's launch settings the figures assume."""
    out = ["", "## Deployment recipes", ""]
    for w in plan.workloads:
        r = w.recipe
        if r is None:
            continue
        period = f", period {w.period}" if w.period else ""
        out += [
            f"- **{w.name}**{period}: {w.runtime}; tensor parallel "
            f"{' / '.join(map(str, r.tensor_parallel))} over {r.pipeline_parallel} pipeline "
            f"stage(s) of {' / '.join(map(str, r.layer_split))} layers; at most "
            f"{r.max_sequences} sequences, {r.token_budget or '-'} tokens per iteration; "
            f"{r.weights} weights, {r.kv_cache_dtype} KV cache",
            f"  `{r.command}`",
        ]
    return out if len(out) > 3 else []


def plan_csv(plan: Plan) -> str:
    """Two tables, a blank line between: the bill of materials, then one row per workload."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["item", "kind", "count", "bought", "unit_price_usd", "total_usd"])
    for d in plan.devices:
        w.writerow([d.type, "device", d.count, d.bought, d.unit_price_usd, d.total_usd])
    for n in plan.nodes:
        w.writerow([n.type, "host", n.count, "", n.unit_price_usd, n.total_usd])
    w.writerow([])
    w.writerow(
        ["workload", "model", "engine", "replicas", "tokens_per_s", "ms_per_token", "ttft_s"]
    )
    for wl in plan.workloads:
        w.writerow(
            [
                wl.name,
                wl.model,
                wl.runtime,
                wl.replicas,
                wl.tokens_per_s,
                wl.ms_per_token,
                wl.ttft_s,
            ]
        )
    return buf.getvalue()


def plan_yaml(data: dict[str, Any]) -> str:
    """The plan's JSON document (docs/plan-format.md) written as YAML."""
    plain = json.loads(json.dumps(data, default=str))
    return str(yaml.safe_dump(plain, sort_keys=False, allow_unicode=True))
