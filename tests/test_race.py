"""The light pass and the full search side by side (planner.model.race): whichever proves first
stops the other, and the answer kept is the one the rule names whatever the timing (the light
pass's when it proves within LIGHT_DTIME and no later, in deterministic time, than the full
search; else the full search's). The optimum is the one either search proves alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model import cpsat, race
from planner.model.cpsat import PlannerModel
from planner.model.ortools_cp import cp_model
from planner.model.tables import build_tables
from planner.schema.status import Status

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def _model(name: str) -> PlannerModel:
    return PlannerModel(build_tables(load_problem(PROBLEMS / f"{name}.yaml"), load_catalog()))


def _alone(model: PlannerModel, *, light: bool, limit: float = 0.0) -> cp_model.CpSolver:
    """One pass on its own (no race), to its end or to `limit` deterministic time."""
    s = model._solver(30.0, 1, 0)
    if light:
        cpsat._lighten(s)
        s.parameters.max_deterministic_time = limit or 10.0
    elif limit:
        s.parameters.max_deterministic_time = limit
    s.solve(model.m)
    return s


@pytest.mark.parametrize("name", ["chat-70b", "buy-flat-demand", "train-13b-2m", "serve-405b"])
def test_the_race_keeps_the_optimum_either_search_proves_alone(name: str) -> None:
    raced = _model(name).solve(time_limit=30, workers=1, seed=0)
    full = _model(name)
    full.light_fails = True  # the full search alone
    alone = full.solve(time_limit=30, workers=1, seed=0)
    assert raced.status == alone.status == Status.OPTIMAL
    assert raced.objective == alone.objective


def test_a_stopped_pass_behind_the_first_proof_is_run_again_to_settle_the_rule() -> None:
    # The full search proves chat-70b; the light pass, stopped after a sliver of work (as if its
    # thread had been starved), has done less than the full search's proof took. The rule is
    # settled by running the light pass again up to that much work: the answer is the one the
    # two passes run alone to their ends give.
    model = _model("chat-70b")
    model.pose()
    full = _alone(model, light=False)
    assert full.response_proto.status == cp_model.OPTIMAL
    d_full = full.response_proto.deterministic_time
    light_end = _alone(model, light=True)
    d_light = light_end.response_proto.deterministic_time
    light_proves_first = light_end.response_proto.status == cp_model.OPTIMAL and d_light <= min(
        d_full, cpsat.LIGHT_DTIME
    )
    stopped = _alone(model, light=True, limit=d_full / 50)
    assert stopped.response_proto.status != cp_model.OPTIMAL
    stopped.parameters.max_deterministic_time = cpsat.LIGHT_DTIME  # as the race sets it
    kept, status, light_failed = race._settle(
        model.m, full, full.response_proto.status, stopped, stopped.response_proto.status, 30.0
    )
    assert status == cp_model.OPTIMAL
    assert light_failed == (not light_proves_first)
    assert (kept is full) == (not light_proves_first)
    assert kept.objective_value == full.objective_value
    # With no time left of the limit the pass is not run again: the proof in hand is kept (an
    # optimum either way).
    kept, status, light_failed = race._settle(
        model.m, full, full.response_proto.status, stopped, stopped.response_proto.status, 0.0
    )
    assert kept is full and status == cp_model.OPTIMAL and light_failed
    assert kept.objective_value == full.objective_value


def test_both_proved_the_one_with_less_work_is_kept() -> None:
    model = _model("buy-flat-demand")
    model.pose()
    full, light = _alone(model, light=False), _alone(model, light=True)
    assert full.response_proto.status == light.response_proto.status == cp_model.OPTIMAL
    kept, _, light_failed = race._settle(
        model.m, full, full.response_proto.status, light, light.response_proto.status, 30.0
    )
    light_first = light.response_proto.deterministic_time <= full.response_proto.deterministic_time
    assert (kept is light) == light_first and light_failed == (not light_first)
