"""A memory figure in a workload's profiles (`{device, metric: memory_gb, gb}`): the memory one
device may fill when the OS, a desktop session or other processes hold the rest. It caps the
catalog's usable memory for that workload's stages on the device: the design enumeration, the
plan's slack and the verifier all hold a stage to it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.catalog import load_catalog
from planner.errors import InputError, InternalError
from planner.load import load_problem, parse_problem
from planner.schema.problem import InferenceWorkload
from planner.schema.yaml_io import Located
from planner.solve import solve_problem
from planner.verify import verify

POOL = Path(__file__).resolve().parent.parent / "problems" / "owners-pool.yaml"
# The Spark and the two M4 Max Macs of the owners' pool, each with less memory to give than the
# catalog's usable share: the Macs run other work (40 GB left), the Spark a desktop (30 GiB).
CAPS = [
    {"device": "m4-max-128gb", "metric": "memory_gb", "gb": "40 GB"},
    {"device": "dgx-spark", "metric": "memory_gb", "gb": "30 GiB"},
]


def _problem(profiles: list[dict[str, Any]]) -> Any:
    doc = yaml.safe_load(POOL.read_text())
    doc["workloads"][0]["profiles"] = copy.deepcopy(profiles)
    return parse_problem(Located(doc, {}, "pool.yaml"), [])


def test_the_cap_is_read_in_gigabytes() -> None:
    w = _problem(CAPS).workloads[0]
    assert isinstance(w, InferenceWorkload)
    assert w.memory_cap_bytes("m4-max-128gb") == pytest.approx(40e9)
    assert w.memory_cap_bytes("dgx-spark") == pytest.approx(30 * 2**30)
    assert w.memory_cap_bytes("rtx-4060-ti-16gb") is None
    # The catalog's figure where it is the lower one.
    assert w.capped_usable("m4-max-128gb", 10e9) == 10e9


def test_capped_stages_stay_under_the_cap_and_serve_no_more() -> None:
    free = solve_problem(_problem([]), workers=1, seed=0, time_limit=30)
    capped = solve_problem(_problem(CAPS), workers=1, seed=0, time_limit=30)
    assert free.status == capped.status == "OPTIMAL"  # solve_problem verifies every plan
    held: dict[str, float] = {}
    for w in free.workloads:
        for s in w.stages:
            held[s.device] = max(held.get(s.device, 0.0), s.memory_bytes["total"])
    # The uncapped plan fills more than the caps allow: the cap is what changes the plan.
    assert held["m4-max-128gb"] > 40e9 or held["dgx-spark"] > 30 * 2**30
    for w in capped.workloads:
        for s in w.stages:
            limit = {"m4-max-128gb": 40e9, "dgx-spark": 30 * 2**30}.get(s.device)
            if limit is not None:
                assert s.memory_bytes["total"] <= limit * (1 + 1e-9)
    assert capped.objective is not None and free.objective is not None
    assert capped.objective <= free.objective * (1 + 1e-9)  # less memory never serves more


def test_the_verifier_holds_a_plan_to_the_cap() -> None:
    """A plan made without the caps fills more than they allow: checked against the problem
    that states them, it is refused, naming the stage."""
    free = solve_problem(_problem([]), workers=1, seed=0, time_limit=30)
    with pytest.raises(InternalError, match="usable"):
        verify(free, _problem(CAPS), load_catalog())


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ({"device": "dgx-spark", "metric": "memory_gb"}, "needs `gb`"),
        ({"device": "dgx-spark", "metric": "memory_gb", "gb": 30, "ms": 2}, "no `ms`"),
        ({"device": "dgx-spark", "metric": "memory_gb", "gb": 30, "batch": 2}, "no `batch`"),
        ({"device": "dgx-spark", "metric": "memory_gb", "gb": 30, "tp": 2}, "drop `tp`"),
        ({"device": "dgx-spark", "metric": "memory_gb", "gb": "30 W"}, "a power"),
        ({"device": "dgx-spark", "metric": "memory_gb", "gb": 0}, "gb"),
        ({"device": "dgx-spark", "metric": "decode_ms_per_layer", "batch": 1}, "needs its `ms`"),
        (
            {"device": "dgx-spark", "metric": "decode_ms_per_layer", "batch": 1, "ms": 9, "gb": 3},
            "drop it",
        ),
        ({"device": "dgx-sprk", "metric": "memory_gb", "gb": 30}, "unknown device"),
    ],
)
def test_bad_memory_figures_are_named(row: dict[str, Any], words: str, tmp_path: Path) -> None:
    doc = yaml.safe_load(POOL.read_text())
    doc["workloads"][0]["profiles"] = [row]
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as e:
        load_problem(path)
    assert words in str(e.value) and "pool.yaml" in str(e.value)
    assert "profiles" in str(e.value)


def test_two_memory_figures_for_one_device_are_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load(POOL.read_text())
    doc["workloads"][0]["profiles"] = [*CAPS, {**CAPS[0], "gb": 50}]
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match="two memory_gb"):
        load_problem(path)


def test_caps_that_leave_no_room_are_named_as_the_cause() -> None:
    """Every device capped at 1 GB: no plan, and the explanation names the memory_gb figures,
    not the catalog's memory, as what to raise."""
    doc = yaml.safe_load(POOL.read_text())
    doc["workloads"][0]["profiles"] = [
        {"device": d, "metric": "memory_gb", "gb": 1} for d in doc["constraints"]["allowed_devices"]
    ]
    plan = solve_problem(parse_problem(Located(doc, {}, "pool.yaml"), []), time_limit=10)
    assert plan.status == "INFEASIBLE"
    assert any("offers 1 GB usable (the workload's memory_gb figure" in n for n in plan.notes)
    assert any("raise the memory_gb profile figures" in n for n in plan.notes)


def test_a_cap_that_removes_a_device_is_named_when_no_plan_is_left() -> None:
    """The A100s capped at 1 GB hold no stage; the pool without them cannot make 250 tokens/s:
    the plan's notes say the cap removed them (no model constraint names it)."""
    doc = yaml.safe_load(Path(POOL.parent / "leftovers-pool.yaml").read_text())
    doc["workloads"][0]["profiles"] = [{"device": "a100-40gb-pcie", "metric": "memory_gb", "gb": 1}]
    doc["workloads"][0]["min_tokens_per_s"] = 250
    doc["objective"] = {"goal": "min_cost"}
    plan = solve_problem(parse_problem(Located(doc, {}, "pool.yaml"), []), time_limit=20)
    assert plan.status == "INFEASIBLE"
    assert any("no design on a100-40gb-pcie fits in its memory_gb figure" in n for n in plan.notes)
