"""Re-check a plan without the solver: recompute every stage from the estimator and every
constraint from the catalog and the problem. A plan that fails is a bug and raises.

Long because every recomputed figure (stages, serving, fleet, costs, energy, carbon) is checked
here, beside the others it depends on, in the order the plan builder derives them."""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field

from planner.catalog import Catalog
from planner.errors import InternalError
from planner.estimator.economics import (
    RENT_MODES,
    Period,
    demand_periods,
    device_prices,
    embodied_kg_per_hour,
    embodied_share,
    energy_usd_per_watt_hour,
    grid_intensity,
    horizon_hours,
    host_idle_hours,
    idle_device_hours,
    in_fleet,
    ownership_factor,
    reserved_hours,
)
from planner.estimator.memory import TrainingSetup
from planner.estimator.replica import (
    ReplicaFigures,
    inference_replica,
    training_stage_memory,
)
from planner.estimator.request_mix import class_workload, fits, replica_rate
from planner.estimator.serving import prefill_prompt
from planner.plan.types import Costs, Plan, WorkloadPlan
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload, Workload

REL_TOL = 1e-6
PREM, CLOUD = "on-premises", "cloud"  # where replicas run (as the plan names them)


# Set by planner.verify_plan to list every failure of a plan file instead of stopping at the first.
COLLECT: ContextVar[list[str] | None] = ContextVar("verify_collect", default=None)


def _fail(problem: Problem, what: str) -> None:
    found = COLLECT.get()
    if found is not None:
        found.append(what)
        return
    raise InternalError(f"plan for `{problem.name}` failed verification: {what}")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(1.0, abs(a), abs(b))


def verify(plan: Plan, problem: Problem, cat: Catalog) -> None:
    """Raise InternalError if any constraint or figure of `plan` does not hold."""
    periods = demand_periods(problem)
    if [(p.name, p.hours, p.scale) for p in plan.periods] != [
        (p.name, p.hours, p.scale) for p in periods
    ]:
        _fail(problem, "the plan's periods are not the problem's demand periods")
    f = _Fleet(len(periods))
    by_workload: dict[str, list[WorkloadPlan]] = {}
    for wp in plan.workloads:
        by_workload.setdefault(wp.name, []).append(wp)
    for w in problem.workloads:
        parts = by_workload.get(w.name, [])
        if not parts:
            _fail(problem, f"workload `{w.name}` has no replicas")
        for wp in parts:
            fig = _check_stages(problem, cat, w, wp)
            if isinstance(w, TrainingWorkload):
                _check_training(problem, cat, w, wp, f, len(periods))
            else:
                assert fig is not None
                _check_replicas(problem, cat, w, wp, fig, f, periods)
        if isinstance(w, InferenceWorkload):
            _check_demand(problem, w, parts, periods)
            for q, p in enumerate(periods):
                if (w.name, q) in f.capacity:
                    # Tokens served: the demand when one is stated, else the capacity.
                    cap = f.capacity[(w.name, q)]
                    rate = min(cap, w.min_tokens_per_s * p.scale) if w.min_tokens_per_s else cap
                    f.tokens[q] += rate * p.hours * 3600
    _check_fleet(plan, problem, cat, f, periods)
    _check_costs(plan, problem, cat, f, periods)
    _check_energy_and_carbon(plan, problem, cat, f, periods)


@dataclass
class _Fleet:
    """What the verifier recomputes from the plan's stages, period by period."""

    n: int
    use: dict[tuple[str, int, str], int] = field(default_factory=dict)
    power: list[float] = field(default_factory=list)  # serving devices (+ rented host share)
    tokens: list[float] = field(default_factory=list)
    prem_wh: dict[str, float] = field(default_factory=dict)  # device -> watt-hours on premises
    training_w: float = 0.0  # training jobs on the owned fleet
    training_usd: float = 0.0
    training_kwh: float = 0.0
    training_embodied_kg: float = 0.0
    idle_wh: float = 0.0  # owned and bought devices held but not at work
    capacity: dict[tuple[str, int], float] = field(default_factory=dict)  # fixed-rate tokens/s

    def __post_init__(self) -> None:
        self.power = [0.0] * self.n
        self.tokens = [0.0] * self.n

    def add(self, dev: str, p_i: int, site: str, n: int) -> None:
        self.use[(dev, p_i, site)] = self.use.get((dev, p_i, site), 0) + n


