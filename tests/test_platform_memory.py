"""The memory a platform lets an accelerator hold: macOS wires at most Metal's recommended
working set (two thirds to three quarters of an Apple machine's memory, memory.gpu_share) for its
GPU, so a plan never fills more, and solve, verify and estimate agree on what fits."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.schema.problem import Problem
from planner.solve import solve_problem

runner = CliRunner()

# Llama 3.1 8B q8_0 with a 32k-token FP16 KV cache: 8.5 GB of weights and 4.3 GB of KV, more
# than macOS lets the GPU of a 16 GiB Mac hold (two thirds, 11.5 GB) and less than 90 % (15.5 GB).
MAC = {
    "name": "mac-8b",
    "workloads": [
        {
            "name": "chat",
            "model": "llama-3.1-8b",
            "weights": "q8_0",
            "kv": "fp16",
            "context_tokens": "32k",
            "prompt_tokens": 1000,
            "concurrency": 1,
            "min_tokens_per_s": 1,
        }
    ],
    "constraints": {"allowed_devices": ["m4-16gb"]},
    "objective": {"goal": "min_cost"},
}


def test_apple_machines_carry_the_working_set_share_and_others_do_not() -> None:
    cat = load_catalog()
    for acc in cat.accelerators.values():
        share = acc.memory.gpu_share
        # Every Mac carries Metal's working-set share; another unified-memory machine only
        # where a source gives the GPU's share (the BC-250's kernel GTT limit).
        assert share is not None or acc.vendor != "apple", acc.id
        assert share is None or "gpu_share" in acc.sources, acc.id
        # Headroom of 10 %: the platform's share binds below 90 %, the headroom above it.
        want = acc.memory.bytes * min(0.9, share or 1.0)
        assert acc.memory.usable_bytes(0.1) == pytest.approx(want)


def test_solve_and_estimate_agree_on_what_fits_a_mac() -> None:
    r = runner.invoke(
        app,
        [
            "estimate", "--model", "llama-3.1-8b", "--device", "m4-16gb", "--weights", "q8_0",
            "--context", "32768", "--batch", "1", "--prompt", "1000", "--format", "json",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    est: Any = json.loads(r.output)
    assert est["devices_needed"] >= 2, est
    plan = solve_problem(Problem.model_validate(MAC), time_limit=20)
    assert plan.has_plan
    mac = load_catalog().accelerator("m4-16gb").memory
    usable = mac.bytes * (mac.gpu_share or 0.0)
    stages = [s for w in plan.workloads for s in w.stages]
    assert len(stages) >= 2  # the model and its cache do not fit one Mac's GPU share
    assert all(s.memory_bytes["total"] <= usable * (1 + 1e-9) for s in stages)


def test_a_mac_fleet_on_a_network_it_has_no_port_for_says_so() -> None:
    """Two Mac minis joined over the default 100 GbE: a Mac has no such port and no slot for a
    NIC, so the plan says which links it has instead of counting the ports silently."""
    plan = solve_problem(Problem.model_validate(MAC), time_limit=20)
    assert plan.network is not None and plan.network.link == "eth-100g"
    assert any("no eth-100g port" in n and "thunderbolt5" in n for n in plan.notes)
    with_tb = {**MAC, "constraints": {**MAC["constraints"], "network": "thunderbolt5"}}
    plan = solve_problem(Problem.model_validate(with_tb), time_limit=20)
    assert not any("no thunderbolt5 port" in n for n in plan.notes)
