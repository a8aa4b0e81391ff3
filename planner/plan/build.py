"""The plan builder: turn the solver's counts into a bill of materials, per-period figures,
costs by kind, energy and carbon. Stage figures come from the estimator's scalar replica
arithmetic (planner.estimator.replica), which the verifier recomputes on its own; the
objective is recomputed from the finished plan's figures, not copied from the solver.

Long because the bill, the cost lines, the energy (at work and idle) and the carbon are built
from one tally of the solution, and splitting them would pass that tally through more modules."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.catalog import Catalog
from planner.estimator.built_in_link import NoSharedPort, assumed_network
from planner.estimator.designs import Design, carbon_unknown_left_out, stage_specs
from planner.estimator.economics import (
    RENT_MODES,
    DeviceEconomics,
    break_even_utilization,
    carbon_notes,
    carbon_promise,
    cloud_host_watts,
    demand_quantization,
    earlier_phase,
    earlier_phases_hours,
    embodied_kg_per_hour,
    embodied_share,
    embodied_unknown,
    energy_usd_per_watt_hour,
    facility_usd_per_rack_unit,
    facility_usd_per_watt,
    grid_intensity,
    horizon_hours,
    host_idle_hours,
    idle_device_hours,
    job_rate,
    ownership_factor,
    rented_devices,
    reserved_hours,
    working_hours,
)
from planner.estimator.hosts import (
    derates,
    devices_bought,
    host_options,
    hosts_for,
    with_machines,
)
from planner.estimator.network import network_gear, network_link, ports_per_host
from planner.estimator.replica import ReplicaFigures, inference_replica, training_stage_memory
from planner.estimator.request_mix import (
    add_served,
    class_workload,
    mix_served_rate,
    mix_tokens_served_per_s,
)
from planner.estimator.routes import hop_routes, route_link_ids
from planner.estimator.serving import prefill_pool_budget, prefill_prompt, token_budget
from planner.estimator.support import engine_times, tensor_parallel_refusal
from planner.estimator.training_designs import training_job, training_setup
from planner.model.objectives import Figures, objective_for
from planner.model.result import Solution
from planner.model.scale import SHARE_STEPS
from planner.model.tables import (
    Tables,
    mix_tokens_per_request,
    plain_tokens_factor,
)
from planner.plan.recipe import serving_fields
from planner.plan.slack import binding, constraint_slack
from planner.plan.types import (
    CarbonLine,
    Costs,
    DeviceLine,
    NetworkLine,
    NodeLine,
    PeriodLine,
    PhaseLine,
    Plan,
    StageLine,
    WorkloadPlan,
)
from planner.schema.catalog import Node
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload, Workload
from planner.schema.status import Site, Status

PREM, CLOUD, JOB = Site.PREMISES, Site.CLOUD, Site.JOB


@dataclass
class _Tally:
    """What the replicas add up to, period by period, while the plan is built."""

    n: int
    use: dict[tuple[str, int, str], int] = field(default_factory=dict)  # (device, period, site)
    prem_energy_wh: dict[str, float] = field(default_factory=dict)  # device -> Wh on premises
    idle_wh: dict[str, float] = field(default_factory=dict)  # device -> Wh held but not at work
    power: list[float] = field(default_factory=list)  # serving devices and hosts, per period
    tokens: list[float] = field(default_factory=list)  # output tokens served, per period
    capacity: dict[tuple[str, int], float] = field(default_factory=dict)  # fixed-rate tokens/s
    # Request mixes: (workload, period) -> requests/s per class decoded, and prefilled.
    decoded: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    prefilled: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    training_w: float = 0.0  # training jobs on the owned fleet (at every period's peak)
    training_usd: float = 0.0
    # Training jobs on the fleet: device -> device-hours at work beyond what the demand
    # periods count (a job of an earlier phase: its own hours; one beside the serving, held in
    # every period: its own hours less the periods').
    phase_hours: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.power = [0.0] * self.n
        self.cloud_power = [0.0] * self.n  # the part of `power` rented devices draw
        self.tokens = [0.0] * self.n

    def draw(self, p_i: int, watts: float, *, rented: bool) -> None:
        """Watts drawn in period `p_i`, and whether rented devices draw them."""
        self.power[p_i] += watts
        if rented:
            self.cloud_power[p_i] += watts


def make_plan(problem: Problem, cat: Catalog, tables: Tables, sol: Solution) -> Plan:
    """The plan for a solution. Purchases and hosts are the fewest that hold the devices at work
    (the solver may leave idle ones where they cost nothing in its objective)."""
    cat = with_machines(cat, problem)  # the problem's stated machines are host lines too
    periods = tables.periods
    plan = Plan(problem.name, sol.status, problem.objective.goal, None, None, sol.seconds)
    tally = _Tally(len(periods))
    by_name = {w.name: w for w in problem.workloads}
    for key, r in sorted(sol.replicas.items()):
        wn, j, p_i, site = key
        w = by_name[wn]
        d = tables.designs[wn][j]
        span = range(len(periods)) if p_i < 0 else [p_i]
        phase = earlier_phase(problem, wn)
        if p_i < 0 and phase is not None:
            span = [len(periods) + phase]  # held in its phase alone (planner.model.variables)
        if site != JOB:
            for dev, n in d.devices.items():
                for q in span:
                    tally.use[(dev, q, site)] = tally.use.get((dev, q, site), 0) + n * r
        if isinstance(w, TrainingWorkload):
            _add_training(plan, problem, cat, tables, j, site, w, tally)
        else:
            _add_serving(plan, problem, cat, tables, sol, key, r, w, tally)
    for (wn, p_i), tps in tally.capacity.items():
        tally.tokens[p_i] += served_tokens_per_s(problem, wn, tps, periods[p_i].scale) * (
            periods[p_i].hours * 3600
        )
    for (wn, p_i), decoded in tally.decoded.items():
        w = by_name[wn]
        assert isinstance(w, InferenceWorkload)
        made = mix_tokens_served_per_s(
            w,
            periods[p_i].scale,
            decoded,
            tally.prefilled.get((wn, p_i), {}),
            throughput_goal=problem.objective.goal in ("max_throughput", "max_tokens_per_joule"),
        )
        tally.tokens[p_i] += made * periods[p_i].hours * 3600
    held: list[dict[str, dict[str, int]]] = [{} for _ in periods]
    _bill(plan, problem, cat, tables, sol, tally, held)
    plan.phases = _phases(problem, tally.use, len(periods))
    _costs(plan, problem, cat, tables, tally)
    _energy_and_periods(plan, problem, cat, tables, tally, held)
    if (merged := demand_quantization(problem)) is not None:
        plan.notes.append(merged.note())
    plan.objective, plan.bound = _objective(plan, problem, tables, sol)
    plan.slack = constraint_slack(plan, problem, cat)
    plan.binding_constraints = binding(plan.slack)
    return plan


def replica_figures(
    w: InferenceWorkload, cat: Catalog, d: Design, problem: Problem
) -> ReplicaFigures:
    """An inference design's figures stage by stage (planner.estimator.replica), at the
    workload's shape, with its engine's own times; a decode replica without prompt chunks."""
    return inference_replica(
        cat.model(w.model),
        w.weights,
        w.kv,
        batch=d.batch,
        context=w.context_tokens,
        prompt=prefill_prompt(w.prompt_tokens, w.prefix_cache_hit),
        output=w.output_tokens,
        stages=stage_specs(cat, problem, d),
        link=network_link(problem, cat),
        decode_only=d.role == "decode",
        **engine_times(cat, d.engine),
    )


def stage_lines(
    w: Workload, cat: Catalog, d: Design, problem: Problem
) -> tuple[tuple[StageLine, ...], float, float]:
    """A design's stage lines from the estimator's replica arithmetic, with the replica's power
    at load and its time to first token (inference) or the job's power (training)."""
    m = cat.model(w.model)
    first = 0
    out = []
    if isinstance(w, TrainingWorkload):
        s0, layers = d.stages[0], [st.layers for st in d.stages]
        job = training_job(
            w, problem, cat, cat.accelerator(s0.device), s0.tp, layers, d.replicas_dp
        )
        for s_i, (st, sec) in enumerate(zip(d.stages, job.stage_seconds, strict=True)):
            setup = training_setup(w, d.replicas_dp, st.tp, cat.accelerator(st.device))
            mem = training_stage_memory(m, setup, layers=st.layers, last=s_i == len(d.stages) - 1)
            out.append(StageLine(st.device, st.tp, (first, first + st.layers - 1), mem, sec, 0.0))
            first += st.layers
        return tuple(out), d.power_w, 0.0
    fig = replica_figures(w, cat, d, problem)
    hops = hop_routes(problem, cat, [st.device for st in d.stages], [st.tp for st in d.stages])
    for j, (st, f) in enumerate(zip(d.stages, fig.stages, strict=True)):
        hop = hops[j] if hops else None
        out.append(
            StageLine(
                st.device,
                st.tp,
                (first, first + st.layers - 1),
                f.memory,
                f.seconds,
                f.boundary_bytes,
                st.across_machines,
                hop.id if hop else None,
                f.boundary_bytes / d.batch if hop else 0.0,
                float(hop.seconds(f.boundary_bytes)) if hop else 0.0,
                f.chunk_bytes if hop else 0.0,
                float(hop.seconds(f.chunk_bytes)) if hop else 0.0,
            )
        )
        first += st.layers
    return tuple(out), fig.power_w, fig.ttft_s