def replica_figures(
    problem: Problem, cat: Catalog, w: Workload, wp: WorkloadPlan
) -> ReplicaFigures | None:
    """The verifier's own figures for a replica: from its stages' devices, tensor-parallel
    degrees and layer counts, the workload and the catalog (None for training)."""
    if not isinstance(w, InferenceWorkload):
        return None
    shape = w
    if w.request_mix is not None:
        names = [c.name for c in w.request_mix]
        if wp.sized_for not in names:
            _fail(problem, f"`{w.name}` replicas name no request class they are sized for")
        shape = class_workload(w, names.index(wp.sized_for or ""))
    return inference_replica(
        cat.model(w.model),
        w.weights,
        w.kv,
        batch=wp.batch,
        context=shape.context_tokens,
        prompt=prefill_prompt(shape.prompt_tokens, shape.prefix_cache_hit),
        output=shape.output_tokens,
        stages=wp.stage_specs(cat),
        link=cat.link(problem.constraints.network),
    )


def _training_memory(w: TrainingWorkload, cat: Catalog, wp: WorkloadPlan) -> list[dict[str, float]]:
    out = []
    for i, s in enumerate(wp.stages):
        setup = TrainingSetup(
            method=w.method,
            optimizer=w.optimizer,
            zero_stage=w.zero_stage,
            data_parallel=wp.replicas,
            tensor_parallel=s.tp,
            seq_len=w.seq_len,
            micro_batch=w.micro_batch,
            recompute=w.recompute,
            lora_rank=w.lora_rank,
        )
        out.append(
            training_stage_memory(
                cat.model(w.model),
                setup,
                layers=s.layers[1] - s.layers[0] + 1,
                last=i == len(wp.stages) - 1,
            )
        )
    return out


def _check_stages(
    problem: Problem, cat: Catalog, w: Workload, wp: WorkloadPlan
) -> ReplicaFigures | None:
    """Layers placed once each, in contiguous ranges; memory per device recomputed here and
    under the usable share; the plan's stage figures equal the recomputation."""
    c = problem.constraints
    m = cat.model(w.model)
    layers = sum(s.layers[1] - s.layers[0] + 1 for s in wp.stages)
    if layers != m.num_layers:
        _fail(problem, f"`{w.name}` places {layers} layers, the model has {m.num_layers}")
    expect = 0
    for s in wp.stages:
        if s.layers[0] != expect or s.layers[1] < s.layers[0]:
            _fail(problem, f"`{w.name}` layer ranges are not contiguous")
        expect = s.layers[1] + 1
    fig = replica_figures(problem, cat, w, wp)
    if fig is not None:
        memory = [f.memory for f in fig.stages]
        seconds = [f.seconds for f in fig.stages]
    else:
        assert isinstance(w, TrainingWorkload)
        memory = _training_memory(w, cat, wp)
        seconds = [0.0] * len(wp.stages)
    for s, mem, sec in zip(wp.stages, memory, seconds, strict=True):
        usable = cat.accelerator(s.device).memory.bytes * (1.0 - c.memory_headroom)
        if mem["total"] > usable * (1 + REL_TOL):
            _fail(
                problem,
                f"`{w.name}` stage on {s.device} needs {mem['total']:.4g} B, usable {usable:.4g} B",
            )
        if not _close(s.memory_bytes.get("total", -1.0), mem["total"]):
            _fail(
                problem,
                f"`{w.name}` stage on {s.device}: memory stated {s.memory_bytes.get('total')} B, "
                f"recomputed {mem['total']:.6g} B",
            )
        for part in sorted(set(mem) | set(s.memory_bytes)):
            if part != "total" and not _close(s.memory_bytes.get(part, 0.0), mem.get(part, 0.0)):
                _fail(
                    problem,
                    f"`{w.name}` stage on {s.device}: memory_bytes.{part} stated "
                    f"{s.memory_bytes.get(part)} B, recomputed {mem.get(part, 0.0):.6g} B",
                )
        if not _close(s.seconds_per_step, sec):
            _fail(
                problem,
                f"`{w.name}` stage on {s.device}: step stated {s.seconds_per_step} s, "
                f"recomputed {sec:.6g} s",
            )
    return fig


