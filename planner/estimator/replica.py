"""Figures of one replica from its stages, one stage at a time (scalar arithmetic).

This is the serving model of planner.estimator.designs written out for a single pipeline: the
plan builder prints these figures and the verifier recomputes them from the plan's stages alone,
so a figure never passes from one to the other. Design enumeration computes the same formulas
as numpy columns over every candidate at once; a test holds the two to each other.

A replica of S stages keeps S micro-batches of b sequences in flight. Stage s of `layers`
blocks on k devices takes layers x (time per block) + the head and fixed step work + the hop to
the next stage (when S > 1); the slowest stage sets the step T, a token advances every S x T and
the replica makes b / T tokens/s. Each device draws power at the share of T its memory is busy
with its own stage's bytes (planner.estimator.cost.power_w). Time to first token: each stage's
batch-1 prefill in turn plus S - 1 hops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.estimator.comm import p2p_seconds, pipeline_activation_bytes
from planner.estimator.cost import power_w
from planner.estimator.devices import device_table
from planner.estimator.formats import kv_bytes, weight_format
from planner.estimator.memory import (
    TrainingSetup,
    block_weight_bytes,
    inference_memory,
    kv_bytes_per_token,
    kv_shard_divisor,
    training_memory,
)
from planner.estimator.perf import decode_layer_seconds, head_seconds, prefill_layer_seconds
from planner.schema.catalog import Accelerator, Link, ModelArch


@dataclass(frozen=True)
class StageSpec:
    """What a stage is: `tp` devices of one type holding `layers` consecutive blocks."""

    device: Accelerator
    tp: int
    layers: int


@dataclass(frozen=True)
class StageFigures:
    memory: dict[str, float]  # bytes per device by kind, and "total"
    seconds: float  # one decode step of this stage, hop to the next included (0 for training)
    boundary_bytes: float  # hidden states sent to the next stage per step
    prefill_seconds: float  # this stage's share of a batch-1 prefill
    watts: float  # each device at load (0 for training: the job's power is its own figure)


@dataclass(frozen=True)
class ReplicaFigures:
    stages: tuple[StageFigures, ...]
    step_seconds: float  # the slowest stage
    tokens_per_s: float  # output tokens/s of one replica
    ms_per_token: float  # time per output token of one sequence
    ttft_s: float  # unloaded time to first token of one prompt
    power_w: float  # every device of the replica at load


def _scalar(x: object) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def inference_replica(
    m: ModelArch,
    weights: str,
    kv: str,
    *,
    batch: int,
    context: int,
    prompt: int,
    stages: list[StageSpec],
    link: Link,
) -> ReplicaFigures:
    """Memory, step time, throughput, latency and power of one inference replica."""
    fmt, kvb = weight_format(weights), kv_bytes(kv)
    S = len(stages)
    L = m.num_layers
    boundary = float(pipeline_activation_bytes(batch, 1, m.hidden_size)) if S > 1 else 0.0
    hop = (
        _scalar(p2p_seconds(boundary, link.bandwidth_gb_s * 1e9, link.latency_us * 1e-6))
        if S > 1
        else 0.0
    )
    kv_layer_seq = kv_bytes_per_token(m, kvb) / L * context
    w_layer = block_weight_bytes(m, fmt) / L
    seconds: list[float] = []
    prefill: list[float] = []
    mems: list[dict[str, float]] = []
    busy: list[float] = []
    for i, st in enumerate(stages):
        dev = device_table([st.device])
        tau = _scalar(
            decode_layer_seconds(m, fmt, kvb, dev, batch=batch, context=context, tp=st.tp)
        )
        fixed = _scalar(head_seconds(m, fmt, dev, batch)) / st.tp + _scalar(dev.step_overhead_s)
        seconds.append(st.layers * tau + fixed + hop)
        pre_tau = _scalar(prefill_layer_seconds(m, fmt, dev, batch=1, prompt=prompt, tp=st.tp))
        pre_fixed = _scalar(head_seconds(m, fmt, dev, 1)) / st.tp + _scalar(dev.step_overhead_s)
        prefill.append(st.layers * pre_tau + pre_fixed)
        mem = inference_memory(
            m,
            fmt,
            kvb,
            batch=batch * S,
            context=context,
            layers=st.layers,
            tp=st.tp,
            first=i == 0,
            last=i == S - 1,
        )
        mems.append(mem.as_dict())
        # Bytes this stage's devices read per step: their weights and the KV of one micro-batch.
        busy.append(
            st.layers * (w_layer / st.tp + batch * kv_layer_seq / kv_shard_divisor(m, st.tp))
        )
    T = max(seconds)
    figs = []
    total_w = 0.0
    for st, sec, pre, use, nbytes in zip(stages, seconds, prefill, mems, busy, strict=True):
        dev = device_table([st.device])
        act = min(1.0, nbytes / _scalar(dev.bandwidth_bytes_s) / T)
        watts = _scalar(power_w(dev.tdp_w, dev.idle_w, np.asarray(act), dev.power_activity_floor))
        total_w += watts * st.tp
        figs.append(StageFigures(use, sec, boundary, pre, watts))
    return ReplicaFigures(
        stages=tuple(figs),
        step_seconds=T,
        tokens_per_s=batch / T,
        ms_per_token=S * T * 1e3,
        ttft_s=sum(prefill) + hop * (S - 1),
        power_w=total_w,
    )


def training_stage_memory(
    m: ModelArch, setup: TrainingSetup, *, layers: int, last: bool
) -> dict[str, float]:
    """Memory per device of one training pipeline stage (mixed-precision AdamW, ZeRO)."""
    return training_memory(m, setup, layers=layers, last=last).as_dict()