def _add_training(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    tables: Tables,
    j: int,
    site: str,
    w: TrainingWorkload,
    tally: _Tally,
) -> None:
    d = tables.designs[w.name][j]
    stages, _, _ = stage_lines(w, cat, d, problem)
    hours = w.token_budget / d.tokens_per_s / 3600
    cost = tables.training_cost[(w.name, j)]
    tally.training_usd += cost
    plan.workloads.append(
        WorkloadPlan(
            w.name,
            "training",
            w.model,
            d.replicas_dp,
            d.batch,
            stages,
            d.tokens_per_s,
            None,
            None,
            hours,
            d.power_w,
            d.tokens_per_s / d.power_w,
            None,
            site=CLOUD if site == JOB else PREM,
            job_usd=cost,
        )
    )
    whole = [
        f"{rented_devices(n, e.prices) // e.prices.rent_unit} x {e.prices.instance}"
        for x, n in d.devices.items()
        if site == JOB and (e := tables.econ[x]).prices.instance
    ]
    plan.notes.append(
        f"training `{w.name}`: {hours:,.1f} h on {sum(d.devices.values())} devices"
        + (f" (rented whole: {', '.join(whole)})" if whole else "")
        + f"; {'energy' if site == PREM else 'rent'} for the job ${cost:,.0f}"
    )
    if site == PREM:
        tally.training_w += d.power_w
        counted = sum(p.hours for p in tables.periods)
        if earlier_phase(problem, w.name) is not None:
            counted = 0.0
        for x, n in d.devices.items():
            tally.phase_hours[x] = tally.phase_hours.get(x, 0.0) + n * (hours - counted)


