"""The largest generated tier solved as the command line solves it: under a deadline that
bounds the whole solve, with one solver worker (or `--workers`).

    python benchmarks/bench_large.py [--time-limit 60] [--workers 1]

Per problem of `benchmarks/generate.py`'s large tier (60 device types, 126-layer models,
8 workloads, 4,096 devices; serving or with training jobs, with or without owned inventory):
the plan's status and cost, its bound (the tightest of the search's, the linear relaxation's
and the branch and bound's over the relaxation, planner.solve_guided.GuidedSearch._guided), the gap between
them, the wall time and the process's CPU seconds (user + system, every thread: on a shared
machine wall time swings with the load, CPU time less so).
"""

from __future__ import annotations

import argparse
import resource
import time

from generate import tier_cases

from planner.solve import solve_problem


def _cpu() -> float:
    """CPU seconds this process has used so far, user and system, all threads."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description="The largest generated tier under a deadline.")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1, help="CP-SAT workers (default 1)")
    args = ap.parse_args()
    print(
        f"| problem | status | cost USD | bound USD | gap | wall s (limit {args.time_limit:g}) "
        f"| CPU s ({args.workers} worker{'s' if args.workers > 1 else ''}) |"
    )
    print("|---|---|--:|--:|--:|--:|--:|")
    for case in tier_cases("large"):
        t0, c0 = time.monotonic(), _cpu()
        plan = solve_problem(
            case.problem,
            cat=case.catalog,
            time_limit=args.time_limit,
            deadline=t0 + args.time_limit,
            workers=args.workers,
        )
        took, cpu = time.monotonic() - t0, _cpu() - c0
        cost, bound = plan.objective, plan.bound
        gap = "-" if cost is None or bound is None else f"{(cost - bound) / cost:.2%}"
        print(
            f"| {case.name} | {plan.status} | {cost or 0:,.0f} | "
            f"{'-' if bound is None else f'{bound:,.0f}'} | {gap} | {took:.1f} | {cpu:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
