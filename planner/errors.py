"""The planner's exceptions: one root, one subclass per kind of failure a user can meet.

Normal outcomes (an infeasible problem, a time limit) are results with a status, not exceptions.
"""

from __future__ import annotations

import difflib
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


def nearest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The closest valid names to `name`, best first (for "did you mean" hints)."""
    pool = list(choices)
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
