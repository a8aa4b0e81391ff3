"""What a decode step reads beyond the plain roofline's bytes at the class's rate, per engine kernel
family (Engine.kernels): llama.cpp's attention reads the KV cache at its own share of the peak,
the 2023-2024 builds read F16 weights slower on HBM parts, and GGUF files keep their output head
in Q6_K. Each a factor or a byte count, per device row, for planner.estimator.perf."""

from __future__ import annotations

import numpy as np

from planner.estimator.devices import Array, DeviceTable
from planner.estimator.formats import WeightFormat
from planner.estimator.kernel_rates import llama_rows
from planner.estimator.prefill_path import DEQUANTIZING, Kernels

# llama.cpp's attention for one token per sequence reads the KV cache at a lower rate than its
# weight kernels read the weights: on a V100, test-backend-ops' ATTN op (32 heads of 128, one
# token: the KQ product, the softmax and the KQV product of a build without FlashAttention) takes
# 45.56 us over 512 cached tokens and 62.33 us over 1,024 (llama.cpp PR #6165): 8.39 MB more
# cache in 16.77 us, 500 GB/s of the part's 900 GB/s, 0.556 of its peak. Other engines' decode
# attention (paged attention, FlashInfer, TensorRT-LLM's XQA) reads it at the weights' rate.
LLAMA_CPP_KV_SHARE = 0.556


def kv_read_seconds_per_byte(dev: DeviceTable, kernels: Kernels) -> Array:
    """Seconds per KV-cache byte a decode's attention reads, per device row, on the kernel family
    `kernels` (Engine.kernels, one for all rows or one per row; None: a current llama.cpp
    release's, as prefill_path.on_llama_cpp): LLAMA_CPP_KV_SHARE of the peak bandwidth under
    llama.cpp's families (both the current and the dequantizing releases: the attention is the
    same ggml code), the class's fitted bandwidth factor (the weights' rate) under any other."""
    own = llama_rows(dev, kernels)
    share = np.where(own, LLAMA_CPP_KV_SHARE, dev.eff_bandwidth)
    return np.asarray(1.0 / (dev.bandwidth_bytes_s * share), dtype=np.float64)


# llama.cpp builds before October 2024 (the dequantizing kernel family, Engine.kernels
# `llama.cpp-dequantizing`) multiply F16 weights by one token per sequence with
# dequantize_mul_mat_vec (ggml-cuda dmmv.cu, convert_mul_mat_vec_f16_cuda), whose threads load
# the weights one half2 (4 bytes) at a time; on NVIDIA's HBM parts that scalar load leaves the
# bandwidth far under its peak. Vector loads (llama.cpp PR #9816, October 2024) made that kernel
# 1.33x faster on an H100 SXM (Llama 3 8B F16, batch 1; the whole token 1.27x) and 1.01x on GDDR
# parts (issue #9817: GDDR parts already reached "a high percentage of peak"); PR #10318 then
# replaced the kernel. So the old builds read F16 weights 1.33x slower on HBM NVIDIA parts.
DMMV_F16_HBM_SLOWDOWN = 1.33


def weight_read_scale(dev: DeviceTable, fmt: WeightFormat, batch: float, kernels: Kernels) -> Array:
    """Factor on the time a decode step takes to read its weights, per device row:
    DMMV_F16_HBM_SLOWDOWN for F16 weights and one token (batch 1, the only case llama.cpp sends
    to that kernel; more tokens go to cuBLAS) on an NVIDIA part with HBM under the dequantizing
    kernel family (`kernels`, one for all rows or one per row), else 1."""
    if fmt.id != "fp16":
        return np.ones(len(dev))
    hbm = dev.derived(
        "NVIDIA HBM",
        lambda t: np.array(
            [d.vendor == "nvidia" and d.memory.type.upper().startswith("HBM") for d in t.devices]
        ),
    )
    if kernels is None or isinstance(kernels, str):
        old = np.full(len(dev), kernels == DEQUANTIZING)
    else:
        old = np.array([k == DEQUANTIZING for k in kernels], dtype=bool)
    slow = (hbm > 0) & old & (np.asarray(batch) <= 1)
    return np.where(slow, DMMV_F16_HBM_SLOWDOWN, 1.0)


# llama.cpp's quantizer stores a GGUF file's output head (output.weight) in Q6_K, block_q6_K's
# 210 bytes per 256 weights, for every file type whose tensors are not Q8_0 (src/llama-quant.cpp,
# llama_tensor_get_type, the output.weight branch; a Q4_0 file's load log reads "type q4_0: ...
# tensors, type q6_K: 1 tensors"). It counts here only for the formats whose bits are their
# block layout's (Q4_0): the K-quant mixes' bits are whole-file figures that already hold it.
# Other engines' files of the same layout (distributed-llama's Q40, written by its own
# converter) keep the head in the format's own bits.
GGUF_HEAD_BITS = 210 * 8 / 256
GGUF_Q6_K_HEAD_FORMATS = frozenset({"q4_0"})


def head_bits(fmt: WeightFormat, dev: DeviceTable, kernels: Kernels = None) -> Array:
    """Bits per weight of the output head per device row on the kernel family `kernels` (one
    for all rows or one per row): GGUF_HEAD_BITS for a GGUF_Q6_K_HEAD_FORMATS file under
    llama.cpp's families (prefill_path.on_llama_cpp), the format's embedding bits otherwise."""
    if fmt.id not in GGUF_Q6_K_HEAD_FORMATS:
        return np.full(len(dev), fmt.embedding_bits)
    own = llama_rows(dev, kernels)
    return np.where(own, GGUF_HEAD_BITS, fmt.embedding_bits)
