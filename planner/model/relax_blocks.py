"""A bound at or above the linear relaxation's: Lagrangian decomposition of the relaxation by
demand period, each period's part solved as an integer program.

Why the relaxation is weak on a profile of many demand levels: each level holds its own
fractions of a replica (0.31 of a 4-device replica, 0.7 of a 40-device one), and each costs
little alone; over 86 levels they add up. A period's own variables (replicas, sequences,
rented devices) meet only that period's rows and the shared variables (devices bought, the
fleet, reserved devices, hosts), so the relaxation splits into one block per period once the
shared variables are priced. The rows over shared variables alone (purchases in whole
baseboards, hosts for the fleet, the network gear) make one more block: the relaxation buys
16.59 H200 on boards of 4 and 8 and a fifth of a host.

The bound (Lagrangian decomposition, Guignard and Kim 1987, "Lagrangean decomposition: a
model yielding stronger Lagrangean bounds"): take row multipliers y (the LP's duals). A row
whose period columns are all of one period p goes to block p, with a copy x_j^p of each shared
column it reads; a row of shared columns alone goes to the shared block; a row reading two
periods is priced by its y_i.
Adding mu_jp (x_j^p - x_j) = 0 for every copy, with mu_jp = the sum over block p's rows of
y_i a_ij, and the priced rows' y_i (a_i.x - side_i) >= 0, gives for every integer point x of
the model (every variable of a CP-SAT model is an integer)

    c.x >= sum over priced rows of y_i side_i
           + sum over blocks p of min { (c - A_D'y)_own . x_own + mu_p . x_copies : x integer in
           the box, block p's rows hold }
           + min { (c - A_D'y - sum_p mu_p) . x_shared : x integer in the box, the shared
           block's rows hold }

(without rows of shared columns alone, the last term is each shared column's least d_j x_j
over its box, d = c - A'y the reduced costs of relax_lp). Each block's minimum is taken as the larger
of two lower bounds on it: the weak-duality bound of its own rows with the same y (which makes
the sum exactly relax_lp.dual_bound, so this bound is never below the relaxation's), and
CP-SAT's bound on the block as an integer program. CP-SAT needs integer coefficients: the
block's objective is scaled and rounded down, over columns shifted to start at 0, which only
lowers it; a row with a fractional coefficient is left out of the block, which only enlarges
it. Both keep the bound valid for any y and whatever CP-SAT proves in the time it is given.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from planner.model.ortools_cp import cp_model
from planner.model.relax_lp import Floats, LinearProgram, reduced_costs, usable

SCALE_ROOM = 2.0**52  # the block objective's largest activity once scaled (CP-SAT: int64)
INT_ROOM = 2**62  # an open side of a row, in CP-SAT's integers
PRICED = -1  # a row priced by its multiplier (it reads two periods' columns)
SHARED_ROWS = -2  # the block of the rows that read shared columns alone


@dataclass(frozen=True)
class BlockBound:
    """The decomposition's bound (minimizing the LP's objective) and how it was reached."""

    bound: float
    lp_bound: float  # relax_lp.dual_bound with the same multipliers
    blocks: int
    proved: int  # blocks whose integer program CP-SAT solved to optimality
    seconds: float


def _rows_part(lp: LinearProgram, y: Floats) -> Floats:
    """Per row, y_i times the side its sign makes binding (0 for an open side)."""
    lo, hi = np.asarray(lp.lo), np.asarray(lp.hi)
    lo_f, hi_f = np.where(np.isfinite(lo), lo, 0.0), np.where(np.isfinite(hi), hi, 0.0)
    return np.where(y > 0, y * lo_f, np.where(y < 0, y * hi_f, 0.0))


def _box(lp: LinearProgram, d: Floats) -> Floats:
    """Per column, the least of d_j x_j over its bounds."""
    return np.where(d > 0, d * lp.lb, d * lp.ub)


@dataclass
class _Rows:
    """The LP's matrix by row: entries of row i are order[start[i]:start[i + 1]]."""

    order: np.ndarray
    start: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    def of(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        k = self.order[self.start[i] : self.start[i + 1]]
        return self.cols[k], self.vals[k]


def _by_row(lp: LinearProgram) -> _Rows:
    rows = np.asarray(lp.rows, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    start = np.searchsorted(rows[order], np.arange(len(lp.lo) + 1))
    return _Rows(order, start, np.asarray(lp.cols, dtype=np.int64), np.asarray(lp.vals))


def _block_minimum(
    lp: LinearProgram, rows: _Rows, mine: list[int], objective: dict[int, float], seconds: float
) -> tuple[float | None, bool]:
    """CP-SAT's lower bound on min objective.x over the integers of the box that meet the rows
    `mine` (None when it proved none in `seconds`), and whether it is the proved minimum."""
    cols = sorted(objective)
    at = {j: k for k, j in enumerate(cols)}
    m = cp_model.CpModel()
    lb = [math.ceil(lp.lb[j] - 1e-9) for j in cols]
    span = [max(0, math.floor(lp.ub[j] + 1e-9) - b) for j, b in zip(cols, lb, strict=True)]
    z = [m.new_int_var(0, w, "") for w in span]
    for i in mine:
        cs, vs = rows.of(i)
        if np.any(np.abs(vs - np.round(vs)) > 1e-9):
            continue  # left out: the block only grows
        a = [round(v) for v in vs]
        shift = sum(ai * lb[at[int(j)]] for ai, j in zip(a, cs, strict=True))
        lo, hi = lp.lo[i], lp.hi[i]
        low = math.ceil(lo - 1e-9) - shift if math.isfinite(lo) else -INT_ROOM
        high = math.floor(hi + 1e-9) - shift if math.isfinite(hi) else INT_ROOM
        m.add_linear_constraint(
            cp_model.LinearExpr.weighted_sum([z[at[int(j)]] for j in cs], a), low, high
        )
    d = np.asarray([objective[j] for j in cols])
    reach = float(np.sum(np.abs(d) * np.asarray(span, dtype=float)))
    scale = SCALE_ROOM / reach if reach > 0 else 1.0
    coeffs = [math.floor(c * scale) for c in d]
    m.minimize(cp_model.LinearExpr.weighted_sum(z, coeffs))
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.max_time_in_seconds = max(0.01, seconds)
    s.parameters.linearization_level = 2
    status = s.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, False
    offset = float(np.sum(d * np.asarray(lb, dtype=float)))  # the shift back to x
    return s.best_objective_bound / scale + offset, status == cp_model.OPTIMAL


def block_bound(
    lp: LinearProgram, y: Floats, label: np.ndarray, *, time_limit: float
) -> BlockBound:
    """The decomposition's bound on min c.x + offset over the integer points of `lp` for row
    multipliers `y`, `label` giving each column's block (its demand period) or a negative
    value for a shared column (see the module's notes). The blocks share `time_limit`."""
    began = time.perf_counter()
    y = usable(lp, y)
    rows = _by_row(lp)
    block = _row_blocks(rows, label, len(lp.lo))
    d_priced = reduced_costs(lp, np.where(block == PRICED, y, 0.0))  # c - A_D'y_D
    # The shared block's own objective: c less what every row outside it prices.
    d_shared = reduced_costs(lp, np.where(block == SHARED_ROWS, 0.0, y))
    d_all = reduced_costs(lp, y)
    part, box = _rows_part(lp, y), _box(lp, d_all)
    base = float(part[block == PRICED].sum() + lp.offset)
    blocks = sorted({int(b) for b in block if b != PRICED})  # SHARED_ROWS first
    mine: dict[int, list[int]] = {b: [] for b in blocks}
    for r in np.flatnonzero(block != PRICED).tolist():
        mine[int(block[r])].append(r)
    total, proved = base, 0
    lp_total = base
    for k, b in enumerate(blocks):
        own = np.flatnonzero(np.asarray(label) < 0 if b == SHARED_ROWS else np.asarray(label) == b)
        if b == SHARED_ROWS:
            objective = {int(j): float(d_shared[j]) for j in own}
        else:
            objective = {int(j): float(d_priced[j]) for j in own}
            for i in mine[b]:  # copies of shared columns, priced at mu_jp
                cs, vs = rows.of(i)
                for j, a in zip(cs, vs, strict=True):
                    if label[j] < 0:
                        objective[int(j)] = objective.get(int(j), 0.0) + float(y[i] * a)
        lp_part = float(part[np.asarray(mine[b], dtype=np.int64)].sum() + box[own].sum())
        left = time_limit - (time.perf_counter() - began)
        ip, done = _block_minimum(lp, rows, mine[b], objective, left / (len(blocks) - k))
        proved += done
        total += lp_part if ip is None else max(ip, lp_part)
        lp_total += lp_part
    if SHARED_ROWS not in mine:  # no row of shared columns alone: theirs is the box's least
        shared_box = float(box[np.asarray(label) < 0].sum())
        total, lp_total = total + shared_box, lp_total + shared_box
    return BlockBound(total, lp_total, len(blocks), proved, time.perf_counter() - began)


def _row_blocks(rows: _Rows, label: np.ndarray, n_rows: int) -> np.ndarray:
    """Per row, its block: the one demand period whose columns it reads (shared columns
    aside), SHARED_ROWS when it reads shared columns alone, else PRICED."""
    block = np.full(n_rows, PRICED, dtype=np.int64)
    for i in range(n_rows):
        cs, _ = rows.of(i)
        if not len(cs):
            continue
        periods_read = {int(p) for p in label[cs] if p >= 0}
        if len(periods_read) == 1:
            block[i] = periods_read.pop()
        elif not periods_read:
            block[i] = SHARED_ROWS
    return block
