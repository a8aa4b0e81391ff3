"""The queueing pieces of the loaded-latency model, pinned to hand arithmetic and their sources."""

from __future__ import annotations

import math

import pytest

from planner.estimator.serving import (
    _exp_tail_quantile,
    _mixture_tail_quantile,
    erlang_c,
    md_c_wait_scale,
    slot_wait_probability,
)


@pytest.mark.parametrize(("slots", "offered"), [(1, 0.5), (8, 4.3), (40, 32.0)])
def test_constant_stays_and_no_peakedness_give_erlang_c(slots: int, offered: float) -> None:
    hold = 10.0
    p = slot_wait_probability(slots, offered / hold, hold, hold)
    assert p == pytest.approx(erlang_c(slots, offered), rel=1e-9)


def test_a_slower_queue_and_a_peaked_count_both_make_waiting_likelier() -> None:
    base = slot_wait_probability(40, 1.6, 17.0, 17.0)
    assert slot_wait_probability(40, 1.6, 17.0, 17.0, hold_queued=20.0) > base
    peaked = [slot_wait_probability(40, 1.6, 17.0, 17.0, peakedness=z) for z in (1.5, 2.0, 2.5)]
    assert base < peaked[0] < peaked[1] < peaked[2]
    # A queue that never drains: every arrival waits.
    assert slot_wait_probability(40, 2.0, 17.0, 17.0, hold_queued=20.0) == 1.0


def test_cosmetatos_scale() -> None:
    # 8 servers at rho = 0.5: 1/2 x (1 + 0.5 x 7 x (sqrt(44) - 2) / (16 x 0.5 x 8))
    #   = 1/2 x (1 + 3.5 x 4.63325 / 64) = 0.62669
    assert md_c_wait_scale(8, 0.5) == pytest.approx(0.62669, abs=1e-5)
    # Heavy traffic and one server: Allen-Cunneen's 1/2.
    assert md_c_wait_scale(8, 1.0) == pytest.approx(0.5)
    assert md_c_wait_scale(1, 0.5) == 0.5


def test_a_mixture_quantile() -> None:
    # One part: the exponential tail's own quantile, ln(0.4 / 0.05) / 2 = 1.0397 s.
    one = _mixture_tail_quantile([(1.0, 0.4, 2.0, 0.0)], 0.95)
    assert one == pytest.approx(_exp_tail_quantile(0.4, 2.0, 0.95), rel=1e-3)
    assert one == pytest.approx(math.log(8.0) / 2.0, rel=1e-3)
    # Half the requests wait Exp(1) after 0.5 s, the others never: 0.5 exp(-(t - 0.5)) = 0.05
    # at t = 0.5 + ln 10 = 2.8026 s.
    two = _mixture_tail_quantile([(0.5, 1.0, 1.0, 0.5), (0.5, 0.0, 1.0, 0.0)], 0.95)
    assert two == pytest.approx(0.5 + math.log(10.0), rel=1e-3)
    # Tails that never reach the percentile: no wait.
    assert _mixture_tail_quantile([(0.5, 0.08, 1.0, 0.0)], 0.95) == 0.0
