"""Memory per device: weights, KV cache, activations, gradients, optimizer state, framework overhead.

All figures in bytes. Sources are named beside each formula.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from planner.estimator.architecture import (
    attended_tokens,
    block_groups,
    embedding_params,
    head_params,
    kv_elements_per_token_per_layer,
    kv_layers,
    recurrent_state_bytes_per_layer,
    total_params,
)
from planner.estimator.devices import Array, Degree
from planner.estimator.expert_parallel import job_expert_parallel, routed_expert_params
from planner.estimator.formats import WeightFormat, weight_format
from planner.schema.catalog import ModelArch

Optimizer = Literal["adamw", "adamw-8bit", "sgd", "adafactor"]
Method = Literal["full", "lora", "qlora"]
Recompute = Literal["none", "selective", "full"]

# Framework overhead per device: CUDA/ROCm context, cuBLAS/NCCL workspaces and allocator slack.
# PyTorch's CUDA context alone takes 0.3-0.9 GB depending on the GPU and CUDA version (PyTorch
# "CUDA semantics" notes); vLLM's startup log reports ~0.5-1.5 GB of non-torch memory.
FRAMEWORK_OVERHEAD_BYTES = 1.0e9


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per device, by part."""

    weights: float = 0.0
    kv_cache: float = 0.0
    activations: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    framework: float = FRAMEWORK_OVERHEAD_BYTES
    parts: tuple[str, ...] = field(
        default=("weights", "kv_cache", "activations", "gradients", "optimizer", "framework"),
        repr=False,
    )

    @property
    def total(self) -> float:
        return sum(getattr(self, p) for p in self.parts)

    def as_dict(self) -> dict[str, float]:
        return {p: float(getattr(self, p)) for p in self.parts} | {"total": float(self.total)}


# ------------------------------------------------------------------------------------------------
# Inference
# ------------------------------------------------------------------------------------------------


def block_weight_bytes(m: ModelArch, fmt: WeightFormat) -> float:
    """Bytes of all transformer blocks in `fmt`; in a file mixed per tensor class
    (formats.mixed_format) the routed experts at their own bits, the rest at the format's."""
    blocks = sum(g.count * g.params for g in block_groups(m))
    if fmt.expert_bits is None:
        return blocks * fmt.bits_per_weight / 8
    routed = routed_expert_params(m)
    return ((blocks - routed) * fmt.bits_per_weight + routed * fmt.expert_bits) / 8


def end_weight_bytes(m: ModelArch, fmt: WeightFormat) -> tuple[float, float]:
    """(first-stage, last-stage) extra bytes: token embedding; final norm and output head.

    A tied head reuses the embedding matrix; a pipeline whose last stage is not the first still
    needs its own copy of it (Megatron-LM keeps a copy on both ends), which head_bytes includes.
    """
    emb = embedding_params(m) * fmt.embedding_bits / 8
    head = head_params(m) * fmt.embedding_bits / 8
    if m.tie_word_embeddings:
        head += m.vocab_size * m.hidden_size * fmt.embedding_bits / 8
    return emb, head


def weight_bytes(m: ModelArch, fmt: WeightFormat) -> float:
    """Whole model in `fmt` on one device (a tied head stored once)."""
    emb, head = end_weight_bytes(m, fmt)
    if m.tie_word_embeddings:
        head -= m.vocab_size * m.hidden_size * fmt.embedding_bits / 8
    return block_weight_bytes(m, fmt) + emb + head


def kv_bytes_per_token(m: ModelArch, kv_dtype_bytes: float) -> float:
    """KV cache per token over the layers that keep one: layers x elements x bytes.

    GQA shrinks it by heads / kv_heads (Ainslie et al. 2023); MLA caches the latent (DeepSeek-V2);
    a hybrid model's linear-attention layers keep none (architecture.kv_layers).
    E.g. Llama 3.1 70B at fp16: 80 x 2 x 8 x 128 x 2 = 327,680 bytes per token.
    """
    return kv_layers(m) * kv_elements_per_token_per_layer(m) * kv_dtype_bytes


