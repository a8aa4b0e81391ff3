"""Explanations: why a problem has no plan and the least change that gives one (each limit
alone, the latency ceiling, the memory headroom), or, for a feasible problem, which limits bind
and what loosening each is worth. Every question is asked of the solver session."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.model.objectives import objective_for
from planner.plan.types import Plan
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload
from planner.solve import Solver

# Constraint families a single number relaxes: family -> (quantity the model minimizes, field).
RELAXABLE = {
    "budget": ("cost", "budget_usd"),
    "capex": ("capex", "capex_usd"),
    "power": ("power", "power_w"),
    "max_devices": ("devices", "max_devices"),
    "rack_units": ("rack_units", "max_rack_units"),
}
STEP = 0.10  # binding limits are loosened by 10 % to price them


@dataclass
class Explanation:
    feasible: bool
    sentences: list[str] = field(default_factory=list)
    core: list[str] = field(default_factory=list)
    relaxations: list[dict[str, Any]] = field(default_factory=list)  # name, needed, current
    marginal: list[dict[str, Any]] = field(default_factory=list)  # binding constraint values
    plan: Plan | None = None


def explain(problem: Problem, solver: Solver) -> Explanation:
    """Why a problem is infeasible and what would make it feasible; or, when it is feasible,
    which limits bind and what loosening each is worth."""
    plan = solver.solve(problem)
    if plan.status in ("OPTIMAL", "FEASIBLE"):
        return _explain_feasible(problem, plan, solver)
    ex = Explanation(False, plan=plan)
    ex.sentences.extend(plan.notes)
    c = problem.constraints
    if all(solver.tables(problem).designs.values()):
        core = solver.conflict(problem)
        ex.core = core or []
        if core:
            ex.sentences.append(
                "these constraints together admit no plan: " + ", ".join(f"`{n}`" for n in core)
            )
        relaxable = [n for n in RELAXABLE if getattr(c, RELAXABLE[n][1]) is not None]
        for name in relaxable:
            quantity, key = RELAXABLE[name]
            others = frozenset(n for n in relaxable if n != name)
            need = solver.least(problem, quantity, frozenset({name}))
            alone = need is not None
            if need is None and others:
                need = solver.least(problem, quantity, frozenset({name}) | others)
            if need is None:
                continue
            if name == "power":
                need *= problem.horizon.pue
            current = float(getattr(c, key))
            ex.relaxations.append(
                {
                    "constraint": name,
                    "key": f"constraints.{key}",
                    "current": current,
                    "needed": need,
                    "alone": alone,
                }
            )
            ex.sentences.append(_relax_sentence(name, key, current, need, alone, sorted(others)))
    for w in problem.workloads:
        if isinstance(w, InferenceWorkload) and w.max_ms_per_token is not None:
            need_ms = _least_latency(problem, w, solver)
            if need_ms is not None and need_ms > w.max_ms_per_token:
                ex.relaxations.append(
                    {
                        "constraint": f"latency:{w.name}",
                        "key": f"workloads.{w.name}.max_ms_per_token",
                        "current": w.max_ms_per_token,
                        "needed": need_ms,
                        "alone": True,
                    }
                )
                ex.sentences.append(_latency_sentence(w.name, w.max_ms_per_token, need_ms))
    headroom = _least_headroom_change(problem, solver)
    if headroom is not None:
        ex.relaxations.append(
            {
                "constraint": "memory_headroom",
                "key": "constraints.memory_headroom",
                "current": c.memory_headroom,
                "needed": headroom,
                "alone": True,
            }
        )
        ex.sentences.append(
            f"memory_headroom: keeping {headroom:.0%} of memory free instead of "
            f"{c.memory_headroom:.0%} admits a plan; --set constraints.memory_headroom={headroom:g}"
        )
    if not ex.relaxations:
        ex.sentences.append(
            "no single relaxation of budget, power, devices, latency or headroom admits a plan"
        )
    return ex


def _relax_sentence(
    name: str, key: str, current: float, need: float, alone: bool, others: list[str]
) -> str:
    unit = {"budget_usd": "$", "capex_usd": "$"}.get(key, "")
    suffix = {"power_w": " W", "max_devices": " devices", "max_rack_units": " U"}.get(key, "")
    value = math.ceil(need)
    text = (
        f"{name}: the least any plan needs is {unit}{need:,.0f}{suffix} "
        f"(the limit is {unit}{current:,.0f}{suffix}); --set constraints.{key}={value}"
    )
    if not alone:
        text += f", together with lifting {', '.join(f'`{o}`' for o in others)}"
    return text


def _latency_sentence(workload: str, current: float, need_ms: float) -> str:
    """The least ceiling that admits a plan, rounded up to 0.1 ms: the figure stated is the
    value suggested, and both admit a plan (rounded to nearest, 6.34 ms read 6.3 beside 6.4)."""
    value = math.ceil(need_ms * 10) / 10
    return (
        f"latency:{workload}: a ceiling of {value:,.1f} ms per token (now {current:,.1f}) admits "
        f"a plan; --set workloads.{workload}.max_ms_per_token={value}"
    )


def _least_latency(problem: Problem, w: InferenceWorkload, solver: Solver) -> float | None:
    """The smallest ceiling on ms per token (for workload `w`) at which the whole problem, every
    other limit and every demand period included, has a plan: a bisection over the latencies
    its designs reach without a ceiling, each step a full solve of the session."""

    def with_ceiling(ms: float | None) -> Problem:
        return problem.model_copy(
            update={
                "workloads": [
                    x.model_copy(update={"max_ms_per_token": ms}) if x.name == w.name else x
                    for x in problem.workloads
                ]
            }
        )

    options = sorted({d.ms_per_token for d in solver.tables(with_ceiling(None)).designs[w.name]})
    if not options:
        return None
    return _first_feasible(options, lambda ms: solver.has_plan(with_ceiling(ms)))


def _first_feasible(options: Sequence[float], feasible: Callable[[float], bool]) -> float | None:
    """Bisection: the first option that admits a plan, when every later one does too."""
    lo, hi = 0, len(options) - 1
    if not feasible(options[hi]):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(options[mid]):
            hi = mid
        else:
            lo = mid + 1
    return options[lo]


def _least_headroom_change(problem: Problem, solver: Solver) -> float | None:
    """The largest memory headroom (in 1 % steps below the current one) at which a plan exists."""
    current = problem.constraints.memory_headroom
    steps = [round(current - k / 100, 2) for k in range(1, round(current * 100) + 1)]
    if not steps:
        return None

    def feasible(h: float) -> bool:
        p = problem.model_copy(
            update={"constraints": problem.constraints.model_copy(update={"memory_headroom": h})}
        )
        return solver.has_plan(p)

    return _first_feasible(steps, feasible)  # steps descend: the largest headroom that works


def _explain_feasible(problem: Problem, plan: Plan, solver: Solver) -> Explanation:
    ex = Explanation(True, plan=plan)
    for name, room in sorted(plan.slack.items(), key=lambda kv: kv[1]):
        state = "binds" if name in plan.binding_constraints else "has room"
        ex.sentences.append(f"{name} {state}: {room:.1%} slack")
    for name in plan.binding_constraints:
        loosened = _loosen(problem, name)
        if loosened is None:
            continue
        label, variant = loosened
        other = solver.solve(variant)
        row = {
            "constraint": name,
            "change": label,
            "objective": plan.objective,
            "objective_after": other.objective,
            "status_after": other.status,
        }
        ex.marginal.append(row)
        if other.objective is not None and plan.objective is not None:
            delta = other.objective - plan.objective
            goal = objective_for(problem.objective.goal)
            ex.sentences.append(
                f"loosening {name} ({label}) moves {goal.goal} from {goal.format(plan.objective)} "
                f"to {goal.format(other.objective)} ({goal.format(delta, sign=True)})"
            )
    return ex


def _loosen(problem: Problem, name: str) -> tuple[str, Problem] | None:
    """The problem with binding constraint `name` loosened by STEP, and a label saying how."""
    c = problem.constraints
    for fam, (_, key) in RELAXABLE.items():
        if name == fam:
            value = getattr(c, key)
            new = value * (1 + STEP)
            if key in ("max_devices", "max_rack_units"):
                new = max(value + 1, math.floor(new))
            if new == value:
                return None  # a limit of 0 (capex_usd: nothing bought) has no 10 % to give
            return (
                f"{key} {value:,.6g} -> {new:,.6g}",
                problem.model_copy(update={"constraints": c.model_copy(update={key: new})}),
            )
    kind, _, wname = name.partition(":")
    out = []
    label = ""
    for w in problem.workloads:
        if w.name != wname:
            out.append(w)
            continue
        if kind == "throughput" and isinstance(w, InferenceWorkload):
            new_floor = w.min_tokens_per_s * (1 - STEP)
            label = f"{wname}.min_tokens_per_s {w.min_tokens_per_s:,.6g} -> {new_floor:,.6g}"
            out.append(w.model_copy(update={"min_tokens_per_s": new_floor}))
        elif kind == "latency" and isinstance(w, InferenceWorkload) and w.max_ms_per_token:
            new_ms = w.max_ms_per_token * (1 + STEP)
            label = f"{wname}.max_ms_per_token {w.max_ms_per_token:,.6g} -> {new_ms:,.6g}"
            out.append(w.model_copy(update={"max_ms_per_token": new_ms}))
        elif kind == "deadline" and isinstance(w, TrainingWorkload) and w.deadline_hours:
            new_h = w.deadline_hours * (1 + STEP)
            label = f"{wname}.deadline_hours {w.deadline_hours:,.6g} -> {new_h:,.6g}"
            out.append(w.model_copy(update={"deadline_hours": new_h}))
        else:
            return None
    if not label:
        return None
    return label, problem.model_copy(update={"workloads": out})
