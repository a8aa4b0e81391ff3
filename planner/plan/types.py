"""The plan: what the solver chose and every figure a reader needs, as plain data (JSON-ready)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, with_config

from planner.catalog import Catalog
from planner.estimator.confidence import Confidence
from planner.estimator.engine_topology import exchange_layout
from planner.estimator.hosts import derates, sustained
from planner.estimator.profiles import layer_profile
from planner.estimator.replica import StageSpec
from planner.estimator.routes import group_link, hop_routes
from planner.estimator.support import exchange_overhead_s
from planner.schema.catalog import Node
from planner.schema.problem import Problem
from planner.schema.status import Site, Status

# A plan file holds what the planner writes: any other key, at any level, is refused when read.
_FORBID = ConfigDict(extra="forbid")
# A count a plan file may hold (devices, hosts, replicas, layers, ...): far beyond any fleet
# (a problem caps a device type at 100,000), so a count read from a file keeps every figure
# made from it finite. Negative counts are refused by planner.plan.io with their own message.
MAX_COUNT = 10**9
Count = Annotated[int, Field(le=MAX_COUNT)]


@with_config(_FORBID)
@dataclass(frozen=True)
class DeviceLine:
    """One device type: how many at the busiest time, and how each was had.

    `count` = owned + bought + reserved + the most on-demand and spot devices rented at once
    (each mode's peak, which may fall in different periods). `total_usd` is the purchase of the
    bought ones; rent is in `rent_usd`. Hours are device-hours over the whole horizon.
    """

    type: str
    count: Count
    owned: Count
    bought: Count
    unit_price_usd: float  # purchase price (0 when none is bought)
    total_usd: float  # purchase of the bought devices
    reserved: Count = 0
    on_demand: Count = 0  # most rented at once
    spot: Count = 0  # most rented at once (including the share expected to be down)
    device_hours: dict[str, float] = field(default_factory=dict)  # mode -> device-hours used
    rent_usd: dict[str, float] = field(default_factory=dict)  # mode -> rent over the horizon
    rent_usd_per_hour: dict[str, float] = field(default_factory=dict)  # mode -> rate paid
    energy_usd: float = 0.0  # electricity of the on-premises devices of this type (with PUE)
    maintenance_usd: float = 0.0
    utilization: float | None = None  # owned + bought: hours at work / hours held
    break_even_utilization: float | None = None  # buy beats on-demand rent above this
    # The cloud instance the rented devices come in (catalog/instances.yaml), rented whole:
    # reserved, on-demand and spot counts are multiples of devices_per_instance. None: rented
    # one device at a time, or not rented.
    instance: str | None = None
    devices_per_instance: Count = 1


@with_config(_FORBID)
@dataclass(frozen=True)
class NodeLine:
    type: str
    hosts: str
    count: Count
    unit_price_usd: float
    total_usd: float
    rack_units: Count
    # Electricity of these hosts over the horizon (with PUE): their overhead through every hour,
    # at load in the working hours and as their idle draw in the others.
    energy_usd: float = 0.0
    name: str = ""  # a stated machine's own name (machines[].name), shown beside its id


@with_config(_FORBID)
@dataclass(frozen=True)
class NetworkLine:
    """Ports and switches bought to join the hosts over `link` (planner.estimator.network)."""

    link: str
    ports: Count
    unit_price_usd: float  # one port: NIC (or its share) with optics or cable
    switch: str | None  # the switch model, None when the hosts are cabled point to point
    switches: Count
    switch_price_usd: float
    total_usd: float  # ports and switches
    power_w: float  # the switches, drawn at all hours
    rack_units: Count
    energy_usd: float  # the switches' electricity over the horizon (with PUE)


@with_config(_FORBID)
@dataclass(frozen=True)
class StageLine:
    device: str
    tp: Count
    layers: tuple[Count, Count]  # first and last layer, inclusive, 0-based
    memory_bytes: dict[str, float]
    seconds_per_step: float
    boundary_bytes_per_step: float  # hidden states sent to the next stage per step
    # The tensor-parallel group spans `tp` machines of one device each, its all-reduces over
    # the plan's network link; false: the group sits in one host.
    across_machines: bool = False
    # Serving pipelines: the hop to the next stage (the last stage's: its sampled token ids back
    # to the first) crosses the links `hop_route` names in order (planner.estimator.routes),
    # carrying `hop_bytes_per_token` per sequence (hidden x 2 bytes; the last stage's: 8 bytes,
    # one token id) and taking `hop_seconds` at the batch (every link's latency + boundary
    # bytes / the slowest bandwidth; the engine's own time per hop is not in it); in an
    # iteration that carries a prompt chunk it carries `hop_chunk_bytes` (the chunk's tokens'
    # hidden states too; back, the ids of the prompts it finishes too) in `hop_chunk_seconds`.
    # None and 0 for one stage and for training.
    hop_route: str | None = None
    hop_bytes_per_token: float = 0.0
    hop_seconds: float = 0.0
    hop_chunk_bytes: float = 0.0
    hop_chunk_seconds: float = 0.0


@with_config(_FORBID)
@dataclass(frozen=True)
class PeriodLine:
    """A stretch of the typical day or week: what runs, and what it draws."""

    name: str
    hours: float  # over the whole horizon
    scale: float  # demand as a multiple of the workloads' stated rates
    devices: dict[str, dict[str, Count]]  # device -> mode (owned/bought/reserved/...) -> in use
    power_w: float  # devices and hosts at load, before PUE
    energy_kwh: float  # at the wall (with PUE), over this period's hours
    tokens: float  # output tokens served over this period's hours
    gco2e_per_kwh: float | None


@with_config(_FORBID)
@dataclass(frozen=True)
class PhaseLine:
    """A phase of problem `phases`: workloads that run on the fleet one phase after another."""

    name: str
    workloads: list[str]
    hours: float  # of the horizon: an earlier phase its jobs' longest deadline, the last the rest
    devices: dict[
        str, Count
    ]  # device -> on-premises devices at work (the last: its busiest period)


@with_config(_FORBID)
@dataclass(frozen=True)
class Costs:
    """Cost over the horizon, by kind (USD). `total_usd` is their sum and the plan's tco_usd."""

    capex_usd: float = 0.0  # devices and hosts bought
    maintenance_usd: float = 0.0
    energy_usd: float = 0.0  # on-premises devices and hosts, with PUE
    rent_on_demand_usd: float = 0.0
    rent_reserved_usd: float = 0.0
    rent_spot_usd: float = 0.0
    training_usd: float = 0.0  # training jobs' energy (owned fleet) or rent (their hours)
    rack_space_usd: float = 0.0  # rack units on premises x horizon.rack_usd_per_u_month
    facility_power_usd: float = 0.0  # on-premises peak kW x horizon.facility_usd_per_kw_month
    total_usd: float = 0.0


@with_config(_FORBID)
@dataclass(frozen=True)
class CarbonLine:
    """Emissions over the horizon (Software Carbon Intensity: (E x I + M) per R, R = a million
    output tokens)."""

    energy_kwh: float  # every device in use, on-premises and rented, at the wall
    operational_kgco2e: float
    embodied_kgco2e: float
    total_kgco2e: float
    tokens: float
    sci_g_per_million_tokens: float | None
    # Devices of the plan the catalog has no embodied-carbon figure for: their making counts
    # 0 kg, so embodied_kgco2e and total_kgco2e are lower bounds (none under a carbon promise).
    # None: a plan written before the field was recorded.
    embodied_unknown: tuple[str, ...] | None = None


@with_config(_FORBID)
@dataclass(frozen=True)
class Recipe:
    """How to launch one replica so it runs as the plan's figures assume."""

    engine: str
    tensor_parallel: tuple[Count, ...]  # per stage
    pipeline_parallel: Count  # stages
    layer_split: tuple[Count, ...]  # layers per stage, in order
    max_sequences: Count  # per replica: batch x stages
    token_budget: Count | None  # tokens per iteration (decodes plus prefill room)
    kv_cache_dtype: str  # the workload's KV format
    weights: str  # the checkpoint's weight format
    command: str  # the launch line with those settings (MODEL stands for the checkpoint)


@with_config(_FORBID)
@dataclass(frozen=True)
class WorkloadPlan:
    name: str
    kind: str
    model: str
    replicas: Count  # inference replicas of this design (training: data-parallel degree)
    batch: Count
    stages: tuple[StageLine, ...]
    tokens_per_s: float  # all replicas of this design
    ms_per_token: float | None
    ttft_s: float | None
    finish_hours: float | None
    power_w: float  # every device of these replicas at load (no hosts, no PUE)
    # Output tokens/s of these replicas at capacity over their devices' power at load (no hosts,
    # no PUE): a figure of the design, not of the fleet (see Plan.tokens_per_joule).
    tokens_per_joule_at_capacity: float
    # What these replicas cost over their period (devices with upkeep and energy, or rent) per
    # million tokens they could make at capacity; the fleet's figure is Plan.usd_per_million_tokens.
    usd_per_million_tokens_at_capacity: float | None
    period: str | None = None  # the demand period these replicas serve (None: all of them)
    site: str = Site.PREMISES  # or Site.CLOUD (rented devices)
    requests_per_s: dict[str, float] = field(default_factory=dict)  # class -> served (mixes)
    sized_for: str | None = None  # request class whose lengths size this design (mixes)
    # Fixed-rate workloads with a concurrency: the sequences these replicas hold (of their
    # batch x stages x replicas slots); tokens_per_s is then what those sequences make.
    sequences: Count | None = None
    # Serving engines: tokens per iteration the figures assume (max_num_batched_tokens).
    token_budget: Count | None = None
    # The serving engine every replica runs (support matrix id) and its backend per device.
    engine: str | None = None
    backends: dict[str, str] = field(default_factory=dict)
    recipe: Recipe | None = None  # serving: the engine's launch settings the figures assume
    confidence: Confidence | None = None  # serving: how well calibration rows back the figures

    # Request mixes: `both` serves whole requests; a disaggregated `prefill` pool computes
    # prompts and sends their KV cache to a `decode` pool (requests_per_s then counts the requests
    # each pool handles; only decode pools make output tokens after the first).
    role: Literal["both", "prefill", "decode"] = "both"

    @property
    def runtime(self) -> str:
        """The engine and its backends, e.g. `vllm (rocm)`, `llama.cpp (cuda + metal)`; `-`
        for training jobs."""
        if not self.engine:
            return "-"
        backs = sorted(set(self.backends.values()))
        return f"{self.engine} ({' + '.join(backs)})" if backs else self.engine

    # Training: what the job costs, its rent when rented for its own hours (site cloud), else
    # the electricity of its devices on the owned fleet.
    job_usd: float | None = None

    def devices(self) -> dict[str, int]:
        """Devices of these replicas by type: each stage's tensor-parallel degree x replicas."""
        out: dict[str, int] = {}
        for s in self.stages:
            out[s.device] = out.get(s.device, 0) + s.tp * self.replicas
        return out

    def stage_specs(
        self, cat: Catalog, problem: Problem | None = None, hosts: Mapping[str, Node] = {}
    ) -> list[StageSpec]:
        """The replica's stages as the estimator takes them (device entries from `cat`); with
        the `problem` and the plan's `hosts` per device, a serving replica on premises runs its
        consumer cards derated where they share a multi-card chassis
        (planner.estimator.hosts.sustained), a group across machines all-reduces over the
        problem's network with the engine's own time per exchange, and each hop crosses the
        route joining its stages' machines (without a `problem`, the devices' own link and the
        replica's one network)."""
        out = []
        w = next((x for x in problem.workloads if x.name == self.name), None) if problem else None
        devices = [s.device for s in self.stages]
        tps = [s.tp for s in self.stages]
        hops = hop_routes(problem, cat, devices, tps) if problem is not None else []
        for j, s in enumerate(self.stages):
            hop = hops[j] if hops else None
            acc = cat.accelerator(s.device)
            host = hosts.get(s.device)
            if (
                problem is not None
                and self.kind == "inference"
                and self.site == Site.PREMISES
                and host is not None
                and host.slots > 1
                and derates(acc, problem)
            ):
                acc = sustained(acc, problem)
            layers = s.layers[1] - s.layers[0] + 1
            profile = layer_profile(w, s.device, s.tp, cat, acc, self.engine)
            if s.across_machines and problem is not None:
                net = group_link(problem, cat, s.device)
                x = exchange_overhead_s(cat, self.engine, s.device)
                lay = exchange_layout(cat, self.engine, cat.model(w.model)) if w else None
                out.append(
                    StageSpec(
                        acc, s.tp, layers, net, exchange_s=x, layout=lay, profile=profile, hop=hop
                    )
                )
            else:
                out.append(StageSpec(acc, s.tp, layers, profile=profile, hop=hop))
        return out


@with_config(_FORBID)
@dataclass
class Plan:
    """A plan, or the reasons there is none. Summary metrics are defined once, here, as
    properties (and in docs/plan-format.md); every report reads them rather than re-deriving."""

    problem: str
    status: Status
    objective_name: str
    objective: float | None
    bound: float | None
    solve_seconds: float
    devices: list[DeviceLine] = field(default_factory=list)
    nodes: list[NodeLine] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    network: NetworkLine | None = None  # ports and switches bought to join the hosts
    capex_usd: float = 0.0
    opex_usd_per_year: float = 0.0
    tco_usd: float = 0.0
    power_w: float = 0.0  # devices and hosts at load
    wall_power_w: float = 0.0  # times PUE
    rack_units: Count = 0
    workloads: list[WorkloadPlan] = field(default_factory=list)
    costs: Costs = field(default_factory=Costs)
    periods: list[PeriodLine] = field(default_factory=list)
    phases: list[PhaseLine] = field(default_factory=list)  # problem `phases`, in order
    energy_kwh_per_year: float = 0.0  # every device in use, at the wall
    # Output tokens served (the demand, not spare capacity) over the energy at the wall (hosts
    # and PUE included), over the whole horizon: the fleet's tokens per joule.
    tokens_per_joule: float | None = None
    carbon: CarbonLine | None = None
    binding_constraints: list[str] = field(default_factory=list)
    slack: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def gap(self) -> float | None:
        """`abs(objective - bound) / abs(objective)`; 0 when proved optimal (the solver proved
        it in its integer units, so a difference here is the rounding of converting back)."""
        if self.objective is None or self.bound is None:
            return None
        if self.status == Status.OPTIMAL:
            return 0.0
        denom = max(abs(self.objective), 1e-9)
        return abs(self.objective - self.bound) / denom

    @property
    def has_plan(self) -> bool:
        return Status(self.status).has_plan

    @property
    def peak_tokens_per_s(self) -> float | None:
        """Output tokens/s of the inference capacity at work in the busiest period (replicas
        serving every period count in each)."""
        if not self.has_plan:
            return None
        names: list[str | None] = [p.name for p in self.periods] or [None]
        return max(
            sum(
                w.tokens_per_s
                for w in self.workloads
                if w.kind == "inference" and (w.period is None or w.period == name)
            )
            for name in names
        )

    @property
    def served_tokens(self) -> float:
        """Output tokens served over the horizon (the demand, not spare capacity)."""
        return sum(p.tokens for p in self.periods)

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Total cost over the horizon per million output tokens served (token-weighted over
        every workload and period)."""
        tokens = self.served_tokens
        return self.tco_usd / tokens * 1e6 if self.has_plan and tokens else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gap"] = self.gap
        d["summary"] = {
            "peak_tokens_per_s": self.peak_tokens_per_s,
            "served_tokens": self.served_tokens,
            "usd_per_million_tokens": self.usd_per_million_tokens,
            "tokens_per_joule": self.tokens_per_joule,
        }
        return d


def plain_data(report: Any) -> dict[str, Any]:
    """A report dataclass as plain data, JSON-ready: tuples become lists all the way down, so
    the data reads the same before and after JSON."""
    out: dict[str, Any] = _lists(asdict(report))
    return out


def _lists(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _lists(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_lists(x) for x in v]
    return v
