"""The model's variables and the state every part of the model shares: replicas per (design,
period, site), request-class shares, devices held, bought, reserved and rented, and hosts."""

from __future__ import annotations

import math
from collections.abc import Sequence

from planner.estimator.designs import Design
from planner.estimator.economics import earlier_phase, grid_intensity, host_idle_hours, in_fleet
from planner.estimator.hosts import hosts_for, purchase_unit
from planner.estimator.network import ports_per_host
from planner.model.ortools_cp import cp_model, cp_model_helper
from planner.model.result import ReplicaKey, ShareKey
from planner.model.scale import RATE_SCALE, SHARE_STEPS, to_int
from planner.model.tables import Tables, class_need, replicas_needed
from planner.schema.catalog import Node
from planner.schema.problem import InferenceWorkload, TrainingWorkload
from planner.schema.status import Site

PREM, CLOUD, JOB = Site.PREMISES, Site.CLOUD, Site.JOB


def weighted(vs: Sequence[cp_model.LinearExprT], coeffs: Sequence[int]) -> cp_model.LinearExpr:
    """sum(c * v) built in one call (Python's sum() of products is several times slower on
    thousands of terms); 0 when there are no terms, as sum() gives, so that a comparison of
    two empty sides stays a plain bool.

    The weighted sum is wrapped in a SumArray, the type sum() gives: a bare LinearExpr on the
    left of `<=` or `>=` yields to the right side's reflected comparison (every variable and
    expression type is a subclass of LinearExpr), which writes the same constraint with its
    signs flipped, a different model for the solver to read."""
    if not vs:
        return 0  # type: ignore[return-value]
    return cp_model_helper.SumArray([cp_model.LinearExpr.weighted_sum(vs, coeffs)], 0, 0.0)


def total(terms: Sequence[cp_model.LinearExprT]) -> cp_model.LinearExpr:
    """sum(terms) built in one call; a plain int when every term is one, as sum() gives."""
    if all(isinstance(x, int) for x in terms):
        return sum(terms)  # type: ignore[arg-type, return-value]
    return cp_model.LinearExpr.sum(terms)


