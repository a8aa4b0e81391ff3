"""Hourly demand merged into a few levels, conservatively: each hour is rounded up to its level.

A demand profile of a week has up to 168 different hourly values, and the model sizes rented
capacity per level, so each level adds variables and makes proofs slower. Merging the values
into at most K levels keeps every hour met (an hour's level is never below its value) and the
peak unchanged (the top level is the largest value, so bought capacity is sized as before);
only the hours rounded up may rent more than they need.

The levels are chosen to add the least demand: the distinct positive values, sorted, are cut
into at most K runs, each run taking its largest value as its level, minimizing the sum over
hours of (level - value). This is the classic optimal one-dimensional partition, solved by
dynamic programming over the sorted values (K x m x m for m distinct values, with numpy over
one axis; m is at most 168).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# When a problem does not say how many levels (`demand.levels`): at least DEFAULT_LEVELS (a
# profile with no more distinct values keeps them all), more while rounding up adds more than
# DEFAULT_ADDED_SHARE to the demand-hours, and never more than DEFAULT_MAX_LEVELS. Only rented
# capacity pays for the demand added.
DEFAULT_LEVELS = 12
DEFAULT_ADDED_SHARE = 0.005
# Each level is a period in the model (rented replicas per design and level), so the cap bounds
# the model's size: a week of 86 different hourly values with four procurement modes
# (benchmarks/bench_week.py) took 12, 24, 32 and 48 levels to a plan 3.5, 2.1, 1.9 and 2.0 %
# above the exact week's bound in 60 s; past about 32 the larger model's search loses what
# the finer levels gain.
DEFAULT_MAX_LEVELS = 48


@dataclass(frozen=True)
class Quantization:
    """What merging did: hourly values, distinct positive ones, levels kept, and the demand
    added by rounding up as a share of the profile's total (sum over hours of the scale)."""

    hours: int
    distinct: int
    levels: int
    added_share: float
    chosen: bool  # the problem set `demand.levels` (else the default rule picked the count)

    def note(self) -> str:
        how = (
            "`demand.levels` sets how many levels are kept"
            if self.chosen
            else f"by default at least {DEFAULT_LEVELS} levels, more while the rounding adds "
            f"over {DEFAULT_ADDED_SHARE:.1%}, at most {DEFAULT_MAX_LEVELS}; `demand.levels` sets "
            "how many are kept"
        )
        return (
            f"demand: the {self.hours} hourly values ({self.distinct} different ones) are merged "
            f"into {self.levels} levels, each hour rounded up to its level, so every hour's "
            f"demand is still met; this adds {self.added_share:.2%} to the demand-hours (rented "
            f"capacity only: the peak, and so what is bought, is unchanged); {how}"
        )


def round_up(
    values: Sequence[float], k: int, added_share: float = 0.0, at_least: int | None = None
) -> list[float]:
    """Each value rounded up to one of at most `k` levels (k >= 1) chosen to add the least;
    zeros stay zero (no demand, nothing runs). With `added_share` > 0, the fewest levels from
    `at_least` up to k whose least added demand is at most that share of the values' sum. With
    as many levels as distinct positive values, every value is kept as it is."""
    positive = sorted({v for v in values if v > 0})
    first = k if at_least is None else min(at_least, k)
    if len(positive) <= first:
        return list(values)
    v = np.array(positive, dtype=float)
    counts = np.array([sum(1 for x in values if x == p) for p in positive], dtype=float)
    m = len(v)
    c = np.concatenate(([0.0], np.cumsum(counts)))  # c[i] = hours with value index < i
    s = np.concatenate(([0.0], np.cumsum(counts * v)))
    allowed = added_share * float(s[m])
    # best[j]: least added demand covering values 0..j-1 with the levels used so far;
    # cut[t][j]: where the last run of that cover starts.
    best = np.full(m + 1, np.inf)
    best[0] = 0.0
    cuts: list[np.ndarray] = []
    for n in range(1, min(k, m) + 1):
        nxt = np.full(m + 1, np.inf)
        start = np.zeros(m + 1, dtype=int)
        for j in range(1, m + 1):  # a run of values i..j-1 at level v[j-1]
            run = np.arange(j)
            cost = best[run] + v[j - 1] * (c[j] - c[run]) - (s[j] - s[run])
            at = int(np.argmin(cost))
            nxt[j], start[j] = cost[at], at
        best = nxt
        cuts.append(start)
        if n >= first and best[m] <= allowed:
            break
    level_of: dict[float, float] = {}
    j = m
    for starts in reversed(cuts):
        if j == 0:
            break
        i = int(starts[j])
        for idx in range(i, j):
            level_of[positive[idx]] = positive[j - 1]
        j = i
    return [level_of[x] if x > 0 else x for x in values]


def quantize(values: Sequence[float], k: int | None) -> tuple[list[float], Quantization | None]:
    """The values merged into at most `k` levels (when None: the default rule above), and what
    that did (None when nothing was merged)."""
    merged, q = _quantized(tuple(values), k)
    return list(merged), q


@functools.lru_cache(maxsize=16)
def _quantized(
    values: tuple[float, ...], k: int | None
) -> tuple[tuple[float, ...], Quantization | None]:
    """`quantize`, remembered: a solve asks for the same profile's periods about ten times
    (tables, model, plan, verifier), and the default rule's partition takes tens of ms on a
    week of different values."""
    if k is None:
        merged = round_up(values, DEFAULT_MAX_LEVELS, DEFAULT_ADDED_SHARE, DEFAULT_LEVELS)
    else:
        merged = round_up(values, k)
    distinct = len({x for x in values if x > 0})
    kept = len({x for x in merged if x > 0})
    if kept == distinct:
        return tuple(merged), None
    total = float(sum(values))
    added = float(sum(merged)) - total
    share = added / total if total else 0.0
    return tuple(merged), Quantization(len(values), distinct, kept, share, chosen=k is not None)
