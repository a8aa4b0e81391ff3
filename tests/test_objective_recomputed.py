"""The solver's objective equals the objective recomputed from the built plan, for every example,
within the tolerance the model's integer scaling implies.

The model works in integers: every cost coefficient is rounded up to whole dollars (carbon to
whole grams, capacity down to milli-tokens/s), so a term c x v is off its exact value by less than
one unit per unit of v. The solution reports that bound (`Solution.rounding`: the sum of the
values of the variables in the objective, in the model's units), so
    0 <= solver value - exact value <= rounding   for costs and carbon (rounded up), and
    0 <= exact value - solver value <= rounding   for throughput (rounded down).
For ratio objectives N / D the relative error is at most units(N) / N + units(D) / D.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.estimator.economics import working_hours
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.objectives import objective_for
from planner.model.tables import build_tables
from planner.plan.build import make_plan
from planner.verify import verify

PROBLEMS = sorted((Path(__file__).parent.parent / "problems").glob("*.yaml"))


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_solver_objective_is_the_plans(path: Path) -> None:
    cat = load_catalog()
    problem = load_problem(path)
    tables = build_tables(problem, cat)
    if any(not d for d in tables.designs.values()):
        return  # no design: nothing to recompute
    sol = PlannerModel(tables).solve(time_limit=30, workers=1, seed=0)
    if not sol.status.has_plan:
        return
    plan = make_plan(problem, cat, tables, sol)
    verify(plan, problem, cat)
    goal = objective_for(problem.objective.goal)
    assert sol.objective is not None and plan.objective is not None
    seconds = working_hours(problem) * 3600
    solver_value = goal.read(sol.objective, seconds)
    if goal.ratio:  # `rounding` is already the ratio's absolute error, in the solver's units
        tol = goal.read(sol.rounding, seconds) + 1e-9 * abs(solver_value)
        assert plan.objective == pytest.approx(solver_value, abs=tol)
        return
    slack = goal.read(sol.rounding, seconds) + 1e-6 * max(1.0, abs(plan.objective))
    # The model rounds costs up and capacity down: its value errs on the safe side.
    error = solver_value - plan.objective if goal.minimize else plan.objective - solver_value
    assert -1e-6 * max(1.0, abs(plan.objective)) <= error <= slack, (solver_value, plan.objective)
