"""Enumerate replica designs for each workload from estimator tables (no solver here).

Long because the vectorized enumeration (pipelines of one, two, three and four device types, the
best layer split and pruning) shares private column types that splitting would have to export.

Serving model (stated, and re-checked by the verifier): a workload runs R replicas, each a
pipeline of S stages; a stage is k devices of one type in tensor parallel (inside one node or
scale-up domain, or k machines of one device each whose all-reduces cross the network:
across_machine_degrees) holding a contiguous run of layers. Decode keeps S micro-batches of b sequences
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

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt

from planner.catalog import Catalog
from planner.estimator.confidence import CONFIDENCE, design_confidence, kept_share
from planner.estimator.cost import power_w
from planner.estimator.devices import DeviceTable, device_table
from planner.estimator.economics import available_modes, carbon_promise, peak_scale
from planner.estimator.engine_topology import (
    ExchangeLayout,
    exchange_layout,
    head_divisor,
    root_alone,
    root_block_seconds,
)
from planner.estimator.formats import kv_bytes, weight_format
from planner.estimator.hosts import (
    derates,
    holding_hosts,
    host_options,
    placeable,
    sustained,
    tp_limit,
)
from planner.estimator.memory import (
    FRAMEWORK_OVERHEAD_BYTES,
    block_weight_bytes,
    end_weight_bytes,
    inference_activation_bytes_per_token,
    sequence_bytes_per_layer,
    sequence_traffic_per_layer,
    weight_bytes,
)
from planner.estimator.perf import head_seconds, serving_layer_seconds
from planner.estimator.profiles import layer_profile, profiled_pair
from planner.estimator.replica import StageSpec, hop_bytes, layer_estimate, sorted_distinct
from planner.estimator.routes import (
    Route,
    group_link,
    hop_routes,
    kind_route,
    machine_link,
    machine_slots,
)
from planner.estimator.rpc_hop import rpc_hop_seconds
from planner.estimator.serving import chunk_mix, prefill_prompt, prefill_room, serial_engine
from planner.estimator.support import (
    Runtime,
    architecture_allowed,
    can_pipeline,
    engine_kernels,
    engine_times,
    exchange_overhead_s,
    runtime_for,
    tensor_parallel_refusal,
)
from planner.schema.catalog import Accelerator, Link, ModelArch
from planner.schema.model_params import split_heads
from planner.schema.problem import MAX_DEVICES, InferenceWorkload, Problem

# Sequences per micro-batch; memory and latency decide which fit (MLPerf systems run about
# 1,000 sequences per 8 GPUs, so the ladder reaches past that).
BATCH_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
HETERO_TOP = 6  # options per batch level paired into two-type pipelines ...
# ... and a top option none of the others drawn may share a replica with (an engine with one
# tensor-parallel size for every stage, the drawn options of the other types at other sizes)
# brings its HETERO_PARTNERS cheapest partners among the drawn types' options
HETERO_PARTNERS = 1
HETERO_MAX_STAGES = 4  # stages per type in a pipeline of two or more types
MIXED_TOP = 3  # owned options per batch level drawn into pipelines of three or more types ...
MIXED_SMALL = 1  # ... and owned options too small to serve alone


Role = Literal["both", "prefill", "decode"]


@dataclass(frozen=True)
class Stage:
    device: str
    tp: int
    layers: int
    # Derated: a consumer card sustained in a multi-card chassis (planner.estimator.hosts).
    dense: bool = False
    # The tensor-parallel group spans `tp` machines of one device each, its all-reduces over
    # the problem's network (across_machine_degrees); else it sits in one host.
    across_machines: bool = False

    @property
    def host_tp(self) -> int:
        """Devices of the group one host holds."""
        return 1 if self.across_machines else self.tp


@dataclass
class Design:
    """One replica (inference) or the whole job (training) and its figures. Never changed once
    made (dataclasses.replace makes a new one); not frozen because a frozen dataclass takes
    five times as long to make, and the largest problems make thousands per workload."""

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
    engine: str = ""  # serving engine every stage runs (inference; the support matrix's id)
    # Request mixes: `both` serves whole requests; with disaggregated serving a `prefill` replica
    # only computes prompts and a `decode` replica only decodes (planner.estimator.serving).
    role: Role = "both"

    @property
    def signature(self) -> tuple[str, ...]:
        return tuple(sorted(self.devices))


def stage_specs(cat: Catalog, problem: Problem, d: Design) -> list[StageSpec]:
    """A design's stages as the estimator takes them: derated devices where a stage assumed a
    multi-card chassis; a group across machines with the network's link and the engine's own
    time per exchange between machines; each stage's hop to the next over the route joining
    their machines (planner.estimator.routes)."""
    out = []
    derated: dict[str, Accelerator] = {}  # one derated copy per device (stages share it)
    w = next((x for x in problem.workloads if x.name == d.workload), None)
    hops = hop_routes(problem, cat, [s.device for s in d.stages], [s.tp for s in d.stages])
    for j, s in enumerate(d.stages):
        hop = hops[j] if hops else None
        acc = cat.accelerator(s.device)
        if s.dense:
            acc = derated.get(s.device) or derated.setdefault(s.device, sustained(acc, problem))
        profile = layer_profile(w, s.device, s.tp, cat, acc, d.engine)
        if s.across_machines:
            net = group_link(problem, cat, s.device)
            x = exchange_overhead_s(cat, d.engine, s.device)
            lay = exchange_layout(cat, d.engine, cat.model(w.model)) if w else None
            out.append(
                StageSpec(
                    acc, s.tp, s.layers, net, exchange_s=x, layout=lay, profile=profile, hop=hop
                )
            )
        else:
            out.append(StageSpec(acc, s.tp, s.layers, profile=profile, hop=hop))
    return out


def allowed_devices(problem: Problem, cat: Catalog) -> list[Accelerator]:
    """Devices the constraints allow, with a node to host them and a price for the procurement;
    under a carbon promise only those with an embodied-carbon figure (economics.carbon_promise)."""
    promised = carbon_promise(problem) is not None
    return [
        d for d in _placeable_devices(problem, cat) if not promised or d.embodied_kgco2e is not None
    ]


def carbon_unknown_left_out(problem: Problem, cat: Catalog) -> list[str]:
    """Devices the constraints would allow but a carbon promise leaves out: the catalog has no
    embodied-carbon figure for them."""
    if carbon_promise(problem) is None:
        return []
    return [d.id for d in _placeable_devices(problem, cat) if d.embodied_kgco2e is None]


def _placeable_devices(problem: Problem, cat: Catalog) -> list[Accelerator]:
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
        if not architecture_allowed(cat, d, c):
            continue
        modes = available_modes(problem, d, instances=cat.instances_of(d.id))
        if not modes and d.id not in owned:
            continue
        if not placeable(cat, d, problem, modes):
            continue
        out.append(d)
    return out


def tp_degrees(
    d: Accelerator, cat: Catalog, problem: Problem, m: ModelArch, dense: bool | None = None
) -> list[int]:
    """Tensor-parallel group sizes allowed for `d`: powers of two that one of its hosts holds
    (inside a scale-up domain, or a host's slots over PCIe where allowed) and that divide the
    attention heads. The model then puts `d` in a host that holds every group it uses.
    `dense` (where `d` derates): only hosts of that kind, multi-card (True) or one-card."""
    c = problem.constraints
    hosts = host_options(cat, d, problem)
    if dense is not None and derates(d, problem):
        hosts = [n for n in hosts if (n.slots > 1) == dense]
    if not hosts:
        return []
    limit = max(tp_limit(d, n, c) for n in hosts)
    return [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= limit and split_heads(m) % k == 0]


# The largest group across machines: published runs reach 8 (distributed-llama on eight
# Raspberry Pis); each all-reduce crosses the network twice per block, so larger groups only
# slow a token down.
MAX_ACROSS_MACHINES = 8


def across_machine_degrees(
    d: Accelerator, cat: Catalog, problem: Problem, m: ModelArch, engine: str
) -> list[int]:
    """Tensor-parallel group sizes of `d` across machines: where every host of `d` holds one
    device (a DGX Spark, a Mac: the device is the machine) so no group fits in one, and
    `engine` runs a group over machines (Engine.tensor_parallel_across_machines); powers of
    two up to `max_tensor_parallel` and MAX_ACROSS_MACHINES that divide the attention heads.
    Each machine holds one device of the group; its all-reduces cross `constraints.network`."""
    e = cat.engines.get(engine)
    if e is None or not e.tensor_parallel_across_machines:
        return []
    hosts = host_options(cat, d, problem)
    if not hosts or any(n.slots > 1 for n in hosts):
        return []
    limit = min(problem.constraints.max_tensor_parallel, MAX_ACROSS_MACHINES)
    return [k for k in (2, 4, 8) if k <= limit and split_heads(m) % k == 0]


@dataclass(frozen=True)
class _Option:
    device: Accelerator
    row: int
    tp: int
    dense: bool = False  # the derated copy of a consumer card, for a multi-card chassis
    across: bool = False  # a group of tp machines (across_machine_degrees) ...
    exchange_s: float = 0.0  # ... its engine's own time per exchange between them ...
    net: Link | None = None  # ... and the link joining them (routes.group_link) ...
    layout: ExchangeLayout | None = None  # ... in the engine release's layout (engine_topology)
    engine: str = ""  # the engine serving it (a llama.cpp-style pool prefills at its rates)


@dataclass(frozen=True)
class _Setting:
    """What every candidate design of one serving workload shares, as numpy columns.

    Options (a device type at a tensor-parallel degree) are ordered by degree, then by device:
    the order candidates are generated in, which breaks exact ties the same way every time.
    Per option o and batch level bi: `tau` seconds per layer per serving iteration (decodes and
    their steady-state prefill), `fixed` seconds per step (head, step overhead and the engine's
    host work per token),
    `cap[bi, S - 1, o]` the most layers one stage holds in an S-stage pipeline.
    """

    w: InferenceWorkload
    m: ModelArch
    opts: list[_Option]
    tp: npt.NDArray[np.int64]
    levels: npt.NDArray[np.int64]
    # [bi, p, q]: one pipeline hop from a machine of place p to one of place q, seconds
    # (planner.estimator.routes), in a decode-only iteration; place[o]: the place of option
    # o's device (its machine kind). `hop_c`: the same in an iteration with a prompt chunk,
    # whose tokens' hidden states cross too; `back`, `back_c`: the last stage's hop back to
    # the first, carrying the sampled token ids only (replica.hop_bytes).
    hop: npt.NDArray[np.float64]
    place: npt.NDArray[np.int64]
    hop_c: npt.NDArray[np.float64]
    back: npt.NDArray[np.float64]
    back_c: npt.NDArray[np.float64]
    # [bi, o]: the same four hops between two of option o's devices inside one machine, over
    # the machine's own link (routes.machine_link; inf where it has none); slots[o]: the group
    # sizes one machine of its device always holds whole (routes.machine_slots; a replica's n
    # devices of the type share one machine where n divides it); dev[o]: its device's index.
    inner: tuple[npt.NDArray[np.float64], ...]
    slots: npt.NDArray[np.int64]
    dev: npt.NDArray[np.int64]
    tau: npt.NDArray[np.float64]
    fixed: npt.NDArray[np.float64]
    chunks: npt.NDArray[np.float64]  # per level: iterations to the first token (closed load)
    tau_c: npt.NDArray[np.float64]  # [bi, o]: seconds per layer of an iteration with a chunk
    tau_d: npt.NDArray[np.float64]  # [bi, o]: seconds per layer of a decode-only iteration
    share: npt.NDArray[np.float64]  # per level: share f of iterations that carry a chunk
    cap: npt.NDArray[np.int64]
    w_layer: float  # weight bytes of one block
    kv_read: npt.NDArray[np.float64]  # [bi, o]: KV bytes one layer reads per step on one device
    bandwidth: npt.NDArray[np.float64]
    tdp_w: npt.NDArray[np.float64]
    idle_w: npt.NDArray[np.float64]
    floor: npt.NDArray[np.float64]
    price: npt.NDArray[np.float64]  # per option's device: purchase, or 10,000 h of rent
    runtimes: list[Runtime] = field(default_factory=list)  # per option: its engine and backend
    # Per option: the software time its engine adds to each pipeline hop (Engine.hop_overhead_us).
    hop_extra: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    # Per option: its engine's RPC protocol (planner.estimator.rpc_hop): seconds per round trip,
    # round trips per remote stage, whether each step re-sends the stage's graph.
    rpc_rt: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    rpc_n: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rpc_graph: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    # [p, q]: seconds per byte of the route from a machine of place p to one of place q (1 / its
    # slowest link's bandwidth), what a re-sent graph crosses (rpc_hop.remote_stage_seconds).
    byte_s: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    # Per option: its engine splits layers over pipeline stages (Engine.pipeline_parallel); an
    # option whose engine does not serves in replicas of one stage only.
    pipelines: npt.NDArray[np.bool_] = field(default_factory=lambda: np.ones(0, dtype=bool))


@dataclass
class _Columns:
    """Candidate designs as columns, one entry per candidate: what every kind shares."""

    order: npt.NDArray[np.int64]  # generation order (ties between identical designs)
    bi: npt.NDArray[np.int64]
    S: npt.NDArray[np.int64]
    tps: npt.NDArray[np.float64]
    ms: npt.NDArray[np.float64]
    ttft: npt.NDArray[np.float64]
    power: npt.NDArray[np.float64]

    def take(self, idx: npt.NDArray[np.int64] | npt.NDArray[np.bool_]) -> Self:
        return type(self)(**{k: v[idx] for k, v in vars(self).items()})


@dataclass
class _Candidates(_Columns):
    """Homogeneous pipelines have o2 = -1: S stages of option o1, the first S - 1 with n1
    layers. Two-type pipelines have s1 stages of o1 with n1 layers each, then s2 stages of o2
    sharing `rest` layers."""

    o1: npt.NDArray[np.int64]
    o2: npt.NDArray[np.int64]
    s1: npt.NDArray[np.int64]
    n1: npt.NDArray[np.int64]
    s2: npt.NDArray[np.int64]
    rest: npt.NDArray[np.int64]
    cnt1: npt.NDArray[np.int64]
    cnt2: npt.NDArray[np.int64]

    @staticmethod
    def concat(parts: list[_Candidates]) -> _Candidates:
        keys = vars(parts[0]).keys()
        return _Candidates(**{k: np.concatenate([vars(p)[k] for p in parts]) for k in keys})


# Generation order: batch level, then homogeneous before two-type, then the loops' own order.
_LEVEL_KEY = 1 << 40
_PHASE_KEY = 1 << 39


@dataclass
class PerDevice:
    """What the designs of every workload of one problem share, computed once: the derated
    copies of consumer cards, the hosts that hold a tensor-parallel group, and the device
    table of each set of devices (none depends on the workload; valid for one problem and
    catalog only)."""

    derated: dict[str, Accelerator] = field(default_factory=dict)
    hosts: dict[tuple[str, int, bool], tuple[str, ...]] = field(default_factory=dict)
    # By the devices' identities; the devices are kept with the table, so no id is reused.
    tables: dict[tuple[int, ...], tuple[list[Accelerator], DeviceTable]] = field(
        default_factory=dict
    )

    def table(self, devs: list[Accelerator], cat: Catalog) -> DeviceTable:
        key = tuple(id(d) for d in devs)
        got = self.tables.get(key)
        if got is None:
            got = self.tables[key] = (devs, device_table(devs, links=cat.links))
        return got[1]

    def derate(self, d: Accelerator, problem: Problem) -> Accelerator:
        got = self.derated.get(d.id)
        return got if got is not None else self.derated.setdefault(d.id, sustained(d, problem))

    def holding(
        self, cat: Catalog, problem: Problem, d: Accelerator, tp: int, dense: bool
    ) -> tuple[str, ...]:
        key = (d.id, tp, dense)
        got = self.hosts.get(key)
        if got is None:
            got = self.hosts[key] = holding_hosts(cat, problem, d, tp, dense)
        return got


def inference_designs(
    w: InferenceWorkload,
    problem: Problem,
    cat: Catalog,
    devs: list[Accelerator],
    *,
    prune: bool = True,
    for_mix: bool = False,
    shared: PerDevice | None = None,
) -> list[Design]:
    """Every replica design of `w` that meets its latency ceilings; with `prune`, only those no
    other design with the same device types beats in every respect (see _prune). `for_mix`:
    the designs serve a request mix, whose requests/s rise with tokens/s and fall with the time
    to first token while sequences in flight follow from the rate
    (planner.estimator.request_mix), so pruning compares the first-token time where it would
    compare sequences.

    Computed as numpy columns over all candidates at once; Design objects are made only for
    the designs returned. `shared`: figures of the same problem's other workloads to reuse.
    """
    shared = PerDevice() if shared is None else shared
    m = cat.model(w.model)
    c = problem.constraints
    runs = {d.id: runtime_for(cat, d, w, c) for d in devs}
    devs = [d for d in devs if runs[d.id] is not None]  # the support matrix runs it
    # Consumer cards twice: at full speed alone in a desktop, and derated in a multi-card
    # chassis (horizon.consumer_derating); the model puts each in hosts of its kind.
    options = []
    for i, d in enumerate(devs):
        engine = _runtime(runs, d.id).engine
        # Groups of two or more only where the engine's tensor-parallel mode runs the model on
        # this backend (support.tensor_parallel_refusal); else one device per stage.
        solo = tensor_parallel_refusal(cat, engine, _runtime(runs, d.id).backend, m) is not None
        chassis: tuple[bool | None, ...] = (False, True) if derates(d, problem) else (None,)
        for dense in chassis:
            if dense:
                devs = [*devs, shared.derate(d, problem)]
            row = len(devs) - 1 if dense else i
            options += [
                _Option(devs[row], row, k, bool(dense), engine=engine)
                for k in tp_degrees(d, cat, problem, m, dense)
                if k == 1 or not solo
            ]
        x, net = exchange_overhead_s(cat, engine, d.id), group_link(problem, cat, d.id)
        lay = exchange_layout(cat, engine, m)
        options += [
            _Option(d, i, k, across=True, exchange_s=x, net=net, layout=lay, engine=engine)
            for k in across_machine_degrees(d, cat, problem, m, engine)
        ]
    if not options:
        return []
    st = _setting(w, problem, cat, shared.table(devs, cat), m, sorted(options, key=lambda o: o.tp))
    st = _with_runtimes(st, cat, [_runtime(runs, o.device.id) for o in st.opts])
    if w.has_profiles:
        st = _with_profiles(st, cat, problem, shared.table(devs, cat))
    parts = [_homogeneous(st, c.max_stages)]
    pairs = _pairable(st, cat, problem) if c.heterogeneous_pipelines and len(devs) > 1 else None
    if pairs is not None:
        parts.append(_two_type(st, parts[0], c.max_stages, pairs))
    cand = _within_ceilings(w, _Candidates.concat(parts))
    if not prune:
        out = _materialize(st, cand, np.argsort(cand.order, kind="stable"))
    else:
        need, host_sets = _host_needs(st, cat, problem, shared)
        # holds[a, b]: every host of need rank b is also one of rank a.
        holds = np.array([[set(a) >= set(b) for b in host_sets] for a in host_sets], dtype=bool)
        # A design the calibration backs counts all its tokens/s, one it does not only
        # (1 - risk_margin): under a margin they compete only among their own kind.
        pair = np.stack([cand.o1, cand.o2], axis=1)
        calibrated = _backed(st, pair, cand.bi, cat, problem) if c.risk_margin > 0 else None
        most = _sequences_at_peak(w, problem)
        order = _pruned_order(st, cand, need, calibrated, for_mix=for_mix, holds=holds, most=most)
        out = _materialize(st, cand, order)
    if pairs is not None:
        out += _mixed_designs(
            st, cat, problem, parts[0], pairs, out, shared, prune=prune, for_mix=for_mix
        )
    return backed(out, cat, c.min_confidence)


def _sequences_at_peak(w: InferenceWorkload, problem: Problem) -> int | None:
    """The sequences that exist at the busiest period, where the workload states them."""
    if w.concurrency is None:
        return None
    return math.ceil(w.concurrency * peak_scale(problem) - 1e-9)


def _host_needs(
    st: _Setting, cat: Catalog, problem: Problem, shared: PerDevice
) -> tuple[npt.NDArray[np.int64], list[tuple[str, ...]]]:
    """Per option, the rank of the host set that holds its tensor-parallel group, and the host
    sets in rank order."""
    needs = [
        shared.holding(cat, problem, o.device, 1 if o.across else o.tp, o.dense) for o in st.opts
    ]
    host_sets = sorted(set(needs))
    rank = {k: i for i, k in enumerate(host_sets)}
    return np.array([rank[k] for k in needs], dtype=np.int64), host_sets


def _mixed_designs(
    st: _Setting,
    cat: Catalog,
    problem: Problem,
    homog: _Candidates,
    ok: npt.NDArray[np.bool_],
    fewer: list[Design],
    shared: PerDevice,
    *,
    prune: bool,
    for_mix: bool,
) -> list[Design]:
    """Pipelines of three and of four device types, where the problem owns at least that many
    of the types the workload may use (a pool of leftovers; where devices are bought, more of
    the best type serves): options of owned types at each batch level's top (_k_type), within
    the latency ceilings and the devices owned; with `prune`, those no other of the same types
    and hosts beats, nor one of fewer types kept (`fewer`, then the three-type designs kept,
    for four types: _beaten_by_fewer_types)."""
    c = problem.constraints
    owned_ids = {o.device for o in c.inventory}
    owned = np.array([o.device.id in owned_ids for o in st.opts], dtype=bool)
    kinds = len({o.device.id for o in st.opts if o.device.id in owned_ids})
    if kinds < 3:
        return []
    # A replica of several types runs on premises (a rented one has one type: model.variables),
    # so it holds no more of a type than is owned, unless the type can be bought.
    held: dict[str, int] = {}
    for inv in c.inventory:
        held[inv.device] = held.get(inv.device, 0) + inv.count
    buys = c.capex_usd != 0
    most_of = np.array(
        [
            MAX_DEVICES
            if buys and "buy" in available_modes(problem, o.device)
            else held.get(o.device.id, 0)
            for o in st.opts
        ],
        dtype=np.int64,
    )
    w = st.w
    most = _sequences_at_peak(w, problem)
    need, _ = _host_needs(st, cat, problem, shared)
    out: list[Design] = []
    for k in range(3, min(kinds, MIXED_TOP + MIXED_SMALL) + 1):
        mx = _k_type(st, homog, c.max_stages, ok, owned, k)
        mx = mx.take(_meets_ceilings(w, mx.ms, mx.ttft) & (mx.cnt <= most_of[mx.o]).all(axis=1))
        if not prune:
            out += _materialize_mixed(st, mx, np.argsort(mx.order, kind="stable"))
            continue
        calibrated = _backed(st, mx.o, mx.bi, cat, problem) if c.risk_margin > 0 else None
        made = _materialize_mixed(
            st, mx, _mixed_kept(st, mx, need, calibrated, for_mix=for_mix, most=most)
        )
        out += _unbeaten(made, fewer + out, cat, c.risk_margin, most, for_mix)
    return out


def _unbeaten(
    made: list[Design],
    fewer: list[Design],
    cat: Catalog,
    risk_margin: float,
    most: int | None,
    for_mix: bool,
) -> list[Design]:
    """The designs of `made` no design of `fewer` (fewer device types) beats; under a risk
    margin, designs compete among those of their own calibration backing."""
    backing = [
        risk_margin <= 0 or _backs(cat, risk_margin, tuple(sorted(d.devices)), d.engine, d.batch)
        for d in (*fewer, *made)
    ]
    gone: set[int] = set()
    for kind in (False, True):
        few = [d for d, b in zip(fewer, backing[: len(fewer)], strict=True) if b == kind]
        mine = [d for d, b in zip(made, backing[len(fewer) :], strict=True) if b == kind]
        beaten = _beaten_by_fewer_types(mine, few, most, for_mix)
        gone |= {id(d) for d, b in zip(mine, beaten, strict=True) if b}
    return [d for d in made if id(d) not in gone]


def _beaten_by_fewer_types(
    mixed: list[Design],
    others: list[Design],
    most: int | None,
    for_mix: bool,
) -> list[bool]:
    """Per design of `mixed`, whether a design of `others` (of fewer device types) beats it: no
    more of any device, each of its types at the same degree and chassis (so in the same
    hosts), no more power, at least the tokens/s and sequences it competes on (_competing: with a stated
    concurrency, those it can serve and no slower a token; for a request mix, no later a first
    token). Sound as _prune is: every replica of the beaten design can be swapped for one of
    the other without needing more of anything or serving less."""
    types = sorted({x for d in (*mixed, *others) for x in d.devices})
    col = {x: i for i, x in enumerate(types)}

    def figures(ds: list[Design]) -> tuple[npt.NDArray[np.float64], ...]:
        cnt = np.zeros((len(ds), len(types)))
        opt = np.full((len(ds), len(types)), -1.0)
        for i, d in enumerate(ds):
            for st in d.stages:
                opt[i, col[st.device]] = st.tp * 2 + st.dense
            for x, c in d.devices.items():
                cnt[i, col[x]] = c
        ms = np.array([d.ms_per_token for d in ds])
        conc = np.array([float(d.concurrency) for d in ds])
        tps = np.array([d.tokens_per_s for d in ds])
        if not for_mix and most is not None:
            conc = np.minimum(conc, most)
            tps = conc * 1000.0 / ms
        late = np.array([d.ttft_s for d in ds]) if for_mix else np.zeros(len(ds))
        slow = ms if not for_mix and most is not None else np.zeros(len(ds))
        return cnt, opt, np.array([d.power_w for d in ds]), -tps, -conc, late, slow

    if not mixed or not others:
        return [False] * len(mixed)
    c_o, o_o, *rest_o = figures(others)
    c_t, o_t, *rest_t = figures(mixed)
    out = []
    for i in range(len(mixed)):
        ok = (c_o <= c_t[i]).all(axis=1) & ((o_o == o_t[i]) | (o_o < 0)).all(axis=1)
        for a, b in zip(rest_o, rest_t, strict=True):
            ok &= a <= b[i]
        out.append(bool(ok.any()))
    return out


def _pairable(st: _Setting, cat: Catalog, problem: Problem) -> npt.NDArray[np.bool_]:
    """ok[a, b]: options a and b may share a replica: both engines pipeline, their stacks may
    pipeline together (per runtime and vendor kind), they are two device types (a card and its derated copy are one),
    and an engine with one tensor-parallel size for every stage runs both at one size."""
    kinds = [(r, o.device.vendor) for r, o in zip(st.runtimes, st.opts, strict=True)]
    uniq = list(dict.fromkeys(kinds))
    kind_of = np.array([uniq.index(k) for k in kinds], dtype=np.int64)
    c = problem.constraints
    fits = np.array(
        [[can_pipeline(cat, a, b, c, va == vb) for b, vb in uniq] for a, va in uniq],
        dtype=bool,
    )
    ok = fits[kind_of[:, None], kind_of[None, :]]
    ids = np.array([o.device.id for o in st.opts])
    ok &= ids[:, None] != ids[None, :]
    uniform = np.array([cat.engines[r.engine].uniform_tensor_parallel for r in st.runtimes])
    tps = np.array([o.tp for o in st.opts], dtype=np.int64)
    ok &= ~uniform[:, None] | (tps[:, None] == tps[None, :])
    # A group across machines serves in pipelines of its own type only (across_machine_degrees);
    # an engine that splits no layers over stages serves in no pipeline at all.
    inside = ~np.array([o.across for o in st.opts], dtype=bool) & st.pipelines
    ok &= inside[:, None] & inside[None, :]
    return np.asarray(ok, dtype=bool)


def backed(designs: list[Design], cat: Catalog, floor: str) -> list[Design]:
    """The designs whose calibration backing reaches `floor` (constraints.min_confidence)."""
    if floor == CONFIDENCE[-1]:
        return designs
    most = CONFIDENCE.index(floor)
    seen: dict[tuple[tuple[str, ...], str, int], bool] = {}
    out = []
    for d in designs:
        key = (tuple(sorted(d.devices)), d.engine, d.batch)
        if key not in seen:
            devs = [cat.accelerator(x) for x in key[0]]
            label = design_confidence(cat, devs, d.engine, d.batch).label
            seen[key] = CONFIDENCE.index(label) <= most
        if seen[key]:
            out.append(d)
    return out


def _backed(
    st: _Setting,
    options: npt.NDArray[np.int64],
    levels: npt.NDArray[np.int64],
    cat: Catalog,
    problem: Problem,
) -> npt.NDArray[np.int64]:
    """Per candidate (its options, a row of `options`, -1 for none; its batch level), 1 where
    its calibration backs its whole throughput (confidence `measured` or `interpolated`:
    planner.estimator.confidence.kept_share), else 0."""
    out = np.zeros(len(levels), dtype=np.int64)
    memo: dict[tuple[tuple[str, ...], str, int], int] = {}
    for i, (opts, bi) in enumerate(zip(options.tolist(), levels.tolist(), strict=True)):
        ids = tuple(sorted({st.opts[o].device.id for o in opts if o >= 0}))
        key = (ids, st.runtimes[opts[0]].engine, int(st.levels[bi]))
        if key not in memo:
            memo[key] = int(_backs(cat, problem.constraints.risk_margin, *key))
        out[i] = memo[key]
    return out


def _backs(cat: Catalog, margin: float, ids: tuple[str, ...], engine: str, batch: int) -> bool:
    """Whether the calibration backs the whole throughput of a replica of these device types
    (confidence `measured` or `interpolated`: planner.estimator.confidence.kept_share)."""
    label = design_confidence(cat, [cat.accelerator(x) for x in ids], engine, batch).label
    return kept_share(margin, label) == 1.0


def _runtime(runs: dict[str, Runtime | None], device: str) -> Runtime:
    r = runs[device]
    assert r is not None  # devices without a runtime were left out
    return r


def _setting(
    w: InferenceWorkload,
    problem: Problem,
    cat: Catalog,
    table: DeviceTable,
    m: ModelArch,
    opts: list[_Option],
) -> _Setting:
    """Long because every per-candidate column is computed once here, vectorized."""
    fmt = weight_format(w.weights)
    kvb = kv_bytes(w.kv)
    c = problem.constraints
    table.peak_flops(fmt)  # once per device, before the rows repeat per degree
    L = m.num_layers
    rows = np.array([o.row for o in opts], dtype=np.int64)
    tp = np.array([o.tp for o in opts], dtype=np.int64)
    sub = table.take(rows)
    # Every level, whatever the concurrency: a replica may hold fewer sequences than its slots
    # (its figures at a full batch are then conservative), and a smaller concurrency must
    # never lose a design a larger one has (the optimum is monotone in it; docs/serving.md).
    levels = np.array(BATCH_LEVELS, dtype=np.int64)
    P, out = prefill_prompt(w.prompt_tokens, w.prefix_cache_hit), w.output_tokens
    hops, place, byte_s = _hops(problem, cat, m, levels, opts, P, out)
    inner, slots, dev = _inner_hops(problem, cat, m, levels, opts, P, out)
    tau = np.empty((len(levels), len(opts)))
    fixed = np.empty((len(levels), len(opts)))
    serial = serial_engine(fmt)
    # A llama.cpp-style pool's prefill runs at its release's rates (Engine.kernels).
    kernels = tuple(engine_kernels(cat, o.engine) for o in opts)
    tau_c = np.empty((len(levels), len(opts)))
    tau_d = np.empty((len(levels), len(opts)))
    share = np.empty(len(levels))
    # Groups across machines all-reduce over the network: per degree and engine, one link
    # (StageSpec.link_args) and one call per level for all their devices.
    across: dict[tuple[int, float, str, ExchangeLayout | None], list[int]] = {}
    for j, o in enumerate(opts):
        if o.across:
            key = (o.tp, o.exchange_s, o.net.id if o.net else "", o.layout)
            across.setdefault(key, []).append(j)
    groups = [
        (
            np.array(js, dtype=np.int64),
            sub.take(js),
            StageSpec(opts[js[0]].device, k, 1, opts[js[0]].net, x, layout=lay).link_args(),
            k,
            lay,
        )
        for (k, x, _, lay), js in across.items()
    ]
    for bi, b in enumerate(levels.tolist()):
        # At capacity b / O requests start per iteration (Little's law): b x P / O prompt
        # tokens, in chunks of c in a share f of the iterations (serving.chunk_mix).
        chunk, f = chunk_mix(b, P, out, b * P / out)
        share[bi] = f
        tau_d[bi], tau_c[bi] = (
            serving_layer_seconds(
                m,
                fmt,
                kvb,
                sub,
                batch=b,
                context=w.context_tokens,
                prefill_tokens=p,
                prompt=P,
                tp=tp,
                serial=serial,
                kernels=kernels,
            )
            for p in (0.0, chunk)
        )
        tau[bi] = (1.0 - f) * tau_d[bi] + f * tau_c[bi]
        fixed[bi] = head_seconds(m, fmt, sub, b, kernels) / tp + sub.step_overhead_s
    # Every level at once: batches and chunks down the rows, the group's devices across.
    chunk_of = np.array([chunk_mix(b, P, out, b * P / out)[0] for b in levels.tolist()])
    for idx, part, (bw, lat), k, lay in groups:
        tau_d[:, idx], tau_c[:, idx] = (
            serving_layer_seconds(
                m,
                fmt,
                kvb,
                part,
                batch=levels[:, None].astype(np.float64),
                context=w.context_tokens,
                prefill_tokens=p,
                prompt=P,
                tp=k,
                serial=serial,
                link_bytes_s=bw,
                link_latency_s=lat,
                kernels=[kernels[j] for j in idx.tolist()],
            )
            for p in (np.zeros((len(levels), 1)), chunk_of[:, None])
        )
        # A release whose root works alone (engine_topology: the whole KV cache, the head).
        batches: Any = levels[:, None].astype(np.float64)  # head_seconds takes a grid too
        root = root_block_seconds(lay, m, kvb, part, batches, w.context_tokens, k)
        tau_d[:, idx], tau_c[:, idx] = tau_d[:, idx] + root, tau_c[:, idx] + root
        head_s = head_seconds(m, fmt, part, batches, [kernels[j] for j in idx.tolist()])
        head_s = head_s / head_divisor(lay, k)
        fixed[:, idx] = head_s + part.step_overhead_s
    tau[:] = (1.0 - share[:, None]) * tau_d + share[:, None] * tau_c
    chunks = np.array(
        [math.ceil(P / prefill_room(b, P, out)) for b in levels.tolist()], dtype=np.float64
    )

    # Layers one stage holds: (usable - fixed) // per-layer bytes, or 0 when nothing fits.
    # Fixed: framework overhead, the larger end (embedding or head; both on a lone stage) and
    # transient activations with fp32 logits. Per layer: weights / k + KV of every sequence in
    # flight / min(k, kv_heads). A star's root holds the ends and the KV cache whole.
    w_layer = block_weight_bytes(m, fmt) / L
    emb, head = end_weight_bytes(m, fmt)
    usable = table.usable_bytes(c.memory_headroom)[rows]
    if w.layer_times:  # a stated memory_gb caps what one device may fill (a desktop, an OS share)
        stated = {d: w.memory_cap_bytes(d) for d in {o.device.id for o in opts}}
        usable = np.minimum(usable, [stated[o.device.id] or math.inf for o in opts])
    # A star's root holds the ends and the whole KV cache alone (engine_topology.root_alone).
    # Per layer and sequence: its KV (and a hybrid model's recurrent state) on the fullest device.
    roots = [root_alone(o.layout, o.tp) for o in opts]
    seq_layer = np.array(
        [
            sequence_bytes_per_layer(m, kvb, w.context_tokens, o.tp, r)
            for o, r in zip(opts, roots, strict=True)
        ],
        dtype=np.float64,
    )
    # What it moves per step (the power model's busy bytes): a hybrid's state read and written.
    seq_moved = np.array(
        [
            sequence_traffic_per_layer(m, kvb, w.context_tokens, o.tp, r)
            for o, r in zip(opts, roots, strict=True)
        ],
        dtype=np.float64,
    )
    ends_div = np.array([head_divisor(o.layout, o.tp) for o in opts], dtype=np.int64)
    stages = np.arange(1, c.max_stages + 1, dtype=np.int64)
    seqs = levels[:, None] * stages[None, :]  # [bi, S - 1]
    tokens = np.maximum(seqs, np.minimum(2048, seqs * w.context_tokens))
    act = (
        tokens[:, :, None] * inference_activation_bytes_per_token(m, tp)
        + (seqs * m.vocab_size * 4)[:, :, None]
    )
    single_ends = weight_bytes(m, fmt) - block_weight_bytes(m, fmt)
    ends = np.where(stages == 1, single_ends, max(emb, head))[None, :, None]
    room = usable - FRAMEWORK_OVERHEAD_BYTES - ends / ends_div - act
    per_layer = w_layer / tp + seqs[:, :, None] * seq_layer
    cap = np.where(room > 0, np.floor_divide(room, per_layer), 0.0).astype(np.int64)
    price = np.where(
        np.isnan(sub.purchase_usd), sub.rent_usd_per_hour * 10000, sub.purchase_usd
    ).astype(np.float64)
    return _Setting(
        w=w,
        m=m,
        opts=opts,
        tp=tp,
        levels=levels,
        hop=hops[0],
        place=place,
        byte_s=byte_s,
        hop_c=hops[1],
        back=hops[2],
        back_c=hops[3],
        inner=inner,
        slots=slots,
        dev=dev,
        tau=tau,
        fixed=fixed,
        chunks=chunks,
        tau_c=tau_c,
        tau_d=tau_d,
        share=share,
        cap=cap,
        w_layer=w_layer,
        kv_read=levels[:, None] * seq_moved,
        bandwidth=sub.bandwidth_bytes_s,
        tdp_w=sub.tdp_w,
        idle_w=sub.idle_w,
        floor=sub.power_activity_floor,
        price=price,
    )


def _level_bytes(
    m: ModelArch, levels: npt.NDArray[np.int64], prompt: int, output: int
) -> tuple[npt.NDArray[np.float64], ...]:
    """Bytes one pipeline hop carries at each batch level (replica.hop_bytes): forward in a
    decode-only iteration, forward in one with the level's prompt chunk (serving.chunk_mix),
    and back from the last stage in each, in that order."""
    b = levels.astype(np.float64)
    chunk = np.array([chunk_mix(x, prompt, output, x * prompt / output)[0] for x in b.tolist()])
    (fd, bd), (fc, bc) = (hop_bytes(b, q, prompt, m.hidden_size) for q in (0.0 * b, chunk))
    return fd, fc, bd, bc


def _hops(
    problem: Problem,
    cat: Catalog,
    m: ModelArch,
    levels: npt.NDArray[np.int64],
    opts: list[_Option],
    prompt: int,
    output: int,
) -> tuple[list[npt.NDArray[np.float64]], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Seconds of one pipeline hop at each batch level between the places the options'
    devices sit (their stated machine kinds, planner.estimator.routes), [bi, p, q]: forward in
    a decode-only iteration and in one with the level's prompt chunk (serving.chunk_mix), and
    back from the last stage in each (replica.hop_bytes); each option's place; and [p, q] the
    route's seconds per byte (1 / its bandwidth)."""
    kinds = [problem.machine_of(o.device.id) for o in opts]
    names = list(dict.fromkeys(k.id if k is not None else "" for k in kinds))
    place = np.array([names.index(k.id if k is not None else "") for k in kinds], dtype=np.int64)
    of = {k.id if k is not None else "": k for k in kinds}
    fd, fc, bd, bc = _level_bytes(m, levels, prompt, output)
    out = [np.empty((len(levels), len(names), len(names))) for _ in range(4)]
    byte_s = np.zeros((len(names), len(names)))
    for p, a in enumerate(names):
        for q, z in enumerate(names):
            r = kind_route(problem, cat, of[a], of[z])
            for grid, nbytes in zip(out, (fd, fc, bd, bc), strict=True):
                grid[:, p, q] = r.seconds(nbytes)
            byte_s[p, q] = 1.0 / r.bandwidth_bytes_s if r.bandwidth_bytes_s > 0 else 0.0
    return out, place, byte_s


def _inner_hops(
    problem: Problem,
    cat: Catalog,
    m: ModelArch,
    levels: npt.NDArray[np.int64],
    opts: list[_Option],
    prompt: int,
    output: int,
) -> tuple[tuple[npt.NDArray[np.float64], ...], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """_hops between two devices of one option inside one machine, [bi, o] (inf where its
    device never shares one), with each option's machine_slots and device index."""
    ids = list(dict.fromkeys(o.device.id for o in opts))
    dev = np.array([ids.index(o.device.id) for o in opts], dtype=np.int64)
    whole = [machine_slots(problem, cat, d) for d in ids]
    # The link, whatever the count that shares it (a machine full of them shares it too).
    links = [
        machine_link(problem, cat, d, g) if g >= 2 else None
        for d, g in zip(ids, whole, strict=True)
    ]
    slots = np.array(whole, dtype=np.int64)[dev]
    fd, fc, bd, bc = _level_bytes(m, levels, prompt, output)
    out = tuple(np.full((len(levels), len(opts)), np.inf) for _ in range(4))
    for o, i in enumerate(dev.tolist()):
        lk = links[i]
        if lk is None:
            continue
        for grid, nbytes in zip(out, (fd, fc, bd, bc), strict=True):
            grid[:, o] = Route((lk,)).seconds(nbytes)
    return out, np.where([links[i] is not None for i in dev.tolist()], slots, 0), dev


def _inside(
    st: _Setting, o: npt.NDArray[np.int64], n: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Whether a replica's `n` devices of option `o`'s device share one machine (n divides
    the option's machine_slots)."""
    g = st.slots[o]
    return np.asarray((n >= 2) & (g > 0) & (g % np.maximum(n, 1) == 0))


def _pair_hops(
    st: _Setting,
    bi: npt.NDArray[np.int64],
    o1: npt.NDArray[np.int64],
    o2: npt.NDArray[np.int64],
    s1: npt.NDArray[np.int64],
    s2: npt.NDArray[np.int64],
    chunk: bool = False,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The hop each kind of a two-type pipeline is charged (replica.kind_hops) in a decode-only
    iteration (with a prompt chunk: `chunk`): the slowest leaving one of its stages, to its own
    kind (when it has two stages or more) or to the other (o1's last stage to o2's first, o2's
    last back to o1's first, its sampled token ids only)."""
    fwd, back = (st.hop_c, st.back_c) if chunk else (st.hop, st.back)
    ifwd, iback = (st.inner[1], st.inner[3]) if chunk else (st.inner[0], st.inner[2])
    p1, p2 = st.place[o1], st.place[o2]
    same, in1, in2, folded = _pair_inside(st, o1, o2, s1, s2)
    # Where some hop is inside a machine, each hop between machines carries the engine's own
    # time (replica.hop_extras) and the caller adds none after.
    own = np.maximum(st.hop_extra[o1], st.hop_extra[o2]) + _pair_rpc(st, o1, o2, s1, s2)
    x = np.where(folded, own, 0.0)
    h11 = np.where(s1 > 1, np.where(in1, ifwd[bi, o1], fwd[bi, p1, p1] + x), 0.0)
    h22 = np.where(s2 > 1, np.where(in2, ifwd[bi, o2], fwd[bi, p2, p2] + x), 0.0)
    cross = np.where(same & in1, ifwd[bi, o1], fwd[bi, p1, p2] + x)
    home = np.where(same & in2, iback[bi, o2], back[bi, p2, p1] + x)
    return np.maximum(h11, cross), np.maximum(h22, home)


def _pair_inside(
    st: _Setting,
    o1: npt.NDArray[np.int64],
    o2: npt.NDArray[np.int64],
    s1: npt.NDArray[np.int64],
    s2: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.bool_], ...]:
    """(o1 and o2 of one device type, o1's devices share one machine, o2's do, some hop is
    inside a machine) for a two-type pipeline: each kind counts its type's devices, both
    kinds' where they are of one type."""
    same = st.dev[o1] == st.dev[o2]
    n1 = s1 * st.tp[o1] + np.where(same, s2 * st.tp[o2], 0)
    n2 = s2 * st.tp[o2] + np.where(same, s1 * st.tp[o1], 0)
    in1, in2 = _inside(st, o1, n1), _inside(st, o2, n2)
    folded = ((s1 > 1) & in1) | ((s2 > 1) & in2) | (same & in1)
    return same, in1, in2, folded


def _pair_extra(
    st: _Setting,
    o1: npt.NDArray[np.int64],
    o2: npt.NDArray[np.int64],
    s1: npt.NDArray[np.int64],
    s2: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """The engine's time per hop added after a two-type pipeline's slowest stage: none where
    _pair_hops carried it with each hop between machines."""
    hop = np.maximum(st.hop_extra[o1], st.hop_extra[o2]) + _pair_rpc(st, o1, o2, s1, s2)
    return np.asarray(np.where(_pair_inside(st, o1, o2, s1, s2)[3], 0.0, hop), dtype=np.float64)


def _rpc_hop(
    st: _Setting, o: npt.NDArray[np.int64], machines: npt.NDArray[Any], byte_s: npt.NDArray[Any]
) -> npt.NDArray[np.float64]:
    """The RPC time option o's engine adds to each hop between machines of a pipeline over
    `machines` machines, its layers shared evenly, its graph over routes of `byte_s` seconds
    per byte (replica.hop_extras, rpc_hop.rpc_hop_seconds); 0 without an RPC backend."""
    if not st.rpc_n.size:
        return np.zeros(np.broadcast(o, machines, byte_s).shape)
    m = np.asarray(machines, dtype=np.float64)
    layers = st.m.num_layers / np.maximum(m, 1.0)
    return rpc_hop_seconds(st.rpc_rt[o], st.rpc_n[o], st.rpc_graph[o], layers, byte_s, m)


def _pair_rpc(
    st: _Setting,
    o1: npt.NDArray[np.int64],
    o2: npt.NDArray[np.int64],
    s1: npt.NDArray[np.int64],
    s2: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """A two-type pipeline's RPC time per hop between machines (_rpc_hop, the larger of the two
    options' engines): over as many machines as it has hops between machines, its graph over
    the slowest of those hops' routes (replica.hop_extras)."""
    same, in1, in2, _ = _pair_inside(st, o1, o2, s1, s2)
    p1, p2 = st.place[o1], st.place[o2]
    hops = (  # each hop's count between machines and its route
        ((s1 - 1) * ~in1, st.byte_s[p1, p1]),
        ((s2 - 1) * ~in2, st.byte_s[p2, p2]),
        (~(same & in1), st.byte_s[p1, p2]),
        (~(same & in2), st.byte_s[p2, p1]),
    )
    machines = np.sum([n.astype(np.int64) for n, _ in hops], axis=0)
    byte_s = np.max([np.where(n > 0, b, 0.0) for n, b in hops], axis=0)
    return np.maximum(_rpc_hop(st, o1, machines, byte_s), _rpc_hop(st, o2, machines, byte_s))


def _kind_rpc(
    st: _Setting, o: npt.NDArray[np.int64], s: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """[n]: a pipeline of kinds' RPC time per hop between machines (_pair_rpc, for k kinds)."""
    inside, same, _ = _kind_inside(st, o, s)
    p = st.place[o]
    nxt = np.roll(p, -1, axis=1)
    own, on = (s - 1) * ~inside, (~same).astype(np.int64)
    machines = (own + on).sum(axis=1)
    byte_s = np.maximum(
        np.where(own > 0, st.byte_s[p, p], 0.0).max(axis=1),
        np.where(on > 0, st.byte_s[p, nxt], 0.0).max(axis=1),
    )
    return np.asarray(_rpc_hop(st, o, machines[:, None], byte_s[:, None]).max(axis=1))


def _mean_pair_hops(
    st: _Setting,
    bi: npt.NDArray[np.int64],
    o1: npt.NDArray[np.int64],
    o2: npt.NDArray[np.int64],
    s1: npt.NDArray[np.int64],
    s2: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """_pair_hops over the mean iteration (a share of them carry a chunk), what the layers are
    split on, with the stages' mean times."""
    f = st.share[bi]
    (d1, d2), (c1, c2) = (_pair_hops(st, bi, o1, o2, s1, s2, x) for x in (False, True))
    return (1.0 - f) * d1 + f * c1, (1.0 - f) * d2 + f * c2


def _kind_hops(
    st: _Setting,
    bi: npt.NDArray[np.int64],
    o: npt.NDArray[np.int64],
    s: npt.NDArray[np.int64],
    chunk: bool | None = None,
) -> npt.NDArray[np.float64]:
    """[n, k]: the hop each kind of a k-type pipeline (kinds `o` in stage order, `s` stages
    each) is charged (replica.kind_hops) in a decode-only iteration (`chunk` True: one with a
    prompt chunk; None: their mean, what the layers are split on): the slowest leaving one of
    its stages, to its own kind (with two stages or more) or to the next kind's first (the
    last kind's back to the first's, its sampled token ids only)."""
    if chunk is None:
        f = st.share[bi][:, None]
        return (1.0 - f) * _kind_hops(st, bi, o, s, False) + f * _kind_hops(st, bi, o, s, True)
    fwd, back = (st.hop_c, st.back_c) if chunk else (st.hop, st.back)
    ifwd, iback = (st.inner[1], st.inner[3]) if chunk else (st.inner[0], st.inner[2])
    p = st.place[o]
    nxt = np.roll(p, -1, axis=1)
    lv = bi[:, None]
    inside, same, folded = _kind_inside(st, o, s)
    # Where some hop is inside a machine, each hop between machines carries the engine's own
    # time (replica.hop_extras) and the caller adds none after (_kind_extra).
    x = np.where(folded, st.hop_extra[o].max(axis=1) + _kind_rpc(st, o, s), 0.0)[:, None]
    own = np.where(s > 1, np.where(inside, ifwd[lv, o], fwd[lv, p, p] + x), 0.0)
    on = np.where(same, ifwd[lv, o], fwd[lv, p, nxt] + x)
    last = back[bi, p[:, -1], nxt[:, -1]] + x[:, 0]
    on[:, -1] = np.where(same[:, -1], iback[bi, o[:, -1]], last)
    return np.asarray(np.maximum(own, on), dtype=np.float64)


def _kind_inside(
    st: _Setting, o: npt.NDArray[np.int64], s: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.bool_], ...]:
    """[n, k]: each kind's devices of its type (every kind of that type counts) share one
    machine; the hop from the kind to the next is inside it (one type, sharing); and [n]: some
    hop of the pipeline is."""
    dv = st.dev[o]
    n = ((dv[:, :, None] == dv[:, None, :]) * (s * st.tp[o])[:, None, :]).sum(axis=2)
    inside = _inside(st, o, n)
    same = inside & (dv == np.roll(dv, -1, axis=1))
    folded = ((s > 1) & inside).any(axis=1) | same.any(axis=1)
    return inside, same, folded


def _activity(
    stage_bytes: npt.NDArray[np.float64],
    bandwidth: npt.NDArray[np.float64],
    stage_t: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Share of the step the stage's memory is busy (stage_t > 0 always)."""
    return np.minimum(1.0, stage_bytes / bandwidth / stage_t)


def _homogeneous(st: _Setting, max_stages: int) -> _Candidates:
    """S identical stages of one option, layers ceil(L / S) each (the last takes the rest):
    every batch level, depth and option at once."""
    L = st.m.num_layers
    no = st.tau.shape[1]
    S = np.arange(1, max_stages + 1, dtype=np.int64)
    layers = np.array([math.ceil(L / s) for s in S.tolist()], dtype=np.int64)
    valid = (
        (st.cap > 0)
        & (layers[None, :, None] <= st.cap)
        & ~((S > 1) & ((S - 1) * layers >= L))[None, :, None]
        & ~((S > 1)[:, None] & ~st.pipelines[None, :])[None, :, :]  # one stage without pipelines
    )
    lay = layers[None, :, None]
    # [bi, S - 1, o]: the link's hop and the engine's own time per hop, to the next machine of
    # the option's kind (the slowest of the forward hops and the last's back, replica.kind_hops);
    # where the replica's S x tp devices share one machine (routes.machine_link), over its own
    # link and with no engine time (replica.hop_extras).
    opt = np.arange(no, dtype=np.int64)
    inside = _inside(st, opt[None, :], S[:, None] * st.tp[None, :])[None, :, :]
    rpc = _rpc_hop(st, opt[None, None, :], S[None, :, None], st.byte_s[st.place, st.place])
    hop_d, hop_c = (
        np.where(
            S[None, :, None] > 1,
            np.where(
                inside,
                np.maximum(ifwd, iback)[:, None, :],
                np.maximum(fwd[:, st.place, st.place], back[:, st.place, st.place])[:, None, :],
            )
            + np.where(inside, 0.0, st.hop_extra[None, None, :] + rpc),
            0.0,
        )
        for fwd, back, ifwd, iback in (
            (st.hop, st.back, st.inner[0], st.inner[2]),
            (st.hop_c, st.back_c, st.inner[1], st.inner[3]),
        )
    )
    f = st.share[:, None, None]
    T = lay * st.tau[:, None, :] + st.fixed[:, None, :] + (1.0 - f) * hop_d + f * hop_c
    # Every stage draws power and prefills for its own layers: S - 1 of `lay`, the last the rest.
    last = (L - (S - 1) * layers)[None, :, None]
    per_byte = st.w_layer / st.tp + st.kv_read[:, None, :]
    full = power_w(st.tdp_w, st.idle_w, _activity(lay * per_byte, st.bandwidth, T), st.floor)
    tail = power_w(st.tdp_w, st.idle_w, _activity(last * per_byte, st.bandwidth, T), st.floor)
    watts = ((S - 1)[None, :, None] * full + tail) / S[None, :, None]  # mean per device
    n_dev = S[None, :, None] * st.tp
    T_c = lay * st.tau_c[:, None, :] + st.fixed[:, None, :] + hop_c
    Sf = S[None, :, None]
    ttft = 0.5 * Sf * T + st.chunks[:, None, None] * Sf * T_c  # serving.closed_ttft
    b = st.levels[:, None, None]
    Sg = S[None, :, None]
    bi_g, si_g, o_g = np.nonzero(valid)  # C order: level, depth, option = generation order
    idx = (bi_g, si_g, o_g)
    Tv = T[idx]
    S_v = S[si_g]
    return _Candidates(
        order=bi_g * _LEVEL_KEY + si_g * no + o_g,
        bi=bi_g,
        S=S_v,
        o1=o_g,
        o2=np.full(len(o_g), -1, dtype=np.int64),
        s1=S_v,
        n1=layers[si_g],
        s2=np.zeros(len(o_g), dtype=np.int64),
        rest=np.zeros(len(o_g), dtype=np.int64),
        tps=np.broadcast_to(b, T.shape)[idx] / Tv,
        ms=np.broadcast_to(Sg, T.shape)[idx] * Tv * 1e3,
        ttft=ttft[idx],
        power=(watts * n_dev)[idx],
        cnt1=np.broadcast_to(n_dev, T.shape)[idx],
        cnt2=np.zeros(len(o_g), dtype=np.int64),
    )


def _ceil_div(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return -((-a) // b)


def _cheapest_alone(
    st: _Setting, homog: _Candidates
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """best[bi, o]: price per token/s of option o's best homogeneous design at batch level bi
    (inf where it has none); present[bi, o]: whether it has one (serves alone there)."""
    nb, no = st.tau.shape
    value = st.price[homog.o1] * homog.cnt1 / homog.tps
    best = np.full((nb, no), math.inf)
    np.minimum.at(best, (homog.bi, homog.o1), np.where(np.isnan(value), math.inf, value))
    present = np.zeros((nb, no), dtype=bool)
    present[homog.bi, homog.o1] = True
    return best, present


def _round(
    st: _Setting,
    bi: npt.NDArray[np.int64],
    S: npt.NDArray[np.int64],
    T_d: npt.NDArray[np.float64],
    T_c: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """A pipeline of several device types at batch level `bi`, from its round without and with
    a prompt chunk (T_d, T_c: its slowest stage's iteration plus the hops): the mean round (a
    share of the iterations carry a chunk) and the first token without a queue, half a mean
    pass through the S stages and then the prompt's chunks (serving.closed_ttft)."""
    T = (1.0 - st.share[bi]) * T_d + st.share[bi] * T_c
    return T, 0.5 * S * T + st.chunks[bi] * S * T_c


def _stage_power(
    st: _Setting,
    bi: npt.NDArray[np.int64],
    T: npt.NDArray[np.float64],
    kinds: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]],
) -> npt.NDArray[np.float64]:
    """Watts of a pipeline's devices at load: per kind of stage (option, layers, stages), each
    stage drawing power for its own layers' memory traffic over the step time T."""
    watts = np.zeros(len(bi))
    for o, lay, cnt in kinds:
        act = _activity(lay * (st.w_layer / st.tp[o] + st.kv_read[bi, o]), st.bandwidth[o], T)
        watts = watts + power_w(st.tdp_w[o], st.idle_w[o], act, st.floor[o]) * cnt * st.tp[o]
    return watts


def _two_type(
    st: _Setting, homog: _Candidates, max_stages: int, pair_ok: npt.NDArray[np.bool_]
) -> _Candidates:
    """Pipelines mixing two option types: s1 stages of o1 then s2 of o2, layers balanced to
    minimize the slowest stage (the first best layer count per o1 stage), every level at once.

    At each batch level the options paired are the HETERO_TOP cheapest per token/s of their
    best homogeneous design at that level, up to HETERO_TOP options too small to serve alone
    (exactly the ones pooling helps), and for a top option that none of those may pipeline
    with (_pairable: say the others drawn of its stack run other tensor-parallel sizes), its
    HETERO_PARTNERS cheapest partners among the options of the device types drawn.

    Long because the vectorized pairing, split and figures share their index arrays.
    """
    L = st.m.num_layers
    nb = st.tau.shape[0]
    best, present = _cheapest_alone(st, homog)
    # Groups across machines are not paired (_pairable), so they draw no place either.
    inside = ~np.array([o.across for o in st.opts], dtype=bool)
    ranked = np.argsort(np.where(present, best, math.inf), axis=1, kind="stable")
    width = (2 + HETERO_PARTNERS) * HETERO_TOP
    pool = np.full((nb, width), -1, dtype=np.int64)
    dev_of = np.array([o.row for o in st.opts], dtype=np.int64)
    for lv in range(nb):
        order = ranked[lv][inside[ranked[lv]]]
        top = order[:HETERO_TOP].tolist()
        small = np.flatnonzero(~present[lv] & inside)[:HETERO_TOP].tolist()
        drawn = top + small
        # Options of the device types drawn, at every tensor-parallel size they serve alone.
        alone = order[present[lv, order]]
        alone = alone[np.isin(dev_of[alone], dev_of[drawn])]
        lonely = [o for o in top if present[lv, o] and not pair_ok[o, drawn].any()]
        mates = [alone[pair_ok[o, alone]][:HETERO_PARTNERS].tolist() for o in lonely]
        uniq = list(dict.fromkeys(drawn + [x for m in mates for x in m]))
        pool[lv, : len(uniq)] = uniq
    # Every (level, o1, o2) of two device types, then every (s1, s2) within max_stages, in
    # loop order; kept where both stage kinds hold layers and together hold the model.
    p1, p2 = pool[:, :, None], pool[:, None, :]
    ok = (p1 >= 0) & (p2 >= 0) & (dev_of[p1] != dev_of[p2])
    ok &= pair_ok[np.maximum(p1, 0), np.maximum(p2, 0)]  # one engine, one stack unless it spans
    bi, ai, ci = np.nonzero(ok)
    o1, o2 = pool[bi, ai][:, None], pool[bi, ci][:, None]
    s1, s2 = (
        x.ravel()
        for x in np.meshgrid(
            np.arange(1, HETERO_MAX_STAGES + 1), np.arange(1, HETERO_MAX_STAGES + 1), indexing="ij"
        )
    )
    fits = max_stages >= s1 + s2
    s1, s2 = s1[fits][None, :], s2[fits][None, :]
    S = s1 + s2
    lvl = bi[:, None]
    cap1, cap2 = st.cap[lvl, S - 1, o1], st.cap[lvl, S - 1, o2]
    # Layers per o1 stage l in [lo, hi]: o2 stages then hold ceil((L - s1 l) / s2) in [1, cap2].
    lo = np.maximum(1, _ceil_div(L - s2 * cap2, s1))
    hi = np.minimum(np.minimum(cap1, L), (L - 1) // s1)
    t, k = np.nonzero((cap1 > 0) & (cap2 > 0) & (s1 * cap1 + s2 * cap2 >= L) & (lo <= hi))
    lo, hi = lo[t, k], hi[t, k]
    order = ((ai[t] * width + ci[t]) * HETERO_MAX_STAGES + s1[0, k] - 1) * HETERO_MAX_STAGES
    order += s2[0, k] - 1
    bi, o1, o2, s1, s2 = bi[t], o1[t, 0], o2[t, 0], s1[0, k], s2[0, k]
    S = s1 + s2
    h1, h2 = _mean_pair_hops(st, bi, o1, o2, s1, s2)  # each kind's hops, with its work
    a1, f1 = st.tau[bi, o1], st.fixed[bi, o1] + h1
    a2, f2 = st.tau[bi, o2], st.fixed[bi, o2] + h2
    hop = _pair_extra(st, o1, o2, s1, s2)
    n1 = _best_split(lo, hi, a1, f1, a2, f2, hop, L, s1, s2)
    for i in np.flatnonzero(n1 < 0).tolist():  # a rounding tie: settle it by the full scan
        n1[i] = _best_split_exhaustive(
            int(st.cap[bi[i], S[i] - 1, o1[i]]),
            int(st.cap[bi[i], S[i] - 1, o2[i]]),
            L,
            int(s1[i]),
            int(s2[i]),
            (float(a1[i]), float(f1[i])),
            (float(a2[i]), float(f2[i])),
            float(hop[i]),
        )
    rest = L - s1 * n1
    keep = rest // s2 >= 1
    bi, o1, o2, s1, s2, S, order, n1, rest = (
        x[keep] for x in (bi, o1, o2, s1, s2, S, order, n1, rest)
    )
    (d1, d2), (c1, c2) = (_pair_hops(st, bi, o1, o2, s1, s2, x) for x in (False, True))
    f1, f2 = st.fixed[bi, o1], st.fixed[bi, o2]
    hop = _pair_extra(st, o1, o2, s1, s2)
    q, r = rest // s2, rest % s2
    top = q + (r > 0)  # layers of the fullest o2 stage
    # The layers are split on the stages' mean times; a round takes its slowest stage, which
    # may be the other kind in iterations with a chunk, so the mean round is the mean of the
    # two kinds of iteration's slowest stage (replica.pipeline_round), not the slowest mean.
    T_c = np.maximum(n1 * st.tau_c[bi, o1] + f1 + c1, top * st.tau_c[bi, o2] + f2 + c2) + hop
    T_d = np.maximum(n1 * st.tau_d[bi, o1] + f1 + d1, top * st.tau_d[bi, o2] + f2 + d2) + hop
    T, ttft = _round(st, bi, S, T_d, T_c)
    # Every stage draws power for its own layers: s1 of n1, r of q + 1 and s2 - r of q.
    watts = _stage_power(st, bi, T, [(o1, n1, s1), (o2, q + 1, r), (o2, q, s2 - r)])
    return _Candidates(
        order=bi * _LEVEL_KEY + _PHASE_KEY + order,
        bi=bi,
        S=S,
        o1=o1,
        o2=o2,
        s1=s1,
        n1=n1,
        s2=s2,
        rest=rest,
        tps=st.levels[bi] / T,
        ms=S * T * 1e3,
        ttft=ttft,
        power=watts,
        cnt1=s1 * st.tp[o1],
        cnt2=s2 * st.tp[o2],
    )


_ALL = slice(None)


def _best_split(
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    a1: npt.NDArray[np.float64],
    f1: npt.NDArray[np.float64],
    a2: npt.NDArray[np.float64],
    f2: npt.NDArray[np.float64],
    hop: npt.NDArray[np.float64],
    L: int,
    s1: npt.NDArray[np.int64],
    s2: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Per pairing, the first l in [lo, hi] minimizing T(l) = max(t1(l), t2(l2(l))) + hop, as an
    exhaustive scan would pick it; -1 where a tie leaves that to the exhaustive scan. Here
    t1(l) = l a1 + f1 is an o1 stage of l layers, l2(l) = ceil((L - s1 l) / s2) the layers of the
    fullest o2 stage and t2(k) = k a2 + f2 its time.

    t1 grows with l and t2(l2(l)) does not, so T falls while the o2 stages are the slowest and
    rises after. Find the first l where the o1 stage binds (from where the straight lines
    cross, bisecting where that guess is off), then compare it with the step before, whose whole
    run of equal l2 ties with it.
    """

    def t1(lay: npt.NDArray[np.int64], at: slice | npt.NDArray[np.int64] = _ALL) -> Any:
        return lay * a1[at] + f1[at]

    def l2(lay: npt.NDArray[np.int64], at: slice | npt.NDArray[np.int64] = _ALL) -> Any:
        return _ceil_div(np.maximum(L - s1[at] * lay, 0), s2[at])

    def t2(k: npt.NDArray[np.int64], at: slice | npt.NDArray[np.int64] = _ALL) -> Any:
        return k * a2[at] + f2[at]

    def binds(lay: npt.NDArray[np.int64], at: slice | npt.NDArray[np.int64] = _ALL) -> Any:
        return t1(lay, at) >= t2(l2(lay, at), at)

    # First binding l in [lo, hi + 1] (hi + 1: never). Guess: where the lines cross.
    cross = np.ceil((f2 - f1 + a2 * L / s2) / (a1 + a2 * s1 / s2))
    guess = np.clip(np.nan_to_num(cross, nan=0.0, posinf=0.0, neginf=0.0), lo, hi + 1)
    guess = guess.astype(np.int64)
    right_ok = (guess > hi) | binds(np.minimum(guess, hi))
    left_ok = (guess == lo) | ~binds(np.maximum(guess - 1, lo))
    first_bind = guess
    off = np.flatnonzero(~(right_ok & left_ok))
    if len(off):
        a, z = lo[off].copy(), hi[off] + 1
        while True:
            active = a < z
            if not active.any():
                break
            mid = (a + z) // 2
            b = binds(np.minimum(mid, hi[off]), off) & (mid <= hi[off])
            z = np.where(active & b, mid, z)
            a = np.where(active & ~b, mid + 1, a)
        first_bind[off] = a
    a = first_bind
    has_left, has_right = a - 1 >= lo, a <= hi
    left = np.where(has_left, a - 1, lo)
    right = np.where(has_right, a, hi)
    t_left = np.maximum(t1(left), t2(l2(left))) + hop
    t_right = np.maximum(t1(right), t2(l2(right))) + hop
    go_left = has_left & (~has_right | (t_left <= t_right))
    k = l2(left)
    first = np.maximum(lo, _ceil_div(L - s2 * k, s1))  # the first l whose o2 stages hold k
    tie = go_left & (t2(k + 1) + hop == t_left)  # a longer o2 stage as fast: rounding tie
    return np.where(tie, -1, np.where(go_left, first, right))


def _best_split_exhaustive(
    cap1: int,
    cap2: int,
    L: int,
    s1: int,
    s2: int,
    t1: tuple[float, float],
    t2: tuple[float, float],
    hop: float,
) -> int:
    """The scan _best_split stands for: every l from 1 to cap1, the first best."""
    l1 = np.arange(1, min(cap1, L) + 1)
    l2 = np.ceil(np.maximum(L - s1 * l1, 0) / s2).astype(int)
    ok = (l2 >= 1) & (l2 <= cap2)
    T = np.maximum(l1 * t1[0] + t1[1], l2 * t2[0] + t2[1]) + hop
    T = np.where(ok, T, np.inf)
    return int(l1[int(np.argmin(T))])


@dataclass
class _Mixed(_Columns):
    """Pipelines of k device types (k >= 3): for type j (column j of the (n, k) arrays), s[:, j]
    stages of option o[:, j]; every kind but the last holds n[:, j] layers a stage, the last
    shares the rest: r of its stages hold n[:, -1] + 1 layers, the others n[:, -1]."""

    o: npt.NDArray[np.int64]
    s: npt.NDArray[np.int64]
    n: npt.NDArray[np.int64]
    r: npt.NDArray[np.int64]
    cnt: npt.NDArray[np.int64]


def _no_mixed(k: int) -> _Mixed:
    i, f, ik = np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, k), dtype=np.int64)
    return _Mixed(order=i, bi=i, S=i, tps=f, ms=f, ttft=f, power=f, o=ik, s=ik, n=ik, r=i, cnt=ik)


def _mixed_pool(st: _Setting, homog: _Candidates, owned: npt.NDArray[np.bool_]) -> list[list[int]]:
    """Per batch level, the owned options pipelines of three or more types draw from: the
    MIXED_TOP cheapest per token/s of their best homogeneous design at that level, then up to
    MIXED_SMALL owned options too small to serve alone (the leftovers another type uses)."""
    nb, no = st.tau.shape
    best, present = _cheapest_alone(st, homog)
    out = []
    for lv in range(nb):
        ranked = [o for o in np.argsort(best[lv], kind="stable").tolist() if present[lv, o]]
        small = [o for o in range(no) if not present[lv, o] and st.cap[lv, :, o].any()]
        # Groups across machines, and engines without pipelines, serve in no such pipeline
        # (_pairable).
        mine = {o for o in range(no) if owned[o] and not st.opts[o].across and st.pipelines[o]}
        pick = [o for o in ranked if o in mine][:MIXED_TOP]
        out.append(pick + [o for o in small if o in mine][:MIXED_SMALL])
    return out


def _k_type(
    st: _Setting,
    homog: _Candidates,
    max_stages: int,
    pair_ok: npt.NDArray[np.bool_],
    owned: npt.NDArray[np.bool_],
    k: int,
) -> _Mixed:
    """Pipelines of k owned device types: s_j stages of each (1 to HETERO_MAX_STAGES, within
    max_stages), every stage at or under the least time T at which the k kinds together hold
    the model. At a time T a stage of option o holds at most min(cap, floor((T - fixed) / tau))
    layers, which only grows with T, so the least T is found by bisection; every kind but the
    last then holds its most and the last the rest (each stage at least one layer, taken back
    from the kinds before it, the latest first, where the last would hold none). Types are
    unordered for the split (blocks are identical); the stages run kind by kind in the order of
    `o`, which sets the hops each kind is charged.

    Long because the split, the figures and the columns share their index arrays."""
    L = st.m.num_layers
    dev_of = [o.device.id for o in st.opts]
    rows: list[tuple[int, ...]] = []
    for lv, pool in enumerate(_mixed_pool(st, homog, owned)):
        for combo in itertools.combinations(sorted(pool), k):
            if len({dev_of[a] for a in combo}) == k and all(
                pair_ok[a, b] for a, b in itertools.combinations(combo, 2)
            ):
                rows.append((lv, *combo))
    counts = [
        x
        for x in itertools.product(range(1, HETERO_MAX_STAGES + 1), repeat=k)
        if sum(x) <= max_stages
    ]
    if not rows or not counts:
        return _no_mixed(k)
    base = np.array(rows, dtype=np.int64)
    sc = np.array(counts, dtype=np.int64)
    at = np.repeat(np.arange(len(base)), len(sc))
    bi, o = base[at, 0], base[at, 1:]
    s = np.tile(sc, (len(base), 1))
    S = s.sum(axis=1)
    gen = np.arange(len(bi), dtype=np.int64)  # generation order: level, types, stage counts
    tau = st.tau[bi[:, None], o]
    fix = st.fixed[bi[:, None], o] + _kind_hops(st, bi, o, s)  # each kind's hops with its work
    cap = np.minimum(st.cap[bi[:, None], (S - 1)[:, None], o], L)

    def most(T: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        return np.clip(np.floor((T[:, None] - fix) / tau), 0, cap).astype(np.int64)

    lo = np.zeros(len(bi))
    hi = (fix + tau * cap).max(axis=1)  # every kind at its most: holds the model if anything does
    fits = ((s * cap).sum(axis=1) >= L) & (cap > 0).all(axis=1)
    for _ in range(60):
        mid = (lo + hi) / 2.0
        ok = ((s * most(mid)).sum(axis=1) >= L) & (most(mid) > 0).all(axis=1)
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    n = most(hi)
    last = k - 1
    rest = L - (s[:, :last] * n[:, :last]).sum(axis=1)
    for j in range(last - 1, -1, -1):  # the last kind's stages hold a layer each
        need = np.maximum(s[:, last] - rest, 0)
        back = np.minimum(n[:, j] - 1, _ceil_div(need, s[:, j]))
        n[:, j] -= back
        rest += back * s[:, j]
    q, r = rest // s[:, last], rest % s[:, last]
    top = q + (r > 0)
    keep = fits & (rest >= s[:, last]) & (top <= cap[:, last]) & (n[:, :last] >= 1).all(axis=1)
    bi, o, s, n, S, q, r, top, gen = (x[keep] for x in (bi, o, s, n, S, q, r, top, gen))
    n[:, last] = q
    lay = np.concatenate([n[:, :last], top[:, None]], axis=1)  # each kind's fullest stage
    fix = st.fixed[bi[:, None], o]
    hop = st.hop_extra[o].max(axis=1) + _kind_rpc(st, o, s)
    hop = np.where(_kind_inside(st, o, s)[2], 0.0, hop)
    T_c = (lay * st.tau_c[bi[:, None], o] + fix + _kind_hops(st, bi, o, s, True)).max(axis=1)
    T_d = (lay * st.tau_d[bi[:, None], o] + fix + _kind_hops(st, bi, o, s, False)).max(axis=1)
    T_c, T_d = T_c + hop, T_d + hop
    T, ttft = _round(st, bi, S, T_d, T_c)
    kinds = [(o[:, j], n[:, j], s[:, j]) for j in range(last)]
    kinds += [(o[:, last], q + 1, r), (o[:, last], q, s[:, last] - r)]
    watts = _stage_power(st, bi, T, kinds)
    return _Mixed(
        order=bi * _LEVEL_KEY + _PHASE_KEY + gen,
        bi=bi,
        S=S,
        o=o,
        s=s,
        n=n,
        r=r,
        tps=st.levels[bi] / T,
        ms=S * T * 1e3,
        ttft=ttft,
        power=watts,
        cnt=s * st.tp[o],
    )


def _mixed_kept(
    st: _Setting,
    mx: _Mixed,
    need: npt.NDArray[np.int64],
    backed: npt.NDArray[np.int64] | None,
    *,
    for_mix: bool,
    most: int | None,
) -> npt.NDArray[np.int64]:
    """Indices of the candidates of k types that no other of the same device types, hosts and
    calibration backing beats (dominated: no more of each device, no more power, at least the
    tokens/s and sequences), in generation order. Host dominance across host sets
    (_host_dominated) is not applied: keeping more designs is sound."""
    ids = [o.device.id for o in st.opts]
    rank_of = {d: i for i, d in enumerate(sorted(set(ids)))}
    rank = np.array([rank_of[d] for d in ids], dtype=np.int64)[mx.o]
    by = np.argsort(rank, axis=1, kind="stable")  # the signature lists device ids in order
    rank = np.take_along_axis(rank, by, axis=1)
    hosts = np.take_along_axis(need[mx.o], by, axis=1)
    cnt = np.take_along_axis(mx.cnt, by, axis=1)
    tps, conc, slower = _competing(st, mx.bi, mx.S, mx.ms, mx.ttft, mx.tps, for_mix, most)
    nd, nh = len(rank_of), int(need.max(initial=0)) + 1
    group = np.zeros(len(mx.bi), dtype=np.int64)
    for j in range(mx.o.shape[1]):
        group = (group * nd + rank[:, j]) * nh + hosts[:, j]
    if backed is not None:
        group = group * 2 + backed
    counts = [*cnt.T, *slower]
    keep = np.flatnonzero(~dominated(group, counts, mx.power, tps, conc, mx.order))
    return keep[np.argsort(mx.order[keep], kind="stable")]


def _materialize_mixed(st: _Setting, mx: _Mixed, idx: npt.NDArray[np.int64]) -> list[Design]:
    """Design objects for the candidates of k types at `idx`: each kind's stages in turn, the
    last kind's fuller stages first."""
    ids = [o.device.id for o in st.opts]
    engines = [r.engine for r in st.runtimes]
    out = []
    for i in idx.tolist():
        o, s, n = mx.o[i].tolist(), mx.s[i].tolist(), mx.n[i].tolist()
        r = int(mx.r[i])
        stages: tuple[Stage, ...] = ()
        for j, (oj, sj, nj) in enumerate(zip(o, s, n, strict=True)):
            opt = st.opts[oj]
            if j == len(o) - 1:
                fuller = (Stage(ids[oj], opt.tp, nj + 1, opt.dense, opt.across),) * r
                stages += fuller + (Stage(ids[oj], opt.tp, nj, opt.dense, opt.across),) * (sj - r)
            else:
                stages += (Stage(ids[oj], opt.tp, nj, opt.dense, opt.across),) * sj
        devices = dict(zip((ids[x] for x in o), mx.cnt[i].tolist(), strict=True))
        b = int(st.levels[mx.bi[i]])
        out.append(
            Design(
                st.w.name,
                b,
                stages,
                1,
                float(mx.tps[i]),
                b * int(mx.S[i]),
                float(mx.ms[i]),
                float(mx.ttft[i]),
                float(mx.power[i]),
                devices,
                engines[o[0]],
            )
        )
    return out


def _materialize(st: _Setting, cand: _Candidates, idx: npt.NDArray[np.int64]) -> list[Design]:
    """Design objects for the candidates at `idx`, in that order (stages are immutable and
    shared between designs)."""
    L = st.m.num_layers
    name = st.w.name
    ids = [o.device.id for o in st.opts]
    tps_of = [o.tp for o in st.opts]
    dense_of = [o.dense for o in st.opts]
    across_of = [o.across for o in st.opts]
    levels = st.levels.tolist()
    made: dict[tuple[int, int], Stage] = {}

    def make(o: int, layers: int) -> Stage:
        s = made[(o, layers)] = Stage(ids[o], tps_of[o], layers, dense_of[o], across_of[o])
        return s

    cols = (
        cand.bi,
        cand.S,
        cand.o1,
        cand.o2,
        cand.s1,
        cand.n1,
        cand.s2,
        cand.rest,
        cand.tps,
        cand.ms,
        cand.ttft,
        cand.power,
        cand.cnt1,
        cand.cnt2,
    )
    out: list[Design] = []
    add = out.append
    get = made.get
    engines = [r.engine for r in st.runtimes]
    for bi, S, o1, o2, s1, n1, s2, rest, tps, ms, ttft, power, c1, c2 in zip(
        *(c[idx].tolist() for c in cols), strict=True
    ):
        first = get((o1, n1)) or make(o1, n1)
        if o2 < 0:  # S stages of n1 layers, the last holding the rest
            last = L - n1 * (S - 1)
            stages = (first,) * (S - 1) + ((get((o1, last)) or make(o1, last)),)
            devices = {ids[o1]: c1}
        else:  # s1 stages of n1 layers, then s2 sharing the rest, the larger shares first
            q, r = divmod(rest, s2)
            fuller = (get((o2, q + 1)) or make(o2, q + 1),) * r if r else ()
            stages = (first,) * s1 + fuller + (get((o2, q)) or make(o2, q),) * (s2 - r)
            devices = {ids[o1]: c1, ids[o2]: c2}
        b = levels[bi]
        add(Design(name, b, stages, 1, tps, b * S, ms, ttft, power, devices, engines[o1]))
    return out


def _within_ceilings(w: InferenceWorkload, cand: _Candidates) -> _Candidates:
    """The candidates that meet the workload's latency ceilings (closed load)."""
    return cand.take(_meets_ceilings(w, cand.ms, cand.ttft))


def _meets_ceilings(
    w: InferenceWorkload, ms: npt.NDArray[np.float64], ttft: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_]:
    """Per candidate (its time per token and first-token time), whether it meets the
    workload's latency ceilings (closed load)."""
    ok = np.ones(len(ms), dtype=bool)
    if w.max_ms_per_token is not None:
        ok &= ~(ms > w.max_ms_per_token)
    if w.max_ttft_s is not None:
        ok &= ~(ttft > w.max_ttft_s)
    if w.max_e2e_s is not None and w.request_mix is None:
        # Closed load: first token, then the rest of the answer at the time per token.
        ok &= ~(ttft + (w.output_tokens - 1) * ms / 1e3 > w.max_e2e_s)
    return ok


def _with_runtimes(st: _Setting, cat: Catalog, runtimes: list[Runtime]) -> _Setting:
    """The setting with each option's engine and backend, whether that engine pipelines, the
    engine's time per hop, its host work per generated token in each step's fixed work (b sequences, b tokens a step), and an
    older release's fixed time per layer and per step."""
    times = [engine_times(cat, r.engine) for r in runtimes]
    extra = np.array([t["hop_overhead_s"] for t in times])
    st = replace(
        st,
        rpc_rt=np.array([t["rpc"].round_trip_s for t in times], dtype=np.float64),
        rpc_n=np.array([t["rpc"].round_trips for t in times], dtype=np.int64),
        rpc_graph=np.array([t["rpc"].graph_resent for t in times], dtype=bool),
    )
    host = np.array([t["host_s_per_token"] for t in times])
    own = np.array([t["engine_step_s"] for t in times])
    layer = np.array([t["engine_layer_s"] for t in times])
    fixed = st.fixed + host[None, :] * st.levels[:, None] + own[None, :]
    pipes = np.array([cat.engines[r.engine].pipeline_parallel for r in runtimes], dtype=bool)
    # An engine whose tensor-parallel mode takes every device of the replica serves a group of
    # two or more as a replica of one stage (Engine.tensor_parallel_single_stage).
    pipes &= ~np.array(
        [
            cat.engines[r.engine].tensor_parallel_single_stage and o.tp > 1
            for r, o in zip(runtimes, st.opts, strict=True)
        ],
        dtype=bool,
    )
    if not layer.any():
        return replace(st, runtimes=runtimes, hop_extra=extra, fixed=fixed, pipelines=pipes)
    return replace(
        st,
        runtimes=runtimes,
        hop_extra=extra,
        fixed=fixed,
        pipelines=pipes,
        tau=st.tau + layer[None, :],
        tau_c=st.tau_c + layer[None, :],
        tau_d=st.tau_d + layer[None, :],
    )


def _with_profiles(st: _Setting, cat: Catalog, problem: Problem, table: DeviceTable) -> _Setting:
    """The setting with the workload's measured times per block in place of the estimator's
    (planner.estimator.profiles) for the options they were measured on: each level's
    decode-only and chunked iterations scaled alike, the engine's time per block and a group's
    all-reduces across machines included in the estimate scaled."""
    w = st.w
    P, out = prefill_prompt(w.prompt_tokens, w.prefix_cache_hit), w.output_tokens
    levels = st.levels.astype(np.float64)
    chunks = np.array([chunk_mix(int(b), P, out, b * P / out)[0] for b in st.levels.tolist()])
    tau_d, tau_c = st.tau_d.copy(), st.tau_c.copy()
    for j, o in enumerate(st.opts):
        profile = layer_profile(w, o.device.id, o.tp, cat, o.device, st.runtimes[j].engine)
        if profile is None:
            continue
        spec = StageSpec(
            o.device,
            o.tp,
            1,
            link=o.net if o.across else None,
            exchange_s=o.exchange_s,
            layout=o.layout if o.across else None,
        )
        times = engine_times(cat, st.runtimes[j].engine)
        own, family = times["engine_layer_s"], times["kernels"]
        fmt, kvb = weight_format(w.weights), kv_bytes(w.kv)
        one = table.take([o.row])
        ctx, link = w.context_tokens, spec.link_args()
        layer = layer_estimate(st.m, fmt, kvb, one, o.tp, ctx, link, own, spec.layout, family)
        tau_d[:, j], tau_c[:, j] = profiled_pair(
            profile, layer, levels, chunks, st.tau_d[:, j], st.tau_c[:, j]
        )
    share = st.share[:, None]
    return replace(st, tau_d=tau_d, tau_c=tau_c, tau=(1.0 - share) * tau_d + share * tau_c)


def _pruned_order(
    st: _Setting,
    cand: _Candidates,
    need: npt.NDArray[np.int64],
    backed: npt.NDArray[np.int64] | None = None,
    *,
    for_mix: bool = False,
    holds: npt.NDArray[np.bool_] | None = None,
    most: int | None = None,
) -> npt.NDArray[np.int64]:
    """Indices of the candidates _prune keeps, in the order it returns them. `need`: per
    option, a rank of the hosts that hold its group; a design competes with designs whose
    options need the same hosts, and (`holds[a, b]`: the hosts of need rank a include those of
    rank b) beats one whose every device type needs no more hosts than its own do (see
    _host_dominated); a faster design in a bigger host never replaces one that fits a desktop.
    `backed`, per candidate, the same for calibration backing under a risk margin. `for_mix`: a
    sooner first token counts where more sequences would (ranks: the soonest ranks highest)."""
    ids = [o.device.id for o in st.opts]
    rank_of = {d: i for i, d in enumerate(sorted(set(ids)))}
    rank = np.array([rank_of[d] for d in ids], dtype=np.int64)
    two = cand.o2 >= 0
    ra = rank[cand.o1]
    rb = np.where(two, rank[np.maximum(cand.o2, 0)], -1)
    swap = two & (rb < ra)  # the signature lists device ids in sorted order
    first = np.where(swap, rb, ra)
    second = np.where(two, np.where(swap, ra, rb) + 1, 0)
    c1 = np.where(swap, cand.cnt2, cand.cnt1)
    c2 = np.where(swap, cand.cnt1, cand.cnt2)
    tps, conc, slower = _competing(st, cand.bi, cand.S, cand.ms, cand.ttft, cand.tps, for_mix, most)
    kind = first * (len(rank_of) + 1) + second
    if backed is not None:  # per candidate: 1 where the calibration backs it (risk margin)
        kind = kind * 2 + backed
    k = int(need.max(initial=0)) + 2
    na = need[cand.o1]
    nb = np.where(two, need[np.maximum(cand.o2, 0)] + 1, 0)
    # In the signature's order, as the device ranks: a pipeline and its mirror compete. The
    # second device's rank is shifted by one, 0 standing for none.
    need1, need2 = np.where(swap, nb - 1, na), np.where(swap, na + 1, nb)
    group = (kind * k + need1) * k + need2
    keep = np.flatnonzero(~dominated(group, [c1, c2, *slower], cand.power, tps, conc, cand.order))
    if holds is not None and len(keep):
        held = np.zeros((k, k), dtype=bool)  # holds on the shifted ranks of the second device
        held[0, 0] = True
        held[1:, 1:] = holds
        figures = np.stack([c1, c2, *slower, cand.power, -tps, -conc]).astype(float)
        gone = _host_dominated(kind[keep], need1[keep], need2[keep], holds, held, figures[:, keep])
        keep = keep[~gone]
    keys = [cand.order, -conc, -cand.tps, cand.power, c2, c1]
    keys += [-cand.tps, cand.S, st.levels[cand.bi], second, first]
    return keep[np.lexsort([k[keep] for k in keys])]


def _competing(
    st: _Setting,
    bi: npt.NDArray[np.int64],
    S: npt.NDArray[np.int64],
    ms: npt.NDArray[np.float64],
    ttft: npt.NDArray[np.float64],
    tps: npt.NDArray[np.float64],
    for_mix: bool,
    most: int | None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], list[npt.NDArray[np.int64]]]:
    """(tokens/s, sequences, further counts) candidates compete on in pruning.

    Where the sequences that exist are few (a stated concurrency, C at the busiest period),
    each makes a token per time per token (Little's law): a replica serves at most
    min(slots, C) of them, at min(slots, C) / time per token, so those are the figures it
    competes on, with the time per token itself (its rank: less is better). A design with
    more slots and tokens/s but a slower token no longer replaces a faster one. For a request
    mix the first-token time's rank stands for the sequences (the soonest ranks highest)."""
    conc = st.levels[bi] * S
    slower: list[npt.NDArray[np.int64]] = []
    if not for_mix and most is not None:
        conc = np.minimum(conc, most)
        tps = conc * 1000.0 / ms
        slower = [_rank(ms)]
    if for_mix:
        ttft_rank = np.unique(ttft, return_inverse=True)[1].astype(np.int64)
        conc = int(ttft_rank.max(initial=0)) - ttft_rank
    return tps, conc, slower


def _rank(x: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Each value's rank among the distinct values (0 the least): the order, as integers."""
    return np.unique(x, return_inverse=True)[1].astype(np.int64).reshape(-1)


def _host_dominated(
    kind: npt.NDArray[np.int64],
    need1: npt.NDArray[np.int64],
    need2: npt.NDArray[np.int64],
    holds1: npt.NDArray[np.bool_],
    holds2: npt.NDArray[np.bool_],
    figures: npt.NDArray[np.float64],
) -> npt.NDArray[np.bool_]:
    """Rows (designs no design of their own hosts beats) that a row of the same `kind` (device
    types, and calibration backing under a risk margin) but other hosts beats: its `figures`
    (device counts, the time per token's rank where it counts, power, -tokens/s, -sequences)
    are no larger in every column, and each of
    its device types' hosts (`need1`, `need2`) include the beaten row's (`holds1[a, b]`:
    hosts of rank a include those of rank b).

    Sound: in a plan that runs the beaten design B on premises, each of B's device types sits
    in a host that holds B's groups at the speed B assumed, and such a host holds the winner
    A's too, so swapping every replica of B for one of A is allowed; it needs no more of any
    device or power and serves at least B's tokens/s and sequences (or a first token as
    soon), so the plan stays feasible and no objective gets worse. A rented replica needs no
    host. As the host sets differ, one strictly includes the other (both ways would make them
    equal), so no two rows beat each other, the relation is a strict order (with the dominance
    within one host set it compounds to one: no more everywhere, hosts included, and strictly
    better somewhere or earlier), and a beaten row is beaten by a row nothing beats: removing
    every beaten row at once keeps one optimal plan."""
    n = len(kind)
    idx = np.argsort(kind, kind="stable")
    g = kind[idx]
    i, j = _later_pairs(np.arange(n), g)
    i, j = idx[i], idx[j]
    other = (need1[i] != need1[j]) | (need2[i] != need2[j])
    i, j = i[other], j[other]
    gone = np.zeros(n, dtype=bool)
    for a, b in ((i, j), (j, i)):  # a beats b
        ok = holds1[need1[a], need1[b]] & holds2[need2[a], need2[b]]
        a, b = _beats(figures, a[ok], b[ok], first=0)
        gone[b] = True
    return gone


def dominated(
    group: npt.NDArray[np.int64],
    counts: list[npt.NDArray[np.int64]],
    power: npt.NDArray[np.float64],
    tps: npt.NDArray[np.float64],
    seqs: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
) -> npt.NDArray[np.bool_]:
    """Rows another row of the same group is no worse than: no more of each device (`counts`,
    non-negative), no more power, at least the tokens/s and sequences; strictly better in one,
    or equal and earlier in `order`.

    Sorted lexicographically by (counts, power, -tokens/s, -sequences, order), such a row always
    comes first, so row j goes when an earlier row of its group is no worse everywhere. As
    dominance is transitive this runs in passes: strong rows (witnesses) first try every later
    row of their group, the best of each group, then the best of each device-count class
    still standing; then the rows left try each other. A removed row is never needed as a
    dominator: the row that removed it beats whatever it beats.
    """
    n = len(group)
    if n == 0:
        return np.zeros(0, dtype=bool)
    head = group.astype(np.int64)
    for c in counts:  # group and device counts as one key (all small non-negative integers)
        head = head * (int(c.max()) + 1) + c
    tail = seqs.max() - seqs  # falling sequences, then order, as one key where it fits
    if (int(tail.max()) + 1) * (int(order.max()) + 1) < 2**62:
        keys = [tail * (int(order.max()) + 1) + order]
    else:
        keys = [order, tail]
    idx = np.lexsort([*keys, -tps, power, head])
    A = np.stack([*(c[idx] for c in counts), power[idx], -tps[idx], -seqs[idx]]).astype(float)
    h, g = head[idx], group[idx]
    new_group = np.r_[True, g[1:] != g[:-1]]
    new_class = np.r_[True, h[1:] != h[:-1]]
    drop = np.zeros(n, dtype=bool)
    devices = A[:-3].sum(axis=0)
    energy = A[-3] / -A[-2]  # joules per token
    for new, scores in (
        (new_group, (energy, A[-2] / devices, A[-1] / devices, A[-3] / devices)),
        (new_class, (A[-3], energy, A[-2], A[-1])),
    ):
        alive = np.flatnonzero(~drop)
        starts = np.flatnonzero(new[alive])
        seg = np.cumsum(new[alive]) - 1
        wit = []
        for v in scores:  # the first row of each segment with the least score
            va = v[alive]
            hit = np.flatnonzero(va == np.minimum.reduceat(va, starts)[seg])
            wit.append(hit[np.r_[True, seg[hit][1:] != seg[hit][:-1]]])
        i, j = _later_pairs(sorted_distinct(np.concatenate(wit)), g[alive])
        drop[alive[_beats(A[:, alive], i, j)[1]]] = True
    alive = np.flatnonzero(~drop)
    i, j = _later_pairs(np.arange(len(alive)), g[alive])
    drop[alive[_beats(A[:, alive], i, j)[1]]] = True
    out = np.empty(n, dtype=bool)
    out[idx] = drop
    return out


def _later_pairs(
    rows: npt.NDArray[np.int64], group: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(i, j) for each i of `rows` and every later j of its group (`group` sorted)."""
    n = len(group)
    new = np.r_[True, group[1:] != group[:-1]]
    end = np.r_[np.flatnonzero(new)[1:], n][np.cumsum(new) - 1]
    later = end[rows] - rows - 1
    i = np.repeat(rows, later)
    return i, i + 1 + np.arange(len(i)) - np.repeat(np.cumsum(later) - later, later)


BEATS_SAMPLE = 512  # pairs sampled to order _beats' columns (fewer pairs: the fixed order)


def _beats(
    A: npt.NDArray[np.float64],
    i: npt.NDArray[np.int64],
    j: npt.NDArray[np.int64],
    first: int = 1,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The pairs (i, j) with A[:, i] <= A[:, j] in every column from `first` (the columns
    before it hold by the sort), testing one column at a time on the pairs still standing, the
    columns that fail most pairs first (their rate measured on a sample of the pairs) so that
    most pairs go early."""
    cols = list(range(first, len(A)))
    if len(i) > BEATS_SAMPLE:
        si, sj = i[:: len(i) // BEATS_SAMPLE], j[:: len(j) // BEATS_SAMPLE]
        cols.sort(key=lambda col: int(np.count_nonzero(A[col, si] <= A[col, sj])))
    for col in cols:
        keep = A[col, i] <= A[col, j]
        i, j = i[keep], j[keep]
    return i, j


def _prune(designs: list[Design]) -> list[Design]:
    """Drop a design when another with the same device types uses no more of each device and
    no more power while serving at least the same tokens/s and sequences (it can never be
    better in any objective); of identical ones keep the first. Sorted by device types, batch,
    depth and falling tokens/s."""
    if not designs:
        return []
    sigs = [d.signature for d in designs]
    rank_of = {s: i for i, s in enumerate(sorted(set(sigs)))}
    width = max(len(s) for s in sigs)
    counts = np.zeros((width, len(designs)), dtype=np.int64)
    for j, d in enumerate(designs):
        for i, dev in enumerate(d.signature):
            counts[i, j] = d.devices[dev]
    group = np.array([rank_of[s] for s in sigs], dtype=np.int64)
    power = np.array([d.power_w for d in designs])
    tps = np.array([d.tokens_per_s for d in designs])
    conc = np.array([d.concurrency for d in designs], dtype=np.int64)
    order = np.arange(len(designs), dtype=np.int64)
    keep = np.flatnonzero(~dominated(group, list(counts), power, tps, conc, order))
    batch = np.array([d.batch for d in designs], dtype=np.int64)
    depth = np.array([len(d.stages) for d in designs], dtype=np.int64)
    keys = [order, -conc, -tps, power, *counts[::-1], -tps, depth, batch, group]
    return [designs[i] for i in keep[np.lexsort([k[keep] for k in keys])].tolist()]


# ------------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------------
