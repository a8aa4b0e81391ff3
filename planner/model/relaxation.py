"""A bound on the model's optimum from its linear relaxation: the CP-SAT model the planner
solves, read back from its proto with every variable continuous, solved as a linear program.
The relaxation's optimum also says where to search first (`support`: the designs it uses).

What is kept (each step only enlarges the set of feasible points, so the LP optimum is at or
below the integer optimum for a minimized goal, at or above it for a maximized one):

- every variable continuous between its domain's least and greatest value (holes dropped);
- every linear constraint between its domain's least and greatest value;
- a linear constraint whose enforcement literals are all fixed true (the named constraint
  families, switched on by `PlannerModel.pose`) as it is; one with free enforcement literals
  as its big-M form (Glover 1975): with s = the number of those literals that are false,
  a.x >= lo - (lo - min a.x) s and a.x <= hi + (max a.x - hi) s, the least and greatest
  activity taken over the variables' bounds, which is the constraint when s = 0 and no
  restriction when s >= 1; one with a literal fixed false is dropped (it never applies);
- `bool_or`, `at_most_one` and `exactly_one` as sums of literals (a negation not(x) as 1 - x),
  conditional ones as linear constraints are;
- an unconditional `lin_max` (target = max of expressions) as target >= each expression;
- every other constraint dropped (the planner's model has none today; they are counted).

The bound is not the LP solver's reported optimum but a weak-duality bound recomputed from its
row duals y (Neumaier and Shcherbina 2004, "Safe bounds in linear and mixed-integer linear
programming"): for any y, c.x >= sum_i min(y_i lo_i, y_i hi_i) + sum_j min over the box of
(c - A'y)_j x_j on every point of the relaxation, so the bound holds whatever tolerances the
solver used, and a solve stopped early still yields a (weaker) valid bound.

What it bounds: the model's integer objective, in which costs are rounded up and capacities
down (planner.model.scale). A plan's float cost differs from the model's value of its own
solution by less than one unit per variable (the `rounding` a Solution reports), so a plan's
verified cost is at least this bound less that rounding.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from planner.estimator.hosts import purchase_unit
from planner.model import by_period
from planner.model.cpsat import PlannerModel
from planner.model.ortools_cp import linear_solver
from planner.model.relax_blocks import BlockBound, block_bound
from planner.model.relax_branch import LpTree
from planner.model.relax_lp import Floats, LinearProgram, dual_bound
from planner.model.tables import Tables

if TYPE_CHECKING:
    from ortools.linear_solver.python import model_builder_helper as mbh

INT_INF = 2**63 - 1  # CP-SAT's stand-in for an open side of a domain
# Seconds reading the CP-SAT model back as a linear program takes per constraint
# (linear_program): 1.0-1.2 s for 31,790-44,462 constraints (the largest generated tier's
# serving problems, a week in 34 demand levels) and 0.5 s for 15,730 (the week in 12), measured
# on a busy 2-core machine; a third above, to be safe. (A cost per replica variable misjudged
# shapes: it put the week in 34 levels at 9.8 s, where building and reading it take 1.8 s.)
LP_S_PER_CONSTRAINT = 4e-5
CONSTRAINT_KINDS = (
    "linear",
    "lin_max",
    "bool_or",
    "bool_and",
    "at_most_one",
    "exactly_one",
    "bool_xor",
    "int_prod",
    "int_div",
    "int_mod",
    "element",
    "table",
    "automaton",
    "inverse",
    "reservoir",
    "interval",
    "no_overlap",
    "no_overlap_2d",
    "cumulative",
    "circuit",
    "routes",
    "all_diff",
)


@dataclass(frozen=True)
class Relaxation:
    """The bound, in the goal's unit and at the model's integer scale, and how it was found."""

    bound: float  # in the goal's unit (USD for min_cost): a lower bound when minimizing
    raw: float  # the same at the model's integer scale
    solver_objective: float | None  # what the LP solver reported (raw), for comparison
    status: str  # the LP solver's status
    variables: int
    rows: int
    kept: int
    big_m: int
    off: int
    dropped: dict[str, int]
    build_seconds: float  # the CP-SAT model and its conversion
    solve_seconds: float
    # The decomposition by demand period (planner.model.relax_blocks), when asked: its bound
    # in the goal's unit (never looser than `bound`), and how it was reached.
    blocks: BlockBound | None = None
    block_bound: float | None = None


def _last(values: Any) -> int:
    """The last item of a proto's repeated field (its containers read index -1 as 0)."""
    return int(values[len(values) - 1])


