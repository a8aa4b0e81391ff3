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
