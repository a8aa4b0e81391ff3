"""The solver session's search guided by the linear relaxation (Solver._guided): the designs
the relaxation's optimum uses searched first, then with purchases held, its bound raised by
branch and bound, then the whole search from that plan. Also what a search gives (Got) and the
rules every search of the session shares for keeping the better plan and the tighter bound."""

from __future__ import annotations

import dataclasses
import math
import time

from planner.model import interrupt
from planner.model.cpsat import PlannerModel
from planner.model.objectives import objective_for
from planner.model.result import ReplicaKey, Solution
from planner.model.shortlist import model_keys, restricted
from planner.model.tables import Tables
from planner.schema.problem import Problem
from planner.schema.status import Status

# Seconds building the model takes per replica variable (planner.model.shortlist.model_keys),
# measured on the 64-workload x 45-type benchmark (benchmarks/bench_many.py); a problem whose
# model would take a quarter of the time left to build is first solved over a shortlist.
BUILD_S_PER_KEY = 1.3e-4
MIN_USEFUL_SEARCH_S = 0.3  # less is not worth a search once a plan is in hand
MIN_WHOLE_SEARCH_S = 1.0  # the least search worth building the whole model for, after a shortlist
# Of the time left, the most the relaxation's LP solve may take.
LP_SHARE = 0.25
# Building the relaxation may take this share of the time left: the model's build is judged per
# replica variable (BUILD_S_PER_KEY), its reading as an LP per constraint (relaxation.support).
LP_BUILD_SHARE = 0.4
# Of the time left once the relaxation is solved, the share the search over its designs takes,
# and then the share the search with purchases held takes (Solver._held_purchases): the
# relaxation's, rounded down to whole units, where that plan's differ, else the plan's.
# On the week of hourly demand (benchmarks/bench_week.py) the held search closed more than
# searching on: over the relaxation's 6 designs with H200s bought as the plan bought them,
# CP-SAT found $1,891,649 and proved $1,878,376 in 55 s, where the same designs unheld stood at
# $1,911,402 against $1,859,898 (2026-11-29, a loaded 2-core machine).
NARROW_SHARE = 0.3
HELD_SHARE = 0.2
# Then the share its plan gets to be improved one demand period at a time over every design
# (planner.model.by_period), its purchases held: on that week, $1,889,976 -> $1,870,618 in 12 s.
PERIOD_SHARE = 0.3
# Of the time left once the narrowed plan is in hand, the share the branch and bound over the
# relaxation (planner.model.relax_branch) may take to raise its bound; the whole search gets
# the rest.
TREE_SHARE = 0.5


@dataclasses.dataclass
class Got:
    """What a search gave: a solution over `tables` (None: no plan, for `status`), the notes
    the plan carries (or why there is no plan), and the replicas to warm-start the next solve
    from, keyed by every design (None when the search saw only some)."""

    sol: Solution | None
    tables: Tables
    status: Status
    notes: list[str]
    interrupted: bool = False
    warm: dict[ReplicaKey, int] | None = None