def _devices_of(wp: WorkloadPlan) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in wp.stages:
        out[s.device] = out.get(s.device, 0) + s.tp * wp.replicas
    return out


def _check_training(
    problem: Problem, cat: Catalog, w: TrainingWorkload, wp: WorkloadPlan, f: _Fleet, n: int
) -> None:
    hours = wp.finish_hours or 0.0
    if w.deadline_hours is not None and hours > w.deadline_hours * (1 + REL_TOL):
        _fail(problem, f"`{w.name}` finishes in {hours:.2f} h, deadline {w.deadline_hours} h")
    if not _close(hours, w.token_budget / wp.tokens_per_s / 3600):
        _fail(problem, f"`{w.name}` finish time does not follow from its throughput")
    devices = _devices_of(wp)
    f.training_kwh += wp.power_w * hours * problem.horizon.pue / 1000
    if in_fleet(w, problem):
        if wp.site != PREM:
            _fail(problem, f"`{w.name}` should run on the owned fleet")
        for dev, k in devices.items():
            for q in range(n):
                f.add(dev, q, PREM, k)
        f.training_w += wp.power_w
        f.training_usd += wp.power_w * hours * energy_usd_per_watt_hour(problem)
        return
    for dev, k in devices.items():
        acc = cat.accelerator(dev)
        p = device_prices(problem, acc)
        rate = p.on_demand_usd_per_hour or p.spot_usd_per_hour or p.reserved_usd_per_hour
        if rate is None:
            _fail(problem, f"`{w.name}` rents {dev}, which has no rent price")
        f.training_usd += k * (rate or 0.0) * hours
        if problem.carbon is not None:
            f.training_embodied_kg += k * hours * embodied_kg_per_hour(problem, acc)


def _check_serving(
    problem: Problem, w: InferenceWorkload, wp: WorkloadPlan, fig: ReplicaFigures
) -> None:
    """Tokens made (only by the sequences that exist), power, time per token, first token and
    end to end: the plan's figures equal the recomputed ones, which meet the ceilings."""
    made = fig.tokens_per_s * wp.replicas
    if w.request_mix is None and w.concurrency is not None:
        slots = wp.batch * len(wp.stages) * wp.replicas
        if wp.sequences is None or not 0 <= wp.sequences <= slots:
            _fail(problem, f"`{w.name}` holds {wp.sequences} sequences in {slots} slots")
        # Little's law: each sequence that exists makes one token per time per token.
        made = (wp.sequences or 0) * 1000.0 / fig.ms_per_token
    if not _close(made, wp.tokens_per_s):
        _fail(problem, f"`{w.name}` throughput {wp.tokens_per_s} != recomputed {made}")
    if not _close(fig.power_w * wp.replicas, wp.power_w):
        _fail(problem, f"`{w.name}` power {wp.power_w} W != recomputed {fig.power_w * wp.replicas}")
    if wp.ms_per_token is None or not _close(fig.ms_per_token, wp.ms_per_token):
        _fail(problem, f"`{w.name}` time per token {wp.ms_per_token} != {fig.ms_per_token}")
    if wp.ttft_s is None or not _close(fig.ttft_s, wp.ttft_s):
        _fail(problem, f"`{w.name}` time to first token {wp.ttft_s} != {fig.ttft_s}")
    if w.max_ms_per_token is not None and w.max_ms_per_token * (1 + REL_TOL) < fig.ms_per_token:
        _fail(problem, f"`{w.name}` time per token {fig.ms_per_token:.3f} ms over the ceiling")
    if w.request_mix is not None:
        return  # a mix's ceilings hold at its load: each class's rate is checked against them
    if w.max_ttft_s is not None and w.max_ttft_s * (1 + REL_TOL) < fig.ttft_s:
        _fail(problem, f"`{w.name}` first token after {fig.ttft_s:.3f} s, over the ceiling")
    if w.max_e2e_s is not None:
        e2e = fig.ttft_s + (w.output_tokens - 1) * fig.ms_per_token / 1e3
        if w.max_e2e_s * (1 + REL_TOL) < e2e:
            _fail(problem, f"`{w.name}` requests take {e2e:.3f} s end to end, over the ceiling")


