"""Under a deadline the search starts from the completed starting plan (planner.solve.Solver
._search): the starting plan's replicas are completed around the rest of the model first, and
the search is then hinted with every variable's value of that plan, not with the replicas alone.
The proved optimum is the one the search finds from the partial hint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.schema.status import Status
from planner.solve import Solver

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def _hints_seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int, int]]:
    """(hint_only, variables hinted, variables) of every PlannerModel.solve call from now on."""
    seen: list[tuple[bool, int, int]] = []
    solve = PlannerModel.solve

    def spy(self: PlannerModel, **kw: Any) -> Any:
        proto = self.m.proto
        seen.append((self.hint_only, len(proto.solution_hint.vars), len(proto.variables)))
        return solve(self, **kw)

    monkeypatch.setattr(PlannerModel, "solve", spy)
    return seen


def test_the_search_is_hinted_with_every_variable_of_the_completed_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _hints_seen(monkeypatch)
    problem = load_problem(PROBLEMS / "chat-70b.yaml")
    solver = Solver(load_catalog(), deadline=time.monotonic() + 60)
    plan = solver.solve(problem)
    assert plan.status == Status.OPTIMAL
    (completing, partial, n), (searching, whole, n_again) = seen[:2]
    assert completing and not searching
    assert n == n_again
    # The starting plan names the replicas only; the search's hint names every variable.
    assert 0 < partial < n
    assert whole == n


def test_without_a_deadline_the_partial_hint_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # No completion is run without a deadline (Solver._search), so there is no plan to hint.
    seen = _hints_seen(monkeypatch)
    solver = Solver(load_catalog())
    plan = solver.solve(load_problem(PROBLEMS / "chat-70b.yaml"))
    assert plan.status == Status.OPTIMAL
    assert not seen[0][0]
    assert 0 < seen[0][1] < seen[0][2]


@pytest.mark.parametrize("name", ["train-then-serve-13b", "chat-and-code"])
def test_the_completed_hint_proves_the_same_optimum(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = load_problem(PROBLEMS / f"{name}.yaml")
    cat = load_catalog()
    hinted = Solver(cat, deadline=time.monotonic() + 120).solve(problem)
    # The same search from the starting plan's replicas alone (the hint left as it was).
    monkeypatch.setattr(PlannerModel, "hint_last_plan", lambda self: None)
    partial = Solver(cat, deadline=time.monotonic() + 120).solve(problem)
    assert hinted.status == partial.status == Status.OPTIMAL
    assert hinted.objective == partial.objective
    assert hinted.bound == partial.bound


def test_a_large_model_does_not_dive_along_its_complete_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # CP-SAT's dive along a hint (hint_conflict_limit, default 10) does not heed the time limit
    # on a large model (large-serve-owned: 25.3 s of a 23.5 s limit), so a model over
    # HINT_DIVE_MAX_VARIABLES with a complete hint is searched without it; smaller models, and
    # any model whose hint is partial, keep CP-SAT's default. The proved optimum is the same.
    import planner.model.cpsat as cpsat

    cat = load_catalog()
    problem = load_problem(PROBLEMS / "chat-70b.yaml", [])
    limits: list[tuple[bool, int]] = []
    solver = PlannerModel._solver

    def spy(self: PlannerModel, *a: Any, **kw: Any) -> Any:
        s = solver(self, *a, **kw)
        limits.append((self.hint_complete, s.parameters.hint_conflict_limit))
        return s

    monkeypatch.setattr(PlannerModel, "_solver", spy)
    base = Solver(cat, deadline=time.monotonic() + 60).solve(problem)
    assert limits and all(limit == 10 for _, limit in limits)  # CP-SAT's default, kept
    assert any(complete for complete, _ in limits)  # the search was hinted completely
    limits.clear()
    monkeypatch.setattr(cpsat, "HINT_DIVE_MAX_VARIABLES", 10)  # chat-70b's model is "large"
    small = Solver(cat, deadline=time.monotonic() + 60).solve(problem)
    assert {limit for complete, limit in limits if complete} == {0}
    assert {limit for complete, limit in limits if not complete} <= {10}
    assert small.status == base.status == Status.OPTIMAL
    assert small.objective == pytest.approx(base.objective, rel=1e-9)
