"""The engine as an input: an older llama.cpp release's fixed times (`llama.cpp-2024`).

The calibration table's 2023-2024 llama.cpp tables (the xd-gpu-bench RunPod tables, builds 1680
and 2833-2843) name `llama.cpp-2024` as their engine; calibration/fit.py fits that release a time
per layer and per step on top of its device class's overheads, which it fits on the current
builds' rows (calibration/README.md, "Engine releases"). The shipped figures are the efficiency
file's `engines` entry. These tests pin what the tool does with them: the figures themselves,
their arithmetic in one estimate, the design columns against the plan builder's scalar figures,
and a verified plan that names the release."""

from __future__ import annotations

import json

import pytest
from design_figures import scalar_figures
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.estimator.designs import allowed_devices, inference_designs
from planner.estimator.efficiency import load_efficiency
from planner.estimator.support import engine_times
from planner.schema.problem import InferenceWorkload, Problem
from planner.solve import solve_problem
from planner.verify import verify

LAYER_US = load_efficiency().engines["llama.cpp-2024"].layer_overhead_us
STEP_US = load_efficiency().engines["llama.cpp-2024"].step_overhead_us


def test_the_release_carries_the_fitted_times_and_current_builds_none() -> None:
    cat = load_catalog()
    old = engine_times(cat, "llama.cpp-2024")
    assert old["engine_layer_s"] == pytest.approx(LAYER_US * 1e-6)
    assert old["engine_step_s"] == pytest.approx(STEP_US * 1e-6)
    assert LAYER_US > 0 or STEP_US > 0  # the fit found the old builds slower
    for engine in ("llama.cpp", "vllm", None):
        t = engine_times(cat, engine)
        assert t["engine_layer_s"] == 0.0 and t["engine_step_s"] == 0.0
    assert cat.engines["llama.cpp-2024"].named_only


def _estimate(*args: str) -> dict[str, object]:
    r = CliRunner().invoke(app, ["estimate", "-m", "llama-2-7b", "--format", "json", *args])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert isinstance(out, dict)
    return out


def test_an_estimate_on_the_old_release_adds_its_times_to_every_step() -> None:
    """Llama 2 7B (32 layers) in Q4_0 on an RTX 4090 at batch 1: the old release's step is the
    current one's plus 32 x layer time + step time (hand arithmetic on the shipped figures:
    32 x 19.3 us + 831 us = 1.449 ms at the figures of 2026-11-28)."""
    base = ["-d", "rtx-4090", "--weights", "q4_0", "--kv", "fp16", "--batch", "1"]
    new = _estimate(*base, "--engine", "llama.cpp")
    old = _estimate(*base, "--engine", "llama.cpp-2024")
    assert new["engine"] == "llama.cpp" and old["engine"] == "llama.cpp-2024"
    added_ms = (32 * LAYER_US + STEP_US) / 1e3
    assert float(old["ms_per_token"]) - float(new["ms_per_token"]) == pytest.approx(
        added_ms, rel=1e-6
    )
    assert float(old["tokens_per_s"]) < float(new["tokens_per_s"])


def _problem(engine: str, **extra: object) -> Problem:
    return Problem.model_validate(
        {
            "name": "engine-release",
            "workloads": [
                {
                    "name": "w",
                    "model": "llama-2-7b",
                    "weights": "q4_0",
                    "kv": "fp16",
                    "context_tokens": 1024,
                    "prompt_tokens": 512,
                    "output_tokens": 256,
                    "concurrency": "unbounded",
                    "engine": engine,
                    **extra,
                }
            ],
            "constraints": {"allowed_devices": ["rtx-4090", "rtx-3090"], "max_stages": 2},
            "market": {"conditions": ["new", "refurbished", "used"]},
        }
    )


def test_design_columns_and_the_plan_builder_agree_on_the_old_release() -> None:
    """Design enumeration (numpy columns) and the plan builder's scalar figures both add the
    release's time per layer and per step, pipelines of two stages included."""
    cat = load_catalog()
    prob = _problem("llama.cpp-2024")
    w = prob.workloads[0]
    assert isinstance(w, InferenceWorkload)
    ds = inference_designs(w, prob, cat, allowed_devices(prob, cat), prune=False)
    assert ds and {d.engine for d in ds} == {"llama.cpp-2024"}
    picked = ds[:10] + [d for d in ds if len(d.stages) == 2][:10]
    assert len(picked) > 10
    for d in picked:
        fig = scalar_figures(prob, d)
        assert fig.tokens_per_s == pytest.approx(d.tokens_per_s, rel=1e-9)
        assert fig.ms_per_token == pytest.approx(d.ms_per_token, rel=1e-9)


def test_a_plan_on_the_old_release_is_verified_at_its_own_speed() -> None:
    """The same demand under a 12 ms-per-token ceiling costs more on the old release (three RTX
    4090s for the current builds, six RTX 3090s at a third more for the old ones on 2026-11-28),
    and the verifier, which recomputes every figure, passes both plans."""
    cat = load_catalog()
    costs = {}
    for engine in ("llama.cpp", "llama.cpp-2024"):
        prob = _problem(engine, min_tokens_per_s=2000, max_ms_per_token=12)
        plan = solve_problem(prob, time_limit=30)
        assert plan.status == "OPTIMAL", engine
        verify(plan, prob, cat)
        costs[engine] = plan.objective
    assert costs["llama.cpp-2024"] > costs["llama.cpp"]
