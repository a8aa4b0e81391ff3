"""Time per step: decode, prefill and training, as a roofline per device plus fixed overheads.

Decode streams every touched weight and the KV cache from memory once per step (Pope et al.
2022, "Efficiently Scaling Transformer Inference", section 2: memory time = bytes / bandwidth,
compute time = FLOPs / peak; the step takes the larger). What the plain roofline misses, and is
modelled here rather than folded into one factor: a fixed time per layer (kernel launches and
synchronization), a fixed time per step (sampling, scheduling, host work), and the vector work of
unpacking weight-only quantized formats. All three are fitted per device class by calibration.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.estimator.architecture import (
    active_params,
    attended_tokens,
    attention_flops_per_token_per_layer,
    block_groups,
    causal_attended_tokens,
    embedding_params,
    expert_params,
    head_params,
    kv_elements_per_token_per_layer,
    linear_attention_flops_per_token_per_layer,
    op_checkpoint_linear_share,
    recurrent_state_bytes_per_layer,
    training_attention_flops_per_token_per_layer,
)
from planner.estimator.comm import ring_allreduce_seconds, tensor_parallel_allreduce_seconds
from planner.estimator.decode_reads import head_bits, kv_read_seconds_per_byte, weight_read_scale
from planner.estimator.devices import Array, Degree, DeviceTable
from planner.estimator.formats import WeightFormat, weight_format
from planner.estimator.kernel_rates import llama_rows, matmul_flops
from planner.estimator.memory import kv_shards, state_shards
from planner.estimator.moe_kernels import layer_overhead_scale
from planner.estimator.prefill_path import (
    PREFILL_UBATCH_TOKENS,
    Kernels,
    prefill_attention_peak,
    prefill_dequant_rows,
    prefill_linear_seconds_per_flop,
    prefill_routed_padding_tokens,
)
from planner.schema.catalog import ModelArch

LAYER_ALLREDUCES = 2  # Megatron-LM: after attention and after the MLP (Shoeybi et al. 2019)


def expected_experts_touched(num_experts: int, top_k: int, tokens: float | Array) -> Array:
    """Distinct experts hit by `tokens` tokens routed uniformly to top_k of E experts:
    E x (1 - (1 - k/E)^tokens). One token touches k; a large batch touches all. Element-wise
    over an array of token counts."""
    t = np.asarray(tokens, dtype=np.float64)
    return np.asarray(num_experts * (1.0 - (1.0 - top_k / num_experts) ** t))


def weight_params_touched_per_layer(m: ModelArch, tokens: float | Array) -> Array:
    """Average over layers of the weights read by one forward step over `tokens` tokens
    (element-wise over an array of token counts)."""
    total = np.zeros(np.shape(tokens))
    for g in block_groups(m):
        if g.kind == "moe" and m.moe is not None:
            expert = expert_params(m)
            fixed = g.active_params - m.moe.experts_per_token * expert
            hit = expected_experts_touched(m.moe.num_experts, m.moe.experts_per_token, tokens)
            total += g.count * (fixed + hit * expert)
        else:
            total += g.count * g.params
    return np.asarray(total / m.num_layers)


def touched_weight_bits(m: ModelArch, fmt: WeightFormat, tokens: float | Array) -> Array:
    """Bits per weight of those one step over `tokens` tokens reads (weight_params_touched_per_
    layer): the format's, or in a file mixed per tensor class (formats.mixed_format) the
    average of the routed experts' bits over the experts hit and the rest's over the rest."""
    if fmt.expert_bits is None or m.moe is None:
        return np.full(np.shape(tokens), fmt.bits_per_weight)
    moe_blocks = sum(g.count for g in block_groups(m) if g.kind == "moe")
    hit = expected_experts_touched(m.moe.num_experts, m.moe.experts_per_token, tokens)
    routed = moe_blocks * hit * expert_params(m) / m.num_layers
    total = weight_params_touched_per_layer(m, tokens)
    return np.asarray((fmt.bits_per_weight * (total - routed) + fmt.expert_bits * routed) / total)


def active_params_per_layer(m: ModelArch) -> float:
    return sum(g.count * g.active_params for g in block_groups(m)) / m.num_layers


# A measured time may beat reading its weights at the device's peak bandwidth by this share
# (caches, a bandwidth figure below what the part reaches) and no more: a time shorter than
# that is a unit or a typing error. Problem-file profiles and `estimate --measured` tables
# are held to this one floor.
SPEED_FLOOR_SHARE = 0.5


def weight_read_seconds(read_bytes: float, devices: int, bandwidth_gb_s: float) -> float:
    """The time `devices` devices of `bandwidth_gb_s` peak take to read `read_bytes` of weights
    split among them (the roofline's memory time, nothing else counted)."""
    return read_bytes / devices / (bandwidth_gb_s * 1e9)


def beats_weight_read(seconds: float, least: float) -> bool:
    """Whether a measured `seconds` is faster than the speed floor: SPEED_FLOOR_SHARE of the
    time `least` that reading the weights takes (weight_read_seconds)."""
    return seconds < SPEED_FLOOR_SHARE * least


def head_seconds(
    m: ModelArch, fmt: WeightFormat, dev: DeviceTable, tokens: float, kernels: Kernels = None
) -> Array:
    """Output projection for `tokens` rows: V x h weights read once (at head_bits on the kernel
    family `kernels`), 2 V h FLOPs per row at that family's matmul rate (kernel_rates)."""
    nbytes = m.vocab_size * m.hidden_size * head_bits(fmt, dev, kernels) / 8
    flops = 2.0 * m.vocab_size * m.hidden_size * tokens
    return np.maximum(
        nbytes / (dev.bandwidth_bytes_s * dev.eff_bandwidth),
        flops / matmul_flops(dev, fmt, kernels),
    )


def _decode_roofline(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    batch: float,
    context: float,
    tp: Degree,
    kernels: Kernels = None,
) -> tuple[Array, Array, Array]:
    """(weights touched, memory time, compute time) of one block's decode step on `tp` devices.

    Bytes: touched weights (MoE: expected distinct experts) + KV read of `context` tokens per
    sequence + a hybrid model's recurrent state, read and written back (state_traffic_per_layer).
    FLOPs: 2 x active params per token + attention over the context (Kaplan et al. 2020, table 1)
    + the recurrent update. Tensor parallelism divides both, the KV reads as far as the KV heads
    split, the state as far as its heads do. The weights and the state stream at the class's
    bandwidth factor (old llama.cpp builds' F16 kernel slower on HBM parts: weight_read_scale,
    the weights only), the KV cache at the rate of the kernel family `kernels`
    (kv_read_seconds_per_byte: llama.cpp's attention reads it slower). The FLOPs run at the
    family's matmul rate (kernel_rates.matmul_flops).
    """
    weights = weight_params_touched_per_layer(m, batch)
    w_bytes = weights * touched_weight_bits(m, fmt, batch) / 8
    attended = attended_tokens(m, context)
    kv_read = batch * attended * kv_elements_per_token_per_layer(m) * kv_dtype_bytes
    flops = batch * (
        2.0 * active_params_per_layer(m)
        + attention_flops_per_token_per_layer(m, attended)
        + linear_attention_flops_per_token_per_layer(m, prefill=False)
    )
    rate = dev.bandwidth_bytes_s * dev.eff_bandwidth
    w_s = w_bytes / tp / rate * weight_read_scale(dev, fmt, batch, kernels)
    state_s = batch * state_traffic_per_layer(m, tp) / rate
    t_mem = w_s + state_s + kv_read / kv_shards(m, tp) * kv_read_seconds_per_byte(dev, kernels)
    t_cmp = flops / tp / matmul_flops(dev, fmt, kernels)
    return weights, t_mem, t_cmp


def state_traffic_per_layer(m: ModelArch, tp: Degree) -> Array | float:
    """Bytes one decoding sequence moves per step for its linear-attention state, averaged over
    the layers, on one of `tp` devices: the recurrent update reads the whole state and writes
    it back each token (fused_recurrent_gated_delta_rule in flash-linear-attention, which vLLM
    and SGLang call for decode, loads h, updates it and stores it), 2 x its bytes; 0 for a model
    without linear attention."""
    state = recurrent_state_bytes_per_layer(m)
    if not state:
        return 0.0
    return 2.0 * state / state_shards(m, tp)


def _tp_allreduce_seconds(
    m: ModelArch,
    dev: DeviceTable,
    tokens: float | Array,
    tp: Degree,
    link_bytes_s: float | Array | None,
    link_latency_s: float,
) -> Array | float:
    """Two all-reduces of tokens x h per layer across `tp` devices (zero when tp = 1): the
    engine's (comm.tensor_parallel_allreduce_seconds) inside a device's fabric, NCCL's ring on
    a named link.

    `tp` may be one degree per device row; rows with tp = 1 get exactly 0.0.
    """
    if isinstance(tp, int) and tp <= 1:
        return 0.0
    msg = tokens * m.hidden_size * 2.0
    if link_bytes_s is not None:  # across hosts or a named link: NCCL's ring
        return LAYER_ALLREDUCES * ring_allreduce_seconds(msg, tp, link_bytes_s, link_latency_s)
    return LAYER_ALLREDUCES * tensor_parallel_allreduce_seconds(
        msg,
        tp,
        dev.scale_up_bytes_s,
        link_latency_s,
        dev.all_to_all,
        dev.small_allreduce_s(tp),
        dev.kernel_rate_bytes_s(tp),
    )


def decode_layer_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    *,
    batch: float,
    context: float,
    tp: Degree = 1,
    link_bytes_s: float | Array | None = None,
    link_latency_s: float = 5e-6,
    kernels: Kernels = None,
) -> Array:
    """Seconds for one block to advance `batch` sequences by one token, on `tp` devices:
    the roofline (the KV cache read at the rate of the engine's kernel family `kernels`,
    kv_read_seconds_per_byte), a fixed per-layer time (a MoE block's scaled by the kernels it
    adds, moe_kernels.layer_overhead_scale), dequantization work and the TP all-reduces.

    On llama.cpp's kernel families the roofline is one over the step's bytes and FLOPs. Another
    engine's decode step is its serving iteration with no prompt tokens (serving_layer_seconds:
    the linear layers and attention each at its own roofline, at the batched serving figures),
    so that an estimate, a plan and the calibration's batched rows time it alike."""
    weights, t_mem, t_cmp = _decode_roofline(
        m, fmt, kv_dtype_bytes, dev, batch, context, tp, kernels
    )
    t = np.maximum(t_mem, t_cmp)
    grid = ~llama_rows(dev, kernels)
    if grid.any():
        b = np.asarray(batch, dtype=np.float64)
        shape = (context, 1.0)
        served = _kernel_seconds(m, fmt, kv_dtype_bytes, dev, weights, b, 0.0 * b, tp, shape)
        t = np.where(grid, served, t)
    t = t + dev.layer_overhead_s * layer_overhead_scale(m)
    if fmt.weight_only:
        # Unpacking each weight costs a few vector ops; FP32 vector units do it (llama.cpp/Marlin).
        t = t + weights / tp * dev.dequant_ops_per_weight / dev.fp32_flops
    t = t + _tp_allreduce_seconds(m, dev, batch, tp, link_bytes_s, link_latency_s)
    return np.asarray(t, dtype=np.float64)


