"""Room left under each stated limit, and which limits bind."""

from __future__ import annotations

from planner.plan.types import Plan
from planner.schema.problem import InferenceWorkload, Problem

BINDING_SLACK = 0.05  # a constraint with under 5 % room left is reported as binding


def constraint_slack(plan: Plan, problem: Problem) -> dict[str, float]:
    """Relative room left under each stated limit: (limit - used) / limit, or (got - need) / need."""
    c = problem.constraints
    out: dict[str, float] = {}

    def room(name: str, used: float, limit: float | None) -> None:
        if limit is None:
            return
        # A ceiling of 0 (capex 0: buy nothing) has no relative room: it binds.
        out[name] = float((limit - used) / limit) if limit else 0.0

    room("budget", plan.tco_usd, c.budget_usd)
    room("capex", plan.capex_usd, c.capex_usd)
    room("power", plan.wall_power_w, c.power_w)
    held = [sum(sum(m.values()) for m in p.devices.values()) for p in plan.periods]
    room("max_devices", max(held, default=0), c.max_devices)
    room("rack_units", plan.rack_units, c.max_rack_units)
    if plan.carbon is not None:
        room("carbon", plan.carbon.total_kgco2e, c.max_carbon_kgco2e)
    for w in problem.workloads:
        parts = [x for x in plan.workloads if x.name == w.name]
        if isinstance(w, InferenceWorkload):
            if w.min_tokens_per_s:
                out[f"throughput:{w.name}"] = min(
                    float((got - w.min_tokens_per_s * p.scale) / (w.min_tokens_per_s * p.scale))
                    for p in plan.periods
                    for got in [
                        sum(
                            x.tokens_per_s
                            for x in parts
                            if x.period in (None, p.name) or len(plan.periods) == 1
                        )
                    ]
                )
            if w.max_ms_per_token:
                worst = max(x.ms_per_token or 0.0 for x in parts)
                room(f"latency:{w.name}", worst, w.max_ms_per_token)
        elif w.deadline_hours:
            room(f"deadline:{w.name}", max(x.finish_hours or 0.0 for x in parts), w.deadline_hours)
    return out
