"""Quick answers for one model on one or many devices: does it fit, how fast, at what cost.

Vectorized over devices: one call evaluates every device of a DeviceTable at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from planner.estimator.comm import p2p_seconds, pipeline_activation_bytes
from planner.estimator.cost import (
    Economics,
    power_w,
    usd_per_million_tokens_bought,
    usd_per_million_tokens_rented,
)
from planner.estimator.devices import Array, DeviceTable
from planner.estimator.formats import WeightFormat, kv_bytes, weight_format
from planner.estimator.memory import (
    MemoryBreakdown,
    TrainingSetup,
    inference_memory,
    training_memory,
)
from planner.estimator.perf import (
    decode_compute_bound,
    decode_step_seconds,
    moe_routing_seconds_per_token,
    training_tokens_per_second,
)
from planner.estimator.prompt_time import engine_prefill_seconds
from planner.estimator.support import EngineTimes
from planner.estimator.training_layout import job_alltoall_seconds_per_token, with_alltoall
from planner.schema.catalog import ModelArch
from planner.schema.measurements import MeasurementFile, find
from planner.schema.model_params import split_heads

Task = Literal["inference", "full", "lora", "qlora"]
MAX_DEVICES = 4096
ETHERNET_HOP = (12.5e9, 20e-6)  # 100 GbE between nodes for pipeline hops: bytes/s, seconds


@dataclass(frozen=True)
class InferenceQuery:
    weights: str = "fp16"
    kv: str = "fp16"
    context: int = 4096  # tokens held in the KV cache per sequence
    batch: int = 1  # concurrent sequences
    prompt: int = 1024  # prompt tokens, for time to first token
    tp: int | None = None  # tensor-parallel degree; None: the smallest layout that fits


@dataclass(frozen=True)
class TrainingQuery:
    """`setup.zero_stage` and `setup.data_parallel` are what the user gave only when `stage`
    and `ranks` say so: otherwise the estimate picks the fewest devices that hold the model,
    with ZeRO-3 across them (every model state sharded)."""

    setup: TrainingSetup = field(default_factory=TrainingSetup)
    precision: str = "bf16"  # compute precision of the matmuls
    token_budget: float | None = None
    ranks: int | None = None  # data-parallel ranks given (--dp); None: the fewest that fit
    stage: int | None = None  # ZeRO stage given (--zero); None: 3 on more than one device


@dataclass(frozen=True)
class Estimate:
    """The answer for one (model, device)."""

    model: str
    device: str
    task: Task
    memory: MemoryBreakdown  # on one device holding the whole model
    usable_bytes: float
    devices_needed: int  # smallest count that holds the model (0: not on any count we try)
    parallelism: str  # "single", "tensor-parallel N" or "pipeline N"
    bound: str  # "memory" or "compute" for decode; "compute" or "routing" (MoE) for training
    tokens_per_s: float  # decode output tokens/s summed over the batch, or training tokens/s
    ms_per_token: float | None  # decode time per output token per sequence
    prefill_s: float | None  # time to first token for one batch of prompts (None: no layout)
    step_s: float | None  # training step (global batch over these devices)
    budget_s: float | None  # training: time for the token budget
    power_w: float | None  # all devices at this load (None: nothing holds the model)
    tokens_per_joule: float | None
    usd_per_mtok_bought: float | None
    usd_per_mtok_rented: float | None
    measured: bool
    engine: str = ""  # inference: the serving engine the figures assume (support matrix id)
    measured_row: int | None = None  # the measurement table's row used (0-based)
    no_fit_reason: str = ""  # when devices_needed is 0: why, and what it would take
    memory_ranks: int = 1  # training at a given --dp: `memory` is per device of these ranks

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.usable_bytes

    @property
    def shortfall_bytes(self) -> float:
        return max(0.0, self.memory.total - self.usable_bytes)


def _devices_needed(per_device_total: list[float] | Array, usable: float) -> int:
    for i, need in enumerate(per_device_total):
        if need <= usable:
            return i + 1
    return 0


def _counts() -> list[int]:
    return [*range(1, 17), 24, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, MAX_DEVICES]


def estimate_inference(
    m: ModelArch,
    dev: DeviceTable,
    q: InferenceQuery,
    econ: Economics,
    measured: MeasurementFile | None = None,
    engines: list[tuple[str, EngineTimes]] | None = None,
    unpipelined: dict[str, bool] | None = None,
    solo: list[bool] | None = None,
) -> list[Estimate]:
    """Inference figures for `m` on every device of `dev`; `engines`, per device, the serving
    engine and its own times: host work per generated token (Engine.host_us_per_token), added
    to every decode step for each sequence in it, and an older release's fixed time per layer
    and per step (the efficiency file's `engines`), added to every forward pass. An engine of
    `unpipelined` (Engine.pipeline_parallel false; True where its groups run only over
    machines, support.check_estimate_group) is given no layout of several stages: such a row
    has no figures and says why. `solo`, per device: its engine runs no tensor-parallel group
    of `m` there (support.tensor_parallel_refusal), so a layout without --tp keeps one device
    per stage (the layer split) instead of a group.

    Long because it assembles one estimate's every figure in order.
    """
    fmt = weight_format(q.weights)
    kvb = kv_bytes(q.kv)
    one = inference_memory(m, fmt, kvb, batch=q.batch, context=q.context)
    # Stages: each holds at least one layer, so there are never more stages than layers.
    counts = [c for c in _counts() if c <= m.num_layers]
    out: list[Estimate] = []
    kernels: list[str] = [t["kernels"] for _, t in engines] if engines else [""] * len(dev)
    step1 = decode_step_seconds(
        m, fmt, kvb, dev, batch=q.batch, context=q.context, tp=q.tp or 1, kernels=kernels
    )
    pre1 = engine_prefill_seconds(m, fmt, kvb, dev, prompt=q.prompt, tp=q.tp or 1, kernels=kernels)
    compute_bound = decode_compute_bound(
        m, fmt, kvb, dev, batch=q.batch, context=q.context, kernels=kernels
    )
    # A decode step's hop carries the batch's hidden states, the prompt's its every token's
    # (docs/networks.md, "What a hop carries").
    hop = (
        float(p2p_seconds(pipeline_activation_bytes(q.batch, 1, m.hidden_size), *ETHERNET_HOP)),
        float(p2p_seconds(pipeline_activation_bytes(1, q.prompt, m.hidden_size), *ETHERNET_HOP)),
    )
    for i, did in enumerate(dev.ids):
        qi, stages = _stages(m, q, dev, i, one, counts)
        engine, t = engines[i] if engines else ("", None)
        if qi.tp != q.tp:  # stages of tensor-parallel groups: their own step times
            sub = dev.take([i])
            s1 = decode_step_seconds(
                m, fmt, kvb, sub, batch=q.batch, context=q.context, tp=qi.tp or 1,
                kernels=kernels[i],
            )  # fmt: skip
            p1 = engine_prefill_seconds(
                m, fmt, kvb, sub, prompt=q.prompt, tp=qi.tp or 1, kernels=kernels[i]
            )
            times = (float(s1[0]), float(p1[0]), *hop)
            n, step, pre, par = _layout(m, qi, dev, i, stages, times, kernels[i])
        else:
            times = (float(step1[i]), float(pre1[i]), *hop)
            grouped = not (solo and solo[i])
            n, step, pre, par = _layout(m, q, dev, i, stages, times, kernels[i], grouped)
        refused = ""
        unpiped = unpipelined or {}
        if n and engine in unpiped and "pipeline" in par:
            room = float(dev.usable_memory_bytes[i])
            refused = _no_pipeline(engine, unpiped[engine], qi, par, m, one, room)
            n = 0
        if t is not None:
            fixed = m.num_layers * t["engine_layer_s"] + t["engine_step_s"]
            step += t["host_s_per_token"] * q.batch + fixed
            pre += fixed
        tps = q.batch / step if n else 0.0
        ms = step * 1e3 if n else None
        # A measurement stands for a layout the estimate finds; none stands for no layout.
        used = (
            find(
                measured,
                model=m.id,
                device=did,
                weights=q.weights,
                kv=q.kv,
                metric="decode_tokens_per_s",
                batch=q.batch,
                devices=n,
                engine=engine or None,
            )
            if n
            else None
        )
        if measured is not None and used is not None:
            value = measured.measurements[used].value
            tps, ms = value, q.batch / value * 1e3
        # Activity: share of the step the memory system streams at peak (decode is memory-bound).
        ideal = (one.weights + one.kv_cache) / dev.bandwidth_bytes_s[i] / max(n, 1)
        activity = np.array([min(1.0, ideal / step)]) if n else np.array([0.0])
        watts = float(
            power_w(
                dev.tdp_w[i : i + 1],
                dev.idle_w[i : i + 1],
                activity,
                dev.power_activity_floor[i : i + 1],
            )[0]
        ) * max(n, 1)
        row = _finish(
            m.id,
            did,
            "inference",
            one,
            dev,
            i,
            n,
            par,
            "compute" if compute_bound[i] else "memory",
            tps,
            ms,
            pre,
            None,
            None,
            watts,
            econ,
            used is not None,
            engine,
        )
        reason = refused or (
            "" if n else _unheld_inference(m, qi, one, float(dev.usable_memory_bytes[i]))
        )
        out.append(replace(row, measured_row=used, no_fit_reason=reason))
    return out


def _auto_tp(m: ModelArch, dev: DeviceTable, i: int) -> int:
    """The tensor-parallel degree a stage takes when one device per stage is too little: the
    largest power of two within the device's scale-up domain that divides the heads."""
    domain, tp = int(dev.domain_size[i]), 1
    while tp * 2 <= domain and split_heads(m) % (tp * 2) == 0:
        tp *= 2
    return tp


def _stages(
    m: ModelArch,
    q: InferenceQuery,
    dev: DeviceTable,
    i: int,
    one: MemoryBreakdown,
    counts: list[int],
) -> tuple[InferenceQuery, int]:
    """The query and the fewest stages (0: none) that hold the model: stages of `q.tp` devices,
    or of one device each without a degree; and when even a stage per layer of one device is
    too little, stages of a tensor-parallel group filling the scale-up domain (_auto_tp), so
    that a model whose KV cache needs 48 H100s is laid out on 48 rather than called unfit."""
    usable = float(dev.usable_memory_bytes[i])

    def fewest(tp: int) -> int:
        # Per-device memory when the layers are split n ways (each of the tp ranks of a stage
        # holding 1/tp of it): weights, KV cache and activations divide; the framework stays.
        # At most MAX_DEVICES devices in all.
        fit = [n for n in counts if n * tp <= MAX_DEVICES]
        per_n = [(one.total - one.framework) / (n * tp) + one.framework for n in fit]
        need = _devices_needed(per_n, usable)
        return fit[need - 1] if need else 0

    stages = fewest(q.tp or 1)
    if stages or q.tp is not None or _auto_tp(m, dev, i) == 1:
        return q, stages
    tp = _auto_tp(m, dev, i)
    return replace(q, tp=tp), fewest(tp)


def _unheld_inference(m: ModelArch, q: InferenceQuery, one: MemoryBreakdown, usable: float) -> str:
    """Why no layout holds the model, and what it would take (estimate conventions)."""
    tp = q.tp or 1
    stages = max(c for c in _counts() if c <= m.num_layers and c * tp <= MAX_DEVICES)
    most = stages * tp
    if usable <= one.framework:
        return (
            f"the framework's own {one.framework / 1e9:,.1f} GB leaves nothing of the "
            f"device's {usable / 1e9:,.1f} GB usable"
        )
    need = math.ceil((one.total - one.framework) / (usable - one.framework))
    layout = f"{stages} pipeline stages, at most one per layer," + (
        f" of {tp} tensor-parallel devices each" if tp > 1 else " of one device each"
    )
    return (
        f"by memory alone it would take about {need:,} devices; the estimate lays out at most "
        f"{most:,} ({layout}): shorten --context or --batch, choose a smaller --weights "
        "format, or a larger device"
    )


def _no_pipeline(
    engine: str,
    networked: bool,
    q: InferenceQuery,
    par: str,
    m: ModelArch,
    one: MemoryBreakdown,
    usable: float,
) -> str:
    """Why a layout of several pipeline stages is refused under an engine that runs none, and
    the fix: a tensor-parallel group that holds the model alone needs about `need` devices
    (weights, KV cache and activations divided over them, the framework on each); of an engine
    whose groups run only over machines (`networked`), one planned from a problem file."""
    why = (
        f"--engine {engine} runs no pipeline stages (its catalog entry: pipeline_parallel: "
        f"false), and {m.id} needs {par} at --batch {q.batch:,} and --context {q.context:,} here"
    )
    if networked:
        return (
            f"{why}; its tensor-parallel groups run only over machines joined by a network: "
            f"plan one with planner solve on a problem file naming `engine: {engine}`, the "
            "machines in constraints.inventory and their link in constraints.network, or "
            "shorten --context or --batch"
        )
    room = usable - one.framework
    need = math.ceil((one.total - one.framework) / room) if room > 0 else MAX_DEVICES + 1
    heads = m.num_attention_heads
    fit = [k for k in range(need, min(heads, MAX_DEVICES) + 1) if heads % k == 0]
    group = (
        f"--tp {fit[0]} (the least degree dividing the {heads} heads that holds it in one stage)"
        if fit
        else "a larger device"
    )
    return f"{why}; give {group}, shorten --context or --batch, or name an engine that pipelines"


def _layout(
    m: ModelArch,
    q: InferenceQuery,
    dev: DeviceTable,
    i: int,
    stages: int,
    times: tuple[float, float, float, float],
    kernels: str,
    grouped: bool = True,
) -> tuple[int, float, float, str]:
    """(devices, decode step s, time to first token s, description) of the layout that holds
    the model in `stages` parts of `q.tp` devices each (or one device per part without --tp);
    `times`: one part's decode step and prompt, then one pipeline hop of each. Without a given
    degree, parts that fit one scale-up domain become tensor parallel instead, their prompt
    on the engine's `kernels` (prompt_time.engine_prefill_seconds) as on one device; not where
    the engine runs no group of the model there (`grouped` false)."""
    step1, pre1, *hop = times
    if q.tp is not None:
        # The user's degree: `stages` groups of tp devices, a pipeline when stages > 1; a token
        # passes every stage in turn, one hop per boundary.
        pipe = f"pipeline {stages}" if stages > 1 else ""
        par = (f"tensor-parallel {q.tp}" + (f" x {pipe}" if pipe else "")) if q.tp > 1 else pipe
        par = par or "single"
        k = max(stages - 1, 0)
        return stages * q.tp, step1 + k * hop[0], pre1 + k * hop[1], par
    n, domain = stages, int(dev.domain_size[i]) if grouped else 1
    pow2 = 1 << max(0, n - 1).bit_length()
    if 1 < n <= domain and pow2 <= domain and split_heads(m) % pow2 == 0:
        n = pow2  # tensor parallelism splits heads: a power of two that divides them
    if n <= 1:
        return n, step1, pre1, "single"
    if n <= domain:
        sub = dev.take([i])
        step = float(
            decode_step_seconds(
                m,
                weight_format(q.weights),
                kv_bytes(q.kv),
                sub,
                batch=q.batch,
                context=q.context,
                tp=n,
                kernels=kernels,
            )[0]
        )
        fmt, kvb = weight_format(q.weights), kv_bytes(q.kv)
        pre = float(
            engine_prefill_seconds(m, fmt, kvb, sub, prompt=q.prompt, tp=n, kernels=kernels)[0]
        )
        return n, step, pre, f"tensor-parallel {n}"
    return n, step1 + (n - 1) * hop[0], pre1 + (n - 1) * hop[1], f"pipeline {n}"


def estimate_training(
    m: ModelArch,
    dev: DeviceTable,
    task: Task,
    q: TrainingQuery,
    econ: Economics,
) -> list[Estimate]:
    """Training or fine-tuning figures for `m` on every device of `dev`: on the data-parallel
    ranks and at the ZeRO stage the query gives, or on the fewest devices that hold the model
    (TrainingQuery)."""
    setup = q.setup
    if task in ("lora", "qlora", "full"):
        setup = replace(setup, method=task)
    # Split n ways: ZeRO across n data-parallel ranks shards model states (stage 1 optimizer
    # states, 2 also gradients, 3 also weights; Rajbhandari et al. 2020); activations per device
    # stay those of one micro-batch.
    stage = 3 if q.stage is None else q.stage
    counts = [q.ranks] if q.ranks else _counts()
    setup = replace(setup, zero_stage=stage)
    # A dense model's memory is the same in every domain: computed once.
    domains = [float(x) if m.moe else 1.0 for x in dev.domain_size]
    mem = {dom: _training_memory_at(m, setup, counts, q, dom) for dom in set(domains)}
    fmt: WeightFormat = weight_format(q.precision)
    tps1 = training_tokens_per_second(
        m,
        dev,
        seq_len=setup.seq_len,
        method=setup.method,
        recompute=setup.recompute,
        precision_fmt=fmt,
    )
    # An MoE model whose routing takes most of a token's time is bound by it, not by FLOPs.
    routing = moe_routing_seconds_per_token(m, dev) * tps1
    # Its experts split over the ranks inside their scale-up domain pay the expert-parallel
    # all-to-all (training_layout.job_alltoall_seconds_per_token, DeepSeek-V3 report section
    # 3.2.2), as the planner's jobs and the calibrated runs do.
    a2a = job_alltoall_seconds_per_token(m, dev, np.array(counts), ETHERNET_HOP[0])
    routed = with_alltoall(np.asarray(tps1, dtype=np.float64), a2a)  # rows x device counts
    out = []
    for i, did in enumerate(dev.ids):
        usable = float(dev.usable_memory_bytes[i])
        per_n, one = mem[domains[i]]
        need = _devices_needed(per_n, usable)
        n = counts[need - 1] if need else 0
        tps = float(routed[i, need - 1]) * n if need else 0.0
        tokens_per_step = setup.seq_len * setup.micro_batch * max(n, 1)
        step = tokens_per_step / tps if tps else None
        budget = q.token_budget / tps if (q.token_budget and tps) else None
        watts = float(dev.tdp_w[i]) * max(n, 1) * 0.9  # training holds near TDP (MLPerf power runs)
        par = "single" if n == 1 else f"data-parallel {n} (ZeRO-{stage})"
        row = _finish(
            m.id,
            did,
            task,
            one,
            dev,
            i,
            n,
            par,
            "routing" if routing[i] > 0.5 else "compute",
            tps,
            None,
            None,
            step,
            budget,
            watts,
            econ,
            False,
        )
        reason = "" if n else _unheld_training(q, stage, counts[-1], per_n[-1], usable)
        out.append(replace(row, no_fit_reason=reason, memory_ranks=q.ranks or 1))
    return out


def _training_memory_at(
    m: ModelArch, setup: TrainingSetup, counts: list[int], q: TrainingQuery, domain: float
) -> tuple[list[float], MemoryBreakdown]:
    """(memory per device on each count of `counts`, the breakdown on the ranks --dp gives or
    one device) for devices of a scale-up domain of `domain`: a MoE model's experts split over
    the ranks in it (memory.expert_split, the expert-parallel size the all-to-all is charged
    at)."""
    at = replace(setup, scale_up_domain=int(domain))
    per_n = [training_memory(m, replace(at, data_parallel=n)).total for n in counts]
    return per_n, training_memory(m, replace(at, data_parallel=q.ranks or 1))


def _unheld_training(q: TrainingQuery, stage: int, most: int, need: float, usable: float) -> str:
    """Why no count of devices holds the training job, and what might."""
    at = (
        f"at --dp {most:,}"
        if q.ranks
        else ("on any number of devices" if stage == 0 else f"at the most devices tried ({most:,})")
    )
    more = " or raise --dp" if q.ranks else ""
    hint = {
        0: "ZeRO-0 shards nothing, so every rank holds the whole model: give --zero 3",
        1: f"ZeRO-1 shards only optimizer states: give --zero 3{more}",
        2: f"ZeRO-2 keeps the weights whole on every rank: give --zero 3{more}",
        3: ("raise --dp, or " if q.ranks else "")
        + "lower --seq or --micro-batch, or give --recompute full (activations do not shard)",
    }[stage]
    return (
        f"{at} with ZeRO-{stage} each device needs {need / 1e9:,.1f} GB of its "
        f"{usable / 1e9:,.1f} GB usable; {hint}"
    )


def _finish(
    model: str,
    did: str,
    task: Task,
    one: MemoryBreakdown,
    dev: DeviceTable,
    i: int,
    n: int,
    par: str,
    bound: str,
    tps: float,
    ms: float | None,
    pre: float | None,
    step: float | None,
    budget: float | None,
    watts: float,
    econ: Economics,
    measured: bool,
    engine: str = "",
) -> Estimate:
    k = max(n, 1)
    if not n:  # no layout: no time to first token and no power, rather than figures of none
        pre, watts = None, 0.0
    price = float(dev.purchase_usd[i])
    rent = float(dev.rent_usd_per_hour[i])
    bought = rented = None
    if tps > 0 and not math.isnan(price):
        bought = float(
            usd_per_million_tokens_bought(
                np.array([price * k]), np.array([watts]), np.array([tps]), econ
            )[0]
        )
    if tps > 0 and not math.isnan(rent):
        rented = float(
            usd_per_million_tokens_rented(np.array([rent * k]), np.array([tps]), econ)[0]
        )
    return Estimate(
        model=model,
        device=did,
        task=task,
        memory=one,
        usable_bytes=float(dev.usable_memory_bytes[i]),
        devices_needed=n,
        parallelism=par if n else "does not fit",
        bound=bound,
        tokens_per_s=tps,
        ms_per_token=ms,
        prefill_s=pre,
        step_s=step,
        budget_s=budget,
        power_w=watts if n else None,
        tokens_per_joule=(tps / watts if watts else 0.0) if n else None,
        usd_per_mtok_bought=bought,
        usd_per_mtok_rented=rented,
        measured=measured,
        engine=engine,
    )
