"""Pipelines of three and four device types over owned machines (planner.estimator.designs._k_type).

The pools serve Llama 2 70B in 16-bit (138 GB = 128.5 GiB of weights) without tensor
parallelism; an engine fills at most 0.9 of a card (usable_memory), less activations and
overheads.
- Three kinds: 2 A100 40GB, 2 L4 and 3 T4 (40, 24 and 16 GiB): 0.9 x 176 = 158 GiB for all
  seven, while the best two kinds hold at most 0.9 x 128 = 115 GiB: only a pipeline of all
  three kinds holds the model. (The exhaustive search of tests/test_pool_optimality.py takes
  the same pool.)
- Four kinds, at most 8 stages: 1 A100 40GB, 2 L4, 2 RTX 3090 (24 GiB) and 2 T4: 0.9 x 168 =
  151 GiB for all seven; any three kinds hold at most 0.9 x 136 = 122 GiB. The T4s cannot serve
  alone in 8 stages (0.9 x 128 = 115 GiB), which puts them beside the three cheapest options.
"""

from __future__ import annotations

import itertools
from functools import cache
from typing import Any

import pytest
from test_pool_optimality import pool_problem

from planner.catalog import Catalog, load_catalog
from planner.estimator.designs import allowed_devices, inference_designs
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.status import Status
from planner.solve import Solver, solve_problem
from planner.verify import verify

COUNTS = {"a100-40gb-pcie": 2, "l4": 2, "t4": 3}
FOUR = {"a100-40gb-pcie": 1, "l4": 2, "rtx-3090": 2, "t4": 2}


@cache
def catalog() -> Catalog:
    return load_catalog()


def pool(counts: dict[str, int] | None = None, sequences: int = 8, **constraints: Any) -> Problem:
    counts = COUNTS if counts is None else counts
    given = {"max_stages": 16, **constraints}
    return pool_problem("three-kinds", counts, "llama-2-70b", "fp16", sequences, **given)


# (machines per kind, stages at most, sequences at once): the four kinds' one pipeline of seven
# stages holds 7 sequences at most (one per stage at its largest batch that fits)
CASES = [(COUNTS, 16, 8), (FOUR, 8, 4)]


@pytest.mark.parametrize(("counts", "stages", "sequences"), CASES, ids=["three", "four"])
def test_only_all_kinds_together_hold_the_model_and_the_plan_uses_them(
    counts: dict[str, int], stages: int, sequences: int
) -> None:
    problem = pool(counts, sequences, max_stages=stages)
    plan = solve_problem(problem, time_limit=60, cat=catalog())
    assert plan.status == Status.OPTIMAL, plan.notes
    (w,) = plan.workloads
    assert w.replicas == 1
    held: dict[str, int] = {}
    for s in w.stages:
        held[s.device] = held.get(s.device, 0) + s.tp
    assert held == counts  # one pipeline of all seven machines
    # contiguous layer ranges, first to last, every stage holding some
    ranges = [s.layers for s in w.stages]
    assert ranges[0][0] == 0 and ranges[-1][1] == catalog().model("llama-2-70b").num_layers - 1
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))
    assert all(last >= first for first, last in ranges)
    verify(plan, problem, catalog())  # raises where a constraint or figure does not hold


@pytest.mark.parametrize(("counts", "stages"), [(COUNTS, 16), (FOUR, 8)])
def test_without_mixed_pipelines_the_pool_serves_nothing(
    counts: dict[str, int], stages: int
) -> None:
    problem = pool(counts, heterogeneous_pipelines=False, max_stages=stages)
    plan = solve_problem(problem, time_limit=60, cat=catalog())
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
    """Where nothing is owned, more of the best type serves: no pipelines of three types."""
    problem = pool(FOUR, inventory=[], capex_usd=1_000_000, max_stages=8)
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload)
    cat = catalog()
    designs = inference_designs(w, problem, cat, allowed_devices(problem, cat), prune=False)
    assert designs and all(len(d.devices) <= 2 for d in designs)


def test_a_session_solves_each_inventory_as_a_fresh_solve_does() -> None:
    """Pipelines of several types read how many of each type are owned, so the design tables a
    session keeps between solves (a sweep) must not serve another inventory's."""
    session = Solver(catalog(), time_limit=60)
    for t4 in (3, 2, 4, 3):
        problem = pool({**COUNTS, "t4": t4})
        fresh = solve_problem(problem, time_limit=60, cat=catalog())
        kept = session.solve(problem)
        assert (kept.status, kept.objective) == (fresh.status, fresh.objective), t4
