"""A tighter bound than the linear relaxation's own: branch and bound over the relaxation
(planner.model.relaxation), branching on the model's integer variables, each node's bound a
weak-duality bound recomputed from its LP's row duals.

Why the relaxation alone is weak on large models: what it leaves out is the rounding of shared,
stepped purchases. On the largest generated tier's serving problem the relaxation buys 35.82
GB200 NVL72 racks (sold whole, 72 devices each) and 144.12 Gaudi 3 baseboards of 8; a plan buys
36 and 145, or moves the demand to other devices. Each such rounding costs up to a whole rack,
and no cut on one workload's covering sees it (the per-workload integer optimum, solved
exactly with the other rows' duals as prices, was within 0.1 % of the relaxation's there).
Branching on the variable whose rounding costs most closes it where it arises.

Why the bound is valid (Land and Doig 1960): every integer point of the model lies in the box
of exactly one open leaf of the tree (a node's children split its box at x_j <= floor(v) and
x_j >= ceil(v), which loses no integer point), so the least bound over the open leaves is at or
below every plan's value, and a leaf whose bound reaches the incumbent's value holds no better
plan (the objective is an integer, planner.model.scale). Each node's bound is the
Neumaier-Shcherbina weak-duality bound over that node's box (relaxation.dual_bound): it holds
for any row multipliers, whatever tolerances the LP solver used; a node whose LP is not solved
to optimality keeps its parent's bound and is not split further. Branching only shrinks boxes,
so a child's bound never has to be below its parent's: the node keeps the larger of the two.

The LP stays loaded in GLOP between nodes (only variable bounds change), so each node is a
warm dual-simplex re-solve: on that serving problem 0.3-2.2 s against 7.2 s for the root.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.model.ortools_cp import lp_solver
from planner.model.relax_lp import Floats, LinearProgram, dual_bound, reduced_costs

# A bound is a float sum over tens of thousands of terms of up to 1e8 (USD): it is taken this
# much lower (relative) before it closes a node or is reported, so float error never proves a
# plan optimal that is not.
SAFETY = 1e-9
FRACTIONAL = 1e-6  # a value this close to an integer is taken as integral
# GLOP's parameters: the dual simplex without the presolve (LpTree), and the primal simplex
# for an LP on which the dual ends ABNORMAL.
DUAL = "use_dual_simplex: true, use_preprocessing: false"
PRIMAL = "use_dual_simplex: false, use_preprocessing: false"
Box = dict[int, tuple[float, float]]  # column -> (lb, ub) where a node differs from the root


@dataclass(order=True)
class _Node:
    bound: float  # the node's valid bound (the heap pops the least first)
    order: int  # creation order, to break ties deterministically
    box: Box = field(compare=False)
    final: bool = field(default=False, compare=False)  # its LP failed: not split further


@dataclass(frozen=True)
class TreeBound:
    """What the tree proved: a bound at the model's integer scale and how it was reached."""

    bound: float  # no plan's integer objective is below it (minimizing)
    nodes: int  # LP re-solves
    open: int  # leaves still open when it stopped
    proved: bool  # every leaf closed by the incumbent: the incumbent is optimal
    seconds: float


