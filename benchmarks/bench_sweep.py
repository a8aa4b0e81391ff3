"""A sweep against the same points solved cold: what reusing designs and warm starts buy.

    python benchmarks/bench_sweep.py [--problem problems/chat-70b.yaml]
        [--vary constraints.budget_usd=120000..400000:20] [--out benchmarks/sweep_report.md]

The sweep solves every point as `planner sweep --executor serial` does: runs of points through one
`Solver` (design tables reused when only fleet limits change, each solve in a run hinted with the
previous plan, no search for the constraint that blocks an infeasible point). The cold run is `planner solve` per point: a fresh
`Solver` each time.
Both must reach the same status and objective at every point.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from planner.load import parse_problem
from planner.schema.yaml_io import read_yaml
from planner.solve import Solver
from planner.whatif.executor import Executor, Settings, split
from planner.whatif.sweep import parse_vary, sweep

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("problems/chat-70b.yaml", "constraints.power_w=6000..40000:20"),
    ("problems/serve-405b.yaml", "constraints.budget_usd=150000..900000:20"),
    ("problems/tokens-per-joule-10kw.yaml", "constraints.power_w=4000..20000:20"),
]


def bench(problem_path: str, vary_spec: str) -> dict[str, object]:
    doc = read_yaml(ROOT / problem_path)
    vary = parse_vary(vary_spec)
    t0 = time.perf_counter()
    rows = sweep(doc, [], [vary], Settings(time_limit=60), Executor("serial")).rows
    warm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    cold_rows = []
    for v in vary.values:
        plan = Solver(time_limit=60).solve(parse_problem(doc, [f"{vary.path}={v}"]))
        cold_rows.append((plan.status, plan.objective))
    cold_s = time.perf_counter() - t0
    for r, (status, objective) in zip(rows, cold_rows, strict=True):
        same = r["status"] == status and (
            objective is None or abs((r["objective"] or 0) - objective) <= 1e-6 * abs(objective) + 1
        )
        if not same:
            raise SystemExit(f"{problem_path}: sweep and cold solve disagree at {r[vary.path]}")
    return {
        "problem": problem_path,
        "vary": vary_spec,
        "points": len(rows),
        "optimal": sum(r["status"] == "OPTIMAL" for r in rows),
        "sweep_s": warm_s,
        "cold_s": cold_s,
        "reused": len(rows)
        - len(split(len(rows))),  # warm starts: solves after the first of a task
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", help="one problem file (default: the built-in cases)")
    ap.add_argument("--vary", help="PATH=FROM..TO:POINTS for --problem")
    ap.add_argument("--out", type=Path, help="write the markdown table here")
    args = ap.parse_args()
    cases = [(args.problem, args.vary)] if args.problem and args.vary else CASES
    lines = [
        f"Sweep vs cold solves on {platform.machine()} / Python {platform.python_version()}, "
        "one solver worker.",
        "",
        "| problem | varied | points | optimal | sweep s | cold s | speed-up | warm starts |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for path, spec in cases:
        r = bench(path, spec)
        lines.append(
            f"| {Path(str(r['problem'])).stem} | `{r['vary']}` | {r['points']} | {r['optimal']} "
            f"| {r['sweep_s']:.2f} | {r['cold_s']:.2f} "
            f"| {float(r['cold_s']) / float(r['sweep_s']):.1f}x | {r['reused']} |"  # type: ignore[arg-type]
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
