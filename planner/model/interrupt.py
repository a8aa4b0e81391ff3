"""Ctrl-C during a CP-SAT solve: stop the search at once, keep the best plan found so far, and
leave Python's own SIGINT handler in place afterwards.

CP-SAT's own catcher (`catch_sigint_signal`) installs a C handler for the solve and, on leaving,
resets SIGINT to the system default: a later Ctrl-C then kills the process with no message and
no clean-up. Here that catcher is off. While the solver runs (the main thread is inside C++ and
runs no Python), Python's C-level handler writes the signal number to a wake-up pipe; a watcher
thread reads it and asks the solver to stop. The request is remembered (`requested()`), so the
caller can show the incumbent, say "interrupted" and exit 130, and a sweep can stop after the
points it has done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from planner.process import ctrl_c_noted

if TYPE_CHECKING:  # the command line imports this module before it needs OR-Tools
    from planner.model.ortools_cp import cp_model

_requested = threading.Event()
_reported = threading.Event()  # the command line has said "interrupted"


def requested() -> bool:
    """Whether Ctrl-C stopped a solve of this process, or came while the command ran (where
    Python lost the error it raised: see planner.process.ctrl_c_noted)."""
    return _requested.is_set() or ctrl_c_noted()


def request() -> None:
    """Remember a Ctrl-C that arrived between solves (a KeyboardInterrupt caught by a loop)."""
    _requested.set()


def clear() -> None:
    """Forget an earlier Ctrl-C (for callers that run several commands in one process)."""
    _requested.clear()
    _reported.clear()


def mark_reported() -> None:
    """The user has been told of the interrupt (so the exit path does not say it twice)."""
    _reported.set()


def reported() -> bool:
    return _reported.is_set()


def _note(signum: int, frame: FrameType | None) -> None:
    _requested.set()


def _watch(fd: int, solvers: tuple[cp_model.CpSolver, ...]) -> None:
    """Stop the searches when the wake-up pipe carries SIGINT; return when the pipe closes."""
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            _requested.set()
            for solver in solvers:
                solver.stop_search()


def solve(
    solver: cp_model.CpSolver,
    model: cp_model.CpModel,
    callback: cp_model.CpSolverSolutionCallback | None = None,
    *,
    beside: cp_model.CpSolver | None = None,
    then: Callable[[], None] | None = None,
) -> Any:
    """`solver.solve(model, callback)`, stopped early by Ctrl-C; the SIGINT handler is the same
    after. `beside`: a solver searching on another thread, stopped by Ctrl-C too; `then` runs
    once the solve has returned, with Ctrl-C still caught (waiting for that search)."""
    if requested():
        solver.parameters.max_time_in_seconds = 0.0  # Ctrl-C came before: no further search
    solvers = (solver,) if beside is None else (solver, beside)
    if threading.current_thread() is not threading.main_thread():
        return _solve_then(solver, model, callback, then)  # signals reach the main thread only
    solver.parameters.catch_sigint_signal = False
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        return _solve_then(solver, model, callback, then)  # Ctrl-C is ignored (nohup)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    watcher = threading.Thread(target=_watch, args=(read_fd, solvers), daemon=True)
    try:
        signal.signal(signal.SIGINT, _note)
        old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        watcher.start()
        try:
            return _solve_then(solver, model, callback, then)
        finally:
            signal.set_wakeup_fd(old_fd)
    finally:
        os.close(write_fd)  # the watcher reads end-of-file and returns
        if watcher.is_alive():
            watcher.join()
        os.close(read_fd)
        with contextlib.suppress(TypeError, ValueError):
            signal.signal(signal.SIGINT, previous or signal.default_int_handler)


def _solve_then(
    solver: cp_model.CpSolver,
    model: cp_model.CpModel,
    callback: cp_model.CpSolverSolutionCallback | None,
    then: Callable[[], None] | None,
) -> Any:
    status = solver.solve(model, callback)
    if then is not None:
        then()
    return status
