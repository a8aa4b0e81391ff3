"""The tensor rates of a prompt's prefill (planner.estimator.prefill_path, tensor_rates), pinned
to vendor spec sheets and hand arithmetic (source in each comment)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ideal_factors import IDEAL
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.perf import prefill_layer_seconds
from planner.estimator.prefill_path import (
    MMA_SYNC_SHARE,
    MMQ_SCALE_FLOPS_PER_FLOP,
    linear_seconds_per_flop,
    mmq_tile_columns,
    prefill_dequant_rows,
    prefill_linear_seconds_per_flop,
    prefill_mmq_rows,
    prefill_routed_padding,
    prefill_routed_padding_tokens,
    routed_padding_params_per_layer,
    routed_tile_work,
)
from planner.estimator.tensor_rates import fp16_accumulate_flops
from planner.schema.model_params import expert_params

CAT = load_catalog()


@pytest.mark.parametrize(
    ("device", "tflops"),
    [
        ("rtx-4090", 330.3),  # Ada whitepaper appendix: FP16 tensor, FP16 accumulate, dense
        ("rtx-3090", 142.0),  # Ampere GA102 whitepaper: 142 dense with FP16 accumulate
        ("a100-80gb-sxm", 312.0),  # A100 datasheet: one rate for both accumulations
        ("rtx-a6000", 154.8),  # professional part: FP32 accumulate at the full rate
        ("m2-ultra", 27.2),  # not NVIDIA: the listed rate
    ],
)
def test_fp16_accumulate_rate(device: str, tflops: float) -> None:
    assert fp16_accumulate_flops(CAT.accelerators[device]) == pytest.approx(tflops * 1e12, 1e-3)


def test_mmq_runs_int8_with_its_fp32_scaling_on_a_geforce_part() -> None:
    # RTX 4090, Q4_0 on MMQ: 1 / 660.6e12 s per FLOP on int8 MMA (Ada whitepaper) plus the
    # block scaling, 4 FP32 FLOPs per 64 model FLOPs at 82.6e12: 1.5138e-15 + 7.567e-16
    # = 2.2705e-15 s per FLOP, a rate of 440.4 TFLOP/s (1.33 x the FP16-accumulate 330.3).
    d = CAT.accelerators["rtx-4090"]
    per_flop = linear_seconds_per_flop(d, weight_format("q4_0"), 165.2e12)
    assert MMQ_SCALE_FLOPS_PER_FLOP == 4.0 / 64.0
    assert per_flop == pytest.approx(1 / 660.6e12 + 0.0625 / 82.6e12, rel=1e-9)
    assert 1.0 / per_flop == pytest.approx(440.4e12, rel=1e-3)


def test_scaling_costs_more_where_int8_outruns_fp32_further() -> None:
    # A100 SXM: int8 624, FP32 19.5 TFLOP/s (ratio 32, against 8 on the RTX 4090), so the
    # scaling (0.0625 / 19.5e12 = 3.205e-15 s) outweighs the MMA (1 / 624e12 = 1.603e-15 s):
    # the rate is 208 TFLOP/s, 0.33 of int8, where the RTX 4090 keeps 0.67 of its own.
    a100 = CAT.accelerators["a100-80gb-sxm"]
    per_flop = linear_seconds_per_flop(a100, weight_format("q4_0"), 312e12)
    assert per_flop == pytest.approx(1 / 624e12 + 0.0625 / 19.5e12, rel=1e-9)
    assert 1.0 / per_flop == pytest.approx(208.0e12, rel=1e-3)


def test_mmq_on_hopper_runs_at_the_mma_sync_share_of_int8() -> None:
    # ggml-cuda's MMQ issues mma.sync, which "can only reach about 2/3 the peak throughput of
    # Hopper Tensor Cores" (FlashAttention-3 release post, note 1; Luo et al. 2024). H100 SXM:
    # int8 2/3 x 1978.9 = 1319.3 TOPS, 1 / 1319.3e12 = 7.580e-16 s per FLOP, plus the scaling
    # at FP32 67 TFLOP/s, 0.0625 / 67e12 = 9.328e-16 s: 1.6908e-15 s, a rate of 591.4 TFLOP/s
    # (695.4 at the listed int8 rate).
    h100 = CAT.accelerators["h100-sxm"]
    assert MMA_SYNC_SHARE["hopper"] == pytest.approx(2.0 / 3.0)
    per_flop = linear_seconds_per_flop(h100, weight_format("q4_0"), 989.4e12)
    assert per_flop == pytest.approx(1.5 / 1978.9e12 + 0.0625 / 67e12, rel=1e-9)
    assert 1.0 / per_flop == pytest.approx(591.4e12, rel=1e-3)


@pytest.mark.parametrize(
    ("device", "weights", "tflops"),
    [
        # cuBLAS multiplies FP16 weights with Hopper's wgmma kernels: the listed 989.4 (H100
        # datasheet, dense), not the mma.sync share.
        ("h100-sxm", "fp16", 989.4),
        # Ampere issues mma.sync at its full rate: A100 MMQ 1 / (1/624 + 0.0625/19.5) = 208.0.
        ("a100-80gb-sxm", "q4_0", 208.0),
    ],
)
def test_mma_sync_share_is_hoppers_mmq_alone(device: str, weights: str, tflops: float) -> None:
    dev = device_table([CAT.accelerators[device]])
    per_flop = prefill_linear_seconds_per_flop(dev, weight_format(weights))
    assert 1.0 / float(per_flop[0]) == pytest.approx(tflops * 1e12, rel=1e-3)


@pytest.mark.parametrize("weights", ["q2_k", "ud-q2_k_xl"])
def test_every_gguf_mix_runs_on_mmq(weights: str) -> None:
    # UD-Q2_K_XL is a mix of K-quant blocks (Q2_K for most expert tensors, higher K-quants
    # elsewhere), each multiplied by MMQ (ggml-cuda/mmq.cu) like Q2_K alone: on an RTX 4090
    # 1 / 660.6e12 + 0.0625 / 82.6e12 s per FLOP (440.4 TFLOP/s), not the listed 165.2 FP16
    # rate with FP32 accumulation it once fell back to (2.7x slower prompts than Q2_K's).
    d = CAT.accelerators["rtx-4090"]
    dev = device_table([d])
    per_flop = prefill_linear_seconds_per_flop(dev, weight_format(weights))
    assert float(per_flop[0]) == pytest.approx(1 / 660.6e12 + 0.0625 / 82.6e12, rel=1e-9)
    old = prefill_linear_seconds_per_flop(dev, weight_format(weights), "llama.cpp-dequantizing")
    assert float(old[0]) == pytest.approx(1 / 330.3e12, rel=1e-3)


def test_releases_before_mmq_dequantize_to_fp16() -> None:
    # llama.cpp builds of 2023-2024 (before PR #7676) run Q4_K_M through FP16 cuBLAS: on an
    # RTX 4090, 1 / 330.3e12 s per FLOP, the FP16-accumulate rate.
    dev = device_table([CAT.accelerators["rtx-4090"]])
    old = prefill_linear_seconds_per_flop(dev, weight_format("q4_k_m"), "llama.cpp-dequantizing")
    new = prefill_linear_seconds_per_flop(dev, weight_format("q4_k_m"))
    assert float(old[0]) == pytest.approx(1 / 330.3e12, rel=1e-3)
    assert float(new[0]) == pytest.approx(1 / 660.6e12 + 0.0625 / 82.6e12, rel=1e-9)


@pytest.mark.parametrize(
    ("device", "weights", "tflops"),
    [
        ("rtx-4090", "bf16", 165.2),  # BF16 accumulates in FP32: the listed rate
        ("m2-ultra", "q4_0", 27.2),  # no int8 tensor rate: dequantized to the 16-bit path
        ("rx-7900-xtx", "fp16", 122.8),  # AMD: the listed rate
    ],
)
def test_other_paths_keep_the_listed_rate(device: str, weights: str, tflops: float) -> None:
    d = CAT.accelerators[device]
    dev = device_table([d])
    per_flop = prefill_linear_seconds_per_flop(dev, weight_format(weights))
    assert 1.0 / float(per_flop[0]) == pytest.approx(tflops * 1e12, rel=1e-3)


def test_fp16_prompt_on_a_geforce_part_by_hand() -> None:
    # Llama 2 7B in FP16 on an RTX 4090, one block over a 512-token prompt, every efficiency 1:
    # weights per block 4 x 4096^2 + 3 x 4096 x 11008 = 202.4 M, so 512 x 2 x 202.4e6
    # = 207.2 GFLOP at 330.3 TFLOP/s (FP16 accumulate) = 627.4 us, and attention over about
    # 256 earlier tokens on average, 512 x 4 x 4096 x 256 = 2.15 GFLOP at the listed
    # 165.2 TFLOP/s = 13.0 us: 640 us. Reading 405 MB at 1,008 GB/s takes 402 us, less.
    m = CAT.model("llama-2-7b")
    dev = device_table([CAT.accelerators["rtx-4090"]], {"rtx-4090": IDEAL})
    t = prefill_layer_seconds(m, weight_format("fp16"), dev, batch=1, prompt=512)
    assert float(t[0]) == pytest.approx(640.4e-6, rel=5e-3)


def test_each_micro_batch_reads_the_experts_again() -> None:
    # gpt-oss-120b on a DGX Spark, 2,048 prompt tokens, memory-bound at these settings: in
    # micro-batches of 512 (llama.cpp's default n_ubatch) every expert is hit in each of the
    # four (128 experts, 4 per token: 1 - (31/32)^512 ~ 1), so the weights are read four
    # times; with n_ubatch 2048, once.
    m = CAT.model("gpt-oss-120b")
    dev = device_table([CAT.accelerators["dgx-spark"]], {"dgx-spark": IDEAL})
    fmt = weight_format("mxfp4")
    small = prefill_layer_seconds(m, fmt, dev, batch=1, prompt=2048, ubatch=512)
    whole = prefill_layer_seconds(m, fmt, dev, batch=1, prompt=2048, ubatch=2048)
    assert float(small[0]) / float(whole[0]) == pytest.approx(4.0, rel=1e-6)


def test_batched_fallback_reaches_the_single_prompt_flops() -> None:
    # A class without a batched serving figure (catalog serving.yaml) falls back on its
    # single-prompt factor, counted against the FP16-accumulate rate: on a GeForce part the
    # batched path divides by the listed rate, half of it, so the factor doubles; on a
    # professional part the two rates are one.
    for device, ratio in (("rtx-4090", 2.0), ("rtx-a6000", 1.0)):
        dev = device_table([CAT.accelerators[device]])
        expected = ratio * float(dev.eff_compute[0])
        assert float(dev.eff_batched_compute[0]) == pytest.approx(expected, rel=1e-3)


def _ttft_ms(engine: str) -> float:
    args = ["estimate", "-m", "llama-3.1-8b", "-d", "l40s", "--weights", "q4_k_m"]
    r = CliRunner().invoke(app, [*args, "--prompt", "512", "--engine", engine, "--format", "json"])
    assert r.exit_code == 0, r.output
    return float(json.loads(r.output)["prefill_s"]) * 1e3


def test_an_estimate_on_the_old_release_prefills_on_its_fp16_path() -> None:
    # Llama 3.1 8B Q4_K_M on an L40S, 512 prompt tokens: a current llama.cpp runs MMQ at
    # 1 / (1 / 733e12 + 0.0625 / 91.6e12) = 521 TFLOP/s, the builds of 2023-2024 dequantized to
    # FP16 cuBLAS at 366.5 (half the int8 rate), so the old release's first token takes longer
    # by more than its fixed times alone (32 x 19.3 us + 831 us = 1.45 ms at the figures of
    # 2026-11-28): 92.9 ms against 69.4 ms as shipped; xd-gpu-bench-llama3 measured 84.8 ms
    # (6,035 tokens/s) on build 2834.
    new, old = _ttft_ms("llama.cpp"), _ttft_ms("llama.cpp-2024")
    assert old - new > 1.5 + 0.3 * new


def test_a_tables_rows_keep_their_prefill_rates() -> None:
    # The rates are computed once per table (DeviceTable.derived); `take` keeps each taken
    # row's, which must equal what a table of those devices alone computes.
    ids = ["rtx-4090", "h100-sxm", "m2-ultra", "rx-7900-xtx"]
    fmt = weight_format("q4_0")
    dev = device_table([CAT.accelerators[i] for i in ids])
    prefill_linear_seconds_per_flop(dev, fmt)
    taken = prefill_linear_seconds_per_flop(dev.take([3, 1]), fmt)
    fresh = prefill_linear_seconds_per_flop(
        device_table([CAT.accelerators[i] for i in ids[3:0:-2]]), fmt
    )
    assert list(taken) == pytest.approx(list(fresh), rel=1e-12)
    assert not taken.flags.writeable


@pytest.mark.parametrize(
    ("ncols", "mmq_x"),
    [
        (2048, 128),  # 16 tiles of 128; any narrower tile needs more
        (113, 128),  # 112 (the widest below 128 at granularity 16) needs 2 tiles, 128 one
        (100, 112),  # one tile either way: the first width that holds 100, 112, wins
        (47, 48),  # 40 needs 2 tiles, 48 (a multiple of its granularity 16) one
        (9, 16),  # 8 needs 2
    ],
)
def test_mmq_picks_the_first_width_with_the_fewest_tiles(ncols: int, mmq_x: int) -> None:
    # ggml-cuda/mmq.cuh mul_mat_q_case: mmq_x = 8, 16, ..., 128, skipping widths that are not
    # a multiple of the granularity (16 from 48 columns up), keeping the first with the
    # fewest ceil(ncols / mmq_x).
    assert mmq_tile_columns(ncols) == mmq_x


def test_each_expert_runs_whole_tiles_of_the_micro_batchs_width() -> None:
    # gpt-oss-120b: 128 experts, 4 a token. A micro-batch of 2,048 tokens gets mmq_x = 128
    # and gives each expert binomial(2048, 1/32) tokens: mean 64, sd 7.9, so P(0) = e^-65 and
    # P(> 128) ~ 1e-12: one tile each, 128 x 128 columns for 2,048 x 4 routed = 2.0.
    assert routed_tile_work(2048, 128, 4) == pytest.approx(2.0, rel=1e-9)
    # Qwen3-30B-A3B (128 experts, 8 a token) at llama.cpp's default 512: 32 a expert, one
    # 128-wide tile each, 4x the columns used.
    assert routed_tile_work(512, 128, 8) == pytest.approx(4.0, rel=1e-9)
    # gpt-oss-20b (32 experts, 4 a token) at 2,048: mean 256, sd sqrt(2048 x 1/8 x 7/8) = 15,
    # so an expert runs 2 tiles below 257 tokens and 3 above, about half the time each:
    # 32 x ~2.48 x 128 / 8,192 = ~1.24.
    assert 1.2 < routed_tile_work(2048, 32, 4) < 1.3
    # Every expert takes every token (k = E): whole tiles of the micro-batch, no padding at a
    # multiple of 128.
    assert routed_tile_work(2048, 8, 8) == pytest.approx(1.0, rel=1e-12)
    # 8 tokens or fewer go through MMVQ, a matrix-vector product per (token, expert): no tiles.
    assert routed_tile_work(8, 128, 8) == 1.0
    assert routed_tile_work(9, 128, 8) > 1.0


def test_only_moe_blocks_on_mmq_are_charged_the_padding() -> None:
    # A dense model has no routed products to pad.
    dense = routed_padding_params_per_layer(CAT.model("llama-3.1-8b"), 2048.0)
    assert float(dense) == 0.0
    # gpt-oss-120b: every block is MoE, expert 3 x 2880 x 2880 = 24.88 M weights, 4 a token,
    # work 2.0 at 2,048 tokens: 4 x 24.88 M x (2.0 - 1) = 99.5 M more weights a token a block.
    m = CAT.model("gpt-oss-120b")
    pad = float(routed_padding_params_per_layer(m, 2048.0))
    assert pad == pytest.approx(4 * 3 * 2880 * 2880, rel=1e-3)
    # MMQ runs on an NVIDIA part with an int8 tensor rate under a current llama.cpp, not
    # under the builds that dequantized to FP16 cuBLAS, nor on Metal.
    fmt = weight_format("mxfp4")
    spark = device_table([CAT.accelerators["dgx-spark"]])
    assert float(prefill_mmq_rows(spark, fmt)[0]) == 1.0
    assert float(prefill_mmq_rows(spark, fmt, "llama.cpp-dequantizing")[0]) == 0.0
    apple = device_table([CAT.accelerators["m2-ultra"]])
    assert float(prefill_mmq_rows(apple, fmt)[0]) == 0.0


def test_a_moe_prompt_on_mmq_takes_its_padded_tiles_by_hand() -> None:
    # gpt-oss-120b's block on an RTX 4090, one 2,048-token micro-batch, every efficiency 1.
    # Active weights: attention 2 x 2880 x 4096 + 2 x 2880 x 512 = 26.5 M, router 0.37 M,
    # 4 experts x 24.88 M = 99.5 M, norms: 126.5 M; the padding adds 99.5 M (work 2.0), 226.0 M
    # in all: 2048 x 2 x 226.0e6 = 925.8 GFLOP on MMQ at 440.4 TFLOP/s = 2.102 ms, where the
    # unpadded 126.5 M would take 1.177 ms. Attention adds 2048 x 4 x 64 x 64 x ~574 tokens
    # (full blocks ~1,024, the windowed ones ~124) = 19.3 GFLOP at 165.2 TFLOP/s = 0.12 ms;
    # reading the block's 1.7 GB of MXFP4 weights once at 1,008 GB/s (1.69 ms) is less.
    m = CAT.model("gpt-oss-120b")
    dev = device_table([CAT.accelerators["rtx-4090"]], {"rtx-4090": IDEAL})
    t = prefill_layer_seconds(m, weight_format("mxfp4"), dev, batch=1, prompt=2048, ubatch=2048)
    assert float(t[0]) == pytest.approx(2.102e-3 + 0.12e-3, rel=0.02)
    pad = float(routed_padding_params_per_layer(m, 2048.0))
    assert pad == pytest.approx(99.5e6, rel=2e-3)


def test_the_old_release_writes_quantized_weights_out_as_fp16_first() -> None:
    # Llama 2 7B Q4_0 on an RTX 4090 under the 2023-2024 builds, one 512-token micro-batch,
    # every efficiency 1: ggml_cuda_op_mul_mat_cublas dequantizes each weight matrix to FP16
    # (to_fp16_cuda) before the GEMM, reading 4.5 bits and writing 16 per weight: a block's
    # 202.4 M weights x (0.5625 + 2) bytes = 518.7 MB at 1,008 GB/s = 514.6 us, on top of the
    # FP16 GEMM (640.4 us, test_fp16_prompt_on_a_geforce_part_by_hand). A current release runs
    # MMQ with no such pass; Metal dequantizes inside its tiles.
    m = CAT.model("llama-2-7b")
    dev = device_table([CAT.accelerators["rtx-4090"]], {"rtx-4090": IDEAL})
    old = prefill_layer_seconds(
        m, weight_format("q4_0"), dev, batch=1, prompt=512, kernels="llama.cpp-dequantizing"
    )
    assert float(old[0]) == pytest.approx(640.4e-6 + 514.6e-6, rel=5e-3)
    assert float(prefill_dequant_rows(dev, weight_format("q4_0"))[0]) == 0.0
    assert (
        float(prefill_dequant_rows(dev, weight_format("fp16"), "llama.cpp-dequantizing")[0]) == 0.0
    )
    apple = device_table([CAT.accelerators["m2-ultra"]])
    assert (
        float(prefill_dequant_rows(apple, weight_format("q4_0"), "llama.cpp-dequantizing")[0])
        == 0.0
    )


def test_rdna3_and_rdna4_size_moe_tiles_from_the_mean_an_expert_sees() -> None:
    # llama.cpp PR #28552 (ggml-cuda/mmq.cu, ncols_opt): on RDNA3 and RDNA4 the tile width is
    # chosen for ceil(T x k / E) tokens, not the micro-batch's T. Qwen3-30B-A3B (128 experts,
    # 8 a token) at the default 512: 32 an expert, so mmq_x = 32 (one tile of 32 covers it).
    # An expert's count is binomial(512, 1/16), mean 32, sd sqrt(512 x 1/16 x 15/16) = 5.48:
    # P(<= 32) ~ Phi(0.5 / 5.48) = 0.536 runs one tile, the rest two (P(> 64) ~ 1e-8), so
    # E[tiles] ~ 0.536 + 2 x 0.464 = 1.464 and 128 x 1.464 x 32 / (512 x 8) = 1.46 columns per
    # routed one, where the micro-batch's width (128) charges 4.0.
    assert routed_tile_work(512, 128, 8, mean_width=True) == pytest.approx(1.464, rel=0.02)
    assert routed_tile_work(512, 128, 8) == pytest.approx(4.0, rel=1e-9)
    # At 2,048 the mean is 128, the same width as the micro-batch's: no change (1.48).
    assert routed_tile_work(2048, 128, 8, True) == routed_tile_work(2048, 128, 8)
    # gpt-oss-120b (128 experts, 4 a token) at 2,048: 64 an expert, tiles of 64, count sd
    # 7.9, so half the experts run two tiles: 128 x ~1.5 x 64 / 8,192 = ~1.5 (2.0 at 128).
    assert 1.4 < routed_tile_work(2048, 128, 4, True) < 1.55


def test_each_device_row_pays_the_tiles_its_own_mmq_picks() -> None:
    # Qwen3-30B-A3B Q4_K_M, 512-token micro-batches: expert 3 x 2048 x 768 = 4.719 M weights,
    # 8 a token, every block MoE. An RX 7900 XTX (RDNA3) is charged 8 x 4.719 M x (1.46 - 1)
    # = 17.3 M more weights a token a block; an RTX 4090 (Ada, the micro-batch's width)
    # 8 x 4.719 M x (4.0 - 1) = 113.2 M; an RDNA3.5 part (Ryzen AI Max+ 395, not in
    # PR #28552's condition) the latter too, on MMQ; a dense model nothing.
    m = CAT.model("qwen3-30b-a3b")
    ids = ["rx-7900-xtx", "rtx-4090", "ryzen-ai-max-395-128gb"]
    dev = device_table([CAT.accelerators[i] for i in ids])
    fmt = weight_format("q4_k_m")
    pad = prefill_routed_padding(m, 512.0, dev, fmt, None)
    mmq = prefill_mmq_rows(dev, fmt)
    assert float(pad[0]) == pytest.approx(8 * 4.719e6 * 0.464, rel=0.03)
    assert float(pad[1]) == pytest.approx(8 * 4.719e6 * 3.0, rel=1e-3)
    assert float(pad[2]) == pytest.approx(8 * 4.719e6 * 3.0 * float(mmq[2]), rel=1e-3)
    dense = prefill_routed_padding(CAT.model("llama-3.1-8b"), 512.0, dev, fmt, None)
    assert not np.any(dense)


def test_the_last_micro_batch_pays_the_tiles_of_its_own_size() -> None:
    # gpt-oss-120b (128 experts, 4 a token, expert 3 x 2880 x 2880 = 24,883,200 weights) on an
    # RTX 4090's MMQ: 600 prompt tokens at n_ubatch 512 run a micro-batch of 512 tokens (work
    # 8.0: 128-column tiles, 16 tokens an expert) and one of 88 (96-column tiles, 2.75 tokens an
    # expert: 128 x 96 x P(an expert sees any) / (88 x 4) = 32.77). The 88 tokens were charged
    # the 512-token figure: 600 x 4 x 24.88 M x 7.0 = 418.0e9 padding weight-tokens, not
    # 512 x 4 x 24.88 M x 7.0 + 88 x 4 x 24.88 M x 31.77 = 356.7e9 + 278.3e9 = 635.0e9.
    m = CAT.model("gpt-oss-120b")
    dev = device_table([CAT.accelerators["rtx-4090"]])
    expert = expert_params(m)  # with its biases, 8,640 more than the 3 x 2880 x 2880 above
    assert routed_tile_work(88, 128, 4) == pytest.approx(32.77, abs=0.01)
    fmt = weight_format("mxfp4")
    got = float(prefill_routed_padding_tokens(m, 600.0, 512, dev, fmt, None)[0])
    full = 512 * 4 * expert * (routed_tile_work(512, 128, 4) - 1.0)
    rest = 88 * 4 * expert * (routed_tile_work(88, 128, 4) - 1.0)
    assert got == pytest.approx(full + rest, rel=1e-9)
    assert got == pytest.approx(635.0e9, rel=2e-3)
    # A prompt of whole micro-batches is charged as before: 1,024 tokens = 2 x 512.
    two = float(prefill_routed_padding_tokens(m, 1024.0, 512, dev, fmt, None)[0])
    assert two == pytest.approx(2 * full, rel=1e-9)
