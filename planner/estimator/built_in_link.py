"""The network a pool of whole machines is planned on when nobody names one: the slowest
built-in wired port all its machines share.

The rule (one rule, applied alike by `planner solve`, `planner verify` and
benchmarks/pooled/run.py):

1. A whole machine (catalog form_factor soc-system: a Mac mini, a Strix Halo desktop, a DGX
   Spark, a Raspberry Pi) records its built-in wired network ports as catalog link ids
   (`Accelerator.ports`, each entry sourced to the maker's spec sheet), as the base
   configuration ships: no build-to-order option, no adapter.
2. Ports of one kind meet at the slower one's rate: BASE-T Ethernet auto-negotiates down to the
   slower end (IEEE 802.3 clause 28; 802.3bz for 2.5 and 5 Gb/s), and a Thunderbolt 5 port
   runs a Thunderbolt 4 link with a Thunderbolt 4 port (Intel's Thunderbolt 5 brief: backward
   compatible). A kind is shared when every machine of the pool has a port of it.
3. The pool is planned on the slowest port of any shared kind. Slowest, because it is the one
   the machines can be joined by without knowing the user's cables and switch: a faster shared
   port (a Thunderbolt cable between Macs, a 200 Gb/s QSFP cable between Sparks) needs gear the
   user may not have. The plan says "link assumed: ..."; naming `constraints.network`
   replaces the assumption.
4. Where nothing can be inferred (a machine records no ports; the machines share no kind) the
   problem must name its network: an error says which machine and how (not for a pool of one
   machine, which needs none).

Pools with devices that are not whole machines (cards in servers) are not covered: their
hosts' network stays `constraints.network`'s default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner.catalog import Catalog
from planner.estimator.designs import allowed_devices
from planner.estimator.economics import available_modes
from planner.schema.catalog import Accelerator, Link
from planner.schema.problem import Problem


@dataclass(frozen=True)
class AssumedLink:
    link: Link
    rule: str  # how it was chosen, for the plan's note and the benchmark's table

    @property
    def note(self) -> str:
        """The plan's note (planner.plan.build), which planner verify checks word for word."""
        return (
            f"{ASSUMED_NOTE}{self.link.id} ({self.rule}); name constraints.network to plan on "
            "another link"
        )


ASSUMED_NOTE = "link assumed: "


class NoSharedPort(ValueError):
    """No built-in port can be inferred for the machines: the problem must name its network."""


def whole_machines(devices: Sequence[Accelerator]) -> bool:
    """Every device is a whole machine (catalog form_factor soc-system)."""
    return bool(devices) and all(d.form_factor == "soc-system" for d in devices)


def built_in_link(cat: Catalog, devices: Sequence[Accelerator]) -> AssumedLink:
    """The slowest built-in wired port all `devices` (whole machines) share, by the module's
    rule; NoSharedPort where a machine records no ports or the machines share no kind."""
    kinds = sorted({d.id: d for d in devices}.values(), key=lambda d: d.id)
    bare = [d.id for d in kinds if not d.ports]
    if bare:
        raise NoSharedPort(
            f"the catalog records no built-in network port for {', '.join(bare)}, so no link "
            "can be assumed"
        )
    by_kind: list[dict[str, list[Link]]] = []
    for d in kinds:
        own: dict[str, list[Link]] = {}
        for p in d.ports:
            link = cat.link(p)
            own.setdefault(link.kind, []).append(link)
        by_kind.append(own)
    shared = set.intersection(*(set(k) for k in by_kind))
    if not shared:
        listed = "; ".join(f"{d.id}: {', '.join(d.ports)}" for d in kinds)
        raise NoSharedPort(
            f"the machines share no kind of built-in wired port ({listed}), so no link can be "
            "assumed"
        )
    slowest = min(
        (link for own in by_kind for k in shared for link in own[k]),
        key=lambda lk: (lk.bandwidth_gb_s, -lk.latency_us, lk.id),
    )
    have = "; ".join(f"{d.id}: {', '.join(d.ports)}" for d in kinds)
    return AssumedLink(
        slowest, f"no link named: the slowest built-in wired port the machines share ({have})"
    )


def owned_only(problem: Problem) -> bool:
    """Nothing can be added to the devices owned: no capital to buy with (capex_usd 0) and no
    renting (procurement `buy` alone)."""
    return problem.constraints.capex_usd == 0 and problem.horizon.modes == ("buy",)


def pool_devices(problem: Problem, cat: Catalog) -> list[Accelerator]:
    """The devices a problem may plan with: every filter of its constraints applied (allowed,
    owned, excluded, vendors, ECC, architecture, a price or an inventory, a host), as design
    enumeration applies them (planner.estimator.designs.allowed_devices), and only those owned
    where nothing can be added to them (owned_only). A pool left to `vendors: [apple]` is whole
    machines although it names no device."""
    devices = allowed_devices(problem, cat)
    owned = {o.device for o in problem.constraints.inventory}
    if owned and owned_only(problem):
        devices = [d for d in devices if d.id in owned]
    return sorted(devices, key=lambda d: d.id)


def states_network(problem: Problem) -> bool:
    """The problem names a network between machines somewhere: constraints.network, a machine
    kind's own `network`, or segments."""
    named = "network" in problem.constraints.model_fields_set
    return named or bool(problem.segments) or any(m.network for m in problem.machines)


def assumed_network(problem: Problem, cat: Catalog) -> AssumedLink | None:
    """The link the module's rule assumes for `problem`: None where the problem names its
    network or plans devices that are not whole machines; NoSharedPort where its whole
    machines share no recorded port."""
    devices = pool_devices(problem, cat)
    if states_network(problem) or not whole_machines(devices):
        return None
    try:
        return built_in_link(cat, devices)
    except NoSharedPort:
        if one_machine(problem, cat):
            return None  # nothing to join: no network needed
        raise


def rule_network(problem: Problem, cat: Catalog) -> AssumedLink | None:
    """The link the rule gives `problem`'s pool whether or not the problem names one (a plan
    file's problem holds the assumed link as if it were named): None where segments or machine
    kinds name networks, a device is not a whole machine, or no port is shared."""
    devices = pool_devices(problem, cat)
    if problem.segments or any(m.network for m in problem.machines):
        return None
    if not whole_machines(devices):
        return None
    try:
        return built_in_link(cat, devices)
    except NoSharedPort:
        return None


def one_machine(problem: Problem, cat: Catalog) -> bool:
    """The pool is one machine at most: at most one device, or nothing bought, at most one
    owned and none of its devices rentable (a rent the catalog or the problem's market gives,
    under a procurement mode that allows it: rented machines join the owned one)."""
    c = problem.constraints
    if c.max_devices == 1:
        return True
    owned = sum(o.count for o in c.inventory)
    if c.capex_usd != 0 or owned > 1:
        return False
    return not any(
        mode != "buy"
        for d in pool_devices(problem, cat)
        for mode in available_modes(problem, d, instances=cat.instances_of(d.id))
    )