def _side(v: int) -> float:
    return math.inf if v >= INT_INF else (-math.inf if v <= -INT_INF else float(v))


def _literal(ref: int, lb: Floats, ub: Floats) -> bool | None:
    """A literal's fixed value, or None when it is free (a negative ref is a negation)."""
    var = ref if ref >= 0 else -ref - 1
    if lb[var] == ub[var]:
        return bool(lb[var]) if ref >= 0 else not bool(lb[var])
    return None


def _flat(vars_: Any, coeffs: Any) -> tuple[list[int], list[float]]:
    """Variable indices and coefficients, a negative ref (-x) folded into its coefficient."""
    cols, vals = [], []
    for v, a in zip(vars_, coeffs, strict=True):
        cols.append(v if v >= 0 else -v - 1)
        vals.append(float(a) if v >= 0 else -float(a))
    return cols, vals


def _tighten(lp: LinearProgram, constraints: list[Any]) -> None:
    """Unconditional one-variable linear constraints (such as `literal == 1`) tighten that
    variable's bounds, so literals they fix read as fixed."""
    for ct in constraints:
        if ct.has_linear() and not len(ct.enforcement_literal) and len(ct.linear.vars) == 1:
            (j,), (a,) = _flat(ct.linear.vars, ct.linear.coeffs)
            lo, hi = _side(ct.linear.domain[0]), _side(_last(ct.linear.domain))
            if a < 0:
                lo, hi = -hi, -lo
                a = -a
            if math.isfinite(lo):
                lp.lb[j] = max(lp.lb[j], math.ceil(lo / a - 1e-9))
            if math.isfinite(hi):
                lp.ub[j] = min(lp.ub[j], math.floor(hi / a + 1e-9))


def _add_linear(
    lp: LinearProgram, cols: list[int], vals: list[float], lo: float, hi: float, enforced: Any
) -> None:
    """lo <= a.x <= hi under the enforcement literals `enforced`: as it is, in big-M form, or
    not at all (see the module's notes)."""
    fixed = [_literal(r, lp.lb, lp.ub) for r in enforced]
    if False in fixed:
        lp.off += 1
        return
    free = [r for r, f in zip(enforced, fixed, strict=True) if f is None]
    if not free:
        lp.kept += 1
        lp.add(cols, vals, lo, hi)
        return
    lp.big_m += 1
    least, most = lp.activity(cols, vals)
    # s = sum over free literals of (1 - l): 1 - x for a literal x, x for a negation not(x).
    s_cols = [r if r >= 0 else -r - 1 for r in free]
    s_sign = [-1.0 if r >= 0 else 1.0 for r in free]
    s_const = float(sum(1 for r in free if r >= 0))
    if math.isfinite(lo) and math.isfinite(least) and least < lo:
        m = lo - least  # a.x + m s >= lo
        lp.add(cols + s_cols, vals + [m * g for g in s_sign], lo - m * s_const, math.inf)
    if math.isfinite(hi) and math.isfinite(most) and most > hi:
        m = most - hi  # a.x - m s <= hi
        lp.add(cols + s_cols, vals + [-m * g for g in s_sign], -math.inf, hi + m * s_const)


def _clause(literals: Any, lo: float, hi: float) -> tuple[list[int], list[float], float, float]:
    """lo <= (number of true literals) <= hi as a linear row: a negation not(x) counts 1 - x."""
    cols = [r if r >= 0 else -r - 1 for r in literals]
    vals = [1.0 if r >= 0 else -1.0 for r in literals]
    negated = float(sum(1 for r in literals if r < 0))
    return cols, vals, lo - negated, hi - negated


