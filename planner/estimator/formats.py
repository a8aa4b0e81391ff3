"""Number formats: true bits per stored weight (with scales and group overhead), and which tensor
precision the device computes in when it runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import InputError, did_you_mean
from planner.schema.catalog import ModelArch, Precision


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
    # A file mixed per tensor class (mixed_format): the routed experts' bits per weight, where
    # bits_per_weight is then every other block weight's (attention, shared experts, dense FFNs).
    expert_bits: float | None = None

    @property
    def least_bits(self) -> float:
        """The fewest bits any block weight takes (for floors that must stay generous)."""
        return min(self.bits_per_weight, self.expert_bits or self.bits_per_weight)


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
        # OCP Microscaling MXFP8: 32 FP8 (E4M3) values share an 8-bit E8M0 exponent: 8 + 8/32 =
        # 8.25 bits (OCP MX Formats spec v1.0, section 5; MLX's mode="mxfp8", group 32, no bias;
        # TransformerEngine's MXFP8 recipe: E4M3 with one E8M0 scale per 32). Engines keep the
        # embedding and the head in 16-bit as for MXFP4. MXFP8 x MXFP8 runs on the tensor cores
        # that take block-scaled operands (SM 10.0, TransformerEngine), so its 8-bit rate is the
        # datacenter Blackwell one; elsewhere (MLX on Apple silicon) it is dequantized to 16-bit.
        WeightFormat(
            "mxfp8",
            8 + 8 / 32,
            16,
            ("fp8", *_F16),
            True,
            "OCP MX Formats spec v1.0; MLX quantize mode mxfp8",
            block_scaled=True,
        ),
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


EXPERTS_SUFFIX = "-experts"
MIX_EXAMPLE = "mxfp4-experts+mlx-q8"


def weight_format(name: str) -> WeightFormat:
    """The format named `name`: a catalog format, or a per-tensor-class mix of two of them
    (`mxfp4-experts+mlx-q8`: routed experts in MXFP4, every other weight in MLX 8-bit)."""
    if "+" in name:
        return mixed_format(name)
    try:
        return WEIGHT_FORMATS[name]
    except KeyError:
        raise InputError(
            f"unknown weight format `{name}`{did_you_mean(name, WEIGHT_FORMATS)}"
            f" (choices: {', '.join(WEIGHT_FORMATS)}, or a mix such as `{MIX_EXAMPLE}`)"
        ) from None


def format_parts(name: str) -> tuple[str, ...]:
    """The catalog formats `name` is made of: itself, or a mix's two (experts first)."""
    if "+" not in name:
        return (name,)
    experts, rest = _mix_parts(name)
    return (experts, rest)


def _mix_parts(name: str) -> tuple[str, str]:
    """(experts' format, the rest's format) of a mix `EXPERTS-experts+REST`, or a clear error."""
    parts = name.split("+")
    tagged = [p for p in parts if p.endswith(EXPERTS_SUFFIX)]
    if len(parts) != 2 or len(tagged) != 1:
        raise InputError(
            f"weight format `{name}`: a mixed file is two catalog formats joined by `+`, the "
            f"routed experts' one ending in `{EXPERTS_SUFFIX}`, e.g. `{MIX_EXAMPLE}` (experts "
            "in MXFP4, every other weight in MLX 8-bit)"
        )
    experts = tagged[0].removesuffix(EXPERTS_SUFFIX)
    rest = parts[1] if parts[0] == tagged[0] else parts[0]
    for part in (experts, rest):
        if part not in WEIGHT_FORMATS:
            raise InputError(
                f"weight format `{name}`: unknown format `{part}`"
                f"{did_you_mean(part, WEIGHT_FORMATS)} (choices: {', '.join(WEIGHT_FORMATS)})"
            )
        if part in GGUF_FORMATS:
            raise InputError(
                f"weight format `{name}`: `{part}` is a GGUF type; a GGUF file states its own "
                "mix of block types: name the file's type (q4_k_m, ud-q2_k_xl ...) instead"
            )
    return experts, rest


def mix_without_experts(name: str, m: ModelArch) -> str | None:
    """Why a file mixed per tensor class (mixed_format) cannot be `m`'s: it gives routed experts
    a format of their own, and a model without routed experts has none to give it (None where
    `name` is no mix or `m` has routed experts)."""
    if "+" not in name or m.moe is not None:
        return None
    rest = format_parts(name)[1]
    return (
        f"weight format `{name}` gives routed experts a format of their own, but {m.id} has no "
        f"routed experts (a dense model): write its one format, `{rest}`"
    )


def mixed_format(name: str) -> WeightFormat:
    """A file whose routed experts are in one format and every other block weight in another
    (mlx-lm's mixed recipes, e.g. mlx-community's GLM-5.1-MXFP4-Q8: MXFP4 experts, 8-bit
    affine elsewhere). Bytes are counted per tensor class (planner.estimator.memory and
    perf.touched_weight_bits); the embedding and head take the rest's format; the device runs
    the tensor precisions both formats run, the rest's order first (16-bit at worst)."""
    e, r = (WEIGHT_FORMATS[p] for p in _mix_parts(name))
    compute = tuple(p for p in r.compute if p in e.compute) or _F16
    return WeightFormat(
        name,
        r.bits_per_weight,
        r.embedding_bits,
        compute,
        e.weight_only or r.weight_only,
        f"experts: {e.source}; the rest: {r.source}",
        block_scaled=e.block_scaled or r.block_scaled,
        expert_bits=e.bits_per_weight,
    )


def kv_bytes(name: str) -> float:
    try:
        return KV_BYTES[name]
    except KeyError:
        raise InputError(
            f"unknown KV-cache format `{name}`{did_you_mean(name, KV_BYTES)}"
            f" (choices: {', '.join(KV_BYTES)})"
        ) from None
