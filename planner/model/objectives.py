"""One object per objective: its expression over the model's quantities, its sense, its unit,
how its value is read back from the solver's integers, how it is recomputed from a finished
plan's figures, and how it is held fixed while a tie-break is optimized. Adding an objective
touches the problem schema (the goal's name) and one class here."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from planner.model.ortools_cp import cp_model
from planner.model.quantities import Quantities
from planner.model.scale import THROUGHPUT_SCALE, ratio_within


@dataclass(frozen=True)
class Figures:
    """A finished plan's figures that objectives are recomputed from (plain numbers, so the
    plan builder and the verifier can both supply them)."""

    tco_usd: float  # total cost over the horizon
    carbon_kg: float | None  # total emissions over the horizon (with a carbon section)
    capacity_tokens_per_s: float  # fixed-rate inference capacity in the busiest period
    power_w: float  # devices and hosts at load in the busiest period, before PUE
    working_seconds: float  # seconds of work over the horizon (utilization applied)


class Objective:
    goal = ""
    unit = ""
    minimize = True
    ratio = False  # solved by Dinkelbach's method over (numerator, denominator)

    def expression(self, q: Quantities) -> cp_model.LinearExpr:
        raise NotImplementedError

    def ratio_parts(self, q: Quantities) -> tuple[cp_model.LinearExpr, cp_model.LinearExpr]:
        raise NotImplementedError

    def read(self, raw: float, working_seconds: float) -> float:
        """The solver's value (integers at the model's scale) in this objective's unit;
        `working_seconds` is the horizon's working time (per-token objectives need it)."""
        return raw

    def recompute(self, f: Figures) -> float | None:
        """This objective's value from a plan's figures (floats, no rounding)."""
        raise NotImplementedError

    def format(self, value: float, *, sign: bool = False) -> str:
        s = "+" if sign and value >= 0 else ("-" if value < 0 else "")
        return f"{s}{abs(value):,.4g} {self.unit}"

    def fix(self, q: Quantities, raw: float, values: tuple[int, ...]) -> None:
        """Keep later solves (tie-breaks) at this objective's optimum `raw`."""
        expr = self.expression(q)
        if self.minimize:
            q.m.add(expr <= round(raw))
        else:
            q.m.add(expr >= round(raw))


class MinCost(Objective):
    goal, unit = "min_cost", "USD over the horizon"

    def expression(self, q: Quantities) -> cp_model.LinearExpr:
        return q.tco_expr()  # whole dollars, every cost term rounded up

    def recompute(self, f: Figures) -> float | None:
        return f.tco_usd

    def format(self, value: float, *, sign: bool = False) -> str:
        s = "+" if sign and value >= 0 else ("-" if value < 0 else "")
        return f"{s}${abs(value):,.0f}"


class MinCarbon(Objective):
    goal, unit = "min_carbon", "kg CO2e over the horizon"

    def expression(self, q: Quantities) -> cp_model.LinearExpr:
        return q.carbon_expr()  # whole grams, rounded up

    def read(self, raw: float, working_seconds: float) -> float:
        return raw / 1000  # grams -> kg

    def recompute(self, f: Figures) -> float | None:
        return f.carbon_kg

    def format(self, value: float, *, sign: bool = False) -> str:
        s = "+" if sign and value >= 0 else ("-" if value < 0 else "")
        return f"{s}{abs(value):,.0f} kg CO2e"


class MinPower(Objective):
    """Only a tie-break: the least power among plans that tie on the goal."""

    goal, unit = "min_power", "W"

    def expression(self, q: Quantities) -> cp_model.LinearExpr:
        return q.power_expr()

    def recompute(self, f: Figures) -> float | None:
        return f.power_w


class MaxThroughput(Objective):
    goal, unit, minimize = "max_throughput", "tokens/s", False

    def expression(self, q: Quantities) -> cp_model.LinearExpr:
        return q.throughput_expr()  # milli-tokens/s, every design's rate rounded down

    def read(self, raw: float, working_seconds: float) -> float:
        return raw / THROUGHPUT_SCALE

    def recompute(self, f: Figures) -> float | None:
        return f.capacity_tokens_per_s

    def format(self, value: float, *, sign: bool = False) -> str:
        s = "+" if sign and value >= 0 else ("-" if value < 0 else "")
        return f"{s}{abs(value):,.0f} tokens/s"