def handoff_bytes(m: ModelArch, kv_dtype_bytes: float, tokens: float) -> float:
    """What a prefill engine hands a decode engine for one prompt of `tokens` tokens: their KV
    cache, plus a hybrid model's recurrent state, which the decode engine continues from and
    which no token of the prompt can rebuild (one sequence's, whatever the prompt's length)."""
    state = recurrent_state_bytes_per_layer(m) * m.num_layers
    return kv_bytes_per_token(m, kv_dtype_bytes) * tokens + state


def state_shards(m: ModelArch, tp: Degree) -> Array | float:
    """Ways tensor parallelism splits a linear-attention layer's recurrent state: by its
    query/key heads, each rank keeping its value heads' states (vLLM's
    gated_delta_net_state_shape divides num_v_heads and the conv dim by the TP size; it needs
    them to divide, so past the key heads the state is replicated)."""
    heads = float(m.linear_attention.num_key_heads) if m.linear_attention else 1.0
    return np.clip(np.asarray(tp, dtype=np.float64), 1.0, heads)


def sequence_bytes_per_layer(
    m: ModelArch, kv_dtype_bytes: float, context: float, tp: int, root_alone: bool = False
) -> float:
    """Bytes one sequence keeps per layer (averaged over the layers) on the fullest of `tp`
    devices: its KV cache of the tokens each layer attends to (attended_tokens) split as the KV
    heads split (kv_shard_divisor), plus a hybrid model's recurrent state, split as its heads
    (state_shards). A star's root (`root_alone`) holds both whole."""
    kv = kv_elements_per_token_per_layer(m) * kv_dtype_bytes * attended_tokens(m, context)
    state = recurrent_state_bytes_per_layer(m)
    if root_alone:
        return kv + state
    return kv / kv_shard_divisor(m, tp) + (state / float(state_shards(m, tp)) if state else 0.0)


def sequence_traffic_per_layer(
    m: ModelArch, kv_dtype_bytes: float, context: float, tp: int, root_alone: bool = False
) -> float:
    """Bytes one decoding sequence moves per layer and step on the fullest of `tp` devices (what
    keeps its memory busy): what it keeps (sequence_bytes_per_layer), its KV cache read once,
    and a hybrid model's recurrent state read and written back, so that state twice, as
    perf.state_traffic_per_layer charges the step's time."""
    state = recurrent_state_bytes_per_layer(m)
    again = state if root_alone or not state else state / float(state_shards(m, tp))
    return sequence_bytes_per_layer(m, kv_dtype_bytes, context, tp, root_alone) + again


def kv_shards(m: ModelArch, tp: Degree) -> Array | float:
    """Ways tensor parallelism splits the KV cache (per row of `tp`): KV heads split up to their
    number and are replicated past it (vLLM); the MLA latent is shared by all heads and
    replicated across TP ranks (vLLM)."""
    if m.mla is not None:
        return 1.0
    return np.clip(np.asarray(tp, dtype=np.float64), 1.0, float(m.num_key_value_heads))


def kv_shard_divisor(m: ModelArch, tp: int) -> int:
    """kv_shards for one tensor-parallel degree."""
    return int(kv_shards(m, tp))


def inference_activation_bytes(m: ModelArch, tokens_per_step: float, tp: int = 1) -> float:
    """Peak transient activations of one forward pass over `tokens_per_step` tokens (fp16).

    The largest live set is the MLP: input, gate/up outputs and their product
    (2h + 3i values per token for a gated MLP), plus fp32 logits of the sampled rows.
    vLLM measures this by profiling a dummy batch of max_num_batched_tokens.
    """
    return tokens_per_step * float(inference_activation_bytes_per_token(m, tp))


def inference_activation_bytes_per_token(m: ModelArch, tp: Degree = 1) -> float | Array:
    """Peak transient activation bytes per token (see inference_activation_bytes); `tp` may be
    one tensor-parallel degree per candidate."""
    width = max((g_width for g_width in _ffn_widths(m)), default=m.intermediate_size)
    per_token: float | Array = 2 * (2 * m.hidden_size + 3 * width / tp)
    return per_token


