"""FLOPs and KV-cache size of a decoder-only transformer, from its architecture (and its
parameter counts, from planner.schema.model_params).

Conventions follow the Hugging Face implementations (LlamaForCausalLM, MixtralForCausalLM,
Qwen2ForCausalLM, Gemma2ForCausalLM, DeepseekV3ForCausalLM, GPT-3 as in Brown et al. 2020):
attention is q/k/v/o projections with grouped-query heads (Ainslie et al. 2023, "GQA"),
the MLP is gated (SwiGLU, Shazeer 2020: gate, up, down) or plain (up, down), MoE layers hold
routed experts plus shared experts and a router (Fedus et al. 2021; DeepSeek-AI 2024).
"""

from __future__ import annotations

from planner.schema.catalog import ModelArch

# Parameter counts live with the schema (the catalog checks published totals against them);
# the estimator's callers import them from here.
from planner.schema.model_params import (  # noqa: F401
    active_params,
    block_groups,
    embedding_params,
    expert_params,
    head_params,
    total_params,
)


def kv_elements_per_token_per_layer(m: ModelArch) -> int:
    """Numbers cached per token per layer.

    GQA/MHA: K and V for each KV head, 2 x n_kv x head_dim (Ainslie et al. 2023).
    MLA: the compressed latent plus the decoupled RoPE key, kv_lora_rank + qk_rope_head_dim
    (DeepSeek-V2 paper, table 1: (d_c + d_h^R) per token per layer).
    """
    if m.mla is not None:
        return m.mla.kv_lora_rank + m.mla.qk_rope_head_dim
    return 2 * m.num_key_value_heads * m.attn_head_dim


def linear_layers(m: ModelArch) -> int:
    """Layers whose mixer is linear attention (0 for a model that attends in every layer)."""
    return m.linear_attention.layers if m.linear_attention else 0


def kv_layers(m: ModelArch) -> int:
    """Layers that keep a KV cache: every layer but the linear-attention ones."""
    return m.num_layers - linear_layers(m)


def attended_tokens(m: ModelArch, context: float) -> float:
    """Tokens a layer caches and attends to at `context`, averaged over the layers: every token
    for a global layer, at most `sliding_window` for a local one (Mistral 7B, Jiang et al. 2023,
    sec. 2; Gemma 2 and 3 reports: local layers cache only their window), none for a linear-
    attention layer, which keeps a fixed-size state instead (recurrent_state_bytes_per_layer)."""
    if m.sliding_window is None and m.linear_attention is None:
        return context
    glob = kv_layers(m) - m.local_layers
    window = context if m.sliding_window is None else min(context, m.sliding_window)
    return (glob * context + m.local_layers * window) / m.num_layers


def causal_attended_tokens(m: ModelArch, prompt: float) -> float:
    """Tokens attended per token over a causal prompt of `prompt` tokens, averaged over positions
    and layers: prompt / 2 for a global layer; for a window w < prompt, the mean of min(t, w)
    over t in [0, prompt] is w - w^2 / (2 prompt); none for a linear-attention layer."""
    if m.linear_attention is None and (m.sliding_window is None or prompt <= 0):
        return prompt / 2
    glob = kv_layers(m) - m.local_layers
    if m.sliding_window is None or prompt <= 0:
        return glob * prompt / 2 / m.num_layers
    w = float(m.sliding_window)
    local_mean = prompt / 2 if prompt <= w else w - w * w / (2 * prompt)
    return (glob * prompt / 2 + m.local_layers * local_mean) / m.num_layers


# Bytes per number of a linear-attention layer's recurrent state. llama.cpp keeps both the
# convolution and the recurrent state in F32 (llama-model.cpp: llama_memory_hybrid's recurrent
# memory is created with GGML_TYPE_F32 for both); Qwen3.5 and Qwen3.6's config.json ask for a
# float32 recurrent state (`mamba_ssm_dtype`), which SGLang follows when SGLANG_MAMBA_SSM_DTYPE is
# unset. vLLM (mamba_utils.MambaStateDtypeCalculator) and SGLang keep the convolution state in
# the model's 16-bit dtype, and vLLM the recurrent state too unless --mamba-ssm-cache-dtype is
# float32: 4 bytes bounds every engine's from above (by at most 2x for vLLM's default).
RECURRENT_STATE_BYTES = 4.0


def recurrent_state_elements(m: ModelArch) -> int:
    """Numbers one linear-attention layer keeps per sequence, whatever the context: a
    key_head_dim x value_head_dim state per value head, plus the last conv_kernel - 1 inputs of
    the causal convolution over q, k and v (conv_dim = 2 key_dim + value_dim). vLLM,
    mamba_utils.MambaStateShapeCalculator.gated_delta_net_state_shape: temporal
    (num_v_heads, head_v_dim, head_k_dim), conv (conv_kernel_size - 1, conv_dim). 0 without
    linear attention."""
    la = m.linear_attention
    if la is None:
        return 0
    state = la.num_value_heads * la.key_head_dim * la.value_head_dim
    conv_dim = 2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim
    return state + (la.conv_kernel_dim - 1) * conv_dim


def recurrent_state_bytes_per_layer(m: ModelArch) -> float:
    """Recurrent-state bytes one sequence keeps, averaged over all the layers (as
    attended_tokens is): linear layers x recurrent_state_elements x RECURRENT_STATE_BYTES / L."""
    return linear_layers(m) * recurrent_state_elements(m) * RECURRENT_STATE_BYTES / m.num_layers


