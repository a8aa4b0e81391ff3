"""Number formats: true bits per stored weight (with scales and group overhead), and which tensor
precision the device computes in when it runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import InputError, did_you_mean
from planner.schema.catalog import Precision


@dataclass(frozen=True)
class WeightFormat:
    """How weights are stored and computed."""

    id: str
    bits_per_weight: float  # transformer-block weights, including scales/zero points
    embedding_bits: float  # token embedding and output head
    compute: tuple[Precision, ...]  # tensor precisions it runs on, best first; fp16 is the fallback
    weight_only: bool  # dequantized to 16-bit before the matmul (costs extra work per weight)
    source: str
    # Its 8-bit path multiplies block-scaled (MX) operands, which engines do only on datacenter
    # parts with FP4 tensor cores (planner.estimator.devices._block_scaled_mma).
    block_scaled: bool = False


_F16: tuple[Precision, ...] = ("fp16", "bf16")

# Each bits_per_weight is derived from the format's block layout (source named per entry).
WEIGHT_FORMATS: dict[str, WeightFormat] = {
    f.id: f
    for f in (
        WeightFormat("fp32", 32, 32, ("tf32", "fp32"), False, "IEEE 754 single"),
        WeightFormat("bf16", 16, 16, ("bf16", "fp16"), False, "bfloat16"),
        WeightFormat("fp16", 16, 16, ("fp16", "bf16"), False, "IEEE 754 half"),
        # FP8 E4M3 with one fp32 scale per tensor (negligible): Micikevicius et al. 2022, "FP8 Formats".
        WeightFormat("fp8", 8, 16, ("fp8", *_F16), False, "Micikevicius et al. 2022"),
        # W8A8 int8 with per-channel scales (SmoothQuant, Xiao et al. 2023): 8 bits + h*16 per row.
        WeightFormat("int8", 8, 16, ("int8", *_F16), False, "Xiao et al. 2023 (SmoothQuant)"),
        # GPTQ/AWQ int4, group size 128: 4 bits + fp16 scale and 4-bit zero per 128 weights
        # = 4 + (16 + 4) / 128 = 4.156 bits (Frantar et al. 2023; Lin et al. 2024). Embedding and
        # lm_head stay in fp16 (AutoGPTQ/AutoAWQ default).
        WeightFormat("gptq-int4", 4 + 20 / 128, 16, _F16, True, "Frantar et al. 2023 (GPTQ), g128"),
        WeightFormat("awq-int4", 4 + 20 / 128, 16, _F16, True, "Lin et al. 2024 (AWQ), g128"),
        # llama.cpp block_q4_0: fp16 scale + 32 x 4-bit = 18 bytes per 32 weights = 4.5 bits
        # (ggml-common.h). The whole file, embeddings included, uses it.
        WeightFormat("q4_0", 4.5, 4.5, _F16, True, "llama.cpp ggml-common.h block_q4_0"),
        # K-quant mixes: whole-file bits per weight for Llama 2 7B, llama.cpp tools/quantize README.
        WeightFormat("q4_k_m", 4.84, 4.84, _F16, True, "llama.cpp quantize README (Llama 2 7B)"),
        # Q2_K mix ("Q2_K - Medium": block_q2_K is 84 B per 256 weights = 2.625 bits, some
        # tensors kept in Q3_K/Q4_K): whole-file bits of a published file, llama-bench's
        # "qwen3moe 235B.A22B Q2_K - Medium, 79.80 GiB, 235.09 B" = 79.80 x 2^33 / 235.09e9.
        WeightFormat("q2_k", 2.916, 2.916, _F16, True, "llama-bench Qwen3-235B-A22B Q2_K file"),
        # Unsloth's dynamic 2-bit mix UD-Q2_K_XL (Q2_K blocks for most expert tensors, higher
        # K-quants for attention, shared experts and the first layers): whole-file bits of the
        # published DeepSeek-R1 file, llama-bench's "deepseek2 671B Q2_K - Medium, 211.03 GiB,
        # 671.03 B" = 211.03 x 2^33 / 671.03e9 = 2.701 bits.
        WeightFormat(
            "ud-q2_k_xl", 2.701, 2.701, _F16, True, "llama-bench DeepSeek-R1 UD-Q2_K_XL file"
        ),
        WeightFormat("q5_k_m", 5.68, 5.68, _F16, True, "llama.cpp quantize README (Llama 2 7B)"),
        WeightFormat("q6_k", 6.5625, 6.5625, _F16, True, "llama.cpp block_q6_K: 210 B / 256"),
        # block_q8_0: fp16 scale + 32 x int8 = 34 bytes per 32 weights = 8.5 bits.
        WeightFormat("q8_0", 8.5, 8.5, _F16, True, "llama.cpp ggml-common.h block_q8_0"),
        # NF4 with double quantization: 4 + 8/64 + 32/(64*256) = 4.127 bits (Dettmers et al. 2023,
        # QLoRA, section 3). bitsandbytes keeps embeddings and lm_head in 16-bit.
        WeightFormat(
            "nf4", 4 + 8 / 64 + 32 / (64 * 256), 16, _F16, True, "Dettmers et al. 2023 (QLoRA)"
        ),
        # OCP Microscaling MXFP4: 32 FP4 (E2M1) values share an 8-bit exponent: 4 + 8/32 = 4.25.
        # Served as weights only, never FP4 x FP4: engines multiply them with MXFP8 activations
        # where the tensor cores take block-scaled operands (B200/GB200/B300/GB300) and with
        # 16-bit activations elsewhere (H200: BF16 x MXFP4): TensorRT-LLM's GPT-OSS deployment
        # guide, "MoE Backend Support Matrix". So its best rate is the 8-bit one, on datacenter
        # Blackwell (and CDNA 4).
        WeightFormat(
            "mxfp4",
            4.25,
            16,
            ("fp8", *_F16),
            True,
            "OCP MX Formats spec v1.0; TensorRT-LLM GPT-OSS deployment guide",
            block_scaled=True,
        ),
        # NVFP4: 16 FP4 values share an FP8 (E4M3) scale: 4 + 8/16 = 4.5 (NVIDIA Blackwell docs).
        WeightFormat("nvfp4", 4.5, 16, ("fp4", *_F16), False, "NVIDIA Blackwell NVFP4"),
        # MLX affine quantization (mlx-lm convert -q): group 64 with an fp16 scale and an fp16
        # bias per group, 4 + 32/64 = 4.5 and 8 + 32/64 = 8.5 bits; mlx-lm quantizes the
        # embedding and the output head too (MLX docs, mlx.core.quantize).
        WeightFormat("mlx-q4", 4.5, 4.5, _F16, True, "MLX affine quantize, 4-bit g64"),
        WeightFormat("mlx-q8", 8.5, 8.5, _F16, True, "MLX affine quantize, 8-bit g64"),
    )
}

# The GGUF block formats (llama.cpp's ggml-common.h block types and the quantize tool's mixes
# of them): the files llama.cpp's own kernels read. An engine of another kernel family that
# loads them runs kernels of its own (planner.estimator.support.gguf_refusal).
GGUF_FORMATS = frozenset({"q2_k", "ud-q2_k_xl", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "q8_0"})

# KV-cache element sizes, bytes. q8_0 as in llama.cpp's cache-type-k/v: 34 bytes per 32 values.
KV_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
}


def weight_format(name: str) -> WeightFormat:
    try:
        return WEIGHT_FORMATS[name]
    except KeyError:
        raise InputError(
            f"unknown weight format `{name}`{did_you_mean(name, WEIGHT_FORMATS)}"
            f" (choices: {', '.join(WEIGHT_FORMATS)})"
        ) from None


def kv_bytes(name: str) -> float:
    try:
        return KV_BYTES[name]
    except KeyError:
        raise InputError(
            f"unknown KV-cache format `{name}`{did_you_mean(name, KV_BYTES)}"
            f" (choices: {', '.join(KV_BYTES)})"
        ) from None