class GuidedSearch:
    """The relaxation-guided search of planner.solve.Solver, which supplies the searches it
    builds on (`_search`, `_whole`, `_settled`) and the time kept for the plan (`_reserve`)."""

    gap: float  # a requested relative gap (`--gap`), 0 for a proof
    workers: int  # CP-SAT's workers per search
    seed: int

    def _search(
        self, model: PlannerModel, tables: Tables, ends: float, *, explain: bool = True
    ) -> Got:
        raise NotImplementedError

    def _whole(self, tables: Tables, ends: float, warm: dict[ReplicaKey, int] | None = None) -> Got:
        raise NotImplementedError

    def _settled(self, got: Got) -> Got:
        raise NotImplementedError

    def _reserve(self) -> float:
        raise NotImplementedError

    def _guided(self, tables: Tables, ends: float) -> Got | None:
        """The plan of a search over the designs the linear relaxation's optimum uses (and the
        starting plan's), then, when building the whole model and some search still fit, the
        whole search from it; the better plan is kept. Its bound is the tighter of the whole
        search's and the relaxation's, both valid for every design. With a requested gap
        (`--gap`), a first plan already within it of the relaxation's bound is returned at once:
        the whole search could only prove what was not asked. None when the relaxation
        cannot be built and solved in its share of the time (then the whole model is searched
        alone)."""
        # With the LP solver: loaded only here.
        from planner.model.relax_branch import tighter_bound
        from planner.model.relaxation import support

        left = ends - time.monotonic() - self._reserve()
        if BUILD_S_PER_KEY * model_keys(tables) > LP_BUILD_SHARE * left:
            return None
        try:
            found = support(tables, time_limit=LP_SHARE * left, build_limit=LP_BUILD_SHARE * left)
        except KeyboardInterrupt:  # the LP solver cannot be stopped: Ctrl-C shows after it
            interrupt.request()
            return None
        if found is None:
            return None
        picked = found.designs
        short = restricted(tables, picked)
        if model_keys(short) >= model_keys(tables):
            return None
        left = ends - time.monotonic() - self._reserve()
        narrow = PlannerModel(short)
        narrow.portfolio = True
        got = self._search(narrow, short, ends - (1 - NARROW_SHARE) * left, explain=False)
        # The purchases held: the relaxation's in whole units where the plan's differ (a plan
        # found in little time may buy what the relaxation would not), else the plan's.
        held = (
            found.bought if got.sol and _some(found.bought or {}) != _some(got.sol.bought) else None
        )
        until = ends - (1 - NARROW_SHARE - HELD_SHARE) * left
        got = self._held_purchases(short, got, until, held)
        if got.sol is None:
            return None
        warm = {
            ReplicaKey(k.workload, picked[k.workload][k.design], k.period, k.site): v
            for k, v in got.sol.replicas.items()
        }
        until = ends - (1 - NARROW_SHARE - HELD_SHARE - PERIOD_SHARE) * left
        plan = got.sol
        better = None if got.interrupted else self._by_period(tables, warm, until)
        if better is not None and _worse(plan, better, tables.problem):
            # Its designs are the whole model's: the plan is read over every design.
            plan, warm, short = better, better.replicas, tables
        # Optimal among some designs is not optimal: only bounds over every design count.
        minimize = objective_for(tables.problem.objective.goal).minimize
        raw_bound, left = found.raw_bound, ends - time.monotonic() - self._reserve()
        asked = self.gap > 0 and _within(dataclasses.replace(plan, bound=raw_bound), self.gap)
        if left > MIN_USEFUL_SEARCH_S and not (asked or got.interrupted):
            # Branch and bound over the relaxation raises its bound (the narrowed plan's value
            # closes the leaves that cannot beat it); the whole search gets the rest.
            raw_bound = tighter_bound(found, plan.objective, TREE_SHARE * left)
        narrowed = dataclasses.replace(plan, status=Status.FEASIBLE, bound=raw_bound)
        got = Got(narrowed, short, Status.FEASIBLE, [], got.interrupted, warm)
        left = ends - time.monotonic() - self._reserve()
        if _reaches(narrowed, raw_bound, minimize):
            return self._settled(got)  # the tree closed every other plan: nothing to search
        late = BUILD_S_PER_KEY * model_keys(tables) + MIN_WHOLE_SEARCH_S > left
        if got.interrupted or late or (self.gap > 0 and _within(narrowed, self.gap)):
            return self._settled(got)
        whole = self._whole(tables, ends, warm)
        if whole.sol is None or whole.sol.objective is None:
            return whole if whole.sol is not None else self._settled(got)
        bound = whole.sol.bound if whole.sol.status != Status.OPTIMAL else whole.sol.objective
        bound = _tighter(bound, raw_bound, minimize)
        if _better(whole.sol, narrowed, tables.problem):
            # With a bound, a completed starting plan's note ("how far ... not known") is moot.
            sol = dataclasses.replace(whole.sol, bound=bound)
            got = dataclasses.replace(whole, sol=sol, notes=[])
        else:
            sol = dataclasses.replace(narrowed, bound=bound)
            got = Got(sol, short, Status.FEASIBLE, [], whole.interrupted, warm)
        return self._settled(got)

    def _by_period(
        self, tables: Tables, warm: dict[ReplicaKey, int], until: float
    ) -> Solution | None:
        """The plan `warm` over every design, completed in the whole model, then improved one
        demand period at a time until `until` with everything else held (planner.model.by_period):
        the best plan with its purchases in that time. None with one demand period (its block
        would be the whole model), when the whole model cannot be built and searched in time,
        or when no plan is completed."""
        from planner.model import by_period

        left = until - time.monotonic() - self._reserve()
        if (
            len(tables.periods) < 2
            or BUILD_S_PER_KEY * model_keys(tables) + MIN_WHOLE_SEARCH_S > left
        ):
            return None  # one period is the whole model again: its time is the whole search's
        model = PlannerModel(tables, warm=warm)
        model.hint_only = True  # every search here completes or checks a hint
        try:
            first = model.solve(
                time_limit=0.5 * (until - time.monotonic()), workers=self.workers, seed=self.seed
            )
            if not first.status.has_plan or model.interrupted:
                return None
            values = by_period.improve(
                model, model.last_values(), until - self._reserve(), self.seed
            )
            if values is not None:
                model.hint_values(values)  # the improved plan, every variable held at it
                held = model.solve(
                    time_limit=max(MIN_USEFUL_SEARCH_S, until - time.monotonic()),
                    workers=self.workers,
                    seed=self.seed,
                )
                first = held if held.status.has_plan else first
        finally:
            model.hint_only = False
        return dataclasses.replace(first, status=Status.FEASIBLE, bound=None)

    def _held_purchases(
        self, short: Tables, got: Got, until: float, bought: dict[str, int] | None = None
    ) -> Got:
        """`got`'s plan improved, until `until`, by a search over the same designs from it with
        its purchases held (PlannerModel.hold_purchases), or `bought` held instead: a
        neighbourhood whose demand periods are nearly apart, so it is searched far closer to
        its optimum in the same time. The better plan; its bound proves nothing beyond the held
        purchases (the caller's is the relaxation's). `got` as it is when its plan is proved optimal
        over the same designs: holding purchases only narrows them further, so nothing held
        can beat it."""
        sol = got.sol
        left = until - time.monotonic() - self._reserve()
        if sol is None or sol.objective is None or got.interrupted or left < MIN_USEFUL_SEARCH_S:
            return got
        if sol.status == Status.OPTIMAL:
            return got
        model = PlannerModel(short, warm=sol.replicas)
        model.portfolio = True
        model.hold_purchases(sol.bought if bought is None else bought)
        held = self._search(model, short, until, explain=False)
        if held.sol is None or held.sol.objective is None:
            return got
        if _worse(sol, held.sol, short.problem):
            return held
        return dataclasses.replace(got, interrupted=held.interrupted)


