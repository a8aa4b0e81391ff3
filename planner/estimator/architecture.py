"""Parameter counts, FLOPs and KV-cache size of a decoder-only transformer, from its architecture.

Conventions follow the Hugging Face implementations (LlamaForCausalLM, MixtralForCausalLM,
Qwen2ForCausalLM, Gemma2ForCausalLM, DeepseekV3ForCausalLM, GPT-3 as in Brown et al. 2020):
attention is q/k/v/o projections with grouped-query heads (Ainslie et al. 2023, "GQA"),
the MLP is gated (SwiGLU, Shazeer 2020: gate, up, down) or plain (up, down), MoE layers hold
routed experts plus shared experts and a router (Fedus et al. 2021; DeepSeek-AI 2024).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.schema.catalog import ModelArch


@dataclass(frozen=True)
class BlockGroup:
    """A run of identical transformer blocks."""

    kind: str  # "dense" or "moe"
    count: int
    params: int  # parameters stored per block
    active_params: int  # parameters touched per token per block (MoE: routed top-k + shared)


def _norm_params(m: ModelArch) -> int:
    # RMSNorm has a scale vector; LayerNorm a scale and a bias.
    return m.hidden_size * (2 if m.norm == "layernorm" else 1)


def attention_params(m: ModelArch) -> int:
    """Attention projections of one block (plus MLA's low-rank norms)."""
    h = m.hidden_size
    nh = m.num_attention_heads
    if m.mla is not None:
        a = m.mla
        qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * nh * qk_dim
        else:
            q = h * nh * qk_dim
        # DeepSeek-V2 paper, section 2.1: compressed latent c_KV (kv_lora_rank) + decoupled RoPE key.
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv += a.kv_lora_rank * nh * (a.qk_nope_head_dim + a.v_head_dim)
        o = nh * a.v_head_dim * h
        return q + kv + o
    hd = m.attn_head_dim
    q_out, kv_out = nh * hd, m.num_key_value_heads * hd
    params = h * q_out + 2 * h * kv_out + q_out * h
    if m.attention_bias in ("qkv", "all"):
        params += q_out + 2 * kv_out
    if m.attention_bias == "all":
        params += h
    return params


def mlp_params(m: ModelArch, width: int) -> int:
    """One dense feed-forward network of the given width."""
    h = m.hidden_size
    mats = 3 if m.mlp == "gated" else 2
    params = mats * h * width
    if m.mlp_bias:
        params += (mats - 1) * width + h
    return params


def block_groups(m: ModelArch) -> list[BlockGroup]:
    """The model's blocks as runs of identical blocks (dense first, then MoE)."""
    norms = (2 + m.extra_norms_per_layer) * _norm_params(m)
    attn = attention_params(m)
    if m.moe is None:
        p = attn + mlp_params(m, m.intermediate_size) + norms
        return [BlockGroup("dense", m.num_layers, p, p)]
    moe = m.moe
    groups: list[BlockGroup] = []
    if moe.first_dense_layers:
        width = moe.dense_intermediate_size or m.intermediate_size
        p = attn + mlp_params(m, width) + norms
        groups.append(BlockGroup("dense", moe.first_dense_layers, p, p))
    expert = mlp_params(m, moe.expert_intermediate_size)
    router = m.hidden_size * moe.num_experts
    shared = moe.shared_experts * expert
    total = attn + norms + router + shared + moe.num_experts * expert
    active = attn + norms + router + shared + moe.experts_per_token * expert
    groups.append(BlockGroup("moe", m.num_layers - moe.first_dense_layers, total, active))
    return groups


def embedding_params(m: ModelArch) -> int:
    """Token embedding plus learned positions (GPT-3)."""
    return (m.vocab_size + m.learned_position_embeddings) * m.hidden_size


def head_params(m: ModelArch) -> int:
    """Final norm plus the output projection (zero extra when tied to the embedding)."""
    return _norm_params(m) + (0 if m.tie_word_embeddings else m.vocab_size * m.hidden_size)


def total_params(m: ModelArch) -> int:
    blocks = sum(g.count * g.params for g in block_groups(m))
    return blocks + embedding_params(m) + head_params(m)


def active_params(m: ModelArch) -> int:
    """Parameters touched per token (equals total_params for dense models)."""
    blocks = sum(g.count * g.active_params for g in block_groups(m))
    return blocks + embedding_params(m) + head_params(m)


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
