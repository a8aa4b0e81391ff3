"""Request-mix designs: pruning drops only designs no plan needs, and measured capacities
replace the estimate.

The property test solves generated small mixes twice, with the pruned design list and with every
design (no pruning, no hint), and asks for the same optimum.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog import load_catalog
from planner.estimator.designs import Design, Stage, allowed_devices
from planner.estimator.mix_enumeration import mix_designs
from planner.estimator.mix_pruning import undominated
from planner.schema.problem import InferenceWorkload, Problem
from planner.solve import Solver

DEVICES = ["l4", "l40s", "rtx-4090", "h100-sxm"]


def design(devices: dict[str, int], power_w: float) -> Design:
    """A stand-in design: only its devices and power matter to `undominated`."""
    stages = tuple(Stage(dev, 1, 1) for dev, n in devices.items() for _ in range(n))
    return Design("x", 1, stages, 1, 1.0, 1, 1.0, 0.1, power_w, devices)


def test_a_multiple_of_a_smaller_design_removes_a_larger_one() -> None:
    # Two lone replicas on one device each use what a two-stage pipeline on two devices uses and
    # serve more: the pipeline goes. One replica alone serves less than the pipeline: it stays.
    lone = design({"l4": 1}, 100.0)
    pipeline = design({"l4": 2}, 210.0)
    serves = [{0: 1.0, 1: 0.2}, {0: 1.8, 1: 0.35}]
    assert undominated([lone, pipeline], serves).tolist() == [0]
    # With less power than two lone replicas draw, the pipeline is not beaten.
    assert undominated([lone, design({"l4": 2}, 199.0)], serves).tolist() == [0, 1]
    # Serving a class the lone replica cannot (a longer one) keeps it too.
    assert undominated([lone, pipeline], [{0: 1.0}, {0: 1.8, 1: 0.35}]).tolist() == [0, 1]
    # Of identical designs the first stays.
    assert undominated([lone, lone], [{0: 1.0}, {0: 1.0}]).tolist() == [0]


def mix_problem(draw: st.DrawFn) -> Problem:
    devices = draw(st.lists(st.sampled_from(DEVICES), min_size=1, max_size=2, unique=True))
    classes = [
        {"name": "short", "input_tokens": 300, "output_tokens": 150},
        {
            "name": "long",
            "input_tokens": draw(st.sampled_from([4000, 16000])),
            "output_tokens": 600,
        },
    ]
    share = draw(st.sampled_from([0.5, 0.9]))
    classes[0]["share"], classes[1]["share"] = share, 1 - share
    constraints: dict[str, Any] = {
        "allowed_devices": devices,
        "max_stages": draw(st.integers(1, 2)),
    }
    if draw(st.booleans()):
        constraints["power_w"] = draw(st.sampled_from([2000.0, 6000.0]))
    doc = {
        "name": "mix",
        "workloads": [
            {
                "name": "bot",
                "model": draw(st.sampled_from(["llama-3.2-1b", "llama-3.1-8b"])),
                "requests_per_s": draw(st.sampled_from([0.5, 4.0, 15.0])),
                "request_mix": classes,
                "max_ttft_s": 20,
            }
        ],
        "constraints": constraints,
        "objective": {"goal": draw(st.sampled_from(["min_cost", "min_carbon"]))},
    }
    if doc["objective"]["goal"] == "min_carbon":
        doc["carbon"] = {"grid_gco2e_per_kwh": 400}
    return Problem.model_validate(doc)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.composite(mix_problem)())
def test_pruned_mix_designs_keep_the_optimum(problem: Problem) -> None:
    pruned = Solver(time_limit=60, why=False).solve(problem)
    every = Solver(time_limit=60, why=False, tuned=False).solve(problem)
    assert pruned.status == every.status
    if pruned.status != "OPTIMAL":
        return
    assert pruned.objective == pytest.approx(every.objective, rel=1e-9, abs=1.0)


def test_a_measured_capacity_replaces_the_estimate() -> None:
    doc = {
        "name": "measured",
        "workloads": [
            {
                "name": "bot",
                "model": "llama-3.1-8b",
                "requests_per_s": 10,
                "request_mix": [
                    {"name": "chat", "input_tokens": 300, "output_tokens": 200, "share": 0.8},
                    {"name": "docs", "input_tokens": 8000, "output_tokens": 500, "share": 0.2},
                ],
                "capacity": [{"device": "l40s", "tp": 1, "class": "chat", "requests_per_s": 3}],
            }
        ],
        "constraints": {"allowed_devices": ["l40s"], "max_stages": 1},
    }
    problem = Problem.model_validate(doc)
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload)
    cat = load_catalog()
    designs, serves, sized = mix_designs(w, problem, cat, allowed_devices(problem, cat), prune=True)
    lone = [
        (d, s, c)
        for d, s, c in zip(designs, serves, sized, strict=True)
        if d.devices == {"l40s": 1} and len(d.stages) == 1 and d.role == "both"
    ]
    # The measurement is authoritative (for whole requests; prefill and decode pools keep their
    # own estimates): every one-L40S replica serves chat at the measured 3
    # requests/s, whichever class sized it (a replica sized for documents keeps its estimate
    # for documents).
    assert lone
    assert all(s[0] == 3.0 for _, s, _ in lone)
    assert any(1 in s and s[1] != 3.0 for _, s, c in lone if c == 1)
    plan = Solver(time_limit=60, why=False).solve(problem)
    assert plan.status == "OPTIMAL"
    chat = [x for x in plan.workloads if x.requests_per_s.get("chat")]
    served = sum(x.requests_per_s["chat"] for x in chat)
    assert served >= 8.0 * (1 - 1e-9)
