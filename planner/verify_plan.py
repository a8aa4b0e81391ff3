"""`planner verify`: check a plan file against its problem and the catalog, listing every failure.

The plan is not trusted: the problem it embeds must hash to its `problem_sha256`, the catalog
must hash to its `catalog_sha256`, the derived fields (`gap`, `summary`) are recomputed, and
`planner.verify` recomputes every stage, replica, fleet, cost, energy and carbon figure from the
problem, the catalog and the estimator alone. Figures agree when within `REL_TOL` (relative, or
absolute below 1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from planner.catalog import Catalog
from planner.errors import InputError, PlannerError
from planner.estimator.hosts import with_machines
from planner.load import check_names, is_model_path
from planner.plan.io import PlanFile, catalog_sha256, design_space, problem_sha256
from planner.plan.types import Plan
from planner.schema.problem import Problem
from planner.verify import COLLECT, REL_TOL, verify
from planner.verify_rules import rule_failures


class PlanFailsVerification(PlannerError):
    """A plan file whose figures or constraints do not hold (exit code 5)."""

    exit_code = 5


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(1.0, abs(a), abs(b))


def _derived(pf: PlanFile) -> list[str]:
    """`gap` and `summary` as stored against their definitions (Plan properties)."""
    out = []
    plan, data = pf.plan, pf.data
    want: dict[str, float | None] = {"gap": plan.gap}
    summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
    assert isinstance(summary, dict)
    for key in ("peak_tokens_per_s", "served_tokens", "usd_per_million_tokens", "tokens_per_joule"):
        want[f"summary.{key}"] = getattr(plan, key)
    for key, value in want.items():
        got = data.get("gap") if key == "gap" else summary.get(key.split(".", 1)[1])
        if got is None and value is None:
            continue
        if not isinstance(got, int | float) or value is None or not _close(float(got), value):
            # The gap is derived from two stored figures: name them, either may be the wrong one.
            since = (
                f" from `objective` {plan.objective} and `bound` {plan.bound}"
                if key == "gap"
                else ""
            )
            out.append(f"`{key}`: plan says {got}, recomputed {value}{since}")
    wall = plan.power_w * pf.problem.horizon.pue
    if not _close(plan.wall_power_w, wall):
        out.append(f"`wall_power_w`: plan says {plan.wall_power_w}, `power_w` x PUE is {wall}")
    optimal = plan.status == "OPTIMAL" and plan.objective is not None
    if optimal and plan.bound is not None and not _close(plan.objective or 0.0, plan.bound):
        out.append(f"`bound`: {plan.bound} differs from the OPTIMAL `objective` {plan.objective}")
    figure = OBJECTIVE_FIGURES.get(plan.objective_name)
    if plan.has_plan and figure is not None:
        fig = figure(plan)
        if plan.objective is None or fig is None or not _close(plan.objective, fig):
            out.append(
                f"`objective`: plan says {plan.objective}, its {plan.objective_name} "
                f"figure is {fig}"
            )
    return out


def _header(pf: PlanFile, prob: Problem) -> list[str]:
    """The fields that name what the plan answers: the problem's name, its goal and the design
    space searched (a memo and a comparison print them) as the problem states them."""
    out = []
    if pf.plan.problem != prob.name:
        out.append(f"`problem`: plan says {pf.plan.problem!r}, the problem is {prob.name!r}")
    if pf.plan.objective_name != prob.objective.goal:
        out.append(
            f"`objective_name`: plan says {pf.plan.objective_name!r}, the problem's goal is "
            f"{prob.objective.goal!r}"
        )
    if pf.data.get("design_space") != design_space(prob):
        out.append(
            "`design_space`: not the design space this planner searches for the problem "
            "(solve again to write it)"
        )
    return out


# Objectives that are one figure of the plan (the figure itself is recomputed by the verifier).
OBJECTIVE_FIGURES: dict[str, Callable[[Plan], float | None]] = {
    "min_cost": lambda p: p.tco_usd,
    "min_power": lambda p: p.power_w,
    "min_carbon": lambda p: p.carbon.total_kgco2e if p.carbon is not None else None,
}


def plan_failures(pf: PlanFile, cat: Catalog, problem: Problem | None = None) -> list[str]:
    """Every way the plan file fails to hold, each naming the field with both figures ([] when it
    holds). `problem` (a problem file given beside the plan) must be the one the plan embeds."""
    out: list[str] = []
    embedded = problem_sha256(pf.problem)
    if embedded != pf.problem_sha256:
        out.append(
            f"`problem_sha256`: plan says {pf.problem_sha256}, its embedded problem hashes to "
            f"{embedded} (edited after solving)"
        )
    if problem is not None and problem_sha256(problem) != pf.problem_sha256:
        out.append(
            f"`problem_sha256`: the plan answers {pf.problem_sha256}, the given problem hashes "
            f"to {problem_sha256(problem)} (a different problem, or a changed one)"
        )
    here = catalog_sha256(cat)
    if here != pf.catalog_sha256:
        out.append(
            f"`catalog_sha256`: the plan was solved against catalog {pf.catalog_sha256}, this "
            f"catalog is {here} (solve again, or verify with the catalog it used)"
        )
    prob = problem or pf.problem
    out += _header(pf, prob)
    try:
        check_names(prob, cat)
    except PlannerError as e:
        files = [w.model for w in prob.workloads if is_model_path(w.model)]
        if problem is None and any(m not in cat.models for m in files):
            # The plan holds the problem, not the config.json its model paths name (relative
            # to the problem file): without that file there is nothing to recompute from.
            raise InputError(
                f"{pf.source}: its problem reads the model from "
                f"{', '.join(f'`{m}`' for m in files)}, a config.json beside the problem file "
                f"that the plan does not hold: give the problem file too, `planner verify "
                f"{pf.source} PROBLEM.yaml`"
            ) from None
        return [*out, f"problem: {e}"]
    out += _derived(pf)
    if not pf.plan.has_plan:
        return out
    cat = with_machines(cat, prob)  # the problem's stated machines are hosts like the catalog's
    found: list[str] = rule_failures(pf.plan, prob, cat)
    token = COLLECT.set(found)
    try:
        verify(pf.plan, prob, cat)
    except (PlannerError, KeyError, ValueError, ZeroDivisionError, IndexError) as e:
        found.append(f"verification stopped at a figure it cannot recompute: {e}")
    finally:
        COLLECT.reset(token)
    return out + [f for f in found if f not in out]


def verified(pf: PlanFile, cat: Catalog, problem: Problem | None = None) -> dict[str, Any]:
    """The plan document when it holds; PlanFailsVerification listing every failure otherwise."""
    failures = plan_failures(pf, cat, problem)
    if failures:
        lines = "\n".join(f"  - {f}" for f in failures)
        raise PlanFailsVerification(
            f"{pf.source}: the plan fails verification ({len(failures)} "
            f"finding{'s' if len(failures) != 1 else ''}; figures agree within a relative "
            f"{REL_TOL:g}):\n{lines}"
        )
    return pf.data
