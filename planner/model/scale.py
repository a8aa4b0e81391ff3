"""Floats become integers here only: the model's scales and the one conversion, rounded on
the safe side (capacity down, requirements and costs up), with an overflow check; and the
fraction a ratio objective may use inside 64-bit coefficients."""

from __future__ import annotations

import math
from fractions import Fraction

from planner.errors import InternalError

THROUGHPUT_SCALE = 1000  # milli-tokens per second
RATE_SCALE = 1000  # milli-requests per second
SHARE_STEPS = 1000  # a replica's time is split among request classes in steps of 1/1000
PREM, CLOUD, JOB = "on-premises", "cloud", "job"  # where replicas run (JOB: a rented training job)
INT_LIMIT = 2**62
COEF_LIMIT = 2**60  # bound on |objective| of a ratio step, with room under CP-SAT's int64 checks


def to_int(x: float, what: str, up: bool = True) -> int:
    """`x` as a model integer: rounded up (`up`) or down, within the solver's 64-bit range."""
    v = math.ceil(x - 1e-9) if up else math.floor(x + 1e-9)
    if abs(v) > INT_LIMIT:
        raise InternalError(
            f"coefficient `{what}` = {x:.3g} does not fit the solver's 64-bit integers"
        )
    return int(v)


def ratio_within(n: int, d: int, reach: tuple[int, int], *, up: bool) -> Fraction | None:
    """A fraction p/q close to n/d (at or above it when `up`, else at or below) such that
    q*num - p*den stays inside 64-bit integers, given the largest |num| and |den| (`reach`).
    None when even q = 1 does not fit."""
    exact = Fraction(n, d)
    num_reach, den_reach = reach
    if d * num_reach + abs(n) * den_reach <= COEF_LIMIT:
        return exact
    # With p <= q*|n/d| + 1: |q*num - p*den| <= q * (num_reach + |n/d| * den_reach) + den_reach.
    q_max = int((COEF_LIMIT - den_reach) // (num_reach + abs(exact) * den_reach))
    if q_max < 1:
        return None
    p = math.ceil(exact * q_max) if up else math.floor(exact * q_max)
    return Fraction(p, q_max)  # within 1/q_max of n/d