def decode_compute_bound(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    *,
    batch: float,
    context: float,
    kernels: Kernels = None,
) -> npt.NDArray[np.bool_]:
    """Whether a decode step is limited by FLOPs rather than by bytes moved (per device)."""
    _, t_mem, t_cmp = _decode_roofline(m, fmt, kv_dtype_bytes, dev, batch, context, 1, kernels)
    return np.asarray(t_cmp > t_mem)


def decode_step_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    *,
    batch: float,
    context: float,
    tp: int = 1,
    kernels: Kernels = None,
) -> Array:
    """One decode step of the whole model on one group of `tp` devices on the kernel family
    `kernels` (as in decode_layer_seconds)."""
    layer = decode_layer_seconds(
        m, fmt, kv_dtype_bytes, dev, batch=batch, context=context, tp=tp, kernels=kernels
    )
    return (
        m.num_layers * layer + head_seconds(m, fmt, dev, batch, kernels) / tp + dev.step_overhead_s
    )


def prefill_layer_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    dev: DeviceTable,
    *,
    batch: float,
    prompt: float,
    tp: Degree = 1,
    link_bytes_s: float | Array | None = None,
    link_latency_s: float = 5e-6,
    kernels: Kernels = None,
    ubatch: float = PREFILL_UBATCH_TOKENS,
) -> Array:
    """One block over `batch` prompts of `prompt` tokens: compute-bound for long prompts.

    FLOPs: 2 x active params per token + causal attention, half of Kaplan's n_ctx term on
    average. The projections and MLP run at llama.cpp's matmul rate for the format, attention
    at the 16-bit rate (prefill_path; `kernels`, an engine's kernel family or one per device
    row, may name a release that dequantizes GGUF weights, else a current one is assumed). For llama.cpp's
    engines only (prefill_path.on_llama_cpp): other engines' prefill is prompt_time.serving_prefill_seconds. The tokens go through in
    micro-batches of `ubatch` tokens (llama.cpp's n_ubatch, PREFILL_UBATCH_TOKENS by default),
    each reading the weights it touches (a mixture-of-experts model's nearly all) once; on MMQ a
    MoE block's routed products are charged the whole column tiles each expert runs
    (prefill_path.routed_tile_work).
    """
    tokens = batch * prompt
    per_pass = np.minimum(tokens, ubatch)
    # A MoE block's routed products on MMQ run whole column tiles per expert (prefill_path),
    # per micro-batch: the full ones of `ubatch` tokens and the last of what is left over.
    padded = prefill_routed_padding_tokens(m, tokens, ubatch, dev, fmt, kernels)
    linear = 2.0 * (tokens * active_params_per_layer(m) + padded)
    attn = tokens * (
        attention_flops_per_token_per_layer(m, causal_attended_tokens(m, prompt))
        + linear_attention_flops_per_token_per_layer(m, prefill=True)
    )
    per_flop = prefill_linear_seconds_per_flop(dev, fmt, kernels)
    t_cmp = (linear * per_flop + attn / prefill_attention_peak(dev)) / (tp * dev.eff_compute)
    passes = np.maximum(np.ceil(np.asarray(tokens) / ubatch), 1.0)
    touched = passes * weight_params_touched_per_layer(m, per_pass)
    bits = touched_weight_bits(m, fmt, per_pass)
    t_mem = touched * bits / 8 / tp / (dev.bandwidth_bytes_s * dev.eff_bandwidth)
    # Releases without MMQ first write each quantized weight out as FP16 (2 bytes), a pass of
    # its own before the GEMM (prefill_path.prefill_dequant_rows).
    dequant = touched * (bits / 8 + 2.0) * prefill_dequant_rows(dev, fmt, kernels)
    t_deq = dequant / tp / (dev.bandwidth_bytes_s * dev.eff_bandwidth)
    t = np.maximum(t_cmp, t_mem) + t_deq + dev.layer_overhead_s
    t = t + _tp_allreduce_seconds(m, dev, tokens, tp, link_bytes_s, link_latency_s)
    return np.asarray(t, dtype=np.float64)


