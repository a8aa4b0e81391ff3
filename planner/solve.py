"""The solver session: design tables cached across solves, a warm start from the previous plan,
and model -> plan builder -> verifier for every answer. What-if questions (the least value of
a quantity, which named constraints conflict) are asked here too, so no other part of the
planner builds a model."""

from __future__ import annotations

import time

from planner.catalog import Catalog, load_catalog
from planner.estimator.designs import Design
from planner.model.cpsat import PlannerModel
from planner.model.diagnose import blocking_constraints, why_no_design
from planner.model.result import ReplicaKey
from planner.model.tables import Tables, build_tables, design_key
from planner.plan.build import make_plan
from planner.plan.types import Plan
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.status import Status
from planner.verify import verify


class Solver:
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
    ) -> None:
        """`why=False` skips the extra solves that explain a result: naming the blocking
        constraint of an infeasible problem (one solve per constraint family) and, for request
        mixes, pricing each device type alone; for callers that only report the status. `gap` > 0 accepts a
        plan proved within that relative gap of the bound (reported FEASIBLE, with the bound)."""
        self.cat = cat or load_catalog()
        self.time_limit = time_limit
        self.workers = workers
        self.seed = seed
        self.tuned = tuned
        self.why = why
        self.gap = gap
        self._key: str | None = None
        self._designs: dict[str, list[Design]] | None = None
        self._last: dict[ReplicaKey, int] | None = None
        self.reused = 0  # solves that reused the previous design tables

    def forget_plan(self) -> None:
        """Start the next solve without a warm start (the design tables are kept): a run of
        solves then gives the same plans whatever this session solved before it."""
        self._last = None

    def tables(self, problem: Problem) -> Tables:
        key = design_key(problem)
        if key == self._key and self._designs is not None:
            self.reused += 1
            return build_tables(problem, self.cat, tuned=self.tuned, designs=self._designs)
        tables = build_tables(problem, self.cat, tuned=self.tuned)
        self._key, self._designs, self._last = key, tables.designs, None
        return tables

    def solve(self, problem: Problem) -> Plan:
        t0 = time.perf_counter()
        tables = self.tables(problem)
        empty = [w for w in problem.workloads if not tables.designs[w.name]]
        if empty:
            notes = [why_no_design(w, problem, self.cat) for w in empty]
            return _no_plan(problem, Status.INFEASIBLE, t0, notes)
        model = PlannerModel(tables, warm=self._last if self.tuned else None)
        sol = model.solve(
            time_limit=self.time_limit, workers=self.workers, seed=self.seed, gap=self.gap
        )
        if sol.status == Status.INFEASIBLE:
            notes = (
                blocking_constraints(tables, time_limit=self.time_limit, seed=self.seed)
                if self.why
                else []
            )
            return _no_plan(problem, Status.INFEASIBLE, t0, notes)
        if not sol.status.has_plan:
            return _no_plan(
                problem, sol.status, t0, [f"no plan found within {self.time_limit:g} s"]
            )
        self._last = sol.replicas
        plan = make_plan(problem, self.cat, tables, sol)
        if sol.status == Status.FEASIBLE and self.gap > 0 and not model.interrupted:
            plan.notes.append(
                f"stopped within the requested {self.gap:.2%} gap: no plan is cheaper than the "
                "bound, so this one is at most that far from optimal"
                if problem.objective.goal == "min_cost"
                else f"stopped within the requested {self.gap:.2%} gap of the bound"
            )
        plan.solve_seconds = time.perf_counter() - t0
        verify(plan, problem, self.cat)
        plan.notes.extend(f"catalog overlay: {d}" for d in self.cat.overlays)
        if (
            self.why
            and problem.objective.goal == "min_cost"
            and any(isinstance(w, InferenceWorkload) and w.request_mix for w in problem.workloads)
        ):
            plan.notes.append(self.single_type_note(problem, plan, tables))
        return plan

    # -- what-if questions ------------------------------------------------------------------

    def least(self, problem: Problem, quantity: str, relax: frozenset[str]) -> float | None:
        """The least value of a model quantity (planner.model.quantities.QUANTITIES: cost in USD,
        power in W before PUE, devices, ...) over plans meeting every constraint family except
        those in `relax`; None when no plan exists (or none was found in time)."""
        tables = self.tables(problem)
        if any(not d for d in tables.designs.values()):
            return None
        sol = PlannerModel(tables).least(
            quantity,
            relax=relax,
            time_limit=self.time_limit,
            workers=self.workers,
            seed=self.seed,
        )
        return None if sol.objective is None else float(sol.objective)

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

    def single_type_note(self, problem: Problem, plan: Plan, tables: Tables) -> str:
        """What the cheapest plan on one device type alone costs, and what this plan saves
        against it (how a request mix pays off by splitting classes across types).

        Each type alone gets as long as this plan's own solve took (at least 2 s, at most the
        time limit), so the explanation costs about what the answer did. A type not proved
        optimal in that time is counted at its bound (no plan on it alone costs less), which
        keeps the stated saving a floor."""
        limit = min(self.time_limit, max(2.0, plan.solve_seconds))
        alone = Solver(self.cat, time_limit=limit, workers=self.workers, seed=self.seed, why=False)
        best: tuple[float, str, Plan] | None = None  # (least cost, type, its plan)
        unsettled = []
        for dev in sorted(tables.econ):
            p = alone.solve(only_device(problem, dev))
            if p.status == "OPTIMAL":
                least = p.tco_usd
            elif p.status == "FEASIBLE" and p.bound is not None:
                least = min(p.tco_usd, p.bound)
            elif p.status == "INFEASIBLE":
                continue
            else:
                unsettled.append(dev)
                continue
            if best is None or least < best[0]:
                best = (least, dev, p)
        late = (
            f" ({', '.join(unsettled)} alone: no plan found in {limit:.0f} s)" if unsettled else ""
        )
        if best is None and unsettled:
            return f"no plan on one device type alone was found in {limit:.0f} s{late}"
        if best is None:
            return "no single device type can serve the whole request mix alone"
        least, dev, p = best
        n = sum(x.count for x in p.devices)
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
            f"{dev} at ${p.tco_usd:,.0f}, not proved optimal in {limit:.0f} s); this plan "
            f"{gain}{late}"
        )


