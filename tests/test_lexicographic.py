"""A goal and its tie-break solved as one weighted search (PlannerModel._lexicographic) reach the
optimum of both that the goal's search and then the tie-break's reached one after the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.ortools_cp import cp_model
from planner.model.result import Solution
from planner.model.tables import build_tables
from planner.plan.types import Plan
from planner.schema.status import Status
from planner.solve import solve_problem

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def _both(
    name: str, overrides: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> tuple[Plan, Plan]:
    problem = load_problem(PROBLEMS / f"{name}.yaml", overrides)
    ran: list[bool] = []
    lexicographic = PlannerModel._lexicographic

    def seen(self: PlannerModel, *a: Any) -> Solution | None:
        sol = lexicographic(self, *a)
        ran.append(sol is not None)
        return sol

    with monkeypatch.context() as m:
        m.setattr(PlannerModel, "_lexicographic", seen)
        weighted = solve_problem(problem)
    assert ran == [True]  # the weighted search ran, once
    with monkeypatch.context() as m:
        m.setattr(PlannerModel, "_lexicographic", lambda *a, **k: None)
        apart = solve_problem(problem)
    return weighted, apart


@pytest.mark.parametrize(
    ("name", "overrides", "tie"),
    [
        # max_throughput with the default tie-break, min_cost: no budget, so the weight is the
        # cost's span over the variables' domains.
        ("owners-pool", (), "tco_usd"),
        # min_cost with min_power stated: both minimized.
        ("chat-70b", ("objective.tie_break=min_power",), "power_w"),
        # max_throughput under a budget: the cost's span ends at the budget.
        ("max-throughput-500k", (), "tco_usd"),
    ],
)
def test_one_weighted_search_reaches_both_optima_of_two_searches(
    name: str, overrides: tuple[str, ...], tie: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    weighted, apart = _both(name, overrides, monkeypatch)
    assert weighted.status == apart.status == "OPTIMAL"
    assert weighted.objective == apart.objective
    assert weighted.bound == apart.bound
    assert getattr(weighted, tie) == pytest.approx(getattr(apart, tie), rel=1e-9)


def test_a_weight_that_could_overflow_falls_back_to_two_searches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = PlannerModel(build_tables(load_problem(PROBLEMS / "owners-pool.yaml"), load_catalog()))
    monkeypatch.setattr(PlannerModel, "reach", lambda self, expr: 2**61)
    searched: list[str] = []
    optimize = PlannerModel._optimize

    def counted(self: PlannerModel, expr: cp_model.LinearExpr, **kw: object) -> object:
        searched.append(self.progress_label)
        return optimize(self, expr, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(PlannerModel, "_optimize", counted)
    sol = model.solve(time_limit=30, workers=1, seed=0)
    assert sol.status == Status.OPTIMAL
    assert len(searched) == 2 and searched[1].startswith("tie-break")


def test_the_span_of_an_expression_is_read_from_its_variables_domains() -> None:
    model = PlannerModel(build_tables(load_problem(PROBLEMS / "chat-70b.yaml"), load_catalog()))
    x = model.m.new_int_var(-3, 5, "x")
    y = model.m.new_int_var(2, 4, "y")
    # 2x - 3y + 7: least 2(-3) - 3(4) + 7 = -11, largest 2(5) - 3(2) + 7 = 11.
    assert model.span(2 * x - 3 * y + 7) == (-11, 11)
