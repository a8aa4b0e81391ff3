"""Problems whose whole model cannot be built and searched within the time limit are first
solved over a shortlist of designs (planner.model.shortlist), and the starting plan exists for
rented and multi-period problems too, so a verified plan comes back within the limit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from planner import solve as solve_module
from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.shortlist import model_keys, shortlist
from planner.model.tables import build_tables
from planner.schema.problem import Problem
from planner.schema.status import Status
from planner.solve import solve_problem


def _problem(name: str) -> Problem:
    return load_problem(Path("problems") / f"{name}.yaml")


def _four_modes(name: str) -> Problem:
    p = _problem(name)
    modes = ["buy", "on_demand", "reserved", "spot"]
    return p.model_copy(update={"horizon": p.horizon.model_copy(update={"procurement": modes})})


def test_the_shortlist_keeps_every_device_set_and_consistent_tables() -> None:
    t = build_tables(_four_modes("chat-and-code"), load_catalog())
    short, picked = shortlist(t, keep=2)
    for w in t.problem.workloads:
        ds, idx = t.designs[w.name], picked[w.name]
        assert idx == sorted(set(idx)) and len(idx) < len(ds)
        assert short.designs[w.name] == [ds[j] for j in idx]
        # Every set of device types that has a design keeps one.
        assert {(d.signature, d.role) for d in ds} == {
            (d.signature, d.role) for d in short.designs[w.name]
        }
    assert model_keys(short) < model_keys(t)


def test_a_large_model_is_searched_over_its_shortlist_within_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if building every design's model would take far too long, and no time to try it.
    monkeypatch.setattr(solve_module, "BUILD_S_PER_KEY", 1.0)
    monkeypatch.setattr(solve_module, "MIN_WHOLE_SEARCH_S", 1e9)
    problem = _four_modes("chat-and-code")
    plan = solve_problem(problem, time_limit=20, deadline=time.monotonic() + 20)
    assert plan.status == Status.FEASIBLE and plan.bound is None  # verified inside
    assert any("shortlist" in n and "not proved optimal" in n for n in plan.notes)
    # The whole search's bound (proved or not by its time limit): no plan is cheaper.
    best = solve_problem(problem, time_limit=30)
    assert best.status.has_plan and best.bound is not None
    assert plan.objective is not None and plan.objective >= best.bound * (1 - 1e-9)


def test_after_the_shortlist_the_whole_model_is_searched_when_time_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(solve_module, "BUILD_S_PER_KEY", 1.0)  # shortlist first
    problem = _problem("chat-70b")
    plan = solve_problem(problem, time_limit=30, deadline=time.monotonic() + 30)
    best = solve_problem(problem, time_limit=30)
    assert plan.status == best.status == Status.OPTIMAL
    assert plan.objective == pytest.approx(best.objective, rel=1e-9)
    assert not any("shortlist" in n for n in plan.notes)


@pytest.mark.parametrize(
    "problem",
    [_problem("rent-the-peak"), _four_modes("chat-and-code"), _four_modes("rent-the-peak")],
    ids=["hours-buy-or-rent", "four-modes", "hours-four-modes"],
)
def test_rented_and_multi_period_problems_have_a_starting_plan(
    problem: Problem, search_finds_nothing: None
) -> None:
    assert PlannerModel(build_tables(problem, load_catalog())).hinted
    plan = solve_problem(problem, time_limit=20)  # the completed hint, verified inside
    assert plan.status == Status.FEASIBLE
    assert any("quick plan" in n for n in plan.notes)


def test_for_throughput_the_shortlist_keeps_replicas_of_every_size() -> None:
    # An owned fleet is filled with replicas of several sizes when throughput is the goal.
    t = build_tables(_problem("leftovers-pool"), load_catalog())
    short, _ = shortlist(t, keep=1)
    for w in t.problem.workloads:
        sizes = {(d.role, tuple(sorted(d.devices.items()))) for d in t.designs[w.name]}
        kept = {(d.role, tuple(sorted(d.devices.items()))) for d in short.designs[w.name]}
        assert kept == sizes
