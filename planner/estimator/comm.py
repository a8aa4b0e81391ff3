"""Communication time: bytes over a link's bandwidth plus its latency."""

from __future__ import annotations

import numpy as np

from planner.estimator.devices import Array, Degree


def p2p_seconds(
    nbytes: float | Array, bandwidth_bytes_s: float | Array, latency_s: float | Array
) -> Array:
    """One point-to-point transfer (a pipeline stage boundary): latency + bytes / bandwidth."""
    return np.asarray(latency_s + nbytes / bandwidth_bytes_s, dtype=np.float64)


def ring_allreduce_seconds(
    nbytes: float | Array,
    ranks: Degree | Array,
    bandwidth_bytes_s: float | Array,
    latency_s: float | Array,
) -> Array:
    """Ring all-reduce of `nbytes` over `ranks` devices.

    Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms": each rank sends and receives
    2 (n - 1) / n of the buffer in 2 (n - 1) steps (also NCCL-tests' "bus bandwidth" definition).
    """
    n = np.asarray(ranks, dtype=np.float64)
    ring = 2.0 * (n - 1.0) / np.maximum(n, 1.0)
    return np.where(n > 1, ring * nbytes / bandwidth_bytes_s + 2.0 * (n - 1.0) * latency_s, 0.0)


def tensor_parallel_allreduce_seconds(
    nbytes: float | Array,
    ranks: Degree | Array,
    bandwidth_bytes_s: float | Array,
    latency_s: float | Array,
    all_to_all: float | Array,
    measured_s: float | Array = np.nan,
) -> Array:
    """One all-reduce of a tensor-parallel layer's activations (small, latency-bound tensors).

    Where every rank reaches every other directly (`all_to_all`: NVSwitch, a fully connected
    mesh), serving engines replace NCCL's ring with their own reduce-scatter + all-gather kernels,
    which take two synchronization steps whatever the number of ranks (NVIDIA, "3x Faster
    AllReduce with NVSwitch and TensorRT-LLM MultiShot", 2024: "only two synchronization steps,
    regardless of the number of GPUs"; vLLM's and SGLang's custom all-reduce do the same: SGLang
    PR #2904 measures vLLM's at 8.7, 9.2 and 11.8 us for 32 KB on 2, 4 and 8 H100s) and move
    the ring's bytes. Elsewhere (PCIe, tori, a bridge pair) the ring's 2 (n - 1) steps stand.

    `measured_s` (NaN where none): the fabric's measured time of one small all-reduce across
    `ranks` devices (planner.estimator.devices.small_allreduce_grid), which replaces the
    steps x latency above: what a collective library spends per call beyond the wire (kernel
    launch, flags, its proxy) is not a link latency, and it differs by library and fabric
    (RCCL on Infinity Fabric against a one-shot kernel on NVSwitch).
    """
    n = np.asarray(ranks, dtype=np.float64)
    steps = np.where(np.asarray(all_to_all, dtype=np.float64) > 0, 2.0, 2.0 * (n - 1.0))
    fixed = np.asarray(measured_s, dtype=np.float64)
    fixed = np.where(np.isnan(fixed), steps * latency_s, fixed)
    ring = 2.0 * (n - 1.0) / np.maximum(n, 1.0)
    return np.where(n > 1, ring * nbytes / bandwidth_bytes_s + fixed, 0.0)


# Bytes of one sampled token id on the way back from the last stage: vLLM's model runner sends
# the sampled ids (an int64 tensor, vllm/v1/worker/gpu/pp_utils.py `pp_broadcast`) or routes
# them through the scheduler (vllm-project/vllm PR #20291); no hidden states go back.
TOKEN_ID_BYTES = 8.0


def sampled_token_bytes(tokens: float | Array) -> Array:
    """The return hop of a pipeline (last stage to first): the sampled token ids, 8 bytes each."""
    return np.asarray(np.asarray(tokens, dtype=np.float64) * TOKEN_ID_BYTES)


def pipeline_activation_bytes(
    batch: float, tokens: float, hidden: int, dtype_bytes: float = 2.0
) -> float:
    """Hidden states crossing one stage boundary: batch x tokens x hidden x dtype (one direction)."""
    return batch * tokens * hidden * dtype_bytes


def tensor_parallel_bytes_per_layer(
    batch: float, tokens: float, hidden: int, dtype_bytes: float = 2.0
) -> float:
    """Megatron-LM tensor parallelism all-reduces the block output twice per layer in the forward
    pass (after attention and after the MLP; Shoeybi et al. 2019, section 3): 2 x b x s x h x dtype.
    """
    return 2.0 * batch * tokens * hidden * dtype_bytes
