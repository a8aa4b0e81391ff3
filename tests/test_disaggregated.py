"""Disaggregated serving: prefill and decode pools sized together for a request mix."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from planner.catalog import load_catalog
from planner.errors import PlannerError
from planner.estimator.serving import decode_latency, kv_transfer_s, prefill_latency
from planner.load import load_problem
from planner.schema.problem import InferenceWorkload, Problem
from planner.simulate import simulate_plan
from planner.solve import solve_problem
from planner.verify import verify


def _doc(mode: Any) -> dict[str, Any]:
    return {
        "name": "rag",
        "workloads": [
            {
                "name": "rag",
                "model": "llama-3.1-8b",
                "requests_per_s": 6,
                "disaggregation": mode,
                "max_e2e_s": 12,
                "latency_percentile": 95,
                "request_mix": [
                    {"name": "chat", "input_tokens": 800, "output_tokens": 200, "share": 0.7},
                    {"name": "docs", "input_tokens": 6000, "output_tokens": 300, "share": 0.3},
                ],
            }
        ],
        "constraints": {"allowed_devices": ["l40s", "h100-sxm"], "max_stages": 1},
    }


def _solve(mode: Any) -> tuple[Problem, Any]:
    problem = Problem.model_validate(_doc(mode))
    plan = solve_problem(problem, time_limit=60)
    assert plan.status == "OPTIMAL", plan.notes
    return problem, plan


def test_on_plans_prefill_and_decode_pools_that_cover_every_class() -> None:
    _, plan = _solve("on")
    roles = {w.role for w in plan.workloads}
    assert roles == {"prefill", "decode"}
    for cls in ("chat", "docs"):
        need = 6 * (0.7 if cls == "chat" else 0.3)
        for role in ("prefill", "decode"):
            got = sum(w.requests_per_s.get(cls, 0.0) for w in plan.workloads if w.role == role)
            assert got >= need * (1 - 1e-4)
    # Output tokens are counted once, where they are decoded (not again at the prefill pool):
    # as many as whole-request replicas serve.
    _, whole = _solve("off")
    # Within 10 %: share rounding, and request shares served beyond the demand (free to a
    # min-cost solve, so two optima differ: whole baseboards leave room the solver may fill);
    # counting the prefill pool's tokens again would double it.
    assert plan.served_tokens == pytest.approx(whole.served_tokens, rel=0.1)


def test_auto_is_never_worse_than_either_alone() -> None:
    # auto's design space holds both on's and off's: its proved optimum is no dearer.
    costs = {mode: _solve(mode)[1].tco_usd for mode in ("auto", "on", "off")}
    assert costs["auto"] <= min(costs["on"], costs["off"]) * (1 + 1e-6), costs
    _, off = _solve("off")
    assert {w.role for w in off.workloads} == {"both"}


def test_the_verifier_rejects_a_plan_missing_its_decode_pool() -> None:
    problem, plan = _solve("on")
    broken = dataclasses.replace(plan, workloads=[w for w in plan.workloads if w.role != "decode"])
    with pytest.raises(PlannerError, match="decodes 0 requests/s"):
        verify(broken, problem, load_catalog())


def test_the_verifier_rejects_pools_when_disaggregation_is_off() -> None:
    problem, plan = _solve("on")
    off = Problem.model_validate(_doc("off"))
    with pytest.raises(PlannerError, match="disaggregation off"):
        verify(plan, off, load_catalog())
    assert problem.workloads[0].disaggregation == "on"


def test_unquoted_yaml_on_and_off_mean_the_modes(tmp_path: Path) -> None:
    # YAML 1.1 reads `on` / `off` as booleans.
    text = "name: x\nworkloads:\n  - name: a\n    model: llama-3.1-8b\n    requests_per_s: 1\n"
    text += "    disaggregation: off\n    request_mix:\n"
    text += "      - {name: c, input_tokens: 100, output_tokens: 10, share: 1}\n"
    path = tmp_path / "p.yaml"
    path.write_text(text)
    w = load_problem(path).workloads[0]
    assert isinstance(w, InferenceWorkload) and w.disaggregation == "off"


def test_on_without_a_request_mix_is_refused_with_the_place(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: x\nworkloads:\n  - name: a\n    model: llama-3.1-8b\n    disaggregation: on\n"
    )
    with pytest.raises(PlannerError, match=r"p\.yaml:5.*disaggregation"):
        load_problem(path)


def test_pools_meet_the_ceiling_in_the_replay() -> None:
    problem, plan = _solve("on")
    rep = simulate_plan(plan.workloads, problem, load_catalog(), requests=4000, seed=3)
    assert rep.percentiles("e2e")[95] <= 12 * 1.05


def test_transfer_and_pool_latency_by_hand() -> None:
    # 2,000 prompt tokens of Llama 3.1 8B KV at fp16: 32 layers x 2 x 8 heads x 128 x 2 bytes
    # = 131,072 bytes per token; over one 400 Gb/s port (50 GB/s) plus 5 us.
    kv = 131_072 * 2000
    assert kv_transfer_s(kv, 50e9, 5e-6) == pytest.approx(kv / 50e9 + 5e-6)

    def it(decodes: float, tokens: float) -> float:
        return 0.01 + 1e-4 * tokens + 1e-4 * decodes  # a linear engine, seconds

    # One prompt at a trickle: its own iteration plus the transfer, no wait.
    lat = prefill_latency(it, rate=1e-6, prompt=1000, transfer_s=0.02)
    assert lat.ttft_s[50] == pytest.approx(0.01 + 0.1 + 0.02, rel=1e-6)
    # Past the engine's capacity there is no steady state.
    assert prefill_latency(it, rate=100.0, prompt=1000, transfer_s=0.0).ttft_s[95] == float("inf")
    # A decode engine at a trickle: one sequence, 10 iterations of 0.0101 s plus half of one.
    dec = decode_latency(it, slots=8, rate=1e-6, prompt=1000, output=10)
    assert dec.e2e_s[50] == pytest.approx(0.5 * 0.0101 + 9 * 0.0101, rel=1e-3)


def test_each_chain_feeds_its_prefill_engine_the_groups_planned_mix(monkeypatch: Any) -> None:
    # Two decode groups (chat on one L40S, docs on two) share one prefill engine. A chain's
    # arrivals are its decode group's share of what the prefill pool takes (pool_factor over
    # every group, not over its own), and the engine's background brings each class to the
    # planned mix, none of a class the chain already carries whole: the engine sees about
    # 4.2 chat and 1.8 docs requests/s in both chains (it saw 6.2 docs/s in the docs chain,
    # 3.4 x its share, and queued for minutes).
    import numpy as np

    import planner.simulate.pools as pools
    from planner.simulate.pools import pool_factor

    problem, plan = _solve("on")
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload)
    seen: list[dict[str, float]] = []
    real = pools.simulate_engine

    def spy(it: Any, *, slots: int, kv_tokens: float, budget: Any, requests: Any) -> Any:
        span = max(r[0] for r in requests)
        docs = sum(1 for r in requests if r[1] > 1000)
        seen.append({"docs": docs / span, "chat": (len(requests) - docs) / span})
        return real(it, slots=slots, kv_tokens=kv_tokens, budget=budget, requests=requests)

    monkeypatch.setattr(pools, "simulate_engine", spy)
    pre = [g for g in plan.workloads if g.role == "prefill"]
    decode = [g for g in plan.workloads if g.role == "decode"]
    assert len(pre) == 1 and len(decode) == 2
    factor = pool_factor(plan.workloads, w.name)
    for d in decode:
        rng = np.random.default_rng(5)
        pools.replay_pools(problem, load_catalog(), w, pre, d, 1.0, 3000, rng, factor=factor)
    planned = pre[0].requests_per_s
    for rates in seen:
        for cls in ("chat", "docs"):
            assert rates[cls] == pytest.approx(planned[cls], rel=0.1), (seen, planned)
