"""Training memory of a mixture-of-experts model: the routed experts' weights, gradients and
optimizer states split over the expert-parallel group the all-to-all is charged at
(expert_parallel.job_expert_parallel), the rest under tensor parallelism and ZeRO as a dense
model's (Megatron-Core MoE docs, "MoE parallel folding"; DeepSeek-V3 report, section 3.4)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hostile_cli import run

from planner.catalog import load_catalog
from planner.estimator.expert_parallel import job_expert_parallel, routed_expert_params
from planner.estimator.memory import TrainingSetup, training_memory, training_memory_total

ROOT = Path(__file__).resolve().parents[1]
# Qwen3-30B-A3B config.json: 48 layers, all MoE, 128 experts of intermediate size 768, hidden
# 2048, gated MLP (gate, up, down): 48 x 128 x 3 x 2048 x 768 routed-expert parameters.
ROUTED = 48 * 128 * 3 * 2048 * 768  # 28,991,029,248
TOTAL = 30_532_110_336  # model_params.total_params, the "30.5B" of the model card
REST = TOTAL - ROUTED  # attention, norms, router, embedding and head: 1,541,081,088


def _qwen3_setup(**kw: int) -> TrainingSetup:
    return TrainingSetup(optimizer="adamw", **kw)  # type: ignore[arg-type]


def test_routed_expert_params_by_hand() -> None:
    cat = load_catalog()
    assert routed_expert_params(cat.model("qwen3-30b-a3b")) == ROUTED
    # Mixtral 8x7B config.json: 32 layers of 8 experts, intermediate 14,336, hidden 4,096.
    assert routed_expert_params(cat.model("mixtral-8x7b")) == 32 * 8 * 3 * 4096 * 14336
    assert routed_expert_params(cat.model("llama-3.1-8b")) == 0


def test_qwen3_30b_at_ep8_zero1_on_eight_h100s_by_hand() -> None:
    """8 H100 SXM in one NVLink domain of 8 at data-parallel 8, ZeRO-1 (Megatron-Bridge's
    Qwen3-30B-A3B recipe runs EP8 in one 8-GPU server): EP 8. Mixed-precision AdamW (ZeRO
    paper: 2 + 2 + 12 bytes per parameter): 16-bit weights 2 x REST + 2 x ROUTED / 8 =
    10,329,919,488 B, gradients alike; optimizer states sharded over all 8 ranks either way,
    12 x TOTAL / 8 = 45,798,165,504 B. Replicated experts held 2 x TOTAL = 61.1 GB of weights."""
    m = load_catalog().model("qwen3-30b-a3b")
    assert job_expert_parallel(m, 8, 8) == 8
    mem = training_memory(m, _qwen3_setup(zero_stage=1, data_parallel=8, scale_up_domain=8))
    assert mem.weights == pytest.approx(2 * REST + 2 * ROUTED / 8, rel=1e-12)
    assert mem.weights == pytest.approx(10_329_919_488, rel=1e-12)
    assert mem.gradients == pytest.approx(mem.weights, rel=1e-12)
    assert mem.optimizer == pytest.approx(12 * TOTAL / 8, rel=1e-12)
    # Without a scale-up domain the experts stay whole on every device, as before.
    whole = training_memory(m, _qwen3_setup(zero_stage=1, data_parallel=8, scale_up_domain=1))
    assert whole.weights == pytest.approx(2 * TOTAL, rel=1e-12)


def test_tensor_parallel_two_and_zero_over_the_expert_data_parallel_ranks() -> None:
    """tp 2 x dp 8 = 16 devices in NVLink domains of 8: EP 8 (the largest divisor of 128 up to
    the domain), so the experts split 8 ways, the rest 2 ways; ZeRO shards the experts over the
    16 / 8 = 2 remaining ranks, the rest over dp 8. ZeRO-1: weights REST + 2 ROUTED / 8,
    optimizer 12 TOTAL / 16. ZeRO-3: every state 1 / 16, as for a dense weight."""
    m = load_catalog().model("qwen3-30b-a3b")
    one = training_memory(
        m, _qwen3_setup(zero_stage=1, data_parallel=8, tensor_parallel=2, scale_up_domain=8)
    )
    assert one.weights == pytest.approx(REST + 2 * ROUTED / 8, rel=1e-12)
    assert one.optimizer == pytest.approx(12 * TOTAL / 16, rel=1e-12)
    three = training_memory(
        m, _qwen3_setup(zero_stage=3, data_parallel=8, tensor_parallel=2, scale_up_domain=8)
    )
    assert three.weights == pytest.approx(2 * TOTAL / 16, rel=1e-12)
    assert three.gradients == pytest.approx(2 * TOTAL / 16, rel=1e-12)


def test_the_vectorized_total_matches_the_breakdown_per_degree() -> None:
    """training_memory_total (the design enumeration) and training_memory (the plan builder and
    the verifier) agree at every data-parallel degree, where EP grows with the stage."""
    m = load_catalog().model("qwen3-30b-a3b")
    setup = _qwen3_setup(zero_stage=1, scale_up_domain=8)
    d = np.array([1, 2, 3, 4, 8, 22], dtype=np.int64)
    got = training_memory_total(m, setup, d, layers=24, last=False)
    for n, total in zip(d.tolist(), got.tolist(), strict=True):
        at = TrainingSetup(**{**setup.__dict__, "data_parallel": n})
        assert total == pytest.approx(training_memory(m, at, 24, last=False).total, rel=1e-12)
    # More data-parallel ranks never hold more: EP grows to the domain, then stays.
    assert np.all(np.diff(got) <= 0)


def test_a_dense_model_does_not_depend_on_the_domain() -> None:
    m = load_catalog().model("llama-3.1-8b")
    for z in (0, 1, 2, 3):
        a = training_memory(m, _qwen3_setup(zero_stage=z, data_parallel=8, scale_up_domain=1))
        b = training_memory(m, _qwen3_setup(zero_stage=z, data_parallel=8, scale_up_domain=72))
        assert a == b


def test_a_plan_at_ep8_holds_split_experts_and_a_replicated_figure_fails_verify(
    tmp_path: Path,
) -> None:
    """Qwen3-30B-A3B pre-training on H100 SXM with one stage of one device per replica (pure
    data parallelism, EP 8 in each 8-GPU server): each device holds 2 x REST + 2 x ROUTED / 8
    bytes of weights (ZeRO-1 leaves weights whole). With every expert replicated the job did not
    fit at all (61.1 GB of weights and as much of gradients on an 80 GB device). A plan file that
    states the replicated figure fails `planner verify` (exit 5) naming the field."""
    plan_file = tmp_path / "plan.json"
    code, out = run(
        "solve", str(ROOT / "problems" / "train-13b-2m.yaml"),
        "--set", "workloads.0.model=qwen3-30b-a3b",
        "--set", "constraints.allowed_devices=[h100-sxm]",
        "--set", "constraints.max_stages=1",
        "--set", "constraints.max_tensor_parallel=1",
        "--out", str(plan_file), "--format", "json", "--no-timings",
    )  # fmt: skip
    assert code == 0, out
    doc = json.loads(plan_file.read_text())
    [stage] = doc["workloads"][0]["stages"]
    assert stage["tp"] == 1 and doc["workloads"][0]["replicas"] >= 8
    mem = stage["memory_bytes"]
    assert mem["weights"] == pytest.approx(2 * REST + 2 * ROUTED / 8, rel=1e-9)
    code, out = run("verify", str(plan_file), "--no-resolve")
    assert code == 0, out
    mem["total"] += 2 * TOTAL - mem["weights"]
    mem["weights"] = 2 * TOTAL
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(doc))
    code, out = run("verify", str(bad), "--no-resolve")
    assert code == 5, out
    assert "memory_bytes" in out, out
