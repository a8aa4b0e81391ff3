"""Pools of owned unlike machines at growing sizes: time to a proved optimum, and the gap where
none is proved in the time limit.

    python benchmarks/bench_pools.py [--out benchmarks/pools_report.md] [--time-limit 60]
        [--sizes 8,24,64,256] [--workers 1,2]

The pool generator is fixed (no random draw), so every run plans the same pools:

- Machines: one GPU each (`max_tensor_parallel: 1`: no tensor parallelism across machines),
  all owned (`inventory`, `capex_usd: 0`), at most 16 pipeline stages, `max_throughput`.
- Kinds: pools of 8 and 24 machines hold three kinds, A100 40GB PCIe, L4 and T4 in the
  proportion 1 : 2 : 3 (24 machines: 4 A100, 8 L4, 12 T4, the README's leftovers pool); pools
  of 64 and 256 machines hold six kinds, adding L40S, RTX 4090 and RTX 3090 (memory from 16 GB
  to 48 GB per machine), in the proportion A100 40GB 2 : L40S 1 : RTX 4090 2 : RTX 3090 2 :
  L4 3 : T4 6. Counts are the proportion's shares rounded by largest remainder.
- Network: each size twice, on 1 Gb/s with 1 ms latency (an office switch) and on 10 Gb/s
  with 0.2 ms, stated in the problem's `links`.
- Workload: Llama 2 70B with 16-bit weights (8-bit, int8, on 8 machines, which cannot hold
  140 GB of 16-bit weights with their KV cache) and a 16-bit KV cache, 2,048-token context,
  256-token prompts and answers, four chats per machine at once (96 for 24 machines).

Each problem is written to a YAML file in a temporary folder, loaded as the CLI loads it and
solved by `solve_problem` with the time limit on one solver worker (and on each further worker
count asked for). The report lists per instance the machines, kinds, designs enumerated,
status, objective (tokens/s), bound, relative gap, the seconds of design enumeration and the
wall seconds of the whole solve.

A proof of optimality covers the designs left after pruning (planner.estimator.designs). Each
instance is therefore solved once more over the unpruned designs (`tuned=False`: no pruning,
no tightening, no hint), on one worker with the same limit, and the report sets that optimum
beside the pruned one: where it is higher, the pruning dropped a design the best plan needs.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from planner.catalog import Catalog, load_catalog
from planner.load import load_problem
from planner.model.tables import build_tables
from planner.schema.problem import Problem
from planner.solve import solve_problem

MODEL = "llama-2-70b"
SMALL_POOL = 8  # pools this small get 8-bit weights (see the docstring)
CHATS_PER_MACHINE = 4
MAX_STAGES = 16
# Device kinds and their shares of a pool.
THREE_KINDS = {"a100-40gb-pcie": 1, "l4": 2, "t4": 3}
SIX_KINDS = {"a100-40gb-pcie": 2, "l40s": 1, "rtx-4090": 2, "rtx-3090": 2, "l4": 3, "t4": 6}
# Stated networks: id -> (Gb/s, one-way latency in ms).
LINKS = {"lan-1g": (1.0, 1.0), "lan-10g": (10.0, 0.2)}
SIZES = (8, 24, 64, 256)


@dataclass(frozen=True)
class Instance:
    name: str
    machines: int
    link: str
    counts: dict[str, int]  # device id -> machines


def shares(total: int, weights: dict[str, int]) -> dict[str, int]:
    """`total` machines split by `weights`, rounded by largest remainder (ties: listed first)."""
    whole = sum(weights.values())
    exact = {k: total * w / whole for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    order = sorted(weights, key=lambda k: -(exact[k] - out[k]))  # stable: listed order on ties
    for k in order[: total - sum(out.values())]:
        out[k] += 1
    return {k: v for k, v in out.items() if v}


def instances(sizes: tuple[int, ...] = SIZES) -> list[Instance]:
    """The fixed instances: every size on every link (three kinds up to 24 machines, six above)."""
    out = []
    for n in sizes:
        counts = shares(n, THREE_KINDS if n <= 24 else SIX_KINDS)
        for link in LINKS:
            out.append(Instance(f"pool-{n}-{link}", n, link, counts))
    return out


def problem_doc(inst: Instance) -> dict[str, Any]:
    """The problem file of an instance, as the CLI reads it."""
    gbit, ms = LINKS[inst.link]
    return {
        "name": inst.name,
        "description": f"{inst.machines} owned machines, one GPU each, on {gbit:g} Gb/s",
        "workloads": [
            {
                "name": "chat",
                "kind": "inference",
                "model": MODEL,
                "weights": "int8" if inst.machines <= SMALL_POOL else "fp16",
                "kv": "fp16",
                "context_tokens": 2048,
                "prompt_tokens": 256,
                "output_tokens": 256,
                "concurrency": CHATS_PER_MACHINE * inst.machines,
            }
        ],
        "links": [{"id": inst.link, "name": inst.link, "bandwidth_gbit_s": gbit, "latency_ms": ms}],
        "constraints": {
            "allowed_devices": list(inst.counts),
            "inventory": [{"device": d, "count": c} for d, c in inst.counts.items()],
            "capex_usd": 0,
            "network": inst.link,
            "max_tensor_parallel": 1,
            "max_stages": MAX_STAGES,
        },
        "objective": {"goal": "max_throughput"},
    }


def write_problem(inst: Instance, folder: Path) -> Path:
    path = folder / f"{inst.name}.yaml"
    path.write_text(yaml.safe_dump(problem_doc(inst), sort_keys=False), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Row:
    name: str
    machines: int
    kinds: int
    link: str
    workers: int
    designs: int
    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    enumerate_s: float
    wall_s: float
    unpruned: Row | None = None  # the same instance over the unpruned designs


def run(
    inst: Instance,
    problem: Problem,
    cat: Catalog,
    time_limit: float,
    workers: int,
    *,
    tuned: bool = True,
) -> Row:
    """One instance solved from scratch (design enumeration timed apart, then the whole
    solve); `tuned=False` over the unpruned designs."""
    t0 = time.perf_counter()
    designs = sum(len(d) for d in build_tables(problem, cat, tuned=tuned).designs.values())
    t1 = time.perf_counter()
    plan = solve_problem(problem, time_limit=time_limit, workers=workers, cat=cat, tuned=tuned)
    wall = time.perf_counter() - t1
    return Row(
        inst.name,
        inst.machines,
        len(inst.counts),
        inst.link,
        workers,
        designs,
        str(plan.status),
        plan.objective,
        plan.bound,
        plan.gap,
        t1 - t0,
        wall,
    )


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _gap(x: float | None) -> str:
    return "-" if x is None else "0" if x == 0 else f"{x:.2%}"


def report(rows: list[Row], time_limit: float) -> str:
    lines = [
        "# Pools of owned machines",
        "",
        f"Python {platform.python_version()}, {platform.machine()}; {time_limit:g} s limit per "
        "solve; objective and bound in tokens/s; gap relative to the bound; wall s: the whole "
        "`solve_problem` call (its own design enumeration included). Generated by "
        "`python benchmarks/bench_pools.py` (the pools are described in its docstring).",
        "",
        "The last three columns solve the same instance over the unpruned designs (one worker): "
        "their count, status and optimum, and the wall seconds of that solve.",
        "",
        "| instance | machines | kinds | link | workers | designs | status | objective | bound "
        "| gap | enumerate s | wall s | unpruned designs | unpruned optimum | unpruned wall s |",
        "|---|--:|--:|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        u = r.unpruned
        tail = (
            "| - | - | - |"
            if u is None
            else (f"| {u.designs} | {u.status} {_num(u.objective)} | {u.wall_s:.2f} |")
        )
        lines.append(
            f"| {r.name} | {r.machines} | {r.kinds} | {r.link} | {r.workers} | {r.designs} "
            f"| {r.status} | {_num(r.objective)} | {_num(r.bound)} | {_gap(r.gap)} "
            f"| {r.enumerate_s:.2f} | {r.wall_s:.2f} {tail}"
        )
    lost = sorted(
        {
            f"{r.name} ({_num(r.objective)} against {_num(r.unpruned.objective)})"
            for r in rows
            if r.unpruned is not None
            and r.objective is not None
            and r.unpruned.objective is not None
            and r.unpruned.status == "OPTIMAL"
            and r.unpruned.objective > r.objective * (1 + 1e-6)
        }
    )
    if lost:
        lines += [
            "",
            "Proved optimal over the pruned designs, but the unpruned designs hold a better plan: "
            + "; ".join(lost)
            + ". The pruning dropped a design the best plan needs.",
        ]
    return "\n".join(lines) + "\n"


def bench(
    sizes: tuple[int, ...], time_limit: float, workers: tuple[int, ...], folder: Path
) -> list[Row]:
    """Every instance of `sizes`, written to `folder`, on each worker count (the unpruned solve
    once per instance, on one worker)."""
    cat = load_catalog()
    rows = []
    for inst in instances(sizes):
        problem = load_problem(write_problem(inst, folder))
        unpruned = run(inst, problem, cat, time_limit, 1, tuned=False)
        for n in workers:
            rows.append(replace(run(inst, problem, cat, time_limit, n), unpruned=unpruned))
            print(
                f"{inst.name} on {n} worker(s): {rows[-1].status} {_num(rows[-1].objective)} "
                f"in {rows[-1].wall_s:.2f} s",
                flush=True,
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Time pools of owned machines.")
    parser.add_argument("--out", type=Path, default=None, help="Also write the report here.")
    parser.add_argument("--time-limit", type=float, default=60.0, help="Seconds per solve.")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="Machines per pool.")
    parser.add_argument("--workers", default="1", help="Solver worker counts, comma-separated.")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    workers = tuple(int(w) for w in args.workers.split(","))
    with tempfile.TemporaryDirectory() as folder:
        rows = bench(sizes, args.time_limit, workers, Path(folder))
    text = report(rows, args.time_limit)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
