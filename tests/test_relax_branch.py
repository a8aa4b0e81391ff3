"""Branch and bound over the linear relaxation (planner.model.relax_branch): its bound is at
or above the relaxation's and never above the proved optimum; with the optimum as incumbent on
a small model it proves it."""

from __future__ import annotations

import itertools
import math
import random
import time
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_script

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.relax_branch import LpTree, by_reduced_cost, tree_bound, tree_search
from planner.model.relaxation import LinearProgram, support
from planner.model.tables import build_tables
from planner.schema.status import Status

generate = load_script("benchmarks/generate.py", "bench_generate")


def _knapsack() -> LinearProgram:
    """min 3a + 5b over integers 0 <= a, b <= 10 with 2a + 4b >= 7. By hand: the relaxation
    takes b = 7/4 (b is the cheaper per unit, 5/4 against 3/2), 8.75; over the integers
    b = 2 costs 10, a = 4 costs 12, a = 2, b = 1 costs 11 and a = 1 with b = 1 falls short
    (6 < 7), so the optimum is 10."""
    lp = LinearProgram(np.array([3.0, 5.0]), 0.0, np.zeros(2), np.full(2, 10.0))
    lp.add([0, 1], [2.0, 4.0], 7.0, math.inf)
    return lp


def test_the_tree_reaches_a_knapsacks_integer_optimum() -> None:
    tree = LpTree(_knapsack())
    root, x, _ = tree.solve({}, 5.0)
    assert root == pytest.approx(8.75)
    assert x.tolist() == pytest.approx([0.0, 1.75])
    # Without an incumbent: its bound rises from 8.75 to the integer optimum, and stops there
    # (the least leaf is integral).
    got = tree_bound(tree, root, x, incumbent=None, time_limit=10.0)
    assert got.bound == pytest.approx(10.0) and not got.proved
    # With the optimum as incumbent every leaf closes: a proof.
    got = tree_bound(tree, root, x, incumbent=10.0, time_limit=10.0)
    assert got.proved and got.bound == 10.0 and got.open == 0
    # With a dearer incumbent (a = 4 costs 12) the bound is the optimum, never above it.
    got = tree_bound(tree, root, x, incumbent=12.0, time_limit=10.0)
    assert got.bound <= 10.0 + 1e-9


def test_a_dual_simplex_that_ends_unsolved_falls_back_to_the_primal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dual simplex stopped at once (no iteration allowed) stands for one that ends
    ABNORMAL: the root and every node are still solved, by the primal simplex on the LP loaded
    afresh, and the tree reaches the knapsack's optimum as before."""
    import planner.model.relax_branch as relax_branch

    stopped = relax_branch.DUAL + ", max_number_of_iterations: 0"
    monkeypatch.setattr(relax_branch, "DUAL", stopped)
    tree = LpTree(_knapsack())
    tree.s.SetTimeLimit(1000)
    assert tree.s.Solve() != tree.optimal  # the dual alone does not solve it
    root, x, _ = tree.solve({}, 5.0)
    assert root == pytest.approx(8.75)
    assert x.tolist() == pytest.approx([0.0, 1.75])
    got = tree_bound(tree, root, x, incumbent=None, time_limit=10.0)
    assert got.bound == pytest.approx(10.0)


def test_a_box_no_point_fits_is_proved_empty() -> None:
    tree = LpTree(_knapsack())
    assert tree.empty({0: (0.0, 1.0), 1: (0.0, 1.0)})  # 2 + 4 < 7
    assert not tree.empty({0: (0.0, 1.0), 1: (0.0, 2.0)})
    assert tree.solve({0: (0.0, 1.0), 1: (0.0, 1.0)}, 1.0)[0] == math.inf


def _cases() -> list[tuple[str, object]]:
    """rent-the-peak and two small generated problems whose optimum the solver proves in a
    few seconds (serving alone; training with owned devices)."""
    peak = load_problem(Path("problems") / "rent-the-peak.yaml")
    small = generate.tier_cases("small")
    return [("rent-the-peak", (peak, load_catalog()))] + [
        (c.name, (c.problem, c.catalog)) for c in (small[0], small[3])
    ]


@pytest.mark.parametrize(("name", "case"), _cases(), ids=[n for n, _ in _cases()])
def test_the_trees_bound_never_exceeds_the_proved_optimum(name: str, case: object) -> None:
    problem, cat = case  # type: ignore[misc]
    tables = build_tables(problem, cat)
    best = PlannerModel(tables).solve(time_limit=120, workers=1, seed=0)
    assert best.status == Status.OPTIMAL and best.objective is not None
    optimum = best.objective  # the model's integer objective (USD), what the bounds bound
    found = support(tables, time_limit=30)
    assert found is not None
    alone = tree_search(found, None, 3.0)
    assert alone is not None
    # The tree's weak-duality bounds may sit a rounding error under the LP's own optimum
    # (GLOP's tolerances: 5.6e-4 USD on small-serve's $558,508).
    floor = found.raw_bound * (1 - 1e-9) - 1e-6
    assert floor <= alone.bound <= optimum
    # An incumbent above the optimum never lifts the bound past the optimum (reduced-cost
    # fixing against it keeps every better plan).
    dearer = tree_search(found, math.ceil(optimum * 1.01), 3.0)
    assert dearer is not None and floor <= dearer.bound <= optimum
    # With the optimum itself as incumbent, the bound is at most the optimum; proved means
    # every leaf closed.
    at = tree_search(found, optimum, 10.0)
    assert at is not None and at.bound <= optimum
    assert at.proved == (at.open == 0)


