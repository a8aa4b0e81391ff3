"""`estimate` and `solve` share one set of defaults; `estimate --tp`; never more stages than
layers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.schema.problem import Horizon, Problem, default_recompute

runner = CliRunner()


def _estimate(*args: str) -> Any:
    r = runner.invoke(app, ["estimate", *args, "--format", "json"])
    assert r.exit_code in (0, 3), r.output
    return json.loads(r.output)


def _training_problem(method: str) -> Problem:
    return Problem.model_validate(
        {
            "name": "t",
            "workloads": [
                {
                    "name": "ft",
                    "kind": "training",
                    "model": "llama-3.1-8b",
                    "method": method,
                    "token_budget": 1e8,
                }
            ],
        }
    )


def test_the_estimate_defaults_are_the_problem_defaults() -> None:
    import inspect

    from planner.cli import estimate

    params = inspect.signature(estimate).parameters
    hz = Horizon()
    for option, value in (
        ("lifetime_years", hz.lifetime_years),
        ("utilization", hz.utilization),
        ("electricity", hz.electricity_usd_per_kwh),
        ("pue", hz.pue),
    ):
        assert params[option].default == value, option
    for method in ("full", "lora", "qlora"):
        w = _training_problem(method).workloads[0]
        assert w.recompute == default_recompute(method)  # type: ignore[union-attr]
        assert params["zero"].default == w.zero_stage  # type: ignore[union-attr]
    # QLoRA checkpoints every layer in both commands (it was selective in solve, full in estimate).
    assert default_recompute("qlora") == "full" and default_recompute("full") == "selective"


def test_qlora_activations_agree_between_estimate_and_an_explicit_full_recompute() -> None:
    implicit = _estimate("-m", "llama-3.1-8b", "-d", "rtx-4090", "--task", "qlora")
    explicit = _estimate(
        "-m", "llama-3.1-8b", "-d", "rtx-4090", "--task", "qlora", "--recompute", "full"
    )
    assert implicit["memory_bytes"] == explicit["memory_bytes"]


def test_tp_sets_the_degree_and_adds_stages_only_when_needed() -> None:
    # Llama 3.1 70B in FP16 (141 GB of weights) on A100 80GB: 8-way tensor parallel in one HGX.
    tp8 = _estimate("-m", "llama-3.1-70b", "-d", "a100-80gb-sxm", "--tp", "8")
    assert tp8["devices_needed"] == 8 and tp8["parallelism"] == "tensor-parallel 8"
    tp2 = _estimate("-m", "llama-3.1-70b", "-d", "a100-80gb-sxm", "--tp", "2")
    assert tp2["devices_needed"] == 2 and tp2["parallelism"] == "tensor-parallel 2"
    assert tp8["ms_per_token"] < tp2["ms_per_token"]
    # Llama 3.1 405B in FP16 (810 GB) does not fit one group of eight 80 GB cards: two stages.
    big = _estimate("-m", "llama-3.1-405b", "-d", "a100-80gb-sxm", "--tp", "8")
    assert big["devices_needed"] == 16
    assert big["parallelism"] == "tensor-parallel 8 x pipeline 2"
    one = _estimate("-m", "llama-3.1-70b", "-d", "a100-80gb-sxm", "--tp", "1")
    assert one["parallelism"] == "pipeline 2" and one["devices_needed"] == 2
    r = runner.invoke(app, ["estimate", "-m", "llama-3.1-70b", "-d", "a100-80gb-sxm", "--tp", "3"])
    assert r.exit_code == 2 and "divides them" in r.output


@pytest.mark.parametrize("device", ["rtx-3060-12gb", "raspberry-pi-5-8gb"])
def test_never_more_stages_than_layers(device: str) -> None:
    # Llama 3.2 1B has 16 layers; 64 sequences of 128k tokens need far more than 16 devices'
    # memory, which is "does not fit", not 128 pipeline stages of a fraction of a layer.
    e = _estimate("-m", "llama-3.2-1b", "-d", device, "--context", "131072", "--batch", "64")
    assert e["devices_needed"] == 0
    small = _estimate("-m", "llama-3.2-1b", "-d", device, "--context", "131072", "--batch", "2")
    assert 1 <= small["devices_needed"] <= 16