def _ffn_widths(m: ModelArch) -> list[int]:
    if m.moe is None:
        return [m.intermediate_size]
    widths = [m.moe.expert_intermediate_size * m.moe.experts_per_token]
    if m.moe.first_dense_layers:
        widths.append(m.moe.dense_intermediate_size or m.intermediate_size)
    return widths


def inference_memory(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    *,
    batch: int,
    context: int,
    layers: float | None = None,
    tp: int = 1,
    first: bool = True,
    last: bool = True,
    prefill_chunk: int = 2048,
    root_alone: bool = False,
) -> MemoryBreakdown:
    """Memory on each of `tp` devices of a stage holding `layers` blocks (default: all).
    `root_alone`: the group is a star whose root alone runs the embedding, the norms, attention
    and the output head (engine_topology.STAR): the figures are the root's, the fullest device,
    holding its 1/tp of the blocks' matrices, the ends whole and the whole KV cache."""
    n = m.num_layers if layers is None else layers
    share = n / m.num_layers
    emb, head = end_weight_bytes(m, fmt)
    if first and last:
        ends = weight_bytes(m, fmt) - block_weight_bytes(m, fmt)
    else:
        ends = (emb if first else 0.0) + (head if last else 0.0)
    weights = block_weight_bytes(m, fmt) * share / tp + ends / (1 if root_alone else tp)
    # Sliding-window layers keep their window, linear-attention layers a fixed state.
    kv = batch * n * sequence_bytes_per_layer(m, kv_dtype_bytes, context, tp, root_alone)
    tokens = max(batch, min(prefill_chunk, batch * context))
    act = inference_activation_bytes(m, tokens, tp)
    if last:
        act += batch * m.vocab_size * 4  # fp32 logits for sampling
    return MemoryBreakdown(weights=weights, kv_cache=kv, activations=act)


# ------------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------------

# Bytes per trainable parameter of optimizer state, beyond 16-bit weights and gradients.
# ZeRO paper (Rajbhandari et al. 2020, section 3.1): mixed-precision Adam keeps an fp32 master
# copy, momentum and variance: K = 12, so 2 + 2 + 12 = 16 bytes per parameter.
OPTIMIZER_BYTES: dict[str, float] = {
    "adamw": 12.0,
    # 8-bit Adam (Dettmers et al. 2022): two 1-byte states (+ fp32 absmax per 2048) + fp32 master.
    "adamw-8bit": 4.0 + 2.0 + 8 / 2048,
    # SGD with momentum: fp32 master + fp32 momentum.
    "sgd": 8.0,
    # Adafactor (Shazeer & Stern 2018): factored second moment (rows + columns, ~0 per parameter),
    # no first moment; fp32 master.
    "adafactor": 4.0,
}
# LoRA adapters train in 16-bit with 32-bit Adam states and no separate master copy
# (QLoRA, Dettmers et al. 2023: bf16 adapters, paged 32-bit optimizer): 2 + 2 + 8 bytes.
ADAPTER_OPTIMIZER_BYTES: dict[str, float] = {
    "adamw": 8.0,
    "adamw-8bit": 2.0 + 8 / 2048,
    "sgd": 4.0,
    "adafactor": 0.0,
}


@dataclass(frozen=True)
class TrainingSetup:
    method: Method = "full"
    optimizer: Optimizer = "adamw"
    zero_stage: int = 0
    data_parallel: int = 1
    tensor_parallel: int = 1
    seq_len: int = 4096
    micro_batch: int = 1
    recompute: Recompute = "selective"
    flash_attention: bool = True
    lora_rank: int = 16
    lora_targets: Literal["all-linear", "attention"] = "all-linear"
    # Devices sharing the scale-up domain (NVLink) a stage's experts split over
    # (expert_parallel.job_expert_parallel); 1 keeps a MoE model's experts whole.
    scale_up_domain: int = 1


