"""Problem files that state something that cannot be: the loader refuses them, naming the place
and the fix, and plans never rest on them. Each case was once accepted and planned without a
word: an owned device the constraints exclude, a Mac or a DGX Spark as a card in a box, a
fabric as a network between machines that do not carry it, measured times no device reaches;
and a max-throughput pool that could rent as much as it liked came back with thousands of
idle rented cards."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.errors import InputError
from planner.load import load_problem, parse_problem
from planner.schema.yaml_io import Located
from planner.solve import solve_problem

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"
# Eight owned L4s in one lab server, serving Llama 2 70B in fp8 to 64 chats.
BOX: dict[str, Any] = {
    "name": "box",
    "workloads": [
        {
            "name": "chat",
            "model": "llama-2-70b",
            "weights": "fp8",
            "kv": "fp8",
            "context_tokens": 2048,
            "prompt_tokens": 256,
            "output_tokens": 256,
            "concurrency": 64,
        }
    ],
    "machines": [{"id": "lab-server", "slots": 8, "power_w": 250, "link": "pcie4"}],
    "constraints": {
        "allowed_devices": ["l4"],
        "inventory": [{"device": "l4", "count": 8, "machine": "lab-server"}],
        "capex_usd": 0,
    },
    "objective": {"goal": "max_throughput"},
}


def _refused(doc: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as e:
        load_problem(path)
    assert "p.yaml" in str(e.value)
    return str(e.value)


def _doc(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BOX)
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            doc[section][field] = value
        else:
            doc[section] = value
    return doc


def test_an_owned_device_the_constraints_leave_out_is_refused(tmp_path: Path) -> None:
    text = _refused(_doc(constraints__allowed_devices=["a100-40gb-pcie"]), tmp_path)
    assert (
        "constraints.inventory[0].device" in text and "not in constraints.allowed_devices" in text
    )
    text = _refused(_doc(constraints__excluded_devices=["l4"]), tmp_path)
    assert "owned and in constraints.excluded_devices" in text


def test_a_computer_of_its_own_is_one_to_a_machine(tmp_path: Path) -> None:
    doc = _doc(
        machines=[{"id": "spark-box", "slots": 2, "power_w": 0}],
        constraints__allowed_devices=["dgx-spark"],
        constraints__inventory=[{"device": "dgx-spark", "count": 2, "machine": "spark-box"}],
    )
    text = _refused(doc, tmp_path)
    assert "machines[0].slots" in text and "slots: 1" in text


def test_a_machine_joins_its_cards_over_a_link_they_carry(tmp_path: Path) -> None:
    text = _refused(_doc(machines=[{**BOX["machines"][0], "link": "nvlink5"}]), tmp_path)
    assert "machines[0].link" in text and "pcie3, pcie4, pcie5, pcie6" in text


def test_tensor_parallelism_inside_a_machine_runs_over_its_link() -> None:
    """An L4 is a PCIe 4 card: in a PCIe 3 box its all-reduces run at PCIe 3 and the box
    serves less; in a PCIe 5 box at its own PCIe 4, as in a PCIe 4 box."""

    def served(link: str) -> float:
        doc = _doc(machines=[{**BOX["machines"][0], "link": link}])
        plan = solve_problem(parse_problem(Located(doc, {}, "box.yaml"), []), time_limit=20)
        assert plan.status == "OPTIMAL" and plan.objective is not None
        return plan.objective

    assert served("pcie3") < served("pcie4") == pytest.approx(served("pcie5"))


def test_a_fabric_is_no_network_between_machines_that_lack_it(tmp_path: Path) -> None:
    doc = yaml.safe_load((PROBLEMS / "two-sparks.yaml").read_text())
    doc["constraints"]["network"] = "nvlink5"
    text = _refused(doc, tmp_path)
    assert "constraints.network" in text and "fabric of" in text


@pytest.mark.parametrize(
    ("row", "words"),
    [
        (
            {"device": "h100-sxm", "metric": "decode_ms_per_layer", "batch": 1, "ms": 9},
            "not a device this problem may use",
        ),
        (
            {"device": "l4", "tp": 16, "metric": "decode_ms_per_layer", "batch": 1, "ms": 9},
            "max_tensor_parallel 8",
        ),
        (
            {"device": "l4", "metric": "decode_ms_per_layer", "batch": 1, "ms": 1e-6},
            "faster than reading the block's weights",
        ),
    ],
)
def test_measured_figures_that_cannot_be_are_refused(
    row: dict[str, Any], words: str, tmp_path: Path
) -> None:
    doc = _doc()
    doc["workloads"][0]["profiles"] = [row]
    text = _refused(doc, tmp_path)
    assert words in text and "profiles[0]" in text


def test_a_decode_step_of_more_sequences_is_never_faster(tmp_path: Path) -> None:
    doc = _doc()
    doc["workloads"][0]["profiles"] = [
        {"device": "l4", "metric": "decode_ms_per_layer", "batch": 1, "ms": 4.0},
        {"device": "l4", "metric": "decode_ms_per_layer", "batch": 64, "ms": 3.0},
    ]
    text = _refused(doc, tmp_path)
    assert "profiles[1].ms" in text and "never takes less time" in text


def test_max_throughput_rents_no_idle_fleet() -> None:
    """The leftovers pool allowed to rent: the most tokens/s its 96 chats make, on the cheapest
    fleet that makes them (about 40 T4s), not on thousands of idle rented ones."""
    doc = yaml.safe_load((PROBLEMS / "leftovers-pool.yaml").read_text())
    doc.setdefault("horizon", {})["procurement"] = ["on_demand", "reserved", "spot"]
    plan = solve_problem(parse_problem(Located(doc, {}, "pool.yaml"), []), time_limit=30)
    assert plan.status == "OPTIMAL"
    assert sum(x.count for x in plan.devices) < 100
    doc["objective"]["tie_break"] = "min_cost"
    cheapest = solve_problem(parse_problem(Located(doc, {}, "pool.yaml"), []), time_limit=30)
    assert plan.tco_usd == pytest.approx(cheapest.tco_usd)


def test_a_saved_plan_is_replayed_only_under_other_traffic(tmp_path: Path) -> None:
    """`planner simulate PLAN.json PROBLEM` replays the fleet under the given problem's traffic;
    one whose formats, measured figures or network differ is refused, since the fleet would
    run figures the plan never promised (an fp16 plan replayed as fp8 went 40 % faster)."""
    from typer.testing import CliRunner

    from planner.cli import app

    runner = CliRunner()
    pool = PROBLEMS / "leftovers-pool.yaml"
    plan = tmp_path / "plan.json"
    assert runner.invoke(app, ["solve", str(pool), "--out", str(plan)]).exit_code == 0
    fp8 = runner.invoke(app, ["simulate", str(plan), str(pool), "--set", "workloads.chat.kv=fp8"])
    assert fp8.exit_code == 2 and "workloads[0].kv" in fp8.output
    assert "not the one the plan was solved for" in fp8.output
    net = runner.invoke(app, ["simulate", str(plan), str(pool), "--set", "links.0.latency_ms=5"])
    assert net.exit_code == 2 and "`links`" in net.output
    busier = runner.invoke(
        app, ["simulate", str(plan), str(pool), "--set", "workloads.chat.concurrency=48"]
    )
    assert busier.exit_code == 0, busier.output


def test_a_session_replans_when_a_machine_link_changes() -> None:
    """The design tables a solver session keeps are keyed by the stated machines too: a
    sweep over a machine's link replans each point (a stale PCIe 3 table once failed
    verification at PCIe 4)."""
    from planner.catalog import load_catalog
    from planner.solve import Solver

    session = Solver(load_catalog(), time_limit=20)
    got = []
    for link in ("pcie3", "pcie4", "pcie3"):
        doc = _doc(machines=[{**BOX["machines"][0], "link": link}])
        plan = session.solve(parse_problem(Located(doc, {}, "box.yaml"), []))
        assert plan.status == "OPTIMAL" and plan.objective is not None  # verified
        got.append(plan.objective)
    assert got[0] == pytest.approx(got[2]) and got[0] < got[1]


def test_a_replay_runs_the_machines_link(tmp_path: Path) -> None:
    """`planner simulate` times a plan's stages as its stated machine joins them: the model
    column of a PCIe 3 box's replay is the plan's own time per token."""
    import json

    from typer.testing import CliRunner

    from planner.cli import app

    runner = CliRunner()
    problem = tmp_path / "box.yaml"
    problem.write_text(yaml.safe_dump(_doc(machines=[{**BOX["machines"][0], "link": "pcie3"}])))
    plan = tmp_path / "box.json"
    assert runner.invoke(app, ["solve", str(problem), "--out", str(plan)]).exit_code == 0
    ms = json.loads(plan.read_text())["workloads"][0]["ms_per_token"]
    res = runner.invoke(app, ["simulate", str(plan), str(problem), "--format", "json"])
    assert res.exit_code == 0, res.output
    model = json.loads(res.output)["groups"][0]["model"]["tpot"]["50"]
    assert model * 1e3 == pytest.approx(ms, rel=1e-6)


def test_compare_on_one_device_drops_the_other_owned_devices() -> None:
    """`compare --force-device` plans the problem on one device type: owned devices of other
    types leave the inventory with it (they would be owned devices the constraints leave
    out, which the loader refuses)."""
    from typer.testing import CliRunner

    from planner.cli import app

    res = CliRunner().invoke(
        app, ["compare", str(PROBLEMS / "own-8-a100.yaml"), "--force-device", "h100-sxm"]
    )
    assert res.exit_code == 0, res.output
    assert "only h100-sxm" in res.output


def test_a_stated_link_nothing_uses_is_refused(tmp_path: Path) -> None:
    """A link stated by its figures but left out of constraints.network: the plan used the
    default 100 Gb/s Ethernet between the machines without a word."""
    doc = yaml.safe_load((PROBLEMS / "owners-pool.yaml").read_text())
    del doc["constraints"]["network"]
    text = _refused(doc, tmp_path)
    assert "links[0].id" in text and "constraints.network: home-lan" in text


def test_a_stated_machine_without_devices_is_refused(tmp_path: Path) -> None:
    doc = _doc(machines=[*BOX["machines"], {"id": "spare", "slots": 2, "power_w": 100}])
    text = _refused(doc, tmp_path)
    assert "machines[1].id" in text and "holds no owned device" in text


def test_a_training_sequence_past_the_models_context_is_refused() -> None:
    """As an inference context is: llama-2-13b was trained on 4,096 positions, and a job of a
    million-token sequences is no plan anyone can run as costed."""
    path = Path(__file__).resolve().parent.parent / "problems" / "train-13b-2m.yaml"
    with pytest.raises(InputError, match=r"seq_len of 1,000,000 is longer than llama-2-13b's"):
        load_problem(path, ["workloads.pretrain.seq_len=1000000"])
