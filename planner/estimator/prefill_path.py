"""The tensor rates one prompt's prefill runs at, and how much of the weights it reads.

The single-prompt compute efficiency (`compute` in catalog/efficiency.yaml) is fitted on
llama.cpp's prompt processing, the engine behind every published single-prompt prefill figure
in calibration/measurements.yaml, so it is counted against the peak of the kernels llama.cpp
runs, not against a rate those kernels never use:

- Matrix products with 16-bit operands go to cuBLAS with FP16 accumulation
  (`CUBLAS_COMPUTE_16F` in ggml-cuda's `ggml_cuda_op_mul_mat_cublas`, since llama.cpp PR #3370
  of September 2023, which measured FP16 prompt processing 2.4x faster on an RTX 3090 Ti;
  FP32 only on CDNA): the FP16-accumulate rate (tensor_rates), twice the listed fp16 figure on
  NVIDIA's GeForce parts and the GB10.
- Quantized GGUF weights (and MXFP4) are multiplied by MMQ, which quantizes the activations
  to 8 bits, runs int8 tensor-core MMA and scales each block's sums in FP32 (llama.cpp PRs
  #7676 "CUDA: use tensor cores for MMQ" and #7860, June 2024; MXFP4 since the gpt-oss support
  of August 2025), where the device's int8 rate is at least its 16-bit one; elsewhere they are
  dequantized to 16-bit tiles (Metal's `kernel_mul_mm`, and devices without an int8 tensor
  rate). The releases before MMQ on tensor cores dequantized them to FP16 for cuBLAS
  (an engine whose catalog entry's `kernels` is `llama.cpp-dequantizing`).
- Attention's products (FlashAttention, or the KQ and KQV matmuls before it) take 16-bit
  operands and accumulate in FP32: the listed 16-bit rate, whatever the weights' format.

These are llama.cpp's kernels, so they and the `compute` factor fitted on them hold for the
engines built on them alone (`kernels` of `llama.cpp` or `llama.cpp-dequantizing` in the
catalog's engine entries, LLAMA_CPP_KERNELS). Every other engine (vLLM, SGLang,
TensorRT-LLM, ...) runs a prompt through the batched GEMMs of its serving iterations, at the
rates of the serving grid (prompt_time.serving_prefill_seconds): PyTorch's and TensorRT's GEMMs
accumulate 16-bit products in FP32, one rate for FP16 and BF16.

A prompt is processed in micro-batches of n_ubatch tokens (`PREFILL_UBATCH_TOKENS`, llama.cpp's
default, common/common.h), each a forward pass that reads the weights it touches again: at the
default, a 2,048-token prompt of a mixture-of-experts model reads nearly all of its experts
four times.

A mixture-of-experts block multiplies its routed experts in one MMQ launch per matrix
(`ggml_cuda_mul_mat_q` with `ids`, ggml-cuda/mmq.cu; llama.cpp PR #13199 of April 2025 and
PR #15525 of August 2025): the micro-batch's (token, expert) pairs are sorted by expert
(`expert_bounds`), each expert's tokens form its own column range, and the kernel runs whole
tiles of mmq_x columns over each range, skipping only tiles past its end. The tile width is
the fewest tiles for `ncols_opt` (`mul_mat_q_case`). On NVIDIA and CDNA parts that is
`ncols_max`, the micro-batch's token count (so 128 from 113 tokens up), while an expert sees
only about T x k / E of its T tokens: gpt-oss-120b (128 experts, 4 a token) at 2,048 tokens
gives each expert about 64, and half of every 128-column tile is padding. On RDNA3 and RDNA4
(`GGML_CUDA_CC_IS_RDNA3_0 || GGML_CUDA_CC_IS_RDNA4`, llama.cpp PR #28552 of September 2026,
first #24546) it is the mean an expert sees, ceil(T x k / E), and an expert above it runs
more tiles of that width (the launch grid still covers `ncols_max`). The routed experts'
products are charged the tiles they run (routed_tile_work), on the MMQ path (runs_mmq) alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from planner.estimator.devices import Array, DeviceTable
from planner.estimator.formats import GGUF_FORMATS, WeightFormat
from planner.estimator.tensor_rates import fp16_accumulate_flops, sixteen_bit_flops
from planner.schema.catalog import Accelerator, ModelArch
from planner.schema.model_params import block_groups, expert_params

# llama.cpp's default micro-batch (n_ubatch = 512, common/common.h; llama-bench's too).
PREFILL_UBATCH_TOKENS = 512

# Weight formats llama.cpp multiplies with MMQ (ggml-cuda/mmq.cu, the block types of
# ggml_cuda_mul_mat_q_switch_type: Q4_0 to Q8_0 and the K-quants Q2_K to Q6_K, the blocks a mix
# such as UD-Q2_K_XL is made of): every GGUF block format (formats.GGUF_FORMATS) and MXFP4. The
# other weight-only formats (GPTQ, AWQ, NF4, MLX) run on 16-bit tensor paths.
MMQ_FORMATS = GGUF_FORMATS | {"mxfp4"}
# The kernel family (Engine.kernels in catalog support.yaml) of builds that predate MMQ on
# tensor cores (llama.cpp PR #7676, June 2024): they dequantized GGUF weights to FP16 and called
# cuBLAS for every prompt of more than 32 tokens (ggml-cuda's MMQ_MAX_BATCH_SIZE), so their
# quantized prefill runs at the FP16 rate.
DEQUANTIZING = "llama.cpp-dequantizing"
# The kernel families that are llama.cpp's: current builds (whose RPC backend, for hosts of
# other vendors, is llama.cpp's own) and the dequantizing ones.
LLAMA_CPP_KERNELS = frozenset({"llama.cpp", DEQUANTIZING})
# A kernel family per device row, or one for every row (None: a current llama.cpp release's);
# planner.estimator.support.engine_kernels reads it from an engine's catalog entry.
Kernels = str | None | Sequence[str | None]
# MMQ's FP32 work per model FLOP (ggml-cuda/mmq.cuh, the vec_dot_*_q8_1_mma functions): for each
# output element and each 32-weight block (QK8_1) the int32 sum from the int8 MMA is converted
# to FP32 and multiplied into the accumulator by the product of the two blocks' scales, two
# FP32 instructions (4 FLOPs at the FP32 vector rate, which counts an FMA as 2) per 32
# multiply-adds (64 model FLOPs), so the FP32 time is int8 / FP32 / 16 times the int8 time: on
# an RTX 4090 (int8 8x its FP32 rate) half of it again, on an A100 (32x) or H100 SXM (29.5x)
# about twice it, which puts those parts' quantized prefill below their FP16 rate (no published
# MMQ measurement on them was found to check it).
MMQ_SCALE_FLOPS_PER_FLOP = 4.0 / 64.0
# The share of a part's listed int8 tensor rate that MMQ's MMA instruction reaches, by
# architecture (Accelerator.architecture); 1 where not listed. ggml-cuda's MMA primitives
# (ggml-cuda/mma.cuh) issue the warp-level `mma.sync` of Turing and Ampere on every NVIDIA part
# from Turing on, Hopper included: ggml-cuda has no kernel with Hopper's warpgroup `wgmma`.
# Hopper's tensor cores reach their listed peak through wgmma alone: "Without the wgmma
# instruction, the older mma.sync instruction can only reach about 2/3 the peak throughput of
# Hopper Tensor Cores" (FlashAttention-3, Shah et al. 2024, the authors' release post, note 1,
# citing Luo et al. 2024, "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture",
# arXiv 2402.13499v1). cuBLAS, which multiplies FP16 weights, has wgmma kernels for Hopper and
# keeps the listed rate.
MMA_SYNC_SHARE: dict[str, float] = {"hopper": 2.0 / 3.0}
# MMQ's widest column tile with tensor-core MMA (ggml-cuda/mmq.cuh, get_mmq_x_max_host: 128 on
# Turing and later and on AMD's WMMA/MFMA parts), chosen in steps of its granularity
# (mmq_get_granularity_host: 16 columns from 48 up, 8 below).
MMQ_X_MAX = 128
# Micro-batches of at most this many tokens multiply their routed experts with MMVQ, one
# matrix-vector product per (token, expert), not MMQ's tiles (ggml-cuda.cu ggml_cuda_mul_mat_id;
# MMVQ_MAX_BATCH_SIZE in ggml-cuda/mmvq.cuh).
MMVQ_MAX_BATCH_SIZE = 8
# Architectures (Accelerator.architecture) whose MMQ picks a MoE product's tile width from the
# mean tokens an expert sees, not the micro-batch's count (ggml-cuda/mmq.cu, ncols_opt:
# GGML_CUDA_CC_IS_RDNA3_0 and GGML_CUDA_CC_IS_RDNA4, llama.cpp PR #28552; RDNA3.5 is not in it).
MEAN_WIDTH_ARCHITECTURES = frozenset({"rdna3", "rdna4"})


def on_llama_cpp(kernels: str | None) -> bool:
    """Whether a prompt's prefill on the kernel family `kernels` (Engine.kernels) runs on
    llama.cpp's kernels (this module's rates): a llama.cpp family, or none (the calibration
    rows' engine)."""
    return not kernels or kernels in LLAMA_CPP_KERNELS


def runs_mmq(d: Accelerator, fmt: WeightFormat, mmq: bool = True) -> bool:
    """Whether llama.cpp multiplies `fmt` with MMQ's int8 MMA on `d`: an MMQ format, a release
    with MMQ on tensor cores (`mmq`), and an int8 rate at least the FP16-accumulate one."""
    int8 = (d.dense_tflops.int8 or 0.0) * 1e12
    return mmq and fmt.id in MMQ_FORMATS and int8 > 0 and int8 >= fp16_accumulate_flops(d)


def linear_seconds_per_flop(
    d: Accelerator, fmt: WeightFormat, listed: float, mmq: bool = True
) -> float:
    """Seconds per FLOP of llama.cpp's prompt matmuls on `d` for weights in `fmt`, given the
    rate the estimator lists for the format (`listed`, DeviceTable.peak_flops):
    - MMQ formats on MMQ (runs_mmq): the int8 rate that `mma.sync` reaches on the part's
      architecture (MMA_SYNC_SHARE), plus the FP32 work of scaling each block's int32 sums
      (MMQ_SCALE_FLOPS_PER_FLOP);
    - FP16 weights, and MMQ formats dequantized to FP16 (`mmq` False: the dequantizing family,
      or no fast int8 path): the FP16-accumulate rate;
    - any other format: the listed rate (BF16 accumulates in FP32; FP8 and FP4 keep their own
      tensor paths)."""
    if runs_mmq(d, fmt, mmq):
        int8 = (d.dense_tflops.int8 or 0.0) * 1e12 * MMA_SYNC_SHARE.get(d.architecture, 1.0)
        fp32 = (d.dense_tflops.fp32 or 0.0) * 1e12 or sixteen_bit_flops(d) / 16.0
        return 1.0 / int8 + MMQ_SCALE_FLOPS_PER_FLOP / fp32
    rate = listed
    if fmt.id in MMQ_FORMATS or fmt.id == "fp16":
        rate = max(fp16_accumulate_flops(d), listed)
    return 1.0 / rate if rate > 0 else float("inf")


def prefill_linear_seconds_per_flop(
    dev: DeviceTable, fmt: WeightFormat, kernels: Kernels = None
) -> Array:
    """linear_seconds_per_flop per device row, on the kernel family `kernels` (None: a current
    llama.cpp release's), or per row for a sequence of families, one a row."""

    def rates(mmq: bool) -> Array:
        def make(t: DeviceTable) -> Array:
            listed = t.peak_flops(fmt)
            rows = zip(t.devices, listed, strict=True)
            return np.array([linear_seconds_per_flop(d, fmt, float(p), mmq) for d, p in rows])

        return dev.derived(("prefill linear s/FLOP", fmt, mmq), make)

    return _by_family(dev, kernels, rates)


def prefill_attention_peak(dev: DeviceTable) -> Array:
    """sixteen_bit_flops per device row: attention's rate in a prompt's prefill."""
    return dev.derived(
        "prefill attention FLOP/s", lambda t: np.array([sixteen_bit_flops(d) for d in t.devices])
    )


def mmq_tile_columns(ncols_max: int) -> int:
    """The column tile MMQ runs for a product of up to `ncols_max` columns (ggml-cuda/mmq.cuh,
    mul_mat_q_case): of mmq_x = 8, 16, ... MMQ_X_MAX in steps of the granularity, the first
    with the fewest tiles of `ncols_max`; 128 from 113 columns up."""
    best_x, best_tiles = 8, -1
    for x in range(8, MMQ_X_MAX + 1, 8):
        if x % (16 if x >= 48 else 8):
            continue
        tiles = -(-ncols_max // x)
        if best_tiles < 0 or tiles < best_tiles:
            best_x, best_tiles = x, tiles
        if best_tiles == 1:
            break
    return best_x


@lru_cache(maxsize=4096)
def routed_tile_work(tokens: int, num_experts: int, top_k: int, mean_width: bool = False) -> float:
    """Columns MMQ computes per routed (token, expert) pair when a micro-batch of `tokens` tokens
    goes through a MoE block (module docstring): each expert's column range runs in whole tiles
    of mmq_x columns, mmq_x = mmq_tile_columns(tokens), or with `mean_width` (RDNA3 and RDNA4,
    MEAN_WIDTH_ARCHITECTURES) mmq_tile_columns of the mean an expert sees, ceil(tokens x top_k
    / num_experts). Tokens are taken as routed independently and uniformly, so an expert's count
    is binomial(tokens, top_k / num_experts) and the expected columns computed are num_experts x
    E[ceil(count / mmq_x)] x mmq_x, over the tokens x top_k pairs routed. 1 where every expert
    fills whole tiles, and at most MMVQ_MAX_BATCH_SIZE tokens (no tiles); gpt-oss-120b at 2,048
    tokens (64 an expert on average) 2.0, with `mean_width` (tiles of 64) about 1.5."""
    t = max(int(tokens), 1)
    if t <= MMVQ_MAX_BATCH_SIZE:
        return 1.0
    if top_k >= num_experts:  # every expert takes every token
        x = mmq_tile_columns(t)
        return -(-t // x) * x / t
    x = mmq_tile_columns(-(-t * top_k // num_experts) if mean_width else t)
    p = top_k / num_experts
    n = np.arange(t + 1, dtype=np.float64)
    # log binomial pmf, by the running product of (t - j) / (j + 1)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log((t - n[:-1]) / (n[:-1] + 1.0)))))
    pmf = np.exp(log_choose + n * np.log(p) + (t - n) * np.log1p(-p))
    tiles = float(np.sum(pmf * np.ceil(n / x)))
    return num_experts * tiles * x / (t * top_k)


def routed_padding_params_per_layer(
    m: ModelArch, tokens: float | Array, mean_width: bool = False
) -> Array:
    """Mean over blocks of the routed experts' weights a token is charged beyond the ones it
    uses, for micro-batches of `tokens` tokens on MMQ: k x expert weights x (routed_tile_work
    - 1) in each MoE block, 0 for a dense model (element-wise over an array of token counts;
    `mean_width` as in routed_tile_work)."""
    t = np.asarray(tokens, dtype=np.float64)
    if m.moe is None:
        return np.zeros(np.shape(t))
    e, k = m.moe.num_experts, m.moe.experts_per_token
    # once per distinct whole token count (a serving grid repeats a few micro-batch sizes)
    counts, where = np.unique(np.maximum(np.rint(t), 1).astype(np.int64), return_inverse=True)
    per_count = np.array([routed_tile_work(int(n), e, k, mean_width) for n in counts])
    work = per_count[where].reshape(np.shape(t))
    pad = np.zeros(np.shape(t))
    for g in block_groups(m):
        if g.kind == "moe":
            expert = expert_params(m)
            pad = pad + g.count * k * expert * (work - 1.0)
    return np.asarray(pad / m.num_layers)


def _by_family(dev: DeviceTable, kernels: Kernels, rows: Callable[[bool], Array]) -> Array:
    """`rows(mmq)` per device row on the kernel family `kernels` (one for every row, or one a
    row): `mmq` False on the dequantizing family (DEQUANTIZING), True on any other."""
    if kernels is None or isinstance(kernels, str):
        return rows(kernels != DEQUANTIZING)
    old = np.array([k == DEQUANTIZING for k in kernels], dtype=bool)
    if len(old) != len(dev):
        raise ValueError(f"{len(old)} kernel families for {len(dev)} device rows")
    return np.where(old, rows(False), rows(True)) if old.any() else rows(True)


def prefill_routed_padding(
    m: ModelArch, tokens: float | Array, dev: DeviceTable, fmt: WeightFormat, kernels: Kernels
) -> Array:
    """routed_padding_params_per_layer per device row: the tile width each row's MMQ picks
    (MEAN_WIDTH_ARCHITECTURES or the micro-batch's), 0 off the MMQ path (prefill_mmq_rows)."""
    if m.moe is None:
        return np.zeros(np.broadcast(np.asarray(tokens), np.zeros(len(dev))).shape)
    mean = dev.derived(
        "MoE tile width from the mean",
        lambda t: np.array([d.architecture in MEAN_WIDTH_ARCHITECTURES for d in t.devices]),
    )
    pad = routed_padding_params_per_layer(m, tokens)
    if mean.any():
        pad = np.where(mean, routed_padding_params_per_layer(m, tokens, True), pad)
    return np.asarray(pad * prefill_mmq_rows(dev, fmt, kernels))


def prefill_mmq_rows(dev: DeviceTable, fmt: WeightFormat, kernels: Kernels = None) -> Array:
    """1.0 for each device row whose prompt matmuls in `fmt` run on MMQ on the kernel family
    `kernels` (runs_mmq; the dequantizing family never does), else 0.0."""

    def rows(mmq: bool) -> Array:
        return dev.derived(
            ("prefill on MMQ", fmt, mmq),
            lambda t: np.array([float(runs_mmq(d, fmt, mmq)) for d in t.devices]),
        )

    return _by_family(dev, kernels, rows)


def prefill_dequant_rows(dev: DeviceTable, fmt: WeightFormat, kernels: Kernels = None) -> Array:
    """1.0 for each device row where llama.cpp dequantizes `fmt` weights to FP16 in a pass of
    their own before cuBLAS (hipBLAS) multiplies them: a GGUF block format (MMQ_FORMATS) on an
    NVIDIA or AMD part that does not run it on MMQ (runs_mmq; always on the dequantizing
    kernel family). ggml-cuda's `ggml_cuda_op_mul_mat_cublas` converts such a weight
    matrix with `to_fp16_cuda` into a pool buffer, then calls the GEMM on it; Metal's
    `kernel_mul_mm` dequantizes inside its tiles instead (0.0)."""

    def rows(mmq: bool) -> Array:
        def make(t: DeviceTable) -> Array:
            return np.array(
                [
                    float(
                        fmt.id in MMQ_FORMATS
                        and d.vendor in ("nvidia", "amd")
                        and not runs_mmq(d, fmt, mmq)
                    )
                    for d in t.devices
                ]
            )

        return dev.derived(("prefill dequant pass", fmt, mmq), make)

    return _by_family(dev, kernels, rows)


def prefill_routed_padding_tokens(
    m: ModelArch,
    tokens: float | Array,
    ubatch: float,
    dev: DeviceTable,
    fmt: WeightFormat,
    kernels: Kernels,
) -> Array:
    """Padding weights x tokens over a prompt batch of `tokens` tokens run in micro-batches of
    `ubatch`: floor(tokens / ubatch) full ones at prefill_routed_padding(ubatch) a token and
    the last, of the remaining tokens, at its own (a smaller micro-batch leaves each expert
    fewer tokens per tile: 600 tokens of a 128-expert, top-4 model are 512 at 8.0 columns per
    routed pair and 88 at 32.8, not 600 at 8.0)."""
    t = np.asarray(tokens, dtype=np.float64)
    full = np.floor(t / ubatch)
    rest = t - full * ubatch
    per_full = prefill_routed_padding(m, np.full_like(t, ubatch), dev, fmt, kernels)
    per_rest = prefill_routed_padding(m, rest, dev, fmt, kernels)
    return np.asarray(full * ubatch * per_full + rest * per_rest)
