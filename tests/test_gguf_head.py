"""A GGUF Q4_0 file's output head is Q6_K under llama.cpp's kernel families
(decode_reads.head_bits), pinned to hand arithmetic on the roofline."""

from __future__ import annotations

import pytest
from ideal_factors import IDEAL

from planner.catalog import load_catalog
from planner.estimator.decode_reads import GGUF_HEAD_BITS
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.perf import decode_step_seconds

CAT = load_catalog()

# Zero overheads, the weights at 0.8 of the peak: the head's read shows alone.
FACTORS = {**IDEAL, "bandwidth": 0.8}


def _extra_seconds(weights: str) -> float:
    """Seconds a llama.cpp build's step takes beyond a serving-grid engine's, at no context
    (no KV read, whose rate also differs by family)."""
    m = CAT.model("llama-2-7b")
    dev = device_table([CAT.accelerator("rtx-4090")], {"consumer": FACTORS})
    fmt = weight_format(weights)

    def step(kernels: str) -> float:
        return float(decode_step_seconds(m, fmt, 2.0, dev, batch=1, context=0, kernels=kernels)[0])

    return step("llama.cpp") - step("serving-grid")


def test_q4_0_head_is_q6_k_under_llama_cpp() -> None:
    # block_q6_K: 210 bytes per 256 weights (ggml-common.h) = 6.5625 bits; block_q4_0 4.5.
    bits = GGUF_HEAD_BITS
    assert bits == pytest.approx(6.5625)
    # Llama 2 7B's head, 32,000 x 4,096 weights, 2.0625 bits more each: 33.79 MB more read
    # at 0.8 of an RTX 4090's 1,008 GB/s (datasheet) = 41.9 us per token.
    extra = 32000 * 4096 * (bits - 4.5) / 8
    assert extra == pytest.approx(33.79e6, rel=1e-3)
    assert _extra_seconds("q4_0") == pytest.approx(extra / (1008e9 * 0.8), rel=1e-6)


def test_k_quant_mixes_keep_their_whole_file_bits() -> None:
    # The Q4_K_M mix's bits already hold its Q6_K head: no engine reads it differently.
    assert _extra_seconds("q4_k_m") == pytest.approx(0.0, abs=1e-12)
