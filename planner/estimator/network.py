"""Network gear between hosts: the ports and switches a fleet of more than one host on premises
buys to join its hosts over the problem's network link.

Conventions (the plan builder, the verifier and the CP-SAT model all count this way):
- A fleet with one host needs no network gear. With two or more hosts, each host bought gets
  its ports on the link: the NICs its catalog entry lists on that link, else one. Owned devices
  come with their hosts and their network, so owned hosts buy no ports.
- A port costs the link's `price_usd_per_port` (NIC or its share, optics or cable).
- The ports bought are joined by the link's switch model (`switch` in catalog links.yaml): one
  switch while they fit its ports; beyond that a non-blocking two-tier leaf-spine fabric, each
  leaf with half its ports down to hosts and half up to the spines, each spine taking as many
  uplinks as it has ports: leaves = ceil(ports / (radix / 2)), spines = ceil(leaves / 2).
  A link without a switch model (Thunderbolt cables) joins hosts point to point: ports only.
- Switches draw their power at all hours of the horizon, like hosts, and take rack space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.catalog import Catalog
from planner.schema.catalog import Link, Node, SwitchSpec
from planner.schema.problem import Problem, StatedLink


def stated_link(s: StatedLink) -> Link:
    """A link the problem states by its figures, as the catalog's links are written (Gb/s to
    GB/s, ms to us; no switch: the network is the user's, each port at its stated price)."""
    return Link(
        id=s.id,
        name=s.name or f"{s.id} ({s.bandwidth_gbit_s:g} Gb/s, {s.latency_ms:g} ms)",
        kind=s.kind,
        scope="inter-node",
        bandwidth_gb_s=s.bandwidth_gbit_s / 8,
        latency_us=s.latency_ms * 1e3,
        price_usd_per_port=s.price_usd_per_port,
        sources={"spec": "problem-file"},
        notes="Stated by the problem file.",
    )


def network_link(problem: Problem, cat: Catalog, name: str | None = None) -> Link:
    """The link between the problem's hosts (`constraints.network`), or the one `name`d: one
    the problem states under `links`, else the catalog's."""
    net = name or problem.constraints.network
    for s in problem.links:
        if s.id == net:
            return stated_link(s)
    return cat.link(net)


def ports_per_host(node: Node, link: str) -> int:
    """Ports a host gets on `link`: the NICs its catalog entry lists on that link, else one."""
    listed = sum(n.count for n in node.nics if n.link == link)
    return listed or 1


def switches_for(ports: int, radix: int) -> int:
    """Switches of `radix` ports joining `ports` host ports (module conventions)."""
    if ports <= 0:
        return 0
    if ports <= radix:
        return 1
    leaves = math.ceil(ports / (radix // 2))
    return leaves + math.ceil(leaves / 2)


@dataclass(frozen=True)
class NetworkGear:
    link: str
    ports: int
    port_usd: float
    switch: SwitchSpec | None
    switches: int

    @property
    def capex_usd(self) -> float:
        sw = self.switch.price_usd * self.switches if self.switch else 0.0
        return self.ports * self.port_usd + sw

    @property
    def power_w(self) -> float:
        return self.switch.power_w * self.switches if self.switch else 0.0

    @property
    def rack_units(self) -> int:
        return self.switch.rack_units * self.switches if self.switch else 0


def network_gear(link: Link, hosts: int, ports_bought: int) -> NetworkGear | None:
    """The gear for a fleet of `hosts` hosts on premises whose bought hosts have
    `ports_bought` ports on `link`; None when there is nothing to buy (one host, or no host
    bought)."""
    if hosts < 2 or ports_bought <= 0:
        return None
    sw = link.switch
    count = switches_for(ports_bought, sw.ports) if sw else 0
    return NetworkGear(link.id, ports_bought, link.price_usd_per_port or 0.0, sw, count)
