"""Design pruning under a stated concurrency: the sequences that exist make one token per time
per token each (Little's law), so a design with more slots and tokens/s but a slower token
must not replace a faster one. Pruned and unpruned design spaces reach the same optimum."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from planner.schema.problem import Problem
from planner.solve import solve_problem

# One DGX Spark serving Llama 3.1 8B in 16-bit to ONE sequence: 16 GB of weights over 273 GB/s
# give about 60-70 ms per token at batch 1, so 14 tokens/s is reachable only by a small batch;
# the largest batch that fits (hundreds of sequences) takes far longer per token.
ONE_SPARK: dict[str, Any] = {
    "name": "one-spark",
    "workloads": [
        {
            "name": "chat",
            "kind": "inference",
            "model": "llama-3.1-8b",
            "weights": "fp16",
            "kv": "fp16",
            "context_tokens": 4096,
            "prompt_tokens": 512,
            "concurrency": 1,
            "min_tokens_per_s": 14,
        }
    ],
    "constraints": {
        "allowed_devices": ["dgx-spark"],
        "inventory": [{"device": "dgx-spark", "count": 1}],
        "capex_usd": 0,
        "require_ecc": False,
    },
    "objective": {"goal": "min_cost"},
}


def test_one_sequence_on_a_big_memory_device_is_served_by_a_small_batch() -> None:
    plan = solve_problem(Problem.model_validate(ONE_SPARK), time_limit=30)
    assert plan.status == "OPTIMAL", plan.status  # was INFEASIBLE: only batch 512 survived
    (wp,) = plan.workloads
    assert wp.tokens_per_s >= 14
    assert wp.sequences == 1


@pytest.mark.parametrize(
    ("goal", "concurrency"), [("max_throughput", 2), ("max_throughput", 6), ("min_cost", 3)]
)
def test_pruned_and_unpruned_designs_reach_one_optimum(goal: str, concurrency: int) -> None:
    doc = copy.deepcopy(ONE_SPARK)
    doc["constraints"]["inventory"][0]["count"] = 2
    w = doc["workloads"][0]
    w["concurrency"] = concurrency
    w["min_tokens_per_s"] = 10
    doc["objective"]["goal"] = goal
    problem = Problem.model_validate(doc)
    tuned = solve_problem(problem, time_limit=60)
    plain = solve_problem(problem, time_limit=60, tuned=False)
    assert tuned.status == plain.status == "OPTIMAL"
    assert tuned.objective == pytest.approx(plain.objective, rel=1e-6)


def test_the_busiest_period_is_part_of_the_design_cache_key() -> None:
    # Pruning counts sequences up to the most that exist (concurrency x the busiest period's
    # scale), so a session must not reuse designs pruned for another peak (a sweep over demand).
    from planner.model.tables import design_key

    low, high = copy.deepcopy(ONE_SPARK), copy.deepcopy(ONE_SPARK)
    low["demand"] = {"hourly": [1.0] * 24}
    high["demand"] = {"hourly": [1.0] * 23 + [3.0]}
    keys = {design_key(Problem.model_validate(d)) for d in (low, high)}
    assert len(keys) == 2