def prefill_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    dev: DeviceTable,
    *,
    batch: float,
    prompt: float,
    tp: int = 1,
    kernels: Kernels = None,
    ubatch: float = PREFILL_UBATCH_TOKENS,
) -> Array:
    """Time to first token for `batch` prompts processed together on llama.cpp's kernels
    (`kernels`, `ubatch`: as in prefill_layer_seconds)."""
    layer = prefill_layer_seconds(
        m, fmt, dev, batch=batch, prompt=prompt, tp=tp, kernels=kernels, ubatch=ubatch
    )
    return (
        m.num_layers * layer + head_seconds(m, fmt, dev, batch, kernels) / tp + dev.step_overhead_s
    )


def training_flops_per_token(m: ModelArch, seq_len: int, method: str, recompute: str) -> float:
    """Training FLOPs per token: forward 2N + 2 n_layer n_ctx d_attn (Kaplan et al. 2020), backward
    twice the forward (6N in all). Full recomputation adds one forward (Korthikanti et al. 2022).
    LoRA/QLoRA skip weight gradients of frozen matrices: forward + activation gradients = 4N.
    """
    return float(sum(training_flops_split(m, seq_len, method, recompute)))


def training_flops_split(
    m: ModelArch, seq_len: int, method: str, recompute: str
) -> tuple[float, float]:
    """training_flops_per_token in two parts: (the blocks' linear layers, the rest: attention's
    score and value matmuls and the output projection, 2 V h per token forward, tied to the
    embedding or not; the embedding itself is a lookup, no FLOPs). A low-precision training recipe
    runs only the first part on its FP8 tensor path: Transformer Engine's FP8 recipes cover its
    Linear, LayerNormLinear and LayerNormMLP modules, while DotProductAttention stays in BF16
    unless the recipe sets fp8_dpa (off by default), and Megatron-LM's output layer is a plain
    ColumnParallelLinear outside those modules (BF16). Full recomputation repeats the blocks'
    forward, not the output layer's (Narayanan et al. 2021, appendix). torchtitan's selective
    per-op checkpointing (`op`) repeats every second matmul of a block's linear layers
    (architecture.op_checkpoint_linear_share) and none of attention's. LoRA/QLoRA skip the frozen
    weights' gradients (2 of 3 passes over the blocks and the head); attention's Q K^T and P V
    multiply two activations, whose gradients the backward needs whatever is frozen (dQ, dK,
    dP, dV: FlashAttention-2, Dao 2023, section 3.1.2), so it keeps its 3 passes."""
    blocks = float(active_params(m) - embedding_params(m) - head_params(m))
    attended = causal_attended_tokens(m, seq_len)
    attention = m.num_layers * (
        training_attention_flops_per_token_per_layer(m, attended)
        + linear_attention_flops_per_token_per_layer(m, prefill=True)
    )
    logits = 2.0 * m.vocab_size * m.hidden_size
    mult = 3.0 if method == "full" else 2.0
    linear_again, attention_again = RECOMPUTED_FORWARDS.get(recompute, (0.0, 0.0))
    if recompute == "op":
        linear_again = op_checkpoint_linear_share(m)
    return (
        (mult + linear_again) * 2.0 * blocks,
        (ATTENTION_PASSES + attention_again) * attention + mult * logits,
    )


