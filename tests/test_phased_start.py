"""The starting plan of a phased problem (planner.model.hints): phases run one after another on
one fleet, so the devices an earlier phase holds are free for the phases after it, and the plan
with every workload on one device type is tried beside the workload-by-workload one (the
cheapest design of each workload on its own can leave each phase on a type of its own, each
bought)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.tables import build_tables
from planner.solve import Solver

TRAIN_THEN_SERVE = Path(__file__).resolve().parent.parent / "problems" / "train-then-serve-13b.yaml"


def _model() -> PlannerModel:
    return PlannerModel(build_tables(load_problem(TRAIN_THEN_SERVE), load_catalog()))


def test_devices_an_earlier_phase_holds_are_not_bought_again() -> None:
    model = _model()
    dev = "h200-sxm"
    node = model._hint_host(dev)
    assert model.t.econ[dev].owned == 0
    unit = node.slots  # a baseboard is sold whole: its slots are the purchase unit
    # Nothing held yet: one device buys one whole unit.
    assert model._bought_more(dev, 0, 1) == unit
    # The fleet holds a unit from an earlier phase: a later phase's device comes free, and
    # one past the unit buys the next one.
    assert model._bought_more(dev, 0, unit, fleet=unit) == 0
    assert model._bought_more(dev, 0, unit + 1, fleet=unit) == unit
    # Within one phase the devices before add up (no fleet given: as before phases).
    assert model._bought_more(dev, unit, 1) == unit


def _start(solver: Solver, monkeypatch: pytest.MonkeyPatch | None) -> float:
    """The completed starting plan's cost; with `monkeypatch`, of the workload-by-workload
    pass alone (the one-type plans left untried)."""
    if monkeypatch is not None:
        greedy = PlannerModel._greedy
        monkeypatch.setattr(
            PlannerModel, "_greedy", lambda self, *a, only=None: None if only else greedy(self, *a)
        )
    tables = solver.tables(load_problem(TRAIN_THEN_SERVE))
    model = PlannerModel(tables)
    sol = solver._complete_hint(model, time.monotonic() + 30)
    assert sol.objective is not None
    return sol.objective


def test_both_phases_start_on_one_device_type_when_that_is_cheaper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _model()
    chosen, _ = model.heuristic()
    types = {x for k in chosen for x in model.t.designs[k.workload][k.design].devices}
    assert len(types) == 1, types
    solver = Solver(load_catalog())
    one_type = _start(solver, None)
    by_workload = _start(solver, monkeypatch)
    # Workload by workload: each phase on a type of its own, each bought (two fleets' worth).
    assert one_type < by_workload
    # Neither start is below the optimum the search proves.
    plan = Solver(load_catalog(), deadline=time.monotonic() + 120).solve(
        load_problem(TRAIN_THEN_SERVE)
    )
    assert plan.status.value == "OPTIMAL" and plan.objective is not None
    assert plan.objective <= one_type