def _better(a: Solution, b: Solution, problem: Problem) -> bool:
    """Whether solution `a` is at least as good as `b` by the problem's objective (proved
    optimal counts as better)."""
    if a.status == Status.OPTIMAL or b.objective is None:
        return True
    if a.objective is None:
        return False
    if objective_for(problem.objective.goal).minimize:
        return a.objective <= b.objective
    return a.objective >= b.objective


def _tighter(bound: float | None, other: float, minimize: bool) -> float:
    """The tighter of two bounds on the optimum (the greater when minimizing): a solver's
    (None: none) and another proved independently, both at the model's integer scale."""
    if bound is None:
        return other
    return max(bound, other) if minimize else min(bound, other)


def _reaches(sol: Solution, bound: float, minimize: bool) -> bool:
    """Whether `bound` proves the solution optimal: its objective is an integer of the model's
    scale, so a bound within less than one unit of it (on the right side) leaves no better
    integer plan."""
    if sol.status == Status.OPTIMAL:
        return True
    if sol.objective is None:
        return False
    slack = max(1e-6, 1e-9 * abs(bound))  # the bound's own floating-point error, at most
    if minimize:
        return math.ceil(bound - slack) >= sol.objective
    return math.floor(bound + slack) <= sol.objective


def _some(bought: dict[str, int]) -> dict[str, int]:
    """The device types of which some are bought, with their counts."""
    return {d: n for d, n in bought.items() if n}


def _within(sol: Solution, gap: float) -> bool:
    """Whether the solution is proved within the relative `gap` of its bound (the time limit
    may stop a search before that, and a plan then says nothing of the gap it was asked)."""
    if sol.objective is None or sol.bound is None:
        return False
    return abs(sol.objective - sol.bound) <= gap * max(abs(sol.objective), 1.0) + 1e-9


def _worse(a: Solution, b: Solution, problem: Problem) -> bool:
    """Whether plan `a` is worse than plan `b` by the problem's objective (no plan is worse
    than any plan)."""
    return not _better(a, b, problem)
