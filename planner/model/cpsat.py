"""The CP-SAT model: how many replicas of each enumerated design serve each demand period, on
premises or in the cloud, and what to buy, reserve or rent to run them.

Variables are small integers: replicas per (inference design, period, site), a one-hot choice of
training design, devices bought per type (inventory is free) and their hosts, reserved devices per
type, on-demand and spot devices per type and period. Owned and bought capacity is held for the
whole horizon, so it is sized for the busiest period; on-demand and spot follow each period.
A request-mix workload splits each class's load across designs in steps of 1/SHARE_STEPS of one
replica's time (a replica may serve several classes), so the split is not limited to whole replicas.

The parts, each in its own module: variables (planner.model.variables), linear quantities
(quantities), one method per constraint family (constraints), the search hint (hints), one
object per objective (objectives), scales (scale) and the result with its status (result).
Rounding is always conservative (capacity down, requirements and costs up); the verifier
re-checks in floats.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from planner.errors import InternalError
from planner.model import interrupt, progress
from planner.model.constraints import Constraints
from planner.model.hints import Hints
from planner.model.objectives import TIE_BREAKS, Objective, objective_for, tie_break_of
from planner.model.ortools_cp import cp_model, cp_model_helper
from planner.model.race import race
from planner.model.result import ReplicaKey, Solution, status_of
from planner.model.scale import ratio_within
from planner.model.tables import Tables
from planner.schema.status import Status

MAX_RATIO_STEPS = 30  # Dinkelbach iterations; each one strictly improves the ratio

# Every search runs a light pass beside it, on a thread of its own (PlannerModel._optimize): one
# round of presolve without probing, stopped after this much of CP-SAT's deterministic time (its
# machine-independent work measure, so the pass ends at the same point on any machine and which
# pass's plan is kept never depends on timing). Where it proves the optimum (or infeasibility)
# no later than the full search, its plan is the answer (planner.model.race: whichever pass
# proves first stops the other). Most models the planner builds are
# proved in well under this much work once presolve is light, and presolve is then most of the
# time (chat-70b: 0.02 of deterministic time against 0.09); larger ones need the LP of the full
# search (linearization level 2), which runs from the start on the first thread. 0.5 is about
# 1 s of one core here: whole commands, best of two
# runs, 0.35 -> 0.5 took carbon-cap from 1.23 to 1.01 s and max-throughput-500k from 2.35 to
# 1.42 s (their light passes then prove what the full search would), the other examples within
# 4 % either way (2026-11-28).
LIGHT_DTIME = 0.5
# Above this many variables a complete hint is not followed by CP-SAT's dive along the hint
# (hint_conflict_limit 0). A complete hint is loaded as a solution before the search starts
# ("complete_hint" in CP-SAT's log); the dive that follows it (up to 10 conflicts) finds that
# plan again, and on a large model it does not heed the time limit: large-serve-owned's search
# (18,768 variables, one worker) spent 25.3 s of a 23.5 s limit in it and the whole command took
# 66 s of its 60; without it, the same plan in 59.3 s. On the examples (at most 2,746
# variables) the dive pays for itself (rent-the-peak's solve 1.9 -> 5.2 CPU s without it, the
# same optimum), so it is kept there.
HINT_DIVE_MAX_VARIABLES = 10_000


def _lighten(s: cp_model.CpSolver) -> None:
    """Set `s` for the light pass. CP-SAT's own Ctrl-C catcher stays off: it would install its
    C handler from this thread and, the pass over, leave SIGINT at the system default (a later
    Ctrl-C then called a handler that no longer existed: `bad_function_call` in the full
    search); planner.model.interrupt stops the light pass with the full search."""
    s.parameters.catch_sigint_signal = False
    s.parameters.cp_model_probing_level = 0
    s.parameters.max_presolve_iterations = 1
    s.parameters.max_deterministic_time = LIGHT_DTIME
    # No Chvatal-Gomory or MIR cuts: on the examples' 52 searched models (every search of every
    # problem in problems/, one thread alone) they cost the light pass more than they saved:
    # 3.0 deterministic seconds in all instead of 5.0, and 52 proved instead of 49 (carbon-cap
    # 0.12 instead of unproved at 0.5, tokens-per-joule-10kw's second step 0.19 instead of
    # 0.48); the full search keeps them, for the models they do help (2026-11-28).
    s.parameters.add_cg_cuts = False
    s.parameters.add_mir_cuts = False
    s.parameters.interleave_search = False  # one tree search, whatever the full one runs


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The garbage collector off while a model is built: a large model is hundreds of
    thousands of variable, expression and key objects that live as long as the model and make
    no reference cycles, and the collections their allocation sets off scan all of them again
    and again (a fifth of the build on 75,000 replica variables). A collector already off
    is left as it is."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _shown(goal: Objective) -> progress.Show:
    """The solver's value of a (non-ratio) objective as the user reads it."""
    return lambda raw: goal.format(goal.read(raw, 0.0))


