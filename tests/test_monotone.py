"""The optimum moves one way in every limit that has a direction: loosening a limit never makes
the proved optimum worse (and never turns a feasible problem infeasible). Concurrency pulls both
ways (docs/serving.md); with the tokens per sequence held fixed, more sequences never cost less.
Only proved optima are compared."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner.load import load_problem
from planner.plan.types import Plan
from planner.schema.problem import Problem
from planner.solve import solve_problem

DEVICES = ["rtx-4090", "a100-80gb-sxm", "h100-sxm", "mi300x", "l40s"]


@st.composite
def problems(draw: st.DrawFn, state: str | None = None) -> dict[str, Any]:
    """A serving problem; the limit named by `state` (a key of `_loosen`) is always stated."""
    devices = draw(st.lists(st.sampled_from(DEVICES), min_size=1, max_size=3, unique=True))
    concurrency = draw(st.sampled_from([4, 16, 64]))
    w: dict[str, Any] = {
        "name": "serve",
        "model": draw(st.sampled_from(["llama-3.2-1b", "llama-3.1-8b"])),
        "weights": draw(st.sampled_from(["fp16", "fp8"])),
        "context_tokens": draw(st.sampled_from([2048, 8192])),
        "prompt_tokens": draw(st.sampled_from([200, 1000])),
        "output_tokens": draw(st.sampled_from([100, 400])),
        "concurrency": concurrency,
        "min_tokens_per_s": float(concurrency * draw(st.sampled_from([5, 20, 40]))),
    }
    if state == "tpot" or draw(st.booleans()):
        w["max_ms_per_token"] = draw(st.sampled_from([20.0, 40.0, 80.0]))
    if state == "ttft" or draw(st.booleans()):
        w["max_ttft_s"] = draw(st.sampled_from([0.2, 1.0]))
    constraints: dict[str, Any] = {
        "allowed_devices": devices,
        "max_stages": draw(st.integers(1, 2)),
    }
    if state == "power" or draw(st.booleans()):
        constraints["power_w"] = draw(st.sampled_from([1000.0, 3000.0, 10000.0]))
    if state == "devices" or draw(st.booleans()):
        constraints["max_devices"] = draw(st.sampled_from([1, 2, 4, 8]))
    if state == "budget" or draw(st.booleans()):
        constraints["budget_usd"] = draw(st.sampled_from([20000.0, 80000.0, 300000.0]))
    return {
        "name": "monotone",
        "workloads": [w],
        "constraints": constraints,
        "horizon": {"procurement": "buy", "utilization": 0.5},
    }


def _solve(doc: dict[str, Any], overrides: list[str] | None = None) -> Plan:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "problem.yaml"
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        problem: Problem = load_problem(path, overrides or [])
    return solve_problem(problem, time_limit=20)


def _loosen(doc: dict[str, Any], key: str) -> list[str] | None:
    """The --set override that loosens `key`, or None when the problem does not state it."""
    w, c = doc["workloads"][0], doc["constraints"]
    table = {
        "budget": ("constraints.budget_usd", c.get("budget_usd"), 2.0),
        "power": ("constraints.power_w", c.get("power_w"), 2.0),
        "devices": ("constraints.max_devices", c.get("max_devices"), 2),
        "tpot": ("workloads.serve.max_ms_per_token", w.get("max_ms_per_token"), 1.5),
        "ttft": ("workloads.serve.max_ttft_s", w.get("max_ttft_s"), 2.0),
        "demand": ("workloads.serve.min_tokens_per_s", w.get("min_tokens_per_s"), 0.5),
    }
    path, value, factor = table[key]
    if value is None:
        return None
    return [f"{path}={value * factor}"]


def _cost(plan: Plan) -> float:
    return plan.tco_usd


KEYS = ["budget", "power", "devices", "tpot", "ttft", "demand"]


@pytest.mark.parametrize("key", KEYS)
def test_loosening_a_limit_never_raises_the_optimum(key: str) -> None:
    """Every limit is compared on problems that state it and are feasible when it is tight
    (`assume` makes Hypothesis draw until it has its examples, and fails the test as
    unsatisfiable when it cannot find them), so no limit passes without a comparison."""

    @settings(
        max_examples=8,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
    )
    @given(problems(state=key))
    def check(doc: dict[str, Any]) -> None:
        change = _loosen(doc, key)
        assert change is not None  # the strategy states the limit
        tight = _solve(doc)
        assume(tight.status == "OPTIMAL")
        _compare(doc, key, change, tight)

    check()


def _compare(doc: dict[str, Any], key: str, change: list[str], tight: Plan) -> None:
    loose = _solve(doc, change)
    assert loose.status == "OPTIMAL", (key, change, loose.notes)
    # Costs are whole dollars per cost term in the solver: allow that rounding.
    assert _cost(loose) <= _cost(tight) * (1 + 1e-6) + 50, (key, change)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(problems())
def test_more_sequences_at_the_same_speed_never_cost_less(doc: dict[str, Any]) -> None:
    w = doc["workloads"][0]
    fewer = _solve(doc)
    more = _solve(
        doc,
        [
            f"workloads.serve.concurrency={w['concurrency'] * 2}",
            f"workloads.serve.min_tokens_per_s={w['min_tokens_per_s'] * 2}",
        ],
    )
    if fewer.status == "OPTIMAL" and more.status == "OPTIMAL":
        assert _cost(more) >= _cost(fewer) * (1 - 1e-6) - 50
    if fewer.status == "INFEASIBLE" and "budget_usd" not in doc["constraints"]:
        # Without a money limit, twice the load at the same speed cannot become feasible.
        assert more.status != "OPTIMAL" or doc["constraints"].get("max_devices") is None


def test_fewer_sequences_need_faster_ones() -> None:
    # Fixed total tokens/s: 1,000 tokens/s from 4 sequences needs 4 ms per token, which a 70B
    # model reaches on no device; from 64 sequences it is easy.
    base = {
        "name": "few",
        "workloads": [
            {
                "name": "serve",
                "model": "llama-3.1-70b",
                "weights": "fp8",
                "context_tokens": 4096,
                "prompt_tokens": 500,
                "concurrency": 64,
                "min_tokens_per_s": 1000,
            }
        ],
        "constraints": {"allowed_devices": ["h100-sxm"]},
    }
    assert _solve(base).status == "OPTIMAL"
    assert _solve(base, ["workloads.serve.concurrency=4"]).status == "INFEASIBLE"


@pytest.mark.parametrize("goal", ["max_throughput", "max_tokens_per_joule"])
def test_token_objectives_count_only_tokens_the_sequences_make(goal: str) -> None:
    doc = {
        "name": "capped",
        "workloads": [
            {
                "name": "serve",
                "model": "llama-3.1-8b",
                "concurrency": 16,
                "prompt_tokens": 500,
            }
        ],
        "constraints": {"allowed_devices": ["h100-sxm"], "max_devices": 8},
        "objective": {"goal": goal},
    }
    plan = _solve(doc)
    assert plan.status == "OPTIMAL"
    made = sum(x.tokens_per_s for x in plan.workloads)
    fastest = min(x.ms_per_token or 1e9 for x in plan.workloads)
    assert made <= 16 * 1000.0 / fastest * (1 + 1e-9)
