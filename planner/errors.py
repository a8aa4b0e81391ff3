"""The planner's exceptions: one root, one subclass per kind of failure a user can meet.

Normal outcomes (an infeasible problem, a time limit) are results with a status, not exceptions.
"""

from __future__ import annotations

import difflib
import gc
import re
import signal
import sys
from collections.abc import Iterable
from typing import Any


class PlannerError(Exception):
    """Root of every error the planner raises on purpose."""

    exit_code = 1


class InputError(PlannerError):
    """The user's input (a file, a name, an option) is invalid; the message says where and how to fix it."""

    exit_code = 2


class CatalogError(InputError):
    """A catalog file is malformed, or a name is not in the catalog."""


class InternalError(PlannerError):
    """A bug: a plan failed verification, or the solver model is invalid."""

    exit_code = 1


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _numbers(text: str) -> list[float]:
    return [float(x) for x in _NUMBER.findall(text)]


def _near(x: float, y: float) -> bool:
    return x == y or (x > 0 and y > 0 and max(x, y) / min(x, y) < 2)


def same_magnitude(name: str, choice: str) -> bool:
    """No number of `name` conflicts with one of `choice`: the numbers are paired one to one
    (each with the closest free one within a factor of two), and a conflict is a number left
    unpaired on both sides. So `eth-2.5g` is not a slip for `eth-25g` (a link ten times
    faster), nor `a100-40gb` for `a100-80gb`, nor `llama-3.1-8b` for `llama-3.1-70b`; but
    `llama-3-70b` may be `llama-3.1-70b`, and `rtx-3090-24gb` may be `rtx-3090`."""
    free = _numbers(choice)
    unpaired = 0
    for x in _numbers(name):
        near = [y for y in free if _near(x, y)]
        if near:
            free.remove(min(near, key=lambda y: abs(y - x)))
        else:
            unpaired += 1
    return not (unpaired and free)


def nearest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The closest valid names to `name`, best first (for "did you mean" hints); never one whose
    numbers differ from the name's by a factor of two or more (a size, a speed, a version)."""
    pool = [c for c in choices if same_magnitude(name, c)]
    close = difflib.get_close_matches(name, pool, n=n, cutoff=0.5)
    if not close:
        low = name.lower()
        close = [c for c in pool if low in c.lower() or c.lower() in low][:n]
    return close


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A "; did you mean `x`?" suffix, or an empty string when nothing is close."""
    close = nearest(name, choices)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"`{c}`" for c in close) + "?"


# Ctrl-C that surfaces as another error (see ctrl_c_in).
_ctrl_c_seen: list[bool] = []


def _on_ctrl_c(signum: int, frame: object) -> None:
    """Python's own SIGINT handler, which also remembers that Ctrl-C came."""
    _ctrl_c_seen.append(True)
    raise KeyboardInterrupt


def note_ctrl_c() -> bool:
    """For the `planner` command: put `_on_ctrl_c` in place of Python's default handler (never
    over an ignored Ctrl-C or a caller's own handler); whether it was put."""
    _ctrl_c_seen.clear()
    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False
        signal.signal(signal.SIGINT, _on_ctrl_c)
    except ValueError:  # not the main thread
        return False
    sys.unraisablehook = _quiet_ctrl_c
    return True


def _quiet_ctrl_c(unraisable: Any) -> None:
    """Python reports an error it cannot raise ("Exception ignored in ...", as when Ctrl-C lands
    in a module lock's clean-up while a library loads) and goes on: Ctrl-C noted there is
    kept (`ctrl_c_noted`) and not printed as a traceback; anything else is reported as ever."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def ctrl_c_noted() -> bool:
    """Whether Ctrl-C came since the command began (even where an error it raised was lost)."""
    return bool(_ctrl_c_seen)


def ctrl_c_in(error: BaseException) -> bool:
    """Whether `error` is Ctrl-C or was raised by it. A SIGINT that lands while compiled code
    runs Python surfaces as another error: `ImportError: initialization failed` caused by the
    KeyboardInterrupt while OR-Tools' solver core loads, or a pydantic `SchemaError` that only
    quotes it while a model class is built. So a Ctrl-C noted by the command's handler counts
    too."""
    if _ctrl_c_seen:
        return True
    seen: set[int] = set()
    at: BaseException | None = error
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return True
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return False


_gc_paused: list[bool] = []
_gc_freeze: list[bool] = []  # set for the `planner` process itself (not for in-process callers)


def pause_gc(whole_process: bool = False) -> None:
    """Pause the garbage collector while a command starts: its imports make hundreds of
    thousands of objects (modules, classes, functions) that live as long as the process, and
    collections that scan them cost about a tenth of a small solve. In the `planner` process
    itself (`whole_process`) resume_gc then freezes them (gc.freeze), so no later collection
    scans them either; a caller's process keeps its collector as it was. A collector already
    off stays as it is."""
    if whole_process:
        _gc_freeze[:] = [True]
    if gc.isenabled():
        gc.disable()
        _gc_paused.append(True)


def resume_gc() -> None:
    """Turn the collector back on if pause_gc turned it off."""
    if _gc_paused:
        _gc_paused.clear()
        if _gc_freeze:
            gc.freeze()
        gc.enable()
