"""Many workloads on many device types: 64 serving workloads, 45 device types (generated like
the tiers of bench_suite.py), solved under a whole-solve deadline.

    python benchmarks/bench_many.py [--time-limit 10] [--workloads 64] [--types 45]

Prints the design count, the status, the seconds the whole solve took (enumeration, model
building, the search and the check) and the plan's cost. Each workload alone has a cheap design;
the planner's starting plan (per workload the design that meets its demand at the lowest price)
is completed first under a deadline, so a verified plan comes back even when the search finds
none in the time left.
"""

from __future__ import annotations

import argparse
import time

from generate import Scale, generate

from planner.solve import solve_problem


def main() -> None:
    ap = argparse.ArgumentParser(description="64 workloads x 45 device types.")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workloads", type=int, default=64)
    ap.add_argument("--types", type=int, default=45)
    args = ap.parse_args()
    case = generate(
        f"many-{args.workloads}x{args.types}",
        Scale(device_types=args.types, layers=80, workloads=args.workloads, fleet=4096),
    )
    t0 = time.monotonic()
    plan = solve_problem(
        case.problem, cat=case.catalog, time_limit=args.time_limit, deadline=t0 + args.time_limit
    )
    took = time.monotonic() - t0
    cost = f"${plan.objective:,.0f}" if plan.objective is not None else "-"
    print(
        f"{case.name}: {plan.status} in {took:.1f} s (limit {args.time_limit:g} s), cost {cost}, "
        f"bound {plan.bound if plan.bound is not None else '-'}"
    )
    for n in plan.notes[:2]:
        print(f"  {n}")


if __name__ == "__main__":
    main()