def lora_params(m: ModelArch, rank: int, targets: str = "all-linear") -> int:
    """Trainable LoRA parameters: r x (d_in + d_out) per adapted matrix (Hu et al. 2021)."""
    h, hd = m.hidden_size, m.attn_head_dim
    q_out, kv_out = m.num_attention_heads * hd, m.num_key_value_heads * hd
    attn = rank * ((h + q_out) + 2 * (h + kv_out) + (q_out + h))
    if targets == "attention":
        return attn * m.num_layers
    total = 0
    for g in block_groups(m):
        if g.kind == "moe" and m.moe is not None:
            mats = 3 if m.mlp == "gated" else 2
            experts = m.moe.num_experts + m.moe.shared_experts
            mlp = experts * mats * rank * (h + m.moe.expert_intermediate_size)
        else:
            width = (
                m.moe.dense_intermediate_size or m.intermediate_size
                if m.moe
                else m.intermediate_size
            )
            mats = 3 if m.mlp == "gated" else 2
            mlp = mats * rank * (h + width)
        total += g.count * (attn + mlp)
    return total


def activation_bytes_per_layer(m: ModelArch, setup: TrainingSetup) -> float:
    """Stored activations of one block for one micro-batch, bytes (16-bit).

    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
    table 2: s*b*h*(34 + 5*a*s/h) per layer: attention 11sbh + 5as^2b, MLP 19sbh, norms 4sbh.
    Generalized to an FFN of width i: gated (SwiGLU) MLP 2sbh + 8sbi, plain 2sbh + 4sbi + sbh.
    FlashAttention and selective recomputation drop the 5as^2b score term; full recomputation
    keeps only the block input (2sbh) per layer. Sequence parallelism divides all by t.
    """
    s, b, h, t = setup.seq_len, setup.micro_batch, m.hidden_size, setup.tensor_parallel
    if setup.recompute == "full":
        return 2.0 * s * b * h / t
    if m.moe is not None:
        width = m.moe.expert_intermediate_size * (m.moe.experts_per_token + m.moe.shared_experts)
    else:
        width = m.intermediate_size
    mlp = 2 * s * b * h + (8 * s * b * width if m.mlp == "gated" else 4 * s * b * width + s * b * h)
    attn = 11.0 * s * b * h
    if setup.recompute == "none" and not setup.flash_attention:
        attn += 5.0 * m.num_attention_heads * s * s * b
    return (attn + mlp + 4.0 * s * b * h) / t


def training_memory(
    m: ModelArch, setup: TrainingSetup, layers: float | None = None, *, last: bool = True
) -> MemoryBreakdown:
    """Memory per device for training or fine-tuning `layers` blocks (default all) of `m`.

    Model states follow the ZeRO paper's accounting (Rajbhandari et al. 2020): with N_d
    data-parallel ranks, stage 1 shards optimizer states, stage 2 also gradients, stage 3 also
    the 16-bit weights. Tensor parallelism divides every model state by t, except a MoE model's
    routed experts, which split over the expert-parallel group instead (`expert_split`).
    """
    weights, act, grads, opt = _training_parts(m, setup, layers, last, setup.data_parallel)
    return MemoryBreakdown(
        weights=float(weights),
        kv_cache=0.0,
        activations=act,
        gradients=float(grads),
        optimizer=float(opt),
    )


def training_memory_total(
    m: ModelArch,
    setup: TrainingSetup,
    data_parallel: npt.NDArray[np.int64],
    layers: float | None = None,
    *,
    last: bool = True,
) -> Array:
    """training_memory(...).total for each data-parallel degree (setup.data_parallel unused)."""
    weights, act, grads, opt = _training_parts(m, setup, layers, last, data_parallel)
    # Summed in MemoryBreakdown.parts order, as MemoryBreakdown.total sums them.
    zero = np.zeros(len(data_parallel))
    return zero + weights + 0.0 + act + grads + opt + FRAMEWORK_OVERHEAD_BYTES


