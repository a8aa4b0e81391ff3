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
    return TrainingSetup(optimizer="adamw", **kw)


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
    the verifier) agree at every data-parallel degree, where EP follows the stage."""
    m = load_catalog().model("qwen3-30b-a3b")
    setup = _qwen3_setup(zero_stage=1, scale_up_domain=8)
    d = np.array([1, 2, 3, 4, 8, 22], dtype=np.int64)
    got = training_memory_total(m, setup, d, layers=24, last=False)
    for n, total in zip(d.tolist(), got.tolist(), strict=True):
        at = TrainingSetup(**{**setup.__dict__, "data_parallel": n})
        assert total == pytest.approx(training_memory(m, at, 24, last=False).total, rel=1e-12)
    # Up to the domain more ranks never hold more (EP grows with them); 22 ranks hold whole
    # expert-parallel groups of 2 only (job_expert_parallel divides 22 and 128), so more
    # per device than 8 ranks at EP8.
    assert np.all(np.diff(got[:5]) <= 0)
    assert got[5] > got[4]


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


def test_expert_gradients_reduce_over_their_own_group_by_hand() -> None:
    """tp 1 x dp 16 H100s, one stage (EP 8 in each 8-GPU server): the 16-bit gradients of the
    non-expert REST parameters ring-all-reduce over 16 ranks, those of the experts (1/8 per
    device) over the 16 / 8 = 2 ranks holding the same experts (Patarasuk & Yuan 2009: each rank
    moves 2 (n - 1) / n of the buffer, 2 (n - 1) latency steps). Replicated experts reduced
    all 2 x TOTAL bytes over 16."""
    from planner.estimator.devices import device_table
    from planner.estimator.network import network_link
    from planner.estimator.training_designs import _expert_gradients, job_tokens_per_s
    from planner.load import load_problem
    from planner.schema.problem import TrainingWorkload

    cat = load_catalog()
    problem = load_problem(
        ROOT / "problems" / "train-13b-2m.yaml", ["workloads.0.model=qwen3-30b-a3b"]
    )
    (w,) = problem.workloads
    assert isinstance(w, TrainingWorkload)
    m, net = cat.model("qwen3-30b-a3b"), network_link(problem, cat)
    dev = device_table([cat.accelerator("h100-sxm")], links=cat.links)
    D = np.array([16], dtype=np.int64)
    experts = _expert_gradients(m, w, dev, np.array([0]), 1, D)
    assert experts is not None and experts[0] == ROUTED and float(experts[1][0, 0]) == 8.0
    base = np.array([[5000.0]])
    bw, lat = net.bandwidth_gb_s * 1e9, net.latency_us * 1e-6
    old_ar = 2 * 15 / 16 * 2 * TOTAL / bw + 2 * 15 * lat
    new_ar = (2 * 15 / 16 * 2 * REST / bw + 2 * 15 * lat) + (
        2 * 1 / 2 * 2 * ROUTED / 8 / bw + 2 * lat
    )
    replicated = job_tokens_per_s(base, w, TOTAL, net, 1, 1, D)
    split = job_tokens_per_s(base, w, TOTAL, net, 1, 1, D, experts=experts)
    step_tokens = w.seq_len * w.micro_batch * 4 * 16
    compute = step_tokens / float(replicated[0, 0]) - old_ar
    assert float(split[0, 0]) == pytest.approx(step_tokens / (compute + new_ar), rel=1e-9)
