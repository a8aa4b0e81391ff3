"""Progress of a long solve for a person at a terminal: the best objective found so far, the
bound and the gap, on one line of stderr that is rewritten in place and erased when the solve
ends.

Off unless the command line turns it on (`show_on`), which it does only when stderr is a
terminal, so the bytes written to pipes and files never change. Nothing is shown for a solve
that ends within AFTER_S seconds. CP-SAT reports new solutions through a solution callback and
new bounds through `best_bound_callback`; a ticker thread rewrites the line so the seconds move
while the search proves.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from planner.model.ortools_cp import cp_model

AFTER_S = 1.0  # solves shorter than this show nothing
EVERY_S = 0.25  # the line is rewritten at most this often
_stream: list[TextIO | None] = [None]

Show = Callable[[float], str]  # the solver's objective value -> text in the goal's unit


def show_on(stream: TextIO | None) -> None:
    """Write progress to `stream` (a terminal), or nowhere (None)."""
    _stream[0] = stream


def line(
    label: str, best: float | None, bound: float | None, seconds: float, show: Show | None
) -> str:
    """The progress line: what is searched, the best value, the bound and the relative gap
    (without `show`, for a search whose objective means nothing to the user: the time only)."""
    parts = [f"{label}: {seconds:.0f} s"]
    if show is None:
        return parts[0]
    if best is not None:
        parts.append(f"best {show(best)}")
    if bound is not None and math.isfinite(bound):
        parts.append(f"bound {show(bound)}")
    if best is not None and bound is not None and math.isfinite(bound):
        gap = abs(best - bound) / max(abs(best), 1e-9)
        parts.append(f"gap {gap:.1%}")
    elif best is None:
        parts.append("no plan yet")
    return ", ".join(parts)


class Watch(cp_model.CpSolverSolutionCallback):
    """The progress line of one search; a search run beside it reports here too (`beside`)."""

    def __init__(self, stream: TextIO, label: str, show: Show | None, minimize: bool) -> None:
        super().__init__()
        self.stream, self.label, self.show = stream, label, show
        self.minimize = minimize
        self.start = time.perf_counter()
        self.best: float | None = None
        self.bound: float | None = None
        self.last = 0.0
        self.shown = False
        self.lock = threading.Lock()
        self.done = threading.Event()

    def on_solution_callback(self) -> None:
        self.offer(self.objective_value, self.best_objective_bound)

    def on_bound(self, bound: float) -> None:
        self.offer(None, bound)

    def offer(self, best: float | None, bound: float | None) -> None:
        """A plan's objective and a bound from either search: the line keeps the better plan
        and the tighter bound."""
        with self.lock:
            low, high = (min, max) if self.minimize else (max, min)
            if best is not None:
                self.best = best if self.best is None else low(best, self.best)
            if bound is not None:
                self.bound = bound if self.bound is None else high(bound, self.bound)
        self.write()

    def write(self, force: bool = False) -> None:
        now = time.perf_counter()
        elapsed = now - self.start
        with self.lock:
            if self.done.is_set() or elapsed < AFTER_S or (now - self.last < EVERY_S and not force):
                return
            self.last = now
            text = line(self.label, self.best, self.bound, elapsed, self.show)
            self.stream.write(f"\r{text}\x1b[K")
            self.stream.flush()
            self.shown = True

    def tick(self) -> None:
        while not self.done.wait(EVERY_S):
            self.write()

    def close(self) -> None:
        with self.lock:
            self.done.set()
            if self.shown:
                self.stream.write("\r\x1b[K")  # the line goes; the result is printed after
                self.stream.flush()


@contextlib.contextmanager
def watch(
    solver: cp_model.CpSolver, label: str, show: Show | None, minimize: bool = True
) -> Iterator[Watch | None]:
    """The solution callback to pass to the solve (None when progress is off); `minimize`:
    the objective's sense, for keeping the better of two searches' plans and bounds."""
    stream = _stream[0]
    if stream is None:
        yield None
        return
    w = Watch(stream, label, show, minimize)
    solver.best_bound_callback = w.on_bound
    ticker = threading.Thread(target=w.tick, daemon=True)
    ticker.start()
    try:
        yield w
    finally:
        w.close()
        ticker.join()


class _Beside(cp_model.CpSolverSolutionCallback):
    """A search run beside a watched one: its plans go to that search's progress line."""

    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch

    def on_solution_callback(self) -> None:
        self.watch.offer(self.objective_value, self.best_objective_bound)


def beside(watch: Watch | None) -> cp_model.CpSolverSolutionCallback | None:
    """The callback of a search run beside the one `watch` shows (None when progress is off)."""
    return None if watch is None else _Beside(watch)
