"""The light pass and the full search, run side by side on one model (planner.model.cpsat), and
which of the two answers is kept.

Each pass, on one worker with a fixed seed, is deterministic in CP-SAT's deterministic time (its
machine-independent measure of work): it proves its answer, if ever, at the same point on any
machine. The answer kept is the light pass's when it proves within LIGHT_DTIME and no later
(in deterministic time) than the full search proves; else the full search's. Whichever pass
proves first stops the other, so neither runs on after the answer is settled: before, a full
search that proved first still waited for the light pass to spend all of its LIGHT_DTIME
(rent-the-peak: proved at 0.21, then the light pass ran to 0.5 unproved, about 1 s of a core
for nothing). Where the stopped pass had done less work than the first proof took (the two
threads share the machine unevenly), whether it would have proved sooner is settled by
running it again from the start up to that much work, which gives the same answer as the
race on any machine: which plan is kept never depends on timing.

With several workers the full search is not deterministic anyway; the first proof is kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from planner.model import interrupt, progress
from planner.model.ortools_cp import cp_model

PROVED = (cp_model.OPTIMAL, cp_model.INFEASIBLE)
# Share of a proof's seconds the other pass is given after it (_grace): a pass stopped with less
# work done than the proof took is run again from the start (_settle), which costs all of that
# work once more; running on a little is cheaper where, as seen on a loaded 2-core machine, the
# stopped pass was a few per cent behind (cost-per-token-qwen72b: 0.123 of deterministic time
# against a proof at 0.127).
GRACE = 0.08
# Seconds of the time limit a pass must have left to be run again (_settle): below it, the
# proof in hand is kept.
MIN_AGAIN_S = 0.05


def _proved(status: Any) -> bool:
    return status in PROVED


def _work(s: cp_model.CpSolver) -> float:
    """Deterministic time the solver's last solve took (where it proved or was stopped)."""
    return float(s.response_proto.deterministic_time)


def _grace(s: cp_model.CpSolver) -> float:
    """Seconds the other pass runs on after `s` proved: GRACE of the time `s` took. The other
    pass has usually done at least as much work by then (the two threads seldom drift apart by
    more), so whether it would have proved sooner is known without running it again."""
    return GRACE * float(s.response_proto.wall_time) + 0.005


def _again(s: cp_model.CpSolver, up_to: float, left_s: float) -> cp_model.CpSolver:
    """A solver set as `s` is, stopped after `up_to` deterministic time (at most its own) or
    `left_s` seconds, what is left of the race's time limit: the run again is part of the
    search the caller gave that limit (a whole command's deadline rests on it)."""
    again = cp_model.CpSolver()
    again.parameters.copy_from(s.parameters)
    limit = s.parameters.max_deterministic_time
    again.parameters.max_deterministic_time = min(limit, up_to) if limit > 0 else up_to
    again.parameters.max_time_in_seconds = left_s
    return again


def race(
    m: cp_model.CpModel,
    full: cp_model.CpSolver,
    light: cp_model.CpSolver,
    callback: progress.Watch | None,
) -> tuple[cp_model.CpSolver, Any, bool]:
    """Run the full search and the light pass side by side on `m`: the solver whose answer is
    kept, its status, and whether the light pass ended unproved (within its limit, or by the
    full search's proof)."""
    done: list[Any] = []
    stopping: list[threading.Timer] = []

    def run_light() -> None:
        done.append(light.solve(m, progress.beside(callback)))
        if _proved(done[0]):
            stopping.append(threading.Timer(_grace(light), full.stop_search))
            stopping[0].start()

    def then() -> None:  # the full search has returned: a proof stops the light pass
        if _proved(full.response_proto.status):
            beside.join(_grace(full))
            light.stop_search()
        beside.join()
        for timer in stopping:
            timer.cancel()

    began = time.monotonic()
    beside = threading.Thread(target=run_light, name="light pass", daemon=True)
    beside.start()
    st = interrupt.solve(full, m, callback, beside=light, then=then)
    st_light = done[0] if done else None
    if interrupt.requested() or not (_proved(st) or _proved(st_light)):
        return full, st, True
    if full.parameters.num_workers != 1:
        return (light, st_light, False) if _proved(st_light) else (full, st, True)
    left_s = full.parameters.max_time_in_seconds - (time.monotonic() - began)
    return _settle(m, full, st, light, st_light, left_s)


def _settle(
    m: cp_model.CpModel,
    full: cp_model.CpSolver,
    st: Any,
    light: cp_model.CpSolver,
    st_light: Any,
    left_s: float,
) -> tuple[cp_model.CpSolver, Any, bool]:
    """The kept answer once one pass has proved (see the module's docstring): a stopped pass
    that had done less work than the other's proof is run again up to that much work, within
    the `left_s` seconds left of the time limit (none left: the proof in hand is kept, an
    optimum either way; only which of equal plans is kept then depends on the machine)."""
    rerun: Callable[[cp_model.CpSolver], Any] = lambda s: interrupt.solve(s, m)  # noqa: E731
    if _proved(st_light) and _proved(st):
        if _work(light) <= _work(full):
            return light, st_light, False
        return full, st, True
    if _proved(st):  # the light pass was stopped (or ran out of its work limit) unproved
        if left_s > MIN_AGAIN_S and _work(light) < min(
            _work(full), light.parameters.max_deterministic_time
        ):
            again = _again(light, _work(full), left_s)
            st_again = rerun(again)
            if _proved(st_again) and not interrupt.requested():
                return again, st_again, False
        return full, st, True
    # The light pass proved; the full search was stopped before proving.
    if left_s > MIN_AGAIN_S and _work(full) < _work(light) and not interrupt.requested():
        again = _again(full, _work(light), left_s)
        st_again = rerun(again)
        if _proved(st_again) and _work(again) < _work(light):
            return again, st_again, True
    return light, st_light, False
