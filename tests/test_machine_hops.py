"""A pipeline hop between two stages inside one machine crosses the machine's own link (PCIe,
NVLink), not the network between machines: in the design enumeration, the plan and the
verifier alike. Figures by hand arithmetic on the catalog's links (sources in links.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.estimator.replica import StageSpec, inference_replica
from planner.estimator.routes import Route, hop_routes, machine_link, machine_slots
from planner.estimator.support import engine_times
from planner.load import parse_problem
from planner.schema.problem import Problem
from planner.schema.yaml_io import Located

CAT = load_catalog()
HIDDEN = 8192  # Llama 3.1 70B's hidden size (its config.json)
PCIE4 = CAT.link("pcie4")  # 31.5 GB/s per direction, 2 us (links.yaml)
LAN_S = 0.5e-3  # the problem's 1 Gb/s LAN: 0.5 ms, 125 MB/s

# Two RTX 3090s in one workstation joined by PCIe 4.0, on a 1 Gb/s LAN: Llama 3.1 70B in AWQ
# (about 37 GB) needs both, and with tensor parallelism off they serve as two stages.
WORKSTATION = """
name: two-gpu-workstation
workloads:
  - name: chat
    kind: inference
    model: llama-3.1-70b
    weights: awq-int4
    kv: fp16
    context_tokens: 4096
    prompt_tokens: 512
    output_tokens: 256
    min_tokens_per_s: 5
    concurrency: 2
links:
  - {id: lan-1g, name: "1 Gb/s LAN", bandwidth_gbit_s: 1, latency_ms: 0.5 ms}
machines:
  - {id: ws, name: "Workstation", slots: SLOTS, link: pcie4, power_w: 150}
constraints:
  allowed_devices: [rtx-3090]
  inventory:
    - {device: rtx-3090, count: 2, machine: ws}
  capex_usd: 0
  network: lan-1g
  max_tensor_parallel: 1
objective:
  goal: min_cost
