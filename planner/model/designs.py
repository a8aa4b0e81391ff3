"""Enumerate replica designs for each workload from estimator tables (no solver here).

Serving model (stated, and re-checked by the verifier): a workload runs R replicas, each a
pipeline of S stages; a stage is k devices of one type in tensor parallel (inside one node or
scale-up domain) holding a contiguous run of layers. Decode keeps S micro-batches of b sequences
in flight (vLLM/TensorRT-LLM pipeline parallelism), so a replica holds b x S sequences, every
stage keeps KV for all of them, a token advances every S x T seconds and the replica produces
b / T tokens/s, where T is its slowest stage (layers x time per layer + fixed step work + the hop
to the next stage). Blocks of one model are treated as identical (their average is used for
MoE models with leading dense layers), so only the number of layers per stage matters.

Training model: one job of D data-parallel replicas, each S pipeline stages of k tensor-parallel
devices of one type, ZeRO sharding across D; throughput from the class's MFU, the pipeline bubble
(Narayanan et al. 2021: (S - 1) / (m + S - 1) idle with m micro-batches) and the gradient
all-reduce over the network when it cannot overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.catalog import Catalog
from planner.catalog_schema import Accelerator, ModelArch
from planner.estimator.comm import p2p_seconds, pipeline_activation_bytes, ring_allreduce_seconds
from planner.estimator.cost import power_w
from planner.estimator.devices import DeviceTable, device_table
from planner.estimator.formats import WeightFormat, kv_bytes, weight_format
from planner.estimator.memory import (
    FRAMEWORK_OVERHEAD_BYTES,
    TrainingSetup,
    block_weight_bytes,
    end_weight_bytes,
    inference_activation_bytes,
    kv_bytes_per_token,
    kv_shard_divisor,
    training_memory,
    weight_bytes,
)
from planner.estimator.perf import (
    decode_layer_seconds,
    head_seconds,
    prefill_layer_seconds,
    training_tokens_per_second,
)
from planner.problem_schema import InferenceWorkload, Problem, TrainingWorkload

BATCH_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
HETERO_TOP = 6  # options per batch level paired into two-type pipelines
HETERO_MAX_STAGES = 4  # stages per type in a two-type pipeline


@dataclass(frozen=True)
class Stage:
    device: str
    tp: int
    layers: int


@dataclass(frozen=True)
class Design:
    """One replica (inference) or the whole job (training) and its figures."""

    workload: str
    batch: int  # sequences per micro-batch (inference) or micro-batch (training)
    stages: tuple[Stage, ...]
    replicas_dp: int  # training: data-parallel degree; inference: 1 (replicas are chosen later)
    tokens_per_s: float  # per replica (inference) or per job (training)
    concurrency: int  # sequences held per replica
    ms_per_token: float
    ttft_s: float
    power_w: float  # devices at load
    devices: dict[str, int]  # device id -> count in this design

    @property
    def signature(self) -> tuple[str, ...]:
        return tuple(sorted(self.devices))


def allowed_devices(problem: Problem, cat: Catalog) -> list[Accelerator]:
    """Devices the constraints allow, with a node to host them and a price for the procurement."""
    c = problem.constraints
    owned = {o.device for o in c.inventory}
    out = []
    for d in cat.accelerators.values():
        if c.allowed_devices is not None and d.id not in c.allowed_devices and d.id not in owned:
            continue
        if d.id in c.excluded_devices or (c.vendors is not None and d.vendor not in c.vendors):
            continue
        if c.require_ecc and not d.ecc:
            continue
        priced = (
            d.price.purchase_usd
            if problem.horizon.procurement == "buy"
            else d.price.rent_usd_per_hour
        )
        if priced is None and d.id not in owned:
            continue
        if not cat.nodes_for(d):
            continue
        out.append(d)
    return out


def tp_degrees(d: Accelerator, cat: Catalog, problem: Problem, m: ModelArch) -> list[int]:
    """Tensor-parallel group sizes allowed for `d`: powers of two inside a scale-up domain (or a
    node over PCIe where allowed) that divide the attention heads."""
    c = problem.constraints
    host = cat.host_for(d)
    slots = host.slots if host else 1
    limit = d.interconnect.domain_size if d.interconnect.scale_up else 1
    if c.tensor_parallel_over_pcie:
        limit = max(limit, slots)
    limit = min(limit, slots, c.max_tensor_parallel)
    return [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= limit and m.num_attention_heads % k == 0]


@dataclass(frozen=True)
class _Option:
    device: Accelerator
    row: int
    tp: int


def inference_designs(
    w: InferenceWorkload,
    problem: Problem,
    cat: Catalog,
    devs: list[Accelerator],
    *,
    prune: bool = True,
) -> list[Design]:
    m = cat.model(w.model)
    fmt = weight_format(w.weights)
    kvb = kv_bytes(w.kv)
    c = problem.constraints
    table = device_table(devs)
    net = cat.link(c.network)
    usable = table.memory_bytes * (1.0 - c.memory_headroom)
    L = m.num_layers
    w_layer_total = block_weight_bytes(m, fmt) / L
    emb, head = end_weight_bytes(m, fmt)
    kv_layer_seq = kv_bytes_per_token(m, kvb) / L * w.context_tokens
    options = [_Option(d, i, k) for i, d in enumerate(devs) for k in tp_degrees(d, cat, problem, m)]
    designs: list[Design] = []
    levels = [b for b in BATCH_LEVELS if b <= max(1, w.concurrency)]
    for b in levels:
        per_opt: list[tuple[_Option, np.ndarray]] = []
        hop = float(
            p2p_seconds(
                pipeline_activation_bytes(b, 1, m.hidden_size),
                net.bandwidth_gb_s * 1e9,
                net.latency_us * 1e-6,
            )
        )
        for k in sorted({o.tp for o in options}):
            rows = [o for o in options if o.tp == k]
            idx = np.array([o.row for o in rows])
            sub = table.take(idx)
            tau = decode_layer_seconds(m, fmt, kvb, sub, batch=b, context=w.context_tokens, tp=k)
            fixed = head_seconds(m, fmt, sub, b) / k + sub.step_overhead_s
            pre_tau = prefill_layer_seconds(m, fmt, sub, batch=1, prompt=w.prompt_tokens, tp=k)
            pre_fixed = head_seconds(m, fmt, sub, 1) / k + sub.step_overhead_s
            for j, o in enumerate(rows):
                per_opt.append((o, np.array([tau[j], fixed[j], pre_tau[j], pre_fixed[j]])))
        single_ends = weight_bytes(m, fmt) - block_weight_bytes(m, fmt)
        for S in range(1, c.max_stages + 1):
            seqs = b * S
            ends = single_ends if S == 1 else max(emb, head)
            for o, t in per_opt:
                cap = _layer_cap(o, usable, w_layer_total, kv_layer_seq, seqs, ends, m, b, kvb, w)
                if cap <= 0:
                    continue
                layers = math.ceil(L / S)
                if layers > cap or (S > 1 and (S - 1) * layers >= L):
                    continue
                stage_t = layers * t[0] + t[1] + (hop if S > 1 else 0.0)
                d = _inference_design(
                    w,
                    b,
                    (Stage(o.device.id, o.tp, layers),) * 1,
                    S,
                    stage_t,
                    [(layers * t[2] + t[3], S)],
                    hop,
                    table,
                    o,
                    m,
                    fmt,
                    L,
                    b * kv_layer_seq / kv_shard_divisor(m, o.tp),
                )
                if d is not None:
                    designs.append(d)
        if c.heterogeneous_pipelines and len(devs) > 1:
            designs.extend(
                _two_type_designs(
                    w,
                    b,
                    per_opt,
                    usable,
                    w_layer_total,
                    kv_layer_seq,
                    emb,
                    head,
                    m,
                    kvb,
                    hop,
                    table,
                    fmt,
                    c.max_stages,
                    designs,
                )
            )
    feasible = [d for d in designs if _meets_latency(d, w)]
    return _prune(feasible) if prune else feasible


def _layer_cap(
    o: _Option,
    usable: np.ndarray,
    w_layer: float,
    kv_layer_seq: float,
    seqs: int,
    ends: float,
    m: ModelArch,
    b: int,
    kvb: float,
    w: InferenceWorkload,
) -> int:
    """Most layers one stage of option `o` holds: (usable - fixed) / per-layer bytes.

    Fixed: framework overhead, the larger end (embedding or head) and transient activations.
    Per layer: weights / k + KV of every sequence in flight / min(k, kv_heads).
    """
    k = o.tp
    act = (
        inference_activation_bytes(m, max(seqs, min(2048, seqs * w.context_tokens)), k)
        + seqs * m.vocab_size * 4
    )
    room = usable[o.row] - FRAMEWORK_OVERHEAD_BYTES - ends / k - act
    per_layer = w_layer / k + seqs * kv_layer_seq / kv_shard_divisor(m, k)
    return int(room // per_layer) if room > 0 else 0


def _activity(stage_bytes: float, bandwidth: float, stage_t: float) -> float:
    return min(1.0, stage_bytes / bandwidth / stage_t) if stage_t > 0 else 1.0


def _inference_design(
    w: InferenceWorkload,
    b: int,
    stage_types: tuple[Stage, ...],
    S: int,
    T: float,
    prefill: list[tuple[float, int]],
    hop: float,
    table: DeviceTable,
    o: _Option,
    m: ModelArch,
    fmt: WeightFormat,
    L: int,
    kv_read_per_layer: float,
) -> Design | None:
    """A homogeneous pipeline: S stages like stage_types[0]; the last stage takes the remainder."""
    st = stage_types[0]
    layers = [st.layers] * (S - 1) + [L - st.layers * (S - 1)]
    stages = tuple(Stage(st.device, st.tp, n) for n in layers)
    i = o.row
    bw = float(table.bandwidth_bytes_s[i])
    act = _activity(st.layers * (block_weight_bytes(m, fmt) / L / st.tp + kv_read_per_layer), bw, T)
    watts = float(
        power_w(
            table.tdp_w[i : i + 1],
            table.idle_w[i : i + 1],
            np.array([act]),
            table.power_activity_floor[i : i + 1],
        )[0]
    )
    n_dev = S * st.tp
    ttft = sum(p * s for p, s in prefill) + hop * (S - 1)
    return Design(
        w.name, b, stages, 1, b / T, b * S, S * T * 1e3, ttft, watts * n_dev, {st.device: n_dev}
    )


def _two_type_designs(
    w: InferenceWorkload,
    b: int,
    per_opt: list[tuple[_Option, np.ndarray]],
    usable: np.ndarray,
    w_layer: float,
    kv_layer_seq: float,
    emb: float,
    head: float,
    m: ModelArch,
    kvb: float,
    hop: float,
    table: DeviceTable,
    fmt: WeightFormat,
    max_stages: int,
    homog: list[Design],
) -> list[Design]:
    """Pipelines mixing two option types: s1 stages of o1 then s2 of o2, layers balanced to
    minimize the slowest stage (exhaustive over the layers per o1 stage)."""
    L = m.num_layers
    # Rank options by cost per token/s of their best homogeneous design at this batch level.
    best: dict[tuple[str, int], float] = {}
    for d in homog:
        if d.batch != b:
            continue
        key = (d.stages[0].device, d.stages[0].tp)
        price = _unit_price(table, d.stages[0].device)
        value = price * sum(d.devices.values()) / d.tokens_per_s
        best[key] = min(best.get(key, math.inf), value)
    ranked = sorted(per_opt, key=lambda p: best.get((p[0].device.id, p[0].tp), math.inf))
    # Options with no homogeneous design (too small alone) are exactly the ones pooling helps.
    small = [p for p in per_opt if (p[0].device.id, p[0].tp) not in best]
    pool = ranked[:HETERO_TOP] + small[:HETERO_TOP]
    out: list[Design] = []
    seen: set[tuple[str, int]] = set()
    uniq = []
    for p in pool:
        key = (p[0].device.id, p[0].tp)
        if key not in seen:
            seen.add(key)
            uniq.append(p)
    for a in range(len(uniq)):
        for c_ in range(len(uniq)):
            if a == c_ or uniq[a][0].device.id == uniq[c_][0].device.id:
                continue
            o1, t1 = uniq[a]
            o2, t2 = uniq[c_]
            for s1 in range(1, HETERO_MAX_STAGES + 1):
                for s2 in range(1, HETERO_MAX_STAGES + 1):
                    S = s1 + s2
                    if max_stages < S:
                        continue
                    cap1 = _layer_cap(
                        o1, usable, w_layer, kv_layer_seq, b * S, max(emb, head), m, b, kvb, w
                    )
                    cap2 = _layer_cap(
                        o2, usable, w_layer, kv_layer_seq, b * S, max(emb, head), m, b, kvb, w
                    )
                    if cap1 <= 0 or cap2 <= 0 or s1 * cap1 + s2 * cap2 < L:
                        continue
                    l1 = np.arange(1, min(cap1, L) + 1)
                    l2 = np.ceil(np.maximum(L - s1 * l1, 0) / s2).astype(int)
                    ok = (l2 >= 1) & (l2 <= cap2)
                    if not ok.any():
                        continue
                    T = np.maximum(l1 * t1[0] + t1[1], l2 * t2[0] + t2[1]) + hop
                    T = np.where(ok, T, np.inf)
                    j = int(np.argmin(T))
                    n1 = int(l1[j])
                    # Exact layer counts: o1 stages n1 each, o2 stages share the rest.
                    rest = L - s1 * n1
                    lay2 = [rest // s2 + (1 if i < rest % s2 else 0) for i in range(s2)]
                    if min(lay2) < 1 or max(lay2) > cap2:
                        continue
                    Tj = float(max(n1 * t1[0] + t1[1], max(lay2) * t2[0] + t2[1]) + hop)
                    stages = tuple(
                        [Stage(o1.device.id, o1.tp, n1)] * s1
                        + [Stage(o2.device.id, o2.tp, x) for x in lay2]
                    )
                    watts = 0.0
                    for o, lay, cnt in ((o1, n1, s1), (o2, max(lay2), s2)):
                        i = o.row
                        kv_read = b * kv_layer_seq / kv_shard_divisor(m, o.tp)
                        act = _activity(
                            lay * (w_layer / o.tp + kv_read), float(table.bandwidth_bytes_s[i]), Tj
                        )
                        pw = power_w(
                            table.tdp_w[i : i + 1],
                            table.idle_w[i : i + 1],
                            np.array([act]),
                            table.power_activity_floor[i : i + 1],
                        )[0]
                        watts += float(pw) * cnt * o.tp
                    ttft = (
                        s1 * (n1 * t1[2] + t1[3])
                        + sum(x * t2[2] + t2[3] for x in lay2)
                        + hop * (S - 1)
                    )
                    devices = {o1.device.id: s1 * o1.tp, o2.device.id: s2 * o2.tp}
                    out.append(
                        Design(
                            w.name,
                            b,
                            stages,
                            1,
                            b / Tj,
                            b * S,
                            S * Tj * 1e3,
                            float(ttft),
                            watts,
                            devices,
                        )
                    )
    return out


def _unit_price(table: DeviceTable, device: str) -> float:
    i = table.ids.index(device)
    p = table.purchase_usd[i]
    return float(p) if not np.isnan(p) else float(table.rent_usd_per_hour[i]) * 10000


def _meets_latency(d: Design, w: InferenceWorkload) -> bool:
    if w.max_ms_per_token is not None and d.ms_per_token > w.max_ms_per_token:
        return False
    return not (w.max_ttft_s is not None and d.ttft_s > w.max_ttft_s)


def _prune(designs: list[Design]) -> list[Design]:
    """Drop a design when another with the same device types uses no more of each device and
    no more power while serving at least the same tokens/s and sequences (it can never be
    better in any objective)."""
    groups: dict[tuple[str, ...], list[Design]] = {}
    for d in designs:
        groups.setdefault(d.signature, []).append(d)
    kept: list[Design] = []
    for sig, group in groups.items():
        arr = np.array(
            [
                [*(d.devices[s] for s in sig), d.power_w, -d.tokens_per_s, -d.concurrency]
                for d in group
            ]
        )
        order = np.lexsort(arr.T[::-1])
        arr, group = arr[order], [group[i] for i in order]
        keep = np.ones(len(group), dtype=bool)
        for i in range(len(group)):
            if not keep[i]:
                continue
            dominated = np.all(arr[i] <= arr, axis=1) & np.any(arr[i] < arr, axis=1)
            dup = np.all(arr[i] == arr, axis=1)
            dup[: i + 1] = False
            keep &= ~(dominated | dup)
        kept.extend(g for g, k in zip(group, keep, strict=True) if k)
    return sorted(kept, key=lambda d: (d.signature, d.batch, len(d.stages), -d.tokens_per_s))


# ------------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------------


def training_designs(
    w: TrainingWorkload,
    problem: Problem,
    cat: Catalog,
    devs: list[Accelerator],
    *,
    prune: bool = True,
) -> list[Design]:
    m = cat.model(w.model)
    c = problem.constraints
    net = cat.link(c.network)
    fmt = weight_format("bf16")
    out: list[Design] = []
    table = device_table(devs)
    max_dev = c.max_devices or 4096
    for i, d in enumerate(devs):
        sub = table.take([i])
        usable = float(table.memory_bytes[i]) * (1.0 - c.memory_headroom)
        base_tps = float(
            training_tokens_per_second(
                m, sub, seq_len=w.seq_len, method=w.method, recompute=w.recompute, precision_fmt=fmt
            )[0]
        )
        for k in tp_degrees(d, cat, problem, m):
            for S in [s for s in (1, 2, 4, 8, 16) if s <= c.max_stages and s <= m.num_layers]:
                for D in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
                    n = k * S * D
                    if n > max_dev:
                        break
                    setup = TrainingSetup(
                        method=w.method,
                        optimizer=w.optimizer,
                        zero_stage=w.zero_stage,
                        data_parallel=D,
                        tensor_parallel=k,
                        seq_len=w.seq_len,
                        micro_batch=w.micro_batch,
                        recompute=w.recompute,
                        lora_rank=w.lora_rank,
                    )
                    mem = training_memory(m, setup, layers=math.ceil(m.num_layers / S), last=True)
                    if mem.total > usable:
                        continue
                    micro = 4 * S  # micro-batches per step: enough to keep the bubble small
                    bubble = (S - 1) / (micro + S - 1)
                    tps = base_tps * n * (1.0 - bubble)
                    # Gradient all-reduce across D replicas over the network, once per step
                    # (ZeRO-1/2 reduce-scatter + all-gather move the same bytes).
                    trainable = _trainable_params(m, w)
                    step_tokens = w.seq_len * w.micro_batch * micro * D
                    step_s = step_tokens / tps
                    ar = (
                        float(
                            ring_allreduce_seconds(
                                2.0 * trainable / (k * S),
                                D,
                                net.bandwidth_gb_s * 1e9,
                                net.latency_us * 1e-6,
                            )
                        )
                        if D > 1
                        else 0.0
                    )
                    tps = step_tokens / (step_s + ar)
                    hours = w.token_budget / tps / 3600
                    if w.deadline_hours is not None and hours > w.deadline_hours:
                        continue
                    watts = float(d.power.tdp_w) * 0.9 * n  # training holds near TDP
                    stages = tuple(Stage(d.id, k, x) for x in _split(m.num_layers, S))
                    out.append(
                        Design(w.name, w.micro_batch, stages, D, tps, 0, 0.0, 0.0, watts, {d.id: n})
                    )
                    break  # a larger D at this (k, S) only costs more; the deadline is met
    return _prune(out) if prune else out


def _trainable_params(m: ModelArch, w: TrainingWorkload) -> float:
    from planner.estimator.architecture import total_params
    from planner.estimator.memory import lora_params

    if w.method == "full":
        return float(total_params(m))
    return float(lora_params(m, w.lora_rank))


def _split(L: int, S: int) -> list[int]:
    return [L // S + (1 if i < L % S else 0) for i in range(S)]
