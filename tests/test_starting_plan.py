"""The starting plan (planner.model.hints) prices a device on premises by the whole purchase units
it adds: an MI300X costs less per slot than an H100 PCIe (17,500 USD plus an eighth of a 55,000 USD
OAM platform, against 27,500 plus an eighth of a 25,000 USD PCIe server; catalog prices), but the
platform is sold with its eight MI300X, so one device's worth of demand is cheaper on one H100
PCIe. A starting plan that priced slots bought the eight-GPU platform for a one-GPU workload, and a
search stopped by its time limit returned that plan."""

from __future__ import annotations

from planner.catalog import load_catalog
from planner.model.cpsat import PlannerModel
from planner.model.tables import build_tables
from planner.schema.problem import Problem
from planner.solve import solve_problem


def _problem(tokens_per_s: float) -> Problem:
    return Problem.model_validate(
        {
            "name": "units",
            "workloads": [
                {
                    "name": "w",
                    "model": "llama-3.1-8b",
                    "weights": "fp8",
                    "kv": "fp8",
                    "context_tokens": 4096,
                    "prompt_tokens": 500,
                    "concurrency": 8,
                    "min_tokens_per_s": tokens_per_s,
                }
            ],
            "constraints": {"allowed_devices": ["mi300x", "h100-pcie"]},
        }
    )


def _starting_devices(problem: Problem) -> dict[str, int]:
    tables = build_tables(problem, load_catalog())
    chosen, _ = PlannerModel(tables).heuristic()
    out: dict[str, int] = {}
    for key, n in chosen.items():
        for dev, k in tables.designs[key.workload][key.design].devices.items():
            out[dev] = out.get(dev, 0) + n * k
    return out


def test_a_small_workload_starts_on_devices_sold_one_by_one() -> None:
    problem = _problem(200)
    devices = _starting_devices(problem)
    assert devices == {"h100-pcie": 1}
    # ... which is what the optimum buys too.
    plan = solve_problem(problem, time_limit=30)
    assert plan.status == "OPTIMAL"
    assert {d.type: d.count for d in plan.devices} == {"h100-pcie": 1}