def expert_split(
    m: ModelArch, setup: TrainingSetup, d: int | npt.NDArray[np.int64]
) -> float | Array:
    """How many ways a stage's devices split the routed experts' state: the expert-parallel
    size the throughput charges the all-to-all at (job_expert_parallel over the stage's t x d
    devices in their scale-up domain), and at least the tensor-parallel t that splits every
    other weight. Megatron-Core shards expert parameters over the expert-parallel group and
    keeps the rest under tensor and data parallelism ("MoE parallel folding", Megatron-Core MoE
    docs; DeepSeek-V3 report, section 3.4: 256 routed experts over EP64, the rest replicated).
    ZeRO then shards the experts' state over the stage's t x d / split remaining ranks (the
    expert data-parallel group), so ZeRO-3 reaches the same 1 / (t d) as a dense weight."""
    t = setup.tensor_parallel
    if m.moe is None:
        return float(t)
    dev = np.atleast_1d(np.asarray(d, dtype=np.int64)) * t
    # EP divides the stage's devices (job_expert_parallel), so it depends on their count.
    ep = {c: job_expert_parallel(m, setup.scale_up_domain, c) for c in set(dev.tolist())}
    split = np.array([max(ep[c], t) for c in dev.tolist()], dtype=np.float64)
    return split if np.ndim(d) else float(split[0])


def _zero_shards(
    weights: Any, grads: Any, opt: Any, zero_stage: int, ranks: Any
) -> tuple[Any, Any, Any]:
    """(weights, gradients, optimizer state) per device with ZeRO at `zero_stage` sharding them
    over `ranks` (Rajbhandari et al. 2020): stage 1 the optimizer state, 2 the gradients too,
    3 the weights too."""
    return (
        weights / ranks if zero_stage >= 3 else weights,
        grads / ranks if zero_stage >= 2 else grads,
        opt / ranks if zero_stage >= 1 else opt,
    )


def _training_parts(
    m: ModelArch,
    setup: TrainingSetup,
    layers: float | None,
    last: bool,
    d: int | npt.NDArray[np.int64],
) -> tuple[float | Array, float, float | Array, float | Array]:
    """(weights, activations, gradients, optimizer) bytes per device: the dense part over t
    tensor-parallel ranks with ZeRO sharding over `d` data-parallel ranks, the routed experts
    over `expert_split` ranks with ZeRO over the rest of the stage's t x d."""
    n = m.num_layers if layers is None else layers
    share = n / m.num_layers
    routed = routed_expert_params(m) * share
    params = total_params(m) * share - routed
    t, z = setup.tensor_parallel, setup.zero_stage
    weights: float | Array
    grads: float | Array
    opt: float | Array
    if setup.method == "full":
        weights = 2.0 * params
        grads = 2.0 * params
        opt = OPTIMIZER_BYTES[setup.optimizer] * params
        experts = (2.0 * routed, 2.0 * routed, OPTIMIZER_BYTES[setup.optimizer] * routed)
    else:
        base_fmt = weight_format("nf4" if setup.method == "qlora" else "bf16")
        adapters = lora_params(m, setup.lora_rank, setup.lora_targets) * share
        frozen = routed * base_fmt.bits_per_weight / 8  # the base experts, frozen
        weights = weight_bytes(m, base_fmt) * share - frozen + 2.0 * adapters
        grads = 2.0 * adapters
        opt = ADAPTER_OPTIMIZER_BYTES[setup.optimizer] * adapters
        experts = (frozen, 0.0, 0.0)
    weights, grads, opt = _zero_shards(weights, grads, opt, z, d)
    split = expert_split(m, setup, d)
    rest = t * d / split  # the expert data-parallel group ZeRO shards the experts over
    ew, eg, eo = _zero_shards(experts[0] / split, experts[1] / split, experts[2] / split, z, rest)
    act = activation_bytes_per_layer(m, setup) * n
    if setup.recompute == "full":
        # One block's full activations are rematerialized at a time during backward.
        full = TrainingSetup(**{**setup.__dict__, "recompute": "selective"})
        act += activation_bytes_per_layer(m, full)
    # Logits for the loss: bf16 logits plus an fp32 copy (HF transformers upcasts for the loss).
    if last:
        act += 6.0 * setup.seq_len * setup.micro_batch * m.vocab_size / t
    return weights / t + ew, act, grads / t + eg, opt / t + eo