class ModelBase:
    """Holds the CP-SAT model, the tables it was built from and every variable."""

    def host_grams_per_watt(self) -> float:
        """Grams CO2e one watt drawn at every hour of the horizon emits (a host's overhead, a
        switch): each demand period's hours at its grid intensity, the rest at the problem's,
        PUE included."""
        pue = self.p.horizon.pue
        at_work = sum(p.hours * (p.gco2e_per_kwh or 0.0) for p in self.periods) / 1000 * pue
        return at_work + host_idle_hours(self.p) * ((grid_intensity(self.p) or 0.0) / 1000 * pue)

    def __init__(self, t: Tables) -> None:
        self.t = t
        self.p = t.problem
        self.periods = t.periods
        self.m = cp_model.CpModel()
        self.R: dict[ReplicaKey, cp_model.IntVar] = {}
        self.R_ub: dict[ReplicaKey, int] = {}
        self.Y: dict[ShareKey, cp_model.IntVar] = {}
        # Fixed-rate workloads with a concurrency: sequences held by each replica group (the
        # sequences that exist; only they make tokens).
        self.X: dict[ReplicaKey, cp_model.IntVar] = {}
        # Request mixes under max_throughput / max_tokens_per_joule: the requests/s served (in
        # 1/RATE_SCALE), at least the stated rate, split among the classes by their shares.
        self.served: dict[str, cp_model.IntVar] = {}
        if self.p.objective.goal in ("max_throughput", "max_tokens_per_joule"):
            for w in self.p.workloads:
                if isinstance(w, InferenceWorkload) and w.requests_per_s is not None:
                    floor = to_int(w.requests_per_s * RATE_SCALE, "requests_per_s")
                    self.served[w.name] = self.m.new_int_var(
                        floor, max(floor, 10**9), f"served[{w.name}]"
                    )
        self.use: dict[tuple[str, int, str], list[tuple[int, cp_model.IntVar, int]]] = {}
        self.fleet: dict[str, cp_model.LinearExpr] = {}  # owned + bought devices held
        self.fleet_ub: dict[str, int] = {}
        self.bought: dict[str, cp_model.IntVar] = {}
        # Hosts per (device, node): every on-premises device of one type sits in hosts of the
        # one node type `pick` chooses (planner.estimator.hosts).
        self.hosts: dict[tuple[str, str], cp_model.IntVar] = {}
        self.hosts_bought: dict[tuple[str, str], cp_model.IntVar] = {}
        self.pick: dict[tuple[str, str], cp_model.IntVar] = {}
        self.nodes: dict[str, Node] = {}
        # Devices held beyond those at work: the rest of a whole baseboard or kit.
        self.spare: dict[str, cp_model.IntVar] = {}
        self._allowed_lits: dict[tuple[str, tuple[str, ...]], cp_model.IntVar] = {}
        self.reserved: dict[str, cp_model.IntVar] = {}
        self.od: dict[tuple[str, int], cp_model.IntVar] = {}
        self.spot: dict[tuple[str, int], cp_model.IntVar] = {}
        self.spot_up: dict[tuple[str, int], cp_model.LinearExpr] = {}
        self.named: dict[str, cp_model.IntVar] = {}  # constraint name -> enforcement literal
        self.bought_ub: dict[str, int] = {}
        self.interrupted = False
        self.hosts_ub: dict[tuple[str, str], int] = {}
        # Network gear between hosts (planner.estimator.network): ports and switches bought.
        self.net_ports: cp_model.IntVar | None = None
        self.net_switches: cp_model.IntVar | None = None
        self._peaks: dict[str, cp_model.LinearExpr] = {}
        self._tco: cp_model.LinearExpr | None = None  # the cost over the horizon, once built
        self._by_name = {w.name: w for w in self.p.workloads}
        self._keys_of: dict[tuple[str, int], list[ReplicaKey]] = {}  # (workload, period) -> keys
        self._design_keys: dict[
            tuple[str, int], list[ReplicaKey]
        ] = {}  # (workload, design) -> keys
        self._hint_holds: dict[tuple[str, int, bool], bool] = {}  # (device, tp, dense) -> holds
        # (workload, class, role) -> the designs a starting plan may give the class, with their
        # requests per step (hint_mix.MixHints._mix_fits)
        self._mix_fit: dict[tuple[str, int, str], list[tuple[ReplicaKey, int]]] = {}
        # (device, used, more, fleet) -> devices bought (hint_mix.MixHints._bought_more)
        self._bought: dict[tuple[str, int, int, int | None], int] = {}
        self.start: dict[ReplicaKey, int] = {}  # the search's starting plan (set by Hints._hint)

    @property
    def single(self) -> bool:
        """One demand period and no phases: the model of a fixed demand (peaks are plain
        expressions)."""
        return len(self.periods) == 1 and not self.p.phases

    @property
    def holding(self) -> range:
        """Indices the fleet is held over: the demand periods, then the phases before the last
        (planner.estimator.economics.earlier_phase)."""
        return range(len(self.periods) + max(0, len(self.p.phases or []) - 1))

    def _workload(self, name: str) -> InferenceWorkload | TrainingWorkload:
        return self._by_name[name]

    def _sites(self, d: Design) -> list[Site]:
        """Where a replica of `d` may run: on premises when each of its device types can be
        bought or is owned, in the cloud when it can be rented. A rented replica has one device
        type: the catalog's rents name no provider, so two types in one replica could come
        from two clouds, with the internet between its stages. A device rented in whole
        instances holds each tensor-parallel group inside one instance."""
        es = [self.t.econ[x] for x in d.devices]
        out: list[Site] = []
        if all(e.on_premises for e in es):
            out.append(PREM)
        # Rented in whole instances, a tensor-parallel group must fit one instance; a design
        # derated for a multi-card chassis on premises is not rented (a rented card is counted
        # at its full speed).
        unit = es[0].prices.rent_unit if es[0].prices.instance else None
        fits = unit is None or max(s.tp for s in d.stages) <= unit
        # A group across machines runs on premises only: the machines and the network
        # between them are the problem's (a cloud rents no link between its machines).
        alone = not any(s.dense or s.across_machines for s in d.stages)
        if len(es) == 1 and es[0].cloud and fits and alone:
            out.append(CLOUD)
        return out

    def _variables(self) -> None:
        """Replicas per design, period and site; devices held, bought, reserved and rented."""
        for w in self.p.workloads:
            serves = self.t.serves.get(w.name)
            for j, d in enumerate(self.t.designs[w.name]):
                sites = self._sites(d)  # the same in every period: worked out once per design
                if isinstance(w, TrainingWorkload):
                    site: Site = PREM if in_fleet(w, self.p) else JOB
                    if (PREM if site == PREM else CLOUD) not in sites:
                        continue
                    self._replica_var(ReplicaKey(w.name, j, -1, site), 1)
                    continue
                for p_i, period in enumerate(self.periods):
                    ub = self._replica_ub(w, j, d, period.scale)
                    for site in sites:
                        key = ReplicaKey(w.name, j, p_i, site)
                        self._replica_var(key, ub)
                        for k in serves[j] if serves is not None else ():
                            self.Y[ShareKey(w.name, j, k, p_i, site)] = self.m.new_int_var(
                                0, SHARE_STEPS * ub, f"Y[{w.name},{j},{k},{p_i},{site}]"
                            )
        self._use_terms()
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
            # A whole baseboard or kit may hold up to unit - 1 devices beyond those at work.
            unit = max((purchase_unit(n) for n in e.hosts), default=1) if can_buy else 1
            self.fleet_ub[dev] = total_ub + unit - 1 if can_buy else min(total_ub, e.owned)
            self.bought_ub[dev] = max(0, self.fleet_ub[dev] - e.owned) if can_buy else 0
            if self.single:
                self.fleet[dev] = self.use_expr(dev, 0, PREM)
                if unit > 1:
                    self.spare[dev] = self.m.new_int_var(0, unit - 1, f"spare[{dev}]")
                    self.fleet[dev] = self.fleet[dev] + self.spare[dev]
            else:
                self.fleet[dev] = self.m.new_int_var(0, self.fleet_ub[dev], f"fleet[{dev}]")
            self.bought[dev] = self.m.new_int_var(0, self.bought_ub[dev], f"bought[{dev}]")
            self._host_variables(dev)
        self._network_variables()
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
                self.reserved[dev] = self._rented_var(dev, most, f"reserved[{dev}]")
            for p_i in range(len(self.periods)):
                if "on_demand" in e.modes:
                    self.od[(dev, p_i)] = self._rented_var(dev, most, f"od[{dev},{p_i}]")
                if "spot" in e.modes:
                    spot_ub = math.ceil(most / avail)
                    self.spot[(dev, p_i)] = self._rented_var(dev, spot_ub, f"spot[{dev},{p_i}]")
                    if avail >= 1:
                        self.spot_up[(dev, p_i)] = self.spot[(dev, p_i)]
                    else:
                        up = self.m.new_int_var(0, most, f"spot_up[{dev},{p_i}]")
                        # Spot devices expected up: at most `availability` of those rented.
                        self.m.add(
                            RATE_SCALE * up
                            <= to_int(avail * RATE_SCALE, "spot_availability", up=False)
                            * self.spot[(dev, p_i)]
                        )
                        self.spot_up[(dev, p_i)] = up

    def _use_terms(self) -> None:
        """Devices each replica holds, per (device, period, site); a training job on the
        fleet holds them in every period, or, in a phase before the last, in that phase alone:
        an index past the demand periods, so the fleet covers it apart from the serving."""
        phases = {w.name: earlier_phase(self.p, w.name) for w in self.p.workloads}
        for rk, var in self.R.items():
            wname, j, p_i, where = rk
            if where == JOB:
                continue
            periods = range(len(self.periods)) if p_i < 0 else [p_i]
            phase = phases[wname]
            if p_i < 0 and phase is not None:
                periods = [len(self.periods) + phase]
            ub = self.R_ub[rk]
            for dev, n in self.t.designs[wname][j].devices.items():
                for q in periods:
                    self.use.setdefault((dev, q, where), []).append((n, var, ub))

    def _rented_var(self, dev: str, most: int, name: str) -> cp_model.IntVar:
        """Devices of `dev` rented in one mode: at most `most` (rounded up to whole instances),
        a multiple of the devices per instance where the offer rents whole instances."""
        unit = self.t.econ[dev].prices.rent_unit
        instances = -(-most // unit)
        var = self.m.new_int_var(0, instances * unit, name)
        if unit > 1:
            n = self.m.new_int_var(0, instances, f"instances {name}")
            self.m.add(var == unit * n)
        return var

    def _host_variables(self, dev: str) -> None:
        """Per host option of `dev`: whether it is the one chosen, hosts held and bought."""
        for node in self.t.econ[dev].hosts:
            hk = (dev, node.id)
            self.nodes[node.id] = node
            self.hosts_ub[hk] = hosts_for(node, self.fleet_ub[dev]) + 1
            self.pick[hk] = self.m.new_bool_var(f"pick[{dev},{node.id}]")
            self.hosts[hk] = self.m.new_int_var(0, self.hosts_ub[hk], f"hosts[{dev},{node.id}]")
            self.hosts_bought[hk] = self.m.new_int_var(
                0, self.hosts_ub[hk], f"hosts_bought[{dev},{node.id}]"
            )

    def _network_variables(self) -> None:
        """Ports and switches bought to join the hosts (planner.estimator.network): with two or
        more hosts, each bought host's ports; switches enough for those ports, one while they
        fit a switch, else a two-tier leaf-spine fabric. Minimizing cost sets each to the
        least the rules allow; other objectives keep at least that much (never less)."""
        link = self.t.network
        if link is None or not self.hosts:
            return
        pph = {k: ports_per_host(self.nodes[k[1]], link.id) for k in self.hosts}
        most = sum(pph[k] * self.hosts_ub[k] for k in self.hosts)
        # `single`: the fleet is one host (or none), and buys no ports.
        ports = self.m.new_int_var(0, most, "network[ports]")
        bought = sum(pph[k] * self.hosts_bought[k] for k in self.hosts)
        if self._one_host_may_do():
            single = self.m.new_bool_var("network[one host]")
            self.m.add(sum(self.hosts.values()) <= 1).only_enforce_if(single)
            # One host buys at most one host's ports: the relaxation gives up no more.
            self.m.add(ports >= bought - max(pph.values()) * single)
        else:
            self.m.add(ports >= bought)
        self.net_ports = ports
        sw = link.switch
        if sw is None:
            return
        radix = sw.ports
        half = max(1, radix // 2)
        leaves_ub = -(-most // half)
        spines_ub = -(-leaves_ub // 2)
        switches = self.m.new_int_var(0, leaves_ub + spines_ub + 1, "network[switches]")
        any_port = self.m.new_bool_var("network[any port]")
        self.m.add(ports <= most * any_port)
        self.m.add(switches >= any_port)
        self.m.add(radix * switches >= ports)  # no switch serves more than its ports
        if most > radix:
            two = self.m.new_bool_var("network[two tiers]")
            self.m.add(ports <= radix + (most - radix) * two)
            leaves = self.m.new_int_var(0, leaves_ub, "network[leaves]")
            spines = self.m.new_int_var(0, spines_ub, "network[spines]")
            self.m.add(half * leaves >= ports - radix * (1 - two))
            self.m.add(2 * spines >= leaves)
            self.m.add(switches >= leaves + spines - (leaves_ub + spines_ub) * (1 - two))
        self.net_switches = switches

    def _one_host_may_do(self) -> bool:
        """Whether a plan might hold one host or none: some workload may rent, or every
        workload has a design whose devices at its peak demand fit the largest host. When not,
        the single-host case of the network gear is left out of the model (it cannot occur),
        which keeps the ports linear in the hosts bought."""
        if any(site != PREM for (_, _, _, site) in self.R):
            return True
        most_slots = max(self.nodes[n].slots for _, n in self.hosts)
        peak = max(p.scale for p in self.periods)
        for w in self.p.workloads:
            sizes = []
            for d in self.t.designs[w.name]:
                n = sum(d.devices.values())
                if isinstance(w, InferenceWorkload) and w.request_mix is None:
                    n *= replicas_needed(w, d, peak)
                sizes.append(n)
            if sizes and min(sizes) > most_slots:
                return False
        return True

    def _replica_var(self, key: ReplicaKey, ub: int) -> None:
        r = self.R[key] = self.m.new_int_var(0, ub, "R[{},{},{},{}]".format(*key))
        self.R_ub[key] = ub
        self._keys_of.setdefault((key[0], key[2]), []).append(key)
        self._design_keys.setdefault((key[0], key[1]), []).append(key)
        w = self._by_name[key[0]]
        if isinstance(w, InferenceWorkload) and w.request_mix is None and w.concurrency:
            held = self.t.designs[key[0]][key[1]].concurrency
            most = min(held * ub, math.ceil(w.concurrency * self.periods[key[2]].scale - 1e-9))
            x = self.X[key] = self.m.new_int_var(0, most, "X[{},{},{},{}]".format(*key))
            self.m.add(x <= held * r)

    def _replica_ub(self, w: InferenceWorkload, j: int, d: Design, scale: float) -> int:
        serves = self.t.serves.get(w.name)
        if serves is not None:
            # Replicas of this design alone that serve every class it can hold, in the request
            # constraint's integers (Constraints._mix_demand): steps of replica time per class,
            # summed, then whole replicas. Each class rounded up to whole replicas first (in
            # floats), as it was, allowed 225 of request-mix's 651 designs a replica more, and 11
            # a replica less than the row's rates, rounded down to milli-requests/s, need. The
            # tighter domains shortened the proofs of generated mixes (with the per-class
            # covers: see Constraints._class_cover for the figures).
            steps = sum(
                -(-class_need(w, k, scale) // per)
                for k, rate in serves[j].items()
                if (per := to_int(rate * RATE_SCALE, "requests/s", up=False)) > 0
            )
            need = max(1, -(-steps // SHARE_STEPS))
        else:
            need = replicas_needed(w, d, scale)
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
        terms = self.use.get((dev, p_i, site), [])
        return weighted([v for _, v, _ in terms], [n for n, _, _ in terms])

    def _keys(self, w: str, p_i: int) -> list[ReplicaKey]:
        return self._keys_of.get((w, p_i), [])

    def _keys_of_design(self, w: str, j: int) -> list[ReplicaKey]:
        """Keys of design `j` of workload `w`: every period and site it may run in."""
        return self._design_keys.get((w, j), [])

    def _workload_keys(self, w: str) -> list[ReplicaKey]:
        """Replica keys of workload `w`, in the order of R (designs, then periods and sites)."""
        return [k for j in range(len(self.t.designs[w])) for k in self._design_keys.get((w, j), [])]

    def devices_at(self, p_i: int) -> cp_model.LinearExpr:
        """Devices at work in period `p_i`, both sites."""
        return total([self.use_expr(dev, q, site) for (dev, q, site) in self.use if q == p_i])

    def devices_held(self, p_i: int) -> cp_model.LinearExpr:
        """Devices held in period `p_i`: the on-premises fleet plus cloud devices at work."""
        cloud = [
            self.use_expr(dev, q, site) for (dev, q, site) in self.use if q == p_i and site == CLOUD
        ]
        return total(list(self.fleet.values())) + total(cloud)
