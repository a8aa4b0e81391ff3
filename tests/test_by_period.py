"""A plan improved one demand period at a time (planner.model.by_period): every variable is
labelled with its period or as shared; the improved plan is feasible in the whole model, never
costs more, and, since nothing but the shared variables ties the periods together, costs what
CP-SAT proves optimal with every shared variable held at the starting plan's values."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model import by_period
from planner.model.cpsat import PlannerModel
from planner.model.tables import Tables, build_tables
from planner.schema.problem import Demand
from planner.schema.status import Status

PROBLEMS = Path(__file__).parent.parent / "problems"


def _tables() -> Tables:
    """rent-the-peak on four levels of a made-up day, bought, reserved, on demand or spot."""
    p = load_problem(PROBLEMS / "rent-the-peak.yaml")
    modes = ["buy", "on_demand", "reserved", "spot"]
    p = p.model_copy(
        update={
            "horizon": p.horizon.model_copy(update={"procurement": modes}),
            "demand": Demand(hourly=[0.3] * 8 + [0.6] * 8 + [0.8] * 5 + [1.0] * 3),
        }
    )
    return build_tables(p, load_catalog())


def _start(t: Tables) -> PlannerModel:
    """The model with a plan in hand that is not the optimum: the starting plan (per workload
    the design that meets its demand at the lowest price) completed around its replicas."""
    model = PlannerModel(t)
    model.hint_only = True
    sol = model.solve(time_limit=30, workers=1, seed=0)
    model.hint_only = False
    assert sol.status.has_plan
    return model


def _value(model: PlannerModel, values: list[int]) -> int:
    obj = model.m.proto.objective
    return sum(int(c) * values[v] for v, c in zip(obj.vars, obj.coeffs, strict=True))


def test_every_variable_has_its_period_or_is_shared() -> None:
    t = _tables()
    model = _start(t)
    label = by_period.labels(model)
    assert label is not None
    for key, var in model.R.items():
        assert label[var.index] == key.period
    for (_, p_i), var in model.od.items():
        assert label[var.index] == p_i
    for var in [*model.bought.values(), *model.reserved.values(), *model.hosts.values()]:
        assert label[var.index] == by_period.SHARED


def test_the_improved_plan_is_the_optimum_with_the_shared_variables_held() -> None:
    t = _tables()
    model = _start(t)
    start = model.last_values()
    label = by_period.labels(model)
    improved = by_period.improve(model, start, time.monotonic() + 60)
    assert improved is not None  # the starting plan is not the best with its purchases
    assert _value(model, improved) < _value(model, start)
    # Feasible in the whole model: every variable held at the improved plan, CP-SAT agrees.
    model.hint_values(improved)
    model.hint_only = True
    held = model.solve(time_limit=30, workers=1, seed=0)
    assert held.status.has_plan and held.objective == _value(model, improved)
    # Brute force over the periods together: the whole model with each shared variable held at
    # the starting plan's value, solved to a proved optimum, is no better.
    whole = PlannerModel(t)
    for j in np.flatnonzero(label == by_period.SHARED):
        var = whole.m.get_int_var_from_proto_index(int(j))
        whole.m.add(var == start[j])
    best = whole.solve(time_limit=60, workers=1, seed=0)
    assert best.status == Status.OPTIMAL
    assert best.objective == _value(model, improved)
