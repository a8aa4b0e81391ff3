"""One sweep on each executor: seconds, and whether the rows are the same bytes.

    python benchmarks/bench_executor.py [--problem problems/serve-405b.yaml]
        [--vary constraints.budget_usd=150000..900000:40] [--jobs 2] [--dask]

Serial runs in this process; local starts a pool of --jobs processes (their start-up is
counted); --dask adds a Dask cluster of --jobs workers started on 127.0.0.1 for the run (its
start-up counted too). The speed-up is bounded by the CPUs free on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from planner.estimator.fork_share import cores
from planner.load import parse_problem
from planner.schema.yaml_io import read_yaml
from planner.whatif.executor import Executor, Settings, solve_all
from planner.whatif.sweep import parse_vary

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="problems/serve-405b.yaml")
    ap.add_argument("--vary", default="constraints.budget_usd=150000..900000:40")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--dask", action="store_true")
    args = ap.parse_args()
    doc = read_yaml(ROOT / args.problem)
    vary = parse_vary(args.vary)
    problems = [parse_problem(doc, [f"{vary.path}={v}"]) for v in vary.values]
    kinds = [Executor("serial"), Executor("local", jobs=args.jobs)]
    if args.dask:
        kinds.append(Executor("dask", jobs=args.jobs))
    print(
        f"{args.problem}, {len(problems)} points; {cores()} CPUs free of "
        f"{os.cpu_count()}, load {os.getloadavg()[0]:.1f}; {platform.python_version()}"
    )
    first = None
    for ex in kinds:
        t0 = time.perf_counter()
        rows = solve_all(problems, Settings(time_limit=60), ex).rows
        seconds = time.perf_counter() - t0
        text = json.dumps([{k: v for k, v in r.items() if k != "solve_seconds"} for r in rows])
        first = first or text
        print(f"{ex.kind:>7} jobs={ex.jobs or 1}: {seconds:6.2f} s, same rows: {text == first}")


if __name__ == "__main__":
    main()
