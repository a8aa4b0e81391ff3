"""Networks a problem states by their figures (`links`: bandwidth and latency), named in
constraints.network like a catalog link: planned over, priced at the stated port price,
recomputed by the verifier and the simulator, and kept apart per problem (a sweep over the
latency sees each value)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_network import DOC as FOUR_DESKTOPS

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.estimator.network import network_link
from planner.load import parse_problem
from planner.schema.yaml_io import Located
from planner.solve import solve_problem
from planner.verify import verify

# test_network's four-desktop 70B pipeline in 4-bit, on four owned cards over a home network
# the problem states: a four-stage pipeline whose hops cross it.
DOC: dict[str, Any] = {
    **copy.deepcopy(FOUR_DESKTOPS),
    "name": "home-pool",
    "links": [{"id": "home-lan", "bandwidth_gbit_s": 1, "latency_ms": "1 ms"}],
    "constraints": {
        "allowed_devices": ["rtx-5060-ti-16gb"],
        "inventory": [{"device": "rtx-5060-ti-16gb", "count": 4}],
        "capex_usd": 0,
        "network": "home-lan",
        "max_tensor_parallel": 1,
    },
    "objective": {"goal": "max_throughput"},
}
DOC["workloads"][0]["max_ms_per_token"] = 400


def _problem(doc: dict[str, Any], sets: list[str] | None = None) -> Any:
    return parse_problem(Located(copy.deepcopy(doc), {}, "test.yaml"), sets or [])


def _tokens(latency_ms: float) -> float:
    plan = solve_problem(_problem(DOC, [f"links.0.latency_ms={latency_ms}"]), time_limit=30)
    assert plan.status == "OPTIMAL", plan.status
    return sum(w.tokens_per_s for w in plan.workloads)


def test_the_stated_figures_become_the_network() -> None:
    link = network_link(_problem(DOC), load_catalog())
    assert link.id == "home-lan" and link.scope == "inter-node"
    assert link.bandwidth_gb_s == pytest.approx(1 / 8)  # 1 Gb/s is 0.125 GB/s
    assert link.latency_us == pytest.approx(1000.0)  # 1 ms one way
    assert link.price_usd_per_port == 0.0  # the network is already there


def test_a_slower_network_never_serves_more_and_each_value_is_its_own() -> None:
    """One process solves the three problems in turn, as a sweep does: each sees its own
    latency (a link is resolved per problem, not registered by its name)."""
    fast, home, far = _tokens(0.05), _tokens(1.0), _tokens(20.0)
    assert fast >= home >= far
    assert far < fast  # 20 ms per hop over four stages is felt


def test_the_plan_verifies_and_names_the_stated_link() -> None:
    problem = _problem(DOC)
    plan = solve_problem(problem, time_limit=30)
    assert "home-lan" in plan.links
    verify(plan, problem, load_catalog())  # raises on any figure it cannot recompute


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        (["links.0.id=eth-1g"], "`eth-1g` is a catalog link"),
        (["constraints.network=home-lna"], "did you mean `home-lan`"),
        (["links.0.bandwidth_gbit_s=0"], "links"),
        (["links.0.latency_ms=5000"], "links"),
        (
            [
                "links=[{id: a, bandwidth_gbit_s: 1, latency_ms: 1}, {id: a, bandwidth_gbit_s: 2, latency_ms: 1}]"
            ],
            "two links are named `a`",
        ),
    ],
)
def test_bad_stated_links_are_named(sets: list[str], words: str) -> None:
    with pytest.raises(InputError, match=None) as e:
        _problem(DOC, sets)
    assert words in str(e.value), str(e.value)
