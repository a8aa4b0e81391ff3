"""Figures of one replica from its stages, one stage at a time (scalar arithmetic).

This is the serving model of planner.estimator.designs written out for a single pipeline: the plan
builder prints these figures and the verifier recomputes them from the plan's stages alone, so a
figure never passes from one to the other. Design enumeration computes the same formulas as numpy
columns over every candidate at once; a test holds the two to each other.

A replica of S stages keeps S micro-batches of b sequences in flight. Stage s of `layers` blocks on
k devices takes layers x (time per block) + the head and fixed step work + the hop to the next
stage (when S > 1: the latency and transfer of the route joining the two stages' machines,
planner.estimator.routes, each stage charged the slowest hop leaving a stage of its kind,
`kind_hops`; plus the engine's own time per hop, Engine.hop_overhead_us and RPC round trips,
hop_extras); the slowest stage sets the step T, a token advances every S x T and the replica makes
b / T tokens/s. One sequence alone (nothing else in flight) waits for the sum of the stages instead
(`single_stream_seconds`). Each device draws power at the share of T its memory is busy with its
own stage's bytes (planner.estimator.cost.power_w). Time to first token: each stage's batch-1
prefill in turn plus S - 1 hops.

What a hop carries (`hop_bytes`): forward, the hidden states of every token the iteration
processes, the decodes' and a prompt chunk's alike ((decodes + prompt tokens) x hidden x 2); back
from the last stage to the first, only the sampled token ids (comm.sampled_token_bytes). The hop is
serial with its stage's work, never overlapped: a stage cannot start a chunk before its hidden
states have arrived (vLLM's pipeline stages exchange them with torch.distributed send/recv,
`send_tensor_dict`/`recv_tensor_dict` in vllm/distributed/parallel_state.py, the receiving stage
blocked until they land), so the same charge enters the iterations with a chunk, their mean, the
time to first token and a single stream.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.estimator.bilinear import BilinearTable
from planner.estimator.cost import power_w
from planner.estimator.devices import DeviceTable, small_allreduce_seconds
from planner.estimator.engine_topology import (
    ExchangeLayout,
    head_divisor,
    root_alone,
    root_block_seconds,
)
from planner.estimator.formats import WeightFormat, kv_bytes, weight_format
from planner.estimator.iteration_parts import alone_seconds, grid_hops, hop_bytes, one_device
from planner.estimator.memory import (
    TrainingSetup,
    block_weight_bytes,
    inference_memory,
    sequence_traffic_per_layer,
    training_memory,
)
from planner.estimator.perf import head_seconds, serving_layer_seconds
from planner.estimator.profiles import LayerProfile, profiled, profiled_pair
from planner.estimator.routes import Route
from planner.estimator.rpc_hop import NO_RPC, RpcTimes
from planner.estimator.serving import chunk_mix, closed_ttft, serial_engine, token_budget
from planner.schema.catalog import Accelerator, Link, ModelArch


@dataclass(frozen=True)
class StageSpec:
    """What a stage is: `tp` devices of one type holding `layers` consecutive blocks. `link`:
    the link the tensor-parallel group's all-reduces cross when its devices sit in different
    machines (None: the devices' own scale-up link); `exchange_s`: the serving engine's own
    time per all-reduce across those machines (Engine.exchange_overhead_us); `layout`: how
    the engine release exchanges across those machines where it is not two ring all-reduces
    per block (planner.estimator.engine_topology); `profile`: the workload's measured times
    per block for this device and degree."""

    device: Accelerator
    tp: int
    layers: int
    link: Link | None = None
    exchange_s: float = 0.0
    layout: ExchangeLayout | None = None
    # Measured times per block replacing the estimator's (planner.estimator.profiles).
    profile: LayerProfile | None = None
    # The hop to the next stage (last: the first) over its route (routes); None: the `link`
    hop: Route | None = None

    def link_args(self) -> tuple[float | None, float]:
        """(bytes/s, latency s per ring step) of the group's all-reduces for the per-layer
        estimator (planner.estimator.perf), or (None, default) on the device's own link. The
        ring takes 2 (tp - 1) steps per all-reduce (comm.ring_allreduce_seconds): each takes
        the link's latency, or its share of the link's measured small all-reduce
        (Link.allreduce_us, a ring's time at tp devices, devices.small_allreduce_seconds),
        and its share of the engine's time per exchange, so each all-reduce costs exactly
        those. An engine `layout` of its own gives the pair under which that formula takes
        the layout's time (ExchangeLayout.ring_equivalent)."""
        if self.link is None or self.tp == 1:
            return None, 5e-6
        if self.layout is not None:
            bw, lat = self.link.bandwidth_gb_s * 1e9, self.link.latency_us * 1e-6
            return self.layout.ring_equivalent(self.tp, bw, lat, self.exchange_s)
        steps = 2.0 * (self.tp - 1)
        per_step = self.link.latency_us * 1e-6
        if self.link.allreduce_us:
            ring = small_allreduce_seconds(self.link.allreduce_us, self.tp, ring=True)
            per_step = float(ring) / steps
        return self.link.bandwidth_gb_s * 1e9, per_step + self.exchange_s / steps


@dataclass(frozen=True)
class StageFigures:
    memory: dict[str, float]  # bytes per device by kind, and "total"
    seconds: float  # one decode step of this stage, hop to the next included (0 for training)
    boundary_bytes: float  # sent to the next stage per decode step (the last: its token ids)
    watts: float  # each device at load (0 for training: the job's power is its own figure)
    chunk_bytes: float = 0.0  # sent to the next stage per step that carries a prompt chunk


@dataclass(frozen=True)
class ReplicaFigures:
    stages: tuple[StageFigures, ...]
    step_seconds: float  # the slowest stage
    tokens_per_s: float  # output tokens/s of one replica
    ms_per_token: float  # time per output token of one sequence
    ttft_s: float  # time to first token with every slot held and no queue (closed load)
    power_w: float  # every device of the replica at load


def _scalar(x: object) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def _layer_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    kvb: float,
    dev: DeviceTable,
    tp: int,
    batch: int,
    context: int,
    prompt: int,
    output: int,
    link: tuple[float | None, float] = (None, 5e-6),
    engine_layer_s: float = 0.0,
    profile: LayerProfile | None = None,
    layout: ExchangeLayout | None = None,
    kernels: str = "",
) -> tuple[float, float, float]:
    """(decode only, with a prefill chunk) seconds per block of one serving iteration at
    capacity, the engine's own time per block included, and the share of iterations with a
    chunk (planner.estimator.serving.chunk_mix), the root's own work included where the engine
    `layout` has one (engine_topology.root_block_seconds); scaled to the measured `profile` if
    any (as design enumeration scales its columns)."""
    c, f = chunk_mix(batch, prompt, output, batch * prompt / output)
    layer = layer_estimate(m, fmt, kvb, dev, tp, context, link, engine_layer_s, layout, kernels)
    dec, tau_c = (_scalar(layer(batch, p, prompt)) for p in (0.0, c))
    if profile is not None:
        d, w = profiled_pair(profile, layer, float(batch), c, dec, tau_c)
        dec, tau_c = float(d[0]), float(w[0])
    return dec, tau_c, f


def pipeline_round(decode: list[float], chunk: list[float], share: float) -> float:
    """Mean seconds per step of a pipeline whose stages take `decode` seconds in decode-only
    iterations and `chunk` seconds in those with a prompt chunk (a share `share` of them): each
    iteration waits for its slowest stage, which may be another stage in the two kinds (a
    compute-bound device slows chunks, a bandwidth-bound one decodes), so the mean is the mean
    of the two maxima, not the largest mean (IterationTime steps the same way)."""
    return (1.0 - share) * max(decode) + share * max(chunk)


def inference_replica(
    m: ModelArch,
    weights: str,
    kv: str,
    *,
    batch: int,
    context: int,
    prompt: int,
    output: int,
    stages: list[StageSpec],
    link: Link,
    hop_overhead_s: float = 0.0,
    rpc: RpcTimes = NO_RPC,
    host_s_per_token: float = 0.0,
    engine_layer_s: float = 0.0,
    engine_step_s: float = 0.0,
    decode_only: bool = False,
    kernels: str = "",
) -> ReplicaFigures:
    """Memory, step time, throughput, latency and power of one inference replica. Engine time:
    `hop_overhead_s` per pipeline hop (Engine.hop_overhead_us), `host_s_per_token` of host work
    per generated token, serial with each step (Engine.host_us_per_token), and an older
    release's `engine_layer_s` per layer and `engine_step_s` per step of every forward pass;
    `kernels`, its kernel family (Engine.kernels: a llama.cpp-style pool prefills at its
    release's rates).
    `decode_only`: a disaggregated decode replica, whose iterations carry no prompt chunks."""
    fmt, kvb = weight_format(weights), kv_bytes(kv)
    S = len(stages)
    c = 0.0 if decode_only else chunk_mix(batch, prompt, output, batch * prompt / output)[0]
    sent = [hop_bytes(batch, q, prompt, m.hidden_size) for q in (0.0, c)]  # decode, chunk
    raw = [[_scalar(h) for h in hop_seconds(stages, link, *b)] for b in sent]
    # The engine's own time: one for every hop is added after each kind's slowest (as the
    # enumeration sums it); where some hops are inside a machine, each hop takes its own.
    extras = hop_extras(stages, hop_overhead_s, rpc, link)
    one = len(set(extras)) <= 1
    hops_d, hops_c = (
        kind_hops(stages, r if one else [h + e for h, e in zip(r, extras, strict=True)])
        for r in raw
    )
    extra = extras[0] if one and S > 1 else 0.0
    chunk_seconds: list[float] = []
    decode_seconds: list[float] = []
    for st, hop_d, hop_c in zip(stages, hops_d, hops_c, strict=True):
        dev = one_device(st.device)  # each device's table, made once (iteration_parts)
        tau_d, tau_c, share = _layer_seconds(
            m, fmt, kvb, dev, st.tp, batch, context, prompt, output, st.link_args(),
            engine_layer_s, st.profile, st.layout, kernels,
        )  # fmt: skip
        fixed = (
            _scalar(head_seconds(m, fmt, dev, batch, kernels)) / head_divisor(st.layout, st.tp)
            + _scalar(dev.step_overhead_s)
            + engine_step_s
            + host_s_per_token * batch
        )
        chunk_seconds.append(st.layers * tau_c + fixed + (hop_c + extra if S > 1 else 0.0))
        decode_seconds.append(st.layers * tau_d + fixed + (hop_d + extra if S > 1 else 0.0))
    if decode_only:
        share = 0.0  # a decode pool's engine takes prefilled sequences: no prompt chunks
    T = pipeline_round(decode_seconds, chunk_seconds, share)
    figs = []
    total_w = 0.0
    for i, (st, d, c) in enumerate(zip(stages, decode_seconds, chunk_seconds, strict=True)):
        use, nbytes = _stage_memory(
            m, fmt, kvb, st, batch, S, context, first=i == 0, last=i == S - 1
        )
        sec, dev = (1.0 - share) * d + share * c, one_device(st.device)
        act = min(1.0, nbytes / _scalar(dev.bandwidth_bytes_s) / T)
        watts = _scalar(power_w(dev.tdp_w, dev.idle_w, np.asarray(act), dev.power_activity_floor))
        total_w += watts * st.tp
        d_bytes, c_bytes = (_scalar(b[0 if i < S - 1 else 1]) if S > 1 else 0.0 for b in sent)
        figs.append(StageFigures(use, sec, d_bytes, watts, c_bytes))
    return ReplicaFigures(
        stages=tuple(figs),
        step_seconds=T,
        tokens_per_s=batch / T,
        ms_per_token=S * T * 1e3,
        ttft_s=closed_ttft(S * T, S * max(chunk_seconds), batch, prompt, output),
        power_w=total_w,
    )


def hop_seconds(
    stages: list[StageSpec], link: Link, forward: Any, back: Any
) -> list[npt.NDArray[np.float64]]:
    """Seconds of each stage's hop to the next with `forward` bytes of activations (a number or
    a grid), the last stage's back to the first with `back` bytes (its sampled token ids,
    `hop_bytes`): along the stage's route (StageSpec.hop), else over `link`; 0 for one stage."""
    if len(stages) < 2:
        return [np.zeros_like(np.asarray(forward, dtype=np.float64)) for _ in stages]
    alone = Route((link,))
    last = len(stages) - 1
    return [
        (st.hop or alone).seconds(back if j == last else forward) for j, st in enumerate(stages)
    ]


def hop_extras(
    stages: list[StageSpec],
    overhead_s: float,
    rpc: RpcTimes = NO_RPC,
    link: Link | None = None,
) -> list[float]:
    """The engine's own time each stage's hop adds: Engine.hop_overhead_us, and its RPC time
    per hop (rpc_hop.rpc_hop_seconds) over as many machines as hops between machines, layers
    shared evenly, its graph over the slowest of those hops' routes (else `link`); none on a
    hop inside one machine (routes.machine_link: llama.cpp splits layers over local devices
    without RPC); none for one stage."""
    if len(stages) < 2:
        return [0.0] * len(stages)
    between = [not (st.hop is not None and st.hop.inside) for st in stages]
    own = overhead_s
    machines = sum(between)
    if rpc.charged and machines:
        routes = [st.hop for st, b in zip(stages, between, strict=True) if b and st.hop]
        bws = [r.bandwidth_bytes_s for r in routes] or [link.bandwidth_gb_s * 1e9 if link else 0]
        byte_s = 1.0 / min(bws) if min(bws) > 0 else 0.0
        layers = sum(st.layers for st in stages) / machines
        own += float(rpc.hop_seconds(layers, byte_s, machines))
    return [own if b else 0.0 for b in between]


def kind_hops(stages: list[StageSpec], hops: list[Any]) -> list[Any]:
    """Each stage charged the slowest hop leaving a stage of its kind (device and degree):
    stages of one kind are timed once, as the fullest of them (`_fullest`), so the design
    enumeration, this module's scalar figures and its grids charge the same hop (an upper
    bound where a kind's stages hop over unlike routes). A kind is the device's id and the
    degree, not the entry object: a plan's stages each take their own derated copy of a card
    (hosts.sustained), where a design's share one."""
    worst: dict[tuple[str, int], Any] = {}
    for st, h in zip(stages, hops, strict=True):
        k = (st.device.id, st.tp)
        worst[k] = h if k not in worst else np.maximum(worst[k], h)
    return [worst[(st.device.id, st.tp)] for st in stages]


def _stage_memory(
    m: ModelArch,
    fmt: WeightFormat,
    kvb: float,
    st: StageSpec,
    batch: int,
    S: int,
    context: int,
    *,
    first: bool,
    last: bool,
) -> tuple[dict[str, float], float]:
    """Memory per device of one of `S` pipeline stages (S micro-batches of `batch` in flight),
    and the bytes its devices read per step: their weights and the KV of one micro-batch (of
    a star group, its root's: engine_topology.root_alone)."""
    L = m.num_layers
    w_layer = block_weight_bytes(m, fmt) / L
    root = root_alone(st.layout, st.tp)  # a star's root: the fullest device of its group
    mem = inference_memory(
        m, fmt, kvb, batch=batch * S, context=context, layers=st.layers, tp=st.tp,
        first=first, last=last, root_alone=root,
    )  # fmt: skip
    seq_layer = sequence_traffic_per_layer(m, kvb, context, st.tp, root)  # KV once, state twice
    busy = st.layers * (w_layer / st.tp + batch * seq_layer)
    return mem.as_dict(), busy


def training_stage_memory(
    m: ModelArch, setup: TrainingSetup, *, layers: int, last: bool
) -> dict[str, float]:
    """Memory per device of one training pipeline stage (mixed-precision AdamW, ZeRO)."""
    return training_memory(m, setup, layers=layers, last=last).as_dict()


_Floats = npt.NDArray[np.float64]
# Per-block grids by stage kind and table shape; the device and model are kept with their
# grids, so the ids in a key stay theirs.
GridCache = dict[tuple[object, ...], tuple[Accelerator, ModelArch, _Floats, _Floats]]


class IterationTime(BilinearTable):
    """One serving iteration of a replica's pipeline round as a function of the sequences
    decoding and the prompt tokens processed, S x (slowest stage), from the estimator on a grid
    and interpolated bilinearly between grid points (the grid holds every decode count up to
    the batch when it is at most 64, else 65 even steps; prompt tokens in 33 steps up to the
    token budget). Seconds."""

    def __init__(
        self,
        m: ModelArch,
        weights: str,
        kv: str,
        *,
        batch: int,
        context: int,
        prompt: int,
        output: int,
        stages: list[StageSpec],
        link: Link,
        budget: float | None = None,
        hop_overhead_s: float = 0.0,
        rpc: RpcTimes = NO_RPC,
        host_s_per_token: float = 0.0,
        engine_layer_s: float = 0.0,
        engine_step_s: float = 0.0,
        grids: GridCache | None = None,
        kernels: str = "",
    ) -> None:
        """`budget`: the most prompt tokens an iteration takes (the serving token budget of the
        batch unless given, e.g. a disaggregated prefill engine's); `hop_overhead_s`: the
        engine's own time per pipeline hop (Engine.hop_overhead_us); `host_s_per_token`: its
        host work per generated token, serial with each step (Engine.host_us_per_token);
        `engine_layer_s` and `engine_step_s`: an older release's fixed time per layer and per
        step of every iteration (the efficiency file's `engines`). `grids`: per-block grids of
        stage kinds an enumeration computed for other tables of the same model, formats and
        batch (stages of one device and degree in pipelines of other depths share them).
        `kernels`: the engine's kernel family (Engine.kernels: a llama.cpp-style pool prefills
        at its release's rates)."""
        fmt, kvb = weight_format(weights), kv_bytes(kv)
        if budget is None:
            budget = token_budget(batch, prompt, output)
        self.budget = float(budget)
        self.model = m
        self.n_grid, self.p_grid, n, p = _grid(batch, self.budget, prompt)
        S = len(stages)
        extras = hop_extras(stages, hop_overhead_s, rpc, link)
        # Terms that are zero are left out rather than added (x + 0.0 is x, bit for bit): one
        # stage hops nowhere (grid_hops' zeros; p95-latency-70b: 629 of its 4,073 tables), and
        # most engines do no host work per token. An enumeration builds thousands of tables.
        alone = S == 1 and not extras[0]
        own = grid_hops(stages, link, n, p, prompt, m)
        own, hops = (own, {}) if alone else _with_extras(stages, own, extras)
        worst: Any = None
        # The host's work: a token per decoding sequence and per prompt the iteration finishes.
        host: Any = host_s_per_token * (n + p / max(prompt, 1)) if host_s_per_token else 0.0
        per_layer: dict[tuple[int, int], tuple[_Floats, _Floats]] = {}
        for kind, st in _fullest(stages).items():
            dev = one_device(st.device)
            key: tuple[object, ...] = (id(m), weights, kv, id(st.device), st.tp, st.link_args())
            key += (st.profile, st.layout, batch, self.budget, prompt, context, engine_layer_s)
            key += (kernels,)
            hit = grids.get(key) if grids is not None else None
            if hit is not None and hit[0] is st.device and hit[1] is m:
                tau, head = hit[2], hit[3]
            else:
                tau = _layer_grid(
                    m, fmt, kvb, st, dev, n, p, context, prompt, engine_layer_s, kernels
                )
                head = head_seconds(m, fmt, dev, np.maximum(n, 1.0), kernels)
                head = head / head_divisor(st.layout, st.tp)
                if grids is not None:
                    if len(grids) > 4096:
                        grids.clear()
                    grids[key] = (st.device, m, tau, head)
            own_s = dev.step_overhead_s + engine_step_s
            step = st.layers * tau + head + own_s
            if not alone:
                step = step + hops[kind]
            step = step + host if host_s_per_token else step
            # The first kind's step is the maximum so far (times are not negative).
            worst = step if worst is None else np.maximum(worst, step)
            per_layer[kind] = (tau, np.asarray(own_s, dtype=np.float64))
        self.table = worst if alone else S * worst
        self._alone = (m, fmt, list(stages), per_layer, own, n, host_s_per_token, kernels)
        self._xs, self._ys = _grid_lists(batch, self.budget, prompt)
        # A row as a list when first read (_fill): a rate search reads a few of them.
        self._z = [None] * len(self._xs)

    def _fill(self, i: int) -> list[float]:
        row: list[float] = self.table[i].tolist()
        self._z[i] = row
        return row

    @functools.cached_property
    def alone(self) -> _Floats:
        """One sequence alone in the pipeline (iteration_parts.alone_seconds), on the grid: made when first read, as
        only single_stream_seconds reads it (rate searches never do)."""
        m, fmt, stages, per_layer, own, n, host_s_per_token, kernels = self._alone
        host_alone = host_s_per_token * np.maximum(n, 1.0)  # once per round for one sequence
        return alone_seconds(m, fmt, stages, per_layer, own, n, kernels) + host_alone


def layer_estimate(
    m: ModelArch,
    fmt: WeightFormat,
    kvb: float,
    dev: DeviceTable,
    tp: int,
    context: int,
    link: tuple[float | None, float],
    engine_layer_s: float,
    layout: ExchangeLayout | None = None,
    kernels: str | None = None,
) -> Callable[[Any, Any, float], Any]:
    """The estimator's seconds per block of a serving iteration as a function of (decoding
    sequences, prompt tokens, prompt length) on `tp` devices of `dev` whose all-reduces cross
    `link` (StageSpec.link_args), the engine's own `engine_layer_s` per block and the root's
    own work of a star `layout` (engine_topology.root_block_seconds) included: what a measured
    time per block stands for (planner.estimator.profiles), so a measured point is reproduced
    as measured and only estimated points carry the root's work. `kernels`: the engine's kernel
    family (Engine.kernels), which sets a llama.cpp-style pool's prefill rates
    (perf.prefill_layer_seconds)."""

    def layer(b: Any, q: Any, length: float) -> Any:
        return (
            root_block_seconds(layout, m, kvb, dev, b, context, tp)
            + serving_layer_seconds(
                m,
                fmt,
                kvb,
                dev,
                batch=b,
                context=context,
                prefill_tokens=q,
                prompt=length,
                tp=tp,
                serial=serial_engine(fmt),
                link_bytes_s=link[0],
                link_latency_s=link[1],
                kernels=kernels,
            )
            + engine_layer_s
        )

    return layer


def _with_extras(
    stages: list[StageSpec], own: list[_Floats], extras: list[float]
) -> tuple[list[_Floats], dict[tuple[int, int], _Floats]]:
    """Each stage's hop grid with its engine's extras (hop_extras), and the hop each kind of
    stage is charged (kind_hops), by (device id, degree)."""
    own = [h + e for h, e in zip(own, extras, strict=True)]
    kinds = ((id(x.device), x.tp) for x in stages)
    return own, dict(zip(kinds, kind_hops(stages, own), strict=True))


def sorted_distinct(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """np.unique(a) of a 1-d array, without its masked-array check: that check imports
    numpy.ma, a part of numpy nothing else in a solve loads (10-20 ms of a command's start-up)."""
    s = np.sort(a)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


@functools.lru_cache(maxsize=256)
def _grid(batch: int, budget: float, prompt: int) -> tuple[_Floats, _Floats, Any, Any]:
    """IterationTime's grid: decoding sequences (every count up to the batch when it is at
    most 64, else 65 even steps) and prompt tokens (fine where chunks of short prompts fall,
    even steps up to the budget), and their mesh. Shared, never written to."""
    n_grid = sorted_distinct(np.linspace(0, batch, min(batch, 64) + 1).round())
    p_grid = sorted_distinct(
        np.concatenate(
            [np.linspace(0.0, budget, 33), np.linspace(0.0, min(budget, 4 * prompt), 17)]
        )
    )
    n, p = np.meshgrid(n_grid, p_grid, indexing="ij")
    for a in (n_grid, p_grid, n, p):
        a.flags.writeable = False
    return n_grid, p_grid, n, p


@functools.lru_cache(maxsize=256)
def _grid_lists(batch: int, budget: float, prompt: int) -> tuple[list[float], list[float]]:
    """_grid's axes as lists, shared by the tables of one grid (never written to)."""
    n_grid, p_grid, _, _ = _grid(batch, budget, prompt)
    return n_grid.tolist(), p_grid.tolist()


def _layer_grid(
    m: ModelArch,
    fmt: WeightFormat,
    kvb: float,
    st: StageSpec,
    dev: DeviceTable,
    n: _Floats,
    p: _Floats,
    context: int,
    prompt: int,
    engine_layer_s: float,
    kernels: str = "",
) -> _Floats:
    """Seconds per block of stage `st` on the grid of `n` decoding sequences and `p` prompt
    tokens on `kernels` (Engine.kernels), the engine's own time per block included; scaled to the stage's
    measured profile (planner.estimator.profiles) where it has one."""
    link = st.link_args()
    layer = layer_estimate(
        m, fmt, kvb, dev, st.tp, context, link, engine_layer_s, st.layout, kernels
    )
    tau = layer(n.ravel(), p.ravel(), prompt).reshape(n.shape)
    if st.profile is None:
        return tau
    decode_only = layer(n.ravel(), np.zeros(n.size), prompt).reshape(n.shape)
    return profiled(st.profile, layer, n, p, decode_only, tau)


def _fullest(stages: list[StageSpec]) -> dict[tuple[int, int], StageSpec]:
    """Stages of one device and degree share their time per layer: the fullest one of them is
    their slowest (time grows with the layers), so each kind is computed once."""
    fullest: dict[tuple[int, int], StageSpec] = {}
    for st in stages:
        kind = (id(st.device), st.tp)
        if kind not in fullest or st.layers > fullest[kind].layers:
            fullest[kind] = st
    return fullest


def single_stream_seconds(it: IterationTime, prefill_tokens: float = 0.0) -> float:
    """Seconds per output token of one sequence with nothing else in flight: the sum of the
    stages' times at one decoding sequence (where S x the slowest stage assumes S micro-batches
    keep every stage busy). Interpolated on the grid's first row like IterationTime."""
    ys = it._ys
    row = it.alone[min(int(np.searchsorted(it.n_grid, 1.0)), len(it.n_grid) - 1)].tolist()
    y = min(max(prefill_tokens, ys[0]), ys[-1])
    j = min(bisect.bisect_right(ys, y) - 1, len(ys) - 2)
    b = (y - ys[j]) / (ys[j + 1] - ys[j])
    return float(row[j] * (1 - b) + row[j + 1] * b)