ATTENTION_PASSES = 3.0  # forward, then both operands' gradients: no weight to freeze among them


# Forward passes repeated in the backward pass by a recomputation policy: (of the blocks' linear
# layers, of attention's matmuls). `full` repeats the whole forward (Korthikanti et al. 2022);
# `selective` recomputes attention's softmax and dropout only, no matmul. `op` is torchtitan's
# selective per-op policy (torchtitan/models/llama/parallelize_llama.py, `_custom_policy`:
# "Saves output of all compute ops, except every second mm"): attention's SDPA output is kept
# (no attention matmul again) and every second linear matmul of a block is recomputed, a share
# of the linear forward that follows the layers' sizes (architecture.op_checkpoint_linear_share,
# training_flops_split), not half of it.
RECOMPUTED_FORWARDS: dict[str, tuple[float, float]] = {"full": (1.0, 1.0), "op": (0.0, 0.0)}


def training_tokens_per_second(
    m: ModelArch,
    dev: DeviceTable,
    *,
    seq_len: int,
    method: str = "full",
    recompute: str = "selective",
    precision_fmt: WeightFormat,
    fused_dispatch: bool = False,
) -> Array:
    """Tokens per second per device: the FLOPs per token at the class's model FLOPs utilization
    (MFU), plus, for a mixture-of-experts model, the time of routing each token
    (moe_routing_seconds_per_token; `fused_dispatch`: a dispatcher that fuses the permutation
    into its all-to-all, DeepEP's). Under an FP8 recipe only the blocks' linear layers run at
    the FP8 peak, the rest at the 16-bit one (training_flops_split): Megatron-Bridge's dense FP8
    runs reach 1.65-1.8x what BF16 runs of other stacks reach on the same H100s, not the 2x of
    the peaks (calibration/measurements.yaml)."""
    linear, rest = training_flops_split(m, seq_len, method, recompute)
    sixteen = dev.peak_flops(weight_format("bf16"))
    compute_s = (linear / dev.peak_flops(precision_fmt) + rest / sixteen) / dev.eff_training_mfu
    routing = moe_routing_seconds_per_token(m, dev, fused=fused_dispatch)
    return np.asarray(1.0 / (compute_s + routing), dtype=np.float64)


