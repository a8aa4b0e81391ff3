"""The linear program a CP-SAT model relaxes to (planner.model.relaxation builds it) and the
weak-duality bound any row multipliers give over it (Neumaier and Shcherbina 2004, "Safe bounds
in linear and mixed-integer linear programming"), shared by the relaxation and the tree search
over it (planner.model.relax_branch)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


@dataclass
class LinearProgram:
    """min c.x + offset over lb <= x <= ub and lo <= A x <= hi, A as (row, col, value)."""

    c: Floats
    offset: float
    lb: Floats
    ub: Floats
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    vals: list[float] = field(default_factory=list)
    kept: int = 0  # constraints kept as they are
    big_m: int = 0  # conditional constraints kept in big-M form
    off: int = 0  # conditional constraints whose condition is fixed false
    dropped: Counter[str] = field(default_factory=Counter)  # other constraint types, by type

    def add(self, cols: list[int], vals: list[float], lo: float, hi: float) -> None:
        r = len(self.lo)
        self.rows += [r] * len(cols)
        self.cols += cols
        self.vals += vals
        self.lo.append(lo)
        self.hi.append(hi)

    def activity(self, cols: list[int], vals: list[float]) -> tuple[float, float]:
        """Least and greatest a.x over the variables' bounds."""
        a = np.asarray(vals, dtype=float)
        lo, hi = self.lb[cols], self.ub[cols]
        return float(np.sum(np.minimum(a * lo, a * hi))), float(np.sum(np.maximum(a * lo, a * hi)))


def usable(lp: LinearProgram, y: Floats) -> Floats:
    """y with each multiplier whose row side is open taken as 0."""
    lo, hi = np.asarray(lp.lo), np.asarray(lp.hi)
    y = np.where((y > 0) & ~np.isfinite(lo), 0.0, y)
    return np.where((y < 0) & ~np.isfinite(hi), 0.0, y)


def reduced_costs(lp: LinearProgram, y: Floats) -> Floats:
    """c - A'y for the multipliers y as dual_bound reads them: min c.x over the relaxation is
    at least dual_bound(lp, y) + the sum over columns of d_j x_j less its least over the box,
    each term at least 0 (the algebra dual_bound rests on)."""
    y = usable(lp, y)
    rows, cols = np.asarray(lp.rows, dtype=np.int64), np.asarray(lp.cols, dtype=np.int64)
    ay = np.bincount(cols, weights=np.asarray(lp.vals) * y[rows], minlength=len(lp.c))
    return np.asarray(lp.c - ay, dtype=float)


def dual_bound(lp: LinearProgram, y: Floats) -> float:
    """min c.x + offset over the relaxation is at least this, for any row multipliers y
    (weak duality; a multiplier whose row side is open is taken as 0)."""
    y = usable(lp, y)
    lo, hi = np.asarray(lp.lo), np.asarray(lp.hi)
    lo_f, hi_f = np.where(np.isfinite(lo), lo, 0.0), np.where(np.isfinite(hi), hi, 0.0)
    rows_part = np.where(y > 0, y * lo_f, np.where(y < 0, y * hi_f, 0.0))
    d = reduced_costs(lp, y)
    box = np.where(d > 0, d * lp.lb, d * lp.ub)
    return float(np.sum(rows_part) + np.sum(box) + lp.offset)
