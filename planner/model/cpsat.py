"""The CP-SAT model: how many replicas of each enumerated design, and what to buy to host them.

Variables are small integers: replicas per inference design, a one-hot choice of training design,
devices bought per type (inventory is free), hosts per type. Every constraint family is one
method with a name, so binding constraints and infeasibility can be reported by name.
Floats become integers here only, with the scales below; rounding is always conservative
(capacity rounded down, requirements and costs rounded up) and the verifier re-checks in floats.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ortools.sat.python import cp_model, cp_model_helper

from planner.errors import InternalError
from planner.model.designs import Design
from planner.model.economics import DeviceEconomics, energy_usd_per_watt, in_fleet
from planner.problem_schema import InferenceWorkload, Problem, TrainingWorkload

THROUGHPUT_SCALE = 1000  # milli-tokens per second
INT_LIMIT = 2**62
COEF_LIMIT = 2**60  # bound on |objective| of a ratio step, with room under CP-SAT's int64 checks


@dataclass
class Tables:
    """Everything the model needs, computed by the estimator beforehand."""

    problem: Problem
    designs: dict[str, list[Design]]  # workload -> designs
    econ: dict[str, DeviceEconomics]  # device id -> economics
    training_cost: dict[tuple[str, int], float] = field(
        default_factory=dict
    )  # energy or rent of a job
    tuned: bool = True  # pruned designs, tight replica domains, a heuristic hint (off: baseline)


@dataclass
class Solution:
    status: str
    objective: float | None
    bound: float | None
    seconds: float
    replicas: dict[tuple[str, int], int]  # (workload, design index) -> count
    bought: dict[str, int]
    hosts: dict[str, int]
    iterations: int = 1
    values: tuple[int, ...] = ()  # requested expressions evaluated at the solution


def _int(x: float, what: str, up: bool = True) -> int:
    v = math.ceil(x - 1e-9) if up else math.floor(x + 1e-9)
    if abs(v) > INT_LIMIT:
        raise InternalError(
            f"coefficient `{what}` = {x:.3g} does not fit the solver's 64-bit integers"
        )
    return int(v)


def _replicas_needed(w: InferenceWorkload, d: Design) -> int:
    """Replicas of design `d` alone that meet the workload's throughput and concurrency."""
    return max(
        math.ceil(w.min_tokens_per_s / d.tokens_per_s) if w.min_tokens_per_s else 0,
        math.ceil(w.concurrency / d.concurrency),
        1,
    )


def _ratio_within(n: int, d: int, reach: tuple[int, int], *, up: bool) -> Fraction | None:
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


