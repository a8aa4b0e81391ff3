"""The largest generated tier solved as the command line solves it: under a deadline that
bounds the whole solve, with one solver worker.

    python benchmarks/bench_large.py [--time-limit 60]

Per problem of `benchmarks/generate.py`'s large tier (60 device types, 126-layer models,
8 workloads, 4,096 devices; serving or with training jobs, with or without owned inventory):
the plan's status and cost, its bound (the tighter of the search's and the linear
relaxation's, planner.solve.Solver._guided), the gap between them and the wall time.
"""

from __future__ import annotations

import argparse
import time

from generate import tier_cases

from planner.solve import solve_problem


def main() -> None:
    ap = argparse.ArgumentParser(description="The largest generated tier under a deadline.")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    print(f"| problem | status | cost USD | bound USD | gap | wall s (limit {args.time_limit:g}) |")
    print("|---|---|--:|--:|--:|--:|")
    for case in tier_cases("large"):
        t0 = time.monotonic()
        plan = solve_problem(
            case.problem,
            cat=case.catalog,
            time_limit=args.time_limit,
            deadline=t0 + args.time_limit,
        )
        took = time.monotonic() - t0
        cost, bound = plan.objective, plan.bound
        gap = "-" if cost is None or bound is None else f"{(cost - bound) / cost:.2%}"
        print(
            f"| {case.name} | {plan.status} | {cost or 0:,.0f} | "
            f"{'-' if bound is None else f'{bound:,.0f}'} | {gap} | {took:.1f} |"
        )


if __name__ == "__main__":
    main()
