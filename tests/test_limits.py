"""Time limits and interrupts end in a result with a status, never a traceback."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from ortools.sat.python import cp_model
from typer.testing import CliRunner

from planner.cli import app
from planner.model import cpsat
from planner.model.result import Solution
from planner.schema.status import Status
from planner.solve import solve_problem

runner = CliRunner()


def test_no_plan_within_the_time_limit_exits_4(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the model returns when CP-SAT answers UNKNOWN: nothing found before the limit.
    def nothing(self: Any, **kwargs: Any) -> cpsat.Solution:
        return Solution(Status.NO_PLAN, None, None, kwargs["time_limit"], {}, {}, {})

    monkeypatch.setattr(cpsat.PlannerModel, "solve", nothing)
    r = runner.invoke(app, ["solve", "problems/chat-70b.yaml", "--time-limit", "0.5"])
    assert r.exit_code == 4
    assert "no plan found within 0.5 s" in r.output


def _search_limits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The time limit of every CP-SAT search from now on, as the solver is given it."""
    seen: list[float] = []
    real = cpsat.PlannerModel._solver

    def spy(
        self: Any, time_limit: float, workers: int, seed: int, gap: float = 0.0
    ) -> cp_model.CpSolver:
        s = real(self, time_limit, workers, seed, gap)
        seen.append(s.parameters.max_time_in_seconds)
        return s

    monkeypatch.setattr(cpsat.PlannerModel, "_solver", spy)
    return seen


def test_time_limit_reaches_the_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _search_limits(monkeypatch)
    r = runner.invoke(app, ["solve", "problems/chat-70b.yaml", "--time-limit", "3"])
    assert r.exit_code == 0
    assert seen and all(0 < t <= 3 for t in seen)


def test_gap_reaches_the_solver_and_a_plan_within_it_is_not_called_optimal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gaps: list[float] = []
    real = cpsat.PlannerModel._solver

    def spy(
        self: Any, time_limit: float, workers: int, seed: int, gap: float = 0.0
    ) -> cp_model.CpSolver:
        gaps.append(gap)
        return real(self, time_limit, workers, seed, gap)

    monkeypatch.setattr(cpsat.PlannerModel, "_solver", spy)
    r = runner.invoke(app, ["solve", "problems/chat-70b.yaml", "--gap", "0.3", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert 0.3 in gaps
    plan = json.loads(r.output)
    # Within 30 % the solver may stop at its first plan; it is OPTIMAL only if proved so.
    if plan["status"] == "FEASIBLE":
        assert plan["gap"] <= 0.3 + 1e-9
        assert any("gap" in n for n in plan["notes"])
    else:
        assert plan["objective"] == plan["bound"]


def test_gap_outside_its_range_is_refused() -> None:
    r = runner.invoke(app, ["solve", "problems/chat-70b.yaml", "--gap", "2"])
    assert r.exit_code == 2


def test_interrupt_between_solves_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("planner.solve.Solver.solve", interrupted)
    r = runner.invoke(app, ["solve", "problems/chat-70b.yaml"])
    assert r.exit_code == 130
    assert "interrupted" in r.output


def _chat() -> Any:
    from planner.load import load_problem

    return load_problem(Path("problems/chat-70b.yaml"))


def test_a_search_that_finds_nothing_falls_back_to_the_completed_hint(
    search_finds_nothing: None,
) -> None:
    plan = solve_problem(_chat(), time_limit=5)  # verified inside, as every plan is
    assert plan.status == Status.FEASIBLE and plan.bound is None
    assert any("quick plan" in n for n in plan.notes)
    best = solve_problem(_chat(), time_limit=5, tuned=False)  # the hint is not used untuned
    assert best.status == Status.NO_PLAN


def test_the_deadline_bounds_every_search(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _search_limits(monkeypatch)
    plan = solve_problem(_chat(), time_limit=30, deadline=time.monotonic() + 2)
    assert plan.status.has_plan
    assert seen and all(t <= 2 for t in seen)


def test_a_negative_cost_bound_is_reported_as_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    real = cpsat.PlannerModel.solve

    def early(self: Any, **kwargs: Any) -> Solution:
        sol = real(self, **kwargs)
        return dataclasses.replace(sol, status=Status.FEASIBLE, bound=-1.4e6)

    monkeypatch.setattr(cpsat.PlannerModel, "solve", early)
    plan = solve_problem(_chat(), time_limit=5)
    assert plan.bound == 0.0


def test_under_a_deadline_the_completed_start_is_kept_when_the_search_is_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = cpsat.PlannerModel.solve

    def stopped_search(self: Any, **kwargs: Any) -> Solution:
        if self.hint_only:
            return real(self, **kwargs)
        self.interrupted = True  # as Ctrl-C leaves it: the search ended without a plan
        return Solution(Status.NO_PLAN, None, None, 0.0, {}, {}, {})

    monkeypatch.setattr(cpsat.PlannerModel, "solve", stopped_search)
    plan = solve_problem(_chat(), time_limit=20, deadline=time.monotonic() + 20)
    assert plan.status == Status.FEASIBLE and plan.bound is None
    assert any("quick plan" in n for n in plan.notes)