def _add(lp: LinearProgram, ct: Any) -> None:
    """One CP-SAT constraint into the relaxation (see the module's notes)."""
    enforced = list(ct.enforcement_literal)
    if ct.has_linear():
        cols, vals = _flat(ct.linear.vars, ct.linear.coeffs)
        lo, hi = _side(ct.linear.domain[0]), _side(_last(ct.linear.domain))
        _add_linear(lp, cols, vals, lo, hi, enforced)
    elif ct.has_bool_or():
        _add_linear(lp, *_clause(ct.bool_or.literals, 1, math.inf), enforced)
    elif ct.has_at_most_one():
        _add_linear(lp, *_clause(ct.at_most_one.literals, -math.inf, 1), enforced)
    elif ct.has_exactly_one():
        _add_linear(lp, *_clause(ct.exactly_one.literals, 1, 1), enforced)
    elif ct.has_lin_max() and not enforced:
        lp.kept += 1
        t_cols, t_vals = _flat(ct.lin_max.target.vars, ct.lin_max.target.coeffs)
        t_off = float(ct.lin_max.target.offset)
        for e in ct.lin_max.exprs:  # target - e >= e.offset - target.offset
            e_cols, e_vals = _flat(e.vars, e.coeffs)
            lp.add(t_cols + e_cols, t_vals + [-a for a in e_vals], e.offset - t_off, math.inf)
    else:
        kind = next((k for k in CONSTRAINT_KINDS if getattr(ct, f"has_{k}")()), "other")
        lp.dropped[kind] += 1


def linear_program(proto: Any) -> LinearProgram:
    """The relaxation of a CP-SAT model proto with an objective (see the module's notes)."""
    n = len(proto.variables)
    lb = np.array([v.domain[0] for v in proto.variables], dtype=float)
    ub = np.array([_last(v.domain) for v in proto.variables], dtype=float)
    obj = proto.objective
    c = np.zeros(n)
    cols, vals = _flat(obj.vars, obj.coeffs)
    np.add.at(c, cols, vals)
    lp = LinearProgram(c, float(obj.offset), lb, ub)
    constraints = list(proto.constraints)
    _tighten(lp, constraints)
    for ct in constraints:
        _add(lp, ct)
    return lp


def _solved(
    lp: LinearProgram, solver: str, time_limit: float, presolve: bool = True, dual: bool = True
) -> mbh.ModelSolverHelper:
    """The LP handed to `solver` and solved within `time_limit` seconds (`presolve` False:
    GLOP without its presolve; `dual` False: GLOP's primal simplex)."""
    lp_helper = linear_solver()  # typed through the annotations (a module loaded at call)
    h: mbh.ModelBuilderHelper = lp_helper.ModelBuilderHelper()
    n = len(lp.c)
    # The helper's stubs spell the array types in a form numpy's own do not match.
    integral = np.zeros(n, dtype=bool)
    h.add_var_array_with_bounds(lp.lb, lp.ub, integral, "x")  # type: ignore[arg-type]
    h.set_objective_coefficients(list(range(n)), lp.c.tolist())
    for r in range(len(lp.lo)):
        h.add_linear_constraint()
        h.set_constraint_lower_bound(r, lp.lo[r])
        h.set_constraint_upper_bound(r, lp.hi[r])
    for r, j, a in zip(lp.rows, lp.cols, lp.vals, strict=True):
        h.safe_add_term_to_constraint(r, j, a)
    s: mbh.ModelSolverHelper = lp_helper.ModelSolverHelper(solver)
    s.set_time_limit_in_seconds(max(0.01, time_limit))
    if solver == "GLOP":
        # Dual simplex: on a week of hourly demand (89k columns, 113k rows) it took 22 s where
        # GLOP's default primal simplex took 45 s.
        extra = "" if presolve else ", use_preprocessing: false"
        s.set_solver_specific_parameters(f"use_dual_simplex: {str(dual).lower()}" + extra)
    s.solve(h)
    return s


