"""A quick plan to start the search from: the previous plan of a sweep, or per workload the
design whose replicas meet its demand at the lowest price (under max_throughput with a money
limit, the one that makes the most tokens/s within it; under max_tokens_per_joule, the most
tokens/s per watt); a hint, never a constraint."""

from __future__ import annotations

import math
from typing import NamedTuple

from planner.estimator.designs import Design
from planner.estimator.economics import (
    cloud_host_watts,
    earlier_phase,
    embodied_kg_per_hour,
    embodied_share,
    energy_usd_per_watt,
    energy_usd_per_watt_hour,
    grid_intensity,
    horizon_hours,
)
from planner.estimator.hosts import devices_bought, hosts_for
from planner.model.hint_mix import MixHints
from planner.model.result import ReplicaKey, ShareKey
from planner.model.tables import (
    alone_meets,
    replicas_needed,
)
from planner.model.variables import CLOUD, JOB, PREM
from planner.schema.problem import InferenceWorkload, TrainingWorkload

# Share of the budget (or capex ceiling) a max_throughput hint's own price may take: it leaves
# out hosts bought whole, network gear and idle power, which the plan's cost counts.
HINT_MONEY_SHARE = 0.9
# Share of the carbon ceiling a hint's workloads may emit by the hint's own count: it leaves out
# network gear, which the model's carbon counts.
HINT_CARBON_SHARE = 0.9


class HintOption(NamedTuple):
    """One way one design at one site meets a workload's demand in every period."""

    price: float  # USD: devices bought (whole units, with a share of a host) and energy, or rent
    watts: float  # at the busiest period
    devices: int  # at the busiest period
    picks: dict[ReplicaKey, int]  # replicas per key
    on_prem: dict[str, int]  # devices it takes on premises
    grams: float  # CO2e: its energy at each period's grid intensity and its devices' embodied share


