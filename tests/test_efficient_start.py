"""Under max_tokens_per_joule the starting plan is the option making the most tokens/s per watt,
its hosts' overhead counted (planner.model.hints._most_efficient), and Dinkelbach's first plan is
that plan completed. problems/tokens-per-joule-10kw.yaml: from the cheapest option's start the
ratio took three steps after the first plan (0.19, 0.20 and 0.06 of CP-SAT's deterministic time,
one thread); from this one, one step (0.06), to the same proved optimum. One GB200 makes the most
tokens/s per watt of its own, but its rack's overhead does not fit 10 kW: counted, the start is a
plan within the cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.result import Solution
from planner.model.tables import build_tables
from planner.schema.status import Status

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def _model(overrides: tuple[str, ...]) -> PlannerModel:
    problem = load_problem(PROBLEMS / "tokens-per-joule-10kw.yaml", overrides)
    return PlannerModel(build_tables(problem, load_catalog()))


def _solve(model: PlannerModel) -> Solution:
    return model.solve(time_limit=30, workers=1, seed=0)


@pytest.mark.parametrize("overrides", [(), ("constraints.power_w=6000",)])
def test_the_most_efficient_start_is_a_plan_and_reaches_the_same_optimum_sooner(
    overrides: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    efficient = _model(overrides)
    efficient.hint_only = True  # the starting plan alone, completed
    assert _solve(efficient).status.has_plan
    efficient.hint_only = False
    got = _solve(efficient)
    monkeypatch.setattr(PlannerModel, "_most_efficient", lambda self, w, fits, left: None)
    cheapest = _solve(_model(overrides))
    assert got.status == cheapest.status == Status.OPTIMAL
    assert got.objective == pytest.approx(cheapest.objective, rel=1e-12)
    assert got.iterations <= cheapest.iterations


def test_only_a_tokens_per_joule_goal_starts_from_the_most_efficient_option() -> None:
    model = _model(("objective.goal=min_cost",))
    w = model.p.workloads[0]
    fits = model._options(w, {dev: e.unit_usd for dev, e in model.t.econ.items()}, {})
    assert fits and model._most_efficient(w, fits, float("inf")) is None
