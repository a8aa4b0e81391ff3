"""The cut that ties sequences held to the devices they need (planner.model.constraints,
Constraints._sequences_need_devices): valid for every plan, so the model with it has the same
optimum as the model without it, and the plan found without it satisfies it."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.constraints import SEQ_SCALE, Constraints
from planner.model.cpsat import PlannerModel
from planner.model.result import Solution
from planner.model.tables import Tables, build_tables
from planner.schema.problem import InferenceWorkload
from planner.schema.status import Status

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def _tables(name: str, overrides: tuple[str, ...] = ()) -> Tables:
    return build_tables(load_problem(PROBLEMS / f"{name}.yaml", overrides), load_catalog())


def _solve(t: Tables) -> Solution:
    return PlannerModel(t).solve(time_limit=60, workers=1, seed=0)


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("chat-70b", ()),
        ("serve-405b", ()),
        ("tokens-per-joule-10kw", ()),
        ("max-throughput-500k", ("constraints.budget_usd=150000",)),
    ],
)
def test_the_cut_leaves_the_optimum_as_it_was(
    name: str, overrides: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _tables(name, overrides)
    with_cut = _solve(t)
    rows = len(PlannerModel(t).m.proto.constraints)
    with monkeypatch.context() as m:
        m.setattr(Constraints, "_sequences_need_devices", lambda self, wname, keys: None)
        without = _solve(t)
        assert len(PlannerModel(t).m.proto.constraints) < rows  # the cut was there
    assert with_cut.status == without.status == Status.OPTIMAL
    assert with_cut.objective == pytest.approx(without.objective, rel=1e-12)
    # The plan found without the cut meets it: the cut removes no plan.
    for w in t.problem.workloads:
        if not isinstance(w, InferenceWorkload) or w.concurrency is None:
            continue
        designs = t.designs[w.name]
        for dev in {dev for d in designs for dev in d.devices}:
            seq = sum(
                SEQ_SCALE * designs[k.design].devices[dev] // designs[k.design].concurrency * x
                for k, x in without.sequences.items()
                if k.workload == w.name and dev in designs[k.design].devices
            )
            held = sum(
                SEQ_SCALE * designs[k.design].devices[dev] * r
                for k, r in without.replicas.items()
                if k.workload == w.name and dev in designs[k.design].devices
            )
            assert seq <= held


def test_the_scaled_share_of_a_device_per_sequence_is_rounded_down() -> None:
    # 8 devices holding 2,048 sequences: 8 x 2**20 / 2,048 = 4,096 exactly; 3 over 7 rounds down
    # (3 x 1,048,576 / 7 = 449,389.71...), so the row never asks more devices than the plan has.
    assert SEQ_SCALE * 8 // 2048 == 4096
    assert SEQ_SCALE * 3 // 7 == 449_389
