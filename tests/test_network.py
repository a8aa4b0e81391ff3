"""Network gear between hosts: ports and switches in the bill of materials, priced, powered and
racked, in the model's objective and recounted by the verifier."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from planner.catalog import load_catalog
from planner.errors import InternalError
from planner.estimator.network import ports_per_host, switches_for
from planner.schema.problem import Problem
from planner.solve import solve_problem
from planner.verify import verify

# Llama 3.1 70B in 4-bit needs four 16 GB cards; one card per desktop (allowed_hosts) and no
# tensor parallelism over Ethernet make it a four-stage pipeline over four desktops joined by
# 100 GbE.
DOC: dict[str, Any] = {
    "name": "four-desktops",
    "workloads": [
        {
            "name": "chat",
            "kind": "inference",
            "model": "llama-3.1-70b",
            "weights": "q4_k_m",
            "kv": "q8_0",
            "context_tokens": 4096,
            "prompt_tokens": 512,
            "concurrency": 8,
            "max_ms_per_token": 250,
        }
    ],
    "constraints": {
        "allowed_devices": ["rtx-5060-ti-16gb"],
        "network": "eth-100g",
        "max_tensor_parallel": 1,
        "max_stages": 8,
        "allowed_hosts": ["desktop-1"],
    },
    "horizon": {"lifetime_years": 3, "utilization": 0.3, "maintenance_per_year": 0},
    "objective": {"goal": "min_cost"},
}


def test_four_hosts_on_100gbe_carry_ports_and_a_switch() -> None:
    problem = Problem.model_validate(DOC)
    plan = solve_problem(problem, time_limit=30)
    assert plan.status == "OPTIMAL"
    assert [(n.type, n.count) for n in plan.nodes] == [("desktop-1", 4)]
    net = plan.network
    assert net is not None and net.link == "eth-100g"
    # Catalog eth-100g: $1,200 a port, one port per desktop (desktop-1 lists no 100 GbE NIC);
    # its switch, a MikroTik CRS804-DDQ, has 16 ports at 100 GbE, costs $1,295 and draws 123 W.
    assert (net.ports, net.unit_price_usd) == (4, 1200)
    assert (net.switch, net.switches, net.switch_price_usd) == ("MikroTik CRS804-DDQ", 1, 1295)
    assert net.total_usd == 4 * 1200 + 1295
    assert (net.power_w, net.rack_units) == (123, 1)
    # In capex with the devices and hosts; the switch draws 123 W all 26,280 h at PUE 1.3 and
    # $0.12/kWh: $5,043.
    devices_and_hosts = sum(x.total_usd for x in plan.devices) + sum(
        n.total_usd for n in plan.nodes
    )
    assert plan.capex_usd == pytest.approx(devices_and_hosts + 6_095)
    assert net.energy_usd == pytest.approx(123 * 26_280 * 1.3 * 0.12 / 1000)
    assert plan.rack_units == 4 * 4 + 1  # a desktop on a rack shelf takes 4 U; the switch 1
    # Power at load: devices, hosts and the switch.
    hosts_w = 4 * load_catalog().node("desktop-1").power_overhead_w
    assert plan.power_w == pytest.approx(sum(w.power_w for w in plan.workloads) + hosts_w + 123)
    # The solver's objective counted the gear: the plan's total is its proved optimum.
    assert plan.objective == pytest.approx(plan.tco_usd, rel=1e-6)


def test_the_verifier_recounts_the_gear() -> None:
    problem = Problem.model_validate(DOC)
    plan = solve_problem(problem, time_limit=30)
    assert plan.network is not None
    cat = load_catalog()
    for broken in (
        None,
        dataclasses.replace(plan.network, switches=0),
        dataclasses.replace(plan.network, ports=3),
        dataclasses.replace(plan.network, power_w=0.0),
    ):
        with pytest.raises(InternalError, match="network"):
            verify(dataclasses.replace(plan, network=broken), problem, cat)


def test_one_host_buys_no_network_gear() -> None:
    doc = {**DOC, "constraints": {**DOC["constraints"], "allowed_devices": ["h100-sxm"]}}
    del doc["constraints"]["allowed_hosts"]
    doc["workloads"] = [{**DOC["workloads"][0], "weights": "fp8", "kv": "fp8"}]
    doc["constraints"]["max_tensor_parallel"] = 8
    plan = solve_problem(Problem.model_validate(doc), time_limit=30)
    assert plan.status == "OPTIMAL" and sum(n.count for n in plan.nodes) == 1
    assert plan.network is None


def test_switch_count_and_ports_per_host() -> None:
    # One switch while the ports fit it; past that a leaf-spine fabric: 17 ports on 16-port
    # switches need ceil(17 / 8) = 3 leaves and ceil(3 / 2) = 2 spines.
    assert [switches_for(p, 16) for p in (0, 1, 16, 17, 64)] == [0, 1, 1, 5, 12]
    cat = load_catalog()
    # An HGX H100 host lists 8 NDR NICs; on another link a host gets one port.
    assert ports_per_host(cat.node("hgx-h100-8"), "ib-ndr") == 8
    assert ports_per_host(cat.node("hgx-h100-8"), "eth-100g") == 1
