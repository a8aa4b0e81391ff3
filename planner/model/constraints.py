"""Constraint families, one method each, named so that binding constraints and infeasibility
can be reported by name (each named family is enforced by an assumption literal)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.estimator.hosts import holds_group, tp_limit
from planner.model.ortools_cp import cp_model, cp_model_helper
from planner.model.quantities import Quantities
from planner.model.result import ReplicaKey, ShareKey
from planner.model.scale import RATE_SCALE, SHARE_STEPS, THROUGHPUT_SCALE, to_int
from planner.model.tables import class_need, class_share_steps
from planner.model.variables import CLOUD, PREM, total, weighted
from planner.schema.problem import InferenceWorkload, TrainingWorkload

# The scale of a device's share per sequence held (Constraints._sequences_need_devices): 2**20,
# so 8 devices over 2,048 sequences is 4,096 and the coefficients stay far from 2**63.
SEQ_SCALE = 1 << 20

Lit = cp_model_helper.Literal


@dataclass
class _Groups:
    """What a tensor-parallel group's host rules come to, worked out once per group (device,
    size, derating, serving or not): thousands of designs share a few dozen groups."""

    hosts: dict[tuple[str, int, bool, bool], tuple[str, ...]] = field(default_factory=dict)
    # The literal "the device's chosen host is not one that holds the group", where some
    # host does not hold it.
    outside: dict[tuple[str, int, bool, bool], Lit] = field(default_factory=dict)


class Constraints(Quantities):
    """Adds every constraint family to the model, in a fixed order."""

    def _lit(self, name: str) -> cp_model.IntVar:
        """An assumption literal for a named constraint family (for explanations)."""
        lit = self.m.new_bool_var(f"on:{name}")
        self.named[name] = lit
        return lit

    def add_constraints(self) -> None:
        # Order: demand first (defines what must be held), then supply, then limits.
        self._demand()
        self._inventory_and_hosts()
        self._cloud_supply()
        self._budget()
        self._power()
        self._device_count()
        self._rack_units()
        self._carbon()

    def _demand(self) -> None:
        """Each inference workload meets its throughput and concurrency (or each request class
        its rate) in every period; each training job runs once."""
        for w in self.p.workloads:
            designs = self.t.designs[w.name]
            if isinstance(w, TrainingWorkload):
                keys = self._keys(w.name, -1)
                self.m.add(total([self.R[k] for k in keys]) == 1).only_enforce_if(
                    self._lit(f"train:{w.name}")
                )
                continue
            if w.request_mix is not None:
                self._mix_demand(w)
                continue
            thr = self._lit(f"throughput:{w.name}") if w.min_tokens_per_s > 0 else None
            conc = self._lit(f"concurrency:{w.name}") if w.concurrency is not None else None
            for p_i, period in enumerate(self.periods):
                keys = self._keys(w.name, p_i)
                if thr is not None:
                    need = to_int(
                        w.min_tokens_per_s * period.scale * THROUGHPUT_SCALE,
                        f"{w.name}.min_tokens_per_s",
                    )
                    self.m.add(self.made_tokens(w, keys, kept=True) >= need).only_enforce_if(thr)
                    if w.concurrency is not None:
                        # Implied (x <= slots): the slots' capacity covers the need. Redundant,
                        # it tightens the relaxation.
                        kept = self.t.kept.get(w.name)
                        tps = [
                            to_int(
                                designs[k[1]].tokens_per_s
                                * (kept[k[1]] if kept else 1.0)
                                * THROUGHPUT_SCALE,
                                "tps",
                            )
                            for k in keys
                        ]
                        self.m.add(
                            weighted([self.R[k] for k in keys], tps) >= need
                        ).only_enforce_if(thr)
                if conc is not None and w.concurrency is not None:
                    # Every sequence that exists is held somewhere, and only those exist.
                    held = math.ceil(w.concurrency * period.scale - 1e-9)
                    self.m.add(total([self.X[k] for k in keys]) == held).only_enforce_if(conc)
                    for k in keys:  # a replica without a sequence serves nothing: none is kept
                        self.m.add(self.X[k] >= self.R[k]).only_enforce_if(conc)
                    self.m.add(  # implied; tightens the relaxation
                        weighted(
                            [self.R[k] for k in keys], [designs[k[1]].concurrency for k in keys]
                        )
                        >= held
                    ).only_enforce_if(conc)
                    self._sequences_need_devices(w.name, keys)
                self.m.add(total([self.R[k] for k in keys]) >= 1)

    def _sequences_need_devices(self, wname: str, keys: list[ReplicaKey]) -> None:
        """A cut: per device type, the sequences held on designs with that type need their
        share of its devices, sum_k (n_k / held_k) X_k <= sum_k n_k R_k over the period's keys
        (n_k: devices of the type in a replica of design k, held_k: the sequences one holds).
        Valid for every plan: it is the sum of X_k <= held_k R_k, each weighted by n_k / held_k;
        the weights are scaled by SEQ_SCALE and rounded down, which keeps it valid (X >= 0).

        CP-SAT's own relaxation of these models is far weaker than their linear program (on
        train-then-serve-13b its bound stayed near $6,500 for most of the search, where the LP
        of planner.model.relaxation gives $117,711 and the optimum is $204,727); one aggregate
        row per type is what it keeps of the devices the sequences need. Deterministic time of the search whose answer
        is kept, without -> with it (one thread each, 2026-11-29): tokens-per-joule-10kw 0.134
        -> 0.032, cost-per-token-qwen72b 0.191 -> 0.074, max-throughput-500k 0.420 -> 0.333,
        train-then-serve-13b 0.353 -> 0.315, carbon-cap 0.075 -> 0.062; rent-the-peak 0.211 ->
        0.222 and owners-pool 0.066 -> 0.124 the other way; the same optimum on every example."""
        designs = self.t.designs[wname]
        for dev in sorted({dev for k in keys for dev in designs[k[1]].devices}):
            mine = [k for k in keys if dev in designs[k[1]].devices]
            n = [designs[k[1]].devices[dev] for k in mine]
            held = [designs[k[1]].concurrency for k in mine]
            per_seq = [SEQ_SCALE * a // h if h > 0 else 0 for a, h in zip(n, held, strict=True)]
            self.m.add(
                weighted([self.X[k] for k in mine], per_seq)
                <= weighted([self.R[k] for k in mine], [SEQ_SCALE * a for a in n])
            )

    def _mix_demand(self, w: InferenceWorkload) -> None:
        """Each class's requests/s are met by shares of replica time: a replica's shares add up
        to at most its whole time, and a share s of design j serves s x rate(j, class)."""
        assert w.request_mix is not None
        serves = self.t.serves[w.name]
        designs = self.t.designs[w.name]
        split = any(d.role != "both" for d in designs)
        lit = self._lit(f"requests:{w.name}")
        for wn, j, p_i, site in self._workload_keys(w.name):
            ys = [self.Y[ShareKey(wn, j, k, p_i, site)] for k in serves[j]]
            self.m.add(sum(ys) <= SHARE_STEPS * self.R[ReplicaKey(wn, j, p_i, site)])
        for p_i, period in enumerate(self.periods):
            keys = self._keys(w.name, p_i)
            for k in range(len(w.request_mix)):
                need: cp_model.LinearExpr | int = class_need(w, k, period.scale)
                if w.name in self.served:  # a throughput goal: the served rate, by its shares
                    need = class_share_steps(w, k, period.scale) * self.served[w.name]
                # Every request is prefilled and decoded: by whole-request replicas, or by a
                # prefill pool and a decode pool (disaggregated), each sized for the rest.
                for side in ("prefill", "decode") if split else ("both",):
                    mine = [
                        (wn, j, site)
                        for (wn, j, _, site) in keys
                        if k in serves[j] and designs[j].role in ("both", side)
                    ]
                    rates = [
                        to_int(serves[j][k] * RATE_SCALE, "requests/s", up=False)
                        for _, j, _ in mine
                    ]
                    self.m.add(
                        weighted(
                            [self.Y[ShareKey(wn, j, k, p_i, site)] for wn, j, site in mine],
                            rates,
                        )
                        >= need
                    ).only_enforce_if(lit)
                    self._class_cover(mine, p_i, rates, need, lit)
            self.m.add(total([self.R[k] for k in keys]) >= 1)

    def _class_cover(
        self,
        mine: list[tuple[str, int, str]],
        p_i: int,
        rates: list[int],
        need: cp_model.LinearExpr | int,
        lit: cp_model.IntVar,
    ) -> None:
        """A cut: the replicas of the designs that serve a class, each at its whole time,
        cover the class's need, sum_j rate_j x SHARE_STEPS x R_j >= need. Valid for every plan:
        a share of a replica's time is at most all of it (Y_jk <= SHARE_STEPS x R_j). It puts
        the need on the replicas themselves, which CP-SAT's relaxation, built row by row as
        rows are violated, otherwise reached only through the shares: on request-mix its bound
        stayed below $7,000 for about half of the light pass (the optimum is $341,867).

        Deterministic time on one thread (seeds 0-2; request-mix and generated mixes of 2 to
        4 classes at 10 to 200 requests/s, 18 models; the lesser of the light pass's proof and
        the full search's, capped at 0.5 and 3, as the race keeps the first proof), with the
        tighter replica domains of ModelBase._replica_ub, after the rows for hosts sold whole
        (_inventory_and_hosts): 32.0 -> 28.0 in all, geometric mean 0.191 -> 0.145, full
        search unproved on 10 -> 4 of 54 runs; request-mix 0.201/0.241/0.229 ->
        0.141/0.256/0.180; a 3-class mix at 40 requests/s 1.27/1.48/2.35 -> 3.0/2.89/3.0
        (slower), a 4-class mix on H200 alone unproved -> 0.64/0.43/0.15 (2026-11-29)."""
        self.m.add(
            weighted(
                [self.R[ReplicaKey(wn, j, p_i, site)] for wn, j, site in mine],
                [SHARE_STEPS * r for r in rates],
            )
            >= need
        ).only_enforce_if(lit)

    def _inventory_and_hosts(self) -> None:
        """Owned and bought devices cover the busiest period on premises, owned ones first;
        every one of them sits in a slot of hosts of one type; bought devices fill bought hosts,
        whole where the host is sold whole (planner.estimator.hosts)."""
        # With a request mix, a host sold whole ties its devices to the hosts bought without
        # the host's pick as the row's condition: a host not picked holds none (hosts == 0
        # below) and so buys none, so the row holds for every plan either way. Conditional, the
        # relaxation loses it at any fractional pick (request-mix: a pick of 0.001 beside 0.98
        # of an 8-GPU baseboard), and the search learns that a baseboard brings its 8 devices
        # only once it has fixed the pick. Other problems keep the conditional row: the
        # unconditional one moved rent-the-peak to another of its plans at the same cost.
        mixed = any(isinstance(w, InferenceWorkload) and w.request_mix for w in self.p.workloads)
        for dev, fleet in self.fleet.items():
            e = self.t.econ[dev]
            if not self.single:
                for p_i in self.holding:  # the demand periods and the earlier phases
                    self.m.add(fleet >= self.use_expr(dev, p_i, PREM))
                self.m.add(fleet <= self.fleet_ub[dev])
            bought = self.bought[dev]
            self.m.add(bought >= fleet - e.owned)
            if dev in self.spare or not self.single:
                # Devices held are the owned ones in use (all of them once any is bought) and
                # every device bought, spares of a whole unit included. (Without spares the
                # fleet is the devices at work, and the cost keeps bought = fleet - owned.)
                used_owned: cp_model.IntVar | int = 0
                if e.owned:
                    used_owned = self.m.new_int_var(0, e.owned, f"owned used[{dev}]")
                    self.m.add_min_equality(used_owned, [fleet, e.owned])
                self.m.add(fleet >= bought + used_owned)
            keys = [(dev, n.id) for n in e.hosts]
            self.m.add(sum(self.pick[k] for k in keys) <= 1)
            self.m.add(sum(self.nodes[k[1]].slots * self.hosts[k] for k in keys) >= fleet)
            bought_hosts = sum(self.nodes[k[1]].slots * self.hosts_bought[k] for k in keys)
            if mixed and all(self.nodes[k[1]].sold_whole for k in keys):
                # Every host sold whole: the rows below hold bought at or above the slots of
                # the one host type picked, so the devices bought are those slots exactly.
                self.m.add(bought_hosts == bought)
            else:
                self.m.add(bought_hosts >= bought)
            for k in keys:
                node = self.nodes[k[1]]
                self.m.add(self.hosts[k] == 0).only_enforce_if(~self.pick[k])
                self.m.add(self.hosts_bought[k] <= self.hosts[k])
                if node.sold_whole:  # its devices are bought a whole host at a time
                    whole = self.m.add(bought >= node.slots * self.hosts_bought[k])
                    if not mixed:
                        whole.only_enforce_if(self.pick[k])
        self._host_holds_groups()

    def _allowed(self, dev: str, ids: tuple[str, ...]) -> cp_model.IntVar:
        """A literal true when `dev`'s chosen host is one of the hosts `ids` (one per set,
        shared)."""
        key = (dev, ids)
        if key not in self._allowed_lits:
            lit = self.m.new_bool_var(f"host in {key}")
            self.m.add(lit == sum(self.pick[(dev, h)] for h in ids))
            self._allowed_lits[key] = lit
        return self._allowed_lits[key]

    def _host_holds_groups(self) -> None:
        """A replica on premises runs only where its device types' chosen hosts hold its
        tensor-parallel groups (planner.estimator.hosts.tp_limit), and a serving replica only
        where they run at the speed it assumed (consumer cards derated in a multi-card chassis,
        at full speed alone: planner.estimator.hosts.holds_group)."""
        fits: dict[int, dict[str, tuple[str, ...]]] = {}  # R index -> device -> hosts it may use
        # What a design's stages allow depends on the design alone, not on the period: worked
        # out once per design, at its first replica variable.
        per_design: dict[tuple[str, int], tuple[dict[str, tuple[str, ...]], list[Lit]]] = {}
        groups = _Groups()
        for key, r in self.R.items():
            if key.site != PREM:
                continue
            facts = per_design.get((key.workload, key.design))
            if facts is None:  # constrains r too, in the order the literals are made
                facts = per_design[(key.workload, key.design)] = self._design_hosts(
                    key.workload, key.design, groups, r
                )
                fits[r.Index()] = facts[0]
                continue
            mine, off = facts
            fits[r.Index()] = mine  # shared by the design's variables; only read from here on
            for lit in off:
                self.m.add(r == 0).only_enforce_if(lit)
        self._hosts_cover_their_designs(fits)

    def _design_hosts(
        self, workload: str, j: int, groups: _Groups, r: cp_model.IntVar
    ) -> tuple[dict[str, tuple[str, ...]], list[Lit]]:
        """Per device type of design `j` of `workload`, the hosts that hold all its stages of
        that type; and per stage that not every host of its device holds, the literal "the
        chosen host is not one that does", which holds its replica variable `r` at 0 (and
        every other of the design on premises, which the caller constrains)."""
        serving = isinstance(self._workload(workload), InferenceWorkload)
        mine: dict[str, tuple[str, ...]] = {}
        off: list[Lit] = []
        for st in self.t.designs[workload][j].stages:
            group = (st.device, st.host_tp, st.dense, serving)
            ids = groups.hosts.get(group)
            if ids is None:
                ids = groups.hosts[group] = self._group_hosts(*group)
            was = mine.get(st.device)
            mine[st.device] = ids if was is None else tuple(h for h in ids if h in was)
            if len(ids) < len(self.t.econ[st.device].hosts):
                held = self.m.add(r == 0)  # before the literal's own constraint, as ever
                lit = groups.outside.get(group)
                if lit is None:
                    lit = groups.outside[group] = ~self._allowed(st.device, ids)
                off.append(lit)
                held.only_enforce_if(lit)
        return mine, off

    def _group_hosts(self, dev: str, tp: int, dense: bool, serving: bool) -> tuple[str, ...]:
        """The hosts of `dev` that hold a tensor-parallel group of `tp` (`dense`: derated) of a
        serving replica, or of a training job."""
        e = self.t.econ[dev]
        c = self.p.constraints
        return tuple(
            n.id
            for n in e.hosts
            if (
                holds_group(e.device, n, self.p, tp, dense)
                if serving
                else tp_limit(e.device, n, c) >= tp
            )
        )

    def _hosts_cover_their_designs(self, fits: dict[int, dict[str, tuple[str, ...]]]) -> None:
        """A cut that ties each host type to the designs that need it (the relaxation otherwise
        serves with designs that need a desktop while paying for the cheapest slots of a
        server): per device type, period and set O of its hosts that some design is limited
        to, the devices at work in designs limited to hosts within O fit in the slots of
        hosts of O.

        Valid for every plan: when such a design runs, the one host type chosen for the device
        is in O, so all of the device's hosts are hosts of O and their slots hold the whole
        fleet, which holds every device at work; when none runs, the left side is 0."""
        for (dev, _, site), terms in self.use.items():
            if site != PREM:
                continue
            every = tuple(n.id for n in self.t.econ[dev].hosts)
            limits = [fits[v.Index()][dev] for _, v, _ in terms]
            for o in sorted(set(limits) - {every}):
                within = {lim: set(lim) <= set(o) for lim in set(limits)}
                inside = [
                    (n, v) for (n, v, _), lim in zip(terms, limits, strict=True) if within[lim]
                ]
                slots = [self.nodes[h].slots * self.hosts[(dev, h)] for h in o]
                self.m.add(weighted([v for _, v in inside], [n for n, _ in inside]) <= sum(slots))

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
        share = to_int(self.p.market.spot_max_share * RATE_SCALE, "spot_max_share", up=False)
        lit = self._lit("spot_share")
        for p_i in range(len(self.periods)):
            up = [v for (dev, q), v in self.spot_up.items() if q == p_i]
            if up:
                self.m.add(RATE_SCALE * sum(up) <= share * self.devices_at(p_i)).only_enforce_if(
                    lit
                )

    def _budget(self) -> None:
        """Total cost over the horizon, and money up front, under their ceilings."""
        c = self.p.constraints
        if c.budget_usd is not None:
            self.m.add(
                self.tco_expr() <= to_int(c.budget_usd, "budget_usd", up=False)
            ).only_enforce_if(self._lit("budget"))
        if c.capex_usd is not None:
            self.m.add(
                self.capex_expr() <= to_int(c.capex_usd, "capex_usd", up=False)
            ).only_enforce_if(self._lit("capex"))

    def _power(self) -> None:
        """Power at the wall (devices and hosts at load, times PUE) under the cap in every
        period; rented devices count too (the cap is the deployment's power budget)."""
        c = self.p.constraints
        if c.power_w is not None:
            cap = to_int(c.power_w * 1000 / self.p.horizon.pue, "power_w", up=False)  # milliwatts
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
                self.carbon_expr() <= to_int(c.max_carbon_kgco2e * 1000, "max_carbon", up=False)
            ).only_enforce_if(self._lit("carbon"))
