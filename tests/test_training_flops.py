"""Training FLOPs per token and what an FP8 recipe speeds up, pinned to hand arithmetic.

Counting follows Megatron-LM (Narayanan et al. 2021, appendix: 72 B s l h^2 (1 + s / 6h +
V / 12hl) per iteration): the blocks' matmuls and the output projection count, the embedding
lookup does not, full recomputation repeats the blocks' forward only.
"""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.estimator.architecture import (
    attention_flops_per_token_per_layer,
    training_attention_flops_per_token_per_layer,
)
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.perf import (
    training_flops_per_token,
    training_flops_split,
    training_tokens_per_second,
)

# Llama 3.1 8B (Meta's config.json): 32 layers, hidden 4,096, MLP 14,336, 32 query heads and 8 KV
# heads of 128, vocabulary 128,256, untied head.
# One block: q and o 2 x 4,096^2, k and v 2 x 4,096 x 1,024, MLP 3 x 4,096 x 14,336, two norms
# 2 x 4,096: 218,112,000; 32 blocks 6,979,584,000. Output projection 128,256 x 4,096 (the final
# norm's 4,096 weights are no matmul).
BLOCKS_8B = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096)
HEAD_8B = 128256 * 4096
# Causal attention over 8,192 tokens: 4,096 attended on average, 4 x 32 heads x 128 x 4,096 per
# layer (Kaplan et al. 2020, table 1), 32 layers.
ATTENTION_8B_8K = 32 * 4 * 32 * 128 * 4096


def test_llama_8b_training_flops_by_hand() -> None:
    m = load_catalog().model("llama-3.1-8b")
    linear, rest = training_flops_split(m, 8192, "full", "selective")
    assert linear == 3 * 2 * BLOCKS_8B  # forward 2N, backward 4N
    assert rest == 3 * ATTENTION_8B_8K + 3 * 2 * HEAD_8B  # no FLOPs for the embedding lookup
    assert training_flops_per_token(m, 8192, "full", "selective") == linear + rest
    # Full recomputation repeats the blocks' forward (attention included), not the head's.
    linear_r, rest_r = training_flops_split(m, 8192, "full", "full")
    assert linear_r == 4 * 2 * BLOCKS_8B
    assert rest_r == 4 * ATTENTION_8B_8K + 3 * 2 * HEAD_8B
    # LoRA: forward and activation gradients through the frozen matrices, 4N.
    lora, lora_rest = training_flops_split(m, 8192, "lora", "selective")
    assert lora == 2 * 2 * BLOCKS_8B
    # Attention multiplies two activations: its backward computes both operands' gradients (dQ,
    # dK, dP, dV) with or without frozen weights, 3 passes; the frozen head skips its weight's.
    assert lora_rest == 3 * ATTENTION_8B_8K + 2 * 2 * HEAD_8B
    qlora = training_flops_split(m, 8192, "qlora", "full")
    assert qlora == (3 * 2 * BLOCKS_8B, 4 * ATTENTION_8B_8K + 2 * 2 * HEAD_8B)


def test_torchtitans_per_op_checkpointing_repeats_every_second_matmul() -> None:
    """torchtitan's selective per-op policy ("Saves output of all compute ops, except every
    second mm", torchtitan/models/llama/parallelize_llama.py) counts a block's aten.mm calls
    afresh per block and recomputes the 2nd, 4th and 6th: wk, wo and w3 of wq, wk, wv, wo, w1,
    w3, w2. Llama 3 8B: (4096 x 1024 + 4096^2 + 4096 x 14336) = 79,691,776 of the block's
    218,103,808 linear weights, 0.365 of the linear forward again (not half: wq, w1 and w2,
    kept, are the larger). SDPA's output is kept: attention and the head cost what they cost
    without recomputation. torchtitan's Llama 3 8B rows on 64 A100s
    (calibration/measurements.yaml) state this policy."""
    m = load_catalog().model("llama-3.1-8b")
    linear, rest = training_flops_split(m, 8192, "full", "op")
    again = (4096 * 1024 + 4096**2 + 4096 * 14336) / (
        2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    )
    assert again == pytest.approx(0.3654, abs=1e-4)
    assert linear == pytest.approx((3 + again) * 2 * BLOCKS_8B, rel=1e-12)
    assert rest == 3 * ATTENTION_8B_8K + 3 * 2 * HEAD_8B


