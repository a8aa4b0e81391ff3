"""One tiny case per constraint family: feasible as written, infeasible when only that limit tightens."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from planner.schema.problem import Problem
from planner.solve import solve_problem


def problem(**constraints: Any) -> Problem:
    base: dict[str, Any] = {
        "name": "tiny",
        "workloads": [
            {
                "name": "chat",
                "model": "llama-3.2-1b",
                "weights": "fp16",
                "context_tokens": 2048,
                "concurrency": 8,
                "min_tokens_per_s": 200,
            }
        ],
        "constraints": {"allowed_devices": ["l4", "rtx-4090", "a10g"], **constraints},
    }
    return Problem.model_validate(base)


@pytest.mark.parametrize(
    ("loose", "tight"),
    [
        ({"budget_usd": 1e6}, {"budget_usd": 100}),
        ({"capex_usd": 1e6}, {"capex_usd": 100}),
        ({"power_w": 1e5}, {"power_w": 10}),
        ({"max_devices": 64}, {"max_devices": 1, "memory_headroom": 0.97}),
        (
            {"require_ecc": False, "allowed_devices": ["rtx-4090"]},
            {"require_ecc": True, "allowed_devices": ["rtx-4090"]},
        ),
        ({"excluded_devices": []}, {"excluded_devices": ["l4", "rtx-4090", "a10g"]}),
    ],
)
def test_constraint_family(loose: dict[str, Any], tight: dict[str, Any]) -> None:
    ok = solve_problem(problem(**loose), time_limit=10)
    assert ok.status == "OPTIMAL"
    assert ok.objective == ok.bound
    blocked = solve_problem(problem(**tight), time_limit=10)
    assert blocked.status == "INFEASIBLE"
    assert blocked.notes  # it says why


def test_latency_ceiling() -> None:
    p = problem()
    w = p.workloads[0].model_copy(update={"max_ms_per_token": 0.001})
    tight = p.model_copy(update={"workloads": [w]})
    assert solve_problem(tight, time_limit=10).status == "INFEASIBLE"


def test_inventory_is_free() -> None:
    # Owning enough L4s makes a plan on L4s buy nothing (their host is owned with them).
    owned = solve_problem(
        problem(inventory=[{"device": "l4", "count": 16}], allowed_devices=["l4"]), time_limit=10
    )
    assert owned.status == "OPTIMAL"
    assert owned.capex_usd == 0
    assert all(d.bought == 0 for d in owned.devices)


def test_rack_units() -> None:
    # An H100 SXM sits in an 8U HGX server; a rack too short for one server blocks the plan.
    ok = solve_problem(problem(allowed_devices=["h100-sxm"], max_rack_units=42), time_limit=10)
    assert ok.status == "OPTIMAL"
    assert 0 < ok.rack_units <= 42
    blocked = solve_problem(
        problem(allowed_devices=["h100-sxm"], max_rack_units=ok.rack_units - 1), time_limit=10
    )
    assert blocked.status == "INFEASIBLE"


def training(deadline_hours: float) -> Problem:
    return Problem.model_validate(
        {
            "name": "tiny-train",
            "workloads": [
                {
                    "name": "tune",
                    "kind": "training",
                    "model": "llama-3.2-1b",
                    "method": "lora",
                    "token_budget": 1e8,
                    "deadline_hours": deadline_hours,
                }
            ],
            "constraints": {"allowed_devices": ["l4", "a100-80gb-sxm"], "max_devices": 8},
            "horizon": {"procurement": "rent", "lifetime_years": 0.01, "utilization": 1.0},
        }
    )


def test_deadline() -> None:
    ok = solve_problem(training(1000), time_limit=10)
    assert ok.status == "OPTIMAL"
    assert ok.workloads[0].finish_hours is not None and ok.workloads[0].finish_hours <= 1000
    # 1e8 tokens in 36 s would need about 2.8 million tokens/s on at most 8 devices.
    blocked = solve_problem(training(0.01), time_limit=10)
    assert blocked.status == "INFEASIBLE"
    assert blocked.notes


def test_capex_zero_plans_on_the_inventory() -> None:
    # "Buy nothing, use what we own": without the ceiling the cheapest plan buys an RTX 4090 and
    # a desktop (the owned L4s' 8-slot server draws more power idle than they save); with
    # capex 0 the plan runs on the owned L4s alone.
    inv = [{"device": "l4", "count": 16}]
    free = solve_problem(problem(inventory=inv), time_limit=10)
    assert free.capex_usd > 0
    plan = solve_problem(problem(inventory=inv, capex_usd=0), time_limit=10)
    assert plan.status == "OPTIMAL"
    assert plan.capex_usd == 0
    assert [(d.type, d.owned, d.bought) for d in plan.devices] == [("l4", 1, 0)]
    assert plan.slack["capex"] == 0
    # Without an inventory nothing can be had for 0 up front.
    assert solve_problem(problem(capex_usd=0), time_limit=10).status == "INFEASIBLE"


def test_capex_below_zero_is_a_located_error() -> None:
    with pytest.raises(ValidationError, match="at least 0"):
        problem(capex_usd=-1)
