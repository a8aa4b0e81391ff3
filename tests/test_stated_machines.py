"""Machines a problem states (`machines`, named by `constraints.inventory[].machine`): owned
devices sit in them instead of the catalog's host for the device. Their slots bound the
tensor-parallel groups inside one machine, their link carries those groups, their power joins
the plan's, the plan's host lines name them, and the verifier recounts them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.estimator.hosts import host_options, tp_limit, with_machines
from planner.load import load_problem, parse_problem
from planner.plan.io import dumps_plan, plan_document, plan_from_data
from planner.schema.problem import Problem
from planner.schema.yaml_io import Located
from planner.solve import solve_problem
from planner.verify_plan import plan_failures

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"
LEFTOVERS = PROBLEMS / "leftovers-pool.yaml"


def _doc(path: Path = LEFTOVERS) -> dict[str, Any]:
    return dict(yaml.safe_load(path.read_text()))


def _problem(doc: dict[str, Any], sets: list[str] | None = None) -> Problem:
    return parse_problem(Located(copy.deepcopy(doc), {}, "test.yaml"), sets or [])


def test_the_leftovers_sit_one_per_stated_machine() -> None:
    problem = load_problem(LEFTOVERS)
    plan = solve_problem(problem, workers=1, seed=0, time_limit=30)
    assert plan.status == "OPTIMAL"
    lines = {n.hosts: n for n in plan.nodes}
    at_work = {x.type: x.owned for x in plan.devices}
    for dev, line in lines.items():
        assert line.type == "lab-server"
        # One device per machine: as many machines as devices held.
        assert line.count == at_work[dev]
    # Every machine's 250 W joins the power at load: the plan's power is the replicas' devices
    # plus 250 W per machine.
    devices_w = sum(w.power_w for w in plan.workloads)
    machines = sum(n.count for n in plan.nodes)
    assert plan.power_w == pytest.approx(devices_w + 250.0 * machines, rel=1e-6)


def test_stated_machines_are_the_hosts_of_their_devices() -> None:
    cat = load_catalog()
    problem = load_problem(LEFTOVERS)
    l4 = cat.accelerator("l4")
    (host,) = host_options(cat, l4, problem)
    assert host.id == "lab-server" and host.slots == 1 and host.power_overhead_w == 250
    assert host.price_usd == 0  # owned: the pool is not bought
    # Without stated machines, the catalog's host (an 8-slot server) holds them.
    plain = _doc()
    del plain["machines"]
    for entry in plain["constraints"]["inventory"]:
        del entry["machine"]
    (default,) = host_options(cat, l4, _problem(plain))
    assert default.slots > 1
    # The catalog a plan is checked against names the machines; without any it is the same.
    assert with_machines(cat, problem).node("lab-server").slots == 1
    assert with_machines(cat, _problem(plain)) is cat


def test_a_bridged_pair_holds_a_group_a_single_card_machine_does_not() -> None:
    cat = load_catalog()
    doc = {
        "name": "bridged",
        "workloads": [
            {
                "name": "chat",
                "kind": "inference",
                "model": "llama-3.1-8b",
                "weights": "fp16",
                "kv": "fp16",
                "context_tokens": 4096,
                "concurrency": 8,
            }
        ],
        "machines": [
            {"id": "bridged", "slots": 2, "link": "nvlink-bridge-ampere", "power_w": 200},
            {"id": "single", "slots": 1, "power_w": 150},
        ],
        "constraints": {
            "inventory": [
                {"device": "rtx-3090", "count": 2, "machine": "bridged"},
                {"device": "rtx-4090", "count": 2, "machine": "single"},
            ],
            "capex_usd": 0,
        },
        "objective": {"goal": "max_throughput"},
    }
    problem = _problem(doc)
    c = problem.constraints
    (pair,) = host_options(cat, cat.accelerator("rtx-3090"), problem)
    (one,) = host_options(cat, cat.accelerator("rtx-4090"), problem)
    assert tp_limit(cat.accelerator("rtx-3090"), pair, c) == 2  # over the bridge
    assert tp_limit(cat.accelerator("rtx-4090"), one, c) == 1
    plan = solve_problem(problem, workers=1, seed=0, time_limit=30)
    assert plan.status == "OPTIMAL"
    # A group of the one-card machines' 4090s spans machines; the 3090s' stays in its machine.
    for w in plan.workloads:
        for s in w.stages:
            if s.device == "rtx-4090":
                assert s.tp == 1 or s.across_machines
            else:
                assert s.tp <= 2 and not s.across_machines


def test_devices_in_stated_machines_are_not_bought() -> None:
    """Without a machine price the pool is what is owned: with money to spend, more L4s are
    not bought into free machines."""
    doc = _doc()
    doc["constraints"] = {
        "allowed_devices": ["l4"],
        "inventory": [{"device": "l4", "count": 2, "machine": "lab-server"}],
        "capex_usd": 1_000_000,
        "network": "lab-1g",
    }
    plan = solve_problem(_problem(doc), workers=1, seed=0, time_limit=30)
    assert all(x.bought == 0 for x in plan.devices)


SPARKS_ON_A_CABLE: dict[str, Any] = {
    "name": "sparks-and-lan",
    "workloads": [
        {
            "name": "chat",
            "model": "llama-3.1-70b",
            "weights": "bf16",
            "kv": "bf16",
            "context_tokens": 4096,
            "prompt_tokens": 512,
            "output_tokens": 500,
            "concurrency": 1,
        }
    ],
    "links": [{"id": "home-lan", "bandwidth_gbit_s": 1, "latency_ms": "0.5 ms"}],
    "machines": [
        {"id": "spark", "slots": 1, "link": "pcie5", "power_w": 0, "network": "roce-200g"}
    ],
    "constraints": {
        "allowed_devices": ["dgx-spark"],
        "inventory": [{"device": "dgx-spark", "count": 2, "machine": "spark"}],
        "capex_usd": 0,
        "network": "home-lan",
    },
    "objective": {"goal": "max_throughput"},
}


def test_machines_of_a_kind_may_have_their_own_network() -> None:
    """Two Sparks joined by their 200 Gb/s cable while the rest of the house is on a 1 Gb/s
    router: their group all-reduces over the cable (the plan names it among its links, and the
    verifier holds the plan to it); over the router alone the same group is slower."""
    cat = load_catalog()
    cable = _problem(SPARKS_ON_A_CABLE)
    plan = solve_problem(cable, workers=1, seed=0, time_limit=30)
    (stage,) = plan.workloads[0].stages
    assert stage.across_machines and "roce-200g" in plan.links and "home-lan" in plan.links
    lan = copy.deepcopy(SPARKS_ON_A_CABLE)
    del lan["machines"][0]["network"]
    slower = solve_problem(_problem(lan), workers=1, seed=0, time_limit=30)
    assert plan.objective is not None and slower.objective is not None
    assert slower.objective < plan.objective
    doc = json.loads(dumps_plan(plan_document(plan, cable, cat)))
    doc["links"].remove("roce-200g")
    found = plan_failures(plan_from_data(doc, "p"), cat)
    assert any("roce-200g" in f for f in found), found


def _rename(doc: dict[str, Any], name: str) -> None:
    doc["machines"][0]["id"] = name
    for entry in doc["constraints"]["inventory"]:
        entry["machine"] = name


def test_a_priced_machine_tops_up_the_pool() -> None:
    """With a price per machine, devices of its kind are bought into new machines at that
    price: each bought device (one per machine) brings one machine's price into capex."""
    doc = _doc()
    doc["machines"][0]["price_usd"] = 3000
    doc["constraints"]["capex_usd"] = 20_000
    plan = solve_problem(_problem(doc), workers=1, seed=0, time_limit=30)
    assert plan.status == "OPTIMAL"
    bought = {x.type: x.bought for x in plan.devices}
    assert sum(bought.values()) > 0  # the cap leaves room, and more machines serve more
    for line in plan.nodes:
        assert line.type == "lab-server" and line.unit_price_usd == 3000
        assert line.total_usd == pytest.approx(3000 * bought[line.hosts])
    owned_only = solve_problem(_problem(_doc()), workers=1, seed=0, time_limit=30)
    assert plan.objective is not None and owned_only.objective is not None
    assert plan.objective >= owned_only.objective


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d["constraints"]["inventory"][0].update(machine="lab-srv"), "unknown machine"),
        (lambda d: _rename(d, "desktop-1"), "is a catalog node"),
        (lambda d: d["machines"][0].update(link="pcie-4"), "unknown link `pcie-4`"),
        (lambda d: d["machines"][0].update(link="eth-10g"), "is a network between machines"),
        (lambda d: d["machines"][0].update(network="pcie4"), "is no link between machines"),
        (lambda d: d["machines"].append(copy.deepcopy(d["machines"][0])), "two machines"),
        (lambda d: d["machines"][0].pop("power_w"), "power_w"),
    ],
)
def test_bad_machines_are_named(edit: Any, words: str, tmp_path: Path) -> None:
    doc = _doc()
    edit(doc)
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as e:
        load_problem(path)
    assert words in str(e.value)
    assert "pool.yaml" in str(e.value)


def test_the_verifier_recounts_the_machines() -> None:
    cat = load_catalog()
    problem = load_problem(LEFTOVERS)
    plan = solve_problem(problem, workers=1, seed=0, time_limit=30)
    doc = json.loads(dumps_plan(plan_document(plan, problem, cat)))
    assert plan_failures(plan_from_data(copy.deepcopy(doc), "p"), cat) == []
    fewer = copy.deepcopy(doc)
    fewer["nodes"][0]["count"] -= 1
    found = plan_failures(plan_from_data(fewer, "p"), cat)
    assert any("nodes.0" in f for f in found), found
    other = copy.deepcopy(doc)
    other["nodes"][0]["type"] = "pcie-server-8"
    found = plan_failures(plan_from_data(other, "p"), cat)
    assert any("cannot host" in f for f in found), found