class PlannerModel(Constraints, Hints):
    """Builds the CP-SAT model from tables; solves for one objective at a time."""

    progress_label = "solving"  # what a long solve's progress line says is searched
    progress_show: progress.Show | None = None  # its objective in the user's unit, if any

    def __init__(self, t: Tables, warm: dict[ReplicaKey, int] | None = None) -> None:
        """`warm`: replica counts of a previous plan over the same designs, used as the hint."""
        with _collector_paused():
            super().__init__(t)
            self._variables()
            self.add_constraints()
            # Only complete the hinted plan (its hinted variables fixed), for a quick plan when
            # the full search found none in its time; see Solver.solve.
            self.hint_only = False
            self._full: list[int] = []  # every variable's value in the last plan found
            self.light_fails = False  # a light pass ended unproved: later searches skip it
            # One worker runs CP-SAT's whole portfolio interleaved (see _solver) instead of its
            # single tree search; set by the solver session for the models where that pays.
            self.portfolio = False
            self.hinted = False  # set by _hint when there is a starting plan
            self.hint_complete = False  # every variable hinted (hint_values): see _solver
            if warm is not None or t.tuned:
                self._hint(warm)

    # -- questions other than the objective ------------------------------------------------

    def least(
        self,
        name: str,
        *,
        relax: frozenset[str],
        time_limit: float,
        workers: int,
        seed: int,
    ) -> Solution:
        """The smallest value of quantity `name` over plans that meet every constraint family
        except those in `relax` (how far a limit must move for a plan to exist)."""
        self._switch(relax)
        return self._optimize(
            self.quantity(name), minimize=True, time_limit=time_limit, workers=workers, seed=seed
        )

    def infeasible_core(self, *, time_limit: float, seed: int) -> list[str] | None:
        """Constraint families that together admit no plan (CP-SAT's sufficient assumptions for
        infeasibility), or None when a plan exists or the solver could not decide in time."""
        self.m.add_assumptions(list(self.named.values()))
        s = self._solver(time_limit, 1, seed)
        st = interrupt.solve(s, self.m)
        if st != cp_model.INFEASIBLE:
            return None
        by_index = {lit.index: name for name, lit in self.named.items()}
        return sorted(by_index[i] for i in s.sufficient_assumptions_for_infeasibility())

    def hold_purchases(self, bought: dict[str, int]) -> None:
        """Devices bought held at `bought` (absent: none): with the purchases fixed, nothing
        but reserved devices ties one demand period to another, so the search meets each
        period's demand almost apart (a neighbourhood of the plan that bought them)."""
        for dev, var in self.bought.items():
            self.m.add(var == bought.get(dev, 0))

    # -- solving ---------------------------------------------------------------------------

    def _switch(self, relax: frozenset[str]) -> None:
        """Enforce every named constraint family except those in `relax`."""
        for name, lit in self.named.items():
            self.m.add(lit == (0 if name in relax else 1))

    def pose(self) -> Objective:
        """Every constraint family switched on and the problem's objective set, as `solve`
        poses them, without solving (for the linear relaxation, planner.model.relaxation).
        Ratio goals have no single linear objective: they raise ValueError."""
        goal = objective_for(self.p.objective.goal)
        if goal.ratio:
            raise ValueError(f"{goal.goal} is a ratio: it has no linear relaxation bound")
        self._switch(frozenset())
        expr = goal.expression(self)
        if goal.minimize:
            self.m.minimize(expr)
        else:
            self.m.maximize(expr)
        return goal

    def solve(
        self,
        *,
        time_limit: float,
        workers: int,
        seed: int,
        relax: frozenset[str] = frozenset(),
        gap: float = 0.0,
    ) -> Solution:
        """Solve for the problem's objective (ratios by Dinkelbach's method), then its tie-break.

        Constraint families named in `relax` are switched off (for explanations). `gap` > 0
        stops a cost or throughput solve once the plan is proved within that relative gap of
        the bound; it is then reported FEASIBLE with its bound, not OPTIMAL.
        """
        self._switch(relax)
        goal = objective_for(self.p.objective.goal)
        start = time.perf_counter()
        self.progress_label = f"solving ({goal.goal})"
        self.progress_show = _shown(goal)
        if goal.ratio:
            num, den = goal.ratio_parts(self)
            sol = self._dinkelbach(
                num,
                den,
                maximize=not goal.minimize,
                time_limit=time_limit,
                workers=workers,
                seed=seed,
            )
        else:
            lex = None if gap > 0 else self._lexicographic(goal, relax, time_limit, workers, seed)
            if lex is not None:
                lex.seconds = time.perf_counter() - start
                return lex
            sol = self._optimize(
                goal.expression(self),
                minimize=goal.minimize,
                time_limit=time_limit,
                workers=workers,
                seed=seed,
                gap=gap,
            )
        sol = self._tie_break(goal, sol, time_limit - (time.perf_counter() - start), workers, seed)
        sol.seconds = time.perf_counter() - start
        return sol

    def _lexicographic(
        self, goal: Objective, relax: frozenset[str], time_limit: float, workers: int, seed: int
    ) -> Solution | None:
        """The goal and its tie-break in one search: the goal's integer value weighted by one
        more than the span the tie-break's can take over every plan, plus the tie-break's, so
        one unit of the goal outweighs any difference of the tie-break and the optimum of the
        sum is the goal's optimum and, among plans at it, the tie-break's. One search proves
        both, where the goal's search and then the tie-break's each proved its own optimum:
        max-throughput-500k's light passes took 0.33 + 0.34 of CP-SAT's deterministic time,
        the weighted one 0.35; owners-pool 0.07 + 0.25 against 0.07 (one thread each).

        None (the two searches then run one after the other) without a tie-break, for a ratio
        goal, while completing the starting plan, or when the weighted sum could overflow
        CP-SAT's 64-bit integers."""
        tie = tie_break_of(goal.goal, self.p.objective.tie_break)
        if not tie or goal.ratio or self.hint_only:
            return None
        second = TIE_BREAKS[tie]
        first_expr, second_expr = goal.expression(self), second.expression(self)
        low, high = self.span(second_expr)
        ceiling = self.ceiling(tie, relax)
        if ceiling is not None:
            high = min(high, ceiling)  # no plan over the ceiling is feasible
        weight = max(1, high - low + 1)
        if weight * self.reach(first_expr) + self.reach(second_expr) >= 2**62:
            return None
        sign = 1 if goal.minimize == second.minimize else -1
        combined = weight * first_expr + sign * second_expr
        self.m.minimize(combined)  # the sense is set again below; only validity is checked
        if self.m.validate():  # anything CP-SAT's own checks refuse: the two searches instead
            return None
        self.progress_label = f"solving ({goal.goal}, then {tie} among plans at its optimum)"
        # The goal's part of the sum: the tie-break's part is within [low, high], which spans
        # less than the weight, so one floor division recovers it.
        shift = -low if sign == 1 else high
        shown = _shown(goal)
        self.progress_show = lambda raw: shown(float((round(raw) + shift) // weight))
        sol = self._optimize(
            combined,
            minimize=goal.minimize,
            time_limit=time_limit,
            workers=workers,
            seed=seed,
            evaluate=(first_expr,),
        )
        if not sol.status.has_plan:
            return sol
        value = float(sol.values[0])
        bound: float | None = value
        if sol.status != Status.OPTIMAL:
            # The sum's bound, less the most (minimizing; least, maximizing) the tie-break's
            # part can add, over the weight bounds the goal.
            part = (high if sign == 1 else -low) if goal.minimize else (low if sign == 1 else -high)
            bound = None if sol.bound is None else (sol.bound - part) / weight
        return dataclasses.replace(
            sol, objective=value, bound=bound, values=(), rounding=sol.units[0], units=()
        )

    def _tie_break(
        self, goal: Objective, sol: Solution, left: float, workers: int, seed: int
    ) -> Solution:
        """Among plans at the goal's optimum, the best by the tie-break (min_carbon: cheapest).
        Not while completing the starting plan (hint_only): its choices are held to the hint,
        so there is little to break, and the objective's bound the tie-break adds would stay in
        the model for the search that follows."""
        tie = tie_break_of(goal.goal, self.p.objective.tie_break)
        if not tie or sol.status != Status.OPTIMAL or self.interrupted or sol.objective is None:
            return sol
        if self.hint_only:
            return sol
        goal.fix(self, sol.objective, sol.values)
        self.hint_last_plan()  # the optimum is a plan at the tie-break's start
        second_goal = TIE_BREAKS[tie]
        self.progress_label = f"tie-break ({tie}) among plans at the optimum"
        self.progress_show = _shown(second_goal)
        second = self._optimize(
            second_goal.expression(self),
            minimize=second_goal.minimize,
            time_limit=max(0.1, left),
            workers=workers,
            seed=seed,
        )
        if not second.status.has_plan:
            return sol
        return dataclasses.replace(
            second,
            status=sol.status if second.status == Status.OPTIMAL else Status.FEASIBLE,
            objective=sol.objective,
            bound=sol.bound,
            iterations=sol.iterations,
            values=(),
            rounding=sol.rounding,
        )

    def _solver(
        self, time_limit: float, workers: int, seed: int, gap: float = 0.0
    ) -> cp_model.CpSolver:
        s = cp_model.CpSolver()
        s.parameters.max_time_in_seconds = max(0.05, time_limit)
        if self.hint_complete and len(self.m.proto.variables) > HINT_DIVE_MAX_VARIABLES:
            s.parameters.hint_conflict_limit = 0  # see HINT_DIVE_MAX_VARIABLES
        s.parameters.num_workers = workers
        s.parameters.random_seed = seed
        if workers == 1:
            s.parameters.linearization_level = 2
            # One presolve round with light probing. Full probing was most of the presolve
            # and saved the search less than it cost: the examples' 50 models of over 200
            # variables, each solved alone on one worker, took 12.5 s in all instead of 22.9
            # (the slowest 0.82 s instead of 1.97); none at all (level 0) took 11.1 s but
            # 0.84 s instead of 0.28 on the H100-alone model of request-mix's single-type
            # comparison, where the light pass does not prove it (2026-11-28).
            s.parameters.cp_model_probing_level = 1
            s.parameters.max_presolve_iterations = 1
            if self.portfolio and not self.hint_only:
                # Every subsolver of CP-SAT's portfolio (its tree searches with and without the
                # LP, and its large-neighbourhood searches) taking turns on the one thread, in
                # a deterministic order. On a week of hourly demand in 34 levels searched over
                # its relaxation's 6 designs (benchmarks/bench_week.py; 408 replica
                # variables), the tree search alone stood at $1,950,608 after 17.7 CPU seconds
                # and the interleaved portfolio at $1,911,402 after 25.6 (2026-11-29, a loaded
                # 2-core machine): the neighbourhoods find what the single dive does not.
                s.parameters.interleave_search = True
        if gap > 0:
            s.parameters.relative_gap_limit = gap
        if self.hint_only:
            s.parameters.fix_variables_to_their_hinted_value = True
        return s

    def _optimize(
        self,
        expr: cp_model.LinearExpr,
        *,
        minimize: bool,
        time_limit: float,
        workers: int,
        seed: int,
        evaluate: tuple[cp_model.LinearExpr, ...] = (),
        gap: float = 0.0,
    ) -> Solution:
        """Optimize `expr`. A light pass runs beside the full search (see LIGHT_DTIME): its plan
        is the answer when it proves the optimum or infeasibility no later than the full search
        (planner.model.race), else the full search's. Once
        a light pass of this model ends unproved, later searches (ratio steps, tie-breaks) run
        the full search alone."""
        if minimize:
            self.m.minimize(expr)
        else:
            self.m.maximize(expr)
        err = self.m.validate()
        if err:
            raise InternalError(f"the solver model is invalid: {err}")
        full = self._solver(time_limit, workers, seed, gap)
        light = None
        if not (self.hint_only or self.light_fails or interrupt.requested()):
            light = self._solver(time_limit, 1, seed, gap)
            _lighten(light)
        with progress.watch(full, self.progress_label, self.progress_show, minimize) as callback:
            if light is None:
                s, st = full, interrupt.solve(full, self.m, callback)
            else:  # s: the solver whose answer is kept
                s, st, light_failed = race(self.m, full, light, callback)
                self.light_fails = self.light_fails or light_failed
        if interrupt.requested():
            self.interrupted = True
        if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            self._full = list(s.response_proto.solution)
        return self._read(s, st, expr, evaluate, gap)

    def hint_last_plan(self) -> None:
        """Replace the hint by the last plan found, every variable's value (a complete hint: the
        next search starts from that plan at once). Without a plan found, the hint is kept, and
        while the starting plan is completed (hint_only: the hinted variables are held) too."""
        if not self._full or self.hint_only:
            return
        self.hint_values(self._full)

    def last_values(self) -> list[int]:
        """Every variable's value in the last plan found (empty before one is found)."""
        return list(self._full)

    def hint_values(self, values: list[int]) -> None:
        """Replace the hint by `values`, one per variable of the model (a complete hint)."""
        self.m.clear_hints()
        h = self.m.proto.solution_hint
        h.vars.extend(range(len(values)))
        h.values.extend(values)
        self.hint_complete = True

    def _units(self, s: cp_model.CpSolver, expr: cp_model.LinearExpr) -> float:
        """Sum of the variables' values in `expr`: each rounded coefficient is off by less than
        one unit, so this bounds how far the integer value is from the exact one."""
        if not isinstance(expr, cp_model.LinearExpr):
            return 0.0  # a constant (no variable in it): nothing is rounded
        flat = cp_model_helper.FlatIntExpr(expr)
        return float(sum(abs(int(s.value(v))) for v in flat.vars))

    def _read(
        self,
        s: cp_model.CpSolver,
        st: Any,
        expr: cp_model.LinearExpr,
        evaluate: tuple[cp_model.LinearExpr, ...] = (),
        gap: float = 0.0,
    ) -> Solution:
        if st == cp_model.OPTIMAL and gap > 0 and s.objective_value != s.best_objective_bound:
            st = cp_model.FEASIBLE  # stopped within the gap limit: not proved optimal
        status = status_of(st, f"{s.status_name(st)}: {self.m.validate()}")
        if not status.has_plan:
            return Solution(status, None, None, s.wall_time, {}, {}, {})

        def values(vs: dict[Any, cp_model.IntVar]) -> dict[Any, int]:
            return {k: int(s.value(v)) for k, v in vs.items() if s.value(v)}

        return Solution(
            status,
            s.objective_value,
            s.best_objective_bound,
            s.wall_time,
            values(self.R),
            {d: int(s.value(v)) for d, v in self.bought.items()},
            {d: n for (d, n), z in self.pick.items() if s.value(z) and s.value(self.hosts[(d, n)])},
            values=tuple(int(s.value(e)) for e in evaluate),
            reserved=values(self.reserved),
            on_demand=values(self.od),
            spot=values(self.spot),
            shares=values(self.Y),
            sequences=values(self.X),
            rounding=self._units(s, expr),
            units=tuple(self._units(s, e) for e in evaluate),
        )

    def _first_plan(
        self,
        num: cp_model.LinearExpr,
        den: cp_model.LinearExpr,
        time_limit: float,
        workers: int,
        seed: int,
    ) -> Solution:
        """Dinkelbach's starting plan, any feasible one: the starting plan (the hint) completed
        at the least cost, else the cheapest plan. Any start reaches the same proved optimum,
        and the completed hint is found at once, where the cheapest plan was a whole search
        (tokens-per-joule-10kw: the same three steps after it, the same final plan)."""

        def cheapest() -> Solution:
            return self._optimize(
                self.tco_expr(),
                minimize=True,
                time_limit=time_limit,
                workers=workers,
                seed=seed,
                evaluate=(num, den),
            )

        if self.hinted and not self.hint_only:
            self.hint_only = True
            try:
                hinted = cheapest()
            finally:
                self.hint_only = False
            if hinted.status.has_plan or self.interrupted:
                return hinted
        return cheapest()

    def _dinkelbach(
        self,
        num: cp_model.LinearExpr,
        den: cp_model.LinearExpr,
        *,
        maximize: bool,
        time_limit: float,
        workers: int,
        seed: int,
    ) -> Solution:
        """Exact ratio optimization (Dinkelbach 1967): with lambda = N/D of the incumbent, optimize
        D*num - N*den over integers; stop when the optimum is 0 (no plan beats the ratio).

        The result's objective is the ratio N/D of the integer numerator and denominator, and its
        `rounding` is the relative error those integers carry (see _ratio_rounding).

        Long because the loop's stopping rules (proof, time, overflow) are read best together.
        """
        start = time.perf_counter()
        label = self.progress_label
        self.progress_label, self.progress_show = (
            f"{label}, first plan",
            _shown(TIE_BREAKS["min_cost"]),
        )
        first = self._first_plan(num, den, time_limit / 4, workers, seed)
        if not first.status.has_plan:
            return first
        best = first
        iterations = 0
        proved = True
        reach = (self.reach(num), self.reach(den))
        bound: Fraction | None = None
        while iterations < MAX_RATIO_STEPS:
            iterations += 1
            N, D = best.values
            if D == 0:
                break
            left = time_limit - (time.perf_counter() - start)
            if left <= 0.05 or self.interrupted:
                proved = False
                break
            # Look for a plan strictly better than n/d, a fraction as close to the incumbent's
            # N/D as 64-bit coefficients allow, on the incumbent's side of it.
            lam = ratio_within(N, D, reach, up=maximize)
            if lam is None:
                proved = False
                break
            bound = lam
            obj = lam.denominator * num - lam.numerator * den
            self.progress_label, self.progress_show = f"{label}, ratio step {iterations}", None
            self.hint_last_plan()  # the step starts from the incumbent (at 0 on its objective)
            sol = self._optimize(
                obj,
                minimize=not maximize,
                time_limit=left,
                workers=workers,
                seed=seed,
                evaluate=(num, den),
            )
            if not sol.status.has_plan:
                proved = False
                break
            if sol.status != Status.OPTIMAL:
                proved = False
            improved = (sol.objective or 0) > 0 if maximize else (sol.objective or 0) < 0
            if not improved:
                break
            best = sol
        N, D = best.values
        ratio = N / D if D else 0.0
        # Each of N and D is off its exact value by at most its units (rounded coefficients).
        n_units, d_units = best.units
        rounding = ratio * (n_units / abs(N) + d_units / abs(D)) if N and D else 0.0
        proved_bound = float(bound) if proved and bound is not None else (ratio if proved else None)
        close = proved_bound is not None and abs(proved_bound - ratio) <= 1e-6 * abs(ratio)
        return dataclasses.replace(
            best,
            status=Status.OPTIMAL if proved and close else Status.FEASIBLE,
            objective=ratio,
            bound=proved_bound,
            seconds=0.0,
            iterations=iterations,
            rounding=rounding,
        )
