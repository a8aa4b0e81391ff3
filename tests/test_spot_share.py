"""The plan builder rents on demand only what spot does not carry, and spot never carries more
than its share of a period's devices: a solution that rents more spot than it counts on
(feasible for the model, which caps the spot devices it counts as up) must not be turned into a
plan whose spot carries more than `spot_max_share`. Found on a week of hourly demand with four
procurement modes, where a plan stopped at the time limit failed verification."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.tables import build_tables
from planner.plan.build import make_plan
from planner.verify import verify


def test_spare_spot_does_not_push_spot_past_its_share() -> None:
    cat = load_catalog()
    base = load_problem(Path("problems/rent-the-peak.yaml"))
    modes = base.horizon.model_copy(update={"procurement": ["on_demand", "spot"]})
    problem = base.model_copy(update={"horizon": modes})
    tables = build_tables(problem, cat)
    sol = PlannerModel(tables).solve(time_limit=20, workers=1, seed=0)
    assert sol.status.has_plan
    # A period and device where spot is at its share and on-demand carries the rest.
    both = [k for k, v in sol.spot.items() if v and sol.on_demand.get(k)]
    assert both, "the optimum should mix spot and on-demand devices in some period"
    key = both[0]
    # Ten spot devices more than the solution counts on: still a valid model solution.
    spare = dataclasses.replace(sol, spot={**sol.spot, key: sol.spot[key] + 10})
    plan = make_plan(problem, cat, tables, spare)
    verify(plan, problem, cat)  # raises if spot carries more than its share
    dev, q = key
    assert plan.periods[q].devices[dev].get("on_demand", 0) >= sol.on_demand[key]
