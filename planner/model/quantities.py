"""Linear quantities of a plan as CP-SAT expressions: money, carbon, power, throughput,
devices and rack units. Objectives, limits and what-if questions are built from these."""

from __future__ import annotations

from collections.abc import Callable

from planner.estimator.designs import Design
from planner.estimator.economics import (
    cloud_host_watts,
    earlier_phase,
    embodied_kg_per_hour,
    embodied_share,
    energy_usd_per_watt_hour,
    facility_usd_per_rack_unit,
    facility_usd_per_watt,
    grid_intensity,
    horizon_hours,
    ownership_factor,
    reserved_hours,
)
from planner.model.ortools_cp import cp_model, cp_model_helper
from planner.model.result import ReplicaKey
from planner.model.scale import RATE_SCALE, THROUGHPUT_SCALE, to_int
from planner.model.tables import mix_tokens_per_request, plain_tokens_factor
from planner.model.variables import CLOUD, JOB, PREM, ModelBase, total, weighted
from planner.schema.catalog import Node
from planner.schema.problem import InferenceWorkload, TrainingWorkload

QUANTITIES = ("cost", "capex", "power", "devices", "rack_units", "throughput", "carbon")


class Quantities(ModelBase):
    """Expressions over the model's variables (integers at the scales of planner.model.scale)."""

    def _network_capex(self) -> list[cp_model.LinearExpr]:
        """Ports and switches bought (planner.estimator.network), USD."""
        link = self.t.network
        terms: list[cp_model.LinearExpr] = []
        if link is not None and self.net_ports is not None:
            terms.append(to_int(link.price_usd_per_port or 0.0, "port price") * self.net_ports)
        if link is not None and link.switch is not None and self.net_switches is not None:
            terms.append(to_int(link.switch.price_usd, "switch price") * self.net_switches)
        return terms

    def _switch_watts(self, scale: float = 1.0) -> list[cp_model.LinearExpr]:
        """Switches' power (drawn at all hours, like hosts), watts x `scale`."""
        link = self.t.network
        if link is None or link.switch is None or self.net_switches is None:
            return []
        return [to_int(link.switch.power_w * scale, "switch power") * self.net_switches]

    def capex_expr(self) -> cp_model.LinearExpr:
        """Money up front: devices, hosts and network gear bought."""
        terms = self._network_capex()
        for dev, b in self.bought.items():
            e = self.t.econ[dev]
            if self.bought_ub[dev] > 0:
                terms.append(to_int(e.unit_usd, f"{dev}.price") * b)
        terms += self._host_terms(lambda n: n.price_usd, "price", bought=True)
        return total(terms)

    def _host_terms(
        self, per_host: Callable[[Node], float], what: str, *, bought: bool = False
    ) -> list[cp_model.LinearExpr]:
        """`per_host(node)` (in whole units) times the hosts of each type held, or bought."""
        hosts = self.hosts_bought if bought else self.hosts
        return [to_int(per_host(self.nodes[n]), f"{n}.{what}") * h for (_, n), h in hosts.items()]

    def tco_expr(self) -> cp_model.LinearExpr:
        """Over the horizon: purchases with upkeep, electricity on premises (at work and idle),
        rent, and the training jobs' energy or rent. Built once per model: a budget, the
        objective, the first plan of a ratio and the quick plan completed under a deadline each
        read it, and on a large problem it has a term per replica variable."""
        if self._tco is None:
            self._tco = self._tco_expr()
        return self._tco

    def _tco_expr(self) -> cp_model.LinearExpr:
        """The expression tco_expr keeps, term by term."""
        own = ownership_factor(self.p)
        usd_wh = energy_usd_per_watt_hour(self.p)
        whole_h = horizon_hours(self.p)
        terms: list[cp_model.LinearExpr] = self._idle_terms(usd_wh)
        per_u, per_w = facility_usd_per_rack_unit(self.p), facility_usd_per_watt(self.p)
        if per_u:
            terms.append(to_int(per_u, "rack_usd_per_u_month") * self.rack_units_expr())
        if per_w:
            peak = self._peak(
                "premises power",
                [self.power_at(p, premises=True) for p in range(len(self.periods))],
            )
            terms.append(to_int(per_w, "facility_usd_per_kw_month") * peak)
        link = self.t.network
        if link is not None and self.net_ports is not None:
            port = (link.price_usd_per_port or 0.0) * own
            terms.append(to_int(port, "port price") * self.net_ports)
        if link is not None and link.switch is not None and self.net_switches is not None:
            sw = link.switch.price_usd * own + link.switch.power_w * whole_h * usd_wh
            terms.append(to_int(sw, "switch") * self.net_switches)
        for dev, b in self.bought.items():
            e = self.t.econ[dev]
            if self.bought_ub[dev] > 0:
                terms.append(to_int(e.unit_usd * own, f"{dev}.price") * b)
        terms += self._host_terms(lambda n: n.price_usd * own, "price", bought=True)
        # Hosts on premises draw their overhead through the whole horizon: at load in the
        # working hours, and as their idle draw in the others (planner.estimator.economics).
        terms += self._host_terms(lambda n: n.power_overhead_w * whole_h * usd_wh, "energy")
        vs: list[cp_model.IntVar] = []
        cs: list[int] = []
        for (wn, j, p_i, site), var in self.R.items():
            if (wn, j) in self.t.training_cost:
                vs.append(var)
                cs.append(to_int(self.t.training_cost[(wn, j)], "training cost"))
            elif site == PREM:
                hours = self.periods[p_i].hours
                vs.append(var)
                cs.append(to_int(self.t.designs[wn][j].power_w * hours * usd_wh, "energy"))
        terms.append(weighted(vs, cs))
        for dev, v in self.reserved.items():
            e = self.t.econ[dev]
            rate = e.prices.reserved_usd_per_hour or 0.0
            terms.append(to_int(rate * reserved_hours(self.p, e.prices), f"{dev}.reserved") * v)
        for (dev, p_i), v in self.od.items():
            rate = self.t.econ[dev].prices.on_demand_usd_per_hour or 0.0
            terms.append(to_int(rate * self.periods[p_i].hours, f"{dev}.rent") * v)
        for (dev, p_i), v in self.spot.items():
            rate = self.t.econ[dev].prices.spot_usd_per_hour or 0.0
            terms.append(to_int(rate * self.periods[p_i].hours, f"{dev}.spot") * v)
        return total(terms)

    def _idle_terms(self, per_wh: float) -> list[cp_model.LinearExpr]:
        """`per_wh` times the watt-hours on-premises devices draw while held but not at work:
        idle_w x (fleet x horizon hours - device-hours at work), as
        planner.estimator.economics.idle_device_hours counts them."""
        whole_h = horizon_hours(self.p)
        terms: list[cp_model.LinearExpr] = []
        for dev, fleet in self.fleet.items():
            idle_w = self.t.econ[dev].device.power.idle_w
            terms.append(to_int(idle_w * whole_h * per_wh, f"{dev}.idle") * fleet)
            for q, period in enumerate(self.periods):
                at_work = self.use_expr(dev, q, PREM)
                coef = to_int(idle_w * period.hours * per_wh, f"{dev}.at work", up=False)
                terms.append(-coef * at_work)
        # A training job on the fleet is at work for its own hours (its energy is its job
        # cost), held idle for the rest: one of an earlier phase is outside the periods above;
        # one running beside the serving holds its devices in every period, which the loop
        # above counted as at work, so the periods' hours beyond the job's are idle again.
        earlier = {w.name for w in self.p.workloads if earlier_phase(self.p, w.name) is not None}
        period_hours = sum(p.hours for p in self.periods)
        for (wn, j, _, site), var in self.R.items():
            w = self._workload(wn)
            if site != PREM or not isinstance(w, TrainingWorkload):
                continue
            d = self.t.designs[wn][j]
            hours = w.token_budget / d.tokens_per_s / 3600
            idle_hours = (0.0 if wn in earlier else period_hours) - hours
            for dev, n in d.devices.items():
                wh = self.t.econ[dev].device.power.idle_w * n * idle_hours * per_wh
                coef = to_int(wh, f"{dev}.job idle") if wh >= 0 else -to_int(-wh, "", up=False)
                terms.append(coef * var)
        return terms

    def carbon_expr(self) -> cp_model.LinearExpr:
        """Grams CO2e over the horizon: energy of every device and host at work times the
        period's grid intensity, plus embodied carbon for the hours devices are held."""
        pue = self.p.horizon.pue
        share = embodied_share(self.p)
        vs: list[cp_model.IntVar] = []
        cs: list[int] = []
        for (wn, j, p_i, site), var in self.R.items():
            d = self.t.designs[wn][j]
            w = self._workload(wn)
            vs.append(var)
            if isinstance(w, TrainingWorkload):
                hours = w.token_budget / d.tokens_per_s / 3600
                g = grid_intensity(self.p) or 0.0
                grams = d.power_w * hours / 1000 * pue * g
                if site == JOB:
                    grams += sum(
                        n * embodied_kg_per_hour(self.p, self.t.econ[x].device) * hours * 1000
                        for x, n in d.devices.items()
                    )
                cs.append(to_int(grams, "training carbon"))
                continue
            period = self.periods[p_i]
            g = period.gco2e_per_kwh or 0.0
            grams = d.power_w * period.hours / 1000 * pue * g
            if site == CLOUD:
                grams += self._cloud_host_w(d) * period.hours / 1000 * pue * g
            cs.append(to_int(grams, "carbon"))
        terms: list[cp_model.LinearExpr] = [weighted(vs, cs)]
        # Idle draw at the problem's grid intensity (most idle hours lie outside the demand periods).
        g0 = (grid_intensity(self.p) or 0.0) / 1000 * pue
        terms += self._idle_terms(g0)
        host_g = self.host_grams_per_watt()
        terms += self._switch_watts(host_g)  # switches draw at all hours, as hosts do
        terms += self._host_terms(lambda n: n.power_overhead_w * host_g, "carbon")
        for dev in self.fleet:
            e = self.t.econ[dev]
            emb = (e.device.embodied_kgco2e or 0.0) * 1000 * share
            terms.append(to_int(emb, "embodied") * self.fleet[dev])
        for dev, v in self.reserved.items():
            e = self.t.econ[dev]
            per_h = embodied_kg_per_hour(self.p, e.device) * 1000
            terms.append(to_int(per_h * reserved_hours(self.p, e.prices), "embodied") * v)
        for (dev, p_i), v in [*self.od.items(), *self.spot.items()]:
            per_h = embodied_kg_per_hour(self.p, self.t.econ[dev].device) * 1000
            terms.append(to_int(per_h * self.periods[p_i].hours, "embodied") * v)
        return total(terms)

    def _cloud_host_w(self, d: Design) -> float:
        """A rented replica's share of its hosts' power, drawn while it works."""
        return cloud_host_watts(d.devices, self.t.econ)

    def power_at(
        self, p_i: int, milli: bool = False, premises: bool = False
    ) -> cp_model.LinearExpr:
        """Watts at load in period `p_i` (before PUE): replicas, training jobs, hosts on
        premises, and rented devices' share of their hosts (`premises`: what is on premises
        only, without rented devices)."""
        s = 1000 if milli else 1
        vs: list[cp_model.IntVar] = []
        cs: list[int] = []
        for (wn, j, q, site), v in self.R.items():
            if q not in (p_i, -1) or (premises and site != PREM):
                continue
            d = self.t.designs[wn][j]
            watts = d.power_w + (self._cloud_host_w(d) if site == CLOUD else 0.0)
            vs.append(v)
            cs.append(to_int(watts * s, "power"))
        terms = [weighted(vs, cs)]
        terms += self._host_terms(lambda n: n.power_overhead_w * s, "power")
        terms += self._switch_watts(s)
        return total(terms)

    def _peak(self, name: str, per_period: list[cp_model.LinearExpr]) -> cp_model.LinearExpr:
        """The largest of per-period expressions (a variable held above each one)."""
        if len(per_period) == 1:
            return per_period[0]
        if name not in self._peaks:
            ub = max(self.reach(e) for e in per_period)
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

    def made_tokens(
        self, w: InferenceWorkload, keys: list[ReplicaKey], factor: float = 1.0, kept: bool = False
    ) -> cp_model.LinearExpr:
        """Output milli-tokens/s the replica groups `keys` of a fixed-rate workload make: each
        sequence held makes one token per time per token (Little's law), so with a concurrency
        only the sequences that exist count; `concurrency: unbounded` counts every slot.
        `kept`: each design's tokens less the risk margin where the calibration does not back
        it (Tables.kept), as the throughput floor counts them."""
        designs = self.t.designs[w.name]
        share = self.t.kept.get(w.name) if kept else None

        def coef(j: int, per_s: float) -> int:
            f = factor * (share[j] if share else 1.0)
            return to_int(per_s * f * THROUGHPUT_SCALE, "tps", up=False)

        if w.concurrency is None:
            return weighted(
                [self.R[k] for k in keys], [coef(k[1], designs[k[1]].tokens_per_s) for k in keys]
            )
        return weighted(
            [self.X[k] for k in keys],
            [coef(k[1], 1000.0 / designs[k[1]].ms_per_token) for k in keys],
        )

    def throughput_expr(self) -> cp_model.LinearExpr:
        """Milli-tokens/s in the busiest period: what fixed-rate workloads' sequences make, and
        what request mixes serve (their served rate x tokens per request; output tokens, or
        prompt and output with `objective.tokens: all`)."""
        top = max(range(len(self.periods)), key=lambda p: self.periods[p].scale)
        terms = []
        for w in self.p.workloads:
            if not isinstance(w, InferenceWorkload):
                continue
            if w.request_mix is None:
                factor = plain_tokens_factor(w, self.p.objective.tokens)
                terms.append(self.made_tokens(w, self._keys(w.name, top), factor))
            elif w.name in self.served:
                per = mix_tokens_per_request(w, self.p.objective.tokens)
                coef = to_int(per * THROUGHPUT_SCALE / RATE_SCALE, "tokens", up=False)
                terms.append(coef * self.served[w.name])
        return total(terms)

    def devices_expr(self) -> cp_model.LinearExpr:
        return self._peak("devices", [self.devices_held(p) for p in range(len(self.periods))])

    def rack_units_expr(self) -> cp_model.LinearExpr:
        """Rack units of the hosts on premises (rented devices are racked by their provider)."""
        link = self.t.network
        terms = self._host_terms(lambda n: n.rack_units, "rack units")
        if link is not None and link.switch is not None and self.net_switches is not None:
            terms.append(link.switch.rack_units * self.net_switches)
        return total(terms)

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

    def span(self, expr: cp_model.LinearExpr) -> tuple[int, int]:
        """The least and the largest value `expr` can take over its variables' domains."""
        flat = cp_model_helper.FlatIntExpr(expr)
        proto = self.m.proto  # keep the proto alive while its variables are read
        low = high = int(flat.offset)
        for v, c in zip(flat.vars, flat.coeffs, strict=True):
            domain = list(proto.variables[v.index].domain)
            ends = (int(c) * domain[0], int(c) * domain[-1])
            low, high = low + min(ends), high + max(ends)
        return low, high

    def ceiling(self, name: str, relax: frozenset[str]) -> int | None:
        """The most the objective `name` (min_cost: tco_expr) may be in any plan, by a named
        constraint on that very expression that `relax` leaves on (the budget), else None."""
        budget = self.p.constraints.budget_usd
        if name == "min_cost" and budget is not None and "budget" not in relax:
            return to_int(budget, "budget_usd", up=False)  # as the budget constraint has it
        return None

    def reach(self, expr: cp_model.LinearExpr) -> int:
        """The largest absolute value `expr` can take over its variables' domains."""
        flat = cp_model_helper.FlatIntExpr(expr)
        proto = self.m.proto  # keep the proto alive while its variables are read
        total = abs(int(flat.offset))
        for v, c in zip(flat.vars, flat.coeffs, strict=True):
            domain = list(proto.variables[v.index].domain)
            total += abs(int(c)) * max(abs(domain[0]), abs(domain[-1]))
        return total
