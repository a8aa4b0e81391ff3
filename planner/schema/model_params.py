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


def expert_params(m: ModelArch) -> int:
    """One routed expert of a MoE block (0 for a dense model): read from the width, not as the
    block's total less its active weights over the experts a token skips, which is 0 / 0 when
    every expert is active per token (num_experts_per_tok = num_local_experts)."""
    return 0 if m.moe is None else mlp_params(m, m.moe.expert_intermediate_size)


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
