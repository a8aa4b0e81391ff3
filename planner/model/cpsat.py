"""The CP-SAT model: how many replicas of each enumerated design serve each demand period, on
premises or in the cloud, and what to buy, reserve or rent to run them.

Variables are small integers: replicas per (inference design, period, site), a one-hot choice of
training design, devices bought per type (inventory is free) and their hosts, reserved devices per
type, on-demand and spot devices per type and period. Owned and bought capacity is held for the
whole horizon, so it is sized for the busiest period; on-demand and spot follow each period.
A request-mix workload splits each class's load across designs in steps of 1/SHARE_STEPS of one
replica's time (a replica may serve several classes), so the split is not limited to whole replicas.
Every constraint family is one method with a name, so binding constraints and infeasibility can be
reported by name. Floats become integers here only, with the scales below; rounding is always
conservative (capacity rounded down, requirements and costs rounded up) and the verifier re-checks
in floats.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ortools.sat.python import cp_model, cp_model_helper

from planner.errors import InternalError
from planner.estimator.designs import Design
from planner.estimator.economics import (
    DeviceEconomics,
    Period,
    cloud_host_watts,
    embodied_kg_per_hour,
    embodied_share,
    energy_usd_per_watt,
    energy_usd_per_watt_hour,
    grid_intensity,
    in_fleet,
    ownership_factor,
    reserved_hours,
)
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload

THROUGHPUT_SCALE = 1000  # milli-tokens per second
RATE_SCALE = 1000  # milli-requests per second
SHARE_STEPS = 1000  # a replica's time is split among request classes in steps of 1/1000
PREM, CLOUD, JOB = "on-premises", "cloud", "job"  # where replicas run (JOB: a rented training job)
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
    periods: list[Period] = field(default_factory=list)  # demand periods (scale > 0)
    # Request-mix workloads: per design, requests/s one replica serves of each class it can hold
    # (class index -> rate).
    serves: dict[str, list[dict[int, float]]] = field(default_factory=dict)
    sized_for: dict[str, list[int]] = field(default_factory=dict)  # design -> its class index


Key = tuple[str, int, int, str]  # (workload, design, period (-1: the whole horizon), site)
ShareKey = tuple[str, int, int, int, str]  # (workload, design, class, period, site)


@dataclass
class Solution:
    status: str
    objective: float | None
    bound: float | None
    seconds: float
    replicas: dict[Key, int]
    bought: dict[str, int]
    hosts: dict[str, int]
    iterations: int = 1
    values: tuple[int, ...] = ()  # requested expressions evaluated at the solution
    reserved: dict[str, int] = field(default_factory=dict)
    on_demand: dict[tuple[str, int], int] = field(default_factory=dict)  # (device, period)
    spot: dict[tuple[str, int], int] = field(default_factory=dict)  # (device, period)
    shares: dict[ShareKey, int] = field(default_factory=dict)  # in 1/SHARE_STEPS of a replica


def _int(x: float, what: str, up: bool = True) -> int:
    v = math.ceil(x - 1e-9) if up else math.floor(x + 1e-9)
    if abs(v) > INT_LIMIT:
        raise InternalError(
            f"coefficient `{what}` = {x:.3g} does not fit the solver's 64-bit integers"
        )
    return int(v)


def _replicas_needed(w: InferenceWorkload, d: Design, scale: float = 1.0) -> int:
    """Replicas of design `d` alone that meet the workload's throughput and concurrency."""
    return max(
        math.ceil(w.min_tokens_per_s * scale / d.tokens_per_s - 1e-9) if w.min_tokens_per_s else 0,
        math.ceil(w.concurrency * scale / d.concurrency - 1e-9),
        1,
    )


