"""Enumerate training job designs (no solver here): for each device type, tensor-parallel degree
and pipeline depth, the fewest data-parallel replicas that fit in memory and meet the deadline.

Training model: one job of D data-parallel replicas, each S pipeline stages of k tensor-parallel
devices of one type, ZeRO sharding across D; throughput from the class's MFU, the pipeline bubble
(Narayanan et al. 2021: (S - 1) / (m + S - 1) idle with m micro-batches), the tensor-parallel
group's all-reduces (perf.training_tp_seconds_per_layer), the expert-parallel all-to-all of a
mixture-of-experts model with its experts split over the stage's devices in their scale-up domain
(training_layout.job_alltoall_seconds_per_token, as the calibration charges it on the published
runs it fits the MFU and the MoE routing factor on) and the gradient all-reduce over the network
when it cannot overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.catalog import Catalog
from planner.estimator.comm import ring_allreduce_seconds
from planner.estimator.designs import Design, Stage, dominated, tp_degrees
from planner.estimator.devices import DeviceTable, device_table
from planner.estimator.expert_parallel import routed_expert_params
from planner.estimator.formats import weight_format
from planner.estimator.hosts import holding_hosts
from planner.estimator.memory import TrainingSetup, expert_split, training_memory_total
from planner.estimator.network import network_link
from planner.estimator.perf import training_tokens_per_second, training_tp_seconds_per_layer
from planner.estimator.training_layout import job_alltoall_seconds_per_token, with_alltoall
from planner.schema.catalog import Accelerator, Link, ModelArch
from planner.schema.problem import Problem, TrainingWorkload

# Design space: every pipeline depth from 1 to min(max_stages, layers) and every data-parallel
# degree from 1 while the job fits in max_devices (4,096 without one); tensor-parallel degrees
# as `tp_degrees` (inside a node's scale-up domain, or its PCIe where allowed).
MAX_JOB_DEVICES = 4096
TRAINING_TDP_SHARE = 0.9  # training holds its devices near TDP (dense matmuls, no idle decode)


def micro_batches(stages: int) -> int:
    """Micro-batches per optimizer step: enough to keep the pipeline bubble small."""
    return 4 * stages


def job_tokens_per_s(
    base_tps: npt.NDArray[np.float64],
    w: TrainingWorkload,
    trainable: float,
    net: Link,
    k: int,
    S: int,
    D: npt.NDArray[np.int64],
    tp_layer_s: npt.NDArray[np.float64] | float = 0.0,
    layers: tuple[int, int] = (1, 1),
    experts: tuple[float, npt.NDArray[np.float64]] | None = None,
) -> npt.NDArray[np.float64]:
    """Tokens/s of jobs of D replicas of S stages of k devices, each device making `base_tps`
    alone: the pipeline bubble (Narayanan et al. 2021: m + S - 1 slots of one stage's time per
    step of m micro-batches, a slot being the fullest stage's time: `layers` = (its blocks,
    the model's)), the slot lengthened by the stage's tensor-parallel all-reduces (`tp_layer_s`
    per block, perf.training_tp_seconds_per_layer), and the gradient all-reduce across D over
    the network, once per step (ZeRO-1/2 reduce-scatter + all-gather move the same bytes),
    which does not overlap. `experts` = (the routed experts' trainable parameters, their split
    per device row and degree, memory.expert_split) reduces a MoE model's expert gradients
    apart: each device holds 1 / split of them, summed over the k D / split ranks holding the
    same experts (Megatron-Core's expert data-parallel group), the rest over D as before."""
    micro = micro_batches(S)
    per_micro = w.seq_len * w.micro_batch
    fullest, total = layers
    # One micro-batch through the fullest stage: its blocks' share of the model's FLOPs on k
    # devices, plus the group's all-reduces.
    slot = (
        per_micro * fullest / (total * base_tps * k) + np.asarray(tp_layer_s)[..., None] * fullest
    )
    step_tokens = per_micro * micro * D
    step_s = (micro + S - 1) * slot * np.ones_like(D, dtype=np.float64)
    bw, lat = net.bandwidth_gb_s * 1e9, net.latency_us * 1e-6
    routed, split = experts if experts is not None else (0.0, np.ones(1))
    ar = np.where(
        D > 1, ring_allreduce_seconds(2.0 * (trainable - routed) / (k * S), D, bw, lat), 0.0
    )
    if routed:
        ar = ar + ring_allreduce_seconds(2.0 * routed / (split * S), k * D / split, bw, lat)
    out: npt.NDArray[np.float64] = step_tokens / (step_s + ar)
    return out


@dataclass(frozen=True)
class TrainingJob:
    """A training job's figures from its shape alone."""

    tokens_per_s: float
    stage_seconds: tuple[float, ...]  # one micro-batch through each stage (no bubble)
    power_w: float  # every device of the job at load


def training_setup(
    w: TrainingWorkload, data_parallel: int, tp: int, device: Accelerator
) -> TrainingSetup:
    """The memory model's setup of one stage of a job of `w` on `device` (its scale-up domain
    bounds the expert-parallel group a MoE model's experts split over)."""
    return _setup(w, data_parallel, tp, device.interconnect.domain_size)


def _setup(w: TrainingWorkload, data_parallel: int, tp: int, domain: int) -> TrainingSetup:
    """The memory model's setup of a job of `w` at these degrees, in a scale-up domain of
    `domain` devices."""
    return TrainingSetup(
        method=w.method,
        optimizer=w.optimizer,
        zero_stage=w.zero_stage,
        data_parallel=data_parallel,
        tensor_parallel=tp,
        seq_len=w.seq_len,
        micro_batch=w.micro_batch,
        recompute=w.recompute,
        lora_rank=w.lora_rank,
        scale_up_domain=domain,
    )


def training_job(
    w: TrainingWorkload,
    problem: Problem,
    cat: Catalog,
    device: Accelerator,
    tp: int,
    layers: list[int],
    data_parallel: int,
) -> TrainingJob:
    """The figures of one job shape: `data_parallel` replicas of `len(layers)` stages (layers per
    stage) of `tp` devices of one type, as `training_designs` computes them."""
    m = cat.model(w.model)
    table = device_table([device], links=cat.links)
    base = training_tokens_per_second(
        m,
        table,
        seq_len=w.seq_len,
        method=w.method,
        recompute=w.recompute,
        precision_fmt=weight_format("bf16"),
    )
    net = network_link(problem, cat)
    S = len(layers)
    D = np.array([data_parallel], dtype=np.int64)
    a2a = job_alltoall_seconds_per_token(m, table, tp * D, net.bandwidth_gb_s * 1e9)
    routed = with_alltoall(base, a2a)  # rows x 1
    per_micro = w.seq_len * w.micro_batch
    tp_s = training_tp_seconds_per_layer(m, table, per_micro, tp, w.recompute)
    trainable = _trainable_params(m, w)
    fullest = (max(layers), m.num_layers)
    experts = _expert_gradients(m, w, table, np.array([0]), tp, D)
    tps = job_tokens_per_s(routed, w, trainable, net, tp, S, D, tp_s, fullest, experts)
    one = float(routed[0, 0]) * tp  # tokens/s of one stage's devices over the whole model
    return TrainingJob(
        float(tps[0, 0]),
        tuple(per_micro * (x / m.num_layers) / one + x * float(tp_s[0]) for x in layers),
        float(device.power.tdp_w) * TRAINING_TDP_SHARE * tp * S * data_parallel,
    )


def training_designs(
    w: TrainingWorkload,
    problem: Problem,
    cat: Catalog,
    devs: list[Accelerator],
    *,
    prune: bool = True,
) -> list[Design]:
    """For each device type, tensor-parallel degree k and depth S: the job on the fewest
    data-parallel replicas D that fit in memory and meet the deadline (a larger D at the same
    (k, S) only costs more). Computed for every device and D at once per (k, S).

    Long because the (k, S) loop is vectorized over devices and data-parallel degrees.
    """
    m = cat.model(w.model)
    c = problem.constraints
    net = network_link(problem, cat)
    net_bytes_s = net.bandwidth_gb_s * 1e9
    fmt = weight_format("bf16")
    table = device_table(devs, links=cat.links)
    max_dev = c.max_devices or MAX_JOB_DEVICES
    base_tps = training_tokens_per_second(
        m, table, seq_len=w.seq_len, method=w.method, recompute=w.recompute, precision_fmt=fmt
    )
    usable = table.usable_bytes(c.memory_headroom)
    degrees = [tp_degrees(d, cat, problem, m) for d in devs]
    trainable = _trainable_params(m, w)
    D = np.arange(1, max_dev + 1, dtype=np.int64)
    depths = list(range(1, min(c.max_stages, m.num_layers) + 1))
    found: list[tuple[int, int, int, int, int, float, float]] = []  # (i, k, S, D, n, tps, W)
    per_micro = w.seq_len * w.micro_batch
    tp_layer_s = {
        k: training_tp_seconds_per_layer(m, table, per_micro, k, w.recompute)
        for k in sorted({k for ks in degrees for k in ks})
    }
    for k in sorted({k for ks in degrees for k in ks}):
        rows = np.array([i for i, ks in enumerate(degrees) if k in ks], dtype=np.int64)
        for S in depths:
            fits = D[: max_dev // (k * S)]  # n = k * S * D devices within max_dev
            if not len(fits):
                break
            fullest, L = math.ceil(m.num_layers / S), m.num_layers
            mem = _memory_rows(m, w, table, rows, k, fits, fullest)
            n = k * S * fits
            tp_s = tp_layer_s[k][rows]
            a2a = job_alltoall_seconds_per_token(m, table, k * fits, net_bytes_s)[rows]
            routed = with_alltoall(base_tps[rows], a2a)
            experts = _expert_gradients(m, w, table, rows, k, fits)
            tps = job_tokens_per_s(
                routed, w, trainable, net, k, S, fits, tp_s, (fullest, L), experts
            )
            ok = mem <= usable[rows, None]
            if w.deadline_hours is not None:
                ok &= ~(w.token_budget / tps / 3600 > w.deadline_hours)
            first = np.argmax(ok, axis=1)  # the fewest replicas that work
            for r in np.flatnonzero(ok.any(axis=1)).tolist():
                i, j = int(rows[r]), int(first[r])
                watts = float(devs[i].power.tdp_w) * TRAINING_TDP_SHARE * int(n[j])
                found.append((i, k, S, int(fits[j]), int(n[j]), float(tps[r, j]), watts))
    found.sort(key=lambda f: f[:3])  # device, then k, then S: the order they are listed in
    if prune and found:
        _, _, depth, _, count, speed, watts_w = (np.array(col) for col in zip(*found, strict=True))
        # Grouped by device and the hosts that hold its group: one that needs fewer may fit.
        kinds = [(devs[f[0]].id, holding_hosts(cat, problem, devs[f[0]], f[1])) for f in found]
        rank_of = {x: r for r, x in enumerate(sorted(set(kinds)))}
        group = np.array([rank_of[x] for x in kinds], dtype=np.int64)
        order = np.arange(len(found), dtype=np.int64)
        zero = np.zeros(len(found), dtype=np.int64)  # sequences: none held
        keep = np.flatnonzero(~dominated(group, [count], watts_w, speed, zero, order))
        # As _prune sorts: device, depth, falling tokens/s, then the dominance order.
        keys = [order, -speed, watts_w, count, -speed, depth, group]
        found = [found[j] for j in keep[np.lexsort([k[keep] for k in keys])].tolist()]
    return [
        Design(
            w.name,
            w.micro_batch,
            tuple(Stage(devs[i].id, k, x) for x in _split(m.num_layers, S)),
            dp,
            tps,
            0,
            0.0,
            0.0,
            watts,
            {devs[i].id: n},
        )
        for i, k, S, dp, n, tps, watts in found
    ]


def _memory_rows(
    m: ModelArch,
    w: TrainingWorkload,
    table: DeviceTable,
    rows: npt.NDArray[np.int64],
    k: int,
    fits: npt.NDArray[np.int64],
    layers: int,
) -> npt.NDArray[np.float64]:
    """Memory per device of the fullest stage, one row per device of `rows` and one column per
    data-parallel degree of `fits`: a MoE model's experts split over the stage's devices in
    each device's scale-up domain (memory.training_memory_total), so rows of one domain size
    share a figure; a dense model's figure is the same on every row."""
    if m.moe is None:
        setup = _setup(w, 1, k, 1)
        return np.asarray(training_memory_total(m, setup, fits, layers=layers))[None, :]
    domains = [int(x) for x in table.domain_size[rows].tolist()]
    by_domain = {
        dom: training_memory_total(m, _setup(w, 1, k, dom), fits, layers=layers)
        for dom in set(domains)
    }
    return np.array([by_domain[dom] for dom in domains], dtype=np.float64)


def _expert_gradients(
    m: ModelArch,
    w: TrainingWorkload,
    table: DeviceTable,
    rows: npt.NDArray[np.int64],
    k: int,
    D: npt.NDArray[np.int64],
) -> tuple[float, npt.NDArray[np.float64]] | None:
    """(routed-expert trainable parameters, their split per device row of `rows` and degree of
    `D`) for job_tokens_per_s, by the split the memory holds them at (memory.expert_split: the
    expert-parallel size the all-to-all is charged at); None for a dense model or an adapter
    method (its trainable adapters are not split by expert here)."""
    if m.moe is None or w.method != "full":
        return None
    split = [
        expert_split(m, TrainingSetup(tensor_parallel=k, scale_up_domain=int(dom)), D)
        for dom in table.domain_size[rows].tolist()
    ]
    return float(routed_expert_params(m)), np.array(split, dtype=np.float64)


def _trainable_params(m: ModelArch, w: TrainingWorkload) -> float:
    from planner.estimator.architecture import total_params
    from planner.estimator.memory import lora_params

    if w.method == "full":
        return float(total_params(m))
    return float(lora_params(m, w.lora_rank))


def _split(L: int, S: int) -> list[int]:
    return [L // S + (1 if i < L % S else 0) for i in range(S)]
