"""The solver session: design tables cached across solves, a warm start from the previous plan,
and model -> plan builder -> verifier for every answer. What-if questions (the least value of
a quantity, which named constraints conflict) are asked here too, so no other part of the
planner builds a model. The search guided by the linear relaxation, and the rules the
searches share for keeping the better plan and the tighter bound, are in planner.solve_guided."""

from __future__ import annotations

import dataclasses
import math
import time

from planner.catalog import Catalog, load_catalog
from planner.estimator.designs import Design
from planner.estimator.fork_share import run_queue, side_by_side
from planner.estimator.mix_enumeration import OutOfTime
from planner.model.cpsat import PlannerModel
from planner.model.diagnose import blocking_constraints, capped_out, why_no_design
from planner.model.objectives import objective_for, tie_break_of
from planner.model.result import ReplicaKey, Solution
from planner.model.shortlist import model_keys, shortlist
from planner.model.tables import Tables, build_tables, design_key, one_type_tables, only_device
from planner.plan.build import make_plan
from planner.plan.types import Plan
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.status import Status
from planner.solve_guided import (
    BUILD_S_PER_KEY,
    MIN_USEFUL_SEARCH_S,
    MIN_WHOLE_SEARCH_S,
    Got,
    GuidedSearch,
    _better,
    _reaches,
    _within,
    _worse,
)
from planner.verify import verify

MIN_SEARCH_S = 0.05  # the least a search is given, even past the deadline: a hinted plan
# A model of at least this many replica variables is first searched over the designs its linear
# relaxation uses (Solver._guided). In 60 s, measured when it was added (before attention was
# charged as its own kernel): on a week of hourly demand in 12 levels with four procurement
# modes (benchmarks/bench_week.py, 7,008 replica variables) the whole search found $1.98 M and
# this one $1.91 M; on the largest generated tier (benchmarks/bench_large.py, 4,666 to 8,143)
# $235-272 M against $175-198 M. The examples stay under it (at most 1,668).
GUIDED_MIN_KEYS = 4000
QUICK = (
    "the search found no plan within the time limit: this is the quick plan it starts from "
    "(per workload the design that meets its demand at the lowest price), completed and "
    "checked; how far it is from optimal is not known"
)