def only_device(problem: Problem, dev: str) -> Problem:
    """The problem with one device type allowed (and only its inventory and measured capacity
    entries kept: an entry for another device names a replica this problem cannot have)."""
    c = problem.constraints
    workloads = [
        w.model_copy(update={"capacity": [m for m in w.capacity if m.device == dev]})
        if isinstance(w, InferenceWorkload) and w.capacity
        else w
        for w in problem.workloads
    ]
    return problem.model_copy(
        update={
            "workloads": workloads,
            "constraints": c.model_copy(
                update={
                    "allowed_devices": [dev],
                    "inventory": [o for o in c.inventory if o.device == dev],
                }
            ),
        }
    )


def solve_problem(
    problem: Problem,
    *,
    time_limit: float = 30.0,
    workers: int = 1,
    seed: int = 0,
    cat: Catalog | None = None,
    tuned: bool = True,
    gap: float = 0.0,
) -> Plan:
    """Solve one problem from scratch: the verified optimal plan, or a plan-less result."""
    solver = Solver(cat, time_limit=time_limit, workers=workers, seed=seed, tuned=tuned, gap=gap)
    return solver.solve(problem)


def _no_plan(problem: Problem, status: Status, t0: float, notes: list[str]) -> Plan:
    """A result without a plan (infeasible, or nothing found in time), with its reasons."""
    return Plan(
        problem.name,
        status,
        problem.objective.goal,
        None,
        None,
        time.perf_counter() - t0,
        notes=notes,
    )