def training_tp_seconds_per_layer(
    m: ModelArch, dev: DeviceTable, tokens: float, tp: int, recompute: str
) -> Array:
    """Seconds per block of one micro-batch of `tokens` spent in the tensor-parallel group's
    all-reduces, per device row (zero for tp = 1). Megatron-LM's layout (Shoeybi et al. 2019;
    Narayanan et al. 2021, section 3.2): two all-reduces of tokens x h in the forward pass (after
    attention, after the MLP) and two in the backward pass (their conjugates, also under LoRA,
    whose backward still computes the input gradients through the frozen matrices); full
    recomputation repeats the forward's two. Not overlapped with compute: Megatron-LM's
    default without sequence parallelism and communication overlap."""
    passes = 3.0 if recompute == "full" else 2.0  # forward, backward (+ the recomputed forward)
    per_row = np.zeros(len(dev.devices))  # one figure per device row, also for tp = 1
    return per_row + passes * _tp_allreduce_seconds(m, dev, tokens, tp, None, 5e-6)


def routed_elements_per_token(m: ModelArch) -> int:
    """Activation elements sent to experts per token: each MoE layer sends the token's hidden
    vector to each of its routed experts (shared experts and dense layers route nothing)."""
    if m.moe is None:
        return 0
    return (m.num_layers - m.moe.first_dense_layers) * m.moe.experts_per_token * m.hidden_size