def _add_serving(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    tables: Tables,
    sol: Solution,
    key: tuple[str, int, int, str],
    r: int,
    w: InferenceWorkload,
    tally: _Tally,
) -> None:
    wn, j, p_i, site = key
    d = tables.designs[wn][j]
    period = tables.periods[p_i]
    sized = tables.sized_for.get(wn)
    shape = class_workload(w, sized[j]) if sized else w
    stages, replica_w, ttft = stage_lines(shape, cat, d, problem)
    watts = replica_w * r
    host_share = cloud_host_watts(d.devices, tables.econ) * r if site == CLOUD else 0.0
    tally.draw(p_i, watts + host_share, rented=site == CLOUD)
    served = _mix_served(w, tables, sol, key, tally) if w.request_mix is not None else {}
    one = {k: v / r for k, v in served.items()} if r else served  # one replica's share
    seqs: int | None = None
    made = d.tokens_per_s * r
    if w.request_mix is None and w.concurrency is not None:
        seqs = sol.sequences.get(key, 0)  # type: ignore[call-overload]
        made = seqs * 1000.0 / d.ms_per_token  # only the sequences that exist make tokens
    if w.request_mix is None:
        tally.capacity[(wn, p_i)] = tally.capacity.get((wn, p_i), 0.0) + made
    if site == PREM:
        for dev, wh in _split_by_device(d, cat, watts * period.hours).items():
            tally.prem_energy_wh[dev] = tally.prem_energy_wh.get(dev, 0.0) + wh
    tps = made
    prompt = prefill_prompt(shape.prompt_tokens, shape.prefix_cache_hit)
    hosts = {x: host_of(tables, sol, x) for x in d.devices}
    spans = sum(math.ceil(n / hosts[x].slots) for x, n in d.devices.items())  # machines
    cost = _replica_cost(d, replica_w, r, site, period.hours, tables.econ, hosts, problem)
    budget = {"prefill": prefill_pool_budget(prompt), "decode": float(d.batch)}.get(
        d.role, token_budget(d.batch, prompt, shape.output_tokens)
    )
    plan.workloads.append(
        WorkloadPlan(
            wn,
            "inference",
            w.model,
            r,
            d.batch,
            stages,
            tps,
            d.ms_per_token,
            ttft,
            None,
            watts,
            d.tokens_per_s * r / watts,
            cost / (d.tokens_per_s * r * period.hours * 3600) * 1e6 if period.hours else None,
            period=period.name if problem.demand is not None else None,
            site=site,
            requests_per_s=served,
            sized_for=(
                w.request_mix[sized[j]].name if sized and w.request_mix is not None else None
            ),
            sequences=seqs,
            **serving_fields(
                cat, problem.constraints, w, shape, d, stages, math.ceil(budget), spans, one
            ),
            role=d.role,
        )
    )


