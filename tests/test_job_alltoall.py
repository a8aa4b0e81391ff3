"""The expert-parallel all-to-all the planner's own training jobs pay (training_layout
.job_expert_parallel and job_alltoall_seconds_per_token, charged by training_designs), pinned to
hand arithmetic, and a plan whose MoE training figure leaves it out failing verification.

The charge (DeepSeek-V3 technical report, section 3.2.2; Megatron-Core's alltoall token
dispatcher): per token and MoE layer, dispatch and combine in the forward and backward passes,
four transfers of one BF16 hidden vector per copy, a copy for each of the k routed experts held
by another device of the expert-parallel group: k (EP - 1) / EP copies inside the domain."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.network import network_link
from planner.estimator.perf import training_tokens_per_second, training_tp_seconds_per_layer
from planner.estimator.training_designs import (
    _expert_gradients,
    _trainable_params,
    job_tokens_per_s,
    training_job,
)
from planner.estimator.training_layout import (
    job_alltoall_seconds_per_token,
    job_expert_parallel,
)
from planner.load import load_problem
from planner.plan.io import dumps_plan, plan_document, plan_from_data
from planner.schema.problem import TrainingWorkload
from planner.solve import solve_problem
from planner.verify_plan import plan_failures

TRAIN = Path(__file__).resolve().parent.parent / "problems" / "train-13b-2m.yaml"
NVLINK4 = 450e9  # H100 SXM NVLink 4, bytes/s per direction (catalog/accelerators.yaml)
NDR = 50e9  # InfiniBand NDR 400 Gb/s per GPU (catalog/links.yaml `ib-ndr`), unused inside a domain

# Qwen3-30B-A3B (catalog/models.yaml, from its config.json): 48 MoE layers, hidden 2048,
# 128 experts, 8 routed per token.
QWEN3_VECTORS = 48 * 4 * 2048 * 2  # bytes per copy and token over the four transfers: 786,432


def test_expert_parallel_size_is_the_domain_up_to_the_experts() -> None:
    cat = load_catalog()
    qwen3, mixtral = cat.model("qwen3-30b-a3b"), cat.model("mixtral-8x7b")
    assert job_expert_parallel(qwen3, 8, 16) == 8  # EP8 in one 8-GPU server (Megatron-Bridge)
    assert job_expert_parallel(qwen3, 8, 4) == 4  # a stage of 4 devices holds EP4 at most
    # NVL72 with 96 devices in the stage: 64 divides 128 but not 96 (Megatron-Core refuses an
    # expert-parallel size that does not divide the ranks), so gcd(128, 96) = 32.
    assert job_expert_parallel(qwen3, 72, 96) == 32
    assert job_expert_parallel(qwen3, 72, 64) == 64  # the largest divisor of 128 <= 72
    assert job_expert_parallel(qwen3, 8, 12) == 4  # whole EP groups: 12 ranks hold EP4, not EP8
    assert job_expert_parallel(mixtral, 72, 96) == 8  # no more ranks than experts
    assert job_expert_parallel(qwen3, 1, 16) == 1  # no scale-up fabric: experts stay whole
    assert job_expert_parallel(cat.model("llama-3.1-8b"), 8, 16) == 1  # dense
    sixty = qwen3.model_copy(update={"moe": qwen3.moe.model_copy(update={"num_experts": 60})})
    assert job_expert_parallel(sixty, 8, 6) == 6  # 60 experts split evenly over 6
    # Over 8 ranks, 6 is no layout (8 / 6 expert-data-parallel groups): gcd(60, 8) = 4.
    assert job_expert_parallel(sixty, 8, 8) == 4


def test_expert_parallel_size_divides_the_stage_devices() -> None:
    """A stage of k x D devices (k tensor-parallel, D data-parallel) not a power of two: the
    expert-parallel group must divide it (Megatron-Core parallel_state: world size divisible
    by expert-tensor x expert-model x pipeline size), whatever the experts and the domain."""
    cat = load_catalog()
    for name in ("qwen3-30b-a3b", "mixtral-8x7b"):
        m = cat.model(name)
        for domain in (2, 4, 8, 72):
            for devices in range(1, 97):
                ep = job_expert_parallel(m, domain, devices)
                assert devices % ep == 0 and m.moe.num_experts % ep == 0 and ep <= domain
    mixtral = cat.model("mixtral-8x7b")  # 8 experts
    assert job_expert_parallel(mixtral, 8, 6) == 2  # k = 2, D = 3: EP4 would leave 6 / 4 ranks
    assert job_expert_parallel(mixtral, 8, 12) == 4  # gcd(8, 12)


def test_qwen3_on_h100_pays_seven_nvlink_copies_per_transfer() -> None:
    cat = load_catalog()
    m = cat.model("qwen3-30b-a3b")
    dev = device_table([cat.accelerator("h100-sxm")], links=cat.links)
    assert float(dev.scale_up_bytes_s[0]) == NVLINK4
    got = job_alltoall_seconds_per_token(m, dev, np.array([1, 2, 4, 8, 16]), NDR)[0]
    # EP 1, 2, 4, 8, 8: 8 x (EP - 1) / EP copies = 0, 4, 6, 7, 7.
    want = [QWEN3_VECTORS * c / NVLINK4 for c in (0.0, 4.0, 6.0, 7.0, 7.0)]
    assert got == pytest.approx(want, rel=1e-12)
    assert got[3] == pytest.approx(12.233e-6, rel=1e-4)  # 5,505,024 B / 450 GB/s
    dense = job_alltoall_seconds_per_token(cat.model("llama-3.1-8b"), dev, np.array([8]), NDR)
    assert float(dense[0, 0]) == 0.0


def _h100_job(model: str, tp: int, layers: list[int], dp: int) -> tuple[float, float]:
    """(training_job's tokens/s, job_tokens_per_s at the device's rate with no all-to-all)."""
    cat = load_catalog()
    problem = load_problem(TRAIN, [f"workloads.0.model={model}"])
    (w,) = problem.workloads
    assert isinstance(w, TrainingWorkload)
    acc = cat.accelerator("h100-sxm")
    got = training_job(w, problem, cat, acc, tp, layers, dp).tokens_per_s
    m, dev = cat.model(model), device_table([acc], links=cat.links)
    kw = {"seq_len": w.seq_len, "method": w.method, "recompute": w.recompute}
    base = training_tokens_per_second(m, dev, precision_fmt=weight_format("bf16"), **kw)
    tp_s = training_tp_seconds_per_layer(m, dev, w.seq_len * w.micro_batch, tp, w.recompute)
    D = np.array([dp], dtype=np.int64)
    net, trainable = network_link(problem, cat), _trainable_params(m, w)
    fullest = (max(layers), m.num_layers)
    # The expert gradients reduced over their own group (_expert_gradients), as the job does.
    experts = _expert_gradients(m, w, dev, np.array([0]), tp, D)
    plain = job_tokens_per_s(
        base[:, None], w, trainable, net, tp, len(layers), D, tp_s, fullest, experts
    )
    return got, float(plain[0, 0])


def test_a_moe_job_adds_the_all_to_all_to_each_tokens_time() -> None:
    cat = load_catalog()
    m = cat.model("qwen3-30b-a3b")
    dev = device_table([cat.accelerator("h100-sxm")], links=cat.links)
    base = float(
        training_tokens_per_second(m, dev, seq_len=4096, precision_fmt=weight_format("bf16"))[0]
    )
    # Two stages of 24 layers, 8 replicas: each stage's 8 devices hold EP8 (7 copies).
    got, plain = _h100_job("qwen3-30b-a3b", 1, [24, 24], 8)
    slower = (1.0 / base + QWEN3_VECTORS * 7 / NVLINK4) * base  # a token's time, over the base
    # The step is made of the devices' token time (bubble, tensor-parallel slot) plus the
    # gradient all-reduce, which the all-to-all does not touch: the job slows by less than
    # the per-token ratio but by more than nothing.
    assert plain / slower <= got < plain
    assert got == pytest.approx(plain / slower, rel=0.05)


def test_a_dense_job_is_unchanged() -> None:
    got, plain = _h100_job("llama-2-13b", 2, [20, 20], 4)
    assert got == plain  # exactly: no all-to-all, no double reciprocal


@pytest.mark.slow
def test_a_moe_plan_without_the_all_to_all_fails_verify() -> None:
    """Qwen3-30B-A3B pre-training on H100s: the plan's tokens/s is the job's with the
    all-to-all; the figure without it (what plans said before the charge), with its finish time,
    is caught naming the field."""
    cat = load_catalog()
    problem = load_problem(
        TRAIN,
        [
            "workloads.0.model=qwen3-30b-a3b",
            "constraints.allowed_devices=[h100-sxm]",
        ],
    )
    plan = solve_problem(problem, workers=1, seed=0)
    assert plan.status == "OPTIMAL"
    doc = json.loads(dumps_plan(plan_document(plan, problem, cat)))
    assert plan_failures(plan_from_data(doc, "moe"), cat) == []
    wp = doc["workloads"][0]
    layers = [s["layers"][1] - s["layers"][0] + 1 for s in wp["stages"]]
    got, plain = _h100_job("qwen3-30b-a3b", wp["stages"][0]["tp"], layers, wp["replicas"])
    assert wp["tokens_per_s"] == pytest.approx(got, rel=1e-9)
    assert plain > got * 1.02  # the charge is not lost in the tolerance
    wp["tokens_per_s"] = plain
    wp["finish_hours"] = 200e9 / plain / 3600  # the problem's token budget
    failures = plan_failures(plan_from_data(doc, "moe"), cat)
    assert any("workloads.0.tokens_per_s" in f for f in failures), failures