class MaxTokensPerJoule(Objective):
    """Capacity tokens/s over power at load in the busiest period (before PUE)."""

    goal, unit, minimize, ratio = "max_tokens_per_joule", "tokens/J", False, True

    def ratio_parts(self, q: Quantities) -> tuple[cp_model.LinearExpr, cp_model.LinearExpr]:
        return q.throughput_expr(), q.power_expr()

    def read(self, raw: float, working_seconds: float) -> float:
        return raw / THROUGHPUT_SCALE  # milli-tokens/s per W

    def recompute(self, f: Figures) -> float | None:
        return f.capacity_tokens_per_s / f.power_w if f.power_w else 0.0

    def format(self, value: float, *, sign: bool = False) -> str:
        s = "+" if sign and value >= 0 else ("-" if value < 0 else "")
        return f"{s}{abs(value):,.3f} tokens/J"

    def fix(self, q: Quantities, raw: float, values: tuple[int, ...]) -> None:
        # Keep throughput / power >= n/d (n/d at or just below the optimum N/D).
        thr, power = self.ratio_parts(q)
        lam = _ratio(values, q, thr, power, up=False)
        if lam is not None:
            q.m.add(lam.denominator * thr - lam.numerator * power >= 0)


class MinCostPerToken(Objective):
    """Total cost over the capacity's output tokens in the working hours, per million."""

    goal, unit, ratio = "min_cost_per_token", "USD per million tokens", True

    def ratio_parts(self, q: Quantities) -> tuple[cp_model.LinearExpr, cp_model.LinearExpr]:
        return q.tco_expr(), q.throughput_expr()

    def read(self, raw: float, working_seconds: float) -> float:
        # USD per milli-token/s of capacity -> USD per million tokens over the working time.
        return raw * THROUGHPUT_SCALE / working_seconds * 1e6 if working_seconds else 0.0

    def recompute(self, f: Figures) -> float | None:
        tokens = f.capacity_tokens_per_s * f.working_seconds
        return f.tco_usd / tokens * 1e6 if tokens else None

    def format(self, value: float, *, sign: bool = False) -> str:
        s = "+" if sign and value >= 0 else ("-" if value < 0 else "")
        return f"{s}${abs(value):,.4f} per million tokens"

    def fix(self, q: Quantities, raw: float, values: tuple[int, ...]) -> None:
        # Keep cost / throughput <= n/d (n/d at or just above the optimum N/D).
        cost, thr = self.ratio_parts(q)
        lam = _ratio(values, q, cost, thr, up=True)
        if lam is not None:
            q.m.add(lam.denominator * cost - lam.numerator * thr <= 0)


def _ratio(
    values: tuple[int, ...],
    q: Quantities,
    num: cp_model.LinearExpr,
    den: cp_model.LinearExpr,
    *,
    up: bool,
) -> Fraction | None:
    n, d = values
    return ratio_within(n, d, (q.reach(num), q.reach(den)), up=up)


OBJECTIVES: dict[str, Objective] = {
    o.goal: o
    for o in (
        MinCost(),
        MinCarbon(),
        MaxThroughput(),
        MaxTokensPerJoule(),
        MinCostPerToken(),
    )
}
TIE_BREAKS: dict[str, Objective] = {o.goal: o for o in (MinCost(), MaxThroughput(), MinPower())}


def objective_for(goal: str) -> Objective:
    return OBJECTIVES[goal]


def tie_break_of(goal: str, stated: str | None) -> str | None:
    """The tie-break a solve runs among plans at its goal's optimum: the one the problem
    states, else the cheapest of them (min_cost) for min_carbon and max_throughput. Without it
    a fleet past what the workloads can use (devices no sequence keeps busy, rented by the
    thousand where nothing caps rent) is as optimal for throughput as the fleet they need, and
    the search may return it. (An idle device lowers tokens per joule by its idle draw, and
    the cost per token by its cost: those goals need no such default.)"""
    if stated is None and goal in ("min_carbon", "max_throughput"):
        return "min_cost"
    return stated