def moe_routing_seconds_per_token(m: ModelArch, dev: DeviceTable, *, fused: bool = False) -> Array:
    """Training a mixture-of-experts model: the work per routed element that FLOPs do not count
    (gating, permuting tokens to their experts and back, dispatch and combine, forward and
    backward), `moe_routed_ns` per routed element. Narrow experts spend proportionally more of a
    step routing: on the same H100s Megatron-Core trains Qwen3-30B-A3B (128 experts of width 768,
    8 per token) at about a sixth of a dense model's MFU, gpt-oss-120b (width 2880, 4 per token)
    at about a half (calibration/measurements.yaml, megatron-bridge-perf-2511).

    The time does not follow the part's bandwidth: fitted per GPU generation as bytes at the
    bandwidth, Blackwell's rows needed 876 bytes per element and Hopper's 313, 2.8x at 2.4x the
    bandwidth, so one time per class is fitted on every generation's runs (calibration/fit.py).
    A dispatcher that writes each token into its expert's buffer inside the all-to-all kernel
    (`fused`: DeepEP, whose dispatch and combine take the router's top-k indices; Megatron-Core's
    `flex` dispatcher) skips the permute and unpermute passes and pays `moe_fused_share` of it.
    No part routes faster than its memory moves ROUTED_BYTES_FLOOR per element: a part with a
    tenth of the measured parts' bandwidth is not credited with their time. The floor bounds
    the plain dispatcher's time, and a fused one pays its share of that (the share is fitted on
    published DeepEP runs only, on parts the floor does not bind)."""
    share = dev.moe_fused_share if fused else np.ones(len(dev.devices))
    per_element = np.maximum(dev.moe_routed_s, ROUTED_BYTES_FLOOR / dev.bandwidth_bytes_s)
    return np.asarray(routed_elements_per_token(m) * per_element * share, dtype=np.float64)


# Bytes per routed element per MoE layer that training moves beyond its FLOPs, at least: the
# forward pass permutes a token's hidden vector to its expert (read, write), dispatches it (send,
# receive) and brings the output back the same way: 8 passes of 2 bytes; the backward pass moves
# the gradients twice over (16 passes): 48 bytes.
ROUTED_BYTES_FLOOR = 48.0


def _kernel_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    touched: Array,
    b: Array,
    p: Array,
    tp: Degree,
    shape: tuple[float, float],
) -> Array:
    """The linear layers' roofline plus attention's, for one block on one of `tp` devices (see
    serving_layer_seconds): `touched` weights, `b` decodes over `shape[0]` tokens of context,
    `p` prompt tokens of prompts `shape[1]` long. The weights and the FLOPs split over the
    ranks, the KV cache only as far as its heads do (memory.kv_shards); attention runs at the KV
    cache's precision (a 16-bit cache: 16-bit attention beside FP8 weights)."""
    context, prompt = shape
    bw = dev.bandwidth_bytes_s * dev.eff_bandwidth
    compute = dev.peak_flops(fmt) * dev.batched_compute(fmt)
    kv_fmt = weight_format("bf16" if kv_dtype_bytes >= 2 else "fp8")
    attn_compute = dev.peak_flops(kv_fmt) * dev.batched_compute(kv_fmt)
    attended = attended_tokens(m, context)
    w_bytes = touched * touched_weight_bits(m, fmt, b + p) / 8
    kv_read = b * attended * kv_elements_per_token_per_layer(m) * kv_dtype_bytes
    state = b * state_traffic_per_layer(m, tp)
    linear = (b + p) * 2.0 * active_params_per_layer(m)
    attn = b * (
        attention_flops_per_token_per_layer(m, attended)
        + linear_attention_flops_per_token_per_layer(m, prefill=False)
    ) + p * (
        attention_flops_per_token_per_layer(m, causal_attended_tokens(m, prompt))
        + linear_attention_flops_per_token_per_layer(m, prefill=True)
    )
    return np.asarray(
        np.maximum(w_bytes / bw, linear / compute) / tp
        + np.maximum((kv_read / kv_shards(m, tp) + state) / bw, attn / tp / attn_compute)
    )


