"""Parameter counts of a decoder-only transformer, from its catalog architecture: pure arithmetic
on a `ModelArch`, here so that the catalog can check an entry's published total against it
(planner.estimator.architecture re-exports them beside FLOPs and KV-cache size).

Conventions follow the Hugging Face implementations (LlamaForCausalLM, MixtralForCausalLM,
Qwen2ForCausalLM, Gemma2ForCausalLM, DeepseekV3ForCausalLM, GPT-3 as in Brown et al. 2020):
attention is q/k/v/o projections with grouped-query heads (Ainslie et al. 2023, "GQA"),
the MLP is gated (SwiGLU, Shazeer 2020: gate, up, down) or plain (up, down), MoE layers hold
routed experts plus shared experts and a router (Fedus et al. 2021; DeepSeek-AI 2024).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.schema.catalog import ModelArch


@dataclass(frozen=True)
class BlockGroup:
    """A run of identical transformer blocks."""

    kind: str  # "dense" or "moe"
    count: int
    params: int  # parameters stored per block
    active_params: int  # parameters touched per token per block (MoE: routed top-k + shared)


def split_heads(m: ModelArch) -> int:
    """The count a tensor-parallel degree must divide: the attention heads, and a hybrid's
    linear-attention query/key heads too (vLLM's Qwen3NextGatedDeltaNet gives each rank
    num_k_heads // tp_size of them and views its projections by that share, so a degree that
    does not divide them leaves heads with no rank)."""
    heads = m.num_attention_heads
    return math.gcd(heads, m.linear_attention.num_key_heads) if m.linear_attention else heads


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
    # A gated output (Qwen3-Next, Qwen3.5: Qwen3NextAttention's q_proj) doubles the query
    # projection: queries and the sigmoid gate on the attention output.
    gate = q_out if m.attention_output_gate else 0
    params = h * (q_out + gate) + 2 * h * kv_out + q_out * h
    if m.attention_bias in ("qkv", "all"):
        params += q_out + 2 * kv_out
    if m.attention_bias == "all":
        params += h
    return params


def linear_attention_params(m: ModelArch) -> int:
    """One Gated DeltaNet layer (0 for a model without them), as Hugging Face's
    Qwen3NextGatedDeltaNet holds it: in_proj_qkvz (h -> 2 key_dim + 2 value_dim: q, k, v and the
    output gate z), in_proj_ba (h -> 2 value heads: beta and the decay's input), a depthwise causal
    conv1d over q, k and v without bias (conv_dim x kernel), dt_bias and A_log (one per value
    head), the gated RMSNorm (one value head wide) and out_proj (value_dim -> h). Qwen3.5 splits
    the input projections into in_proj_qkv, in_proj_z, in_proj_b, in_proj_a: the same count."""
    la = m.linear_attention
    if la is None:
        return 0
    h = m.hidden_size
    key_dim = la.num_key_heads * la.key_head_dim
    value_dim = la.num_value_heads * la.value_head_dim
    conv_dim = 2 * key_dim + value_dim
    projections = h * (2 * key_dim + 2 * value_dim) + h * 2 * la.num_value_heads
    return (
        projections
        + conv_dim * la.conv_kernel_dim
        + 2 * la.num_value_heads
        + la.value_head_dim
        + value_dim * h
    )


def mlp_params(m: ModelArch, width: int) -> int:
    """One dense feed-forward network of the given width."""
    h = m.hidden_size
    mats = 3 if m.mlp == "gated" else 2
    params = mats * h * width
    if m.mlp_bias:
        params += (mats - 1) * width + h
    return params


def expert_params(m: ModelArch) -> int:
    """One routed expert of a MoE block (0 for a dense model): read from the width, not as the
    block's total less its active weights over the experts a token skips, which is 0 / 0 when
    every expert is active per token (num_experts_per_tok = num_local_experts)."""
    return 0 if m.moe is None else mlp_params(m, m.moe.expert_intermediate_size)


def block_groups(m: ModelArch) -> list[BlockGroup]:
    """The model's blocks as runs of identical blocks (dense first, then MoE); a hybrid model's
    runs split again into full-attention and linear-attention blocks (_split_linear)."""
    return _split_linear(m, _ffn_groups(m))


def _split_linear(m: ModelArch, groups: list[BlockGroup]) -> list[BlockGroup]:
    """Each run's blocks whose mixer is linear attention, with that mixer's weights in place of
    attention's. The linear layers are taken from the last run first: Qwen3-Next and Qwen3.5 have
    one run (every layer MoE, or every layer dense), so the split needs no layer positions."""
    if m.linear_attention is None:
        return groups
    swap = linear_attention_params(m) - attention_params(m)
    left = m.linear_attention.layers
    out: list[BlockGroup] = []
    for g in reversed(groups):
        n = min(left, g.count)
        left -= n
        if g.count > n:
            out.append(BlockGroup(g.kind, g.count - n, g.params, g.active_params))
        if n:
            out.append(BlockGroup(g.kind, n, g.params + swap, g.active_params + swap))
    return out[::-1]


def _ffn_groups(m: ModelArch) -> list[BlockGroup]:
    """The blocks as runs of identical feed-forward layers, every mixer counted as attention."""
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
    expert = expert_params(m)
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
