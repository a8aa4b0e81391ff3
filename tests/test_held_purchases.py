"""The search over the relaxation's designs on a large model runs CP-SAT's portfolio on one
thread, and its plan is then searched again with purchases held: the relaxation's in whole
units (planner.model.relaxation.whole_purchases) or the plan's own
(planner.model.cpsat.PlannerModel.hold_purchases, planner.solve_guided.GuidedSearch._held_purchases)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from planner.catalog import load_catalog
from planner.estimator.hosts import purchase_unit
from planner.load import load_problem
from planner.model.cpsat import PlannerModel, _lighten
from planner.model.relaxation import support, whole_purchases
from planner.model.tables import Tables, build_tables
from planner.schema.problem import Problem
from planner.schema.status import Status
from planner.solve import Got, Solver


def _peak() -> Problem:
    """rent-the-peak (a day of hourly demand: 0.2 for 21 hours, 1.0 for 3) allowed to buy,
    rent on demand and reserve."""
    p = load_problem(Path("problems") / "rent-the-peak.yaml")
    modes = ["buy", "on_demand", "reserved"]
    return p.model_copy(update={"horizon": p.horizon.model_copy(update={"procurement": modes})})


def _tables() -> Tables:
    return build_tables(_peak(), load_catalog())


def test_held_purchases_are_what_the_plan_buys() -> None:
    t = _tables()
    best = PlannerModel(t).solve(time_limit=60, workers=1, seed=0)
    assert best.status == Status.OPTIMAL and best.objective is not None
    assert sum(best.bought.values()) > 0  # the optimum buys the base load
    held = PlannerModel(t)
    held.hold_purchases(best.bought)
    again = held.solve(time_limit=60, workers=1, seed=0)
    # The optimum's own purchases held: the optimum is still in reach, and nothing beats it.
    assert again.status == Status.OPTIMAL and again.objective == best.objective
    assert {d: n for d, n in again.bought.items() if n} == {
        d: n for d, n in best.bought.items() if n
    }
    none = PlannerModel(t)
    none.hold_purchases({})  # nothing bought: every replica rented
    rented = none.solve(time_limit=60, workers=1, seed=0)
    assert rented.status == Status.OPTIMAL and rented.objective is not None
    assert not any(rented.bought.values())
    assert all(k.site != "on-premises" for k in rented.replicas)
    assert rented.objective > best.objective  # holding the peak's rent for 21 quiet hours


def test_the_portfolio_runs_on_the_one_worker_of_the_full_search_only() -> None:
    m = PlannerModel(_tables())
    assert not m._solver(5.0, 1, 0).parameters.interleave_search  # off unless asked
    m.portfolio = True
    s = m._solver(5.0, 1, 0)
    assert s.parameters.interleave_search and s.parameters.num_workers == 1
    assert not m._solver(5.0, 2, 0).parameters.interleave_search  # CP-SAT's own threads then
    _lighten(s)
    assert not s.parameters.interleave_search  # the light pass stays one tree search
    m.hint_only = True  # completing the starting plan: its variables are held, nothing to mix
    assert not m._solver(5.0, 1, 0).parameters.interleave_search


def test_the_held_search_improves_a_plan_without_changing_its_purchases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = _tables()
    solver = Solver(time_limit=30, deadline=time.monotonic() + 30)
    best = PlannerModel(t).solve(time_limit=60, workers=1, seed=0)
    assert best.status == Status.OPTIMAL and best.objective is not None
    # A dearer plan to start from: one replica more than the optimum's in every group, each
    # held as it is while the rest of the plan (purchases, rent) is completed around them.
    more = {k: n + 1 for k, n in best.replicas.items()}
    start = PlannerModel(t, warm=more)
    dear = solver._complete_hint(start, time.monotonic() + 30)
    assert dear.status == Status.FEASIBLE and dear.objective is not None
    assert dear.replicas == more and dear.objective > best.objective
    got = Got(dear, t, Status.FEASIBLE, [], warm=dear.replicas)
    held = solver._held_purchases(t, got, time.monotonic() + 20)
    assert held.sol is not None and held.sol.objective is not None
    # The extra replicas cost energy or rent: the held search drops them, and keeps what the
    # dearer plan bought (whatever the optimum buys).
    assert best.objective <= held.sol.objective < dear.objective
    assert {d: n for d, n in held.sol.bought.items() if n} == {
        d: n for d, n in dear.bought.items() if n
    }
    # A plan the held search cannot improve comes back as it was. (Marked unproved: a plan
    # proved optimal over the designs is returned without a held search at all.)
    unproved = dataclasses.replace(held.sol, status=Status.FEASIBLE)
    start = dataclasses.replace(held, sol=unproved, status=Status.FEASIBLE)
    searched = []
    real = Solver._search

    def search(self: Solver, *args: Any, **kwargs: Any) -> Got:
        searched.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Solver, "_search", search)
    again = solver._held_purchases(t, start, time.monotonic() + 20)
    assert searched  # the held search ran, and found nothing better
    assert again.sol is not None and again.sol.objective == held.sol.objective


def test_the_relaxations_purchases_round_down_to_whole_baseboards() -> None:
    p = load_problem(Path("problems") / "rent-the-peak.yaml")
    modes = ["buy", "on_demand", "reserved", "spot"]
    problem = p.model_copy(update={"horizon": p.horizon.model_copy(update={"procurement": modes})})
    t = build_tables(problem, load_catalog())
    # H200 on HGX baseboards of 8 or 4 and MI300X on OAM platforms of 8, each sold whole
    # (catalog/nodes.yaml): down to multiples of 8; L40S in PCIe servers, bought one at a time.
    assert {n.slots for n in t.econ["h200-sxm"].hosts} == {8, 4}
    assert {n.slots for n in t.econ["mi300x"].hosts} == {8}
    fractional = {"h200-sxm": 16.594, "mi300x": 1.859, "l40s": 3.7}
    assert whole_purchases(t, fractional) == {"h200-sxm": 16, "mi300x": 0, "l40s": 3}
    assert whole_purchases(t, {"h200-sxm": 23.9999999}) == {"h200-sxm": 24}  # LP round-off
    found = support(t, time_limit=30)
    assert found is not None and found.bought is not None
    for dev, n in found.bought.items():
        unit = max(purchase_unit(h) for h in t.econ[dev].hosts)
        assert n % unit == 0


def test_no_held_search_after_the_plan_is_proved_optimal_over_the_same_designs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Holding purchases only narrows the designs' model further: from a plan proved optimal
    # over them no held plan can be better, so the held search's share of the time goes to
    # the steps that can (the relaxation's tree, the whole search) instead.
    t = _tables()
    best = PlannerModel(t).solve(time_limit=60, workers=1, seed=0)
    assert best.status == Status.OPTIMAL
    solver = Solver(time_limit=30, deadline=time.monotonic() + 30)
    searched: list[object] = []

    def search(*args: object, **kwargs: object) -> Got:
        searched.append(args)
        return Got(None, t, Status.NO_PLAN, [])

    monkeypatch.setattr(Solver, "_search", search)
    got = Got(best, t, Status.OPTIMAL, [], warm=best.replicas)
    assert solver._held_purchases(t, got, time.monotonic() + 20, {}) is got
    assert not searched