def serving_layer_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    *,
    batch: float | Array,
    context: float,
    prefill_tokens: float | Array,
    prompt: float,
    tp: Degree = 1,
    serial: bool = False,
    link_bytes_s: float | Array | None = None,
    link_latency_s: float = 5e-6,
    kernels: Kernels = None,
) -> Array:
    """One block of one serving iteration: `batch` sequences decode one token each while
    `prefill_tokens` prompt tokens (chunks of prompts `prompt` tokens long) are processed.

    Continuous batching with chunked prefill (vLLM, SGLang, TensorRT-LLM; Agrawal et al. 2024,
    "Sarathi-Serve", section 4): decode and prefill tokens share one forward pass, so the weights
    are read once for both. The pass runs two kinds of kernel one after the other, each at its own
    roofline, and their times add (the operator-by-operator roofline of Yuan et al. 2024, "LLM
    Inference Unveiled: Survey and Roofline Model Insights", whose LLM-Viewer bounds each operator
    of a layer by its own arithmetic intensity and sums their times):
    - the linear layers (projections and MLP, GEMMs over every token of the pass): the larger of
      the touched weights / bandwidth and (decode + prompt tokens) x 2 N / batched compute;
    - attention (paged attention over each sequence's own KV cache, Kwon et al. 2023): the larger
      of the decodes' KV reads / bandwidth and the score and value FLOPs (decode tokens over the
      context, prompt tokens over half the prompt) / batched compute.
    One roofline over the sums would let long contexts' KV reads hide behind the matrix products,
    which no engine does: the KV cache is read by the attention kernel alone.
    `serial` (llama.cpp-style pools): prompt processing stops decode, so the two passes add,
    the prompt's at llama.cpp's rates for `kernels` (prefill_layer_seconds: a release that
    dequantizes GGUF weights prefills at the FP16 rate).
    """
    if serial:
        dec = decode_layer_seconds(
            m,
            fmt,
            kv_dtype_bytes,
            dev,
            batch=batch,  # type: ignore[arg-type]
            context=context,
            tp=tp,
            link_bytes_s=link_bytes_s,
            link_latency_s=link_latency_s,
            kernels=kernels,
        )
        pre = np.where(
            np.asarray(prefill_tokens) > 0,
            prefill_layer_seconds(
                m,
                fmt,
                dev,
                batch=np.asarray(prefill_tokens) / max(prompt, 1.0),  # type: ignore[arg-type]
                prompt=prompt,
                tp=tp,
                link_bytes_s=link_bytes_s,
                link_latency_s=link_latency_s,
                kernels=kernels,
            ),
            0.0,
        )
        return np.asarray(dec + pre, dtype=np.float64)
    b = np.asarray(batch, dtype=np.float64)
    p = np.asarray(prefill_tokens, dtype=np.float64)
    tokens = b + p
    if m.moe is None:
        touched = np.full(tokens.shape, weight_params_touched_per_layer(m, 1.0))
    else:
        touched = weight_params_touched_per_layer(m, tokens)
    t = _kernel_seconds(m, fmt, kv_dtype_bytes, dev, touched, b, p, tp, (context, prompt))
    t = t + dev.layer_overhead_s * layer_overhead_scale(m)
    if fmt.weight_only:
        t = t + touched / tp * dev.dequant_ops_per_weight / dev.fp32_flops
    t = t + _tp_allreduce_seconds(m, dev, tokens, tp, link_bytes_s, link_latency_s)
    return np.asarray(t, dtype=np.float64)