# Tokens per chunk of the chunked gated delta rule: flash-linear-attention's chunk_gated_delta_rule
# (BT = 64), the kernel vLLM, SGLang and transformers' Qwen3-Next call for prefill.
DELTA_RULE_CHUNK = 64


def linear_attention_flops_per_token_per_layer(m: ModelArch, *, prefill: bool) -> float:
    """FLOPs per token of the linear-attention mixer beyond its projections (those are matmuls,
    counted in the parameters), averaged over all layers. Per value head of widths dk, dv:
    decode, the recurrent step of transformers' torch_recurrent_gated_delta_rule (Qwen3-Next):
    decay the state (dk dv), read it with the key (2 dk dv), add the rank-one delta update
    (2 dk dv) and read it with the query (2 dk dv): 7 dk dv. Prefill, the chunked form (Yang et
    al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length",
    sec. 3; chunk C = DELTA_RULE_CHUNK): within a chunk the q k^T and k k^T products and the
    WY/UT transform's W = T k and U = T v (2 C (3 dk + dv)), the chunk's output A U (2 C dv),
    and across chunks the query's, W's and the update's products with the state (6 dk dv).
    Plus the short convolution's 2 x kernel x conv_dim in both."""
    la = m.linear_attention
    if la is None:
        return 0.0
    dk, dv, c = la.key_head_dim, la.value_head_dim, DELTA_RULE_CHUNK
    per_head = 2 * c * (3 * dk + 2 * dv) + 6 * dk * dv if prefill else 7 * dk * dv
    conv_dim = 2 * la.num_key_heads * dk + la.num_value_heads * dv
    per_layer = la.num_value_heads * per_head + 2 * la.conv_kernel_dim * conv_dim
    return linear_layers(m) * per_layer / m.num_layers


def attention_flops_per_token_per_layer(m: ModelArch, context: float) -> float:
    """Score and value matmuls against `context` cached tokens: 2 x 2 x heads x head_dim x context.

    Kaplan et al. 2020, table 1 (2 n_layer n_ctx d_attn per token, forward, with d_attn = heads x
    head_dim). MLA attends in the latent space on decode: (kv_lora + rope) for scores, kv_lora for
    values (DeepSeek-V2, absorbed weights).
    """
    nh = m.num_attention_heads
    if m.mla is not None:
        a = m.mla
        return 2.0 * nh * context * (2 * a.kv_lora_rank + a.qk_rope_head_dim)
    return 4.0 * nh * m.attn_head_dim * context


def training_attention_flops_per_token_per_layer(m: ModelArch, context: float) -> float:
    """Score and value matmuls per token against `context` tokens when training: as
    attention_flops_per_token_per_layer, except that MLA is not absorbed. Training up-projects the
    latent into per-head keys of qk_nope + qk_rope dims and values of v_head dims and attends in
    that space (DeepSeek-V2, section 2.1.2-2.1.3; Megatron-Core's MLASelfAttention): 2 x heads x
    context x (qk_nope + qk_rope + v_head). Folding W^UK into the query and W^UV into the output
    (the absorbed form, 2 x kv_lora + rope per head) saves decode's memory reads, not FLOPs: for
    DeepSeek-V3 it costs 3.4x the per-head attention's."""
    if m.mla is None:
        return attention_flops_per_token_per_layer(m, context)
    a = m.mla
    dims = a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim
    return 2.0 * m.num_attention_heads * context * dims


def op_checkpoint_linear_share(m: ModelArch) -> float:
    """The share of a block's linear-layer FLOPs that torchtitan's selective per-op
    checkpointing computes twice. Its policy saves the output of every op of its save list
    "except every second mm" (torchtitan, `_custom_policy` of the per-op activation
    checkpointing): a counter of aten.mm calls, made afresh for each checkpointed block
    (`selective_checkpointing_context_fn` builds it per call), marks the 2nd, 4th, ... mm of
    the block's forward for recomputation. torchtitan's Llama block runs wq, wk, wv, wo, then
    the MLP's w1, w3 and w2 (`w2(silu(w1(x)) * w3(x))`; a plain MLP w1, w2): wk, wo and w3 are
    recomputed, a share of the FLOPs that follows the layers' sizes, not half (Llama 3 8B:
    (4096 x 1024 + 4096^2 + 4096 x 14336) / 218.1 M = 0.365). Written for dense blocks of
    grouped-query attention alone: a mixture-of-experts block (grouped_mm, not aten.mm), MLA or
    a block of another kind runs other ops, and is an error rather than a guess."""
    kinds = {g.kind for g in block_groups(m)}
    if m.moe is not None or m.mla is not None or m.attention_output_gate or kinds != {"dense"}:
        raise ValueError(
            f"{m.id}: torchtitan's per-op checkpointing is modelled for dense blocks of "
            "grouped-query attention only; give this run's recomputation as `full`, "
            "`selective` or `none`"
        )
    head = m.head_dim or m.hidden_size // m.num_attention_heads
    q = m.hidden_size * m.num_attention_heads * head
    kv = m.hidden_size * m.num_key_value_heads * head
    ffn = m.hidden_size * m.intermediate_size
    mms = [q, kv, kv, q, *([ffn] * (3 if m.mlp == "gated" else 2))]  # forward order
    return sum(mms[1::2]) / sum(mms)
