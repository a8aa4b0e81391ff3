"""Pipelines of three device types over owned machines (planner.estimator.designs._three_type).

The pool: 2 A100 40GB, 2 L4 and 3 T4, one GPU per machine, serving Llama 2 70B in 16-bit
(138 GB of weights). Usable memory (0.9 of each card): 2 x 36 + 2 x 21.6 + 3 x 14.4 = 158 GB
for all seven, while the best two kinds hold at most 2 x 36 + 2 x 21.6 = 115 GB: only a
pipeline of all three kinds holds the model. (The exhaustive search of
tests/test_pool_optimality.py takes the same pool.)
"""

from __future__ import annotations

import itertools
from functools import cache
from typing import Any

from planner.catalog import Catalog, load_catalog
from planner.estimator.designs import allowed_devices, inference_designs
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.status import Status
from planner.solve import solve_problem
from planner.verify import verify

COUNTS = {"a100-40gb-pcie": 2, "l4": 2, "t4": 3}


@cache
def catalog() -> Catalog:
    return load_catalog()


def pool(**constraints: Any) -> Problem:
    doc: dict[str, Any] = {
        "name": "three-kinds",
        "workloads": [
            {
                "name": "chat",
                "kind": "inference",
                "model": "llama-2-70b",
                "weights": "fp16",
                "kv": "fp16",
                "context_tokens": 2048,
                "prompt_tokens": 256,
                "output_tokens": 256,
                "concurrency": 8,
            }
        ],
        "links": [{"id": "lab", "name": "lab", "bandwidth_gbit_s": 1, "latency_ms": 1}],
        "constraints": {
            "allowed_devices": list(COUNTS),
            "inventory": [{"device": d, "count": c} for d, c in COUNTS.items()],
            "capex_usd": 0,
            "network": "lab",
            "max_tensor_parallel": 1,
            "max_stages": 16,
            **constraints,
        },
        "objective": {"goal": "max_throughput"},
    }
    return Problem.model_validate(doc)


def test_only_three_kinds_together_hold_the_model_and_the_plan_uses_them() -> None:
    problem = pool()
    plan = solve_problem(problem, time_limit=60, cat=catalog())
    assert plan.status == Status.OPTIMAL, plan.notes
    (w,) = plan.workloads
    assert w.replicas == 1
    held: dict[str, int] = {}
    for s in w.stages:
        held[s.device] = held.get(s.device, 0) + s.tp
    assert held == COUNTS  # one pipeline of all seven machines
    # contiguous layer ranges, first to last, every stage holding some
    ranges = [s.layers for s in w.stages]
    assert ranges[0][0] == 0 and ranges[-1][1] == catalog().model("llama-2-70b").num_layers - 1
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))
    assert all(last >= first for first, last in ranges)
    verify(plan, problem, catalog())  # raises where a constraint or figure does not hold


def test_without_mixed_pipelines_the_pool_serves_nothing() -> None:
    plan = solve_problem(pool(heterogeneous_pipelines=False), time_limit=60, cat=catalog())
    assert plan.status == Status.INFEASIBLE


def test_three_type_designs_respect_the_inventory_and_split_every_layer() -> None:
    problem = pool()
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload)
    cat = catalog()
    designs = inference_designs(w, problem, cat, allowed_devices(problem, cat), prune=False)
    three = [d for d in designs if len(d.devices) == 3]
    assert three
    L = cat.model(w.model).num_layers
    for d in three:
        assert all(d.devices[k] <= COUNTS[k] for k in d.devices), d.devices
        assert sum(s.layers for s in d.stages) == L and min(s.layers for s in d.stages) >= 1
        # stages of one kind sit together, the third kind's fuller stages first
        kinds = [s.device for s in d.stages]
        assert len({k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k}) == 3


def test_no_three_type_designs_where_the_devices_are_bought() -> None:
    """Where nothing is owned, more of the best type serves: no three-type enumeration."""
    problem = pool(inventory=[], capex_usd=1_000_000)
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload)
    cat = catalog()
    designs = inference_designs(w, problem, cat, allowed_devices(problem, cat), prune=False)
    assert designs and all(len(d.devices) <= 2 for d in designs)