def _costs(plan: Plan, problem: Problem, cat: Catalog, tables: Tables, tally: _Tally) -> None:
    """Cost lines by kind and their total; capex and opex per year."""
    usd_wh = energy_usd_per_watt_hour(problem)
    own = ownership_factor(problem)
    capex = sum(x.total_usd for x in plan.devices) + sum(n.total_usd for n in plan.nodes)
    # Hosts (and switches) draw through the whole horizon (planner.estimator.economics).
    host_energy = sum(n.energy_usd for n in plan.nodes)
    if plan.network is not None:
        capex += plan.network.total_usd
        host_energy += plan.network.energy_usd
    device_wh = sum(tally.prem_energy_wh.values()) + sum(tally.idle_wh.values())
    energy = device_wh * usd_wh + host_energy
    rents = {m: sum(x.rent_usd.get(m, 0.0) for x in plan.devices) for m in RENT_MODES}
    # Colocation: rack units held, and the on-premises fleet's busiest power at load.
    premises_w = [p - c for p, c in zip(tally.power, tally.cloud_power, strict=True)]
    rack = plan.rack_units * facility_usd_per_rack_unit(problem)
    facility = (max(premises_w, default=0.0) + tally.training_w) * facility_usd_per_watt(problem)
    total = capex * own + energy + sum(rents.values()) + tally.training_usd + rack + facility
    plan.costs = Costs(
        capex_usd=capex,
        maintenance_usd=capex * (own - 1),
        energy_usd=energy,
        rent_on_demand_usd=rents["on_demand"],
        rent_reserved_usd=rents["reserved"],
        rent_spot_usd=rents["spot"],
        training_usd=tally.training_usd,
        rack_space_usd=rack,
        facility_power_usd=facility,
        total_usd=total,
    )
    plan.capex_usd = capex
    plan.opex_usd_per_year = (total - capex - tally.training_usd) / problem.horizon.lifetime_years
    plan.tco_usd = total


def _energy_and_periods(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    tables: Tables,
    tally: _Tally,
    held: list[dict[str, dict[str, int]]],
) -> None:
    """Power at the busiest period, each period's line, yearly energy, tokens per joule, carbon."""
    h = problem.horizon
    periods = tables.periods
    power = tally.power
    plan.power_w = (max(power) if power else 0.0) + tally.training_w
    plan.wall_power_w = plan.power_w * h.pue
    energy_kwh = [pw * p.hours * h.pue / 1000 for pw, p in zip(power, periods, strict=True)]
    for p_i, p in enumerate(periods):
        plan.periods.append(
            PeriodLine(
                p.name,
                p.hours,
                p.scale,
                held[p_i],
                power[p_i],
                energy_kwh[p_i],
                tally.tokens[p_i],
                p.gco2e_per_kwh,
            )
        )
    job_kwh = sum(
        wp.power_w * (wp.finish_hours or 0.0) * h.pue / 1000
        for wp in plan.workloads
        if wp.kind == "training"
    )
    # Idle draw: devices held but not at work, hosts and switches outside the working hours.
    always_w = sum(cat.node(n.type).power_overhead_w * n.count for n in plan.nodes)
    always_w += plan.network.power_w if plan.network is not None else 0.0
    idle_wh = sum(tally.idle_wh.values()) + always_w * host_idle_hours(problem)
    other_kwh = job_kwh + idle_wh * h.pue / 1000
    plan.energy_kwh_per_year = (sum(energy_kwh) + other_kwh) / h.lifetime_years
    joules = (sum(energy_kwh) + other_kwh) * 3.6e6
    # A fleet that serves nothing has no tokens per joule (0 would read as a measured figure).
    serves = any(w.kind != "training" for w in problem.workloads)
    plan.tokens_per_joule = sum(tally.tokens) / joules if joules and serves else None
    if problem.carbon is not None:
        plan.carbon = _carbon(plan, problem, cat, energy_kwh, other_kwh, sum(tally.tokens))
        plan.notes += _carbon_notes(plan, problem, cat)
    plan.notes += _tensor_group_notes(plan, problem, cat)


