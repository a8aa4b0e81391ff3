"""The verifier's workload half: each replica's or job's stages, memory, step times, throughput,
latency and power recomputed from its shape (devices, tensor-parallel degrees, layers, batch,
replicas) with the estimator alone, and compared with the plan's figures.

Every failure names the plan's field by its path in the plan file (`workloads.0.tokens_per_s`)
with the stated and the recomputed figure, and the plan's choices the recomputation read, so a
reader (and the perturbation tests) can see which figure does not hold.

Long because every workload figure (stages, serving, replicas and their cost, demand, request
mixes, training) is checked here beside the figures it depends on, on the plan's hosts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

from planner.catalog import Catalog
from planner.errors import InternalError
from planner.estimator.confidence import margin_kept
from planner.estimator.economics import (
    Period,
    Prices,
    billed_hours,
    device_prices,
    earlier_phase,
    embodied_kg_per_hour,
    energy_usd_per_watt_hour,
    horizon_hours,
    in_fleet,
    ownership_factor,
)
from planner.estimator.network import network_link
from planner.estimator.replica import ReplicaFigures, inference_replica, training_stage_memory
from planner.estimator.request_mix import (
    add_served,
    class_workload,
    fits,
    mix_tokens_served_per_s,
    replica_rate,
)
from planner.estimator.serving import prefill_pool_budget, prefill_prompt, token_budget
from planner.estimator.support import engine_times
from planner.estimator.training_designs import TrainingJob, training_job, training_setup
from planner.plan.slack import BINDING_SLACK, REPLICA_DEVICES
from planner.plan.types import WorkloadPlan
from planner.schema.catalog import Node
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload, Workload

REL_TOL = 1e-6
PREM, CLOUD = "on-premises", "cloud"  # where replicas run (as the plan names them)

# Set by planner.verify_plan to list every failure of a plan file instead of stopping at the first.
COLLECT: ContextVar[list[str] | None] = ContextVar("verify_collect", default=None)


def fail(problem: Problem, what: str) -> None:
    found = COLLECT.get()
    if found is not None:
        found.append(what)
        return
    raise InternalError(f"plan for `{problem.name}` failed verification: {what}")


def close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(1.0, abs(a), abs(b))


def rent_rate(p: Prices) -> float | None:
    """Rent per hour of one device for a job or a cloud replica: on demand, else spot, else
    reserved (the rate the plan's per-token figures and training rent use)."""
    return p.on_demand_usd_per_hour or p.spot_usd_per_hour or p.reserved_usd_per_hour


def same(
    problem: Problem, path: str, stated: float | None, want: float | None, why: str = ""
) -> None:
    """Fail naming `path` unless the stated figure equals the recomputed one."""
    if stated is None and want is None:
        return
    if stated is None or want is None or not close(stated, want):
        fail(problem, f"`{path}`: stated {stated}, recomputed {want}{why}")


@dataclass
class Fleet:
    """What the verifier recomputes from the plan's stages, period by period."""

    n: int
    use: dict[tuple[str, int, str], int] = field(default_factory=dict)
    power: list[float] = field(default_factory=list)  # serving devices (+ rented host share)
    cloud_power: list[float] = field(default_factory=list)  # the part rented devices draw
    tokens: list[float] = field(default_factory=list)
    prem_wh: dict[str, float] = field(default_factory=dict)  # device -> watt-hours on premises
    training_w: float = 0.0  # training jobs on the owned fleet
    training_usd: float = 0.0
    training_kwh: float = 0.0
    training_embodied_kg: float = 0.0
    # Training jobs on the fleet: device-hours at work beyond what the periods count.
    phase_hours: dict[str, float] = field(default_factory=dict)
    idle_wh: float = 0.0  # owned and bought devices held but not at work
    capacity: dict[tuple[str, int], float] = field(default_factory=dict)  # fixed-rate tokens/s
    # Request mixes: (workload, period) -> requests/s per class name decoded, and prefilled.
    decoded: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    prefilled: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    # Plan paths of the replicas whose figures fed each period's tokens and power.
    feeds: list[list[str]] = field(default_factory=list)
    room: dict[str, float] = field(default_factory=dict)  # limit -> recomputed slack
    hosts: dict[str, Node] = field(default_factory=dict)  # device -> its hosts on premises

    def __post_init__(self) -> None:
        self.power = [0.0] * self.n
        self.cloud_power = [0.0] * self.n
        self.tokens = [0.0] * self.n
        self.feeds = [[] for _ in range(self.n)]

    def limit(self, name: str, used: float, limit: float | None) -> None:
        """Room left under a stated limit, as a share of it (the tightest of its uses); a
        ceiling of 0 has no relative room: it binds."""
        if limit is not None:
            here = (limit - used) / limit if limit else 0.0
            self.room[name] = min(self.room.get(name, 1.0), here)

    def add(self, dev: str, p_i: int, site: str, n: int) -> None:
        self.use[(dev, p_i, site)] = self.use.get((dev, p_i, site), 0) + n


def replica_figures(
    problem: Problem,
    cat: Catalog,
    w: Workload,
    wp: WorkloadPlan,
    at: str = "workloads",
    hosts: Mapping[str, Node] = {},
) -> ReplicaFigures | None:
    """The verifier's own figures for a replica: from its stages' devices, tensor-parallel
    degrees and layer counts, the workload and the catalog (None for training); consumer cards
    derated where the plan's `hosts` put them in a multi-card chassis."""
    if not isinstance(w, InferenceWorkload):
        return None
    shape = w
    if w.request_mix is not None:
        names = [c.name for c in w.request_mix]
        if wp.sized_for not in names:
            fail(problem, f"`{at}.sized_for`: `{wp.sized_for}` is no request class of `{w.name}`")
        shape = class_workload(w, names.index(wp.sized_for) if wp.sized_for in names else 0)
    return inference_replica(
        cat.model(w.model),
        w.weights,
        w.kv,
        batch=wp.batch,
        context=shape.context_tokens,
        prompt=prefill_prompt(shape.prompt_tokens, shape.prefix_cache_hit),
        output=shape.output_tokens,
        stages=wp.stage_specs(cat, problem, hosts),
        link=network_link(problem, cat),
        decode_only=wp.role == "decode",
        **engine_times(cat, wp.engine),
    )


def _training_memory(w: TrainingWorkload, cat: Catalog, wp: WorkloadPlan) -> list[dict[str, float]]:
    out = []
    for i, s in enumerate(wp.stages):
        setup = training_setup(w, wp.replicas, s.tp, cat.accelerator(s.device))
        out.append(
            training_stage_memory(
                cat.model(w.model),
                setup,
                layers=s.layers[1] - s.layers[0] + 1,
                last=i == len(wp.stages) - 1,
            )
        )
    return out


def _job(problem: Problem, cat: Catalog, w: TrainingWorkload, wp: WorkloadPlan) -> TrainingJob:
    """The job's figures from its shape: the first stage's device and degree, every stage's
    layers, the data-parallel degree."""
    s0 = wp.stages[0]
    layers = [s.layers[1] - s.layers[0] + 1 for s in wp.stages]
    return training_job(w, problem, cat, cat.accelerator(s0.device), s0.tp, layers, wp.replicas)


def _training_seconds(
    problem: Problem, cat: Catalog, w: TrainingWorkload, wp: WorkloadPlan, at: str
) -> list[float]:
    """Each training stage's time for one micro-batch, from the job's shape (one device type,
    one tensor-parallel degree: the design space of training jobs)."""
    first = wp.stages[0]
    for j, s in enumerate(wp.stages):
        if (s.device, s.tp) != (first.device, first.tp):
            fail(
                problem,
                f"`{at}.stages.{j}`: a training job runs one device type at one tensor-parallel "
                f"degree; stage {j} is {s.device} at tp {s.tp}, stage 0 {first.device} at "
                f"tp {first.tp}",
            )
    if wp.batch != w.micro_batch:
        fail(problem, f"`{at}.batch`: stated {wp.batch}, the job's micro_batch is {w.micro_batch}")
    return list(_job(problem, cat, w, wp).stage_seconds)


def check_stages(
    problem: Problem, cat: Catalog, w: Workload, wp: WorkloadPlan, f: Fleet, at: str
) -> ReplicaFigures | None:
    """Layers placed once each, in contiguous ranges; memory per device and step time
    recomputed here and under the usable share; the plan's stage figures equal them."""
    c = problem.constraints
    m = cat.model(w.model)
    layers = sum(s.layers[1] - s.layers[0] + 1 for s in wp.stages)
    if layers != m.num_layers:
        paths = ", ".join(f"`{at}.stages.{j}.layers`" for j in range(len(wp.stages)))
        fail(problem, f"{paths}: place {layers} layers, the model has {m.num_layers}")
    expect = 0
    for j, s in enumerate(wp.stages):
        if s.layers[0] != expect or s.layers[1] < s.layers[0]:
            fail(problem, f"`{at}.stages.{j}.layers`: {list(s.layers)} does not start at {expect}")
        expect = s.layers[1] + 1
    fig = replica_figures(problem, cat, w, wp, at, f.hosts)
    boundary = [0.0] * len(wp.stages)
    if fig is not None:
        memory = [f.memory for f in fig.stages]
        seconds = [f.seconds for f in fig.stages]
        boundary = [f.boundary_bytes for f in fig.stages]
    else:
        assert isinstance(w, TrainingWorkload)
        memory = _training_memory(w, cat, wp)
        seconds = _training_seconds(problem, cat, w, wp, at)
    for j, (s, mem, sec) in enumerate(zip(wp.stages, memory, seconds, strict=True)):
        st = f"{at}.stages.{j}"
        shape = (
            f" (for {s.device} at `{st}.tp` {s.tp}, `{st}.layers` {list(s.layers)}, "
            f"`{at}.batch` {wp.batch}, `{at}.replicas` {wp.replicas})"
        )
        usable = cat.accelerator(s.device).memory.usable_bytes(c.memory_headroom)
        cap = ""
        if isinstance(w, InferenceWorkload):  # a stated memory_gb caps it
            capped = w.capped_usable(s.device, usable)
            if capped < usable:
                usable, cap = capped, f" (the memory_gb of {w.memory_cap_where(s.device)})"
        f.limit(f"memory:{w.name}", mem["total"], usable)
        if mem["total"] > usable * (1 + REL_TOL):
            fail(
                problem,
                f"`{st}.memory_bytes.total`: needs {mem['total']:.4g} B, usable {usable:.4g} B"
                + cap
                + shape,
            )
        for part in sorted(set(mem) | set(s.memory_bytes)):
            same(
                problem,
                f"{st}.memory_bytes.{part}",
                s.memory_bytes.get(part, 0.0),
                mem.get(part, 0.0),
                shape,
            )
        same(problem, f"{st}.seconds_per_step", s.seconds_per_step, sec, shape)
        same(
            problem, f"{st}.boundary_bytes_per_step", s.boundary_bytes_per_step, boundary[j], shape
        )
    return fig


def devices_of(wp: WorkloadPlan) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in wp.stages:
        out[s.device] = out.get(s.device, 0) + s.tp * wp.replicas
    return out


def check_training(
    problem: Problem,
    cat: Catalog,
    w: TrainingWorkload,
    wp: WorkloadPlan,
    f: Fleet,
    at: str,
    period_hours: float,
) -> None:
    """The job's throughput, power and finish time recomputed from its shape; its energy or
    rent added to the fleet's. On the fleet it is at work for its own hours and held idle for
    the rest (`period_hours`: the demand periods' hours, in each of which a job beside the
    serving holds its devices)."""
    s0 = wp.stages[0]
    job = _job(problem, cat, w, wp)
    shape = (
        f" ({wp.replicas} replicas (`{at}.replicas`) of {len(wp.stages)} stages of {s0.tp} "
        f"x {s0.device})"
    )
    same(problem, f"{at}.tokens_per_s", wp.tokens_per_s, job.tokens_per_s, shape)
    same(problem, f"{at}.power_w", wp.power_w, job.power_w, shape)
    hours = w.token_budget / job.tokens_per_s / 3600
    same(problem, f"{at}.finish_hours", wp.finish_hours, hours, shape)
    same(
        problem,
        f"{at}.tokens_per_joule_at_capacity",
        wp.tokens_per_joule_at_capacity,
        job.tokens_per_s / job.power_w,
    )
    same(
        problem,
        f"{at}.usd_per_million_tokens_at_capacity",
        wp.usd_per_million_tokens_at_capacity,
        None,
    )
    for key in ("ms_per_token", "ttft_s", "sequences", "token_budget"):
        if getattr(wp, key) is not None:
            fail(problem, f"`{at}.{key}`: stated {getattr(wp, key)}, a training job has none")
    f.limit(f"deadline:{w.name}", hours, w.deadline_hours)
    if w.deadline_hours is not None and hours > w.deadline_hours * (1 + REL_TOL):
        fail(problem, f"`{at}.finish_hours`: {hours:.2f} h, deadline {w.deadline_hours} h" + shape)
    devices = devices_of(wp)
    f.training_kwh += job.power_w * hours * problem.horizon.pue / 1000
    if in_fleet(w, problem):
        if wp.site != PREM:
            fail(problem, f"`{at}.site`: `{wp.site}`, but the job runs on the owned fleet")
        phase = earlier_phase(problem, w.name)  # before serving: held in its phase alone
        counted = period_hours if phase is None else 0.0  # hours the periods count at work
        for dev, k in devices.items():
            for q in range(f.n) if phase is None else [f.n + phase]:
                f.add(dev, q, PREM, k)
            f.phase_hours[dev] = f.phase_hours.get(dev, 0.0) + k * (hours - counted)
        f.training_w += job.power_w
        cost = job.power_w * hours * energy_usd_per_watt_hour(problem)
        same(problem, f"{at}.job_usd", wp.job_usd, cost, " (the job's energy on the fleet)")
        f.training_usd += cost
        return
    if wp.site != CLOUD:
        fail(problem, f"`{at}.site`: `{wp.site}`, but the job rents its devices")
    cost = 0.0
    for dev, k in devices.items():
        acc = cat.accelerator(dev)
        prices = device_prices(problem, acc, cat.instances_of(acc.id))
        rate = rent_rate(prices)
        if rate is None:
            fail(problem, f"`{at}.stages`: rents {dev}, which has no rent price")
        paid = -(-k // prices.rent_unit) * prices.rent_unit  # whole instances of rent_unit
        cost += paid * (rate or 0.0) * billed_hours(hours)
        if problem.carbon is not None:
            f.training_embodied_kg += k * hours * embodied_kg_per_hour(problem, acc)
    same(problem, f"{at}.job_usd", wp.job_usd, cost, " (the job's rent for its billed hours)")
    f.training_usd += cost


def _unwritten(problem: Problem, w: InferenceWorkload, wp: WorkloadPlan, at: str) -> None:
    """A training job's figures, and sequences where none are counted (a request mix, or no
    concurrency), on a serving workload: the planner writes none, and a plan stating 0 once
    verified."""
    unwritten = ["finish_hours", "job_usd"]
    if w.request_mix is not None or w.concurrency is None:
        unwritten.append("sequences")
    for key in unwritten:
        if getattr(wp, key) is not None:
            fail(
                problem, f"`{at}.{key}`: stated {getattr(wp, key)}; this serving workload has none"
            )


def _check_serving(
    problem: Problem, w: InferenceWorkload, wp: WorkloadPlan, fig: ReplicaFigures, f: Fleet, at: str
) -> None:
    """Tokens made (only by the sequences that exist), power, time per token, first token and
    end to end: the plan's figures equal the recomputed ones, which meet the ceilings."""
    made = fig.tokens_per_s * wp.replicas
    why = f" (`{at}.replicas` {wp.replicas} x {fig.tokens_per_s:.6g} tokens/s)"
    _unwritten(problem, w, wp, at)
    if w.request_mix is None and w.concurrency is not None:
        slots = wp.batch * len(wp.stages) * wp.replicas
        if wp.sequences is None or not wp.replicas <= wp.sequences <= slots:
            fail(
                problem,
                f"`{at}.sequences`: {wp.sequences} sequences in {slots} slots (`{at}.batch` "
                f"{wp.batch} x {len(wp.stages)} stages x `{at}.replicas` {wp.replicas}); "
                "every replica holds at least one (a replica without a sequence serves nothing)",
            )
        # Little's law: each sequence that exists makes one token per time per token.
        made = (wp.sequences or 0) * 1000.0 / fig.ms_per_token
        why = f" (`{at}.sequences` {wp.sequences} at {fig.ms_per_token:.6g} ms per token)"
    same(problem, f"{at}.tokens_per_s", wp.tokens_per_s, made, why)
    watts = fig.power_w * wp.replicas
    same(
        problem,
        f"{at}.power_w",
        wp.power_w,
        watts,
        f" (`{at}.replicas` {wp.replicas} x {fig.power_w:.6g} W)",
    )
    same(problem, f"{at}.ms_per_token", wp.ms_per_token, fig.ms_per_token)
    same(problem, f"{at}.ttft_s", wp.ttft_s, fig.ttft_s)
    same(
        problem,
        f"{at}.tokens_per_joule_at_capacity",
        wp.tokens_per_joule_at_capacity,
        fig.tokens_per_s * wp.replicas / watts,
        f" (`{at}.replicas` {wp.replicas})",
    )
    if w.request_mix is None:
        prompt, output = prefill_prompt(w.prompt_tokens, w.prefix_cache_hit), w.output_tokens
    else:
        names = [c.name for c in w.request_mix]
        cls = class_workload(w, names.index(wp.sized_for) if wp.sized_for in names else 0)
        prompt, output = prefill_prompt(cls.prompt_tokens, cls.prefix_cache_hit), cls.output_tokens
    budget = math.ceil(
        {"prefill": prefill_pool_budget(prompt), "decode": float(wp.batch)}.get(
            wp.role, token_budget(wp.batch, prompt, output)
        )
    )
    same(problem, f"{at}.token_budget", wp.token_budget, budget, f" (`{at}.batch` {wp.batch})")
    f.limit(f"latency:{w.name}", fig.ms_per_token, w.max_ms_per_token)
    if w.max_ms_per_token is not None and w.max_ms_per_token * (1 + REL_TOL) < fig.ms_per_token:
        fail(
            problem,
            f"`{at}.ms_per_token`: {fig.ms_per_token:.3f} ms over the ceiling "
            f"max_ms_per_token {w.max_ms_per_token}",
        )
    if w.request_mix is not None:
        return  # a mix's ceilings hold at its load: each class's rate is checked against them
    e2e = fig.ttft_s + (w.output_tokens - 1) * fig.ms_per_token / 1e3
    f.limit(f"ttft:{w.name}", fig.ttft_s, w.max_ttft_s)
    f.limit(f"e2e:{w.name}", e2e, w.max_e2e_s)
    if w.max_ttft_s is not None and w.max_ttft_s * (1 + REL_TOL) < fig.ttft_s:
        fail(
            problem,
            f"`{at}.ttft_s`: first token after {fig.ttft_s:.3f} s, over the ceiling "
            f"max_ttft_s {w.max_ttft_s}",
        )
    if w.max_e2e_s is not None and w.max_e2e_s * (1 + REL_TOL) < e2e:
        fail(
            problem,
            f"`{at}`: requests take {e2e:.3f} s end to end, over the ceiling "
            f"max_e2e_s {w.max_e2e_s}",
        )


def replica_cost(
    problem: Problem,
    cat: Catalog,
    wp: WorkloadPlan,
    watts: float,
    hours: float,
    hosts: dict[str, Node],
) -> float:
    """What the replicas cost over `hours`: on premises their devices' and their slots' share
    of their hosts' purchase (`hosts`: the plan's host per device) with upkeep (the hours'
    share of the horizon) and energy; in the cloud, their rent for the job."""
    devices = devices_of(wp)
    if wp.site == CLOUD:
        return hours * sum(
            n * (rent_rate(device_prices(problem, cat.accelerator(x), cat.instances_of(x))) or 0.0)
            for x, n in devices.items()
        )
    own = ownership_factor(problem)
    capital = 0.0
    for x, n in devices.items():
        acc = cat.accelerator(x)
        node = hosts.get(x) or cat.host_for(acc)
        assert node is not None
        capital += (
            n
            * (
                (device_prices(problem, acc, cat.instances_of(acc.id)).purchase_usd or 0.0)
                + node.price_usd / node.slots
            )
            * own
        )
    share = hours / horizon_hours(problem)
    return capital * share + watts * hours * energy_usd_per_watt_hour(problem)


def check_replicas(
    problem: Problem,
    cat: Catalog,
    w: InferenceWorkload,
    wp: WorkloadPlan,
    fig: ReplicaFigures,
    f: Fleet,
    periods: list[Period],
    at: str,
) -> None:
    """Throughput, latency and power recomputed from the replica's stages; the plan's figures
    must equal them, and the recomputed ones must meet the ceilings."""
    names = [p.name for p in periods]
    p_i = 0
    if problem.demand is not None:
        if wp.period in names:
            p_i = names.index(wp.period)
        else:
            fail(problem, f"`{at}.period`: `{wp.period}` is no demand period")
    elif wp.period is not None:
        fail(problem, f"`{at}.period`: `{wp.period}`, but the problem has no demand periods")
    _check_serving(problem, w, wp, fig, f, at)
    if problem.objective.goal in ("max_throughput", "max_tokens_per_joule"):
        cap = REPLICA_DEVICES // sum(s.tp for s in wp.stages) + 1
        if wp.replicas <= cap and (cap - wp.replicas) / cap <= BINDING_SLACK:
            f.limit(f"design:replicas:{w.name}", wp.replicas, cap)
    if wp.site not in (PREM, CLOUD):
        fail(problem, f"`{at}.site`: unknown site `{wp.site}`")
    hours = periods[p_i].hours
    host_w = 0.0
    for dev, k in devices_of(wp).items():
        f.add(dev, p_i, wp.site, k)
        if wp.site == CLOUD:
            node = cat.host_for(cat.accelerator(dev))
            assert node is not None
            host_w += k * node.power_overhead_w / node.slots
    watts = fig.power_w * wp.replicas  # the verifier's own figure
    f.power[p_i] += watts + host_w
    if wp.site == CLOUD:
        f.cloud_power[p_i] += watts + host_w
    f.feeds[p_i].append(at)
    cost = replica_cost(problem, cat, wp, watts, hours, f.hosts)
    made = fig.tokens_per_s * wp.replicas * hours * 3600
    same(
        problem,
        f"{at}.usd_per_million_tokens_at_capacity",
        wp.usd_per_million_tokens_at_capacity,
        cost / made * 1e6 if made else None,
        f" (`{at}.replicas` {wp.replicas} at `{at}.site` {wp.site})",
    )
    if wp.site == PREM:
        tdp: dict[str, float] = {}
        for s in wp.stages:
            tdp[s.device] = tdp.get(s.device, 0.0) + s.tp * cat.accelerator(s.device).power.tdp_w
        total = sum(tdp.values())
        for dev, v in tdp.items():
            f.prem_wh[dev] = f.prem_wh.get(dev, 0.0) + watts * hours * v / total
    if w.request_mix is None:
        f.capacity[(w.name, p_i)] = f.capacity.get((w.name, p_i), 0.0) + wp.tokens_per_s
        return
    _check_mix(problem, cat, w, wp, f, periods[p_i], p_i, at)


def _check_mix(
    problem: Problem,
    cat: Catalog,
    w: InferenceWorkload,
    wp: WorkloadPlan,
    f: Fleet,
    period: Period,
    p_i: int,
    at: str,
) -> None:
    """Each class's requests/s must fit the replicas' time; the tokens they serve are counted."""
    assert w.request_mix is not None
    classes = {c.name: c for c in w.request_mix}
    sized = classes.get(wp.sized_for or "")
    if sized is None:
        fail(problem, f"`{at}.sized_for`: `{wp.sized_for}` is no request class of `{w.name}`")
        return
    time_used = 0.0
    specs = wp.stage_specs(cat, problem, f.hosts)
    link = network_link(problem, cat)
    for name, served in wp.requests_per_s.items():
        cls = classes.get(name)
        if cls is None:
            fail(problem, f"`{at}.requests_per_s.{name}`: no request class `{name}`")
            continue
        rate = _measured(w, wp, name) if wp.role == "both" else None
        if rate is None:
            if not fits(cls, sized):
                fail(
                    problem,
                    f"`{at}.requests_per_s.{name}`: served on replicas sized for `{sized.name}`",
                )
            rate = replica_rate(w, cat, link, wp.batch, specs, sized, cls, wp.role, wp.engine)
        if rate <= 0:
            fail(
                problem,
                f"`{at}.requests_per_s.{name}`: the replicas cannot serve it within its ceilings",
            )
            continue
        time_used += served / rate
    if time_used > wp.replicas * (1 + 1e-4):
        fail(
            problem,
            f"`{at}.requests_per_s` needs {time_used:.4f} replicas' time, "
            f"`{at}.replicas` is {wp.replicas}",
        )
    # Requests served are counted once every group is in (mix_tokens): a decode pool's make
    # the tokens, a prefill pool's let them start.
    sides = (f.decoded.setdefault((w.name, p_i), {}), f.prefilled.setdefault((w.name, p_i), {}))
    add_served(*sides, wp.role, wp.requests_per_s)
    if wp.role != "prefill":
        f.feeds[p_i].append(f"{at}.requests_per_s")


def mix_tokens(problem: Problem, w: InferenceWorkload, periods: list[Period], f: Fleet) -> None:
    """Output tokens a request mix serves in each period, from the requests/s the plan's groups
    give each class: no more requests than exist (estimator.request_mix.mix_tokens_served_per_s)."""
    goal = problem.objective.goal in ("max_throughput", "max_tokens_per_joule")
    for q, p in enumerate(periods):
        if (w.name, q) not in f.decoded:
            continue
        decoded, pre = f.decoded[(w.name, q)], f.prefilled.get((w.name, q), {})
        rate = mix_tokens_served_per_s(w, p.scale, decoded, pre, throughput_goal=goal)
        f.tokens[q] += rate * p.hours * 3600


def _check_roles(
    problem: Problem, w: InferenceWorkload, here: list[tuple[str, WorkloadPlan]]
) -> None:
    """Prefill and decode pools only where the workload's `disaggregation` allows them."""
    for at, x in here:
        if w.disaggregation == "off" and x.role != "both":
            fail(problem, f"`{at}.role`: a {x.role} pool; `{w.name}` has disaggregation off")
        if w.disaggregation == "on" and x.role == "both":
            fail(problem, f"`{at}.role`: whole requests; `{w.name}` has disaggregation on")


def _measured(w: InferenceWorkload, wp: WorkloadPlan, name: str) -> float | None:
    if len(wp.stages) != 1:
        return None
    st = wp.stages[0]
    for m in w.capacities:
        if (m.device, m.tp, m.request_class) == (st.device, st.tp, name):
            return m.requests_per_s
    return None


def check_demand(
    problem: Problem,
    cat: Catalog,
    w: InferenceWorkload,
    parts: list[tuple[str, WorkloadPlan]],
    periods: list[Period],
    f: Fleet,
) -> None:
    """Each period's demand is served: every request class in full (mixes), the tokens/s floor
    (less the risk margin on designs the calibration does not back), and exactly the sequences
    that exist (concurrency)."""
    for p in periods:
        here = [(at, x) for at, x in parts if problem.demand is None or x.period == p.name]
        if not here:
            fail(problem, f"`workloads`: `{w.name}` has no replicas in period `{p.name}`")
        if w.request_mix is not None:
            _check_roles(problem, w, here)
            for c in w.request_mix:
                need = (w.requests_per_s or 0.0) * c.share * p.scale
                # Each request is prefilled and decoded: whole-request replicas count for both.
                for side in ("prefill", "decode"):
                    mine = [(at, x) for at, x in here if x.role in ("both", side)]
                    got = sum(x.requests_per_s.get(c.name, 0.0) for _, x in mine)
                    if got < need * (1 - 1e-4):
                        paths = ", ".join(f"`{at}.requests_per_s.{c.name}`" for at, _ in mine)
                        fail(
                            problem,
                            f"{paths or '`workloads`'}: {side}s {got:.6g} requests/s of "
                            f"`{c.name}` in `{p.name}`, below the demand {need:.6g}",
                        )
            continue
        # Tokens/s less the risk margin where the calibration (recomputed) does not back them.
        margin = problem.constraints.risk_margin
        thr = sum(
            x.tokens_per_s * margin_kept(cat, margin, devices_of(x), x.engine or "", x.batch)
            for _, x in here
        )
        need_tps = w.min_tokens_per_s * p.scale
        if need_tps > 0:
            key = f"throughput:{w.name}"
            f.room[key] = min(f.room.get(key, math.inf), (thr - need_tps) / need_tps)
        # With no replica here, the finding names the workload (the plan has nothing to point at).
        none_here = f"`workloads` (`{w.name}`)"
        paths = ", ".join(f"`{at}.tokens_per_s`" for at, _ in here) or none_here
        if thr < w.min_tokens_per_s * p.scale * (1 - REL_TOL):
            kept = f" (less the risk margin {margin:.0%} on uncalibrated designs)" if margin else ""
            fail(
                problem,
                f"{paths}: serve {thr:.1f} tokens/s{kept} in `{p.name}`, the floor "
                f"min_tokens_per_s is {w.min_tokens_per_s * p.scale}",
            )
        if w.concurrency is None:
            continue
        held = sum(x.sequences or 0 for _, x in here)
        need_seq = math.ceil(w.concurrency * p.scale - 1e-9)
        if held != need_seq:
            seqs = ", ".join(f"`{at}.sequences`" for at, _ in here) or none_here
            fail(problem, f"{seqs}: hold {held} sequences; {need_seq} exist in `{p.name}`")
        # Output never exceeds the sequences that exist over the time per token.
        fastest = min((x.ms_per_token or math.inf for _, x in here), default=math.inf)
        if thr > need_seq * 1000.0 / fastest * (1 + REL_TOL):
            fail(problem, f"{paths}: claim {thr:.1f} tokens/s from {need_seq} sequences")
