"""The light pass beside every search (planner.model.cpsat.LIGHT_DTIME): one round of presolve
without probing, bounded in CP-SAT's deterministic time. Its plan is kept only where it proves the
optimum (or infeasibility) no later than the full search (planner.model.race), so the optimum is
the full search's; which pass's plan is kept never depends on timing, so a run is repeatable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model import cpsat
from planner.model.cpsat import PlannerModel
from planner.model.ortools_cp import cp_model
from planner.model.result import Solution
from planner.model.tables import build_tables
from planner.schema.status import Status

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def _model(name: str) -> PlannerModel:
    return PlannerModel(build_tables(load_problem(PROBLEMS / f"{name}.yaml"), load_catalog()))


def _solve(model: PlannerModel) -> Solution:
    return model.solve(time_limit=30, workers=1, seed=0)


@pytest.mark.parametrize("name", ["chat-70b", "buy-flat-demand", "chat-and-code", "train-13b-2m"])
def test_the_light_pass_proves_the_same_optimum_as_the_full_search(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    light = _model(name)
    got = _solve(light)
    # These small models are proved within the light pass's budget, by it or (where the full
    # search proves with less work, planner.model.race) by the full search.
    assert got.status == Status.OPTIMAL
    monkeypatch.setattr(cpsat, "LIGHT_DTIME", 0.0)  # the light pass stops at once, unproved
    full = _model(name)
    alone = _solve(full)
    assert full.light_fails  # so the full search's answer was taken
    assert alone.status == Status.OPTIMAL
    assert got.objective == alone.objective


def test_a_light_pass_that_ends_unproved_is_not_run_again_for_the_same_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cpsat, "LIGHT_DTIME", 0.0)
    model = _model("chat-70b")
    ran: list[float] = []
    lighten = cpsat._lighten

    def counted(s: cp_model.CpSolver) -> None:
        lighten(s)
        ran.append(1.0)

    monkeypatch.setattr(cpsat, "_lighten", counted)
    _solve(model)
    _solve(model)
    assert len(ran) == 1


def test_a_run_is_repeatable() -> None:
    a, b = _solve(_model("chat-and-code")), _solve(_model("chat-and-code"))
    assert a.status == b.status == Status.OPTIMAL
    assert a.replicas == b.replicas and a.bought == b.bought and a.hosts == b.hosts


def test_ctrl_c_during_a_search_stops_it_and_still_reaches_python_after() -> None:
    # The light pass runs on a thread of its own with CP-SAT's Ctrl-C catcher off. Left on, a
    # Ctrl-C during the pass went to CP-SAT's C handler, and the full search then failed with
    # `RuntimeError: bad_function_call` (a sweep's Ctrl-C printed a traceback; a pool's worker
    # died). max-throughput-500k's light pass ends unproved after ~0.5 s: Ctrl-C is sent 0.05 s
    # after the first light pass starts (not at a fixed time from the start, which a loaded
    # machine can move before the search or past the light pass).
    code = (
        "import os, signal, threading, time\n"
        # A test run started in the background has Ctrl-C ignored, and the child inherits that.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from pathlib import Path\n"
        "from planner.load import load_problem\n"
        "from planner.model import cpsat, interrupt\n"
        "from planner.solve import solve_problem\n"
        f"p = load_problem(Path({str(PROBLEMS / 'max-throughput-500k.yaml')!r}))\n"
        "lighten, sent = cpsat._lighten, []\n"
        "def light(s):\n"
        "    lighten(s)\n"
        "    if not sent:\n"
        "        sent.append(threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)))\n"
        "        sent[0].start()\n"
        "cpsat._lighten = light\n"
        "t = time.perf_counter()\n"
        "solve_problem(p, time_limit=30)\n"
        "print(interrupt.requested(), time.perf_counter() - t < 5)\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(5)\n"
        "except KeyboardInterrupt:\n"
        "    print('caught')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "caught"], done.stdout + done.stderr