class LpTree:
    """The relaxation loaded in GLOP, re-solved under changed variable bounds."""

    def __init__(self, lp: LinearProgram) -> None:
        pywraplp = lp_solver()
        self.lp = lp
        self.optimal, self.infeasible = pywraplp.Solver.OPTIMAL, pywraplp.Solver.INFEASIBLE
        self._load()
        self.box: Box = {}  # bounds now set away from the root's
        self.scratch = pywraplp.MPSolverParameters()  # a solve that forgets the last basis
        self.scratch.SetIntegerParam(
            pywraplp.MPSolverParameters.INCREMENTALITY,
            pywraplp.MPSolverParameters.INCREMENTALITY_OFF,
        )
        self._matrix = (
            np.asarray(lp.rows, dtype=np.int64),
            np.asarray(lp.cols, dtype=np.int64),
            np.asarray(lp.vals, dtype=float),
        )

    def _load(self) -> None:
        """The LP loaded in a new GLOP solver, every variable at its root bounds."""
        lp = self.lp
        s = lp_solver().Solver.CreateSolver("GLOP")
        # Dual simplex without GLOP's presolve: with its presolve on, the week of hourly demand
        # in 34 levels (benchmarks/bench_week.py) ends ABNORMAL with either simplex, and once
        # ended so a re-solve does not recover; without it that LP solves in 0.4 s. The
        # re-solves under changed bounds start from the last basis, which a presolve would
        # rebuild each time anyway.
        s.SetSolverSpecificParametersAsString(DUAL)
        inf = s.infinity()
        self.xs = [s.NumVar(float(a), float(b), "") for a, b in zip(lp.lb, lp.ub, strict=True)]
        self.rows = [
            s.RowConstraint(lo if math.isfinite(lo) else -inf, hi if math.isfinite(hi) else inf)
            for lo, hi in zip(lp.lo, lp.hi, strict=True)
        ]
        for r, j, a in zip(lp.rows, lp.cols, lp.vals, strict=True):
            self.rows[r].SetCoefficient(self.xs[j], a)
        obj = s.Objective()
        for col in np.flatnonzero(lp.c):
            obj.SetCoefficient(self.xs[col], float(lp.c[col]))
        obj.SetMinimization()
        self.s = s
        self.box = {}
        self.warm = False  # whether the loaded LP was solved before: a basis to start from

    def _set(self, box: Box) -> None:
        """Every variable at its root bounds except those in `box`."""
        for j in set(self.box) - set(box):
            self.xs[j].SetBounds(float(self.lp.lb[j]), float(self.lp.ub[j]))
        for j, (lo, hi) in box.items():
            self.xs[j].SetBounds(lo, hi)
        self.box = dict(box)

    def empty(self, box: Box) -> bool:
        """Whether some row cannot hold over `box`: its greatest activity over the box is below
        its lower side, or its least above its upper side (interval arithmetic: a proof that
        the box holds no point of the relaxation, hence no plan)."""
        lb, ub = self.lp.lb.copy(), self.lp.ub.copy()
        for j, (lo, hi) in box.items():
            lb[j], ub[j] = lo, hi
        rows, cols, a = self._matrix
        n = len(self.lp.lo)
        most = np.bincount(rows, weights=np.maximum(a * lb[cols], a * ub[cols]), minlength=n)
        least = np.bincount(rows, weights=np.minimum(a * lb[cols], a * ub[cols]), minlength=n)
        tol = 1e-6 * (1.0 + np.abs(most) + np.abs(least))
        lo_side, hi_side = np.asarray(self.lp.lo), np.asarray(self.lp.hi)
        return bool(np.any(most < lo_side - tol) or np.any(least > hi_side + tol))

    def solve(self, box: Box, seconds: float) -> tuple[float, Floats, Floats]:
        """The weak-duality bound over `box`, the LP's point and the reduced costs the bound
        was read with (+inf when the box is proved empty; -inf when the LP is not solved to
        optimality; the arrays then empty)."""
        if self.empty(box):
            return math.inf, np.zeros(0), np.zeros(0)
        ends = time.perf_counter() + seconds
        self._set(box)
        self.s.SetTimeLimit(max(10, int(seconds * 1000)))
        warm, self.warm = self.warm, True
        status = self.s.Solve()
        if status not in (self.optimal, self.infeasible) and warm:
            # GLOP's warm start can end ABNORMAL (small-serve: 2 of 64 nodes); once more from
            # scratch it solves. (The first solve of a loaded LP is from scratch already.)
            status = self.s.Solve(self.scratch)
        if status not in (self.optimal, self.infeasible):
            # The dual simplex can end ABNORMAL on the LP itself, from scratch too: the largest
            # generated tier's serving problems (coefficients from 1 to 8e7) did with or
            # without the presolve, and their root LP solves with the primal simplex in
            # 1.2-1.9 s (2026-11-29). A solver that ended so does not recover: the LP is loaded
            # afresh and solved with the primal simplex; the next node's warm re-solve is the
            # dual's again (on that root's children 0.07 s each).
            self._load()
            self._set(box)
            self.s.SetTimeLimit(max(10, int((ends - time.perf_counter()) * 1000)))
            self.s.SetSolverSpecificParametersAsString(PRIMAL)
            status = self.s.Solve()
            self.s.SetSolverSpecificParametersAsString(DUAL)
            self.warm = True
        if status != self.optimal:
            return -math.inf, np.zeros(0), np.zeros(0)
        y = np.asarray([r.dual_value() for r in self.rows], dtype=float)
        x = np.asarray([v.solution_value() for v in self.xs], dtype=float)
        bound, d = self.bound_at(box, y)
        return bound, x, d

    def bound_at(self, box: Box, y: Floats) -> tuple[float, Floats]:
        """Weak duality over `box` for multipliers y, and the reduced costs it was read with
        (either sign convention: any multipliers give a valid bound, so the better reading is
        kept)."""
        lb, ub = self.lp.lb.copy(), self.lp.ub.copy()
        for j, (lo, hi) in box.items():
            lb[j], ub[j] = lo, hi
        node = dataclasses.replace(self.lp, lb=lb, ub=ub)
        up, down = dual_bound(node, y), dual_bound(node, -y)
        return (up, reduced_costs(node, y)) if up >= down else (down, reduced_costs(node, -y))