def test_reduced_costs_narrow_the_box_to_plans_that_beat_the_incumbent() -> None:
    # The knapsack's root: the row's multiplier is 5/4 (b's cost per unit of cover), so the
    # reduced costs are 3 - 2 x 5/4 = 0.5 for a and 5 - 4 x 5/4 = 0 for b, and the bound 8.75.
    lp = _knapsack()
    tree = LpTree(lp)
    root, _, d = tree.solve({}, 5.0)
    assert d.tolist() == pytest.approx([0.5, 0.0])
    # Against a plan worth 10, a better one is worth at most 9: 0.5 a <= 9 - 8.75 keeps a = 0
    # (by hand: a = 1 needs b = 2, 13; a = 2 with b = 1, 11). b, at reduced cost 0, is kept.
    assert by_reduced_cost(lp, {}, d, root, 10.0) == {0: (0.0, 0.0)}
    # Against 12: 0.5 a <= 11 - 8.75 gives a <= 4 (a = 4 alone costs 12, so a = 5 never helps).
    assert by_reduced_cost(lp, {}, d, root, 12.0) == {0: (0.0, 4.0)}


def test_the_guided_search_with_the_tree_keeps_a_small_problems_optimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # small-serve through the command's path (relaxation, narrowed search, tree, whole search)
    # as if it were large: the same plan cost as the proved optimum, and a bound not above it.
    from planner import solve as solve_module

    case = generate.tier_cases("small")[0]
    tables = build_tables(case.problem, case.catalog)
    best = PlannerModel(tables).solve(time_limit=120, workers=1, seed=0)
    assert best.status == Status.OPTIMAL and best.objective is not None
    monkeypatch.setattr(solve_module, "GUIDED_MIN_KEYS", 0)
    plan = solve_module.solve_problem(
        case.problem, cat=case.catalog, time_limit=60, deadline=time.monotonic() + 60
    )
    assert plan.objective is not None and plan.bound is not None  # verified inside
    # The plan's cost is recomputed in floats, the model's rounds each coefficient up (38 USD
    # more here): the plan against the proved plan, the bound against the model's optimum.
    proved = solve_module.solve_problem(case.problem, cat=case.catalog, time_limit=120)
    assert proved.status == Status.OPTIMAL and proved.objective is not None
    assert plan.objective == pytest.approx(proved.objective, rel=1e-9)
    assert plan.bound <= best.objective


def test_the_bound_never_passes_a_brute_forced_optimum_whatever_the_incumbent() -> None:
    """Small integer programs (2-4 columns in small boxes, 1-3 rows with signed coefficients,
    one or two sides, a fractional offset), their optimum by enumeration: with no incumbent, the
    optimum itself or one above it, the tree's bound (reduced-cost fixing and closing included)
    never passes the optimum, and with the optimum as incumbent a closed tree states it."""
    checked = 0
    for seed in range(80):
        r = random.Random(seed)
        n, rows = r.randint(2, 4), r.randint(1, 3)
        ub = np.array([float(r.randint(1, 4)) for _ in range(n)])
        lp = LinearProgram(
            np.array([float(r.randint(-5, 20)) for _ in range(n)]),
            r.choice([0.0, 0.5, 3.0]),
            np.zeros(n),
            ub,
        )
        sides = []
        for _ in range(rows):
            a = [float(r.randint(-3, 9)) for _ in range(n)]
            lo, hi = float(r.randint(0, 15)), r.choice([math.inf, float(r.randint(15, 40))])
            lp.add(list(range(n)), a, lo, hi)
            sides.append((a, lo, hi))
        best = min(
            (
                float(lp.c @ np.array(x)) + lp.offset
                for x in itertools.product(*[range(int(u) + 1) for u in ub])
                if all(lo <= float(np.dot(a, x)) <= hi for a, lo, hi in sides)
            ),
            default=math.inf,
        )
        tree = LpTree(lp)
        root, x0, d0 = tree.solve({}, 5.0)
        if not math.isfinite(root) or not math.isfinite(best):
            continue
        for incumbent in (None, best, best + 3.0):
            got = tree_bound(tree, root, x0, incumbent=incumbent, time_limit=5.0, root_d=d0)
            assert got.bound <= best + 1e-6, (seed, incumbent, got, best)
            if incumbent == best and got.proved:
                assert got.bound == best
        checked += 1
    assert checked >= 40  # most draws have a plan and a solved root


def test_solve_lp_falls_back_to_the_primal_when_the_dual_ends_abnormal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """relaxation.solve_lp: a dual simplex that ends ABNORMAL, with its presolve and without,
    is followed by the primal simplex, which yields the knapsack's relaxed optimum (8.75, by
    hand in _knapsack) and duals whose weak-duality bound is that optimum."""
    from planner.model import relaxation
    from planner.model.relax_lp import dual_bound

    real = relaxation._solved
    calls: list[bool] = []

    class _Abnormal:
        def status(self) -> object:
            return type("S", (), {"name": "ABNORMAL"})()

    def solved(
        lp: LinearProgram, solver: str, limit: float, presolve: bool = True, dual: bool = True
    ) -> object:
        calls.append(dual)
        return _Abnormal() if dual else real(lp, solver, limit, presolve, dual)

    monkeypatch.setattr(relaxation, "_solved", solved)
    lp = _knapsack()
    y, reported, status = relaxation.solve_lp(lp, "GLOP", 5.0)
    assert calls == [True, True, False]
    assert status == "OPTIMAL" and reported == pytest.approx(8.75)
    assert max(dual_bound(lp, y), dual_bound(lp, -y)) == pytest.approx(8.75)
