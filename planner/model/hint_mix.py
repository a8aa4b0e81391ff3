"""The starting plan of a request mix (planner.model.hints): each request class on the designs
that serve its load at the lowest price, and the host rules the starting plan keeps."""

from __future__ import annotations

from typing import NamedTuple

from planner.estimator.designs import Design
from planner.estimator.hosts import devices_bought, holds_group
from planner.model.result import ReplicaKey, ShareKey
from planner.model.scale import RATE_SCALE, SHARE_STEPS, to_int
from planner.model.tables import class_need, class_share_steps, served_floor
from planner.model.variables import PREM, ModelBase
from planner.schema.catalog import Node
from planner.schema.problem import InferenceWorkload


class MixPick(NamedTuple):
    """Replicas of one design a request class takes in the starting plan."""

    price: float  # USD: energy and the purchase units its devices add
    key: ReplicaKey
    n: int  # replicas
    share: int  # steps of replica time (of SHARE_STEPS) the class takes of them


# Designs cheapest per request/s tried as a request class's main design, the rest of its load
# on one other design (MixHints._mix_cover).
MIX_LEADS = 3
# Cheapest ways of each request class tried as the first class placed (MixHints._mix_heuristic).
MIX_FIRST = 8


class MixHints(ModelBase):
    """The starting plan's request mixes, and where its hosts put devices."""

    def _mix_heuristic(
        self,
        w: InferenceWorkload,
        slot_usd: dict[str, float],
        per_w: float,
        chosen: dict[ReplicaKey, int],
        shares: dict[ShareKey, int],
        used: dict[str, int],
    ) -> None:
        """Each request class on the designs that serve its load at the lowest price (devices
        priced by the purchase units they add to `used`, as in `_options`): whole-request
        replicas, or a prefill pool with a decode pool, each pool one design or two
        (`_mix_cover`). Each class is also put first on each of its MIX_FIRST cheapest ways,
        the others after it on their cheapest beside it, and the plan whose devices and energy
        cost least is kept: a class placed first on its cheapest way can leave a later one a
        whole purchase unit to buy, where a dearer way would leave it room (request-mix: chat
        on 3 L40S and the documents on two 4-H100 replicas, $370,834 once completed; the
        documents on 7 one-H100 replicas and an L40S for the rest leave the H100 unit's 8th
        device to chat, as the optimum does, $341,852)."""
        assert w.request_mix is not None
        classes = range(len(w.request_mix))
        best: tuple[float, dict[int, list[MixPick]]] | None = None
        for first in classes:
            for way in self._mix_class(w, first, slot_usd, per_w, chosen, used, MIX_FIRST):
                plan = {first: way}
                for k in classes:
                    taken, held = dict(used), dict(chosen)
                    for picks in plan.values():
                        self._mix_take(w, picks, taken, held)
                    if k not in plan:
                        plan[k] = next(
                            iter(self._mix_class(w, k, slot_usd, per_w, held, taken)), []
                        )
                price = self._mix_price(w, plan, per_w, slot_usd, used)
                if best is None or price < best[0] - 1e-6:
                    best = (price, plan)
        for k, picks in ({} if best is None else best[1]).items():
            self._mix_take(w, picks, used, chosen)
            for p in picks:
                shares[ShareKey(w.name, p.key.design, k, 0, PREM)] = p.share

    def _mix_take(
        self,
        w: InferenceWorkload,
        picks: list[MixPick],
        taken: dict[str, int],
        held: dict[ReplicaKey, int],
    ) -> None:
        """Add `picks`' devices to `taken` and their replicas to `held`."""
        for p in picks:
            held[p.key] = held.get(p.key, 0) + p.n
            for x, c in self.t.designs[w.name][p.key.design].devices.items():
                taken[x] = taken.get(x, 0) + p.n * c

    def _mix_price(
        self,
        w: InferenceWorkload,
        plan: dict[int, list[MixPick]],
        per_w: float,
        slot_usd: dict[str, float],
        used: dict[str, int],
    ) -> float:
        """A mix plan's energy and the purchase units its devices add to `used`."""
        taken, held = dict(used), dict[ReplicaKey, int]()
        for picks in plan.values():
            self._mix_take(w, picks, taken, held)
        energy = sum(n * self.t.designs[w.name][k.design].power_w * per_w for k, n in held.items())
        return energy + sum(
            self._bought_more(x, used.get(x, 0), n - used.get(x, 0)) * slot_usd[x]
            for x, n in taken.items()
        )

    def _mix_class(
        self,
        w: InferenceWorkload,
        k: int,
        slot_usd: dict[str, float],
        per_w: float,
        chosen: dict[ReplicaKey, int],
        used: dict[str, int],
        ways: int = 1,
    ) -> list[list[MixPick]]:
        """Class `k`'s `ways` cheapest covers beside the devices in `used` and replicas in
        `chosen`, cheapest first: whole-request replicas (each of the `ways` cheapest), or the
        cheapest prefill pool with the cheapest decode pool beside it."""
        scale = self.periods[0].scale
        # What the request constraint asks of the class (under a throughput goal, at the least
        # served rate, which the completed plan may then raise).
        need = class_need(w, k, scale)
        if w.name in self.served:
            need = class_share_steps(w, k, scale) * served_floor(w)
        found = self._mix_cover(w, k, "both", need, slot_usd, per_w, chosen, used, ways)
        prefill = self._mix_cover(w, k, "prefill", need, slot_usd, per_w, chosen, used)
        if prefill:
            taken = dict(used)
            self._mix_take(w, prefill[0][1], taken, {})
            decode = self._mix_cover(w, k, "decode", need, slot_usd, per_w, chosen, taken)
            if decode:
                found.append((prefill[0][0] + decode[0][0], prefill[0][1] + decode[0][1]))
        found.sort(key=lambda f: f[0])
        return [picks for _, picks in found[:ways]]

    def _mix_cover(
        self,
        w: InferenceWorkload,
        k: int,
        role: str,
        need: int,
        slot_usd: dict[str, float],
        per_w: float,
        chosen: dict[ReplicaKey, int],
        used: dict[str, int],
        ways: int = 1,
    ) -> list[tuple[float, list[MixPick]]]:
        """The `ways` cheapest ways designs of `role` on premises serve class `k`'s `need`:
        one design, or whole replicas of one of the MIX_LEADS designs cheapest per request/s
        with the rest on a design of other device types (a class needing 7.04 replicas of its
        cheapest design is better served by 7 of them and a smaller device for the rest than
        by 8: request-mix's documents, 7 H100 and 1 L40S), each with its price (as in
        `_mix_heuristic`), cheapest first; none when no design serves the class.

        The rest goes to other device types only: on one type alone (the single-type note's
        models) a second design of the same type moved CP-SAT's search to a longer proof
        (request-mix's workload at 30 requests/s, 15 % documents: the L4-alone model took
        0.427 of deterministic time instead of 0.043, from a starting plan nearer its optimum)."""
        designs = self.t.designs[w.name]
        fits = self._mix_fits(w, k, role)

        def pick(key: ReplicaKey, share: int, taken: dict[str, int]) -> MixPick | None:
            d, n = designs[key.design], -(-share // SHARE_STEPS)
            if chosen.get(key, 0) + n > self.R_ub[key]:
                return None
            price = n * d.power_w * per_w + sum(
                self._bought_more(x, taken.get(x, 0), n * c) * slot_usd[x]
                for x, c in d.devices.items()
            )
            return MixPick(price, key, n, share)

        covers = [[p] for key, per in fits if (p := pick(key, -(-need // per), used))]

        def per_request(f: tuple[ReplicaKey, int]) -> float:
            d = designs[f[0].design]
            return (d.power_w * per_w + sum(slot_usd[x] * c for x, c in d.devices.items())) / f[1]

        for lead, per in sorted(fits, key=per_request)[:MIX_LEADS]:
            whole = need // (per * SHARE_STEPS)
            first = pick(lead, whole * SHARE_STEPS, used) if whole > 0 else None
            if first is None or whole * SHARE_STEPS * per >= need:
                continue
            taken = dict(used)
            self._mix_take(w, [first], taken, {})
            rest = need - whole * SHARE_STEPS * per
            for key, per2 in fits:
                other = designs[key.design].devices.keys() != designs[lead.design].devices.keys()
                if other and (second := pick(key, -(-rest // per2), taken)):
                    covers.append([first, second])
        priced = sorted(((sum(p.price for p in c), c) for c in covers), key=lambda f: f[0])
        # The cheapest cover of each count of devices per type: the ways differ in the room
        # they leave the other classes, not in which of the equal designs they take.
        kept: dict[tuple[tuple[str, int], ...], tuple[float, list[MixPick]]] = {}
        for f in priced:
            held: dict[str, int] = {}
            self._mix_take(w, f[1], held, {})
            kept.setdefault(tuple(sorted(held.items())), f)
            if len(kept) == ways:
                break
        return list(kept.values())

    def _mix_fits(self, w: InferenceWorkload, k: int, role: str) -> list[tuple[ReplicaKey, int]]:
        """The designs of `role` on premises a starting plan may give class `k` of `w` (whose
        hosts hold them: `_hint_host_holds`), each with its requests per step of the request
        constraint; worked out once per model (the starting plan asks for them about 50 times
        on request-mix, each a pass over every design)."""
        got = self._mix_fit.get((w.name, k, role))
        if got is not None:
            return got
        designs, fits = self.t.designs[w.name], []
        for j, rates in enumerate(self.t.serves[w.name]):
            key = ReplicaKey(w.name, j, 0, PREM)
            d = designs[j]
            if k not in rates or key not in self.R or d.role != role:
                continue
            per_step = to_int(rates[k] * RATE_SCALE, "requests/s", up=False)
            if per_step > 0 and self._hint_host_holds(d):
                fits.append((key, per_step))
        self._mix_fit[(w.name, k, role)] = fits
        return fits

    def _bought_more(self, dev: str, used: int, more: int, fleet: int | None = None) -> int:
        """Devices bought (whole purchase units of the hint's host, beyond those owned) to put
        `more` `dev` on premises beside `used`, in a fleet already holding `fleet` of them (the
        most any phase holds; `used` unless given)."""
        args = (dev, used, more, fleet)
        got = self._bought.get(args)
        if got is None:
            node, owned = self._hint_host(dev), self.t.econ[dev].owned
            held = used if fleet is None else max(fleet, used)
            after = max(held, used + more)
            got = devices_bought(node, after - owned) - devices_bought(node, held - owned)
            self._bought[args] = got  # the starting plan asks the same few, thousands of times
        return got

    def _hint_host(self, dev: str) -> Node:
        """The host the hint puts `dev` in: its default host when it may sit there."""
        e = self.t.econ[dev]
        return e.node if e.node in e.hosts else e.hosts[0]

    def _hint_host_holds(self, d: Design) -> bool:
        """Whether the hint's hosts hold every stage of `d` at the speed it assumed (else the
        hint would contradict the host rules, and the search would start from nothing)."""
        return all(self._hint_host_holds_group(s.device, s.host_tp, s.dense) for s in d.stages)

    def _hint_host_holds_group(self, dev: str, tp: int, dense: bool) -> bool:
        """Whether the hint's host of `dev` holds a tensor-parallel group of `tp` (`dense`:
        derated); the same few groups recur across thousands of designs, so each is worked
        out once."""
        group = (dev, tp, dense)
        if group not in self._hint_holds:
            node = self._hint_host(dev)
            self._hint_holds[group] = holds_group(self.t.econ[dev].device, node, self.p, tp, dense)
        return self._hint_holds[group]


def mix_share(need: int, rate: float) -> int | None:
    """Steps of replica time (of SHARE_STEPS) that serve a class's `need` (in the request
    constraint's integers, tables.class_need) at `rate` requests/s per whole replica, the rate
    rounded down as the constraint rounds it (Constraints._mix_demand), so the hint meets it
    exactly (worked out on floats, a share could fall a unit short and the hint be no plan).
    None when the rate rounds to nothing there."""
    per_step = to_int(rate * RATE_SCALE, "requests/s", up=False)
    return -(-need // per_step) if per_step > 0 else None