def class_load(w: InferenceWorkload, k: int, scale: float) -> float:
    """Requests/s of class `k` of a request-mix workload at demand `scale`."""
    assert w.request_mix is not None and w.requests_per_s is not None
    return w.requests_per_s * w.request_mix[k].share * scale


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

    def __init__(self, t: Tables, warm: dict[Key, int] | None = None) -> None:
        """`warm`: replica counts of a previous plan over the same designs, used as the hint."""
        self.t = t
        self.p = t.problem
        self.periods = t.periods
        self.m = cp_model.CpModel()
        self.R: dict[Key, cp_model.IntVar] = {}
        self.R_ub: dict[Key, int] = {}
        self.Y: dict[ShareKey, cp_model.IntVar] = {}
        self.use: dict[tuple[str, int, str], list[tuple[int, cp_model.IntVar, int]]] = {}
        self.fleet: dict[str, cp_model.LinearExpr] = {}  # owned + bought devices held
        self.fleet_ub: dict[str, int] = {}
        self.bought: dict[str, cp_model.IntVar] = {}
        self.hosts: dict[str, cp_model.IntVar] = {}
        self.hosts_bought: dict[str, cp_model.IntVar] = {}
        self.reserved: dict[str, cp_model.IntVar] = {}
        self.od: dict[tuple[str, int], cp_model.IntVar] = {}
        self.spot: dict[tuple[str, int], cp_model.IntVar] = {}
        self.spot_up: dict[tuple[str, int], cp_model.LinearExpr] = {}
        self.named: dict[str, cp_model.IntVar] = {}  # constraint name -> enforcement literal
        self.bought_ub: dict[str, int] = {}
        self.interrupted = False
        self.hosts_ub: dict[str, int] = {}
        self._peaks: dict[str, cp_model.LinearExpr] = {}
        self._by_name = {w.name: w for w in self.p.workloads}
        self._keys_of: dict[tuple[str, int], list[Key]] = {}  # (workload, period) -> replicas
        self._variables()
        self._constraints()
        if warm is not None or t.tuned:
            self._hint(warm)

    @property
    def single(self) -> bool:
        """One demand period: the model of a fixed demand (peaks are plain expressions)."""
        return len(self.periods) == 1

    def _workload(self, name: str) -> InferenceWorkload | TrainingWorkload:
        return self._by_name[name]

    # -- variables --------------------------------------------------------------------------

    def _sites(self, d: Design) -> list[str]:
        """Where a replica of `d` may run: on premises when each of its device types can be
        bought or is owned, in the cloud when each can be rented."""
        es = [self.t.econ[x] for x in d.devices]
        out = []
        if all(e.on_premises for e in es):
            out.append(PREM)
        if all(e.cloud for e in es):
            out.append(CLOUD)
        return out

    def _variables(self) -> None:
        """Replicas per design, period and site; devices held, bought, reserved and rented."""
        for w in self.p.workloads:
            for j, d in enumerate(self.t.designs[w.name]):
                if isinstance(w, TrainingWorkload):
                    site = PREM if in_fleet(w, self.p) else JOB
                    if (PREM if site == PREM else CLOUD) not in self._sites(d):
                        continue
                    self._replica_var((w.name, j, -1, site), 1)
                    continue
                for p_i, period in enumerate(self.periods):
                    for site in self._sites(d):
                        key = (w.name, j, p_i, site)
                        self._replica_var(key, self._replica_ub(w, j, d, period.scale))
                        for k in self.t.serves[w.name][j] if w.name in self.t.serves else ():
                            self.Y[(w.name, j, k, p_i, site)] = self.m.new_int_var(
                                0, SHARE_STEPS * self.R_ub[key], f"Y[{w.name},{j},{k},{p_i},{site}]"
                            )
        for (wname, j, p_i, site), var in self.R.items():
            if site == JOB:
                continue
            periods = range(len(self.periods)) if p_i < 0 else [p_i]
            ub = self.R_ub[(wname, j, p_i, site)]
            for dev, n in self.t.designs[wname][j].devices.items():
                for q in periods:
                    self.use.setdefault((dev, q, site), []).append((n, var, ub))
        cap = self.p.constraints.max_devices or 100_000
        for dev in sorted({dev for dev, _, site in self.use if site == PREM}):
            e = self.t.econ[dev]
            most = max(
                sum(n * ub for n, _, ub in terms)
                for (d2, _, site), terms in self.use.items()
                if d2 == dev and site == PREM
            )
            total_ub = max(0, min(cap + e.owned, most))
            can_buy = "buy" in e.modes
            self.fleet_ub[dev] = total_ub if can_buy else min(total_ub, e.owned)
            self.bought_ub[dev] = max(0, total_ub - e.owned) if can_buy else 0
            self.hosts_ub[dev] = math.ceil(total_ub / e.slots) + 1
            if self.single:
                self.fleet[dev] = self.use_expr(dev, 0, PREM)
            else:
                self.fleet[dev] = self.m.new_int_var(0, self.fleet_ub[dev], f"fleet[{dev}]")
            self.bought[dev] = self.m.new_int_var(0, self.bought_ub[dev], f"bought[{dev}]")
            self.hosts[dev] = self.m.new_int_var(0, self.hosts_ub[dev], f"hosts[{dev}]")
            self.hosts_bought[dev] = self.m.new_int_var(
                0, self.hosts_ub[dev], f"hosts_bought[{dev}]"
            )
        avail = self.p.market.spot_availability
        for dev in sorted({dev for dev, _, site in self.use if site == CLOUD}):
            e = self.t.econ[dev]
            most = max(
                sum(n * ub for n, _, ub in terms)
                for (d2, _, site), terms in self.use.items()
                if d2 == dev and site == CLOUD
            )
            most = min(most, cap)
            if "reserved" in e.modes:
                self.reserved[dev] = self.m.new_int_var(0, most, f"reserved[{dev}]")
            for p_i in range(len(self.periods)):
                if "on_demand" in e.modes:
                    self.od[(dev, p_i)] = self.m.new_int_var(0, most, f"od[{dev},{p_i}]")
                if "spot" in e.modes:
                    spot_ub = math.ceil(most / avail)
                    self.spot[(dev, p_i)] = self.m.new_int_var(0, spot_ub, f"spot[{dev},{p_i}]")
                    if avail >= 1:
                        self.spot_up[(dev, p_i)] = self.spot[(dev, p_i)]
                    else:
                        up = self.m.new_int_var(0, most, f"spot_up[{dev},{p_i}]")
                        # Spot devices expected up: at most `availability` of those rented.
                        self.m.add(
                            RATE_SCALE * up
                            <= _int(avail * RATE_SCALE, "spot_availability", up=False)
                            * self.spot[(dev, p_i)]
                        )
                        self.spot_up[(dev, p_i)] = up

    def _replica_var(self, key: Key, ub: int) -> None:
        self.R[key] = self.m.new_int_var(0, ub, "R[{},{},{},{}]".format(*key))
        self.R_ub[key] = ub
        self._keys_of.setdefault((key[0], key[2]), []).append(key)

    def _replica_ub(self, w: InferenceWorkload, j: int, d: Design, scale: float) -> int:
        serves = self.t.serves.get(w.name)
        if serves is not None:
            need = max(
                1,
                sum(
                    math.ceil(class_load(w, k, scale) / rate - 1e-9)
                    for k, rate in serves[j].items()
                ),
            )
        else:
            need = _replicas_needed(w, d, scale)
        if self.p.objective.goal in ("min_cost", "min_carbon") and self.t.tuned:
            return need  # more replicas of one design than its demand needs only add cost
        c = self.p.constraints
        n = sum(d.devices.values())
        limit = 4096 // n + 1
        if c.max_devices:
            limit = min(limit, c.max_devices // n + 1)
        return max(need, min(limit, 4096))

    def use_expr(self, dev: str, p_i: int, site: str) -> cp_model.LinearExpr:
        """Devices of type `dev` at work at `site` in period `p_i`."""
        return sum(n * v for n, v, _ in self.use.get((dev, p_i, site), []))  # type: ignore[return-value]

    # -- constraints -----------------------------------------------------------------------

    def _lit(self, name: str) -> cp_model.IntVar:
        """An assumption literal for a named constraint family (for explanations)."""
        lit = self.m.new_bool_var(f"on:{name}")
        self.named[name] = lit
        return lit

    def _constraints(self) -> None:
        # Order: demand first (defines what must be held), then supply, then limits.
        self._demand()
        self._inventory_and_hosts()
        self._cloud_supply()
        self._budget()
        self._power()
        self._device_count()
        self._rack_units()
        self._carbon()

    def _keys(self, w: str, p_i: int) -> list[Key]:
        return self._keys_of.get((w, p_i), [])

    def _demand(self) -> None:
        """Each inference workload meets its throughput and concurrency (or each request class
        its rate) in every period; each training job runs once."""
        for w in self.p.workloads:
            designs = self.t.designs[w.name]
            if isinstance(w, TrainingWorkload):
                keys = self._keys(w.name, -1)
                self.m.add(sum(self.R[k] for k in keys) == 1).only_enforce_if(
                    self._lit(f"train:{w.name}")
                )
                continue
            if w.request_mix is not None:
                self._mix_demand(w)
                continue
            thr = self._lit(f"throughput:{w.name}") if w.min_tokens_per_s > 0 else None
            conc = self._lit(f"concurrency:{w.name}")
            for p_i, period in enumerate(self.periods):
                keys = self._keys(w.name, p_i)
                if thr is not None:
                    need = _int(
                        w.min_tokens_per_s * period.scale * THROUGHPUT_SCALE,
                        f"{w.name}.min_tokens_per_s",
                    )
                    self.m.add(
                        sum(
                            _int(designs[k[1]].tokens_per_s * THROUGHPUT_SCALE, "tps", up=False)
                            * self.R[k]
                            for k in keys
                        )
                        >= need
                    ).only_enforce_if(thr)
                self.m.add(
                    sum(designs[k[1]].concurrency * self.R[k] for k in keys)
                    >= math.ceil(w.concurrency * period.scale - 1e-9)
                ).only_enforce_if(conc)
                self.m.add(sum(self.R[k] for k in keys) >= 1)

    def _mix_demand(self, w: InferenceWorkload) -> None:
        """Each class's requests/s are met by shares of replica time: a replica's shares add up
        to at most its whole time, and a share s of design j serves s x rate(j, class)."""
        assert w.request_mix is not None
        serves = self.t.serves[w.name]
        lit = self._lit(f"requests:{w.name}")
        for (wn, j, p_i, site), r in self.R.items():
            if wn != w.name:
                continue
            ys = [self.Y[(wn, j, k, p_i, site)] for k in serves[j]]
            self.m.add(sum(ys) <= SHARE_STEPS * r)
        for p_i, period in enumerate(self.periods):
            keys = self._keys(w.name, p_i)
            for k, cls in enumerate(w.request_mix):
                need = _int(
                    class_load(w, k, period.scale) * RATE_SCALE * SHARE_STEPS,
                    f"{w.name}.{cls.name} requests",
                )
                self.m.add(
                    sum(
                        _int(serves[j][k] * RATE_SCALE, "requests/s", up=False)
                        * self.Y[(wn, j, k, p_i, site)]
                        for (wn, j, _, site) in keys
                        if k in serves[j]
                    )
                    >= need
                ).only_enforce_if(lit)
            self.m.add(sum(self.R[k] for k in keys) >= 1)

    def _inventory_and_hosts(self) -> None:
        """Owned and bought devices cover the busiest period on premises; every one of them sits
        in a host slot; bought devices fill bought hosts."""
        for dev, fleet in self.fleet.items():
            e = self.t.econ[dev]
            if not self.single:
                for p_i in range(len(self.periods)):
                    self.m.add(fleet >= self.use_expr(dev, p_i, PREM))
                self.m.add(fleet <= self.fleet_ub[dev])
            self.m.add(self.bought[dev] >= fleet - e.owned)
            self.m.add(self.hosts[dev] * e.slots >= fleet)
            self.m.add(self.hosts_bought[dev] * e.slots >= self.bought[dev])
            self.m.add(self.hosts_bought[dev] <= self.hosts[dev])

    def _cloud_supply(self) -> None:
        """Cloud replicas run on reserved, on-demand and (the share expected up of) spot devices;
        spot carries at most `spot_max_share` of each period's devices at work."""
        for (dev, p_i, site), _ in self.use.items():
            if site != CLOUD:
                continue
            supply: list[cp_model.LinearExpr] = []
            if dev in self.reserved:
                supply.append(self.reserved[dev])
            if (dev, p_i) in self.od:
                supply.append(self.od[(dev, p_i)])
            if (dev, p_i) in self.spot_up:
                supply.append(self.spot_up[(dev, p_i)])
            self.m.add(self.use_expr(dev, p_i, CLOUD) <= sum(supply))
        if not self.spot_up:
            return
        share = _int(self.p.market.spot_max_share * RATE_SCALE, "spot_max_share", up=False)
        lit = self._lit("spot_share")
        for p_i in range(len(self.periods)):
            up = [v for (dev, q), v in self.spot_up.items() if q == p_i]
            if up:
                self.m.add(RATE_SCALE * sum(up) <= share * self.devices_at(p_i)).only_enforce_if(
                    lit
                )

    def devices_at(self, p_i: int) -> cp_model.LinearExpr:
        """Devices at work in period `p_i`, both sites."""
        return sum(  # type: ignore[return-value]
            self.use_expr(dev, q, site) for (dev, q, site) in self.use if q == p_i
        )

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
        """Power at the wall (devices and hosts at load, times PUE) under the cap in every
        period; rented devices count too (the cap is the deployment's power budget)."""
        c = self.p.constraints
        if c.power_w is not None:
            cap = _int(c.power_w * 1000 / self.p.horizon.pue, "power_w", up=False)  # milliwatts
            lit = self._lit("power")
            for p_i in range(len(self.periods)):
                self.m.add(self.power_at(p_i, milli=True) <= cap).only_enforce_if(lit)

    def _device_count(self) -> None:
        c = self.p.constraints
        if c.max_devices is not None:
            lit = self._lit("max_devices")
            for p_i in range(len(self.periods)):
                self.m.add(self.devices_held(p_i) <= c.max_devices).only_enforce_if(lit)

    def _rack_units(self) -> None:
        c = self.p.constraints
        if c.max_rack_units is not None:
            self.m.add(self.rack_units_expr() <= c.max_rack_units).only_enforce_if(
                self._lit("rack_units")
            )

    def _carbon(self) -> None:
        c = self.p.constraints
        if c.max_carbon_kgco2e is not None:
            self.m.add(
                self.carbon_expr() <= _int(c.max_carbon_kgco2e * 1000, "max_carbon", up=False)
            ).only_enforce_if(self._lit("carbon"))

    # -- hints ----------------------------------------------------------------------------

    def heuristic(self) -> tuple[dict[Key, int], dict[ShareKey, int]]:
        """A quick plan: per workload, the design whose replicas meet the demand at the lowest
        price (devices with their share of a host, plus energy, or the job's cost), ignoring
        shared limits; for fixed demand served on premises only (else no hint). Also the
        request-class shares of replica time that plan gives each mix design."""
        shares: dict[ShareKey, int] = {}
        if not self.single or any(k[3] == CLOUD for k in self.R):
            return {}, shares
        per_w = energy_usd_per_watt(self.p)
        slot_usd = {
            dev: e.unit_usd + e.node.price_usd / e.slots + e.node.power_overhead_w / e.slots * per_w
            for dev, e in self.t.econ.items()
        }
        chosen: dict[Key, int] = {}
        for w in self.p.workloads:
            if isinstance(w, InferenceWorkload) and w.request_mix is not None:
                self._mix_heuristic(w, slot_usd, per_w, chosen, shares)
                continue
            best: tuple[float, Key, int] | None = None
            for key in self.R:
                if key[0] != w.name:
                    continue
                d = self.t.designs[w.name][key[1]]
                if isinstance(w, TrainingWorkload):
                    n = 1
                    price = self.t.training_cost.get((w.name, key[1]), 0.0)
                else:
                    n = _replicas_needed(w, d)
                    price = 0.0
                if key[3] == PREM:
                    price += sum(slot_usd[x] * k for x, k in d.devices.items())
                price = n * (price + d.power_w * per_w)
                if n <= self.R_ub[key] and (best is None or price < best[0]):
                    best = (price, key, n)
            if best is not None:
                chosen[best[1]] = best[2]
        return chosen, shares

    def _mix_heuristic(
        self,
        w: InferenceWorkload,
        slot_usd: dict[str, float],
        per_w: float,
        chosen: dict[Key, int],
        shares: dict[ShareKey, int],
    ) -> None:
        """Each request class alone on the design that serves its load at the lowest price."""
        assert w.request_mix is not None
        serves = self.t.serves[w.name]
        for k in range(len(w.request_mix)):
            load = class_load(w, k, self.periods[0].scale)
            best: tuple[float, Key, int, int] | None = None
            for j, rates in enumerate(serves):
                key = (w.name, j, 0, PREM)
                if k not in rates or key not in self.R:
                    continue
                d = self.t.designs[w.name][j]
                share = math.ceil(load / rates[k] * SHARE_STEPS - 1e-9)
                n = -(-share // SHARE_STEPS)
                price = n * (sum(slot_usd[x] * c for x, c in d.devices.items()) + d.power_w * per_w)
                if chosen.get(key, 0) + n <= self.R_ub[key] and (best is None or price < best[0]):
                    best = (price, key, n, share)
            if best is not None:
                _, key, n, share = best
                chosen[key] = chosen.get(key, 0) + n
                shares[(w.name, key[1], k, 0, PREM)] = share

    def _hint(self, warm: dict[Key, int] | None) -> None:
        """Start the search from a previous plan or the heuristic one (a hint, not a constraint)."""
        chosen, y_hint = (warm, {}) if warm is not None else self.heuristic()
        if not chosen:
            return
        chosen = {k: min(v, self.R_ub[k]) for k, v in chosen.items() if k in self.R}
        for k, var in self.R.items():
            self.m.add_hint(var, chosen.get(k, 0))
        for yk, yv in self.Y.items():
            self.m.add_hint(yv, y_hint.get(yk, 0))
        if not self.single:
            return
        used: dict[str, int] = {}
        for (wn, j, _, site), r in chosen.items():
            if site == PREM:
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
        """Money up front: devices and hosts bought."""
        terms = []
        for dev, b in self.bought.items():
            e = self.t.econ[dev]
            if self.bought_ub[dev] > 0:
                terms.append(_int(e.unit_usd, f"{dev}.price") * b)
                terms.append(_int(e.node.price_usd, f"{e.node.id}.price") * self.hosts_bought[dev])
        return sum(terms)  # type: ignore[return-value]

    def tco_expr(self) -> cp_model.LinearExpr:
        """Over the horizon: purchases with upkeep, electricity on premises, rent, and the
        training jobs' energy or rent."""
        own = ownership_factor(self.p)
        usd_wh = energy_usd_per_watt_hour(self.p)
        work_h = sum(p.hours for p in self.periods)
        terms: list[cp_model.LinearExpr] = []
        for dev, b in self.bought.items():
            e = self.t.econ[dev]
            if self.bought_ub[dev] > 0:
                terms.append(_int(e.unit_usd * own, f"{dev}.price") * b)
                terms.append(
                    _int(e.node.price_usd * own, f"{e.node.id}.price") * self.hosts_bought[dev]
                )
            # Hosts on premises are powered through every working hour.
            terms.append(
                _int(e.node.power_overhead_w * work_h * usd_wh, "host energy") * self.hosts[dev]
            )
        for (wn, j, p_i, site), var in self.R.items():
            d = self.t.designs[wn][j]
            if (wn, j) in self.t.training_cost:
                terms.append(_int(self.t.training_cost[(wn, j)], "training cost") * var)
            elif site == PREM:
                hours = self.periods[p_i].hours
                terms.append(_int(d.power_w * hours * usd_wh, "energy") * var)
        for dev, v in self.reserved.items():
            e = self.t.econ[dev]
            rate = e.prices.reserved_usd_per_hour or 0.0
            terms.append(_int(rate * reserved_hours(self.p, e.prices), f"{dev}.reserved") * v)
        for (dev, p_i), v in self.od.items():
            rate = self.t.econ[dev].prices.on_demand_usd_per_hour or 0.0
            terms.append(_int(rate * self.periods[p_i].hours, f"{dev}.rent") * v)
        for (dev, p_i), v in self.spot.items():
            rate = self.t.econ[dev].prices.spot_usd_per_hour or 0.0
            terms.append(_int(rate * self.periods[p_i].hours, f"{dev}.spot") * v)
        return sum(terms)  # type: ignore[return-value]

    def carbon_expr(self) -> cp_model.LinearExpr:
        """Grams CO2e over the horizon: energy of every device and host at work times the
        period's grid intensity, plus embodied carbon for the hours devices are held."""
        pue = self.p.horizon.pue
        share = embodied_share(self.p)
        terms: list[cp_model.LinearExpr] = []
        for (wn, j, p_i, site), var in self.R.items():
            d = self.t.designs[wn][j]
            w = self._workload(wn)
            if isinstance(w, TrainingWorkload):
                hours = w.token_budget / d.tokens_per_s / 3600
                g = grid_intensity(self.p) or 0.0
                grams = d.power_w * hours / 1000 * pue * g
                if site == JOB:
                    grams += sum(
                        n * embodied_kg_per_hour(self.p, self.t.econ[x].device) * hours * 1000
                        for x, n in d.devices.items()
                    )
                terms.append(_int(grams, "training carbon") * var)
                continue
            period = self.periods[p_i]
            g = period.gco2e_per_kwh or 0.0
            grams = d.power_w * period.hours / 1000 * pue * g
            if site == CLOUD:
                grams += self._cloud_host_w(d) * period.hours / 1000 * pue * g
            terms.append(_int(grams, "carbon") * var)
        host_g = sum(p.hours * (p.gco2e_per_kwh or 0.0) for p in self.periods) / 1000 * pue
        for dev, h in self.hosts.items():
            e = self.t.econ[dev]
            terms.append(_int(e.node.power_overhead_w * host_g, "host carbon") * h)
            emb = (e.device.embodied_kgco2e or 0.0) * 1000 * share
            terms.append(_int(emb, "embodied") * self.fleet[dev])
        for dev, v in self.reserved.items():
            e = self.t.econ[dev]
            per_h = embodied_kg_per_hour(self.p, e.device) * 1000
            terms.append(_int(per_h * reserved_hours(self.p, e.prices), "embodied") * v)
        for (dev, p_i), v in [*self.od.items(), *self.spot.items()]:
            per_h = embodied_kg_per_hour(self.p, self.t.econ[dev].device) * 1000
            terms.append(_int(per_h * self.periods[p_i].hours, "embodied") * v)
        return sum(terms)  # type: ignore[return-value]

    def _cloud_host_w(self, d: Design) -> float:
        """A rented replica's share of its hosts' power, drawn while it works."""
        return cloud_host_watts(d, self.t.econ)

    def power_at(self, p_i: int, milli: bool = False) -> cp_model.LinearExpr:
        """Watts at load in period `p_i` (before PUE): replicas, training jobs, hosts on
        premises, and rented devices' share of their hosts."""
        s = 1000 if milli else 1
        terms = []
        for (wn, j, q, site), v in self.R.items():
            if q not in (p_i, -1):
                continue
            d = self.t.designs[wn][j]
            watts = d.power_w + (self._cloud_host_w(d) if site == CLOUD else 0.0)
            terms.append(_int(watts * s, "power") * v)
        terms += [
            _int(self.t.econ[d].node.power_overhead_w * s, "host power") * h
            for d, h in self.hosts.items()
        ]
        return sum(terms)  # type: ignore[return-value]

    def _peak(self, name: str, per_period: list[cp_model.LinearExpr]) -> cp_model.LinearExpr:
        """The largest of per-period expressions (a variable held above each one)."""
        if len(per_period) == 1:
            return per_period[0]
        if name not in self._peaks:
            ub = max(self._reach(e) for e in per_period)
            v = self.m.new_int_var(0, ub, f"peak[{name}]")
            for e in per_period:
                self.m.add(v >= e)
            self._peaks[name] = v
        return self._peaks[name]

    def power_expr(self, milli: bool = False) -> cp_model.LinearExpr:
        """Watts at load in the busiest period (before PUE)."""
        return self._peak(
            f"power{milli}", [self.power_at(p, milli) for p in range(len(self.periods))]
        )

    def throughput_expr(self) -> cp_model.LinearExpr:
        """Output milli-tokens/s of fixed-rate workloads in the busiest period."""
        top = max(range(len(self.periods)), key=lambda p: self.periods[p].scale)
        terms = []
        for (wn, j, p_i, _), v in self.R.items():
            w = self._workload(wn)
            if isinstance(w, InferenceWorkload) and w.request_mix is None and p_i == top:
                terms.append(
                    _int(
                        self.t.designs[wn][j].tokens_per_s * THROUGHPUT_SCALE,
                        "tokens_per_s",
                        up=False,
                    )
                    * v
                )
        return sum(terms)  # type: ignore[return-value]

    def devices_held(self, p_i: int) -> cp_model.LinearExpr:
        """Devices held in period `p_i`: the on-premises fleet plus cloud devices at work."""
        cloud = [
            self.use_expr(dev, q, site) for (dev, q, site) in self.use if q == p_i and site == CLOUD
        ]
        return sum(self.fleet.values()) + sum(cloud)  # type: ignore[return-value]

    def devices_expr(self) -> cp_model.LinearExpr:
        return self._peak("devices", [self.devices_held(p) for p in range(len(self.periods))])

    def rack_units_expr(self) -> cp_model.LinearExpr:
        """Rack units of the hosts on premises (rented devices are racked by their provider)."""
        return sum(self.t.econ[d].node.rack_units * h for d, h in self.hosts.items())  # type: ignore[return-value]

    def quantity(self, name: str) -> cp_model.LinearExpr:
        """A named linear quantity of the plan: cost (USD over the horizon), capex (USD),
        power (W at load, before PUE), devices, rack_units, throughput (milli-tokens/s),
        carbon (g CO2e over the horizon)."""
        return {
            "cost": self.tco_expr,
            "capex": self.capex_expr,
            "power": self.power_expr,
            "devices": self.devices_expr,
            "rack_units": self.rack_units_expr,
            "throughput": self.throughput_expr,
            "carbon": self.carbon_expr,
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
        if goal in ("min_cost", "max_throughput", "min_carbon"):
            minimize = goal != "max_throughput"
            sol = self._optimize(
                {
                    "min_cost": self.tco_expr,
                    "max_throughput": self.throughput_expr,
                    "min_carbon": self.carbon_expr,
                }[goal](),
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
        if goal == "min_carbon" and tie is None:
            tie = "min_cost"  # the cheapest of the cleanest plans
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
                sol = dataclasses.replace(
                    second,
                    status=sol.status if second.status == "OPTIMAL" else "FEASIBLE",
                    objective=sol.objective,
                    bound=sol.bound,
                    iterations=sol.iterations,
                    values=(),
                )
        sol.seconds = time.perf_counter() - start
        return sol

    def _fix_primary(self, goal: str, sol: Solution) -> None:
        assert sol.objective is not None
        if goal == "min_cost":
            self.m.add(self.tco_expr() <= round(sol.objective))
        elif goal == "min_carbon":
            self.m.add(self.carbon_expr() <= round(sol.objective))
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

        def values(vs: dict[Any, cp_model.IntVar]) -> dict[Any, int]:
            return {k: int(s.value(v)) for k, v in vs.items() if s.value(v)}

        return Solution(
            name,
            s.objective_value,
            s.best_objective_bound,
            s.wall_time,
            values(self.R),
            {d: int(s.value(v)) for d, v in self.bought.items()},
            {d: int(s.value(v)) for d, v in self.hosts.items()},
            values=tuple(int(s.value(e)) for e in evaluate),
            reserved=values(self.reserved),
            on_demand=values(self.od),
            spot=values(self.spot),
            shares=values(self.Y),
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
        return dataclasses.replace(
            best,
            status=status,
            objective=ratio,
            bound=proved_bound,
            seconds=0.0,
            iterations=iterations,
        )
