"""A mixture-of-experts block's fixed time per decode step: the kernels it adds to a dense block.

Kernel counts from llama.cpp's graph builders (planner/estimator/moe_kernels.py): a dense block
runs 19 kernels; a MoE block 4 routing kernels (router product, softmax, top-k, gather of the
weights) plus k (the weighting of the k experts' outputs and k - 1 adds) more, and 5 more per
shared expert.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.moe_kernels import layer_overhead_scale, moe_extra_kernels
from planner.estimator.perf import _decode_roofline, decode_layer_seconds

CAT = load_catalog()


def test_dense_model_keeps_the_fitted_time_per_block() -> None:
    m = CAT.model("llama-3.1-8b")
    assert moe_extra_kernels(m) == 0
    assert layer_overhead_scale(m) == 1.0


def test_kernel_counts_follow_the_experts_a_token_visits() -> None:
    # Qwen3-235B-A22B: 8 experts per token, no shared expert, every block MoE (config.json):
    # 4 + 8 = 12 extra kernels; 1 + 12 / 19 = 1.6316.
    qwen = CAT.model("qwen3-235b-a22b")
    assert moe_extra_kernels(qwen) == 12
    assert layer_overhead_scale(qwen) == pytest.approx(1 + 12 / 19)
    # gpt-oss-120b: 4 experts per token: 4 + 4 = 8; 1 + 8 / 19 = 1.4211.
    assert layer_overhead_scale(CAT.model("gpt-oss-120b")) == pytest.approx(1 + 8 / 19)
    # Kimi K2: 8 experts per token and 1 shared expert (4 + 8 + 5 = 17) in 60 of its 61
    # blocks (first_dense_layers 1): 1 + 60 / 61 x 17 / 19 = 1.8801.
    kimi = CAT.model("kimi-k2")
    assert moe_extra_kernels(kimi) == 17
    assert layer_overhead_scale(kimi) == pytest.approx(1 + 60 / 61 * 17 / 19)


def test_decode_block_charges_the_scaled_time_per_block() -> None:
    """Qwen3-235B-A22B in Q2_K on the DGX Spark at batch 1: the block's time is the roofline
    plus the device's fitted time per block x 1.6316 plus the dequantization work."""
    m = CAT.model("qwen3-235b-a22b")
    fmt = weight_format("q2_k")
    dev = device_table([CAT.accelerator("dgx-spark")])
    weights, t_mem, t_cmp = _decode_roofline(m, fmt, 2.0, dev, 1.0, 256.0, 1)
    dequant = weights * dev.dequant_ops_per_weight / dev.fp32_flops
    expected = np.maximum(t_mem, t_cmp) + dev.layer_overhead_s * (1 + 12 / 19) + dequant
    got = decode_layer_seconds(m, fmt, 2.0, dev, batch=1.0, context=256.0)
    assert got[0] == pytest.approx(float(expected[0]), rel=1e-12)
    # The added time is the 12 kernels' share of the fitted per-block time, nothing else.
    plain = np.maximum(t_mem, t_cmp) + dev.layer_overhead_s + dequant
    assert got[0] - plain[0] == pytest.approx(float(dev.layer_overhead_s[0]) * 12 / 19)