"""


def _problem(slots: int) -> Problem:
    doc = yaml.safe_load(WORKSTATION.replace("SLOTS", str(slots)))
    return parse_problem(Located(doc, {}, "test.yaml"), [])


def _solve(tmp_path: Path, slots: int) -> tuple[Path, Path, dict[str, object]]:
    problem = tmp_path / f"ws{slots}.yaml"
    problem.write_text(WORKSTATION.replace("SLOTS", str(slots)), encoding="utf-8")
    plan = tmp_path / f"ws{slots}.plan.json"
    r = CliRunner().invoke(app, ["solve", str(problem), "--out", str(plan), "--no-timings"])
    assert r.exit_code == 0, r.output
    return problem, plan, json.loads(plan.read_text())


def _verify(plan: Path, problem: Path) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["verify", str(plan), str(problem), "--no-resolve"])
    return r.exit_code, r.output


def test_two_stages_in_one_two_gpu_machine_hop_over_its_pcie(tmp_path: Path) -> None:
    problem, plan, data = _solve(tmp_path, 2)
    w = data["workloads"][0]  # type: ignore[index]
    stages = w["stages"]
    assert [s["device"] for s in stages] == ["rtx-3090", "rtx-3090"]
    assert [s["hop_route"] for s in stages] == ["pcie4", "pcie4"]
    # Forward: batch x 8,192 x 2 bytes over PCIe 4.0: 2 us + b x 16,384 / 31.5e9 s (b = 1:
    # 2.520 us, where the LAN took 0.5 ms + 16,384 / 125e6 = 0.631 ms); back, the token ids,
    # 8 bytes each: 2 us + 8 b / 31.5e9.
    b = w["batch"]
    assert stages[0]["hop_seconds"] == pytest.approx(2e-6 + b * HIDDEN * 2 / 31.5e9, rel=1e-9)
    assert stages[1]["hop_seconds"] == pytest.approx(2e-6 + b * 8 / 31.5e9, rel=1e-9)
    code, out = _verify(plan, problem)
    assert code == 0, out


def test_a_plan_claiming_the_network_inside_the_machine_fails_verify(tmp_path: Path) -> None:
    problem, plan, data = _solve(tmp_path, 2)
    w = data["workloads"][0]  # type: ignore[index]
    b = w["batch"]
    for j, s in enumerate(w["stages"]):
        per = HIDDEN * 2 if j == 0 else 8
        s["hop_route"] = "lan-1g"
        s["hop_seconds"] = LAN_S + b * per / 125e6
    plan.write_text(json.dumps(data))
    code, out = _verify(plan, problem)
    assert code == 5, out
    assert "hop_route" in out and "pcie4" in out


def test_a_plan_claiming_pcie_between_two_machines_fails_verify(tmp_path: Path) -> None:
    # One GPU per machine: the two stages sit in two machines, so their hop crosses the LAN.
    problem, plan, data = _solve(tmp_path, 1)
    w = data["workloads"][0]  # type: ignore[index]
    assert [s["hop_route"] for s in w["stages"]] == ["lan-1g", "lan-1g"]
    w["stages"][0]["hop_route"] = "pcie4"
    w["stages"][0]["hop_seconds"] = 2e-6 + w["batch"] * HIDDEN * 2 / 31.5e9
    plan.write_text(json.dumps(data))
    code, out = _verify(plan, problem)
    assert code == 5, out


@pytest.mark.parametrize(
    ("slots", "tps", "inside"),
    [
        (2, [1, 1], True),  # two stages of one GPU in a 2-slot machine
        (4, [1, 1], True),  # two replicas of two fill a 4-slot machine whole
        (4, [2, 2], True),  # two groups of two: four devices, one machine
        (3, [1, 1], False),  # 2 does not divide 3: a replica may straddle two machines
        (2, [2, 2], False),  # four devices never fit one 2-slot machine
        (1, [1, 1], False),
    ],
)
def test_which_replicas_share_a_machine(slots: int, tps: list[int], inside: bool) -> None:
    problem = _problem(slots)
    assert machine_slots(problem, CAT, "rtx-3090") == slots
    routes = hop_routes(problem, CAT, ["rtx-3090", "rtx-3090"], tps)
    assert [r.id for r in routes] == (["pcie4"] * 2 if inside else ["lan-1g"] * 2)
    assert (machine_link(problem, CAT, "rtx-3090", sum(tps)) is not None) == inside


def test_a_device_that_may_be_rented_keeps_the_network() -> None:
    # A rented replica runs in the provider's machines, not the stated ones: not known to share.
    doc = yaml.safe_load(WORKSTATION.replace("SLOTS", "2"))
    doc["horizon"] = {"procurement": ["buy", "on_demand"]}
    problem = parse_problem(Located(doc, {}, "test.yaml"), [])
    if machine_slots(problem, CAT, "rtx-3090") != 0:
        pytest.skip("no rent price for the RTX 3090 in the catalog")
    assert [r.id for r in hop_routes(problem, CAT, ["rtx-3090"] * 2, [1, 1])] == ["lan-1g"] * 2


def test_no_rpc_time_on_a_hop_inside_a_machine() -> None:
    # llama.cpp's RPC backend makes one round trip of 1.975 ms per remote stage and token
    # (support.yaml, rpc_round_trip_us and rpc_round_trips; planner.estimator.rpc_hop): over two
    # machines one remote stage, charged half on each of the two hops, 0.9875 ms each. Inside
    # one machine llama.cpp splits layers itself. The same two stages over the same PCIe link,
    # once marked inside a machine: each stage's step is 0.9875 ms shorter, so the round is too.
    m, acc = CAT.model("qwen2.5-32b"), CAT.accelerators["rtx-3090"]
    times = engine_times(CAT, "llama.cpp")
    assert times["rpc"].round_trip_s * times["rpc"].round_trips == pytest.approx(1.975e-3)
    assert not times["rpc"].graph_resent

    def step(inside: bool) -> float:
        hop = Route((PCIE4,), inside=inside)
        stages = [StageSpec(acc, 1, 32, hop=hop), StageSpec(acc, 1, 32, hop=hop)]
        fig = inference_replica(
            m, "q8_0", "fp16", batch=1, context=4096, prompt=512, output=256,
            stages=stages, link=PCIE4, **times,
        )  # fmt: skip
        return fig.step_seconds

    assert step(False) - step(True) == pytest.approx(1.975e-3 / 2, rel=1e-6)


def test_three_stages_in_one_three_gpu_machine(tmp_path: Path) -> None:
    # Qwen2.5 32B in GPTQ 4-bit (about 18 GB) on three 12 GB RTX 3060s in one 3-slot machine:
    # three stages, each hop over PCIe 4.0 (3 divides 3), and the plan verifies. (The design
    # grid once looked the link up for a pair of devices, which a 3-slot machine never holds
    # whole, and timed the hops over the LAN while the plan's stages said PCIe.)
    doc = yaml.safe_load(WORKSTATION.replace("SLOTS", "3"))
    w = doc["workloads"][0]
    w.update(model="qwen2.5-32b", weights="gptq-int4", concurrency=1, min_tokens_per_s=2)
    doc["constraints"]["allowed_devices"] = ["rtx-3060-12gb"]
    doc["constraints"]["inventory"] = [{"device": "rtx-3060-12gb", "count": 3, "machine": "ws"}]
    problem = tmp_path / "ws3.yaml"
    problem.write_text(yaml.safe_dump(doc), encoding="utf-8")
    plan = tmp_path / "ws3.plan.json"
    r = CliRunner().invoke(app, ["solve", str(problem), "--out", str(plan), "--no-timings"])
    assert r.exit_code == 0, r.output
    stages = json.loads(plan.read_text())["workloads"][0]["stages"]
    assert [s["hop_route"] for s in stages] == ["pcie4"] * 3
    code, out = _verify(plan, problem)
    assert code == 0, out


@pytest.mark.parametrize(
    ("device", "link", "rate"),
    [
        ("rtx-3090", "pcie4", 31.5e9),
        ("rtx-5090", "pcie5", 63e9),
        ("rtx-4060-ti-16gb", "pcie4", 15.75e9),
    ],
)
def test_a_hop_inside_a_machine_runs_at_the_cards_pcie_link(
    device: str, link: str, rate: float
) -> None:
    # A catalog workstation-4 joins its cards over PCIe 5.0 x16 (nodes.yaml, links.yaml). An
    # RTX 3090 is a PCIe 4.0 x16 card (accelerators.yaml), so two of them exchange a hop at
    # 4.0's 31.5 GB/s, as a tensor-parallel group in the machine already did
    # (hosts.in_machine), not at 63 GB/s: a 512-token chunk's 512 x 8,192 x 2 = 8.39 MB takes
    # 2 us + 266 us, not 2 us + 133 us. An RTX 5090 (PCIe 5.0 x16) keeps the machine's link;
    # an RTX 4060 Ti (PCIe 4.0 x8) moves half of 4.0 x16's bytes, 15.75 GB/s.
    doc = yaml.safe_load(WORKSTATION.replace("SLOTS", "2"))
    del doc["machines"]
    doc["constraints"].update(allowed_devices=[device], allowed_hosts=["workstation-4"])
    doc["constraints"].pop("inventory")
    doc["constraints"].pop("capex_usd")
    doc["horizon"] = {"procurement": ["buy"]}
    problem = parse_problem(Located(doc, {}, "test.yaml"), [])
    assert machine_slots(problem, CAT, device) == 4
    got = machine_link(problem, CAT, device, 2)
    assert got is not None and got.id == link
    routes = hop_routes(problem, CAT, [device, device], [1, 1])
    assert [r.id for r in routes] == [link, link]
    chunk = 512 * HIDDEN * 2
    assert routes[0].seconds(chunk) == pytest.approx(2e-6 + chunk / rate, rel=1e-9)