class Solver(GuidedSearch):
    """Solves problems one after another. Design tables are reused when only fleet limits,
    prices or the horizon change, and each solve starts from the previous plan (a warm start),
    which is what makes sweeps and frontiers cheap."""

    def __init__(
        self,
        cat: Catalog | None = None,
        *,
        time_limit: float = 30.0,
        workers: int = 1,
        seed: int = 0,
        tuned: bool = True,
        why: bool = True,
        gap: float = 0.0,
        deadline: float | None = None,
    ) -> None:
        """`why=False` skips the extra solves that explain a result: naming the blocking
        constraint of an infeasible problem (one solve per constraint family) and, for request
        mixes, pricing each device type alone; for callers that only report the status. `gap` > 0 accepts a
        plan proved within that relative gap of the bound (reported FEASIBLE, with the bound).

        `deadline` (a `time.monotonic()` instant) bounds the next `solve` as a whole: design
        enumeration, model building, the search, the plan and its check, and the explanations
        all fit before it. Without one, each search may take `time_limit` seconds."""
        self.cat = cat or load_catalog()
        self.time_limit = time_limit
        self.workers = workers
        self.seed = seed
        self.tuned = tuned
        self.why = why
        self.gap = gap
        self.ends_by = deadline  # the whole solve's deadline, if any (see above)
        self._key: str | None = None
        self._designs: dict[str, list[Design]] | None = None
        self._last: dict[ReplicaKey, int] | None = None
        self.reused = 0  # solves that reused the previous design tables

    def forget_plan(self) -> None:
        """Start the next solve without a warm start (the design tables are kept): a run of
        solves then gives the same plans whatever this session solved before it."""
        self._last = None

    def tables(self, problem: Problem, deadline: float | None = None) -> Tables:
        key = design_key(problem)
        known = self._designs if key == self._key else None
        self.reused += known is not None
        tables = build_tables(problem, self.cat, tuned=self.tuned, designs=known, deadline=deadline)
        if known is None:
            self._key, self._designs, self._last = key, tables.designs, None
        return tables

    def _ends(self, t0: float) -> float:
        """When the solve begun at `t0` (monotonic) must be done."""
        return self.ends_by if self.ends_by is not None else t0 + self.time_limit

    def _search_time(self, ends: float) -> float:
        """Seconds the search may take: without a deadline the time limit (each search may
        take that long); with one, what is left before `ends`, less a reserve for reading the
        plan, checking it and printing it (a quarter of the limit, at most a second)."""
        if self.ends_by is None:
            return self.time_limit
        return max(MIN_SEARCH_S, ends - time.monotonic() - self._reserve())

    def solve(self, problem: Problem, given: Tables | None = None) -> Plan:
        """The verified plan of `problem` (`given`: its tables, already built)."""
        t0 = time.perf_counter()
        ends = self._ends(time.monotonic())
        try:  # under a whole command's deadline, enumeration stops in time to report
            late = ends - self._reserve() if self.ends_by else None
            tables = given if given is not None else self.tables(problem, late)
        except OutOfTime as e:
            notes = [f"no plan found within {self.time_limit:g} s: {e}; raise --time-limit"]
            return _no_plan(problem, Status.NO_PLAN, t0, notes)
        empty = [w for w in problem.workloads if not tables.designs[w.name]]
        if empty:
            notes = [why_no_design(w, problem, self.cat) for w in empty]
            return _no_plan(problem, Status.INFEASIBLE, t0, notes)
        got = self._shortlisted(tables, ends) if self._too_large(tables, ends) else None
        if got is None and self._worth_guiding(tables, ends):
            got = self._guided(tables, ends)
        if got is None:
            got = self._whole(tables, ends)
        sol = got.sol
        if sol is None:
            return _no_plan(problem, got.status, t0, got.notes + capped_out(tables))
        self._last = got.warm
        plan = make_plan(problem, self.cat, got.tables, sol)
        if (
            sol.status == Status.FEASIBLE
            and self.gap > 0
            and not got.interrupted
            and not got.notes
            and _within(sol, self.gap)
        ):
            plan.notes.append(
                f"stopped within the requested {self.gap:.2%} gap: no plan is cheaper than the "
                "bound, so this one is at most that far from optimal"
                if problem.objective.goal == "min_cost"
                else f"stopped within the requested {self.gap:.2%} gap of the bound"
            )
        plan.notes.extend(got.notes)
        plan.solve_seconds = time.perf_counter() - t0
        verify(plan, problem, self.cat)
        plan.notes.extend(f"catalog overlay: {d}" for d in self.cat.overlays)
        if (
            self.why
            and problem.objective.goal == "min_cost"
            and any(isinstance(w, InferenceWorkload) and w.request_mix for w in problem.workloads)
        ):
            plan.notes.append(self.single_type_note(problem, plan, tables, self.ends_by))
        return plan

    def _whole(self, tables: Tables, ends: float, warm: dict[ReplicaKey, int] | None = None) -> Got:
        """The search over every design: its best plan (or the starting plan completed, when
        the search found none in time), or why there is none."""
        model = PlannerModel(tables, warm=(warm or self._last) if self.tuned else None)
        return self._search(model, tables, ends)

    def _search(
        self, model: PlannerModel, tables: Tables, ends: float, *, explain: bool = True
    ) -> Got:
        """Search `model` until `ends` (under a deadline, its starting plan completed first, so
        a plan is in hand whatever the search finds). `explain=False`: an infeasible model
        is not explained (a shortlist's infeasibility says nothing of the whole problem)."""
        first = None  # under a deadline, the starting plan completed before the search
        if self.ends_by is not None and self.tuned and model.hinted:
            first = self._complete_hint(model, ends, share=0.5)
            if first.status.has_plan:
                # The search starts from the completed plan (every variable's value), not from
                # the starting plan's replicas alone: given a partial hint, CP-SAT's first dive
                # tries to complete it with the LP idle (train-then-serve-13b: its bound held at
                # $5,061 for 0.40 of the light pass's 0.47 deterministic seconds).
                model.hint_last_plan()
        late = ends - time.monotonic() - self._reserve() < MIN_USEFUL_SEARCH_S
        if first is not None and first.status.has_plan and late:
            sol = first  # no time left worth a search (CP-SAT's own start-up takes about that)
        else:
            sol = model.solve(
                time_limit=self._search_time(ends),
                workers=self.workers,
                seed=self.seed,
                gap=self.gap,
            )
        if sol.status == Status.INFEASIBLE:
            notes = (
                blocking_constraints(
                    tables,
                    time_limit=self._search_time(ends),
                    seed=self.seed,
                    deadline=None if self.ends_by is None else ends - self._reserve(),
                )
                if self.why and explain
                else []
            )
            return Got(None, tables, Status.INFEASIBLE, notes)
        quick = sol is first
        if first is not None and first.status.has_plan and _worse(sol, first, tables.problem):
            # Also when Ctrl-C stopped the search: a plan in hand. The search's bound (if any)
            # holds for the starting plan too.
            if sol.status.has_plan and sol.bound is not None:
                first = dataclasses.replace(first, bound=sol.bound)
            sol, quick = first, not sol.status.has_plan
        elif not sol.status.has_plan and first is None and self.tuned and not model.interrupted:
            sol, quick = self._complete_hint(model, ends), True
        notes = [QUICK] if quick else []
        if not sol.status.has_plan:
            return Got(None, tables, sol.status, [f"no plan found within {self.time_limit:g} s"])
        return Got(sol, tables, sol.status, notes, model.interrupted, sol.replicas)

    def _too_large(self, tables: Tables, ends: float) -> bool:
        """Whether the model over every design would take much of the time left just to build
        (under a deadline only: without one there is time for it)."""
        if self.ends_by is None or not self.tuned:
            return False
        return BUILD_S_PER_KEY * model_keys(tables) > 0.25 * (ends - time.monotonic())

    def _shortlisted(self, tables: Tables, ends: float) -> Got | None:
        """A plan over each workload's shortlisted designs (planner.model.shortlist), then, when
        the time left holds building the whole model (as fast as the shortlist's was built, per
        replica variable) and some search, the whole search from that plan. None when the
        shortlist is the whole design space."""
        short, picked = shortlist(tables)
        keys, whole_keys = model_keys(short), model_keys(tables)
        if keys >= whole_keys:
            return None
        began = time.monotonic()
        model = PlannerModel(short)
        per_key = (time.monotonic() - began) / max(keys, 1)
        build_whole = 1.25 * per_key * whole_keys
        left = ends - time.monotonic() - self._reserve()
        then_whole = build_whole + max(MIN_WHOLE_SEARCH_S, 0.2 * left) < 0.6 * left
        share = 0.4 if then_whole else 1.0
        got = self._search(model, short, ends - (1 - share) * left, explain=False)
        sol = got.sol
        warm = None
        if sol is not None:
            warm = {
                ReplicaKey(k.workload, picked[k.workload][k.design], k.period, k.site): v
                for k, v in sol.replicas.items()
            }
        left = ends - time.monotonic() - self._reserve()
        if not got.interrupted and build_whole + MIN_WHOLE_SEARCH_S < left:
            whole = self._whole(tables, ends, warm)
            if whole.sol is not None and (sol is None or _better(whole.sol, sol, tables.problem)):
                return whole
            if whole.status == Status.INFEASIBLE:
                return whole
        n_short = sum(len(v) for v in short.designs.values())
        n_all = sum(len(v) for v in tables.designs.values())
        if sol is None:
            return Got(
                None,
                short,
                Status.NO_PLAN,
                [
                    f"no plan found within {self.time_limit:g} s among the {n_short:,} shortlisted "
                    f"designs of {n_all:,} (the whole model could not be built and searched in time)"
                ],
            )
        notes = [
            *got.notes,
            f"searched a shortlist of {n_short:,} of the {n_all:,} designs (per workload the "
            "cheapest and most efficient, and the best on each set of device types): the whole "
            "model could not be built and searched within the time limit; "
            + ("optimal among the shortlist, " if sol.status == Status.OPTIMAL else "")
            + "not proved optimal over every design",
        ]
        sol = dataclasses.replace(sol, status=Status.FEASIBLE, bound=None)
        return Got(sol, short, Status.FEASIBLE, notes, got.interrupted, warm)

    def _worth_guiding(self, tables: Tables, ends: float) -> bool:
        """Whether to search the relaxation's designs first (under a deadline, on a model too
        large to prove at once but not too large to build; a ratio goal has no linear
        relaxation)."""
        return (
            self.ends_by is not None
            and self.tuned
            and not objective_for(tables.problem.objective.goal).ratio
            and model_keys(tables) >= GUIDED_MIN_KEYS
            and not self._too_large(tables, ends)
        )

    def _settled(self, got: Got) -> Got:
        """`got` proved OPTIMAL when its bound leaves no better plan and no tie-break is left
        to prove (a tie-break runs only after a search proves its goal's optimum)."""
        sol = got.sol
        if sol is None or sol.status == Status.OPTIMAL or sol.bound is None:
            return got
        problem = got.tables.problem
        goal = objective_for(problem.objective.goal)
        tie = tie_break_of(goal.goal, problem.objective.tie_break)
        if tie or not _reaches(sol, sol.bound, goal.minimize):
            return got
        sol = dataclasses.replace(sol, status=Status.OPTIMAL)
        return dataclasses.replace(got, sol=sol, status=Status.OPTIMAL, notes=[])

    def _reserve(self) -> float:
        """Seconds kept for reading, checking and printing the plan (see _search_time)."""
        return min(0.25 * self.time_limit, 1.0)

    def _complete_hint(self, model: PlannerModel, ends: float, share: float = 1.0) -> Solution:
        """The search's starting plan (the hint) with the rest of the model completed around
        it: a plan at once on problems too large to search in the time given (under a deadline
        it takes at most `share` of the time left). Not proved anything: a plan is FEASIBLE
        without a bound, and no plan is NO_PLAN (never INFEASIBLE, since only the hint's choices
        were tried)."""
        model.hint_only = True
        try:
            sol = model.solve(
                time_limit=self.time_limit
                if self.ends_by is None
                else max(MIN_SEARCH_S, (ends - time.monotonic()) * share),
                workers=self.workers,
                seed=self.seed,
            )
        finally:
            model.hint_only = False
        if not sol.status.has_plan:
            return dataclasses.replace(sol, status=Status.NO_PLAN)
        return dataclasses.replace(sol, status=Status.FEASIBLE, bound=None)

    # -- what-if questions ------------------------------------------------------------------

    def least(self, problem: Problem, quantity: str, relax: frozenset[str]) -> float | None:
        """The least value of a model quantity (planner.model.quantities.QUANTITIES: cost in USD,
        power in W before PUE, devices, ...) over plans meeting every constraint family except
        those in `relax`; None when no plan exists (or none was found in time)."""
        return self.least_status(problem, quantity, relax)[0]

    def least_status(
        self, problem: Problem, quantity: str, relax: frozenset[str]
    ) -> tuple[float | None, Status]:
        """`least` and the status of its solve: INFEASIBLE when no plan exists (no design, or
        proved), NO_PLAN when none was found within the time limit."""
        tables = self.tables(problem)
        if any(not d for d in tables.designs.values()):
            return None, Status.INFEASIBLE
        sol = PlannerModel(tables).least(
            quantity,
            relax=relax,
            time_limit=self.time_limit,
            workers=self.workers,
            seed=self.seed,
        )
        return (None if sol.objective is None else float(sol.objective)), sol.status

    def conflict(self, problem: Problem) -> list[str] | None:
        """Named constraint families that together admit no plan (a core, not always minimal),
        or None when a plan exists, no design exists, or the solver could not tell in time."""
        tables = self.tables(problem)
        if any(not d for d in tables.designs.values()):
            return None
        return PlannerModel(tables).infeasible_core(time_limit=self.time_limit, seed=self.seed)

    def has_plan(self, problem: Problem) -> bool:
        """Whether the problem has a plan (a full solve, without explanations)."""
        why, self.why = self.why, False
        try:
            return self.solve(problem).has_plan
        finally:
            self.why = why

    def single_type_note(
        self, problem: Problem, plan: Plan, tables: Tables, ends: float | None = None
    ) -> str:
        """What the cheapest plan on one device type alone costs, and what this plan saves
        against it (how a request mix pays off by splitting classes across types).

        Each type alone gets as long as this plan's own solve took (at least 2 s, at most the
        time limit), so the explanation costs about what the answer did, and no more than an
        even share of what is left before `ends` (the whole command's deadline). A type not
        proved optimal in that time is counted at its bound (no plan on it alone costs less),
        which keeps the stated saving a floor; a type left unpriced is named."""
        limit = min(self.time_limit, max(2.0, plan.solve_seconds))
        devs = sorted(tables.econ)
        # The types are independent solves: side by side where this process may fork
        # (planner.estimator.fork_share), each as it would be solved alone here.
        sides = side_by_side()
        alone = run_queue(
            lambda i: self._alone(problem, tables, devs, i, limit, ends, sides), len(devs), sides
        )
        best: tuple[float, str, _Alone] | None = None  # (least cost, type, its solve)
        unsettled = []
        for dev, got in zip(devs, alone, strict=True):
            if got.status == "INFEASIBLE":
                continue
            if got.status not in ("OPTIMAL", "FEASIBLE"):
                unsettled.append(dev)
            elif best is None or got.least < best[0]:
                best = (got.least, dev, got)
        within = f"in {limit:.0f} s" if ends is None else "within the time limit"
        late = f" ({', '.join(unsettled)} alone: no plan found {within})" if unsettled else ""
        if best is None and unsettled:
            return f"no plan on one device type alone was found {within}{late}"
        if best is None:
            return "no single device type can serve the whole request mix alone"
        least, dev, p = best
        n = p.devices
        saved = least - plan.tco_usd
        proved = p.status == "OPTIMAL"
        if saved >= 0:
            gain = f"saves {'' if proved else 'at least '}${saved:,.0f} ({saved / least:.1%})"
        else:  # this plan was stopped before it was proved
            gain = f"costs {'' if proved else 'at most '}${-saved:,.0f} ({-saved / least:.1%}) more"
        if proved:
            return f"best single device type: {n} x {dev} at ${least:,.0f}; this plan {gain}{late}"
        return (
            f"on one device type alone a plan costs at least ${least:,.0f} ({dev}: found {n} x "
            f"{dev} at ${p.tco_usd:,.0f}, not proved optimal {within}); this plan "
            f"{gain}{late}"
        )

    def _alone(
        self,
        problem: Problem,
        tables: Tables,
        devs: list[str],
        i: int,
        limit: float,
        ends: float | None,
        sides: int = 1,
    ) -> _Alone:
        """The cheapest plan on the type devs[i] alone (single_type_note): its status, least
        cost (a FEASIBLE plan's bound where it has one), devices and cost. Before `ends`, it
        gets an even share of what is left among the types still to solve in each of the
        `sides` processes solving them."""
        dev = devs[i]
        share = limit
        if ends is not None:
            share = min(limit, (ends - time.monotonic()) / math.ceil((len(devs) - i) / sides))
            if share < MIN_SEARCH_S * 4:
                return _Alone("NO_PLAN", math.inf, 0, math.inf)
        alone = Solver(
            self.cat,
            time_limit=share,
            workers=self.workers,
            seed=self.seed,
            why=False,
            deadline=None if ends is None else time.monotonic() + share,
        )
        # The designs on `dev` alone are this problem's, filtered (one_type_tables).
        sub = one_type_tables(tables, dev, self.cat)
        p = alone.solve(only_device(problem, dev) if sub is None else sub.problem, sub)
        least = p.tco_usd
        if p.status == "FEASIBLE":
            if p.bound is None:
                return _Alone("NO_PLAN", math.inf, 0, math.inf)
            least = min(p.tco_usd, p.bound)
        return _Alone(str(p.status), least, sum(x.count for x in p.devices), p.tco_usd)


@dataclasses.dataclass(frozen=True)
class _Alone:
    """One type's solve for single_type_note, as small as a child process sends it back."""

    status: str  # OPTIMAL, FEASIBLE (least: its bound), INFEASIBLE, or another: no plan in time
    least: float
    devices: int
    tco_usd: float


def solve_problem(
    problem: Problem,
    *,
    time_limit: float = 30.0,
    workers: int = 1,
    seed: int = 0,
    cat: Catalog | None = None,
    tuned: bool = True,
    gap: float = 0.0,
    deadline: float | None = None,
) -> Plan:
    """Solve one problem from scratch: the verified optimal plan, or a plan-less result.
    `deadline` (monotonic): when the whole solve must be done (see Solver)."""
    solver = Solver(
        cat,
        time_limit=time_limit,
        workers=workers,
        seed=seed,
        tuned=tuned,
        gap=gap,
        deadline=deadline,
    )
    return solver.solve(problem)


def _no_plan(problem: Problem, status: Status, t0: float, notes: list[str]) -> Plan:
    """A result without a plan (infeasible, or nothing found in time), with its reasons."""
    return Plan(
        problem.name, status, problem.objective.goal, None, None, time.perf_counter() - t0,
        notes=notes,
    )  # fmt: skip