def _tensor_group_notes(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """Why a workload's replicas keep one device per stage where its engine runs no
    tensor-parallel group of the model on a device's backend (support.tensor_parallel_refusal):
    the designs it was chosen from had no such group."""
    models = {w.name: w.model for w in problem.workloads}
    out: list[str] = []
    for wp in plan.workloads:
        if wp.kind == "training" or not wp.engine or wp.name not in models:
            continue
        m = cat.model(models[wp.name])
        for dev in sorted({s.device for s in wp.stages}):
            hosts = host_options(cat, cat.accelerator(dev), problem)
            if max((n.slots for n in hosts), default=1) <= 1:
                continue  # one device per machine: no group to refuse
            why = tensor_parallel_refusal(cat, wp.engine, wp.backends.get(dev, ""), m)
            note = f"`{wp.name}` on {dev}: {why}"
            if why is not None and note not in out:
                out.append(note)
    return out


def _carbon_devices(plan: Plan) -> list[str]:
    """Device types whose making the plan's carbon counts: its fleet and cloud training jobs."""
    jobs = [st.device for wp in plan.workloads if wp.kind == "training" for st in wp.stages]
    return [x.type for x in plan.devices] + jobs


def _carbon_notes(plan: Plan, problem: Problem, cat: Catalog) -> list[str]:
    """What the carbon figures leave out (economics.carbon_notes)."""
    unknown = (plan.carbon.embodied_unknown if plan.carbon else None) or ()
    return carbon_notes(unknown, carbon_unknown_left_out(problem, cat), carbon_promise(problem))


def objective_figures(plan: Plan, problem: Problem) -> Figures:
    """The figures every objective is recomputed from, read off a finished plan. Capacity is
    that of fixed-rate inference workloads in the period of the highest demand scale (the
    quantity the model's throughput expression counts)."""
    periods = plan.periods
    top = max(periods, key=lambda p: p.scale).name if periods else None
    count = problem.objective.tokens
    by_name = {w.name: w for w in problem.workloads if isinstance(w, InferenceWorkload)}
    capacity = 0.0
    # Request mixes: requests/s per class decoded (whole-request and decode pools) and
    # prefilled (whole-request and prefill pools); a request is served once both are done.
    sides: dict[str, tuple[dict[str, float], dict[str, float]]] = {}
    for wp in plan.workloads:
        w = by_name.get(wp.name)
        if w is None or (wp.period is not None and wp.period != top):
            continue
        if w.request_mix is None:
            capacity += wp.tokens_per_s * plain_tokens_factor(w, count)
            continue
        add_served(*sides.setdefault(w.name, ({}, {})), wp.role, wp.requests_per_s)
    if problem.objective.goal in ("max_throughput", "max_tokens_per_joule"):
        scale = max((p.scale for p in periods), default=1.0)
        for name, (decoded, prefilled) in sides.items():
            w = by_name[name]
            # The mix is served in its proportions up to its scarcest class.
            rate = mix_served_rate(w, scale, decoded, prefilled)
            capacity += rate * scale * mix_tokens_per_request(w, count)
    return Figures(
        tco_usd=plan.tco_usd,
        carbon_kg=plan.carbon.total_kgco2e if plan.carbon is not None else None,
        capacity_tokens_per_s=capacity,
        power_w=plan.power_w,
        working_seconds=working_hours(problem) * 3600,
    )


def _objective(
    plan: Plan, problem: Problem, tables: Tables, sol: Solution
) -> tuple[float | None, float | None]:
    """The objective recomputed from the plan, and the solver's bound in the same unit. A proved
    optimum's bound is its objective: the proof holds for the model's integers, which differ
    from the plan's exact figures by at most the rounding the solution reports. Every goal
    that is minimized (cost, carbon, power, cost per token) is a sum of terms that cannot be
    negative, so a bound below 0 (a search stopped early) is reported as 0."""
    goal = objective_for(problem.objective.goal)
    figures = objective_figures(plan, problem)
    value = goal.recompute(figures)
    if sol.status == Status.OPTIMAL:
        return value, value
    if sol.bound is None:
        return value, None
    bound = goal.read(sol.bound, figures.working_seconds)
    return value, max(0.0, bound) if goal.minimize else bound


def served_tokens_per_s(problem: Problem, workload: str, capacity: float, scale: float) -> float:
    """Output tokens/s a fixed-rate workload serves: its demand when it states one (the
    capacity beyond it is headroom, not tokens anyone asked for), else its capacity."""
    w = next(x for x in problem.workloads if x.name == workload)
    assert isinstance(w, InferenceWorkload)
    return min(capacity, w.min_tokens_per_s * scale) if w.min_tokens_per_s else capacity


def _mix_served(
    w: InferenceWorkload,
    tables: Tables,
    sol: Solution,
    key: tuple[str, int, int, str],
    tally: _Tally,
) -> dict[str, float]:
    """Requests/s a request-mix replica group serves per class (its shares of replica time);
    they go to the period's tally of requests decoded and prefilled, whose output tokens
    (mix_tokens_served_per_s: no more requests than exist) are counted once every group is in."""
    assert w.request_mix is not None
    wn, j, p_i, site = key
    served: dict[str, float] = {}
    serves = tables.serves[wn][j]
    for k in serves:
        y = sol.shares.get((wn, j, k, p_i, site), 0)  # type: ignore[call-overload]
        if y:
            served[w.request_mix[k].name] = y / SHARE_STEPS * serves[k]
    sides = (tally.decoded.setdefault((wn, p_i), {}), tally.prefilled.setdefault((wn, p_i), {}))
    add_served(*sides, tables.designs[wn][j].role, served)
    return served


def _split_by_device(d: Design, cat: Catalog, amount: float) -> dict[str, float]:
    """Split a replica's energy among its device types in proportion to count x TDP."""
    weights = {x: n * cat.accelerator(x).power.tdp_w for x, n in d.devices.items()}
    total = sum(weights.values())
    return {x: amount * v / total for x, v in weights.items()}


def host_of(tables: Tables, sol: Solution, dev: str) -> Node:
    """The node type the solution puts `dev` in on premises (its default host when it has none
    there: rented devices' share of a host is counted in it)."""
    e = tables.econ[dev]
    chosen = sol.hosts.get(dev)
    return next((n for n in e.hosts if n.id == chosen), e.node)


def _replica_cost(
    d: Design,
    replica_w: float,
    r: int,
    site: str,
    hours: float,
    econ: dict[str, DeviceEconomics],
    hosts: dict[str, Node],
    problem: Problem,
) -> float:
    """What `r` replicas of `d` cost over `hours`: on premises, their devices' purchase and
    their slots' share of their hosts with upkeep (a share for the hours) and their energy; in
    the cloud, on-demand rent."""
    if site == CLOUD:
        rate = sum(n * (job_rate(econ[x]) or 0.0) for x, n in d.devices.items())
        return r * rate * hours
    share = hours / horizon_hours(problem)
    own = ownership_factor(problem)
    capital = sum(
        n * (econ[x].unit_usd + hosts[x].price_usd / hosts[x].slots) * own
        for x, n in d.devices.items()
    )
    return r * (capital * share + replica_w * hours * energy_usd_per_watt_hour(problem))


def _spot_room(
    problem: Problem, tables: Tables, sol: Solution, use: dict[tuple[str, int, str], int]
) -> list[int]:
    """Per period, how many more cloud devices spot may carry than the solution has it carry
    (what is not reserved or rented on demand): at most `spot_max_share` of the devices at
    work (planner.model.constraints._cloud_supply)."""
    n = len(tables.periods)
    carried = [0] * n
    at_work = [0] * n
    for (dev, q, site), k in use.items():
        if q >= n:
            continue
        at_work[q] += k
        if site == CLOUD:
            rest = k - sol.reserved.get(dev, 0) - sol.on_demand.get((dev, q), 0)
            carried[q] += max(0, rest)
    share = problem.market.spot_max_share
    return [max(0, math.floor(share * at_work[q] + 1e-9) - carried[q]) for q in range(n)]


def _bill(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    tables: Tables,
    sol: Solution,
    tally: _Tally,
    held: list[dict[str, dict[str, int]]],
) -> None:
    """Device and node lines: the fleet on premises (owned first, then bought), reserved and
    rented devices, their hours, rent, energy, upkeep, utilization and break-even; and per
    period into `held`, each device's on-premises devices at work and cloud devices held.

    Long because each device line's figures come from one pass over its periods.
    """
    use, prem_energy_wh, power = tally.use, tally.prem_energy_wh, tally.power
    periods = tables.periods
    H = horizon_hours(problem)
    own = ownership_factor(problem)
    usd_wh = energy_usd_per_watt_hour(problem)
    avail = problem.market.spot_availability
    spot_room = _spot_room(problem, tables, sol, use)
    for dev in sorted({k[0] for k in use}):
        e = tables.econ[dev]
        prem = [use.get((dev, q, PREM), 0) for q in range(len(periods))]
        cloud = [use.get((dev, q, CLOUD), 0) for q in range(len(periods))]
        earlier = range(len(periods), len(periods) + max(0, len(problem.phases or []) - 1))
        in_phases = [use.get((dev, q, PREM), 0) for q in earlier]
        at_work = max(prem + in_phases)  # the periods and the earlier phases share the fleet
        node = host_of(tables, sol, dev)
        owned = min(at_work, e.owned)
        # Owned devices first, then new ones: whole units where the host is sold whole, so the
        # fleet held may count spares beyond the devices at work.
        bought = devices_bought(node, at_work - owned)
        fleet = owned + bought
        reserved = sol.reserved.get(dev, 0) if any(cloud) else 0
        spot = [sol.spot.get((dev, q), 0) if cloud[q] else 0 for q in range(len(periods))]
        unit = e.prices.rent_unit  # devices per instance, rented whole
        on_demand = []
        for q in range(len(periods)):
            # On-demand devices the spot ones expected up make unneeded are not rented, as far
            # as the period's spot share allows (the model may have kept them to stay within it).
            od = sol.on_demand.get((dev, q), 0)
            least = max(0, cloud[q] - reserved - math.floor(avail * spot[q] + 1e-9))
            cut = max(0, min(od - least, spot_room[q]))
            od = rented_devices(od - cut, e.prices)
            spot_room[q] -= max(0, min(cut, sol.on_demand.get((dev, q), 0) - od))
            on_demand.append(od)
        for q in range(len(periods)):
            by_mode = {
                "on-premises": prem[q],
                "reserved": reserved if cloud[q] else 0,
                "on_demand": on_demand[q],
                "spot": spot[q],
            }
            if any(by_mode.values()):
                held[q][dev] = {m: k for m, k in by_mode.items() if k}
        hours = {
            "on-premises": sum(u * p.hours for u, p in zip(prem, periods, strict=True))
            + tally.phase_hours.get(dev, 0.0),
        }
        rates: dict[str, float] = {}
        rent: dict[str, float] = {}
        for mode in RENT_MODES:
            rate = e.prices.rate(mode)
            if rate is not None:
                rates[mode] = rate
        if reserved:
            hours["reserved"] = reserved * reserved_hours(problem, e.prices)
            rent["reserved"] = hours["reserved"] * rates["reserved"]
        for mode, counts in (("on_demand", on_demand), ("spot", spot)):
            if any(counts):
                hours[mode] = sum(c * p.hours for c, p in zip(counts, periods, strict=True))
                rent[mode] = hours[mode] * rates[mode]
        hosts = hosts_for(node, fleet)
        host_bought = hosts_for(node, bought)
        purchase = e.unit_usd
        idle_h = idle_device_hours(problem, fleet, hours["on-premises"])
        tally.idle_wh[dev] = cat.accelerator(dev).power.idle_w * idle_h
        dev_energy = (prem_energy_wh.get(dev, 0.0) + tally.idle_wh[dev]) * usd_wh
        watts_at_work = (
            prem_energy_wh.get(dev, 0.0) / hours["on-premises"]
            if hours["on-premises"]
            else cat.accelerator(dev).power.tdp_w
        )
        plan.devices.append(
            DeviceLine(
                dev,
                fleet + reserved + max(on_demand) + max(spot),
                owned,
                bought,
                purchase if bought else 0.0,
                purchase * bought,
                reserved=reserved,
                on_demand=max(on_demand),
                spot=max(spot),
                device_hours=hours,
                rent_usd=rent,
                rent_usd_per_hour=rates,
                energy_usd=dev_energy,
                maintenance_usd=(purchase * bought + node.price_usd * host_bought) * (own - 1),
                utilization=hours["on-premises"] / (fleet * H) if fleet else None,
                break_even_utilization=break_even_utilization(problem, e, watts_at_work, node),
                instance=e.prices.instance if rent else None,
                devices_per_instance=unit if rent else 1,
            )
        )
        if fleet:
            plan.nodes.append(
                NodeLine(
                    node.id,
                    dev,
                    hosts,
                    node.price_usd,
                    node.price_usd * host_bought,
                    node.rack_units * hosts,
                    node.power_overhead_w * hosts * H * usd_wh,
                    next((m.name or "" for m in problem.machines if m.id == node.id), ""),
                )
            )
            plan.rack_units += node.rack_units * hosts
            if (
                node.slots > 1
                and derates(e.device, problem)
                and any(
                    s.device == dev
                    for w in plan.workloads
                    if w.kind == "inference" and w.site == PREM
                    for s in w.stages
                )
            ):
                share = problem.horizon.consumer_derating
                plan.notes.append(
                    f"{dev} runs {share:.0%} slower sustained in {node.id} (consumer cards "
                    "throttle in a multi-card chassis: horizon.consumer_derating)"
                )
            for q in range(len(periods)):
                power[q] += node.power_overhead_w * hosts
            if node.intra_node_link not in plan.links:
                plan.links.append(node.intra_node_link)
    plan.network = _network(problem, cat, plan, tally)
    if sum(n.count for n in plan.nodes) > 1:
        plan.notes += assumed_link_notes(problem, cat)
    if (
        len(plan.devices) > 1
        or any(n.count > 1 for n in plan.nodes)
        or any(len(w.stages) > 1 for w in plan.workloads)
        or any(x.reserved or x.on_demand or x.spot for x in plan.devices)
    ):
        plan.links.append(problem.constraints.network)
    # A group across machines all-reduces over its links, and a hop crosses its route's.
    for w in plan.workloads:
        devices, across = [s.device for s in w.stages], [s.across_machines for s in w.stages]
        tps = [s.tp for s in w.stages]
        for net in route_link_ids(problem, cat, devices, tps, across, w.kind == "inference"):
            if net not in plan.links:
                plan.links.append(net)


def _phases(problem: Problem, use: dict[tuple[str, int, str], int], n: int) -> list[PhaseLine]:
    """The problem's phases in order: each one's hours and the devices on premises at work in it
    (the earlier phases at index n + k of `use`, the last over the demand periods)."""
    if not problem.phases:
        return []
    out = []
    last = len(problem.phases) - 1
    for k, ph in enumerate(problem.phases):
        qs = range(n) if k == last else [n + k]
        devices = {
            dev: most
            for dev in sorted({d for d, _, site in use if site == PREM})
            if (most := max(use.get((dev, q, PREM), 0) for q in qs))
        }
        hours = (
            horizon_hours(problem) - earlier_phases_hours(problem)
            if k == last
            else problem.phase_hours(k)
        )
        out.append(PhaseLine(ph.name, list(ph.workloads), hours, devices))
    return out


def assumed_link_notes(problem: Problem, cat: Catalog) -> list[str]:
    """The plan's note where the problem named no network and its machines' built-in port was
    assumed (planner.estimator.built_in_link), with how to replace it; or, where a problem the
    loader let through as one machine now plans several (a what-if that loosens max_devices or
    capex_usd) and they share no recorded port, that its network is the unstated default."""
    try:
        assumed = assumed_network(problem, cat)
    except NoSharedPort as e:
        return [
            f"network: no network is named and {e}; the plan joins its machines over "
            f"{problem.constraints.network}: name constraints.network to plan on their own link"
        ]
    if assumed is None or assumed.link.id != problem.constraints.network:
        return []
    return [assumed.note]


def _network(problem: Problem, cat: Catalog, plan: Plan, tally: _Tally) -> NetworkLine | None:
    """Ports and switches bought to join the hosts on premises (planner.estimator.network);
    their power joins every period's, their rack units the plan's."""
    link = network_link(problem, cat)
    bought = {x.type: x.bought for x in plan.devices}
    ports = sum(
        ports_per_host(cat.node(n.type), link.id) * -(-bought[n.hosts] // cat.node(n.type).slots)
        for n in plan.nodes
    )
    gear = network_gear(link, sum(n.count for n in plan.nodes), ports)
    if gear is None:
        return None
    for n in plan.nodes:  # a whole machine with no slot takes no NIC: say so, with its ports
        node = cat.node(n.type)
        # its ports: the node's NICs and, for a whole machine, the device's own built-in ports
        own = sorted({x.link for x in node.nics} | set(cat.accelerator(n.hosts).ports))
        stated = any(x.id == link.id for x in problem.links)  # the user's own network
        if node.kind == "standalone" and own and link.id not in own and not stated:
            plan.notes.append(
                f"network: {node.name} has no {link.id} port and no slot for one (its ports: "
                f"{', '.join(own)}); the {link.id} ports counted for it need an adapter, if one "
                f"exists: set constraints.network to a link it has ({', '.join(own)})"
            )
    for q in range(len(tally.power)):
        tally.power[q] += gear.power_w
    plan.rack_units += gear.rack_units
    return NetworkLine(
        gear.link,
        gear.ports,
        gear.port_usd,
        gear.switch.name if gear.switch else None,
        gear.switches,
        gear.switch.price_usd if gear.switch else 0.0,
        gear.capex_usd,
        gear.power_w,
        gear.rack_units,
        gear.power_w * horizon_hours(problem) * energy_usd_per_watt_hour(problem),
    )


def _carbon(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    energy_kwh: list[float],
    other_kwh: float,
    tokens: float,
) -> CarbonLine:
    """SCI: energy x grid intensity plus embodied carbon for the hours devices are held. The
    periods' energy is at their intensities; `other_kwh` (training jobs and idle draw) at the
    problem's."""
    periods = plan.periods
    g0 = grid_intensity(problem, cat) or 0.0
    operational = sum(
        kwh * (p.gco2e_per_kwh or 0.0) / 1000 for kwh, p in zip(energy_kwh, periods, strict=True)
    )
    operational += other_kwh * g0 / 1000
    share = embodied_share(problem)
    embodied = 0.0
    for x in plan.devices:
        acc = cat.accelerator(x.type)
        embodied += (x.owned + x.bought) * (acc.embodied_kgco2e or 0.0) * share
        rented_h = sum(x.device_hours.get(m, 0.0) for m in RENT_MODES)
        embodied += rented_h * embodied_kg_per_hour(problem, acc)
    for wp in plan.workloads:
        if wp.kind == "training" and wp.site == CLOUD:
            for st in wp.stages:
                acc = cat.accelerator(st.device)
                embodied += (
                    st.tp
                    * wp.replicas
                    * (wp.finish_hours or 0.0)
                    * embodied_kg_per_hour(problem, acc)
                )
    total = operational + embodied
    kwh = sum(energy_kwh) + other_kwh
    sci = total * 1000 / (tokens / 1e6) if tokens else None
    return CarbonLine(
        kwh, operational, embodied, total, tokens, sci, embodied_unknown(_carbon_devices(plan), cat)
    )
