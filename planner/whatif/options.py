"""Buy, rent, or call an API: the problem solved at several demand levels with devices bought
only and with devices rented only, beside a managed API's price for the same tokens
(planner.estimator.api), and which is cheapest at each level.

A demand level scales every inference workload's demand: its concurrency (rounded, at least 1),
min_tokens_per_s and requests_per_s. Where the cheapest option changes between two levels, the
change is reported between those levels; finer levels locate it more closely.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from planner.errors import InputError
from planner.estimator.api import ApiQuote, cheapest_api
from planner.estimator.economics import demand_periods
from planner.plan.types import Plan
from planner.schema.problem import InferenceWorkload, Problem
from planner.solve import Solver

RENT_MODES = ("on_demand", "reserved", "spot")


@dataclass(frozen=True)
class OptionRow:
    scale: float
    output_tokens_per_s: float | None  # served on average over the working hours
    buy: Plan
    rent: Plan
    api: ApiQuote | None

    def costs(self) -> dict[str, float]:
        """Option -> cost over the horizon, for the options that have one."""
        out = {}
        if self.buy.has_plan:
            out["buy"] = self.buy.tco_usd
        if self.rent.has_plan:
            out["rent"] = self.rent.tco_usd
        if self.api is not None:
            out["api"] = self.api.usd
        return out

    @property
    def cheapest(self) -> str | None:
        costs = self.costs()
        return min(costs, key=lambda k: costs[k]) if costs else None


def scaled(problem: Problem, scale: float) -> Problem:
    """The problem with every inference workload's demand times `scale`."""
    if scale <= 0 or not math.isfinite(scale):
        raise InputError(f"--demand: {scale:g} is not a positive multiple of the demand")
    workloads = []
    for w in problem.workloads:
        if isinstance(w, InferenceWorkload):
            # Only the demand the workload states: a request mix's rate (its sequences follow
            # from it), else its concurrency and token rate.
            stated = w.model_fields_set
            update: dict[str, object] = {}
            if w.request_mix is not None:
                if w.requests_per_s:
                    update["requests_per_s"] = w.requests_per_s * scale
            else:
                if w.concurrency is not None and "concurrency" in stated:
                    update["concurrency"] = max(1, round(w.concurrency * scale))
                if w.min_tokens_per_s:
                    update["min_tokens_per_s"] = w.min_tokens_per_s * scale
            w = w.model_copy(update=update)
        workloads.append(w)
    # Validated again, as a file would be: a scaled demand meets the same limits (the largest
    # concurrency and rates a problem may state) and never reaches the solver unchecked. Only
    # what was stated (or scaled) goes in, so values derived at validation are derived again.
    doc = {
        **problem.model_dump(exclude_unset=True),
        "workloads": [w.model_dump(exclude_unset=True) for w in workloads],
    }
    try:
        return Problem.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if p not in ("inference", "training"))
        why = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(
            f"--demand {scale:g}: at {scale:g}x its demand the problem is not valid: "
            f"`{where}`: {why}; give a smaller multiple"
        ) from None


def _with_modes(problem: Problem, modes: list[str]) -> Problem:
    horizon = problem.horizon.model_copy(update={"procurement": modes})
    return problem.model_copy(update={"horizon": horizon})


def compare_options(problem: Problem, scales: Sequence[float], solver: Solver) -> list[OptionRow]:
    """At each demand scale: the cheapest plan buying only, renting only, and the API."""
    rows = []
    seconds = 3600 * sum(p.hours for p in demand_periods(problem))
    for s in scales:
        p = scaled(problem, s)
        buy = solver.solve(_with_modes(p, ["buy"]))
        rent = solver.solve(_with_modes(p, list(RENT_MODES)))
        served = next((x.served_tokens for x in (buy, rent) if x.has_plan), None)
        api = cheapest_api(p, solver.cat, served) if served is not None else None
        rows.append(OptionRow(s, served / seconds if served and seconds else None, buy, rent, api))
    return rows


def changes(rows: Sequence[OptionRow]) -> list[str]:
    """Where the cheapest option changes between consecutive demand levels."""
    out = []
    for a, b in itertools.pairwise(rows):
        if a.cheapest and b.cheapest and a.cheapest != b.cheapest:
            out.append(
                f"between {a.scale:g}x and {b.scale:g}x the demand, the cheapest changes from "
                f"{a.cheapest} to {b.cheapest}"
            )
    return out
