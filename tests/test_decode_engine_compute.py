"""A decode step's matrix products run at the rate of the engine's kernel family
(planner.estimator.kernel_rates): llama.cpp's single-prompt factor on llama.cpp's families, the
batched serving figures of catalog serving.yaml on every other engine's, whose decode step is
then the serving grid's iteration with no prompt tokens."""

from __future__ import annotations

import numpy as np
import pytest
from ideal_factors import IDEAL

from planner.catalog import load_catalog
from planner.estimator.devices import DeviceTable, device_table
from planner.estimator.formats import weight_format
from planner.estimator.kernel_rates import matmul_flops
from planner.estimator.perf import decode_layer_seconds, head_seconds, serving_layer_seconds
from planner.estimator.prompt_time import engine_prefill_seconds, serving_prefill_seconds

CAT = load_catalog()
FP8 = weight_format("fp8")
# Ideal single-prompt and overhead factors (no fixed time, full bandwidth); no `compute`
# override, which device_table would also give the serving grid (a user's own figure).
FREE = {k: v for k, v in IDEAL.items() if k != "compute"}
# Llama 2 7B per block (catalog models.yaml): q, k, v, o 4 x 4096^2, MLP 3 x 4096 x 11008, two
# RMSNorm weight vectors 2 x 4096: 202,383,360 weights; K and V of 32 heads of 128, 8,192
# values per token per block.
PARAMS_PER_BLOCK = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
KV_PER_TOKEN = 2 * 32 * 128
H100_FP8 = 1978.9e12  # H100 SXM dense FP8 FLOP/s (NVIDIA H100 datasheet, accelerators.yaml)
H100_BW = 3350e9  # H100 SXM HBM3 bytes/s (datasheet)
FP8_SERVING = 0.48  # catalog serving.yaml batched_compute_low_precision, datacenter


def _h100(factors: dict[str, float] = FREE) -> DeviceTable:
    return device_table([CAT.accelerators["h100-sxm"]], {"h100-sxm": factors})


def test_a_serving_engine_decode_step_by_hand() -> None:
    # TensorRT-LLM's v0.6.1 row: Llama 2 7B in FP8 with an FP8 KV cache on one H100 SXM, batch
    # 768, 192 tokens of context on average. The linear layers: 768 x 2 x 202.38 M = 310.86
    # GFLOP at 1,978.9 x 0.48 = 949.9 TFLOP/s, 327.3 us (their 202 MB of weights take 60 us,
    # less). Attention reads 768 x 192 x 8,192 bytes = 1.208 GB at 3.35 TB/s, 360.6 us (its
    # 2.4 GFLOP take 2.5 us, less). The two kernels add: 687.9 us. At llama.cpp's single-prompt
    # factor the step would be one roofline over bytes and FLOPs.
    dev = _h100()
    t = decode_layer_seconds(
        CAT.model("llama-2-7b"), FP8, 1.0, dev, batch=768, context=192, kernels="serving-grid"
    )
    linear = 768 * 2 * PARAMS_PER_BLOCK / (H100_FP8 * FP8_SERVING)
    kv = 768 * 192 * KV_PER_TOKEN / H100_BW
    assert linear == pytest.approx(327.3e-6, rel=1e-3)
    assert kv == pytest.approx(360.6e-6, rel=1e-3)
    assert float(t[0]) == pytest.approx(linear + kv, rel=5e-3)


def test_llama_cpp_decode_keeps_its_single_prompt_factor() -> None:
    # The same block with one token of context under llama.cpp: compute-bound at the class's
    # single-prompt factor (efficiency.yaml `compute`), 310.86 GFLOP / (1,978.9 T x compute).
    dev = _h100()
    t = decode_layer_seconds(
        CAT.model("llama-2-7b"), FP8, 1.0, dev, batch=768, context=1, kernels="llama.cpp"
    )
    flops = 768 * 2 * PARAMS_PER_BLOCK
    assert float(t[0]) == pytest.approx(flops / (H100_FP8 * float(dev.eff_compute[0])), rel=5e-3)


def test_matmul_rate_follows_each_rows_kernel_family() -> None:
    a100, h100 = CAT.accelerators["a100-80gb-sxm"], CAT.accelerators["h100-sxm"]
    dev = device_table([a100, h100])
    got = matmul_flops(dev, FP8, ["llama.cpp", "serving-grid"])
    assert got[0] == pytest.approx(dev.peak_flops(FP8)[0] * dev.eff_compute[0])
    assert got[1] == pytest.approx(dev.peak_flops(FP8)[1] * dev.batched_compute(FP8)[1])
    # The output head of 1,024 rows under TensorRT-LLM: 2 x 32,000 x 4,096 x 1,024 = 268.4
    # GFLOP at 949.9 TFLOP/s, 282.6 us (its 131 MB at 3.35 TB/s, 39 us).
    head = head_seconds(CAT.model("llama-2-7b"), FP8, _h100(), 1024, "serving-grid")
    assert float(head[0]) == pytest.approx(2 * 32000 * 4096 * 1024 / (H100_FP8 * 0.48), rel=1e-3)


@pytest.mark.parametrize("model", ["llama-3.1-70b", "qwen3-30b-a3b"])
@pytest.mark.parametrize("tp", [1, 2])
def test_a_serving_engine_decode_step_is_the_grid_iteration_without_prompts(
    model: str, tp: int
) -> None:
    """`planner estimate` (decode_layer_seconds) and a plan (serving_layer_seconds) time the
    same decode step, shipped factors and all (overheads, all-reduces, a MoE block's kernels)."""
    m, dev = CAT.model(model), device_table([CAT.accelerators["h100-sxm"]])
    for batch in (1.0, 64.0, 1024.0):
        step = decode_layer_seconds(
            m, FP8, 1.0, dev, batch=batch, context=2048, tp=tp, kernels="serving-grid"
        )
        grid = serving_layer_seconds(
            m, FP8, 1.0, dev, batch=batch, context=2048, prefill_tokens=0.0, prompt=1.0, tp=tp
        )
        assert float(step[0]) == pytest.approx(float(grid[0]), rel=1e-12)


def test_prompts_processed_together_are_one_grid_iteration() -> None:
    # gptSessionBenchmark's context phase and vLLM's offline generate() take a fixed batch's
    # prompts together: 8 prompts of 128 tokens are one iteration of 1,024 prompt tokens, with
    # the head over each prompt's last token.
    m, dev = CAT.model("llama-3.1-70b"), device_table([CAT.accelerators["h100-sxm"]])
    got = engine_prefill_seconds(
        m, FP8, 1.0, dev, prompt=128, tp=2, kernels="serving-grid", prompts=8
    )
    layer = serving_layer_seconds(
        m, FP8, 1.0, dev, batch=0.0, context=128, prefill_tokens=1024.0, prompt=128, tp=2
    )
    head = head_seconds(m, FP8, dev, 8, "serving-grid") / 2
    want = m.num_layers * layer + head + dev.step_overhead_s
    assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-12)
    one = serving_prefill_seconds(m, FP8, 1.0, dev, prompt=128, tp=2)
    assert np.all(got > one)