def _check_replicas(
    problem: Problem,
    cat: Catalog,
    w: InferenceWorkload,
    wp: WorkloadPlan,
    fig: ReplicaFigures,
    f: _Fleet,
    periods: list[Period],
) -> None:
    """Throughput, latency and power recomputed from the replica's stages; the plan's figures
    must equal them, and the recomputed ones must meet the ceilings."""
    names = [p.name for p in periods]
    if problem.demand is None:
        p_i = 0
    elif wp.period in names:
        p_i = names.index(wp.period)
    else:
        _fail(problem, f"`{w.name}` replicas serve an unknown period `{wp.period}`")
    _check_serving(problem, w, wp, fig)
    if wp.site not in (PREM, CLOUD):
        _fail(problem, f"`{w.name}` runs at an unknown site `{wp.site}`")
    hours = periods[p_i].hours
    host_w = 0.0
    for dev, k in _devices_of(wp).items():
        f.add(dev, p_i, wp.site, k)
        if wp.site == CLOUD:
            node = cat.host_for(cat.accelerator(dev))
            assert node is not None
            host_w += k * node.power_overhead_w / node.slots
    watts = fig.power_w * wp.replicas  # the verifier's own figure, equal to the plan's above
    f.power[p_i] += watts + host_w
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
    # Each class's requests/s must fit the replicas' time.
    classes = {c.name: c for c in w.request_mix}
    sized = classes.get(wp.sized_for or "")
    if sized is None:
        _fail(problem, f"`{w.name}` replicas name no request class they are sized for")
        return
    time_used = 0.0
    specs = wp.stage_specs(cat)
    link = cat.link(problem.constraints.network)
    for name, served in wp.requests_per_s.items():
        cls = classes[name]
        rate = _measured(w, wp, name)
        if rate is None:
            if not fits(cls, sized):
                _fail(problem, f"`{w.name}` serves `{name}` on replicas sized for `{sized.name}`")
            rate = replica_rate(w, cat, link, wp.batch, specs, sized, cls)
        if rate <= 0:
            _fail(problem, f"`{w.name}` replicas cannot serve `{name}` within its ceilings")
        time_used += served / rate
    if time_used > wp.replicas * (1 + 1e-4):
        _fail(problem, f"`{w.name}` needs {time_used:.4f} replicas' time, has {wp.replicas}")
    scale = periods[p_i].scale
    total_rate = (w.requests_per_s or 0.0) * scale
    tok = sum((w.requests_per_s or 0.0) * c.share * scale * c.output_tokens for c in w.request_mix)
    f.tokens[p_i] += tok * sum(wp.requests_per_s.values()) / total_rate * hours * 3600


def _measured(w: InferenceWorkload, wp: WorkloadPlan, name: str) -> float | None:
    if len(wp.stages) != 1:
        return None
    st = wp.stages[0]
    for m in w.capacity:
        if (m.device, m.tp, m.request_class) == (st.device, st.tp, name):
            return m.requests_per_s
    return None


