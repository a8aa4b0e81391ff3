"""Room left under each stated limit, and which limits bind.

Every limit the problem states gets an entry, as a share of the limit: `(limit - used) / limit`,
or `(got - need) / need` for floors. Caps of the design space the proof covers (fleet and
replica sizes the model bounds without the problem saying so) get an entry only when they bind.
`planner.verify` recomputes every entry from its own figures.
"""

from __future__ import annotations

from planner.catalog import Catalog
from planner.estimator.confidence import kept_share
from planner.plan.types import Plan, WorkloadPlan
from planner.schema.problem import MAX_DEVICES, InferenceWorkload, Problem, TrainingWorkload

BINDING_SLACK = 0.05  # a constraint with under 5 % room left is reported as binding
REPLICA_DEVICES = 4096  # max_throughput: devices of one design's replicas the model allows


def constraint_slack(plan: Plan, problem: Problem, cat: Catalog) -> dict[str, float]:
    """Relative room left under each stated limit (and each design-space cap that binds)."""
    c = problem.constraints
    out: dict[str, float] = {}

    def room(name: str, used: float, limit: float | None) -> None:
        if limit is None:
            return
        # A ceiling of 0 (capex 0: buy nothing) has no relative room: it binds.
        here = float((limit - used) / limit) if limit else 0.0
        out[name] = min(out.get(name, 1.0), here)

    room("budget", plan.tco_usd, c.budget_usd)
    room("capex", plan.capex_usd, c.capex_usd)
    room("power", plan.wall_power_w, c.power_w)
    # Devices held: the fleet on premises all the time, plus the cloud replicas' devices at work.
    fleet = sum(d.owned + d.bought for d in plan.devices)
    held = [
        fleet
        + sum(
            s.tp * x.replicas
            for x in plan.workloads
            if x.kind == "inference" and x.site == "cloud" and x.period in (None, p.name)
            for s in x.stages
        )
        for p in plan.periods
    ]
    room("max_devices", max(held, default=0), c.max_devices)
    room("rack_units", plan.rack_units, c.max_rack_units)
    if plan.carbon is not None:
        room("carbon", plan.carbon.total_kgco2e, c.max_carbon_kgco2e)
    room("max_stages", max((len(x.stages) for x in plan.workloads), default=0), c.max_stages)
    tps = [s.tp for x in plan.workloads for s in x.stages]
    room("max_tensor_parallel", max(tps, default=0), c.max_tensor_parallel)
    for w in problem.workloads:
        parts = [x for x in plan.workloads if x.name == w.name]
        for x in parts:
            for s in x.stages:
                usable = cat.accelerator(s.device).memory.usable_bytes(c.memory_headroom)
                if isinstance(w, InferenceWorkload):  # a stated memory_gb caps it
                    usable = w.capped_usable(s.device, usable)
                room(f"memory:{w.name}", s.memory_bytes.get("total", 0.0), usable)
        if isinstance(w, InferenceWorkload):
            if w.min_tokens_per_s:
                for p in plan.periods:
                    need = w.min_tokens_per_s * p.scale
                    got = sum(
                        x.tokens_per_s * _kept(problem, w, x)
                        for x in parts
                        if x.period in (None, p.name)
                    )
                    if need > 0:
                        out[f"throughput:{w.name}"] = min(
                            out.get(f"throughput:{w.name}", float("inf")), (got - need) / need
                        )
            for x in parts:
                room(f"latency:{w.name}", x.ms_per_token or 0.0, w.max_ms_per_token)
                if w.request_mix is None:
                    room(f"ttft:{w.name}", x.ttft_s or 0.0, w.max_ttft_s)
                    e2e = (x.ttft_s or 0.0) + (w.output_tokens - 1) * (x.ms_per_token or 0.0) / 1e3
                    room(f"e2e:{w.name}", e2e, w.max_e2e_s)
                if problem.objective.goal in ("max_throughput", "max_tokens_per_joule"):
                    n = sum(s.tp for s in x.stages)
                    cap = REPLICA_DEVICES // n + 1
                    if x.replicas <= cap and (cap - x.replicas) / cap <= BINDING_SLACK:
                        room(f"design:replicas:{w.name}", x.replicas, cap)
        elif isinstance(w, TrainingWorkload):
            for x in parts:
                room(f"deadline:{w.name}", x.finish_hours or 0.0, w.deadline_hours)
    if c.max_devices is None:
        for d in plan.devices:
            used = d.owned + d.bought
            if (MAX_DEVICES - used) / MAX_DEVICES <= BINDING_SLACK:
                room(f"design:fleet:{d.type}", used, MAX_DEVICES)
    return out


def binding(slack: dict[str, float]) -> list[str]:
    """The limits with under BINDING_SLACK room left, in the order `constraint_slack` lists them."""
    return [k for k, v in slack.items() if v <= BINDING_SLACK]


def _kept(problem: Problem, w: InferenceWorkload, x: WorkloadPlan) -> float:
    """The share of a replica group's tokens/s its workload's floor counts (the risk margin on
    designs the calibration does not back; planner.estimator.confidence.kept_share)."""
    if w.request_mix is not None or x.confidence is None:
        return 1.0
    return kept_share(problem.constraints.risk_margin, x.confidence.label)
