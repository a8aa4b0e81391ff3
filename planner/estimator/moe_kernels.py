"""The fixed time per block of a mixture-of-experts model: its MoE blocks run more kernels.

A decode step's fixed time per block (the device class's fitted `layer_overhead_us`: kernel
launches, their tails and synchronization) is fitted on dense models, whose blocks run a fixed
set of kernels. A MoE block runs that set with its feed-forward part replaced by routing and
gathered expert matrix products, which is more kernels, and the number grows with the experts a
token visits. At batch 1 the weights a step reads shrink with the active parameters while these
kernels stay, so a dense model's per-block time under-counts a MoE model's.

Kernels counted (ggml graph nodes that run a kernel; views and reshapes run none), from
llama.cpp's graph builders:

- a dense block (src/models/llama.cpp with flash attention): attention norm (rms_norm, mul),
  Q, K and V projections, two RoPEs, two KV-cache writes, flash attention, output projection,
  residual add, FFN norm (rms_norm, mul), up, gate, SwiGLU, down, residual add: 19;
- a MoE block's feed-forward part (src/llama-graph.cpp, build_moe_ffn) replaces the dense FFN's
  four (up, gate, SwiGLU, down) with: the router's matrix product, its softmax, the top-k
  selection, the gather of the selected experts' weights, the three gathered expert products
  (mul_mat_id), SwiGLU, the weighting of the experts' outputs, and k - 1 adds summing the k
  experts' outputs: 4 + k more kernels than the dense block;
- a shared expert (build_ffn beside it: up, gate, SwiGLU, down, and the add onto the routed
  output): 5 more per shared expert.

The per-kernel time is the fitted per-block time over the dense block's 19 kernels; the fit
(calibration/fit.py) reads the factor through the estimator, so MoE rows weigh the per-block
time by it. Leading dense layers (DeepSeek's first_dense_layers) run the dense block.
"""

from __future__ import annotations

from planner.schema.catalog import ModelArch

DENSE_BLOCK_KERNELS = 19  # llama.cpp src/models/llama.cpp, one block with flash attention
MOE_ROUTING_KERNELS = 4  # router product, softmax, top-k, gather of the weights (build_moe_ffn)
SHARED_EXPERT_KERNELS = 5  # up, gate, SwiGLU, down, add onto the routed output (build_ffn)


def moe_extra_kernels(m: ModelArch) -> int:
    """Kernels a MoE block runs beyond a dense block: routing (MOE_ROUTING_KERNELS), the
    weighting of the k experts' outputs and their k - 1 adds (k in all), and each shared
    expert's FFN. Zero for a dense model."""
    if m.moe is None:
        return 0
    return (
        MOE_ROUTING_KERNELS + m.moe.experts_per_token + SHARED_EXPERT_KERNELS * m.moe.shared_experts
    )


def layer_overhead_scale(m: ModelArch) -> float:
    """The model's mean fixed time per block over a dense block's: 1 for a dense model;
    for a MoE model 1 + (MoE blocks / blocks) x moe_extra_kernels / DENSE_BLOCK_KERNELS
    (Qwen3-235B-A22B, 8 experts per token in all 94 blocks: 1 + 12 / 19 = 1.63)."""
    if m.moe is None:
        return 1.0
    moe_share = (m.num_layers - m.moe.first_dense_layers) / m.num_layers
    return 1.0 + moe_share * moe_extra_kernels(m) / DENSE_BLOCK_KERNELS
