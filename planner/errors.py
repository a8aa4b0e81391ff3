"""The planner's exceptions: one root, one subclass per kind of failure a user can meet.

Normal outcomes (an infeasible problem, a time limit) are results with a status, not exceptions.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


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


def visible(text: str) -> str:
    """`text` as a terminal should show it: every character it would not draw as itself (a NUL,
    an escape sequence's ESC, a right-to-left override that reorders the rest of the line, a
    zero-width space) written as its code point, `\\u202e`, so a message quoting a hostile
    value shows what is wrong with it. Line breaks and tabs stay."""
    if text.isprintable():
        return text
    return "".join(
        c
        if c.isprintable() or c in "\n\t"
        else f"\\u{ord(c):04x}"
        if ord(c) <= 0xFFFF
        else f"\\U{ord(c):08x}"
        for c in text
    )


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
    """A "; did you mean `x`?" suffix, or an empty string when nothing is close (or the name
    is empty: every id is equally far from nothing)."""
    if not name.strip():
        return "; the name is empty"
    close = nearest(name, choices)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"`{c}`" for c in close) + "?"