def solve_lp(lp: LinearProgram, solver: str, time_limit: float) -> tuple[Floats, float | None, str]:
    """Row duals, the reported optimum (None without a solution) and the status of the LP.
    GLOP by default: OR-Tools 9.15 passes HiGHS's row activities where its duals belong (on
    min x + 2y, x + y >= 3, x - y <= 1 it reports duals 3 and 1, not 1.5 and -0.5), so a HiGHS
    solve yields the right optimum but no usable bound; PDLP did not finish a week in 300 s."""
    began = time.perf_counter()
    s = _solved(lp, solver, time_limit)
    if solver == "GLOP" and s.status().name == "ABNORMAL":
        # GLOP's presolve can end ABNORMAL where the LP itself solves: the week of hourly
        # demand in 34 levels (benchmarks/bench_week.py) did, with either simplex, and solved
        # in 0.5 s without it. Once more without it, in the time left.
        left = time_limit - (time.perf_counter() - began)
        s = _solved(lp, solver, left, presolve=False)
    if solver == "GLOP" and s.status().name == "ABNORMAL":
        # The dual simplex can end ABNORMAL on the LP itself: the largest generated tier's
        # serving problems did with and without the presolve, and solve with the primal
        # simplex (relax_branch.LpTree.solve).
        left = time_limit - (time.perf_counter() - began)
        s = _solved(lp, solver, left, presolve=False, dual=False)
    status = s.status().name
    if not s.has_solution():
        return np.zeros(len(lp.lo)), None, status
    return np.asarray(s.dual_values(), dtype=float), s.objective_value(), status


@dataclass(frozen=True)
class Support:
    """Where the relaxation's optimum puts replicas, and what it proves."""

    designs: dict[str, list[int]]  # per workload, design indices in the tables' order
    raw_bound: float  # the weak-duality bound (see `relax`) at the model's integer scale
    # The solved LP, kept for the tree search (relax_branch.tree_bound), its root point and
    # the objective's sign as CP-SAT reports it (-1: maximized, the LP minimizes its negation).
    tree: Any = None
    x: Floats | None = None
    d: Floats | None = None  # the root's reduced costs (relax_lp.reduced_costs)
    sign: float = 1.0
    # Devices bought at the relaxation's optimum, per type, rounded down to whole purchase units
    # (whole_purchases): purchases a plan can hold, the rest of the demand rented.
    bought: dict[str, int] | None = None


def whole_purchases(tables: Tables, bought: dict[str, float]) -> dict[str, int]:
    """Devices bought per type (fractional, as a relaxation buys them) rounded down to a
    multiple of the type's largest purchase unit (a baseboard sold whole holds 8 H200), which
    that host can hold: 16.59 H200 and 1.86 MI300X on 8-device baseboards are 16 and 0."""
    out = {}
    for dev, n in bought.items():
        unit = max((purchase_unit(h) for h in tables.econ[dev].hosts), default=1)
        out[dev] = math.floor(n / unit + 1e-6) * unit
    return out


