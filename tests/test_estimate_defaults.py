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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # Once optimizer states sharded over a million ranks, reported as 1 device.
        (["--task", "full", "--dp", "1000000"], "--dp 1,000,000: at most 4,096"),
        # Once 540 GB of adapters; problem files refuse ranks above 4,096.
        (["--task", "lora", "--lora-rank", "100000"], "--lora-rank 100,000: at most 4,096"),
        # Once "53,687,091,199,999,991,611,392.0 GB" of KV cache.
        (["--batch", "99999999999999999999999"], "at most 65,536: more sequences than any"),
        (["--task", "full", "--seq", "9999999999"], "--seq 9,999,999,999: at most 2,097,152"),
        (["--zero", "3"], "--dp and --zero shard training state"),
        # As a problem file's seq_len: longer than Llama 3.1 8B's 131,072 positions.
        (["--task", "lora", "--seq", "200000"], "--seq 200,000 is longer than llama-3.1-8b's"),
    ],
)
def test_options_past_the_problem_files_limits_are_refused(args: list[str], message: str) -> None:
    r = runner.invoke(app, ["estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", *args])
    assert r.exit_code == 2 and message in " ".join(r.output.split()), r.output


def test_a_given_zero_stage_and_dp_are_honoured() -> None:
    base = ("-m", "llama-3.1-8b", "-d", "h100-sxm", "--task", "full")
    # Left out: ZeRO-3 over the fewest devices that hold 8B's 157 GB of training state.
    assert _estimate(*base)["parallelism"] == "data-parallel 3 (ZeRO-3)"
    # Given, ZeRO-1 (once silently replaced by 3): 32 GB of weights and gradients on each
    # rank, 96 GB of AdamW state shared out, 6 devices.
    one = _estimate(*base, "--zero", "1")
    assert (one["devices_needed"], one["parallelism"]) == (6, "data-parallel 6 (ZeRO-1)")
    # --dp fixes the devices; the memory is per rank of them, the stage the problems' default.
    four = _estimate(*base, "--dp", "4", "--zero", "3")
    assert four["devices_needed"] == 4 and four["memory_per_device_of_ranks"] == 4
    assert four["tokens_per_s"] == pytest.approx(4 / 3 * _estimate(*base)["tokens_per_s"])
    short = _estimate(*base, "--dp", "4")
    assert short["devices_needed"] == 0 and short["power_w"] is None
    assert "at --dp 4 with ZeRO-1" in short["does_not_fit_because"]


def test_a_cache_past_one_device_per_layer_takes_tensor_parallel_stages() -> None:
    # 200 sequences of 128k tokens: 3.4 TB of KV cache, more than 32 stages of one H100 hold
    # (once "no device count we tried holds it"); stages of eight hold it on 48.
    e = _estimate("-m", "llama-3.1-8b", "-d", "h100-sxm", "--batch", "200", "--context", "131072")
    assert (e["devices_needed"], e["parallelism"]) == (48, "tensor-parallel 8 x pipeline 6")
    # Nothing holds it: no time to first token nor power as if something did, and why.
    pi = ["-m", "llama-3.2-1b", "-d", "raspberry-pi-5-8gb", "--batch", "64"]
    r = runner.invoke(app, ["estimate", *pi, "--context", "131072"])
    out = " ".join(r.output.split())
    assert r.exit_code == 3 and "time to first token" not in out and "power" not in out
    assert "no performance figures: by memory alone it would take about" in out


def test_the_default_training_sequence_fits_the_models_context() -> None:
    """TinyLlama holds 2,048 positions: the default --seq (4,096) takes the model's context
    rather than a length it was never trained on, and says nothing the user did not write."""
    r = runner.invoke(app, ["estimate", "-m", "tinyllama-1.1b", "-d", "rtx-4090", "--task", "lora"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # Each of these once printed the default estimate, exit 0, the option dropped: 64
        # sequences of 32k context asked of a full fine-tune gave its 4,096-token micro-batch of 1.
        (["--task", "full", "--batch", "64", "--context", "32768"], "--context, --batch shape a"),
        (["--task", "qlora", "--weights", "nf4"], "--weights shape a serving estimate"),
        (["--task", "lora", "--tp", "2"], "--tp shape a serving estimate"),
        (["--seq", "8192", "--micro-batch", "4"], "--seq, --micro-batch shape a training run"),
        (["--tokens", "2e9"], "--tokens shape a training run"),
        (["--optimizer", "sgd", "--lora-rank", "8"], "--optimizer, --lora-rank shape a training"),
        (["--task", "full", "--lora-rank", "64"], "a --task full run trains every weight"),
    ],
)
def test_an_option_the_task_does_not_read_is_refused(args: list[str], message: str) -> None:
    r = runner.invoke(app, ["estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", *args])
    assert r.exit_code == 2 and message in " ".join(r.output.split()), r.output


def test_the_options_of_the_task_are_accepted() -> None:
    assert _estimate("-m", "llama-3.1-8b", "-d", "h100-sxm", "--batch", "8", "--tp", "2")
    lora = ("-m", "llama-3.1-8b", "-d", "h100-sxm", "--task", "lora", "--lora-rank", "8")
    assert _estimate(*lora, "--seq", "2048", "--micro-batch", "2", "--tokens", "1e9")
