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


def attended_tokens(m: ModelArch, context: float) -> float:
    """Tokens a layer caches and attends to at `context`, averaged over the layers: every token
    for a global layer, at most `sliding_window` for a local one (Mistral 7B, Jiang et al. 2023,
    sec. 2; Gemma 2 and 3 reports: local layers cache only their window)."""
    if m.sliding_window is None:
        return context
    local = m.local_layers
    window = min(context, m.sliding_window)
    return ((m.num_layers - local) * context + local * window) / m.num_layers


def causal_attended_tokens(m: ModelArch, prompt: float) -> float:
    """Tokens attended per token over a causal prompt of `prompt` tokens, averaged over positions
    and layers: prompt / 2 for a global layer; for a window w < prompt, the mean of min(t, w)
    over t in [0, prompt] is w - w^2 / (2 prompt)."""
    if m.sliding_window is None or prompt <= 0:
        return prompt / 2
    w = float(m.sliding_window)
    local_mean = prompt / 2 if prompt <= w else w - w * w / (2 * prompt)
    local = m.local_layers
    return ((m.num_layers - local) * prompt / 2 + local * local_mean) / m.num_layers


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
