"""Hourly demand merged into levels: every hour rounded up, the least demand added, stated in
the plan."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from planner.estimator.demand_levels import (
    DEFAULT_ADDED_SHARE,
    DEFAULT_LEVELS,
    DEFAULT_MAX_LEVELS,
    quantize,
    round_up,
)
from planner.estimator.economics import demand_periods
from planner.load import load_problem
from planner.schema.problem import Demand
from planner.solve import solve_problem


def _least_added(values: list[float], k: int) -> float:
    """By brute force: the least sum of (level - value) over every way to cut the sorted
    distinct values into at most k runs, each at its largest value."""
    pos = sorted({v for v in values if v > 0})
    best = 0.0 if not pos else float("inf")
    for r in range(min(k, len(pos))):
        for cuts in itertools.combinations(range(1, len(pos)), r):
            level: dict[float, float] = {}
            start = 0
            for end in (*cuts, len(pos)):
                level.update({q: pos[end - 1] for q in pos[start:end]})
                start = end
            best = min(best, sum(level[x] - x for x in values if x > 0))
    return best


def test_round_up_is_conservative_and_adds_the_least() -> None:
    rng = random.Random(7)
    for _ in range(150):
        values = [rng.choice([0, 0.1, 0.2, 0.35, 0.5, 0.8, 1.0, 1.4]) for _ in range(12)]
        k = rng.randint(1, 4)
        got = round_up(values, k)
        assert all(g >= v for g, v in zip(got, values, strict=True))
        assert all((g == 0) == (v == 0) for g, v in zip(got, values, strict=True))
        assert len({g for g in got if g > 0}) <= k
        assert max(got) == max(values)
        assert abs((sum(got) - sum(values)) - _least_added(values, k)) < 1e-9


def test_few_values_are_kept_as_they_are() -> None:
    values = [0.2] * 12 + [1.0] * 12
    assert quantize(values, None) == (values, None)


def test_a_plan_on_merged_levels_meets_every_hour_and_says_so() -> None:
    problem = load_problem(Path("problems/rent-the-peak.yaml"))
    hourly = [round(0.2 + 0.04 * h, 2) for h in range(24)]  # 24 different values
    demand = Demand(hourly=hourly, levels=3)
    problem = problem.model_copy(update={"demand": demand})
    periods = demand_periods(problem)
    assert len(periods) == 3
    assert periods[0].scale == max(hourly)
    merged, q = quantize(hourly, 3)
    assert q is not None and q.levels == 3 and q.added_share > 0
    assert sorted({p.scale for p in periods}) == sorted(set(merged))
    plan = solve_problem(problem, time_limit=20)  # verified against the merged levels
    assert plan.status.has_plan
    assert any("merged into 3 levels" in n for n in plan.notes)


def test_period_names_stay_unique_when_levels_span_as_many_hours() -> None:
    problem = load_problem(Path("problems/rent-the-peak.yaml"))
    # 12 levels of 14 scattered hours each: every name falls back to "14 of 168 hours".
    hourly = [round(0.1 + 0.05 * ((h * 5) % 12), 2) for h in range(168)]
    problem = problem.model_copy(update={"demand": Demand(hourly=hourly)})
    names = [p.name for p in demand_periods(problem)]
    assert len(names) == 12 and len(set(names)) == 12


def test_the_default_keeps_the_fewest_levels_that_add_at_most_the_stated_share() -> None:
    # A week with many different hourly values: at least DEFAULT_LEVELS, and one level fewer
    # would add more than DEFAULT_ADDED_SHARE (unless the floor or the cap decided).
    rng = random.Random(11)
    for spread in (0.02, 0.2, 1.0):
        hourly = [round(0.3 + spread * rng.random(), 4) for _ in range(168)]
        merged, q = quantize(hourly, None)
        assert q is not None and not q.chosen and "by default" in q.note()
        assert all(m >= h for m, h in zip(merged, hourly, strict=True))
        assert DEFAULT_LEVELS <= q.levels <= DEFAULT_MAX_LEVELS
        assert q.added_share <= DEFAULT_ADDED_SHARE or q.levels == DEFAULT_MAX_LEVELS
        if q.levels > DEFAULT_LEVELS:
            fewer = round_up(hourly, q.levels - 1)
            assert (sum(fewer) - sum(hourly)) / sum(hourly) > DEFAULT_ADDED_SHARE
        # The count it picked, asked for explicitly, merges the same way.
        assert quantize(hourly, q.levels)[0] == merged


def test_a_profile_of_few_values_keeps_them_all_by_default() -> None:
    hourly = [0.1 * (1 + h % DEFAULT_LEVELS) for h in range(168)]
    assert quantize(hourly, None) == (hourly, None)
