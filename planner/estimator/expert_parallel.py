"""The expert-parallel size of the planner's MoE training jobs and the parameters it splits: one
function for the all-to-all the throughput charges (training_layout) and the memory each device
holds (memory), so a plan never pays for split experts while storing replicated ones."""

from __future__ import annotations

from planner.schema.catalog import ModelArch
from planner.schema.model_params import mlp_params


def job_expert_parallel(m: ModelArch, domain: int, stage_devices: int) -> int:
    """The expert-parallel size the planner's jobs run a MoE model at: the experts split over
    the devices of one pipeline stage that share a scale-up domain, as far as the experts go
    (the largest common divisor of the routed experts and the stage's devices up to the domain); 1 for a dense
    model. It is the layout every published MoE recipe uses (calibration/measurements.yaml):
    Megatron-Bridge's Qwen3-30B-A3B and GPT-OSS-120B runs at EP8 in one 8-GPU server, NeMo's
    Mixtral 8x7B recipe at EP8, DeepSeek-V3 at EP8-EP64 with the dispatch inside NVLink first
    (DeepSeek-V3 report, section 3.2.2). Megatron-Core folds the expert-parallel group over
    the stage's tensor- and data-parallel ranks ("MoE parallel folding", Megatron-Core MoE
    docs), so a stage of k x D devices holds it. Experts replicated on every device instead
    (the dense-equivalent layout) would hold all of a 30B model's expert weights, gradients and
    optimizer states per device or, sharded by ZeRO-3, all-gather every expert's weights each
    micro-batch: no stack trains MoE models that way at scale. A device without a scale-up
    fabric (domain 1) keeps its experts whole: the all-to-all would cross PCIe or the network.
    The size divides both the routed experts and the stage's devices (Megatron-Core's
    parallel state builds whole expert-parallel groups): 12 H100s run EP4, not EP8."""
    if m.moe is None:
        return 1
    n = m.moe.num_experts
    cap = max(min(domain, stage_devices, n), 1)
    # Megatron-Core needs whole expert-parallel groups in the stage (its ranks divide by EP, the
    # expert data-parallel size stage / EP an integer) and whole experts per rank.
    return max(e for e in range(1, cap + 1) if n % e == 0 and stage_devices % e == 0)


def routed_expert_params(m: ModelArch) -> int:
    """Parameters of the routed experts over all MoE blocks (model_params.block_groups' count:
    num_experts feed-forward networks of the expert width per MoE block); shared experts, the
    router and attention are replicated like a dense model's weights. 0 for a dense model."""
    if m.moe is None:
        return 0
    per_block = m.moe.num_experts * mlp_params(m, m.moe.expert_intermediate_size)
    return (m.num_layers - m.moe.first_dense_layers) * per_block
