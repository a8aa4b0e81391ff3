"""A fixed-rate workload's replay (closed load: each ended sequence replaced at once) reports
the steady engine's figures however few requests it runs per slot: it opens in the closed
system's stationary state and stops counting when the drain begins (simulate_engine)."""

from __future__ import annotations

import statistics

import pytest

from planner.estimator.serving import token_budget
from planner.simulate.engine import simulate_engine

DECODE_S, PER_PROMPT_TOKEN_S = 0.030, 2e-5  # an iteration of 30 ms plus 20 us per prompt token
SLOTS, PROMPT, OUTPUT = 128, 1500, 256


def _iteration(decodes: int, prompt_tokens: float) -> float:
    return DECODE_S + PER_PROMPT_TOKEN_S * prompt_tokens


def _replay(counted: int) -> tuple[list[float], list[float]]:
    reqs = [(0.0, PROMPT, OUTPUT)] * (counted + 2 * SLOTS)
    res = simulate_engine(
        _iteration,
        slots=SLOTS,
        kv_tokens=SLOTS * 8192,
        budget=token_budget(SLOTS, PROMPT, OUTPUT),
        requests=reqs,
        closed=SLOTS,
        warmup=SLOTS,
    )
    assert len(res.tpot) == counted
    return res.tpot, res.ttft


@pytest.mark.parametrize("counted", [50, 177, 2000])
def test_closed_replay_reports_the_steady_engine(counted: int) -> None:
    # The budget is 128 + max(256, 1.5 x 128 x 1,500 / 256) = 1,253 tokens, 1,125 of room beside
    # the decodes: a prompt takes 2 iterations (1,125 + 375 tokens) and its first token comes
    # at the end of the second, then 255 more, so a sequence holds its slot 257 iterations and
    # 128 / 257 prompts of 1,500 tokens, 747.1 tokens, join the mean iteration:
    # 30 ms + 20 us x 747.1 = 44.94 ms per token, and a first token 2 x that after arrival.
    # Before the replay opened in the stationary state and left out the drain, 177 requests on
    # 128 slots read 40.3 ms (the first wave's decode-only stretches) and 0.37 s to first token.
    steady = DECODE_S + PER_PROMPT_TOKEN_S * PROMPT * SLOTS / 257
    assert steady == pytest.approx(0.04494, abs=1e-5)
    tpot, ttft = _replay(counted)
    assert statistics.median(tpot) == pytest.approx(steady, rel=1e-3)
    assert max(tpot) == pytest.approx(steady, rel=1e-3)
    assert min(tpot) == pytest.approx(steady, rel=1e-3)
    assert statistics.median(ttft) == pytest.approx(2 * steady, rel=1e-2)