def branch_column(lp: LinearProgram, x: Floats) -> int | None:
    """The fractional variable whose rounding is dearest: |cost| x the distance to the nearer
    integer (a rack's price times the share of a rack left over); without a costed one, the
    most fractional variable (a host choice, a count of sequences); None when the point is
    integral (every variable of the model is an integer)."""
    if not len(x):
        return None
    frac = np.abs(x - np.round(x))
    frac = np.where(frac > FRACTIONAL, frac, 0.0)
    score = np.abs(lp.c) * frac
    j = int(np.argmax(score))
    if score[j] > 0:
        return j
    j = int(np.argmax(frac))
    return j if frac[j] > 0 else None


def by_reduced_cost(lp: LinearProgram, box: Box, d: Floats, bound: float, incumbent: float) -> Box:
    """`box` narrowed to the points that could beat the incumbent (Dantzig, Fulkerson and
    Johnson 1954's reduced-cost fixing): over the box, the objective is at least `bound` plus
    d_j x_j less its least over the box, for every column j at once (relax_lp.reduced_costs),
    so a point worth at most incumbent - 1 (the objective is an integer) has
    d_j (x_j - lb_j) <= incumbent - 1 - bound where d_j > 0, and |d_j| (ub_j - x_j) <= the
    same where d_j < 0. Integer columns round the new side inwards."""
    if not len(d) or not math.isfinite(bound):
        return box
    lb, ub = lp.lb.copy(), lp.ub.copy()
    for k, (lo, hi) in box.items():
        lb[k], ub[k] = lo, hi
    slack = incumbent - 1 - (bound - SAFETY * abs(bound))  # the bound taken low: a wider box
    if slack < 0:
        return box
    reach = np.floor(slack / np.maximum(np.abs(d), 1e-300) + 1e-6)
    new_ub = np.where(d > 0, np.minimum(ub, lb + reach), ub)
    new_lb = np.where(d < 0, np.maximum(lb, ub - reach), lb)
    out = dict(box)
    for col in np.flatnonzero((new_ub < ub) | (new_lb > lb)):
        out[int(col)] = (float(new_lb[col]), float(new_ub[col]))
    return out