def test_per_op_checkpointing_of_a_block_it_does_not_describe_is_an_error() -> None:
    # A mixture-of-experts block runs its experts as grouped_mm, which the policy's mm counter
    # does not see: no share is guessed.
    with pytest.raises(ValueError, match="qwen3-30b-a3b: torchtitan's per-op"):
        training_flops_split(load_catalog().model("qwen3-30b-a3b"), 4096, "full", "op")


def test_a_tied_output_projection_still_costs_its_matmul() -> None:
    """Llama 3.2 1B ties its output projection to the embedding (128,256 x 2,048): no weights of
    its own, but the logits are still 2 V h FLOPs per token forward, 6 V h in training."""
    m = load_catalog().model("llama-3.2-1b")
    assert m.tie_word_embeddings
    _, rest = training_flops_split(m, 2, "full", "none")
    attention = 16 * 4 * 32 * 64 * 1.0  # 16 layers, 32 heads of 64, one token attended
    assert rest == pytest.approx(3 * attention + 3 * 2 * 128256 * 2048)


def test_fp8_speeds_up_the_linear_layers_only() -> None:
    """H100 SXM dense peaks 989.4 (BF16) and 1,978.9 (FP8) TFLOP/s. Under FP8 the blocks' linear
    layers run at the FP8 peak and attention and the head at BF16's, so Llama 3.1 8B at 8,192
    tokens trains (L + R) / (L / 2 + R) = 1.69x faster, not 2x (L, R: the two parts above).
    Megatron-Bridge's FP8 runs measure 1.65-1.8x over other stacks' BF16 runs on H100."""
    cat = load_catalog()
    m = cat.model("llama-3.1-8b")
    table = device_table([cat.accelerator("h100-sxm")])
    kw = {"seq_len": 8192, "method": "full", "recompute": "selective"}
    bf16 = float(training_tokens_per_second(m, table, precision_fmt=weight_format("bf16"), **kw)[0])
    fp8 = float(training_tokens_per_second(m, table, precision_fmt=weight_format("fp8"), **kw)[0])
    big, small = 3 * 2 * BLOCKS_8B, 3 * ATTENTION_8B_8K + 3 * 2 * HEAD_8B
    expected = (big + small) / (big * 989.4 / 1978.9 + small)
    assert fp8 / bf16 == pytest.approx(expected, rel=1e-9)
    assert 1.68 < expected < 1.69


def test_mla_trains_in_per_head_space_not_the_absorbed_latent() -> None:
    """DeepSeek-V3: 128 heads, keys of 128 + 64 (no-RoPE + RoPE) dims and values of 128 when
    training (DeepSeek-V2, section 2.1.2): 2 x 128 x (128 + 64 + 128) = 81,920 FLOPs per token
    per attended token; decode's absorbed form attends over the 512-wide latent, 2 x 128 x
    (2 x 512 + 64) = 278,528: 3.4x more FLOPs for fewer bytes read."""
    m = load_catalog().model("deepseek-v3")
    assert training_attention_flops_per_token_per_layer(m, 1.0) == 2 * 128 * (128 + 64 + 128)
    assert attention_flops_per_token_per_layer(m, 1.0) == 2 * 128 * (2 * 512 + 64)
    dense = load_catalog().model("llama-3.1-8b")
    same = attention_flops_per_token_per_layer(dense, 4096.0)
    assert training_attention_flops_per_token_per_layer(dense, 4096.0) == same
