"""Training a mixture-of-experts model: the routing work FLOPs do not count (perf.
moe_routing_seconds_per_token, the `moe_routed_ns` and `moe_fused_share` factors fitted by
calibration/fit.py)."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.estimator.devices import device_table
from planner.estimator.efficiency import load_efficiency
from planner.estimator.formats import weight_format
from planner.estimator.perf import (
    moe_routing_seconds_per_token,
    routed_elements_per_token,
    training_flops_per_token,
    training_tokens_per_second,
)


def _tokens_per_s(
    model: str, device: str, fmt: str = "bf16", seq: int = 4096, **factors: float
) -> float:
    cat = load_catalog()
    table = device_table([cat.accelerator(device)], {device: factors} if factors else None)
    return float(
        training_tokens_per_second(
            cat.model(model), table, seq_len=seq, precision_fmt=weight_format(fmt)
        )[0]
    )


def test_routed_elements_are_layers_times_experts_per_token_times_hidden() -> None:
    """Qwen3-30B-A3B (config.json): 48 layers, all MoE, 8 experts per token, hidden 2048.
    DeepSeek-V3: 61 layers of which the first 3 are dense, 8 routed experts per token (the
    shared expert routes nothing), hidden 7168. A dense model routes nothing."""
    cat = load_catalog()
    assert routed_elements_per_token(cat.model("qwen3-30b-a3b")) == 48 * 8 * 2048
    assert routed_elements_per_token(cat.model("deepseek-v3")) == (61 - 3) * 8 * 7168
    assert routed_elements_per_token(cat.model("llama-3.1-8b")) == 0


def test_routing_time_adds_to_the_flops_at_mfu() -> None:
    """Hand arithmetic, Qwen3-30B-A3B on one H100 SXM at 4,096 tokens with the factors set:
    seconds per token = FLOPs / (989 TFLOP/s x MFU) + 786,432 routed elements x 0.2 ns, the
    same time on a B200 (the routing time does not follow the part's bandwidth)."""
    cat = load_catalog()
    m, h100 = cat.model("qwen3-30b-a3b"), cat.accelerator("h100-sxm")
    flops = training_flops_per_token(m, 4096, "full", "selective")
    peak = h100.dense_tflops.bf16 * 1e12  # type: ignore[operator]
    got = _tokens_per_s("qwen3-30b-a3b", "h100-sxm", training_mfu=0.4, moe_routed_ns=0.2)
    assert got == pytest.approx(1.0 / (flops / (peak * 0.4) + 48 * 8 * 2048 * 0.2e-9), rel=1e-9)
    # With no fitted time the model still pays the 48 bytes per element its memory must move;
    # a dense model never pays routing.
    floor = 48 * 8 * 2048 * 48 / (h100.memory.usable_bandwidth_gb_s * 1e9)
    free = _tokens_per_s("qwen3-30b-a3b", "h100-sxm", training_mfu=0.4, moe_routed_ns=0)
    assert free == pytest.approx(1.0 / (flops / (peak * 0.4) + floor), rel=1e-9)
    dense = [_tokens_per_s("llama-3.1-8b", "h100-sxm", moe_routed_ns=t) for t in (0, 0.2, 5)]
    assert dense[0] == dense[1] == dense[2]
    b200 = device_table([cat.accelerator("b200")], {"b200": {"moe_routed_ns": 0.2}})
    assert float(moe_routing_seconds_per_token(m, b200)[0]) == pytest.approx(786_432 * 0.2e-9)


def test_a_fused_dispatcher_pays_its_share_of_the_routing_time() -> None:
    """A run whose dispatcher fuses the permutation into its all-to-all (DeepEP) pays
    moe_fused_share of the time: 786,432 elements x 0.2 ns x 0.4 for Qwen3-30B-A3B. The shipped
    share is below 1: NeMo AutoModel's DeepEP runs measured faster routing than Megatron-Core's
    default dispatcher on the same H100s (calibration/measurements.yaml)."""
    cat = load_catalog()
    m = cat.model("qwen3-30b-a3b")
    table = device_table(
        [cat.accelerator("h100-sxm")], {"h100-sxm": {"moe_routed_ns": 0.2, "moe_fused_share": 0.4}}
    )
    fused = float(moe_routing_seconds_per_token(m, table, fused=True)[0])
    assert fused == pytest.approx(786_432 * 0.2e-9 * 0.4, rel=1e-12)
    assert float(moe_routing_seconds_per_token(m, table)[0]) == pytest.approx(786_432 * 0.2e-9)
    assert 0 < load_efficiency().classes["datacenter"].moe_fused_share < 1


@pytest.mark.parametrize(
    ("model", "device", "fmt", "measured"),
    [
        # calibration/measurements.yaml: pre-training tokens/s per GPU of the same model on the
        # same part by different stacks. Megatron-Bridge (NeMo 25.11, Megatron-Core), NeMo
        # AutoModel (PyTorch FSDP2, balanced gate), DGX Cloud recipes (NeMo 25.04).
        # AutoModel in BF16 on 8 GPUs; Megatron-Bridge in FP8 on 16 (its BF16 runs are no
        # faster than its FP8 ones, so the slowest stack's BF16 figure is at most this).
        ("qwen3-30b-a3b", "h100-sxm", "bf16", (5_275, 12_040)),
        ("gpt-oss-120b", "h100-sxm", "bf16", (5_630, 7_626)),  # Megatron-Bridge, AutoModel
        ("deepseek-v3", "h100-sxm", "bf16", (630, 669, 865, 1_002)),  # DGX Cloud, AutoModel
        ("deepseek-v3", "b200", "fp8", (2_139,)),  # Megatron-Bridge, 256 GPUs, MXFP8
    ],
)
def test_shipped_factors_train_moe_models_within_published_runs(
    model: str, device: str, fmt: str, measured: tuple[float, ...]
) -> None:
    """With the shipped factors, MoE pre-training runs come out within the range published
    stacks measure on that part, widened by a quarter (at a dense model's MFU they came out
    1.2-7.8x too fast). Stacks disagree: on one H100, Qwen3-30B-A3B runs at 5,275 tokens/s per
    GPU under Megatron-Bridge in FP8 and 12,040 under AutoModel in BF16, so a figure can sit
    only between them. These rows are in the shipped fit; the calibration report scores them
    held out."""
    got = _tokens_per_s(model, device, fmt)
    assert 0.75 * min(measured) <= got <= 1.25 * max(measured)
    assert got < _tokens_per_s(model, device, fmt, moe_routed_ns=0)


def test_no_part_routes_faster_than_its_memory_moves_the_routing_passes() -> None:
    """48 bytes per routed element (8 passes of 2 bytes forward, 16 backward) at the part's
    bandwidth bound the fitted time from below: a Raspberry Pi 5 (17.1 GB/s listed) routes
    Qwen3-30B-A3B's 786,432 elements per token in no less than 786,432 x 48 bytes / its usable
    bandwidth; an H100 SXM (3.35 TB/s, 0.014 ns per element) takes the fitted time."""
    cat = load_catalog()
    m = cat.model("qwen3-30b-a3b")
    pi, h100 = cat.accelerator("raspberry-pi-5-16gb"), cat.accelerator("h100-sxm")
    table = device_table([pi, h100])
    got = moe_routing_seconds_per_token(m, table)
    floor = 786_432 * 48 / (pi.memory.usable_bandwidth_gb_s * 1e9)
    assert float(got[0]) == pytest.approx(floor, rel=1e-12)
    assert float(got[1]) == pytest.approx(786_432 * float(table.moe_routed_s[1]), rel=1e-12)
    assert float(table.moe_routed_s[1]) > 48 / (h100.memory.usable_bandwidth_gb_s * 1e9)


def test_every_generation_of_a_class_routes_in_the_same_time() -> None:
    """The routing time is one per class, fitted on every generation's runs at once: fitted per
    generation as bytes at the part's bandwidth, Blackwell's runs needed 2.8x Hopper's bytes at
    2.4x its bandwidth. A100, H100, B200 and MI300X take the datacenter class's figure; the
    efficiency file carries no per-generation routing entry."""
    cat = load_catalog()
    shipped = load_efficiency()
    ids = ("a100-80gb-sxm", "h100-sxm", "b200", "mi300x")
    table = device_table([cat.accelerator(d) for d in ids])
    assert list(table.moe_routed_s) == [shipped.classes["datacenter"].moe_routed_ns * 1e-9] * 4
    assert not any("moe_routed_ns" in v for v in shipped.architectures.values())


def test_narrow_experts_lose_more_to_routing_than_wide_ones() -> None:
    """On the same part, Qwen3-30B-A3B (experts of width 768) trains at a smaller share of its
    FLOP-only rate than gpt-oss-120b (width 2,880): routing grows with the hidden size, the
    experts' FLOPs with their width too."""
    share = {}
    for model in ("qwen3-30b-a3b", "gpt-oss-120b"):
        share[model] = _tokens_per_s(model, "h100-sxm") / _tokens_per_s(
            model, "h100-sxm", moe_routed_ns=0
        )
    assert share["qwen3-30b-a3b"] < share["gpt-oss-120b"] < 1.0


def test_estimate_says_when_routing_binds_a_moe_training_run() -> None:
    """`planner estimate --task full` on Qwen3-30B-A3B (narrow experts: routing takes most of a
    token's time at the shipped factors) says routing binds it; a dense model stays
    compute-bound."""
    import json

    from typer.testing import CliRunner

    from planner.cli import app

    def bound(model: str) -> str:
        args = ["estimate", "-m", model, "-d", "h100-sxm", "--task", "full"]
        r = CliRunner().invoke(app, [*args, "--format", "json"])
        assert r.exit_code in (0, 3), r.output
        doc = json.loads(r.output)
        return str((doc[0] if isinstance(doc, list) else doc)["bound"])

    assert bound("qwen3-30b-a3b") == "routing"
    assert bound("llama-3.1-8b") == "compute"
