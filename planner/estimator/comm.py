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


# vLLM's custom all-reduce (csrc/custom_all_reduce.cuh, CustomAllreduce::allreduce): on a fully
# connected fabric, one shot (every rank reads all n - 1 peers' whole buffers and reduces) for 2
# ranks at any size, for up to 4 ranks below 512 KiB and for up to 8 below 256 KiB; two shots
# (reduce-scatter then all-gather through the peers' buffers) above. SGLang runs the same kernel.
ONE_SHOT_MAX_BYTES = {4: 512 * 1024, 8: 256 * 1024}
# The largest message vLLM's custom all-reduce takes (CustomAllreduce's default max_size, 8 MiB,
# vllm/distributed/device_communicators/custom_all_reduce.py); larger ones go through the
# collective library (NCCL, RCCL), which streams at the link's bandwidth.
KERNEL_MAX_BYTES = 8 * 1024 * 1024


def allreduce_bytes_read(
    nbytes: float | Array, ranks: Degree | Array, all_to_all: float | Array
) -> Array:
    """Bytes each rank moves through its links for one all-reduce of `nbytes` across `ranks`.

    On a fully connected fabric, the engine's kernel: one shot reads (n - 1) x S, two shots read
    2 (n - 1) / n x S, switched where vLLM switches (ONE_SHOT_MAX_BYTES; more than 8 ranks: two
    shots). Elsewhere NCCL's ring: 2 (n - 1) / n x S (Patarasuk & Yuan 2009).
    """
    n = np.asarray(ranks, dtype=np.float64)
    s = np.asarray(nbytes, dtype=np.float64)
    ring = 2.0 * (n - 1.0) / np.maximum(n, 1.0) * s
    limit = np.where(n <= 2, np.inf, np.where(n <= 4, ONE_SHOT_MAX_BYTES[4], 0.0))
    limit = np.where((n > 4) & (n <= 8), ONE_SHOT_MAX_BYTES[8], limit)
    one_shot = (np.asarray(all_to_all, dtype=np.float64) > 0) & (s < limit)
    return np.asarray(np.where(one_shot, (n - 1.0) * s, ring), dtype=np.float64)


def tensor_parallel_allreduce_seconds(
    nbytes: float | Array,
    ranks: Degree | Array,
    bandwidth_bytes_s: float | Array,
    latency_s: float | Array,
    all_to_all: float | Array,
    measured_s: float | Array = np.nan,
    kernel_bytes_s: float | Array = np.nan,
) -> Array:
    """One all-reduce of a tensor-parallel layer's activations: a fixed time plus the bytes each
    rank moves over the bandwidth it moves them at. Every tensor-parallel path (decode, prefill,
    the serving grid, training, the verifier) reaches it through planner.estimator.perf.

    Fixed time: `measured_s` (NaN where none), the fabric's measured time of one small
    all-reduce across `ranks` devices (planner.estimator.devices.small_allreduce_grid): what a
    collective spends per call beyond the wire (kernel launch, flags, its proxy) differs by
    library and fabric. Without one, steps x `latency_s`: two synchronization steps where every
    rank reaches every other directly (`all_to_all`: NVSwitch, a fully connected mesh; NVIDIA,
    "3x Faster AllReduce with NVSwitch and TensorRT-LLM MultiShot", 2024), a ring's 2 (n - 1)
    elsewhere (PCIe, tori, a bridge pair).

    Bytes: allreduce_bytes_read, at `kernel_bytes_s` (the fabric's measured rate inside the
    engine's kernel, Link.allreduce_kernel_gb_s; NaN: the link's `bandwidth_bytes_s`) for the
    part of the message up to KERNEL_MAX_BYTES; the rest, which the collective library takes,
    at the link's bandwidth in a ring's bytes. vLLM PR #19744 times vLLM's kernel on 4 MI300X:
    7.26 us at 16 KB, 14.39 us at 256 KB (one shot, 3 x 256 KiB read), 22.91 us at 1 MB (two
    shots, 1.5 x 1 MiB): about 100-110 GB/s read per rank in both, a third of the links' rate.
    """
    n = np.asarray(ranks, dtype=np.float64)
    s = np.asarray(nbytes, dtype=np.float64)
    steps = np.where(np.asarray(all_to_all, dtype=np.float64) > 0, 2.0, 2.0 * (n - 1.0))
    fixed = np.asarray(measured_s, dtype=np.float64)
    fixed = np.where(np.isnan(fixed), steps * latency_s, fixed)
    rate = np.asarray(kernel_bytes_s, dtype=np.float64)
    rate = np.where(np.isnan(rate), bandwidth_bytes_s, rate)
    kernel = np.minimum(s, KERNEL_MAX_BYTES)
    wire = allreduce_bytes_read(kernel, n, all_to_all) / rate
    beyond = 2.0 * (n - 1.0) / np.maximum(n, 1.0) * (s - kernel) / bandwidth_bytes_s
    return np.asarray(np.where(n > 1, fixed + wire + beyond, 0.0), dtype=np.float64)


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
