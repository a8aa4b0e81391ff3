"""A request mix serves the requests that exist: its replica groups' shares of time may hold
more than the classes need (the solver leaves slack where it costs nothing), and the tokens a
plan counts, with its tokens per joule and price per token, come from the requests, not from
that slack (estimator.request_mix.mix_tokens_served_per_s, recomputed by the verifier)."""

from __future__ import annotations

import pytest
from plan_docs import served_by_side

from planner.estimator.request_mix import mix_tokens_served_per_s
from planner.schema.problem import InferenceWorkload, Problem
from planner.solve import solve_problem


def _mix(requests_per_s: float = 10.0) -> InferenceWorkload:
    return InferenceWorkload.model_validate(
        {
            "name": "a",
            "model": "llama-3.1-8b",
            "requests_per_s": requests_per_s,
            "request_mix": [
                {"name": "chat", "input_tokens": 300, "output_tokens": 200, "share": 0.9},
                {"name": "docs", "input_tokens": 24000, "output_tokens": 800, "share": 0.1},
            ],
        }
    )


def test_a_fixed_rate_serves_each_class_at_most_its_load() -> None:
    """10 requests/s: 9 chat (200 tokens each) and 1 document (800): 2,600 tokens/s however
    much time the groups hold; a class held short serves what it holds."""
    w = _mix()
    both = {"chat": 12.0, "docs": 3.0}  # more than the 9 and 1 that exist
    assert mix_tokens_served_per_s(w, 1.0, both, both, throughput_goal=False) == 2_600
    short = {"chat": 4.5, "docs": 1.0}
    assert mix_tokens_served_per_s(w, 1.0, short, short, throughput_goal=False) == 4.5 * 200 + 800
    # At half the demand (a quieter period) half the requests exist.
    assert mix_tokens_served_per_s(w, 0.5, both, both, throughput_goal=False) == 1_300


def test_a_request_is_served_once_prefilled_and_decoded() -> None:
    """Disaggregated pools: a class's requests are served at the rate of the scarcer side."""
    w = _mix()
    decoded, prefilled = {"chat": 9.0, "docs": 1.0}, {"chat": 9.0, "docs": 0.5}
    got = mix_tokens_served_per_s(w, 1.0, decoded, prefilled, throughput_goal=False)
    assert got == 9 * 200 + 0.5 * 800


def test_under_a_throughput_goal_the_scarcest_class_sets_the_rate() -> None:
    """The whole mix runs at the rate its scarcest class allows: chat held for 18 requests/s
    (20 of the mix), documents for 1.5 (15 of the mix): 15 requests/s of the mix, 3,900
    tokens/s."""
    w = _mix()
    held = {"chat": 18.0, "docs": 1.5}
    got = mix_tokens_served_per_s(w, 1.0, held, held, throughput_goal=True)
    assert got == pytest.approx(15 * (0.9 * 200 + 0.1 * 800))


def test_the_request_mix_example_serves_its_demand() -> None:
    """problems/request-mix.yaml: 40 requests/s, 90 % of 200 output tokens and 10 % of 800:
    10,400 tokens/s over the 18,396 hours at work, whatever slack the plan's shares hold."""
    from pathlib import Path

    from planner.load import load_problem

    problem = load_problem(Path(__file__).resolve().parent.parent / "problems" / "request-mix.yaml")
    plan = solve_problem(problem)
    assert plan.has_plan
    assert plan.served_tokens == pytest.approx(10_400 * 18_396 * 3600, rel=1e-9)


def test_a_disaggregated_mix_under_a_throughput_goal_counts_each_request_once() -> None:
    """A request served by a prefill pool and a decode pool is one request: the throughput
    objective counts the mix at the rate the scarcer side of its scarcest class allows. It once
    summed both pools' requests, and a plan's objective read 1.9x its own bound."""
    problem = Problem.model_validate(
        {
            "name": "split",
            "workloads": [
                {
                    "name": "a",
                    "model": "llama-3.1-8b",
                    "weights": "fp16",
                    "kv": "fp16",
                    "requests_per_s": 40,
                    "disaggregation": "on",
                    "request_mix": [
                        {"name": "chat", "input_tokens": 300, "output_tokens": 200, "share": 0.9},
                        {"name": "docs", "input_tokens": 24000, "output_tokens": 800, "share": 0.1},
                    ],
                    "max_ms_per_token": 60,
                    "max_ttft_s": 10,
                }
            ],
            "constraints": {"allowed_devices": ["l40s", "h100-sxm"], "budget_usd": 1_500_000},
            "horizon": {"procurement": ["buy"]},
            "objective": {"goal": "max_throughput"},
        }
    )
    plan = solve_problem(problem, time_limit=3)
    assert plan.has_plan and plan.objective is not None
    if plan.bound is not None:
        assert plan.objective <= plan.bound * (1 + 1e-9)
    sides = served_by_side(plan.workloads)
    shares = {"chat": (0.9, 200), "docs": (0.1, 800)}
    rate = min(min(sides["decode"][n], sides["prefill"][n]) / s for n, (s, _) in shares.items())
    assert plan.objective == pytest.approx(rate * (0.9 * 200 + 0.1 * 800), rel=1e-6)
