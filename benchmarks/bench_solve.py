"""Time every example problem: design enumeration (estimator) and model build + solve.

    python benchmarks/bench_solve.py [--out benchmarks/solve_report.md] [--repeat N]

Prints a markdown table (one row per file in problems/) and writes it to --out if given.
Times are the best of --repeat runs, in seconds, with one solver worker (the default).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from planner.catalog import Catalog, load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.tables import build_tables
from planner.plan.build import make_plan
from planner.schema.problem import Problem

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS_DIR = ROOT / "problems"


@dataclass(frozen=True)
class Row:
    name: str
    goal: str
    designs: int
    enumerate_s: float
    solve_s: float
    status: str
    objective: float | None
    gap: float | None


def bench_once(problem: Problem, cat: Catalog, time_limit: float) -> Row:
    """One run: enumerate designs, then build and solve the model, then read the plan."""
    t0 = time.perf_counter()
    tables = build_tables(problem, cat)
    t1 = time.perf_counter()
    n_designs = sum(len(ds) for ds in tables.designs.values())
    goal = problem.objective.goal
    if any(not ds for ds in tables.designs.values()):
        return Row(problem.name, goal, n_designs, t1 - t0, 0.0, "INFEASIBLE", None, None)
    model = PlannerModel(tables)
    sol = model.solve(time_limit=time_limit, workers=1, seed=0)
    t2 = time.perf_counter()
    if sol.status not in ("OPTIMAL", "FEASIBLE"):
        return Row(problem.name, goal, n_designs, t1 - t0, t2 - t1, sol.status, None, None)
    plan = make_plan(problem, cat, tables, sol)
    return Row(
        problem.name, goal, n_designs, t1 - t0, t2 - t1, sol.status, plan.objective, plan.gap
    )


def bench(path: Path, cat: Catalog, repeat: int, time_limit: float) -> Row:
    """Best of `repeat` runs (the first run also warms caches)."""
    problem = load_problem(path)
    rows = [bench_once(problem, cat, time_limit) for _ in range(repeat)]
    return Row(
        path.stem,
        rows[0].goal,
        rows[0].designs,
        min(r.enumerate_s for r in rows),
        min(r.solve_s for r in rows),
        rows[0].status,
        rows[0].objective,
        rows[0].gap,
    )


def fmt_number(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def fmt_gap(x: float | None) -> str:
    return "-" if x is None else f"{x:.2e}" if x else "0"


def report(rows: list[Row], repeat: int) -> str:
    lines = [
        "# Solve benchmark",
        "",
        f"Python {platform.python_version()}, {platform.machine()}, one solver worker, "
        f"best of {repeat} run(s). Times in seconds.",
        "",
        "| problem | goal | designs | enumerate s | build+solve s | status | objective | gap |",
        "|---|---|--:|--:|--:|---|--:|--:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.goal} | {r.designs} | {r.enumerate_s:.3f} | {r.solve_s:.3f} "
            f"| {r.status} | {fmt_number(r.objective)} | {fmt_gap(r.gap)} |"
        )
    solves = [r.solve_s for r in rows]
    totals = [r.enumerate_s + r.solve_s for r in rows]
    lines += [
        "",
        f"build+solve: median {statistics.median(solves):.3f} s, max {max(solves):.3f} s; "
        f"enumerate+build+solve: median {statistics.median(totals):.3f} s, "
        f"max {max(totals):.3f} s ({len(rows)} problems).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="Time the example problems.")
    parser.add_argument("--out", type=Path, default=None, help="Also write the table here.")
    parser.add_argument("--repeat", type=int, default=3, help="Runs per problem (best kept).")
    parser.add_argument("--time-limit", type=float, default=30.0, help="Solver seconds.")
    parser.add_argument("--problems", type=Path, default=PROBLEMS_DIR, help="Folder of YAML files.")
    args = parser.parse_args()
    cat = load_catalog()
    paths = sorted(args.problems.glob("*.yaml"))
    if not paths:
        raise SystemExit(f"no problem files in {args.problems}")
    rows = [bench(p, cat, max(1, args.repeat), args.time_limit) for p in paths]
    text = report(rows, max(1, args.repeat))
    print(text, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
