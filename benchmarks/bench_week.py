"""A week of hourly demand with four procurement modes: the plan on merged demand levels, and
how far it can be from the best plan for the exact hourly profile.

    python benchmarks/bench_week.py [--time-limit 60] [--levels 12] [--bound-levels 24]

The problem is problems/rent-the-peak.yaml with a 168-hour profile (a weekday curve, quieter
weekends, and a small ripple so that almost every hour differs) and procurement
[buy, on_demand, reserved, spot]. The planner merges the hours into --levels levels, each
rounded up, and returns a verified plan within --time-limit seconds (the whole solve).

A bound on the exact (unmerged) problem: the same week with every hour rounded DOWN to one of
--bound-levels levels asks for less in every hour, so no plan for the exact week costs less
than its optimum, and so than its solver bound. The report gives the plan's cost, that bound,
and the gap between them: it covers both the merging and the search.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from planner.catalog import load_catalog
from planner.estimator.demand_levels import round_up
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.tables import build_tables
from planner.schema.problem import Demand, Period, Problem
from planner.solve import solve_problem

ROOT = Path(__file__).resolve().parent.parent


def week_profile() -> list[float]:
    """168 multiples of the stated rate: a daytime hump, weekends at 70 %, an 11-hour ripple."""
    out = []
    for h in range(168):
        day = max(0.0, math.sin(math.pi * ((h % 24) - 6) / 15))
        weekend = 0.7 if h // 24 >= 5 else 1.0
        out.append(round(0.25 + 0.75 * day * weekend + 0.003 * (h % 11), 4))
    return out


def week_problem(demand: Demand) -> Problem:
    base = load_problem(ROOT / "problems" / "rent-the-peak.yaml")
    modes = ["buy", "on_demand", "reserved", "spot"]
    return base.model_copy(
        update={
            "demand": demand,
            "horizon": base.horizon.model_copy(update={"procurement": modes}),
        }
    )


def rounded_down(hourly: list[float], k: int) -> Demand:
    """The profile with each hour rounded down to the least value of its level's run (the runs
    of the round-up merge into k levels), as named periods."""
    up = round_up(hourly, k)
    runs: dict[float, list[float]] = {}
    for u, v in zip(up, hourly, strict=True):
        runs.setdefault(u, []).append(v)
    periods = [
        Period(name=f"level-{i}", share=len(vs) / len(hourly), scale=min(vs))
        for i, (_, vs) in enumerate(sorted(runs.items(), reverse=True))
    ]
    return Demand(periods=periods)


def main() -> None:
    ap = argparse.ArgumentParser(description="Week of hourly demand, four procurement modes.")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--levels", type=int, default=None, help="demand.levels (default 12)")
    ap.add_argument("--bound-levels", type=int, default=24)
    args = ap.parse_args()
    hourly = week_profile()
    problem = week_problem(Demand(hourly=hourly, levels=args.levels))
    t0 = time.monotonic()
    plan = solve_problem(problem, time_limit=args.time_limit, deadline=t0 + args.time_limit)
    took = time.monotonic() - t0
    print(f"plan: {plan.status}, {took:.1f} s (limit {args.time_limit:g} s), verified")
    for n in plan.notes:
        if n.startswith("demand:"):
            print(f"  {n}")
    lower = week_problem(rounded_down(hourly, args.bound_levels))
    tables = build_tables(lower, load_catalog())
    sol = PlannerModel(tables).solve(time_limit=args.time_limit, workers=1, seed=0)
    bound = sol.bound
    if plan.objective is None or bound is None:
        print(f"no comparison: plan objective {plan.objective}, bound {bound}")
        return
    gap = (plan.objective - bound) / plan.objective
    print(
        f"cost ${plan.objective:,.0f}; bound on the exact hourly problem ${bound:,.0f} "
        f"(every hour rounded down to {args.bound_levels} levels, {sol.status}); "
        f"gap {gap:.2%}; distinct hourly values {len(set(hourly))}"
    )


if __name__ == "__main__":
    main()
