"""A pool of whole machines whose problem names no network is planned on the slowest built-in
wired port all its machines share (planner.estimator.built_in_link), the plan says so, and
where nothing can be inferred the problem file gets an error naming the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.estimator.built_in_link import NoSharedPort, built_in_link
from planner.estimator.network import network_link
from planner.load import parse_problem
from planner.schema.catalog import Accelerator
from planner.schema.yaml_io import Located
from planner.solve import solve_problem
from planner.verify import verify

# Four owned 64 GB Mac minis serving Llama 3.1 70B in 8-bit (about 75 GB of weights: more than
# one machine holds), one user at a time; no network named.
DOC: dict[str, Any] = {
    "name": "four-minis",
    "workloads": [
        {
            "name": "chat",
            "kind": "inference",
            "model": "llama-3.1-70b",
            "weights": "q8_0",
            "kv": "q8_0",
            "context_tokens": 4096,
            "prompt_tokens": 512,
            "output_tokens": 256,
            "concurrency": 1,
        }
    ],
    "constraints": {
        "allowed_devices": ["m4-pro-64gb"],
        "inventory": [{"device": "m4-pro-64gb", "count": 4}],
        "capex_usd": 0,
    },
    "horizon": {"lifetime_years": 3, "utilization": 0.3, "electricity_usd_per_kwh": 0.25},
    "objective": {"goal": "max_throughput"},
}


def _problem(devices: list[str], sets: list[str] | None = None) -> Any:
    doc = copy.deepcopy(DOC)
    doc["constraints"]["allowed_devices"] = devices
    doc["constraints"]["inventory"] = [{"device": d, "count": 2} for d in devices]
    return parse_problem(Located(doc, {}, "pool.yaml"), sets or [])


@pytest.mark.parametrize(
    ("devices", "link"),
    [
        # Apple, Mac mini (2024) tech specs: Gigabit Ethernet (10 GbE build to order) and three
        # Thunderbolt 5 ports; the slower shared port is the Gigabit Ethernet
        (["m4-pro-64gb"], "eth-1g"),
        # NVIDIA DGX Spark: a 10 GbE RJ-45 port and the 200 Gb/s ConnectX-7; not the QSFP cable
        (["dgx-spark"], "eth-10g"),
        # Framework Desktop: one 5 Gbit Ethernet port
        (["ryzen-ai-max-395-128gb"], "eth-5g"),
        # Mac Studio (10 GbE, Thunderbolt 5) with a Raspberry Pi 5 (Gigabit only): Ethernet is the
        # one kind both have, and BASE-T negotiates down to the Pi's 1 Gb/s
        (["m3-ultra-512gb", "raspberry-pi-5-8gb"], "eth-1g"),
        # M4 (Thunderbolt 4) and M4 Pro (Thunderbolt 5) minis: Gigabit Ethernet is the slowest
        (["m4-16gb", "m4-pro-64gb"], "eth-1g"),
    ],
)
def test_a_pool_without_a_link_gets_the_slowest_shared_built_in_port(
    devices: list[str], link: str
) -> None:
    problem = _problem(devices)
    assert problem.constraints.network == link
    assert "network" not in problem.constraints.model_fields_set  # assumed, not stated
    assert network_link(problem, load_catalog()).id == link


def test_the_plan_says_the_link_is_assumed_and_verifies() -> None:
    problem = _problem(["m4-pro-64gb"])
    plan = solve_problem(problem, time_limit=30)
    assert plan.status == "OPTIMAL"
    assert sum(n.count for n in plan.nodes) > 1  # 75 GB of weights span two minis or more
    assert any(n.startswith("link assumed: eth-1g (") for n in plan.notes), plan.notes
    verify(plan, problem, load_catalog())


def test_a_named_link_wins_and_no_assumption_is_noted() -> None:
    problem = _problem(["m4-pro-64gb"], ["constraints.network=thunderbolt5"])
    assert problem.constraints.network == "thunderbolt5"
    plan = solve_problem(problem, time_limit=30)
    assert not any("link assumed" in n for n in plan.notes)


def test_owned_machines_alone_need_no_allowed_list() -> None:
    """Four owned Mac minis, nothing to buy (capex 0) and nothing rented, no allowed_devices:
    the pool is the minis, so it is planned on their Gigabit Ethernet. The rule once counted
    every catalog device as the pool when allowed_devices was left out, found cards among
    them and left the default eth-100g, a port no Mac mini has, with no note."""
    doc = copy.deepcopy(DOC)
    del doc["constraints"]["allowed_devices"]
    problem = parse_problem(Located(doc, {}, "pool.yaml"))
    assert problem.constraints.network == "eth-1g"
    plan = solve_problem(problem, time_limit=30)
    assert any(n.startswith("link assumed: eth-1g (") for n in plan.notes), plan.notes
    # Renting may add cloud cards to the pool: then it is no pool of whole machines alone.
    doc["horizon"]["procurement"] = "rent"
    assert parse_problem(Located(doc, {}, "pool.yaml")).constraints.network == "eth-100g"


def test_cards_in_servers_keep_the_default_network() -> None:
    doc = copy.deepcopy(DOC)
    doc["constraints"] = {"allowed_devices": ["rtx-4090"], "capex_usd": 10000}
    problem = parse_problem(Located(doc, {}, "cards.yaml"))
    assert problem.constraints.network == "eth-100g"


def test_machines_without_recorded_ports_are_an_error_naming_the_fix() -> None:
    with pytest.raises(InputError) as e:
        _problem(["m1-8gb"])
    text = str(e.value)
    assert "pool.yaml" in text and "constraints" in text
    assert "m1-8gb" in text and "constraints.network" in text


def test_one_machine_needs_no_network_and_gets_no_error() -> None:
    problem = _problem(["m1-8gb"], ["constraints.inventory.0.count=1"])
    assert problem.constraints.network == "eth-100g"  # unused: nothing to join


def test_machines_sharing_no_kind_of_port_have_no_assumed_link() -> None:
    cat = load_catalog()
    pi = cat.accelerator("raspberry-pi-5-8gb")
    tb_only = cat.accelerator("m4-pro-64gb").model_copy(update={"ports": ["thunderbolt5"]})
    with pytest.raises(NoSharedPort, match="share no kind"):
        built_in_link(cat, [pi, tb_only])


def test_ports_are_a_whole_machines_and_sourced() -> None:
    cat = load_catalog()
    card = cat.accelerator("rtx-4090").model_dump()
    with pytest.raises(ValidationError, match="whole machine"):
        Accelerator.model_validate(
            {**card, "ports": ["eth-1g"], "sources": {**card["sources"], "ports": "x"}}
        )
    mini = cat.accelerator("m4-pro-64gb").model_dump()
    sources = {k: v for k, v in mini["sources"].items() if k != "ports"}
    with pytest.raises(ValidationError, match="own source"):
        Accelerator.model_validate({**mini, "sources": sources})


def test_bought_machines_on_their_assumed_port_need_no_adapter() -> None:
    """Mac minis bought (not owned) on the assumed Gigabit Ethernet: the plan counts a port per
    machine and does not call for an adapter, since the port is the machine's own."""
    doc = copy.deepcopy(DOC)
    doc["constraints"] = {"allowed_devices": ["m4-pro-64gb"], "capex_usd": 20_000}
    problem = parse_problem(Located(doc, {}, "buy.yaml"))
    plan = solve_problem(problem, time_limit=30)
    assert plan.network is not None and plan.network.link == "eth-1g"
    assert not any("adapter" in n for n in plan.notes), plan.notes
    assert any(n.startswith("link assumed: eth-1g") for n in plan.notes)


def test_a_one_machine_problem_loosened_to_several_gets_a_note_not_a_traceback() -> None:
    """One owned M1 (no recorded ports) and nothing to buy loads without a network: one machine
    needs none. A what-if that loosens the capex (planner.whatif.explain._loosen) plans a second
    machine on the same problem; the plan builder asked the built-in-port rule again, which
    raised NoSharedPort out of the solve (a traceback). The plan now says its network is the
    unstated default and how to name one."""
    doc = copy.deepcopy(DOC)
    doc["workloads"][0].update(model="llama-3.1-8b", weights="q4_k_m")
    doc["constraints"] = {
        "allowed_devices": ["m1-8gb"],
        "inventory": [{"device": "m1-8gb", "count": 1}],
        "capex_usd": 0,
    }
    problem = parse_problem(Located(doc, {}, "one.yaml"))
    c = problem.constraints.model_copy(update={"capex_usd": 5000.0})
    plan = solve_problem(problem.model_copy(update={"constraints": c}), time_limit=30)
    assert plan.status == "OPTIMAL"
    assert sum(n.count for n in plan.nodes) > 1
    note = next(n for n in plan.notes if n.startswith("network: no network is named"))
    assert "m1-8gb" in note and "eth-100g" in note and "constraints.network" in note