def _children(node: _Node, j: int, v: float, lp: LinearProgram) -> list[dict[int, Any]]:
    """The two boxes x_j <= floor(v) and x_j >= ceil(v) inside the node's box."""
    lo, hi = node.box.get(j, (float(lp.lb[j]), float(lp.ub[j])))
    down, up = float(math.floor(v)), float(math.ceil(v))
    out = []
    if down >= lo:
        out.append(node.box | {j: (lo, down)})
    if up <= hi:
        out.append(node.box | {j: (up, hi)})
    return out


def tree_bound(
    tree: LpTree,
    root_bound: float,
    root_x: Floats,
    *,
    incumbent: float | None,
    time_limit: float,
    root_d: Floats | None = None,
) -> TreeBound:
    """Best-first branch and bound from the solved root (its bound and point) for `time_limit`
    seconds: the least bound over the open leaves, or the incumbent's value when every leaf is
    closed by it (see the module's notes). Minimizing, at the model's integer scale."""
    began = time.perf_counter()
    ends = began + time_limit
    lp = tree.lp
    made = nodes = 0

    def closed(b: float) -> bool:  # no integer value below the incumbent's in the node
        return incumbent is not None and math.ceil(b - SAFETY * abs(b)) >= incumbent

    box: Box = {}
    if incumbent is not None and root_d is not None:
        box = by_reduced_cost(lp, box, root_d, root_bound, incumbent)
    open_ = [] if closed(root_bound) else [_Node(root_bound, 0, box)]
    points = {0: root_x}

    while open_ and time.perf_counter() < ends:
        node = heapq.heappop(open_)
        x = points.pop(node.order)
        j = None if node.final else branch_column(lp, x)
        if j is None:  # integral or unsplittable: it stays a leaf (its bound holds)
            heapq.heappush(open_, node)
            points[node.order] = x
            break
        for box in _children(node, j, float(x[j]), lp):
            nodes += 1
            b, cx, d = tree.solve(box, ends - time.perf_counter())
            made += 1
            if b == math.inf:
                continue  # no plan in that box
            if incumbent is not None:
                box = by_reduced_cost(lp, box, d, b, incumbent)
            child = _Node(max(b, node.bound), made, box, final=b == -math.inf)
            if not closed(child.bound):
                heapq.heappush(open_, child)
                points[made] = cx
    proved = not open_ and incumbent is not None
    if open_:
        bound = open_[0].bound - SAFETY * abs(open_[0].bound)
    else:  # every leaf closed by the incumbent, or (without one) empty: no plan at all
        bound = incumbent if incumbent is not None else math.inf
    return TreeBound(bound, nodes, len(open_), proved, time.perf_counter() - began)


def tighter_bound(found: Any, incumbent: float | None, time_limit: float) -> float:
    """The tighter of the relaxation's bound and the tree's from its solved root (`found`:
    relaxation.Support), in the objective's sense as CP-SAT reports it (`incumbent` too: the
    best plan's raw objective, or None), at the model's integer scale."""
    got = tree_search(found, incumbent, time_limit)
    if got is None:
        return float(found.raw_bound)
    if found.sign > 0:
        return max(float(found.raw_bound), got.bound)
    return min(float(found.raw_bound), got.bound)


def tree_search(found: Any, incumbent: float | None, time_limit: float) -> TreeBound | None:
    """The tree's result from a relaxation's solved root (`found`), its bound in the
    objective's sense as CP-SAT reports it; None when `found` kept no LP to go on from."""
    if found.tree is None or found.x is None:
        return None
    sign = found.sign  # the LP minimizes sign x the objective
    got = tree_bound(
        found.tree,
        sign * found.raw_bound,
        found.x,
        incumbent=None if incumbent is None else sign * incumbent,
        time_limit=time_limit,
        root_d=found.d,
    )
    return dataclasses.replace(got, bound=sign * got.bound)
