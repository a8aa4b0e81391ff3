"""Which links a message between two machines crosses: the route of a pipeline hop, or of a
tensor-parallel group's all-reduces across machines.

A problem places its machines on networks (docs/networks.md): a machine kind may sit on a
`segments` entry (a home LAN, a lab) whose `link` joins its machines, hang off it by its own
`attach` link (Wi-Fi), join others of its kind over its `network`, and a link stated `between`
two machine kinds or two segments joins those directly. Between machines of kinds A and B the
most specific statement wins:

1. a link `between: [A, B]` (a cable between the two): that link alone;
2. A and B the same kind with a `network`: that link alone;
3. otherwise each end's `attach` (if any), and between them: the shared segment's `link` (or
   `constraints.network` when neither sits on a segment); for two segments, the first
   segment's link, the link `between` the two segments (else `constraints.network`) and the
   second segment's link; for a machine on no segment and one on a segment,
   `constraints.network` and the segment's link.

A message crossing several links pays every link's one-way latency and the slowest link's
bandwidth (Hockney's latency-bandwidth model of a point-to-point message, R. Hockney, "The
communication challenge for MPP", Parallel Computing 20 (1994), taken along a path: each
switch stores and forwards a small message, so the latencies add, and a larger one streams
through the links in frames at the pace of the narrowest). A route of one link costs exactly
what that link costs alone (planner.estimator.comm.p2p_seconds).

Two stages inside one machine (the GPUs of one workstation or server) hop over the machine's
own link, not a network: `machine_link` gives it where every machine the device may sit in
holds all the replica's devices of its type together (a multiple of their count in slots), the
catalog node's `intra_node_link` or a stated machine's `link` (NCCL sends a pipeline's
activations between two GPUs of one node by its P2P transport, NVLink or PCIe peer to peer,
or through host shared memory, and over the network only between nodes: NCCL documentation,
NCCL_P2P_LEVEL and NCCL_SHM_DISABLE).

A route crosses each network once. A link id among the shared networks (a segment's `link`,
a link `between` two segments, `constraints.network`) names one network, so a rule that names
it twice names it once: a segment whose `link` is also `constraints.network` gives `home-lan`,
not `home-lan > home-lan`; two segments on one link are joined by that link alone (where a
link comes back, the links since its first crossing are a loop the message does not take and
are cut: loop erasure, `simple_path`). An `attach` is each machine's own leg onto its network
(its Wi-Fi radio to the access point, its port), so two machines that each hang off a segment
by Wi-Fi cross two legs, `wifi-6 > home-lan > wifi-6` (a frame between two Wi-Fi clients goes
over the air twice, client to access point and access point to client); an `attach` that is
the network it joins (a machine on `home` attached by `home-lan`) adds no leg.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.catalog import Catalog
from planner.estimator.comm import p2p_seconds
from planner.estimator.economics import available_modes
from planner.estimator.hosts import host_options
from planner.estimator.network import network_link, stated_link
from planner.schema.catalog import Accelerator, Link
from planner.schema.problem import Problem, StatedMachine


@dataclass(frozen=True)
class Route:
    """The links a message crosses between two machines, in order; `inside`: between two
    devices of one machine, over its own link (machine_link)."""

    links: tuple[Link, ...]
    inside: bool = False

    @property
    def id(self) -> str:
        """The link ids in order, e.g. `wifi > home-lan > uplink > lab-10g`."""
        return " > ".join(lk.id for lk in self.links)

    @property
    def latency_s(self) -> float:
        """Every link's one-way latency, seconds."""
        return sum(lk.latency_us for lk in self.links) * 1e-6

    @property
    def bandwidth_bytes_s(self) -> float:
        """The slowest link's bandwidth per direction, bytes/s."""
        return min(lk.bandwidth_gb_s for lk in self.links) * 1e9

    def seconds(self, nbytes: float | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """One message of `nbytes` bytes along the route: latencies + bytes / slowest bandwidth."""
        return p2p_seconds(nbytes, self.bandwidth_bytes_s, self.latency_s)

    def as_link(self) -> Link:
        """The route as one link (a tensor-parallel group's all-reduces over it): the link
        itself for one link, else the route's latency and bandwidth, with no measured
        all-reduce (a measurement on one link does not hold for a path)."""
        if len(self.links) == 1:
            return self.links[0]
        slow = min(self.links, key=lambda lk: lk.bandwidth_gb_s)
        return Link(
            id="--".join(lk.id for lk in self.links),
            name=self.id,
            kind=slow.kind,
            scope="inter-node",
            bandwidth_gb_s=slow.bandwidth_gb_s,
            latency_us=sum(lk.latency_us for lk in self.links),
            sources={"spec": "problem-file"},
            notes="A path of links (planner.estimator.routes).",
        )


def route(problem: Problem, cat: Catalog, a: str, b: str) -> Route:
    """The route between a machine holding device `a` and another holding device `b` (device
    ids; owned devices sit in their stated machine kind, others on constraints.network)."""
    return kind_route(problem, cat, problem.machine_of(a), problem.machine_of(b))


def kind_route(
    problem: Problem, cat: Catalog, ka: StatedMachine | None, kb: StatedMachine | None
) -> Route:
    """The route between a machine of kind `ka` and another of kind `kb` (None: a catalog
    host on constraints.network), by the module's rule."""
    if ka is not None and kb is not None and ka.id != kb.id:
        for s in problem.links:
            if s.between is not None and set(s.between) == {ka.id, kb.id}:
                return Route((stated_link(s),))
    if ka is not None and kb is not None and ka.id == kb.id and ka.network is not None:
        return Route((network_link(problem, cat, ka.network),))
    sa = ka.segment if ka is not None else None
    sb = kb.segment if kb is not None else None
    path = [_lan(problem, cat, sa)]
    if sa != sb:
        via = next(
            (s for s in problem.links if s.between is not None and set(s.between) == {sa, sb}),
            None,
        )
        if via is not None:
            path.append(stated_link(via))
        elif sa is not None and sb is not None:
            path.append(network_link(problem, cat))
        path.append(_lan(problem, cat, sb))
    mid = simple_path(path)  # starts on a's network and ends on b's, each link once
    head = _leg(problem, cat, ka, mid[0])
    tail = _leg(problem, cat, kb, mid[-1])
    return Route((*head, *mid, *tail))


def _leg(problem: Problem, cat: Catalog, k: StatedMachine | None, joins: Link) -> tuple[Link, ...]:
    """A machine's own leg onto the network it joins (its `attach`): none when it states none
    or its `attach` is that network itself."""
    if k is None or k.attach is None or k.attach == joins.id:
        return ()
    return (network_link(problem, cat, k.attach),)


def simple_path(links: Sequence[Link]) -> tuple[Link, ...]:
    """`links` with every loop cut: where a link id comes back, the links from its first
    crossing up to the repeat go and the link stays once (`a > b > a > c` is `a > c`), so the
    route crosses each link once and pays its latency once."""
    out: list[Link] = []
    for lk in links:
        seen = [x.id for x in out]
        if lk.id in seen:
            del out[seen.index(lk.id) + 1 :]
        else:
            out.append(lk)
    return tuple(out)


def _lan(problem: Problem, cat: Catalog, segment: str | None) -> Link:
    """The link joining machines on `segment` (None: constraints.network)."""
    if segment is None:
        return network_link(problem, cat)
    return network_link(problem, cat, next(g.link for g in problem.segments if g.id == segment))


# machine_slots by the problem's and catalog's identity and the device (design enumeration and
# every plan's stages ask it once per pipeline; the objects are kept to check the identity).
_SLOTS: dict[tuple[int, int, str], tuple[Problem, Catalog, int]] = {}


def machine_slots(problem: Problem, cat: Catalog, device: str) -> int:
    """The group sizes one machine of `device` always holds whole, as the greatest common
    divisor of the slots of every host it may sit in (hosts.host_options: the stated machine
    of owned devices, else the allowed catalog nodes): a replica whose `n` devices of this
    type divide it sits in one machine whichever host the plan picks, since the plan fills
    ceil(fleet / slots) machines of one kind per device type with whole groups. 0 where the
    device may be rented (a provider's machines are not the catalog's hosts) or has no host."""
    key = (id(problem), id(cat), device)
    hit = _SLOTS.get(key)
    if hit is not None and hit[0] is problem and hit[1] is cat:
        return hit[2]
    acc = cat.accelerators.get(device)
    slots = 0
    if acc is not None and all(
        m == "buy" for m in available_modes(problem, acc, instances=cat.instances_of(device))
    ):
        hosts = host_options(cat, acc, problem)
        slots = math.gcd(*(n.slots for n in hosts)) if hosts else 0
    if len(_SLOTS) > 1024:
        _SLOTS.clear()
    _SLOTS[key] = (problem, cat, slots)
    return slots


def machine_link(problem: Problem, cat: Catalog, device: str, count: int) -> Link | None:
    """The link between two of `count` devices of `device` that share one machine (count
    divides machine_slots), or None where they may not: the internal link of the machine they
    sit in (a stated machine's `link`, a catalog node's `intra_node_link`), the slowest of the
    hosts the device may take (the plan picks one of them after the designs are timed)."""
    slots = machine_slots(problem, cat, device)
    if count < 2 or slots == 0 or slots % count:
        return None
    acc = cat.accelerator(device)
    links = [
        _card_link(cat, acc, network_link(problem, cat, n.intra_node_link))
        for n in host_options(cat, acc, problem)
    ]
    return min(links, key=lambda lk: (lk.bandwidth_gb_s, -lk.latency_us))


def _card_link(cat: Catalog, acc: Accelerator, link: Link) -> Link:
    """A machine's PCIe link as two of `acc` use it: at most the card's own PCIe generation
    (a PCIe 4.0 card in a PCIe 5.0 workstation moves data at 4.0's rate, as
    hosts.in_machine caps a tensor-parallel group inside a machine), over the card's lanes
    (an x8 card moves half an x16 link's bytes, as devices.py's host link does; the catalog's
    PCIe links are x16)."""
    if link.kind != "pcie":
        return link
    ic = acc.interconnect
    own = cat.links.get(f"pcie{ic.pcie_gen}") if ic.pcie_gen is not None else None
    out = own if own is not None and own.bandwidth_gb_s < link.bandwidth_gb_s else link
    lanes = ic.pcie_lanes or 16
    if lanes >= 16:
        return out
    return out.model_copy(update={"bandwidth_gb_s": out.bandwidth_gb_s * lanes / 16})


def hop_routes(
    problem: Problem, cat: Catalog, devices: Sequence[str], tps: Sequence[int]
) -> list[Route]:
    """The route of each pipeline hop of stages holding `devices` in order, groups of `tps`
    devices each: stage i sends its activations to stage i + 1, the last its token back to the
    first (S hops round the loop, planner.estimator.replica); none for one stage. A hop
    between two stages of one device type whose replica's devices of that type share a
    machine (machine_link) crosses the machine's own link; every other hop the route between
    the two machines."""
    S = len(devices)
    if S < 2:
        return []
    count: dict[str, int] = {}
    for d, k in zip(devices, tps, strict=True):
        count[d] = count.get(d, 0) + k
    inner = {d: machine_link(problem, cat, d, n) for d, n in count.items()}
    out = []
    for i in range(S):
        a, b = devices[i], devices[(i + 1) % S]
        lk = inner[a] if a == b else None
        out.append(Route((lk,), inside=True) if lk is not None else route(problem, cat, a, b))
    return out


def group_link(problem: Problem, cat: Catalog, device: str) -> Link:
    """The link a tensor-parallel group across machines of `device` all-reduces over: the
    route between two machines of the kind the device sits in (its `network`, else its
    segment's link with its `attach` at both ends, else constraints.network), as one link."""
    kind = problem.machine_of(device)
    return kind_route(problem, cat, kind, kind).as_link()


def group_route(problem: Problem, cat: Catalog, device: str) -> Route:
    """The links group_link's all-reduces cross, one by one (the plan lists each)."""
    kind = problem.machine_of(device)
    return kind_route(problem, cat, kind, kind)


def route_link_ids(
    problem: Problem,
    cat: Catalog,
    devices: Sequence[str],
    tps: Sequence[int],
    across: Sequence[bool],
    hops: bool,
) -> list[str]:
    """Ids of the links a replica of stages holding `devices` (groups of `tps`) uses beyond its
    hosts: each group across machines (`across`) all-reduces over its route's links, and with
    `hops` (a serving pipeline) each hop crosses its route's; in order, once each."""
    ids = [
        lk.id
        for d, a in zip(devices, across, strict=True)
        if a
        for lk in group_route(problem, cat, d).links
    ]
    if hops:
        ids += [lk.id for r in hop_routes(problem, cat, devices, tps) for lk in r.links]
    return list(dict.fromkeys(ids))
