"""The rate a decode reads the KV cache at, per engine kernel family (decode_reads.kv_read_seconds_per_byte),
pinned to hand arithmetic on the roofline."""

from __future__ import annotations

import pytest
from ideal_factors import IDEAL

from planner.catalog import load_catalog
from planner.estimator.decode_reads import LLAMA_CPP_KV_SHARE
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.perf import decode_step_seconds

CAT = load_catalog()

# Zero overheads, the weights at 0.8 of the peak: the KV read's own rate shows alone.
FACTORS = {**IDEAL, "bandwidth": 0.8}


def test_share_is_the_v100_attn_op_rate() -> None:
    # llama.cpp PR #6165, test-backend-ops ATTN on a V100 (900 GB/s): 45.56 us at 512 cached
    # tokens, 62.33 us at 1,024; 32 heads x 128 x 2 (K and V) x 2 bytes x 512 more tokens.
    extra_bytes = 32 * 128 * 2 * 2 * 512
    rate = extra_bytes / ((62.33 - 45.56) * 1e-6)
    assert rate / 900e9 == pytest.approx(LLAMA_CPP_KV_SHARE, abs=0.001)


@pytest.mark.parametrize(
    ("kernels", "share"),
    [
        ("llama.cpp", LLAMA_CPP_KV_SHARE),
        ("llama.cpp-dequantizing", LLAMA_CPP_KV_SHARE),  # the 2023-2024 builds: same attention
        (None, LLAMA_CPP_KV_SHARE),  # no engine: a current llama.cpp build's (on_llama_cpp)
        ("serving-grid", 0.8),  # vLLM, TensorRT-LLM, ...: the weights' factor
    ],
)
def test_kv_read_time_per_kernel_family(kernels: str | None, share: float) -> None:
    # Llama 3.1 8B keeps 8 KV heads of 128: 32 layers x 8 x 128 x 2 (K and V) x 2 bytes
    # = 131,072 bytes per token; 4,096 tokens more of context add 0.537 GB to the step, read
    # at `share` of an H100 SXM's 3.35 TB/s (datasheet).
    m = CAT.model("llama-3.1-8b")
    dev = device_table([CAT.accelerator("h100-sxm")], {"h100-sxm": FACTORS})
    fmt = weight_format("fp16")

    def step(context: float) -> float:
        return float(
            decode_step_seconds(m, fmt, 2.0, dev, batch=1, context=context, kernels=kernels)[0]
        )

    kv = 32 * 8 * 128 * 2 * 2 * 4096
    assert kv == 536_870_912
    assert step(4096) - step(0) == pytest.approx(kv / (3.35e12 * share), rel=1e-3)


def test_one_family_per_device_row() -> None:
    # Two rows of one device, one per family: each reads the cache at its own rate.
    m = CAT.model("llama-3.1-8b")
    h100 = CAT.accelerator("h100-sxm")
    dev = device_table([h100, h100], {"h100-sxm": FACTORS})
    fmt = weight_format("fp16")
    rows = ["llama.cpp", "serving-grid"]
    t = decode_step_seconds(m, fmt, 2.0, dev, batch=1, context=4096, kernels=rows)
    t0 = decode_step_seconds(m, fmt, 2.0, dev, batch=1, context=0, kernels=rows)
    kv = 32 * 8 * 128 * 2 * 2 * 4096
    assert float(t[0] - t0[0]) == pytest.approx(kv / (3.35e12 * LLAMA_CPP_KV_SHARE), rel=1e-3)
    assert float(t[1] - t0[1]) == pytest.approx(kv / (3.35e12 * 0.8), rel=1e-3)
