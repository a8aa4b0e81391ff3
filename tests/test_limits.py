"""Time limits and interrupts end in a result with a status, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ortools.sat.python import cp_model
from typer.testing import CliRunner

from planner.cli import app
from planner.model import cpsat
from planner.model.result import Solution
from planner.schema.status import Status

runner = CliRunner()


def test_no_plan_within_the_time_limit_exits_4(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the model returns when CP-SAT answers UNKNOWN: nothing found before the limit.
    def nothing(self: Any, **kwargs: Any) -> cpsat.Solution:
        return Solution(Status.NO_PLAN, None, None, kwargs["time_limit"], {}, {}, {})

    monkeypatch.setattr(cpsat.PlannerModel, "solve", nothing)
    r = runner.invoke(app, ["solve", "problems/chat-70b.yaml", "--time-limit", "0.5"])
    assert r.exit_code == 4
    assert "no plan found within 0.5 s" in r.output


def test_time_limit_reaches_the_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []
    real = cpsat.PlannerModel._solver

    def spy(
        self: Any, time_limit: float, workers: int, seed: int, gap: float = 0.0
    ) -> cp_model.CpSolver:
        s = real(self, time_limit, workers, seed, gap)
        seen.append(s.parameters.max_time_in_seconds)
        return s

    monkeypatch.setattr(cpsat.PlannerModel, "_solver", spy)
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