def support(
    tables: Tables, *, time_limit: float, build_limit: float | None = None
) -> Support | None:
    """Per workload, the designs the relaxation's optimum gives replicas (any replica variable
    above zero) and those of the model's starting plan: where an integer optimum is most likely
    found (the relaxation-induced neighbourhood of Danna, Rothberg and Le Pape 2005, "Exploring
    relaxation induced neighborhoods to improve MIP solutions", here over whole designs); and
    the relaxation's bound. None when the goal is a ratio (no linear relaxation) or the LP is
    not solved to optimality in `time_limit` seconds, or (`build_limit`) when building the
    model and reading it back as a linear program would take longer than that."""
    began = time.perf_counter()
    model = PlannerModel(tables)
    try:
        model.pose()
    except ValueError:
        return None
    proto = model.m.Proto()
    if not len(proto.objective.vars):
        return None  # no integer objective (a constant one proves nothing worth the time)
    reading = LP_S_PER_CONSTRAINT * len(proto.constraints)
    if build_limit is not None and time.perf_counter() - began + reading > build_limit:
        return None
    lp = linear_program(proto)
    tree = LpTree(lp)  # kept loaded: the tree search (relax_branch.tree_bound) goes on from it
    root, x, d = tree.solve({}, time_limit)
    if root == -math.inf:
        return None
    used: dict[str, set[int]] = {w: set() for w in tables.designs}
    for key, var in model.R.items():
        if x[var.index] > 1e-6:
            used[key.workload].add(key.design)
    for key in model.start or model.heuristic()[0]:
        used[key.workload].add(key.design)
    if not all(used.values()):
        return None
    sign = proto.objective.scaling_factor or 1.0
    bought = whole_purchases(tables, {dev: float(x[v.index]) for dev, v in model.bought.items()})
    designs = {w: sorted(js) for w, js in used.items()}
    return Support(designs, sign * root, tree, x, d, sign, bought)


def _raw_bound(lp: LinearProgram, proto: Any, y: Floats) -> float:
    """The weak-duality bound from row multipliers `y`, as CP-SAT reports objectives (its
    scaling factor is -1 when maximizing). Solvers differ in the sign they give row duals; any
    multipliers give a valid bound, so the better of the two readings is taken."""
    sign = proto.objective.scaling_factor or 1.0
    return float(sign * max(dual_bound(lp, y), dual_bound(lp, -y)))


def relax(
    tables: Tables, *, solver: str = "GLOP", time_limit: float = 120.0, blocks_time: float = 0.0
) -> Relaxation:
    """The linear relaxation of the planner's model for `tables`, solved, and its bound; with
    `blocks_time` > 0, also the decomposition's bound by demand period (relax_blocks), its
    blocks searched as integer programs for that many seconds in all."""
    start = time.perf_counter()
    model = PlannerModel(tables)
    goal = model.pose()
    proto = model.m.Proto()
    lp = linear_program(proto)
    built = time.perf_counter()
    y, reported, status = solve_lp(lp, solver, time_limit)
    solved = time.perf_counter()
    # CP-SAT minimizes coeffs.x + offset and reports scaling_factor times that (-1: maximize).
    sign = proto.objective.scaling_factor or 1.0
    raw = _raw_bound(lp, proto, y)
    blocks = None
    label = by_period.labels(model) if blocks_time > 0 and reported is not None else None
    if label is not None:
        # The better reading of the duals' sign (see _raw_bound), in the LP's minimizing sense.
        y_min = y if dual_bound(lp, y) >= dual_bound(lp, -y) else -y
        blocks = block_bound(lp, y_min, label, time_limit=blocks_time)
    return Relaxation(
        bound=goal.read(raw, 0.0),
        raw=raw,
        solver_objective=None if reported is None else sign * (reported + lp.offset),
        status=status,
        variables=len(lp.c),
        rows=len(lp.lo),
        kept=lp.kept,
        big_m=lp.big_m,
        off=lp.off,
        dropped=dict(lp.dropped),
        build_seconds=built - start,
        solve_seconds=solved - built,
        blocks=blocks,
        block_bound=None if blocks is None else goal.read(_tightest(sign, blocks.bound, raw), 0.0),
    )


def _tightest(sign: float, minimum: float, raw: float) -> float:
    """The tighter of the LP's bound `raw` (as CP-SAT reports objectives) and a lower bound
    `minimum` on the LP's minimized objective (sign x the objective: -1 when maximizing)."""
    return max(minimum, raw) if sign > 0 else min(-minimum, raw)


def lp_bound(tables: Tables, *, solver: str = "GLOP", time_limit: float = 120.0) -> float:
    """A lower bound on the model's optimum for a minimized goal (USD for min_cost), an upper
    bound for a maximized one: the linear relaxation's weak-duality bound (see `relax`)."""
    return relax(tables, solver=solver, time_limit=time_limit).bound
