"""Hosts as a choice: which hosts a device may sit in, the tensor-parallel groups one host
carries, and what a fleet of devices buys in it (whole baseboards and kits, or cards one by one).

A plan puts every on-premises device of one type in hosts of one type (the optimizer picks it);
the verifier and the plan builder recount the hosts from these rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from planner.catalog import Catalog
from planner.schema.catalog import Accelerator, Node
from planner.schema.problem import Constraints, Problem, StatedMachine


def machine_node(mc: StatedMachine, devices: Iterable[str]) -> Node:
    """A machine the problem states (`machines`), as the catalog's nodes are written: it holds
    `devices` (the owned types that sit in it) in its slots over its link and draws its stated
    power beyond them. The machines owned cost nothing more; one more of the kind costs its
    `price_usd` where it states one (without one, none is bought: economics.device_prices)."""
    return Node(
        id=mc.id,
        name=mc.name or f"{mc.id} (stated machine, {mc.slots} slot{'s' * (mc.slots > 1)})",
        kind="standalone" if mc.slots == 1 else "workstation",
        slots=mc.slots,
        accepts_devices=sorted(devices),
        intra_node_link=mc.link,
        price_usd=mc.price_usd or 0.0,
        price_date="problem-file",
        power_overhead_w=mc.power_w,
        rack_units=mc.rack_units,
        sources={"spec": "problem-file"},
        notes="Stated by the problem file.",
    )


def in_machine(d: Accelerator, mc: StatedMachine) -> Accelerator:
    """`d` as the cards of stated machine `mc` are joined: over their own scale-up link where
    the machine's link is it (a bridge, NVLink), else over the machine's PCIe generation (at
    most the card's own): the link a tensor-parallel group inside the machine all-reduces
    over (planner.estimator.devices reads the interconnect). A machine of one holds no group.
    Applied where nothing is rented (with_machines): rented groups of the device would share
    the design's figures."""
    ic = d.interconnect
    if mc.slots == 1 or mc.link == ic.scale_up or not mc.link.startswith("pcie"):
        return d
    gen = int(mc.link.removeprefix("pcie"))
    over_pcie = ic.model_copy(
        update={
            "scale_up": None,
            "scale_up_gb_s": None,
            "all_to_all": False,
            "pcie_gen": min(ic.pcie_gen or gen, gen),
        }
    )
    return d.model_copy(update={"interconnect": over_pcie})


# The catalogs with a problem's machines laid over, by the base catalog's identity and the
# machines and devices stated (a sweep solves many variants of one problem).
_WITH_MACHINES: dict[tuple[int, tuple[object, ...]], tuple[Catalog, Catalog]] = {}


def with_machines(cat: Catalog, problem: Problem) -> Catalog:
    """`cat` with the problem's stated machines among its nodes (the same catalog when the
    problem states none), so the plan's host lines name them like any node."""
    if not problem.machines:
        return cat
    held = {mc.id: tuple(problem.devices_in(mc.id)) for mc in problem.machines}
    key = (id(cat), tuple((mc, held[mc.id]) for mc in problem.machines))
    hit = _WITH_MACHINES.get(key)
    if hit is not None and hit[0] is cat:
        return hit[1]
    # Laying them over a catalog that has them already changes nothing (the loader refuses a
    # machine named like a catalog node).
    nodes = {**cat.nodes, **{mc.id: machine_node(mc, held[mc.id]) for mc in problem.machines}}
    accelerators = dict(cat.accelerators)
    # A design's figures hold wherever its replicas run: where the problem may also rent, a
    # rented group of the same device runs on the provider's fabric, so the card keeps its own.
    if all(m == "buy" for m in problem.horizon.modes):
        for mc in problem.machines:
            for dev in held[mc.id]:
                if dev in accelerators:
                    accelerators[dev] = in_machine(accelerators[dev], mc)
    out = dataclasses.replace(cat, nodes=nodes, accelerators=accelerators)
    if len(_WITH_MACHINES) > 64:
        _WITH_MACHINES.clear()
    _WITH_MACHINES[key] = (cat, out)
    return out


def host_options(cat: Catalog, d: Accelerator, problem: Problem) -> list[Node]:
    """Every node that can host `d` among `constraints.allowed_hosts`, cheapest per slot first;
    only the machine they sit in when the problem owns some `d` (an inventory names devices,
    and they come in the hosts they sit in: its stated machine, else the catalog's host)."""
    if any(o.device == d.id for o in problem.constraints.inventory):
        mc = problem.machine_of(d.id)
        if mc is not None:
            return [with_machines(cat, problem).node(mc.id)]
        host = cat.host_for(d)
        return [host] if host else []
    allowed = problem.constraints.allowed_hosts
    return [n for n in cat.nodes_for(d) if allowed is None or n.id in allowed]


def placeable(cat: Catalog, d: Accelerator, problem: Problem, modes: Iterable[str]) -> bool:
    """Whether `d` has somewhere to run under `modes` (the problem's modes it has a price
    for): a host among `constraints.allowed_hosts` on premises, or a provider's machine."""
    if problem.machine_of(d.id) is not None:
        return True  # owned, in a machine the problem states
    if not cat.nodes_for(d):
        return False
    return bool(host_options(cat, d, problem)) or any(m != "buy" for m in modes)


def carries_scale_up(d: Accelerator, node: Node) -> bool:
    """Whether `node` joins its `d` cards over their own scale-up link: its intra-node link is
    that link (HGX, OAM, an NVLink-bridged workstation), or it ships the bridge for it."""
    link = d.interconnect.scale_up
    return link is not None and (node.intra_node_link == link or link in node.scale_up_bridges)


def tp_limit(d: Accelerator, node: Node, c: Constraints) -> int:
    """The largest tensor-parallel group of `d` one `node` holds: the scale-up domain where the
    host carries the scale-up link, every slot over PCIe where the problem allows it, else 1;
    never more than the host's slots or `max_tensor_parallel`."""
    limit = d.interconnect.domain_size if carries_scale_up(d, node) else 1
    if c.tensor_parallel_over_pcie:
        limit = max(limit, node.slots)
    return min(limit, node.slots, c.max_tensor_parallel)


def purchase_unit(node: Node) -> int:
    """Devices bought at a time in `node`: its slots when it is sold whole, else one."""
    return node.slots if node.sold_whole else 1


def devices_bought(node: Node, needed: int) -> int:
    """Devices bought to have `needed` new ones in `node`: whole units where it is sold whole
    (4 MI300X buy an 8-OAM platform's 8), else exactly `needed`."""
    unit = purchase_unit(node)
    return -(-max(0, needed) // unit) * unit


def hosts_for(node: Node, devices: int) -> int:
    """The fewest `node` hosts that hold `devices`."""
    return -(-devices // node.slots)


def derates(d: Accelerator, problem: Problem) -> bool:
    """Whether `d` runs slower sustained in a multi-card chassis: consumer cards, built for one
    card in an open desktop case, throttle when packed (`horizon.consumer_derating`)."""
    return d.device_class == "consumer" and problem.horizon.consumer_derating > 0


def sustained(d: Accelerator, problem: Problem) -> Accelerator:
    """`d` as it runs sustained in a multi-card chassis: its tensor throughput and memory
    bandwidth less `horizon.consumer_derating` (throttled clocks slow both; its power at load is
    kept, the throttle holds it at its limit)."""
    keep = 1.0 - problem.horizon.consumer_derating
    flops = {k: v * keep for k, v in d.dense_tflops.model_dump().items() if v is not None}
    mem = d.memory
    memory = mem.model_copy(
        update={
            "bandwidth_gb_s": mem.bandwidth_gb_s * keep,
            "achievable_bandwidth_gb_s": (
                mem.achievable_bandwidth_gb_s * keep if mem.achievable_bandwidth_gb_s else None
            ),
        }
    )
    compute = d.dense_tflops.model_copy(update=flops)
    return d.model_copy(update={"dense_tflops": compute, "memory": memory})


def holds_group(d: Accelerator, node: Node, problem: Problem, tp: int, dense: bool) -> bool:
    """Whether one `node` holds a tensor-parallel group of `tp` `d` running at the speed a
    design assumed: derated (`dense`) in a multi-card chassis, at full speed in a one-card
    host, where `d` derates; any host otherwise."""
    if tp_limit(d, node, problem.constraints) < tp:
        return False
    return not derates(d, problem) or (node.slots > 1) == dense


def holding_hosts(
    cat: Catalog, problem: Problem, d: Accelerator, tp: int, dense: bool = False
) -> tuple[str, ...]:
    """The host options of `d` that hold its tensor-parallel groups of `tp` at the speed the
    design assumed (`dense`: derated): designs that need the same hosts compete in pruning;
    one that needs fewer may be the only one that fits."""
    return tuple(
        n.id for n in host_options(cat, d, problem) if holds_group(d, n, problem, tp, dense)
    )


def design_hosts(
    cat: Catalog, problem: Problem, stages: Iterable[tuple[str, int, bool]]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Per device type of a design's (device, tensor-parallel degree, derated) stages, the
    hosts that hold its largest group."""
    most: dict[tuple[str, bool], int] = {}
    for dev, tp, dense in stages:
        most[(dev, dense)] = max(most.get((dev, dense), 1), tp)
    return tuple(
        (dev, holding_hosts(cat, problem, cat.accelerator(dev), tp, dense))
        for (dev, dense), tp in sorted(most.items())
    )
