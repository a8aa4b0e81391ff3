"""Hosts are a decision and baseboards are bought as sold (issue "Plans that can be bought and
run"): HGX, OAM and Gaudi boards in their whole units, an NVLink-bridged RTX 3090 pair and an
8 x RTX 4090 PCIe server both plannable, rack units for every host on premises."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import ValidationError

from planner.catalog import load_catalog
from planner.estimator.hosts import derates, devices_bought, purchase_unit, sustained
from planner.plan.types import Plan
from planner.schema.catalog import CLOUD_HOST_KINDS
from planner.schema.problem import Problem
from planner.solve import solve_problem
from planner.verify import COLLECT, verify


def problem(devices: list[str], workload: dict[str, Any], **constraints: Any) -> Problem:
    return Problem.model_validate(
        {
            "name": "units",
            "workloads": [
                {
                    "name": "serve",
                    "context_tokens": 4096,
                    "prompt_tokens": 1024,
                    "concurrency": 8,
                    **workload,
                }
            ],
            "constraints": {"allowed_devices": devices, **constraints},
            "horizon": {"procurement": "buy"},
            "market": {"conditions": ["new", "refurbished", "used"]},
        }
    )


def small(model: str = "llama-3.1-8b") -> dict[str, Any]:
    return {"model": model, "weights": "fp16", "min_tokens_per_s": 100}


def line(plan: Plan, device: str) -> tuple[int, int, str, int]:
    """(devices at work, bought, host type, hosts) of one device type on premises."""
    dev = next(x for x in plan.devices if x.type == device)
    node = next(x for x in plan.nodes if x.hosts == device)
    at_work = max(p.devices.get(device, {}).get("on-premises", 0) for p in plan.periods)
    return at_work, dev.bought, node.type, node.count


def test_the_units_each_host_sells_in() -> None:
    cat = load_catalog()
    units = {n.id: purchase_unit(n) for n in cat.nodes.values()}
    assert units["oam-mi300x-8"] == 8 and units["gaudi2-8"] == units["gaudi3-8"] == 8
    assert units["hgx-h100-8"] == units["hgx-h200-8"] == units["hgx-b200-8"] == 8
    assert units["hgx-h100-4"] == units["hgx-h200-4"] == 4
    # PCIe cards go in one by one.
    assert units["pcie-server-8"] == units["workstation-4"] == units["desktop-1"] == 1
    # 4 MI300X buy a whole 8-OAM platform's 8; 3 Gaudi 2 a kit of 8; 9 H100 two HGX-8 boards.
    assert devices_bought(cat.node("oam-mi300x-8"), 4) == 8
    assert devices_bought(cat.node("gaudi2-8"), 3) == 8
    assert devices_bought(cat.node("hgx-h100-8"), 9) == 16
    assert devices_bought(cat.node("pcie-server-8"), 3) == 3


def test_oam_platform_bought_whole() -> None:
    # An 8B model fits one MI300X, but the platform is sold with its 8 OAM slots filled: the
    # plan buys 8 and holds the 7 spares (idle power counted), never 1 or 2 in a platform.
    plan = solve_problem(problem(["mi300x"], small()), time_limit=20)
    assert plan.status == "OPTIMAL"
    at_work, bought, host, hosts = line(plan, "mi300x")
    assert (host, hosts, bought) == ("oam-mi300x-8", 1, 8)
    assert at_work < bought
    dev = next(x for x in plan.devices if x.type == "mi300x")
    # $17,500 per MI300X (catalog) x 8, not x the devices at work.
    assert dev.total_usd == 8 * 17_500


def test_gaudi_in_kits_of_eight() -> None:
    for device in ("gaudi2", "gaudi3"):
        plan = solve_problem(problem([device], small()), time_limit=20)
        assert plan.status == "OPTIMAL", device
        _, bought, host, hosts = line(plan, device)
        assert bought == 8 * hosts and bought >= 8, (device, bought, host)


def test_hgx_in_fours_and_eights() -> None:
    # One H100 at work: the 4-GPU HGX board is the smallest unit (4 H100 at $30k with a $35k
    # server beat 8 with a $60k one).
    plan = solve_problem(problem(["h100-sxm"], small()), time_limit=20)
    assert plan.status == "OPTIMAL"
    _, bought, host, hosts = line(plan, "h100-sxm")
    assert (host, hosts, bought) == ("hgx-h100-4", 1, 4)
    # A 70B model at fp16 tensor-parallel over 8 needs the 8-GPU board (the 4-GPU one holds
    # groups of 4 at most).
    big = problem(
        ["h100-sxm"],
        {"model": "llama-3.1-70b", "weights": "fp16", "min_tokens_per_s": 100},
        max_stages=1,
        memory_headroom=0.6,  # 32 GB usable per card: 141 GB of weights need 8 cards
    )
    plan = solve_problem(big, time_limit=30)
    assert plan.status == "OPTIMAL"
    _, bought, host, hosts = line(plan, "h100-sxm")
    assert host == "hgx-h100-8" and bought == 8 * hosts
    assert max(s.tp for w in plan.workloads for s in w.stages) == 8


def nvlink_pair() -> Problem:
    """Llama 3.1 70B at 4 bits (about 40 GB) needs two 24 GB cards; with one stage and no
    tensor parallelism over PCIe only an NVLink bridge joins them."""
    return problem(
        ["rtx-3090"],
        {"model": "llama-3.1-70b", "weights": "awq-int4", "min_tokens_per_s": 10},
        max_stages=1,
        tensor_parallel_over_pcie=False,
    )


def test_rtx_3090_nvlink_pair() -> None:
    # The bridged workstation is the cheapest host that joins the pair.
    p = nvlink_pair()
    plan = solve_problem(p, time_limit=30)
    assert plan.status == "OPTIMAL"
    _, bought, host, hosts = line(plan, "rtx-3090")
    assert host == "workstation-2-nvlink"
    assert bought == 2 * hosts
    assert {s.tp for w in plan.workloads for s in w.stages} == {2}
    assert "nvlink-bridge-ampere" in plan.links


def eight_4090() -> Problem:
    """70B at fp16 (about 141 GB) over 8 x 24 GB cards in tensor parallel over PCIe, one
    stage: only the 8-slot PCIe server holds a group of 8."""
    return problem(
        ["rtx-4090"],
        {"model": "llama-3.1-70b", "weights": "fp16", "min_tokens_per_s": 10},
        max_stages=1,
        tensor_parallel_over_pcie=True,
        memory_headroom=0.0,
    )


def test_eight_rtx_4090_in_one_server() -> None:
    plan = solve_problem(eight_4090(), time_limit=30)
    assert plan.status == "OPTIMAL"
    _, bought, host, hosts = line(plan, "rtx-4090")
    assert (host, hosts, bought) == ("pcie-server-8", 1, 8)


def test_rack_units_for_every_host() -> None:
    cat = load_catalog()
    for n in cat.nodes.values():
        assert n.rack_units >= 1 or n.kind in CLOUD_HOST_KINDS, n.id
    serve = {**small(), "min_tokens_per_s": 1000, "concurrency": 64}
    free = solve_problem(problem(["rtx-4090"], serve), time_limit=30)
    assert free.status == "OPTIMAL"
    # Four cards in a 5U workstation (desktops were 0 U, so 18 of them fit under "8 U").
    assert [(n.type, n.count, n.rack_units) for n in free.nodes] == [("workstation-4", 1, 5)]
    assert free.rack_units == 5
    # Under 4 U the same cards go in a 2U PCIe server, at a higher cost.
    tight = solve_problem(problem(["rtx-4090"], serve, max_rack_units=4), time_limit=30)
    assert tight.status == "OPTIMAL"
    assert [(n.type, n.rack_units) for n in tight.nodes] == [("pcie-server-4", 2)]
    assert tight.rack_units <= 4 and tight.tco_usd > free.tco_usd
    # Under 1 U nothing on premises fits.
    none = solve_problem(problem(["rtx-4090"], serve, max_rack_units=1), time_limit=30)
    assert none.status == "INFEASIBLE"


def test_a_host_that_cannot_hold_the_pair_is_refused() -> None:
    # The NVLink pair's plan with its host swapped for the bridgeless workstation: the verifier
    # names the node line and the group it cannot hold.
    p = nvlink_pair()
    plan = solve_problem(p, time_limit=30)
    nodes = [dataclasses.replace(n, type="workstation-2") for n in plan.nodes]
    found: list[str] = []
    token = COLLECT.set(found)
    try:
        verify(dataclasses.replace(plan, nodes=nodes), p, load_catalog())
    finally:
        COLLECT.reset(token)
    want = "`nodes.0.type`: workstation-2 holds tensor-parallel groups of at most 1 rtx-3090"
    assert any(want in f for f in found), found


def with_derating(p: Problem, share: float) -> Problem:
    return p.model_copy(
        update={"horizon": p.horizon.model_copy(update={"consumer_derating": share})}
    )


def test_sustained_derating_of_consumer_cards() -> None:
    cat = load_catalog()
    p = problem(["rtx-4090"], small())
    # On by default at 0.2: the middle of the 15-25 % reference text 001 gives for consumer cards
    # in dense chassis. The RTX 4090's 1,008 GB/s and 165.2 dense FP16 TFLOPS (catalog) lose 20 %.
    assert p.horizon.consumer_derating == 0.2
    slow = sustained(cat.accelerator("rtx-4090"), p)
    assert abs(slow.memory.bandwidth_gb_s - 1008 * 0.8) < 1e-9
    assert abs((slow.dense_tflops.fp16 or 0) - 165.2 * 0.8) < 1e-9
    # Datacenter and workstation cards are built for racks: not derated.
    assert not derates(cat.accelerator("l40s"), p) and not derates(cat.accelerator("rtx-a6000"), p)
    # One card in a desktop runs at full speed: the same plan with or without derating.
    one = solve_problem(p, time_limit=30)
    off = solve_problem(with_derating(p, 0.0), time_limit=30)
    assert [n.type for n in one.nodes] == ["desktop-1"]
    assert one.workloads[0].tokens_per_s == off.workloads[0].tokens_per_s
    # Eight cards in one PCIe server are derated: fewer tokens/s than the same server at full
    # speed (solve_problem verifies each plan: the verifier derates from the host it names).
    big = eight_4090()
    dense = solve_problem(big, time_limit=30)
    fast = solve_problem(with_derating(big, 0.0), time_limit=30)
    assert [n.type for n in dense.nodes] == [n.type for n in fast.nodes] == ["pcie-server-8"]
    ratio = dense.workloads[0].tokens_per_s / fast.workloads[0].tokens_per_s
    assert 0.8 - 1e-6 <= ratio < 1.0  # at most the 20 % lost, fixed step work included


def test_derating_is_validated_at_the_door() -> None:
    with pytest.raises(ValidationError, match="consumer_derating"):
        Problem.model_validate(
            {
                "name": "x",
                "workloads": [small() | {"name": "s"}],
                "horizon": {"consumer_derating": 1.5},
            }
        )


def test_risk_margin_on_uncalibrated_designs() -> None:
    # No calibration row backs Gaudi 2 (confidence `prior`): under a 50 % risk margin its
    # replicas must make 1,000 / (1 - 0.5) = 2,000 tokens/s of estimate for a 1,000 floor.
    serve = {**small(), "min_tokens_per_s": 1000, "concurrency": "unbounded"}
    plain = solve_problem(problem(["gaudi2"], serve), time_limit=30)
    held = solve_problem(problem(["gaudi2"], serve, risk_margin=0.5), time_limit=30)
    assert plain.status == held.status == "OPTIMAL"
    assert all(w.confidence and w.confidence.label == "prior" for w in held.workloads)
    assert sum(w.tokens_per_s for w in held.workloads) >= 2000 * (1 - 1e-6)
    assert sum(w.tokens_per_s for w in plain.workloads) >= 1000 * (1 - 1e-6)
    assert held.tco_usd >= plain.tco_usd
    # The room under the floor counts the tokens less the margin.
    got = sum(w.tokens_per_s for w in held.workloads) * 0.5
    assert abs(held.slack["throughput:serve"] - (got - 1000) / 1000) < 1e-9


def test_passively_cooled_cards_go_in_servers() -> None:
    # Datacenter PCIe cards (L40S, L4, T4, H100 PCIe...) ship with a passive heatsink for a
    # server's forced air (catalog nodes.yaml, source nvidia-l40s-passive): no desktop or
    # workstation hosts them; fan-cooled consumer and workstation cards go in either.
    cat = load_catalog()
    cases = [a for a in cat.accelerators.values() if a.form_factor == "pcie"]
    assert cases
    for a in cases:
        kinds = {n.kind for n in cat.nodes_for(a)}
        if a.device_class == "datacenter":
            assert kinds.isdisjoint({"desktop", "workstation"}), a.id
            assert "pcie-server" in kinds, a.id
        else:
            assert {"desktop", "workstation", "pcie-server"} <= kinds, a.id
    plan = solve_problem(problem(["l40s"], small()), time_limit=30)
    assert plan.status == "OPTIMAL"
    assert {cat.node(n.type).kind for n in plan.nodes} == {"pcie-server"}


def test_allowed_hosts_limits_the_host_types() -> None:
    serve = {**small(), "min_tokens_per_s": 1000, "concurrency": 64}
    free = solve_problem(problem(["rtx-4090"], serve), time_limit=30)
    assert [n.type for n in free.nodes] == ["workstation-4"]
    # One card per desktop: the same demand on desktops only, never cheaper.
    only = solve_problem(problem(["rtx-4090"], serve, allowed_hosts=["desktop-1"]), time_limit=30)
    assert only.status == "OPTIMAL"
    assert {n.type for n in only.nodes} == {"desktop-1"}
    assert only.tco_usd >= free.tco_usd
    # A device no allowed host takes, bought only: no device left, said plainly.
    none = solve_problem(problem(["l40s"], small(), allowed_hosts=["desktop-1"]), time_limit=30)
    assert none.status == "INFEASIBLE"
    assert any("constraints.allowed_hosts" in n for n in none.notes), none.notes


def test_an_unknown_allowed_host_is_named() -> None:
    from planner.errors import InputError
    from planner.load import check_names

    p = problem(["rtx-4090"], small(), allowed_hosts=["desktp-1"])
    with pytest.raises(InputError, match=r"allowed_hosts.*unknown host `desktp-1`.*desktop-1"):
        check_names(p, load_catalog())
