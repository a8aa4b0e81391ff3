"""Measured times per block in problem files (`workloads[].profiles`): they replace the
estimator's per-block time for the device and degree they were measured on, exactly at the
measured points and scaled between them (planner.estimator.profiles); the design enumeration,
the plan and the verifier all use them."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.estimator.designs import allowed_devices, inference_designs, stage_specs
from planner.estimator.network import network_link
from planner.estimator.profiles import LayerProfile, layer_profile, profiled, profiled_pair
from planner.estimator.replica import inference_replica
from planner.estimator.support import engine_times
from planner.load import load_problem, parse_problem
from planner.schema.problem import InferenceWorkload
from planner.schema.yaml_io import Located
from planner.solve import solve_problem

LEFTOVERS = Path(__file__).resolve().parent.parent / "problems" / "leftovers-pool.yaml"
# Made-up figures for a T4 running Llama 2 70B in fp16, one block per call: what a profiler of
# a pooled cluster prints (decode by batch, prefill by prompt length). Reading a block's 1.71 GB
# of weights at the T4's 320 GB/s takes 5.35 ms, so a decode step takes longer.
T4_PROFILE = [
    {"device": "t4", "metric": "decode_ms_per_layer", "batch": 1, "ms": 7.0},
    {"device": "t4", "metric": "decode_ms_per_layer", "batch": 8, "ms": 8.8},
    {"device": "t4", "metric": "decode_ms_per_layer", "batch": 32, "ms": 13.6},
    {"device": "t4", "metric": "prefill_ms_per_layer", "prompt_tokens": 256, "ms": 42.0},
]


def _doc(profile: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    doc = dict(yaml.safe_load(LEFTOVERS.read_text()))
    doc["workloads"][0]["profiles"] = copy.deepcopy(T4_PROFILE if profile is None else profile)
    return doc


def _problem(doc: dict[str, Any]) -> Any:
    return parse_problem(Located(copy.deepcopy(doc), {}, "pool.yaml"), [])


def test_the_scaling_meets_each_point_and_holds_beyond() -> None:
    """Hand arithmetic: an estimate of 1 ms per block at every batch, measured 2 ms at batch 1
    and 8 ms at batch 16: ratios 2 and 8, linear in log2(batch) between (4 at batch 4, the
    middle), held at 8 past 16 and at 2 below 1."""
    profile = LayerProfile(decode=((1.0, 2e-3), (16.0, 8e-3)))

    def flat(b: Any, q: Any, length: float) -> Any:
        return np.full(np.shape(b), 1e-3)

    n = np.array([1.0, 4.0, 16.0, 64.0])
    est = np.full(4, 1e-3)
    got = profiled(profile, flat, n, np.zeros(4), est, est)
    assert got == pytest.approx([2e-3, 5e-3, 8e-3, 8e-3])
    # The prompt work of a mixed iteration keeps the estimator's time without prefill points.
    dec, mix = profiled_pair(profile, flat, 4.0, 100.0, 1e-3, 3e-3)
    assert dec[0] == pytest.approx(5e-3) and mix[0] == pytest.approx(5e-3 + 2e-3)


def test_a_profile_is_read_per_device_and_degree() -> None:
    w = _problem(_doc()).workloads[0]
    assert isinstance(w, InferenceWorkload)
    t4 = layer_profile(w, "t4", 1)
    assert t4 is not None
    assert [b for b, _ in t4.decode] == [1.0, 8.0, 32.0]
    assert [t for _, t in t4.decode] == pytest.approx([7e-3, 8.8e-3, 13.6e-3])
    assert len(t4.prefill) == 1 and t4.prefill[0] == pytest.approx((256.0, 42e-3))
    assert layer_profile(w, "t4", 2) is None and layer_profile(w, "l4", 1) is None


def test_the_enumerated_designs_carry_the_measured_times() -> None:
    """Every T4 design's figures are the replica arithmetic's with the profile (the same check
    tests/test_replica_figures.py makes without one), and a T4 stage at a measured batch takes
    exactly its measured time per block in decode-only iterations."""
    cat = load_catalog()
    problem = _problem(_doc())
    (w,) = problem.workloads
    designs = inference_designs(w, problem, cat, allowed_devices(problem, cat), prune=False)
    checked = 0
    for d in designs:
        if "t4" not in d.devices:
            continue
        fig = inference_replica(
            cat.model(w.model),
            w.weights,
            w.kv,
            batch=d.batch,
            context=w.context_tokens,
            prompt=w.prompt_tokens,
            output=w.output_tokens,
            stages=stage_specs(cat, problem, d),
            link=network_link(problem, cat),
            **engine_times(cat, d.engine),
        )
        assert math.isclose(d.tokens_per_s, fig.tokens_per_s, rel_tol=1e-9), d
        assert math.isclose(d.ms_per_token, fig.ms_per_token, rel_tol=1e-9), d
        assert math.isclose(d.power_w, fig.power_w, rel_tol=1e-9), d
        checked += 1
    assert checked > 10


def test_slower_measurements_serve_less_and_the_plan_verifies() -> None:
    fast = solve_problem(_problem(_doc()), workers=1, seed=0, time_limit=30)
    slow_profile = [dict(p, ms=p["ms"] * 3) for p in T4_PROFILE]
    slow = solve_problem(_problem(_doc(slow_profile)), workers=1, seed=0, time_limit=30)
    assert fast.status == slow.status == "OPTIMAL"  # solve_problem verifies every plan
    assert slow.objective is not None and fast.objective is not None
    assert slow.objective < fast.objective


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ({"device": "t4", "metric": "decode_ms_per_layer", "ms": 2.0}, "needs the `batch`"),
        (
            {"device": "t4", "metric": "prefill_ms_per_layer", "ms": 2.0},
            "needs the `prompt_tokens`",
        ),
        ({"device": "t-4", "metric": "decode_ms_per_layer", "batch": 1, "ms": 2}, "unknown"),
        ({"device": "t4", "metric": "decode_ms_per_layer", "batch": 8, "ms": 9}, "two"),
        ({"device": "t4", "metric": "decode_ms_per_layer", "batch": 2, "ms": -1}, "ms"),
        (
            {
                "device": "t4",
                "metric": "decode_ms_per_layer",
                "batch": 2,
                "ms": 2,
                "prompt_tokens": 9,
            },
            "not at prompt_tokens",
        ),
        (
            {
                "device": "t4",
                "metric": "prefill_ms_per_layer",
                "prompt_tokens": 9,
                "ms": 2,
                "batch": 2,
            },
            "not at a batch",
        ),
        ({"device": "t4", "tp": 3, "metric": "decode_ms_per_layer", "batch": 2, "ms": 2}, "64"),
    ],
)
def test_bad_profiles_are_named(row: dict[str, Any], words: str, tmp_path: Path) -> None:
    doc = _doc([*T4_PROFILE, row])
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as e:
        load_problem(path)
    assert words in str(e.value) and "pool.yaml" in str(e.value)
    assert "profiles" in str(e.value)