class Hints(MixHints):
    def heuristic(self) -> tuple[dict[ReplicaKey, int], dict[ShareKey, int]]:
        """A quick plan: per workload, the design and site whose replicas meet the demand of
        every period at the lowest price (on premises: devices with their share of a host,
        held for the busiest period, plus energy; rented: the cheapest rate for each period's
        hours; a training job: its cost), within the power cap and device limit as the
        workloads before it left them (a workload that fits nowhere takes the least power).
        Under max_throughput with a money limit, the one making the most tokens/s within it
        (_fastest_affordable); under max_tokens_per_joule the most tokens/s per watt
        (_most_efficient).
        Request mixes are planned only for a fixed demand served on premises (else no hint).
        Also the request-class shares of replica time that plan gives each mix design.
        Phases (problem `phases`) run on one fleet: a phase's devices are free for the phases
        after it, and a min_cost plan with every workload on one device type is kept where its
        price is lower."""
        shares: dict[ShareKey, int] = {}
        plain = self.single and not any(k[3] == CLOUD for k in self.R)
        mixes = [w for w in self.p.workloads if isinstance(w, InferenceWorkload) and w.request_mix]
        if mixes and not plain:
            return {}, shares
        per_w = energy_usd_per_watt(self.p)
        slot_usd = {
            dev: e.unit_usd + e.node.price_usd / e.slots + e.node.power_overhead_w / e.slots * per_w
            for dev, e in self.t.econ.items()
        }
        best = self._greedy(slot_usd, per_w, shares)
        if best is None:
            return {}, shares
        if len(self.p.phases or []) > 1 and self.p.objective.goal == "min_cost" and not mixes:
            # Phases share one fleet: the cheapest design of each workload on its own (the
            # greedy pass) can leave each phase on another device type, each bought. Every
            # workload on one device type, phase after phase on the same devices, is tried too
            # (train-then-serve-13b: 15 RTX 5000 Ada to train and 8 Gaudi2 to serve, $265,897
            # once completed; Gaudi3 for both, $207,932; the optimum, 4 H200 for both, $204,988
            # as `planner solve` prints it).
            for dev in sorted(self.t.econ):
                one = self._greedy(slot_usd, per_w, {}, only=dev)
                if one is not None and one[1] < best[1]:
                    best = one
        return best[0], shares

    def _greedy(
        self,
        slot_usd: dict[str, float],
        per_w: float,
        shares: dict[ShareKey, int],
        only: str | None = None,
    ) -> tuple[dict[ReplicaKey, int], float] | None:
        """heuristic's plan, workload after workload, and its price (the sum of the options
        taken); `only`: every workload on premises on that device type alone (None when one
        has no such option). None when a workload has no option at all."""
        c = self.p.constraints
        watts_left = math.inf if c.power_w is None else 0.9 * c.power_w / self.p.horizon.pue
        devices_left = math.inf if c.max_devices is None else c.max_devices
        carbon = c.max_carbon_kgco2e
        grams_left = math.inf if carbon is None else HINT_CARBON_SHARE * carbon * 1000
        chosen: dict[ReplicaKey, int] = {}
        price = 0.0
        # Devices on premises the workloads before took, per phase (problem `phases`: a phase's
        # devices are free for the phases after it), and the fleet: the most of each type any
        # phase holds. Without phases every workload is in one phase and the two are the same.
        by_phase: dict[int | None, dict[str, int]] = {}
        fleet: dict[str, int] = {}
        for w in self.p.workloads:
            used = by_phase.setdefault(earlier_phase(self.p, w.name), {})
            if isinstance(w, InferenceWorkload) and w.request_mix is not None:
                self._mix_heuristic(w, slot_usd, per_w, chosen, shares, used)
                fleet.update({x: max(n, fleet.get(x, 0)) for x, n in used.items()})
                continue
            options = self._options(w, slot_usd, used, fleet, only)
            if only is not None:
                options = [o for o in options if o.on_prem]
            if not options:
                return None
            fits = [
                o
                for o in options
                if o.watts <= watts_left and o.devices <= devices_left and o.grams <= grams_left
            ]
            if only is not None and not fits:
                return None
            fastest = self._fastest_affordable(w, fits) or self._most_efficient(w, fits, watts_left)
            cost, watts, devices, picks, on_prem, grams = (
                fastest
                if fastest is not None
                else min(fits, key=lambda o: o.price)
                if fits
                else min(options, key=lambda o: o.grams if carbon is not None else o.watts)
            )
            price += cost
            watts_left -= watts
            devices_left -= devices
            grams_left -= grams
            chosen.update(picks)
            for x, n in on_prem.items():
                used[x] = used.get(x, 0) + n
                fleet[x] = max(fleet.get(x, 0), used[x])
        return chosen, price

    def _fastest_affordable(
        self,
        w: InferenceWorkload | TrainingWorkload,
        fits: list[HintOption],
    ) -> HintOption | None:
        """Under max_throughput, one workload alone: of the options that meet its demand, the
        one that makes the most tokens/s at the busiest period within the money limits (its
        price, energy and devices with their share of a host, against HINT_MONEY_SHARE of the
        budget and of the capex ceiling, since hosts, network gear and idle power are not in
        it); None elsewhere, or where none fits (the cheapest option is then the hint)."""
        c = self.p.constraints
        limits = [x for x in (c.budget_usd, c.capex_usd) if x is not None]
        if (
            self.p.objective.goal != "max_throughput"
            or len(self.p.workloads) != 1
            or not isinstance(w, InferenceWorkload)
            or not limits
        ):
            return None
        cap = HINT_MONEY_SHARE * min(limits)
        best: tuple[float, HintOption] | None
        best = None
        for o in fits:
            if o.price > cap:
                continue
            made = self._made(w, o)
            if best is None or made > best[0]:
                best = (made, o)
        return None if best is None else best[1]

    def _most_efficient(
        self, w: InferenceWorkload | TrainingWorkload, fits: list[HintOption], watts_left: float
    ) -> HintOption | None:
        """Under max_tokens_per_joule, one inference workload alone: of the options that meet
        its demand, the one making the most tokens/s per watt at the busiest period, its
        hosts' overhead counted (whole hosts for the devices it buys, whole purchase units),
        within the power left; None elsewhere, or where none fits.

        Dinkelbach's first plan is the starting plan completed (planner.model.cpsat), so the
        ratio starts near the optimum and fewer ratio steps follow."""
        if (
            self.p.objective.goal != "max_tokens_per_joule"
            or len(self.p.workloads) != 1
            or not isinstance(w, InferenceWorkload)
        ):
            return None
        best: tuple[float, int] | None = None
        for i, o in enumerate(fits):
            watts = o.watts
            for x, n in o.on_prem.items():
                node = self._hint_host(x)
                bought = self._bought_more(x, 0, n) + min(n, self.t.econ[x].owned)
                watts += hosts_for(node, max(n, bought)) * node.power_overhead_w
            if 0 < watts <= watts_left:
                per_watt = self._made(w, o) / watts
                if best is None or per_watt > best[0]:
                    best = (per_watt, i)
        return None if best is None else fits[best[1]]

    def _made(self, w: InferenceWorkload, o: HintOption) -> float:
        """Tokens/s option `o` makes at its busiest period (a concurrency caps what it holds)."""
        made = 0.0
        for k, n in o.picks.items():
            d = self.t.designs[w.name][k.design]
            if w.concurrency is None:
                made = max(made, n * d.tokens_per_s)
            else:
                held = min(n * d.concurrency, w.concurrency * self.periods[k.period].scale)
                made = max(made, held * 1000.0 / d.ms_per_token)
        return made

    def _options(
        self,
        w: InferenceWorkload | TrainingWorkload,
        slot_usd: dict[str, float],
        used: dict[str, int],
        fleet: dict[str, int] | None = None,
        only: str | None = None,
    ) -> list[HintOption]:
        """Each way one design at one site meets the workload's demand in every period: its
        price, watts and devices at the busiest period, replicas per key, and the devices it
        takes on premises. On premises a device type costs the whole purchase units it adds to
        what the workloads before it in its phase took (`used`): an 8-GPU baseboard bought for
        2 GPUs costs 8, and the next workload's 6 come free; so do the devices an earlier
        phase left in the `fleet` (the most of each type any phase holds; `used` unless given).
        `only`: the designs of that one device type alone, on premises."""
        usd_wh = energy_usd_per_watt_hour(self.p)
        out = []
        for j, d in enumerate(self.t.designs[w.name]):
            if only is not None and (len(d.devices) != 1 or only not in d.devices):
                continue
            by_site: dict[str, list[ReplicaKey]] = {}
            for k in self._keys_of_design(w.name, j):
                by_site.setdefault(k.site, []).append(k)
            for site, keys in by_site.items():
                if isinstance(w, TrainingWorkload):  # one key: the job, over the horizon
                    counts = {keys[0]: 1}
                    price = self.t.training_cost.get((w.name, j), 0.0)
                else:  # one key per demand period
                    counts = {k: replicas_needed(w, d, self.periods[k[2]].scale) for k in keys}
                    if any(
                        n > self.R_ub[k] or not alone_meets(w, d, self.periods[k[2]].scale)
                        for k, n in counts.items()
                    ):
                        continue
                    hours = {k: self.periods[k[2]].hours for k in keys}
                    if site == CLOUD:
                        rent = self._rent_per_hour(d)
                        price = sum(n * rent * hours[k] for k, n in counts.items())
                    else:  # energy at load
                        price = sum(n * d.power_w * hours[k] * usd_wh for k, n in counts.items())
                most = max(counts.values())
                on_prem: dict[str, int] = {}
                if site == PREM:
                    if not self._hint_host_holds(d):
                        continue
                    on_prem = {x: most * k for x, k in d.devices.items()}
                    held = used if fleet is None else fleet
                    price += sum(
                        self._bought_more(x, used.get(x, 0), n, held.get(x, 0)) * slot_usd[x]
                        for x, n in on_prem.items()
                    )
                host_w = cloud_host_watts(d.devices, self.t.econ)
                watts = most * (d.power_w + host_w)
                grams = self._hint_grams(w, d, counts, on_prem, site, host_w)
                devices = most * sum(d.devices.values())
                out.append(HintOption(price, watts, devices, counts, on_prem, grams))
        return out

    def _hint_grams(
        self,
        w: InferenceWorkload | TrainingWorkload,
        d: Design,
        counts: dict[ReplicaKey, int],
        on_prem: dict[str, int],
        site: str,
        host_w: float,
    ) -> float:
        """An option's CO2e as the model counts it (Quantities.carbon_expr), network gear aside:
        energy at work at each period's grid intensity (a training job: the problem's), a rented
        replica's host share; on premises its devices' embodied carbon over the horizon's share
        of their life (a job in the cloud: for its hours), their hosts' overhead at all hours
        and their idle draw outside the periods."""
        if self.p.carbon is None or self.p.constraints.max_carbon_kgco2e is None:
            return 0.0  # only a carbon ceiling asks
        pue = self.p.horizon.pue
        if isinstance(w, TrainingWorkload):
            hours = w.token_budget / d.tokens_per_s / 3600
            grams = d.power_w * hours / 1000 * pue * (grid_intensity(self.p) or 0.0)
            if site == JOB:
                grams += sum(
                    n * embodied_kg_per_hour(self.p, self.t.econ[x].device) * hours * 1000
                    for x, n in d.devices.items()
                )
        else:
            grams = 0.0
            for k, n in counts.items():
                period = self.periods[k[2]]
                own = d.power_w + (host_w if site == CLOUD else 0.0)
                grams += n * own * period.hours / 1000 * pue * (period.gco2e_per_kwh or 0.0)
        share = embodied_share(self.p)
        g0 = (grid_intensity(self.p) or 0.0) / 1000 * pue
        # Hosts draw their overhead at all hours; held devices their idle power out of work.
        host_g = self.host_grams_per_watt()
        idle_h = horizon_hours(self.p) - sum(p.hours for p in self.periods)
        for x, n in on_prem.items():
            dev, node = self.t.econ[x].device, self._hint_host(x)
            grams += n * (dev.embodied_kgco2e or 0.0) * 1000 * share
            grams += math.ceil(n / node.slots) * node.power_overhead_w * host_g
            grams += n * dev.power.idle_w * max(idle_h, 0.0) * g0
        return grams

    def _rent_per_hour(self, d: Design) -> float:
        """A rented replica's devices per hour at the cheapest rate they have (reserved
        counted as if paid only while at work: a rough price, for choosing the hint)."""
        total = 0.0
        for x, n in d.devices.items():
            p = self.t.econ[x].prices
            rates = [
                r
                for mode in ("on_demand", "reserved")
                if mode in self.t.econ[x].modes and (r := p.rate(mode)) is not None
            ]
            total += n * min(rates, default=math.inf)
        return total

    def _hint(self, warm: dict[ReplicaKey, int] | None) -> None:
        """Start the search from a previous plan or the heuristic one (a hint, not a constraint)."""
        chosen, y_hint = (warm, {}) if warm is not None else self.heuristic()
        self.start = chosen
        if not chosen:
            return
        chosen = {k: min(v, self.R_ub[k]) for k, v in chosen.items() if k in self.R}
        self.hinted = True
        # Appended to the model's hint in two calls rather than one per variable (as add_hint
        # would: a second on the largest problems); R and Y hold plain variables, never negated.
        hint = self.m.proto.solution_hint
        hint.vars.extend([var.index for var in self.R.values()])
        hint.values.extend([int(chosen.get(k, 0)) for k in self.R])
        hint.vars.extend([yv.index for yv in self.Y.values()])
        hint.values.extend([int(y_hint.get(yk, 0)) for yk in self.Y])
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
            node = self._hint_host(dev)
            b = min(devices_bought(node, u - e.owned), self.bought_ub[dev])
            self.m.add_hint(var, b)
            if dev in self.spare:
                self.m.add_hint(self.spare[dev], max(0, min(b + e.owned, u + b) - u))
            for host in e.hosts:
                hk = (dev, host.id)
                mine = host.id == node.id
                self.m.add_hint(self.pick[hk], int(mine and u > 0))
                held = hosts_for(host, max(u, b + min(u, e.owned))) if mine else 0
                self.m.add_hint(self.hosts[hk], min(held, self.hosts_ub[hk]))
                self.m.add_hint(self.hosts_bought[hk], min(hosts_for(host, b) if mine else 0, held))
