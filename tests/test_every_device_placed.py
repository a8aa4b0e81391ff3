"""Every catalog device can be placed: each has a host node, and the five that had none (GH200,
MI355X, MI250X, the 512 GB Mac Studio, TPU v6e) can be planned when a problem owns or rents them."""

from __future__ import annotations

from typing import Any

import pytest

from planner.catalog import load_catalog
from planner.schema.problem import Problem
from planner.solve import solve_problem


def test_every_catalog_device_has_a_host() -> None:
    cat = load_catalog()
    homeless = [a.id for a in cat.accelerators.values() if not cat.nodes_for(a)]
    assert homeless == []


# device, weights, context tokens, devices owned (None: rented), host it sits in on premises.
# The Mac serves a 4-bit MLX build: the support matrix gives Apple silicon MLX and llama.cpp rows.
CASES = [
    ("gh200", "bf16", 4096, 1, "gh200-1u"),
    ("mi355x", "bf16", 4096, 8, "oam-mi355x-8"),
    ("mi250x", "bf16", 4096, 4, "cray-ex235a-mi250x-4"),
    ("m3-ultra-512gb", "mlx-q4", 32768, 1, "mac-standalone"),
    ("tpu-v6e", "bf16", 4096, None, "tpu-v6e-host"),
]


def placed(device: str, weights: str, context: int, owned: int | None) -> Problem:
    doc: dict[str, Any] = {
        "name": "placed",
        "workloads": [
            {
                "name": "serve",
                "model": "llama-3.1-8b",
                "weights": weights,
                "kv": "fp16" if weights == "mlx-q4" else weights,
                "context_tokens": context,
                "prompt_tokens": 256,
                "concurrency": 4,
                "min_tokens_per_s": 10,
            }
        ],
        "constraints": {"allowed_devices": [device]},
    }
    if owned is None:
        doc["horizon"] = {"procurement": ["on_demand"]}
    else:
        doc["constraints"]["inventory"] = [{"device": device, "count": owned}]
    return Problem.model_validate(doc)


@pytest.mark.parametrize(("device", "weights", "context", "owned", "host"), CASES)
def test_an_owned_or_rented_device_is_planned(
    device: str, weights: str, context: int, owned: int | None, host: str
) -> None:
    cat = load_catalog()
    assert host in [n.id for n in cat.nodes_for(cat.accelerator(device))]
    plan = solve_problem(placed(device, weights, context, owned), time_limit=20)
    assert plan.status == "OPTIMAL", plan.notes
    used = {site: n for p in plan.periods for site, n in p.devices.get(device, {}).items()}
    assert sum(used.values()) >= 1
    if owned is None:
        assert set(used) == {"on_demand"}
    else:
        assert set(used) == {"on-premises"}
        assert all(d.bought == 0 for d in plan.devices)  # the owned ones, in their own hosts
        assert [(n.type, n.count) for n in plan.nodes if n.hosts == device] == [(host, 1)]
