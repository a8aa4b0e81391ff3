"""The explanation of an infeasible problem (planner.model.diagnose.blocking_constraints) under
the whole command's deadline: it builds the model again for every constraint family, so it
stops trying once the deadline has passed, and a family whose trial ran out of time is named as
not settled instead of being counted among limits that block together."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model import diagnose
from planner.model.cpsat import PlannerModel
from planner.model.result import Solution
from planner.model.tables import Tables, build_tables
from planner.schema.status import Status


def _tables() -> Tables:
    # Llama 3.1 405B on GeForce cards under $5,000: only the budget rules it out.
    return build_tables(load_problem(Path("problems") / "infeasible.yaml"), load_catalog())


def test_the_budget_is_named_with_time_to_try_every_family() -> None:
    notes = diagnose.blocking_constraints(
        _tables(), time_limit=30, seed=0, deadline=time.monotonic() + 30
    )
    assert notes[0].startswith("infeasible because of `budget`")


def test_no_model_is_built_once_the_deadline_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _tables()
    built = []

    class Counted(PlannerModel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(diagnose, "PlannerModel", Counted)
    notes = diagnose.blocking_constraints(t, time_limit=30, seed=0, deadline=time.monotonic())
    assert not built
    assert "raise --time-limit" in notes[0]


def test_a_trial_out_of_time_is_not_counted_as_blocking(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every trial stopped by its time limit before finding a plan or proving there is none:
    # nothing is known of any family, so none may be said to block "together".
    def unsettled(self: PlannerModel, **kwargs: Any) -> Solution:
        return Solution(Status.NO_PLAN, None, None, 0.0, {}, {}, {})

    monkeypatch.setattr(PlannerModel, "solve", unsettled)
    notes = diagnose.blocking_constraints(_tables(), time_limit=0.1, seed=0)
    assert len(notes) == 1
    assert "several limits block together" not in notes[0]
    assert "not settled" in notes[0] and "budget" in notes[0]