def _check_demand(
    problem: Problem, w: InferenceWorkload, parts: list[WorkloadPlan], periods: list[Period]
) -> None:
    for p in periods:
        here = [x for x in parts if problem.demand is None or x.period == p.name]
        if not here:
            _fail(problem, f"`{w.name}` has no replicas in period `{p.name}`")
        if w.request_mix is not None:
            for c in w.request_mix:
                need = (w.requests_per_s or 0.0) * c.share * p.scale
                got = sum(x.requests_per_s.get(c.name, 0.0) for x in here)
                if got < need * (1 - 1e-4):
                    _fail(
                        problem,
                        f"`{w.name}` serves {got:.4g} requests/s of `{c.name}` in `{p.name}`, "
                        f"needs {need:.4g}",
                    )
            continue
        thr = sum(x.tokens_per_s for x in here)
        if thr < w.min_tokens_per_s * p.scale * (1 - REL_TOL):
            _fail(problem, f"`{w.name}` serves {thr:.1f} tokens/s < {w.min_tokens_per_s * p.scale}")
        if w.concurrency is None:
            continue
        held = sum(x.sequences or 0 for x in here)
        need = math.ceil(w.concurrency * p.scale - 1e-9)
        if held != need:
            _fail(problem, f"`{w.name}` holds {held} sequences; {need} exist in `{p.name}`")
        # Output never exceeds the sequences that exist over the time per token.
        fastest = min(x.ms_per_token or math.inf for x in here)
        if thr > need * 1000.0 / fastest * (1 + REL_TOL):
            _fail(problem, f"`{w.name}` claims {thr:.1f} tokens/s from {need} sequences")


