"""The linear relaxation's bound (planner.model.relaxation) against optima CP-SAT proves: at or
below a proved minimum, at or above a proved maximum, at the same integer scale (whole dollars
for min_cost), and not trivially 0. The weak-duality bound is also checked by hand on a small
LP whose duals are known."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.relaxation import LinearProgram, dual_bound, relax
from planner.model.tables import build_tables
from planner.schema.status import Status

PROBLEMS = Path(__file__).parent.parent / "problems"
# A float sum of thousands of products may land a hair above an equal optimum.
TOLERANCE = 1e-7


@pytest.mark.parametrize(
    "name", ["chat-product", "own-8-a100", "serve-405b", "compute-owners-pool"]
)
def test_bound_brackets_the_proved_optimum(name: str) -> None:
    tables = build_tables(load_problem(PROBLEMS / f"{name}.yaml"), load_catalog())
    r = relax(tables)
    sol = PlannerModel(tables).solve(time_limit=20, workers=1, seed=0)
    assert sol.status == Status.OPTIMAL and sol.objective is not None
    assert r.status == "OPTIMAL" and r.dropped == {}
    assert r.bound > 0
    if tables.problem.objective.goal == "max_throughput":
        assert r.raw >= sol.objective * (1 - TOLERANCE)
    else:
        assert r.raw <= sol.objective * (1 + TOLERANCE)
        # Same scale: the relaxation of a model whose optimum is 1e5..1e6 dollars is not off
        # by a factor of 10 or more (a scale slip would be).
        assert r.raw >= sol.objective / 10


def test_dual_bound_by_hand() -> None:
    """min x + 2y, x + y >= 3, x - y <= 1, 0 <= x, y <= 10: optimum 4 at (2, 1), duals
    (1.5, -0.5). Those give 4; any other multipliers give less, never more."""
    lp = LinearProgram(np.array([1.0, 2.0]), 0.0, np.zeros(2), np.full(2, 10.0))
    lp.add([0, 1], [1.0, 1.0], 3.0, math.inf)
    lp.add([0, 1], [1.0, -1.0], -math.inf, 1.0)
    assert dual_bound(lp, np.array([1.5, -0.5])) == pytest.approx(4.0)
    for y in ([0.0, 0.0], [1.0, 0.0], [3.0, 1.0], [-1.0, 2.0]):
        assert dual_bound(lp, np.array(y)) <= 4.0 + 1e-12
