"""Pareto frontiers by the epsilon-constraint method: cap a resource (cost or power), maximize a
benefit (tokens/s or tokens per joule), every point a proved-optimal solve of the session."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from planner.errors import InputError
from planner.model import interrupt
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.status import Status
from planner.solve import Solver
from planner.whatif.executor import SERIAL, Executor, Settings, plan_row, solve_all

# Axes a frontier can trade: resources are capped (epsilon), benefits maximized.
RESOURCES = {
    "cost": ("budget_usd", "min_cost", "tco_usd"),
    "power": ("power_w", "min_power", "power_w"),
}
BENEFITS = {
    "tokens_per_s": "max_throughput",
    "tokens_per_joule": "max_tokens_per_joule",
}


def axis_column(axis: str) -> str:
    """The plan-row key an axis reads: a resource's column, or the benefit itself."""
    return RESOURCES[axis][2] if axis in RESOURCES else axis


@dataclass
class Frontier:
    resource: str
    benefit: str
    points: list[dict[str, Any]] = field(default_factory=list)  # Pareto-optimal, by resource
    dominated: int = 0  # grid points that another point beats
    notes: list[str] = field(default_factory=list)
    status: Status | None = None  # INFEASIBLE or NO_PLAN when no cap could be solved


def frontier(
    problem: Problem,
    x: str,
    y: str,
    n_points: int,
    solver: Solver,
    executor: Executor = SERIAL,
) -> Frontier:
    """Pareto frontier of a resource (cost or power) against a benefit (tokens/s or tokens per
    joule): for evenly spaced caps on the resource, the plan with the most benefit, and among
    those the least resource. Every point is a proved-optimal solve. The two ends are found
    with `solver`; the caps between are solved where `executor` says."""
    pair = {x, y}
    resource = next((a for a in pair if a in RESOURCES), None)
    benefit = next((a for a in pair if a in BENEFITS), None)
    if resource is None or benefit is None or len(pair) != 2:
        raise InputError(
            f"frontier: cannot trade `{x}` against `{y}`; pair one of {', '.join(RESOURCES)} "
            f"with one of {', '.join(BENEFITS)}"
        )
    if not 2 <= n_points <= 100:
        raise InputError("frontier: --points must be between 2 and 100")
    cap_key, least_goal, column = RESOURCES[resource]
    _check_tradeable(problem, BENEFITS[benefit], least_goal)
    fr = Frontier(resource, benefit)
    # The low end: the least of the resource any plan needs; the high end: what the best plan
    # for the benefit uses under the problem's own limits.
    low, status = least_resource(problem, resource, solver)
    if interrupt.requested():
        fr.notes.append("interrupted (Ctrl-C) before the first cap")
        return fr
    if low is None:
        fr.status = status
        fr.notes.append(
            "no plan meets the problem's constraints; nothing to trade"
            if status == Status.INFEASIBLE
            else f"no plan found within the time limit ({solver.time_limit:g} s per solve); "
            "raise --time-limit"
        )
        return fr
    if benefit == "tokens_per_s" and not _has_limit(problem):
        high = low * 4
        fr.notes.append(
            f"the problem sets no limit on cost, power or devices: the frontier spans "
            f"{resource} from its least value to 4x that"
        )
    else:
        best = solver.solve(_variant(problem, benefit_goal=BENEFITS[benefit], tie=least_goal))
        row = plan_row(best)
        high = row[column] if row[column] is not None else low  # within the problem's own caps
        if interrupt.requested():
            fr.notes.append("interrupted (Ctrl-C) before the first cap")
            return fr
    high = max(high, low)
    caps = [low + (high - low) * i / (n_points - 1) for i in range(n_points)]
    cap_values = [math.ceil(cap) if resource == "cost" else cap for cap in caps]
    problems = [
        _variant(problem, benefit_goal=BENEFITS[benefit], tie=least_goal, **{cap_key: c})
        for c in cap_values
    ]
    settings = Settings(solver.time_limit, solver.workers, solver.seed, solver.gap)
    done = solve_all(problems, settings, executor, session=solver)  # serial: in `solver`
    grid = [{**row, f"{resource}_cap": c} for row, c in zip(done.rows, cap_values, strict=False)]
    if done.interrupted:
        fr.notes.append(f"interrupted (Ctrl-C) after {len(grid)} of {n_points} caps")
    fr.points, fr.dominated = _pareto(grid, column, benefit)
    return fr


def _check_tradeable(problem: Problem, goal: str, tie: str) -> None:
    """A frontier maximizes the benefit under a cap: refuse, before any solve, a problem that
    serves nothing (training jobs only) or whose demand is given (a demand profile or a request
    mix) and so has no throughput to trade."""
    if not any(isinstance(w, InferenceWorkload) for w in problem.workloads):
        raise InputError(
            f"frontier: problem `{problem.name}` has no inference workload, so no plan of it "
            f"serves tokens and there is no {goal} to trade; use `planner sweep` over a limit "
            "(for example `--vary constraints.budget_usd=...`) to see how its training plans move"
        )
    try:
        _variant(problem, benefit_goal=goal, tie=tie, budget_usd=1.0)
    except ValidationError as e:
        why = e.errors()[0]["msg"].removeprefix("Value error, ")
        raise InputError(
            f"frontier: problem `{problem.name}` cannot be traded on {goal}: {why}; "
            "use `planner sweep` over a limit instead"
        ) from None


def _has_limit(problem: Problem) -> bool:
    c = problem.constraints
    return any(v is not None for v in (c.budget_usd, c.capex_usd, c.power_w, c.max_devices))


def _variant(problem: Problem, *, benefit_goal: str, tie: str, **constraints: Any) -> Problem:
    """The problem with another objective and some constraints changed (validated again)."""
    data = problem.model_dump(mode="json")
    data["objective"] = {"goal": benefit_goal, "tie_break": tie}
    data["constraints"].update(constraints)
    return Problem.model_validate(data)


def least_resource(problem: Problem, resource: str, solver: Solver) -> tuple[float | None, Status]:
    """The least total cost (USD) or wall power (W) of any plan meeting the constraints, and
    the status of its solve (INFEASIBLE or NO_PLAN when there is none)."""
    least, status = solver.least_status(problem, resource, frozenset())
    if least is None:
        return None, status
    return least * (problem.horizon.pue if resource == "power" else 1.0), status


def _pareto(
    rows: list[dict[str, Any]], column: str, benefit: str
) -> tuple[list[dict[str, Any]], int]:
    ok = [r for r in rows if r["status"] == "OPTIMAL" and r[column] is not None]
    ok.sort(key=lambda r: (r[column], -(r[benefit] or 0.0)))
    front: list[dict[str, Any]] = []
    for r in ok:
        if front and (r[benefit] or 0.0) <= (front[-1][benefit] or 0.0) * (1 + 1e-9):
            continue  # costs more for no more benefit
        front.append(r)
    return front, len(rows) - len(front)