def _check_fleet(
    plan: Plan, problem: Problem, cat: Catalog, f: _Fleet, periods: list[Period]
) -> None:
    """The bill of materials holds every device at work, in modes the problem allows, and
    stays under the fleet limits.

    Long because each device line's figures are recomputed in one pass over its periods.
    """
    c = problem.constraints
    h = problem.horizon
    H = horizon_hours(problem)
    n = len(periods)
    owned_inv: dict[str, int] = {}
    for o in c.inventory:
        owned_inv[o.device] = owned_inv.get(o.device, 0) + o.count
    listed = {x.type for x in plan.devices}
    if listed != {dev for dev, _, _ in f.use}:
        _fail(problem, "the device lines are not the devices the stages use")
    avail = problem.market.spot_availability
    spot_needed = [0] * n
    held = [0] * n
    own = ownership_factor(problem)
    usd_wh = energy_usd_per_watt_hour(problem)
    for line in plan.devices:
        dev = line.type
        acc = cat.accelerator(dev)
        prices = device_prices(problem, acc)
        node = cat.host_for(acc)
        assert node is not None
        prem = [f.use.get((dev, q, PREM), 0) for q in range(n)]
        cloud = [f.use.get((dev, q, CLOUD), 0) for q in range(n)]
        fleet = max(prem)
        if line.owned + line.bought != fleet or line.owned > owned_inv.get(dev, 0):
            _fail(problem, f"{dev}: owned {line.owned} + bought {line.bought} != fleet {fleet}")
        if line.bought and ("buy" not in h.modes or prices.purchase_usd is None):
            _fail(problem, f"{dev}: bought, but buying it is not allowed or has no price")
        od = [plan.periods[q].devices.get(dev, {}).get("on_demand", 0) for q in range(n)]
        sp = [plan.periods[q].devices.get(dev, {}).get("spot", 0) for q in range(n)]
        for q in range(n):
            rv = plan.periods[q].devices.get(dev, {}).get("reserved", 0)
            if cloud[q] and rv != line.reserved:
                _fail(problem, f"{dev}: reserved count differs between periods")
            if cloud[q] > line.reserved + od[q] + math.floor(avail * sp[q] + 1e-9):
                _fail(problem, f"{dev}: {cloud[q]} rented devices at work, fewer held")
            spot_needed[q] += max(0, cloud[q] - line.reserved - od[q])
            held[q] += fleet + cloud[q]
        for mode, count in (("reserved", line.reserved), ("on_demand", max(od)), ("spot", max(sp))):
            if count and (mode not in h.modes or prices.rate(mode) is None):
                _fail(problem, f"{dev}: {mode} is not allowed or has no price")
        if line.count != fleet + line.reserved + max(od) + max(sp):
            held_now = fleet + line.reserved + max(od) + max(sp)
            _fail(problem, f"{dev}: count {line.count} != recomputed devices held {held_now}")
        if (line.on_demand, line.spot) != (max(od), max(sp)):
            _fail(problem, f"{dev}: on-demand or spot peak is wrong")
        hours = {"on-premises": sum(u * p.hours for u, p in zip(prem, periods, strict=True))}
        rent: dict[str, float] = {}
        if line.reserved:
            hours["reserved"] = line.reserved * reserved_hours(problem, prices)
            rent["reserved"] = hours["reserved"] * (prices.reserved_usd_per_hour or 0.0)
        for mode, counts, rate in (
            ("on_demand", od, prices.on_demand_usd_per_hour),
            ("spot", sp, prices.spot_usd_per_hour),
        ):
            if any(counts):
                hours[mode] = sum(k * p.hours for k, p in zip(counts, periods, strict=True))
                rent[mode] = hours[mode] * (rate or 0.0)
        _same(problem, f"{dev} device-hours", line.device_hours, hours)
        _same(problem, f"{dev} rent", line.rent_usd, rent)
        purchase = prices.purchase_usd or 0.0
        if not _close(line.total_usd, purchase * line.bought):
            _fail(problem, f"{dev}: purchase total is wrong")
        host_bought = -(-line.bought // node.slots)
        maint = (purchase * line.bought + node.price_usd * host_bought) * (own - 1)
        if not _close(line.maintenance_usd, maint):
            _fail(problem, f"{dev}: maintenance {line.maintenance_usd} != {maint}")
        idle_wh = acc.power.idle_w * idle_device_hours(problem, fleet, hours["on-premises"])
        f.idle_wh += idle_wh
        dev_usd = (f.prem_wh.get(dev, 0.0) + idle_wh) * usd_wh
        if not _close(line.energy_usd, dev_usd):
            _fail(problem, f"{dev}: energy {line.energy_usd} != {dev_usd}")
        util = hours["on-premises"] / (fleet * H) if fleet else None
        if (util is None) != (line.utilization is None) or (
            util is not None and not _close(util, line.utilization or 0.0)
        ):
            _fail(problem, f"{dev}: utilization {line.utilization} != {util}")
        watts = (
            f.prem_wh.get(dev, 0.0) / hours["on-premises"]
            if hours["on-premises"]
            else acc.power.tdp_w
        )
        be = None
        if prices.purchase_usd is not None and prices.on_demand_usd_per_hour is not None:
            margin = (
                prices.on_demand_usd_per_hour
                - (watts + node.power_overhead_w / node.slots) * usd_wh
            )
            if margin > 0:
                be = (prices.purchase_usd + node.price_usd / node.slots) * own / (H * margin)
        if (be is None) != (line.break_even_utilization is None) or (
            be is not None and not _close(be, line.break_even_utilization or 0.0)
        ):
            _fail(problem, f"{dev}: break-even {line.break_even_utilization} != {be}")
        if c.allowed_devices is not None and dev not in c.allowed_devices and dev not in owned_inv:
            _fail(problem, f"{dev} is not allowed")
        if dev in c.excluded_devices:
            _fail(problem, f"{dev} is excluded")
        if c.require_ecc and not acc.ecc:
            _fail(problem, f"{dev} has no ECC")
    for q in range(n):
        total = sum(f.use.get((d, q, s), 0) for d in listed for s in (PREM, CLOUD))
        if spot_needed[q] > problem.market.spot_max_share * total * (1 + REL_TOL) + 1e-9:
            _fail(problem, f"spot carries more than its share in `{periods[q].name}`")
        if c.max_devices is not None and held[q] > c.max_devices:
            _fail(problem, f"{held[q]} devices > max_devices {c.max_devices}")
    ru = 0
    for node_line in plan.nodes:
        nd = cat.node(node_line.type)
        fleet = max(f.use.get((node_line.hosts, q, PREM), 0) for q in range(n))
        if node_line.count * nd.slots < fleet:
            _fail(problem, f"{node_line.count} x {nd.id} cannot host {fleet} {node_line.hosts}")
        ru += nd.rack_units * node_line.count
        for q in range(n):
            f.power[q] += nd.power_overhead_w * node_line.count
    if ru != plan.rack_units:
        _fail(problem, f"rack units {plan.rack_units} != recomputed {ru}")
    if c.max_rack_units is not None and ru > c.max_rack_units:
        _fail(problem, f"{ru} rack units > {c.max_rack_units}")
    for q, p in enumerate(plan.periods):
        if not _close(p.power_w, f.power[q]):
            _fail(problem, f"power in `{p.name}` {p.power_w} != recomputed {f.power[q]}")
    peak = max(f.power) + f.training_w
    if not _close(peak, plan.power_w):
        _fail(problem, f"power {plan.power_w} != recomputed {peak}")
    if c.power_w is not None and peak * h.pue > c.power_w * (1 + REL_TOL):
        _fail(problem, f"wall power {peak * h.pue:.0f} W > cap {c.power_w} W")


def _same(problem: Problem, what: str, got: dict[str, float], want: dict[str, float]) -> None:
    keys = {k for k, v in got.items() if v} | {k for k, v in want.items() if v}
    for k in keys:
        if not _close(got.get(k, 0.0), want.get(k, 0.0)):
            _fail(problem, f"{what} `{k}` {got.get(k, 0.0)} != recomputed {want.get(k, 0.0)}")


def _check_costs(
    plan: Plan, problem: Problem, cat: Catalog, f: _Fleet, periods: list[Period]
) -> None:
    """Every cost figure, recomputed from catalog prices and the problem."""
    c = problem.constraints
    h = problem.horizon
    own = ownership_factor(problem)
    usd_wh = energy_usd_per_watt_hour(problem)
    whole_h = horizon_hours(problem)
    capex = sum(
        (device_prices(problem, cat.accelerator(x.type)).purchase_usd or 0.0) * x.bought
        for x in plan.devices
    )
    host_energy = 0.0
    for node_line in plan.nodes:
        nd = cat.node(node_line.type)
        bought = next(x.bought for x in plan.devices if x.type == node_line.hosts)
        if not _close(node_line.total_usd, nd.price_usd * -(-bought // nd.slots)):
            _fail(problem, f"{nd.id}: hosts bought are priced wrong")
        capex += node_line.total_usd
        # A host draws its overhead through the whole horizon: at load, then as idle draw.
        host_energy += nd.power_overhead_w * node_line.count * whole_h * usd_wh
    energy = (sum(f.prem_wh.values()) + f.idle_wh) * usd_wh + host_energy
    rents = {
        m: sum(
            x.device_hours.get(m, 0.0)
            * (device_prices(problem, cat.accelerator(x.type)).rate(m) or 0.0)
            for x in plan.devices
        )
        for m in RENT_MODES
    }
    want = Costs(
        capex_usd=capex,
        maintenance_usd=capex * (own - 1),
        energy_usd=energy,
        rent_on_demand_usd=rents["on_demand"],
        rent_reserved_usd=rents["reserved"],
        rent_spot_usd=rents["spot"],
        training_usd=f.training_usd,
        total_usd=capex * own + energy + sum(rents.values()) + f.training_usd,
    )
    for key, value in asdict(want).items():
        if not _close(getattr(plan.costs, key), value):
            _fail(problem, f"cost `{key}` {getattr(plan.costs, key)} != recomputed {value}")
    if not _close(plan.tco_usd, want.total_usd):
        _fail(problem, f"tco_usd {plan.tco_usd} != recomputed cost lines {want.total_usd}")
    if not _close(plan.capex_usd, capex):
        _fail(problem, f"capex_usd {plan.capex_usd} != recomputed {capex}")
    opex = (want.total_usd - capex - f.training_usd) / h.lifetime_years
    if not _close(plan.opex_usd_per_year, opex):
        _fail(problem, f"opex {plan.opex_usd_per_year} != recomputed {opex}")
    if c.capex_usd is not None and capex > c.capex_usd * (1 + REL_TOL):
        _fail(problem, f"capex {capex:.0f} > {c.capex_usd}")
    if c.budget_usd is not None and want.total_usd > c.budget_usd * (1 + REL_TOL):
        _fail(problem, f"total cost {want.total_usd:.0f} > budget {c.budget_usd}")


def _check_energy_and_carbon(
    plan: Plan, problem: Problem, cat: Catalog, f: _Fleet, periods: list[Period]
) -> None:
    h = problem.horizon
    kwh = [pw * p.hours * h.pue / 1000 for pw, p in zip(f.power, periods, strict=True)]
    for q, p in enumerate(plan.periods):
        if not _close(p.energy_kwh, kwh[q]) or not _close(p.tokens, f.tokens[q]):
            _fail(problem, f"energy or tokens of `{p.name}` do not match")
    idle_wh = f.idle_wh + sum(
        cat.node(x.type).power_overhead_w * x.count * host_idle_hours(problem) for x in plan.nodes
    )
    other_kwh = f.training_kwh + idle_wh * h.pue / 1000  # at the problem's grid intensity
    total_kwh = sum(kwh) + other_kwh
    if not _close(plan.energy_kwh_per_year, total_kwh / h.lifetime_years):
        _fail(
            problem, f"energy per year {plan.energy_kwh_per_year} != {total_kwh / h.lifetime_years}"
        )
    if problem.carbon is None:
        if plan.carbon is not None:
            _fail(problem, "carbon figures without a carbon section")
        return
    g0 = grid_intensity(problem, cat) or 0.0
    operational = (
        sum(k * (p.gco2e_per_kwh or 0.0) / 1000 for k, p in zip(kwh, periods, strict=True))
        + other_kwh * g0 / 1000
    )
    share = embodied_share(problem)
    embodied = f.training_embodied_kg
    for x in plan.devices:
        acc = cat.accelerator(x.type)
        embodied += (x.owned + x.bought) * (acc.embodied_kgco2e or 0.0) * share
        embodied += sum(x.device_hours.get(m, 0.0) for m in RENT_MODES) * embodied_kg_per_hour(
            problem, acc
        )
    cl = plan.carbon
    if cl is None:
        _fail(problem, "no carbon figures")
        return
    tokens = sum(f.tokens)
    for got, want, what in (
        (cl.energy_kwh, total_kwh, "energy"),
        (cl.operational_kgco2e, operational, "operational carbon"),
        (cl.embodied_kgco2e, embodied, "embodied carbon"),
        (cl.total_kgco2e, operational + embodied, "carbon"),
        (cl.tokens, tokens, "tokens"),
    ):
        if not _close(got, want):
            _fail(problem, f"{what} {got} != recomputed {want}")
    cap = problem.constraints.max_carbon_kgco2e
    if cap is not None and operational + embodied > cap * (1 + REL_TOL):
        _fail(problem, f"carbon {operational + embodied:.0f} kg > cap {cap} kg")
