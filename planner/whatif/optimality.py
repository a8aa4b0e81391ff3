"""A plan's claim about the best possible plan, checked by solving its problem again.

The verifier (planner.verify_plan) recomputes every figure of a plan without the solver, so it
cannot tell whether `OPTIMAL` is true: a plan solved over fewer devices, with the whole problem
pasted in, holds every figure. `planner verify` then re-solves the plan's problem, over the
design space the plan states (the verifier has checked it is this planner's for the problem),
and compares objectives, never assignments (tied plans may differ):

- `OPTIMAL`: refuted when the re-solve finds a plan better than the plan's objective;
- `FEASIBLE` with a bound: refuted when the re-solve finds a plan better than the bound (a
  bound no plan may beat);
- `INFEASIBLE`: refuted when the re-solve finds a plan.

Otherwise the claim is confirmed when the re-solve proves it within its time limit, and left
unconfirmed (not refuted) when it does not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from planner.catalog import Catalog
from planner.model.objectives import objective_for
from planner.plan.types import Plan
from planner.schema.problem import Problem
from planner.schema.status import Status
from planner.solve import Solver

# The model counts each term of the objective in whole units, rounded on the safe side (dollars
# up, grams up, milli-tokens/s down: planner.model.scale), so two plans it ties may differ in
# their figures by up to a unit per term; plans closer than that are not told apart.
UNIT = {"min_cost": 1.0, "min_carbon": 0.001, "max_throughput": 0.001}
RATIO_REL = 1e-4  # ratio objectives are solved to a fraction close to the optimum
REL = 1e-6  # the verifier's own tolerance (planner.verify.REL_TOL)
MODES = 4  # on premises, reserved, on demand, spot: a term per mode at most

Verdict = Literal["confirmed", "unconfirmed", "refuted", "nothing"]


@dataclass(frozen=True)
class Claim:
    """What checking the plan's claim found: the verdict and one line saying so."""

    verdict: Verdict
    message: str


def allowance(plan: Plan, goal: str, *figures: float) -> float:
    """How far apart two plans' objectives may be and still tie in the model: a unit of the
    objective per term the model rounds (every row of the plan, in every period and mode), or a
    relative 1e-4 for ratio objectives."""
    big = max((abs(f) for f in figures), default=0.0)
    if goal not in UNIT:
        return RATIO_REL * big
    rows = len(plan.devices) + len(plan.nodes) + len(plan.workloads) + 1
    terms = rows * (len(plan.periods) + 1) * MODES
    return max(REL * big, UNIT[goal] * terms)


def show(goal: str, value: float) -> str:
    if goal == "min_cost":
        return f"${value:,.0f}"
    units = {
        "min_carbon": "kg CO2e",
        "max_throughput": "tokens/s",
        "max_tokens_per_joule": "tokens/J",
        "min_cost_per_token": "USD per million tokens",
    }
    return f"{value:,.6g} {units.get(goal, '')}".rstrip()


def _better(a: float, b: float, minimize: bool, by: float) -> bool:
    """Whether `a` beats `b` by more than `by`."""
    return a < b - by if minimize else a > b + by


def check_claim(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    *,
    time_limit: float,
    workers: int = 1,
    seed: int = 0,
) -> Claim:
    """Re-solve `problem` (the plan's, already verified) within `time_limit` seconds and judge
    the plan's status, objective and bound against what the re-solve finds."""
    status = Status(plan.status)
    if status == Status.NO_PLAN or (status == Status.FEASIBLE and plan.bound is None):
        return Claim("nothing", "the plan claims no optimum and no bound: nothing to re-solve")
    solver = Solver(
        cat,
        time_limit=time_limit,
        workers=workers,
        seed=seed,
        why=False,
        deadline=time.monotonic() + time_limit,
    )
    again = solver.solve(problem)
    within = f"within {time_limit:g} s"
    if status == Status.INFEASIBLE:
        if again.has_plan:
            return Claim(
                "refuted",
                f"the plan says INFEASIBLE, but a re-solve of its problem found a plan at "
                f"{show(plan.objective_name, again.objective or 0.0)} ({again.status})",
            )
        if again.status == Status.INFEASIBLE:
            return Claim("confirmed", "infeasibility confirmed: a re-solve finds no plan either")
        return Claim("unconfirmed", f"infeasibility not confirmed {within}")
    return _judge(plan, again, within)


def _judge(plan: Plan, again: Plan, within: str) -> Claim:
    """The claim of a plan with a plan (OPTIMAL, or FEASIBLE with a bound) against the
    re-solve's plan `again`."""
    goal = plan.objective_name
    minimize = objective_for(goal).minimize
    optimal = plan.status == Status.OPTIMAL
    claimed = plan.objective if optimal else plan.bound
    assert claimed is not None  # a plan has an objective; FEASIBLE without a bound returned
    what = (
        f"the plan claims OPTIMAL at {show(goal, claimed)}"
        if optimal
        else f"the plan claims FEASIBLE with the bound {show(goal, claimed)} (no plan better)"
    )
    if not again.has_plan or again.objective is None:
        return Claim(
            "unconfirmed", f"optimality not confirmed {within}: the re-solve found no plan"
        )
    found = again.objective
    by = allowance(plan, goal, claimed, found)
    proved = " (proved optimal)" if again.status == Status.OPTIMAL else ""
    if _better(found, claimed, minimize, by):
        return Claim(
            "refuted",
            f"{what}, but a re-solve of its problem over the same design space found a plan "
            f"at {show(goal, found)}{proved}: the claim does not hold",
        )
    reached = again.status == Status.OPTIMAL or (
        again.bound is not None and not _better(again.bound, claimed, minimize, by)
    )
    if not reached:
        return Claim(
            "unconfirmed",
            f"optimality not confirmed {within}: the re-solve's best plan is "
            f"{show(goal, found)}, "
            + (
                "with no bound yet "
                if again.bound is None
                else f"its bound {show(goal, again.bound)} "
            )
            + "(raise --time-limit to try longer)",
        )
    if optimal and again.status == Status.OPTIMAL and _better(claimed, found, minimize, by):
        return Claim(
            "confirmed",
            f"{what}, and a re-solve proves {show(goal, found)} the best of the design space: "
            "the plan does better than any plan searched (a plan outside that space)",
        )
    if optimal:
        return Claim(
            "confirmed",
            "optimality confirmed: a re-solve of its problem over the same design space "
            f"proves {show(goal, found)} optimal (the plan's objective: {show(goal, claimed)})",
        )
    best = (
        f"proves {show(goal, found)} optimal"
        if proved
        else (
            "finds no bound on the optimum"
            if again.bound is None
            else f"bounds the optimum by {show(goal, again.bound)}"
        )
    )
    return Claim(
        "confirmed",
        f"the bound {show(goal, claimed)} holds: a re-solve of its problem over the same design "
        f"space {best}, no better than the bound (the plan's objective: "
        f"{show(goal, plan.objective or 0.0)})",
    )