class PlannerModel:
    """Builds the CP-SAT model from tables; solves for one objective at a time."""

    def __init__(self, t: Tables, warm: dict[tuple[str, int], int] | None = None) -> None:
        """`warm`: replica counts of a previous plan over the same designs, used as the hint."""
        self.t = t
        self.p = t.problem
        self.m = cp_model.CpModel()
        self.R: dict[tuple[str, int], cp_model.IntVar] = {}
        self.R_ub: dict[tuple[str, int], int] = {}
        self.devices: dict[str, cp_model.LinearExpr] = {}
        self.bought: dict[str, cp_model.IntVar] = {}
        self.hosts: dict[str, cp_model.IntVar] = {}
        self.hosts_bought: dict[str, cp_model.IntVar] = {}
        self.named: dict[str, cp_model.IntVar] = {}  # constraint name -> enforcement literal
        self.bought_ub: dict[str, int] = {}
        self.interrupted = False
        self.hosts_ub: dict[str, int] = {}
        self._variables()
        self._constraints()
        if warm is not None or t.tuned:
            self._hint(warm)

    # -- variables --------------------------------------------------------------------------

    def _variables(self) -> None:
        """Replicas per design; bought devices and hosts per type."""
        c = self.p.constraints
        for w in self.p.workloads:
            for j, d in enumerate(self.t.designs[w.name]):
                ub = 1 if isinstance(w, TrainingWorkload) else self._replica_ub(w, d)
                self.R[(w.name, j)] = self.m.new_int_var(0, ub, f"R[{w.name},{j}]")
                self.R_ub[(w.name, j)] = ub
        use: dict[str, list[tuple[int, cp_model.IntVar, int]]] = {}
        fleet = {w.name for w in self.p.workloads if in_fleet(w, self.p)}
        for (wname, j), var in self.R.items():
            if wname not in fleet:
                continue
            for dev, n in self.t.designs[wname][j].devices.items():
                use.setdefault(dev, []).append((n, var, self.R_ub[(wname, j)]))
        cap = c.max_devices or 100_000
        for dev, terms in use.items():
            e = self.t.econ[dev]
            total_ub = min(cap + e.owned, sum(n * ub for n, _, ub in terms))
            self.devices[dev] = sum(n * v for n, v, _ in terms)  # type: ignore[assignment]
            self.bought_ub[dev] = max(0, total_ub)
            self.hosts_ub[dev] = math.ceil(total_ub / e.slots) + 1
            self.bought[dev] = self.m.new_int_var(0, self.bought_ub[dev], f"bought[{dev}]")
            self.hosts[dev] = self.m.new_int_var(0, self.hosts_ub[dev], f"hosts[{dev}]")
            self.hosts_bought[dev] = self.m.new_int_var(
                0, self.hosts_ub[dev], f"hosts_bought[{dev}]"
            )

    def _replica_ub(self, w: InferenceWorkload, d: Design) -> int:
        need = _replicas_needed(w, d)
        if self.p.objective.goal == "min_cost" and self.t.tuned:
            return need  # more replicas of one design than its demand needs only add cost
        c = self.p.constraints
        n = sum(d.devices.values())
        limit = 4096 // n + 1
        if c.max_devices:
            limit = min(limit, c.max_devices // n + 1)
        return max(need, min(limit, 4096))

    # -- constraints -----------------------------------------------------------------------

    def _lit(self, name: str) -> cp_model.IntVar:
        """An assumption literal for a named constraint family (for explanations)."""
        lit = self.m.new_bool_var(f"on:{name}")
        self.named[name] = lit
        return lit

    def _constraints(self) -> None:
        # Order: demand first (defines what must be bought), then hosting, then limits.
        self._demand()
        self._inventory_and_hosts()
        self._budget()
        self._power()
        self._device_count()
        self._rack_units()

    def _demand(self) -> None:
        """Each inference workload meets its throughput and concurrency; each training job runs once."""
        for w in self.p.workloads:
            js = [j for (wn, j) in self.R if wn == w.name]
            designs = self.t.designs[w.name]
            if isinstance(w, TrainingWorkload):
                self.m.add(sum(self.R[(w.name, j)] for j in js) == 1).only_enforce_if(
                    self._lit(f"train:{w.name}")
                )
                continue
            if w.min_tokens_per_s > 0:
                need = _int(w.min_tokens_per_s * THROUGHPUT_SCALE, f"{w.name}.min_tokens_per_s")
                self.m.add(
                    sum(
                        _int(designs[j].tokens_per_s * THROUGHPUT_SCALE, "tokens_per_s", up=False)
                        * self.R[(w.name, j)]
                        for j in js
                    )
                    >= need
                ).only_enforce_if(self._lit(f"throughput:{w.name}"))
            self.m.add(
                sum(designs[j].concurrency * self.R[(w.name, j)] for j in js) >= w.concurrency
            ).only_enforce_if(self._lit(f"concurrency:{w.name}"))
            self.m.add(sum(self.R[(w.name, j)] for j in js) >= 1)

    def _inventory_and_hosts(self) -> None:
        """Devices beyond the inventory are bought; every device sits in a host slot."""
        for dev, expr in self.devices.items():
            e = self.t.econ[dev]
            self.m.add(self.bought[dev] >= expr - e.owned)
            self.m.add(self.hosts[dev] * e.slots >= expr)
            self.m.add(self.hosts_bought[dev] * e.slots >= self.bought[dev])
            self.m.add(self.hosts_bought[dev] <= self.hosts[dev])

    def _budget(self) -> None:
        """Total cost over the horizon, and money up front, under their ceilings."""
        c = self.p.constraints
        if c.budget_usd is not None:
            self.m.add(
                self.tco_expr() <= _int(c.budget_usd, "budget_usd", up=False)
            ).only_enforce_if(self._lit("budget"))
        if c.capex_usd is not None:
            self.m.add(
                self.capex_expr() <= _int(c.capex_usd, "capex_usd", up=False)
            ).only_enforce_if(self._lit("capex"))

    def _power(self) -> None:
        """Power at the wall (devices and hosts at load, times PUE) under the cap."""
        c = self.p.constraints
        if c.power_w is not None:
            cap = _int(c.power_w * 1000 / self.p.horizon.pue, "power_w", up=False)  # milliwatts
            self.m.add(self.power_expr(milli=True) <= cap).only_enforce_if(self._lit("power"))

    def _device_count(self) -> None:
        c = self.p.constraints
        if c.max_devices is not None:
            self.m.add(self.devices_expr() <= c.max_devices).only_enforce_if(
                self._lit("max_devices")
            )

    def _rack_units(self) -> None:
        c = self.p.constraints
        if c.max_rack_units is not None:
            self.m.add(self.rack_units_expr() <= c.max_rack_units).only_enforce_if(
                self._lit("rack_units")
            )

    # -- hints ----------------------------------------------------------------------------

    def heuristic(self) -> dict[tuple[str, int], int]:
        """A quick plan: per workload, the design whose replicas meet the demand at the lowest
        price (devices with their share of a host, plus energy, or the job's cost), ignoring
        shared limits."""
        buy = self.p.horizon.procurement == "buy"
        per_w = energy_usd_per_watt(self.p) if buy else 0.0
        slot_usd = {
            dev: (e.unit_usd + (e.node.price_usd if buy else 0.0) / e.slots)
            + e.node.power_overhead_w / e.slots * per_w
            for dev, e in self.t.econ.items()
        }
        chosen: dict[tuple[str, int], int] = {}
        for w in self.p.workloads:
            best: tuple[float, int, int] | None = None
            for j, d in enumerate(self.t.designs[w.name]):
                if isinstance(w, TrainingWorkload):
                    n = 1
                    price = self.t.training_cost.get((w.name, j), 0.0)
                else:
                    n = _replicas_needed(w, d)
                    price = 0.0
                if in_fleet(w, self.p):
                    price += sum(slot_usd[x] * k for x, k in d.devices.items())
                price = n * (price + d.power_w * per_w)
                if n <= self.R_ub[(w.name, j)] and (best is None or price < best[0]):
                    best = (price, j, n)
            if best is not None:
                chosen[(w.name, best[1])] = best[2]
        return chosen

    def _hint(self, warm: dict[tuple[str, int], int] | None) -> None:
        """Start the search from a previous plan or the heuristic one (a hint, not a constraint)."""
        chosen = warm if warm is not None else self.heuristic()
        chosen = {k: min(v, self.R_ub[k]) for k, v in chosen.items() if k in self.R}
        for k, var in self.R.items():
            self.m.add_hint(var, chosen.get(k, 0))
        used: dict[str, int] = {}
        for (wn, j), r in chosen.items():
            w = next(x for x in self.p.workloads if x.name == wn)
            if in_fleet(w, self.p):
                for dev, n in self.t.designs[wn][j].devices.items():
                    used[dev] = used.get(dev, 0) + n * r
        for dev, var in self.bought.items():
            e = self.t.econ[dev]
            u = used.get(dev, 0)
            b = min(max(0, u - e.owned), self.bought_ub[dev])
            self.m.add_hint(var, b)
            self.m.add_hint(self.hosts[dev], min(-(-u // e.slots), self.hosts_ub[dev]))
            self.m.add_hint(self.hosts_bought[dev], min(-(-b // e.slots), self.hosts_ub[dev]))

    # -- objective terms -------------------------------------------------------------------

    def capex_expr(self) -> cp_model.LinearExpr:
        buy = self.p.horizon.procurement == "buy"
        terms = []
        for dev, b in self.bought.items():
            e = self.t.econ[dev]
            if buy:
                terms.append(_int(e.unit_usd, f"{dev}.price") * b)
                terms.append(_int(e.node.price_usd, f"{e.node.id}.price") * self.hosts_bought[dev])
        return sum(terms)  # type: ignore[return-value]

    def tco_expr(self) -> cp_model.LinearExpr:
        """Capex (or rent) plus electricity over the horizon, plus training jobs' energy or rent."""
        buy = self.p.horizon.procurement == "buy"
        per_w = energy_usd_per_watt(self.p)
        terms: list[cp_model.LinearExpr] = [self.capex_expr()]
        for (wn, j), var in self.R.items():
            d = self.t.designs[wn][j]
            if (wn, j) in self.t.training_cost:
                terms.append(_int(self.t.training_cost[(wn, j)], "training cost") * var)
            elif buy:
                terms.append(_int(d.power_w * per_w, "energy") * var)
        for dev, h in self.hosts.items():
            e = self.t.econ[dev]
            if buy:
                terms.append(_int(e.node.power_overhead_w * per_w, "host energy") * h)
            else:
                # Rented devices: rent over the working hours, for devices beyond the inventory.
                terms.append(_int(e.unit_usd, f"{dev}.rent") * self.bought[dev])
        return sum(terms)  # type: ignore[return-value]

    def power_expr(self, milli: bool = False) -> cp_model.LinearExpr:
        s = 1000 if milli else 1
        terms = [
            _int(self.t.designs[wn][j].power_w * s, "power") * v for (wn, j), v in self.R.items()
        ]
        terms += [
            _int(self.t.econ[d].node.power_overhead_w * s, "host power") * h
            for d, h in self.hosts.items()
        ]
        return sum(terms)  # type: ignore[return-value]

    def throughput_expr(self) -> cp_model.LinearExpr:
        terms = []
        for (wn, j), v in self.R.items():
            w = next(x for x in self.p.workloads if x.name == wn)
            if isinstance(w, InferenceWorkload):
                terms.append(
                    _int(
                        self.t.designs[wn][j].tokens_per_s * THROUGHPUT_SCALE,
                        "tokens_per_s",
                        up=False,
                    )
                    * v
                )
        return sum(terms)  # type: ignore[return-value]

    def devices_expr(self) -> cp_model.LinearExpr:
        return sum(self.devices.values())  # type: ignore[return-value]

    def rack_units_expr(self) -> cp_model.LinearExpr:
        return sum(self.t.econ[d].node.rack_units * h for d, h in self.hosts.items())  # type: ignore[return-value]

    def quantity(self, name: str) -> cp_model.LinearExpr:
        """A named linear quantity of the plan: cost (USD over the horizon), capex (USD),
        power (W at load, before PUE), devices, rack_units, throughput (milli-tokens/s)."""
        return {
            "cost": self.tco_expr,
            "capex": self.capex_expr,
            "power": self.power_expr,
            "devices": self.devices_expr,
            "rack_units": self.rack_units_expr,
            "throughput": self.throughput_expr,
        }[name]()

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
        for lit_name, lit in self.named.items():
            self.m.add(lit == (0 if lit_name in relax else 1))
        return self._optimize(
            self.quantity(name), minimize=True, time_limit=time_limit, workers=workers, seed=seed
        )

    def infeasible_core(self, *, time_limit: float, seed: int) -> list[str] | None:
        """Constraint families that together admit no plan (CP-SAT's sufficient assumptions for
        infeasibility), or None when a plan exists or the solver could not decide in time."""
        self.m.add_assumptions(list(self.named.values()))
        s = self._solver(time_limit, 1, seed)
        st = s.solve(self.m)
        if st != cp_model.INFEASIBLE:
            return None
        by_index = {lit.index: name for name, lit in self.named.items()}
        return sorted(by_index[i] for i in s.sufficient_assumptions_for_infeasibility())

    # -- solving ---------------------------------------------------------------------------

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
        for name, lit in self.named.items():
            self.m.add(lit == (0 if name in relax else 1))
        goal = self.p.objective.goal
        start = time.perf_counter()
        if goal in ("min_cost", "max_throughput"):
            minimize = goal == "min_cost"
            sol = self._optimize(
                self.tco_expr() if minimize else self.throughput_expr(),
                minimize=minimize,
                time_limit=time_limit,
                workers=workers,
                seed=seed,
                gap=gap,
            )
        elif goal == "max_tokens_per_joule":
            sol = self._dinkelbach(
                self.throughput_expr(),
                self.power_expr(),
                maximize=True,
                time_limit=time_limit,
                workers=workers,
                seed=seed,
            )
        else:
            sol = self._dinkelbach(
                self.tco_expr(),
                self.throughput_expr(),
                maximize=False,
                time_limit=time_limit,
                workers=workers,
                seed=seed,
            )
        tie = self.p.objective.tie_break
        if tie and sol.status == "OPTIMAL" and not self.interrupted:
            self._fix_primary(goal, sol)
            expr, minimize = {
                "min_cost": (self.tco_expr(), True),
                "max_throughput": (self.throughput_expr(), False),
                "min_power": (self.power_expr(), True),
            }[tie]
            left = max(0.1, time_limit - (time.perf_counter() - start))
            second = self._optimize(
                expr, minimize=minimize, time_limit=left, workers=workers, seed=seed
            )
            if second.status in ("OPTIMAL", "FEASIBLE"):
                sol = Solution(
                    sol.status if second.status == "OPTIMAL" else "FEASIBLE",
                    sol.objective,
                    sol.bound,
                    0.0,
                    second.replicas,
                    second.bought,
                    second.hosts,
                    sol.iterations,
                )
        sol.seconds = time.perf_counter() - start
        return sol

    def _fix_primary(self, goal: str, sol: Solution) -> None:
        assert sol.objective is not None
        if goal == "min_cost":
            self.m.add(self.tco_expr() <= round(sol.objective))
        elif goal == "max_throughput":
            self.m.add(self.throughput_expr() >= round(sol.objective))
        elif goal == "max_tokens_per_joule":
            # Keep throughput / power >= n/d (n/d at or just below the optimum N/D).
            thr, power = self.throughput_expr(), self.power_expr()
            n, d = sol.values
            lam = _ratio_within(n, d, (self._reach(thr), self._reach(power)), up=False)
            if lam is not None:
                self.m.add(lam.denominator * thr - lam.numerator * power >= 0)
        else:
            # Keep cost / throughput <= n/d (n/d at or just above the optimum N/D).
            cost, thr = self.tco_expr(), self.throughput_expr()
            n, d = sol.values
            lam = _ratio_within(n, d, (self._reach(cost), self._reach(thr)), up=True)
            if lam is not None:
                self.m.add(lam.denominator * cost - lam.numerator * thr <= 0)

    def _reach(self, expr: cp_model.LinearExpr) -> int:
        """The largest absolute value `expr` can take over its variables' domains."""
        flat = cp_model_helper.FlatIntExpr(expr)
        proto = self.m.proto  # keep the proto alive while its variables are read
        total = abs(int(flat.offset))
        for v, c in zip(flat.vars, flat.coeffs, strict=True):
            domain = list(proto.variables[v.index].domain)
            total += abs(int(c)) * max(abs(domain[0]), abs(domain[-1]))
        return total

    def _solver(
        self, time_limit: float, workers: int, seed: int, gap: float = 0.0
    ) -> cp_model.CpSolver:
        s = cp_model.CpSolver()
        s.parameters.max_time_in_seconds = max(0.05, time_limit)
        s.parameters.num_workers = workers
        s.parameters.random_seed = seed
        if workers == 1:
            s.parameters.linearization_level = 2
        if gap > 0:
            s.parameters.relative_gap_limit = gap
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
        if minimize:
            self.m.minimize(expr)
        else:
            self.m.maximize(expr)
        err = self.m.validate()
        if err:
            raise InternalError(f"the solver model is invalid: {err}")
        s = self._solver(time_limit, workers, seed, gap)
        st = s.solve(self.m)
        if st == cp_model.OPTIMAL and gap > 0 and s.objective_value != s.best_objective_bound:
            st = cp_model.FEASIBLE  # stopped within the gap limit: not proved optimal
            return self._read(s, st, evaluate)
        # CP-SAT catches Ctrl-C and returns its incumbent: stopping early without proof or
        # reaching the limit. Later solves of the same run (Dinkelbach steps, tie-breaks) are
        # then skipped, so the best plan so far is shown at once.
        if st == cp_model.FEASIBLE and s.wall_time < 0.9 * time_limit:
            self.interrupted = True
        return self._read(s, st, evaluate)

    def _read(
        self, s: cp_model.CpSolver, st: Any, evaluate: tuple[cp_model.LinearExpr, ...] = ()
    ) -> Solution:
        name = {
            cp_model.OPTIMAL: "OPTIMAL",
            cp_model.FEASIBLE: "FEASIBLE",
            cp_model.INFEASIBLE: "INFEASIBLE",
            cp_model.UNKNOWN: "NO_PLAN",
            cp_model.MODEL_INVALID: "MODEL_INVALID",
        }.get(st)
        if name is None or name == "MODEL_INVALID":
            raise InternalError(
                f"unexpected solver status {s.status_name(st)}: {self.m.validate()}"
            )
        if name in ("INFEASIBLE", "NO_PLAN"):
            return Solution(name, None, None, s.wall_time, {}, {}, {})
        return Solution(
            name,
            s.objective_value,
            s.best_objective_bound,
            s.wall_time,
            {k: int(s.value(v)) for k, v in self.R.items() if s.value(v)},
            {d: int(s.value(v)) for d, v in self.bought.items()},
            {d: int(s.value(v)) for d, v in self.hosts.items()},
            values=tuple(int(s.value(e)) for e in evaluate),
        )

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
        D*num - N*den over integers; stop when the optimum is 0 (no plan beats the ratio)."""
        start = time.perf_counter()
        # Start from any feasible plan: the cheapest one.
        first = self._optimize(
            self.tco_expr(),
            minimize=True,
            time_limit=time_limit / 4,
            workers=workers,
            seed=seed,
            evaluate=(num, den),
        )
        if first.status not in ("OPTIMAL", "FEASIBLE"):
            return first
        best = first
        iterations = 0
        proved = True
        reach = (self._reach(num), self._reach(den))
        bound: Fraction | None = None
        while iterations < 30:
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
            lam = _ratio_within(N, D, reach, up=maximize)
            if lam is None:
                proved = False
                break
            bound = lam
            obj = lam.denominator * num - lam.numerator * den
            sol = self._optimize(
                obj,
                minimize=not maximize,
                time_limit=left,
                workers=workers,
                seed=seed,
                evaluate=(num, den),
            )
            if sol.status not in ("OPTIMAL", "FEASIBLE"):
                proved = False
                break
            if sol.status != "OPTIMAL":
                proved = False
            improved = (sol.objective or 0) > 0 if maximize else (sol.objective or 0) < 0
            if not improved:
                break
            best = sol
        N, D = best.values
        ratio = N / D if D else 0.0
        proved_bound = float(bound) if proved and bound is not None else (ratio if proved else None)
        close = proved_bound is not None and abs(proved_bound - ratio) <= 1e-6 * abs(ratio)
        status = "OPTIMAL" if proved and close else "FEASIBLE"
        return Solution(
            status,
            ratio,
            proved_bound,
            0.0,
            best.replicas,
            best.bought,
            best.hosts,
            iterations,
            values=best.values,
        )
