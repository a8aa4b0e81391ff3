"""Defects found by a hostile review of every command, each pinned by the case that showed it:
a plan the verifier refused although every figure held, overflowing prices, and messages that
did not name the place and the fix."""

from __future__ import annotations

import time
from pathlib import Path

from hostile_cli import run

from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.plan.build import make_plan
from planner.plan.io import dumps_plan, plan_document
from planner.solve import Solver
from planner.verify import verify

ROOT = Path(__file__).resolve().parent.parent
TRAIN_THEN_SERVE = ROOT / "problems" / "train-then-serve-13b.yaml"


def test_a_training_phase_on_its_own_device_type_keeps_its_hosts(tmp_path: Path) -> None:
    """The quick plan a solve falls back on when its search runs out of time picks each
    workload's cheapest design on its own: train-then-serve-13b then trains on one device type
    and serves on another. The verifier counted hosts only for the last phase's devices, so
    the hosts of the training phase's type were "not on premises" and `planner solve
    --time-limit 5` on a loaded machine exited 1 (an internal error) on a shipped example."""
    problem = load_problem(TRAIN_THEN_SERVE)
    solver = Solver(time_limit=30)
    tables = solver.tables(problem)
    sol = solver._complete_hint(PlannerModel(tables), time.monotonic() + 30)
    plan = make_plan(problem, solver.cat, tables, sol)
    trained = set(plan.phases[0].devices)
    served = set(plan.phases[-1].devices)
    # The case needs a type that only the training phase uses (the quick plan's choice).
    assert trained - served, (trained, served)
    verify(plan, problem, solver.cat)  # raised InternalError before the fix
    path = tmp_path / "plan.json"
    path.write_text(dumps_plan(plan_document(plan, problem, solver.cat)))
    code, out = run("verify", str(path), "--no-resolve")
    assert code == 0, out
    assert {x.hosts for x in plan.nodes} == trained | served
