"""Problem -> designs (estimator) -> CP-SAT -> Plan -> verified Plan."""

from __future__ import annotations

import json
import math
import time

from planner.catalog import Catalog, load_catalog
from planner.estimator.designs import (
    Design,
    allowed_devices,
    inference_designs,
    tp_degrees,
    training_designs,
)
from planner.estimator.economics import (
    RENT_MODES,
    DeviceEconomics,
    break_even_utilization,
    cloud_host_watts,
    demand_periods,
    device_economics,
    embodied_kg_per_hour,
    embodied_share,
    energy_usd_per_watt_hour,
    grid_intensity,
    horizon_hours,
    in_fleet,
    ownership_factor,
    reserved_hours,
    working_hours,
)
from planner.estimator.formats import weight_format
from planner.estimator.request_mix import class_workload, mix_designs
from planner.model.cpsat import (
    CLOUD,
    JOB,
    PREM,
    SHARE_STEPS,
    Key,
    PlannerModel,
    Solution,
    Tables,
    class_load,
)
from planner.plan.types import (
    CarbonLine,
    Costs,
    DeviceLine,
    NodeLine,
    PeriodLine,
    Plan,
    StageLine,
    WorkloadPlan,
)
from planner.schema.problem import InferenceWorkload, Problem, TrainingWorkload
from planner.verify import stage_figures, verify


def build_tables(
    problem: Problem,
    cat: Catalog,
    *,
    tuned: bool = True,
    designs: dict[str, list[Design]] | None = None,
) -> Tables:
    """Designs and economics for every workload. `tuned=False` keeps dominated designs and
    switches off tightening and hints (the baseline the benchmark compares against).
    `designs` reuses an earlier enumeration (valid when `design_key` is unchanged)."""
    devs = allowed_devices(problem, cat)
    econ = device_economics(problem, cat, devs)
    serves: dict[str, list[dict[int, float]]] = {}
    sized: dict[str, list[int]] = {}
    fresh = designs is None
    designs = {} if designs is None else dict(designs)
    for w in problem.workloads:
        if isinstance(w, InferenceWorkload) and w.request_mix is not None:
            ds, serves[w.name], sized[w.name] = mix_designs(w, problem, cat, devs, prune=tuned)
            designs[w.name] = ds
        elif not fresh:
            continue
        elif isinstance(w, InferenceWorkload):
            designs[w.name] = inference_designs(w, problem, cat, devs, prune=tuned)
        else:
            designs[w.name] = training_designs(w, problem, cat, devs, prune=tuned)
    training_cost: dict[tuple[str, int], float] = {}
    for w in problem.workloads:
        if isinstance(w, TrainingWorkload):
            for j, d in enumerate(designs[w.name]):
                training_cost[(w.name, j)] = training_job_cost(problem, econ, w, d)
    return Tables(
        problem,
        designs,
        econ,
        training_cost,
        tuned,
        periods=demand_periods(problem),
        serves=serves,
        sized_for=sized,
    )


def training_job_cost(
    problem: Problem, econ: dict[str, DeviceEconomics], w: TrainingWorkload, d: Design
) -> float:
    """A training job's own cost: its energy on the owned fleet (at PUE), or, when devices
    cannot be bought, on-demand rent for its hours."""
    hours = w.token_budget / d.tokens_per_s / 3600
    if in_fleet(w, problem):
        return d.power_w * hours * energy_usd_per_watt_hour(problem)
    return sum(n * (job_rate(econ[dev]) or 0.0) * hours for dev, n in d.devices.items())


def job_rate(e: DeviceEconomics) -> float | None:
    """Rent per hour a training job pays for one device: on demand, else spot, else reserved."""
    p = e.prices
    return p.on_demand_usd_per_hour or p.spot_usd_per_hour or p.reserved_usd_per_hour


# Limits that only bound the fleet: changing them leaves the enumerated designs as they are.
FLEET_LIMITS = {"budget_usd", "capex_usd", "power_w", "max_rack_units", "inventory"}


def design_key(problem: Problem) -> str:
    """Everything design enumeration reads: workloads, the per-replica constraints, which
    devices are owned (they are allowed without a price) and whether prices are bought or rented."""
    c = problem.constraints
    return json.dumps(
        [
            [w.model_dump(mode="json") for w in problem.workloads],
            c.model_dump(mode="json", exclude=FLEET_LIMITS),
            sorted({o.device for o in c.inventory}),
            problem.horizon.procurement,
            problem.market.model_dump(mode="json"),
        ],
        sort_keys=True,
    )


class Solver:
    """Solves problems one after another. Design tables are reused when only fleet limits,
    prices or the horizon change, and each solve starts from the previous plan (a warm start),
    which is what makes sweeps and frontiers cheap."""

    def __init__(
        self,
        cat: Catalog | None = None,
        *,
        time_limit: float = 30.0,
        workers: int = 1,
        seed: int = 0,
        tuned: bool = True,
        why: bool = True,
        gap: float = 0.0,
    ) -> None:
        """`why=False` skips the extra solves that explain a result: naming the blocking
        constraint of an infeasible problem (one solve per constraint family) and, for request
        mixes, pricing each device type alone; for callers that only report the status. `gap` > 0 accepts a
        plan proved within that relative gap of the bound (reported FEASIBLE, with the bound)."""
        self.cat = cat or load_catalog()
        self.time_limit = time_limit
        self.workers = workers
        self.seed = seed
        self.tuned = tuned
        self.why = why
        self.gap = gap
        self._key: str | None = None
        self._designs: dict[str, list[Design]] | None = None
        self._last: dict[Key, int] | None = None
        self.reused = 0  # solves that reused the previous design tables

    def tables(self, problem: Problem) -> Tables:
        key = design_key(problem)
        if key == self._key and self._designs is not None:
            self.reused += 1
            return build_tables(problem, self.cat, tuned=self.tuned, designs=self._designs)
        tables = build_tables(problem, self.cat, tuned=self.tuned)
        self._key, self._designs, self._last = key, tables.designs, None
        return tables

    def solve(self, problem: Problem) -> Plan:
        t0 = time.perf_counter()
        tables = self.tables(problem)
        empty = [w for w in problem.workloads if not tables.designs[w.name]]
        if empty:
            notes = [why_no_design(w, problem, self.cat) for w in empty]
            return _no_plan(problem, "INFEASIBLE", t0, notes)
        model = PlannerModel(tables, warm=self._last if self.tuned else None)
        sol = model.solve(
            time_limit=self.time_limit, workers=self.workers, seed=self.seed, gap=self.gap
        )
        if sol.status == "INFEASIBLE":
            notes = (
                blocking_constraints(tables, time_limit=self.time_limit, seed=self.seed)
                if self.why
                else []
            )
            return _no_plan(problem, "INFEASIBLE", t0, notes)
        if sol.status not in ("OPTIMAL", "FEASIBLE"):
            return _no_plan(
                problem, sol.status, t0, [f"no plan found within {self.time_limit:g} s"]
            )
        self._last = sol.replicas
        plan = make_plan(problem, self.cat, tables, sol)
        if sol.status == "FEASIBLE" and self.gap > 0 and not model.interrupted:
            plan.notes.append(
                f"stopped within the requested {self.gap:.2%} gap: no plan is cheaper than the "
                "bound, so this one is at most that far from optimal"
                if problem.objective.goal == "min_cost"
                else f"stopped within the requested {self.gap:.2%} gap of the bound"
            )
        plan.solve_seconds = time.perf_counter() - t0
        verify(plan, problem, self.cat)
        if (
            self.why
            and problem.objective.goal == "min_cost"
            and any(isinstance(w, InferenceWorkload) and w.request_mix for w in problem.workloads)
        ):
            plan.notes.append(self.single_type_note(problem, plan, tables))
        return plan

    def single_type_note(self, problem: Problem, plan: Plan, tables: Tables) -> str:
        """What the cheapest plan on one device type alone costs, and what this plan saves
        against it (how a request mix pays off by splitting classes across types).

        Each type alone gets as long as this plan's own solve took (at least 2 s, at most the
        time limit), so the explanation costs about what the answer did. A type not proved
        optimal in that time is counted at its bound (no plan on it alone costs less), which
        keeps the stated saving a floor."""
        limit = min(self.time_limit, max(2.0, plan.solve_seconds))
        alone = Solver(self.cat, time_limit=limit, workers=self.workers, seed=self.seed, why=False)
        best: tuple[float, str, Plan] | None = None  # (least cost, type, its plan)
        unsettled = []
        for dev in sorted(tables.econ):
            p = alone.solve(only_device(problem, dev))
            if p.status == "OPTIMAL":
                least = p.tco_usd
            elif p.status == "FEASIBLE" and p.bound is not None:
                least = min(p.tco_usd, p.bound)
            elif p.status == "INFEASIBLE":
                continue
            else:
                unsettled.append(dev)
                continue
            if best is None or least < best[0]:
                best = (least, dev, p)
        late = (
            f" ({', '.join(unsettled)} alone: no plan found in {limit:.0f} s)" if unsettled else ""
        )
        if best is None and unsettled:
            return f"no plan on one device type alone was found in {limit:.0f} s{late}"
        if best is None:
            return "no single device type can serve the whole request mix alone"
        least, dev, p = best
        n = sum(x.count for x in p.devices)
        saved = least - plan.tco_usd
        proved = p.status == "OPTIMAL"
        if saved >= 0:
            gain = f"saves {'' if proved else 'at least '}${saved:,.0f} ({saved / least:.1%})"
        else:  # this plan was stopped before it was proved
            gain = f"costs {'' if proved else 'at most '}${-saved:,.0f} ({-saved / least:.1%}) more"
        if proved:
            return f"best single device type: {n} x {dev} at ${least:,.0f}; this plan {gain}{late}"
        return (
            f"on one device type alone a plan costs at least ${least:,.0f} ({dev}: found {n} x "
            f"{dev} at ${p.tco_usd:,.0f}, not proved optimal in {limit:.0f} s); this plan "
            f"{gain}{late}"
        )


def only_device(problem: Problem, dev: str) -> Problem:
    """The problem with one device type allowed (and only its inventory kept)."""
    c = problem.constraints
    return problem.model_copy(
        update={
            "constraints": c.model_copy(
                update={
                    "allowed_devices": [dev],
                    "inventory": [o for o in c.inventory if o.device == dev],
                }
            )
        }
    )


def solve_problem(
    problem: Problem,
    *,
    time_limit: float = 30.0,
    workers: int = 1,
    seed: int = 0,
    cat: Catalog | None = None,
    tuned: bool = True,
    gap: float = 0.0,
) -> Plan:
    """Solve one problem from scratch: the verified optimal plan, or a plan-less result."""
    solver = Solver(cat, time_limit=time_limit, workers=workers, seed=seed, tuned=tuned, gap=gap)
    return solver.solve(problem)


def _no_plan(problem: Problem, status: str, t0: float, notes: list[str]) -> Plan:
    """A result without a plan (infeasible, or nothing found in time), with its reasons."""
    return Plan(
        problem.name,
        status,
        problem.objective.goal,
        None,
        None,
        time.perf_counter() - t0,
        notes=notes,
    )


def why_no_design(w: InferenceWorkload | TrainingWorkload, problem: Problem, cat: Catalog) -> str:
    """A sentence with numbers: why no replica configuration exists for `w`."""
    from planner.estimator.memory import weight_bytes

    m = cat.model(w.model)
    devs = allowed_devices(problem, cat)
    if not devs:
        return f"workload `{w.name}`: no allowed device has a price and a host in the catalog"
    c = problem.constraints
    biggest = max(devs, key=lambda d: d.memory.bytes)
    usable = biggest.memory.bytes * (1 - c.memory_headroom)
    fmt = weight_format(w.weights if isinstance(w, InferenceWorkload) else "bf16")
    need = weight_bytes(m, fmt)
    tp = max(tp_degrees(biggest, cat, problem, m) or [1])
    most = usable * c.max_stages * tp
    text = (
        f"workload `{w.name}`: {m.name} needs {need / 1e9:,.0f} GB of weights alone "
        f"({fmt.id}); the largest allowed device, {biggest.id}, offers {usable / 1e9:,.0f} GB usable"
    )
    if need > most:
        return text + (
            f", and at most {c.max_stages} stages x {tp}-way tensor "
            f"parallelism hold {most / 1e9:,.0f} GB: raise constraints.max_stages, allow larger "
            "devices or use a smaller format"
        )
    return text + (
        "; no configuration meets both memory (with the KV cache or training state) and the "
        "latency or deadline ceilings: relax the ceiling, the context length or the concurrency"
    )


def blocking_constraints(tables: Tables, *, time_limit: float, seed: int) -> list[str]:
    """Which single constraint family, switched off, makes the problem feasible."""
    probe = PlannerModel(tables)
    names = sorted(probe.named)
    freed = []
    for name in names:
        trial = PlannerModel(tables)
        sol = trial.solve(
            time_limit=time_limit / max(1, len(names)),
            workers=1,
            seed=seed,
            relax=frozenset({name}),
        )
        if sol.status in ("OPTIMAL", "FEASIBLE"):
            freed.append(name)
    if not freed:
        return [
            f"no single constraint explains it: several limits block together ({', '.join(names)})"
        ]
    return [f"infeasible because of `{n}`: without it a plan exists" for n in freed]


def make_plan(problem: Problem, cat: Catalog, tables: Tables, sol: Solution) -> Plan:
    """Turn the solver's counts into a bill of materials, per-period figures, costs by kind,
    energy and carbon. Purchases and hosts are the fewest that hold the devices at work (the
    solver may leave idle ones where they cost nothing in its objective)."""
    h = problem.horizon
    periods = tables.periods
    years = h.lifetime_years
    usd_wh = energy_usd_per_watt_hour(problem)
    work_h = sum(p.hours for p in periods)
    plan = Plan(problem.name, sol.status, problem.objective.goal, None, None, sol.seconds)
    use: dict[tuple[str, int, str], int] = {}
    prem_energy_wh: dict[str, float] = {}  # device -> watt-hours of its replicas on premises
    power = [0.0] * len(periods)  # serving devices and hosts at load, per period
    training_w = 0.0  # training jobs on the owned fleet (counted at every period's peak)
    tokens = [0.0] * len(periods)  # output tokens served
    capacity: dict[tuple[str, int], float] = {}  # (fixed-rate workload, period) -> tokens/s
    training_usd = 0.0
    for (wn, j, p_i, site), r in sorted(sol.replicas.items()):
        d = tables.designs[wn][j]
        w = next(x for x in problem.workloads if x.name == wn)
        span = range(len(periods)) if p_i < 0 else [p_i]
        if site != JOB:
            for dev, n in d.devices.items():
                for q in span:
                    use[(dev, q, site)] = use.get((dev, q, site), 0) + n * r
        sized = tables.sized_for.get(wn)
        stages = _stage_lines(
            class_workload(w, sized[j]) if sized and isinstance(w, InferenceWorkload) else w,
            cat,
            d,
            problem,
        )
        if isinstance(w, TrainingWorkload):
            hours = w.token_budget / d.tokens_per_s / 3600
            cost = tables.training_cost[(wn, j)]
            training_usd += cost
            plan.workloads.append(
                WorkloadPlan(
                    wn,
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
                )
            )
            plan.notes.append(
                f"training `{wn}`: {hours:,.1f} h on {sum(d.devices.values())} devices; "
                f"{'energy' if site == PREM else 'rent'} for the job ${cost:,.0f}"
            )
            if site == PREM:
                training_w += d.power_w
            continue
        period = periods[p_i]
        watts = d.power_w * r
        host_share = cloud_host_watts(d, tables.econ) * r if site == CLOUD else 0.0
        power[p_i] += watts + host_share
        served: dict[str, float] = {}
        if w.request_mix is not None:
            serves = tables.serves[wn][j]
            for k in serves:
                y = sol.shares.get((wn, j, k, p_i, site), 0)
                if y:
                    served[w.request_mix[k].name] = y / SHARE_STEPS * serves[k]
            tok = sum(
                class_load(w, k, period.scale) * c.output_tokens
                for k, c in enumerate(w.request_mix)
            )
            # Tokens of the mix are counted where they are served, in proportion to requests.
            total_rate = w.requests_per_s * period.scale if w.requests_per_s else 0.0
            tokens[p_i] += tok * sum(served.values()) / total_rate * period.hours * 3600
        else:
            capacity[(wn, p_i)] = capacity.get((wn, p_i), 0.0) + d.tokens_per_s * r
        if site == PREM:
            for dev, wh in _split_by_device(d, cat, watts * period.hours).items():
                prem_energy_wh[dev] = prem_energy_wh.get(dev, 0.0) + wh
        tps = d.tokens_per_s * r
        cost = _replica_cost(d, r, site, period.hours, tables.econ, problem)
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
                d.ttft_s,
                None,
                watts,
                tps / watts,
                cost / (tps * period.hours * 3600) * 1e6 if tps and period.hours else None,
                period=period.name if problem.demand is not None else None,
                site=site,
                requests_per_s=served,
                sized_for=(
                    w.request_mix[sized[j]].name if sized and w.request_mix is not None else None
                ),
            )
        )
    for (wn, p_i), tps in capacity.items():
        tokens[p_i] += served_tokens_per_s(problem, wn, tps, periods[p_i].scale) * (
            periods[p_i].hours * 3600
        )
    held: list[dict[str, dict[str, int]]] = [{} for _ in periods]
    _bill(plan, problem, cat, tables, sol, use, prem_energy_wh, power, held)
    own = ownership_factor(problem)
    capex = sum(x.total_usd for x in plan.devices) + sum(n.total_usd for n in plan.nodes)
    host_energy = sum(
        cat.node(n.type).power_overhead_w * n.count * work_h * usd_wh for n in plan.nodes
    )
    energy = sum(prem_energy_wh.values()) * usd_wh + host_energy
    rents = {m: sum(x.rent_usd.get(m, 0.0) for x in plan.devices) for m in RENT_MODES}
    total = capex * own + energy + sum(rents.values()) + training_usd
    plan.costs = Costs(
        capex_usd=capex,
        maintenance_usd=capex * (own - 1),
        energy_usd=energy,
        rent_on_demand_usd=rents["on_demand"],
        rent_reserved_usd=rents["reserved"],
        rent_spot_usd=rents["spot"],
        training_usd=training_usd,
        total_usd=total,
    )
    plan.capex_usd = capex
    plan.opex_usd_per_year = (total - capex - training_usd) / years
    plan.tco_usd = total
    plan.power_w = (max(power) if power else 0.0) + training_w
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
                tokens[p_i],
                p.gco2e_per_kwh,
            )
        )
    job_kwh = sum(
        wp.power_w * (wp.finish_hours or 0.0) * h.pue / 1000
        for wp in plan.workloads
        if wp.kind == "training"
    )
    plan.energy_kwh_per_year = (sum(energy_kwh) + job_kwh) / years
    joules = (sum(energy_kwh) + job_kwh) * 3.6e6
    plan.tokens_per_joule = sum(tokens) / joules if joules else None
    if problem.carbon is not None:
        plan.carbon = _carbon(plan, problem, cat, energy_kwh, job_kwh, sum(tokens))
        unknown = [x.type for x in plan.devices if cat.accelerator(x.type).embodied_kgco2e is None]
        if unknown:
            plan.notes.append(
                f"the catalog has no embodied-carbon figure for {', '.join(unknown)}: counted as "
                "0 kg, so embodied carbon is understated"
            )
    plan.objective, plan.bound = _objective(plan, problem, sol)
    plan.slack = constraint_slack(plan, problem)
    plan.binding_constraints = [k for k, v in plan.slack.items() if v <= BINDING_SLACK]
    return plan


def served_tokens_per_s(problem: Problem, workload: str, capacity: float, scale: float) -> float:
    """Output tokens/s a fixed-rate workload serves: its demand when it states one (the
    capacity beyond it is headroom, not tokens anyone asked for), else its capacity."""
    w = next(x for x in problem.workloads if x.name == workload)
    assert isinstance(w, InferenceWorkload)
    return min(capacity, w.min_tokens_per_s * scale) if w.min_tokens_per_s else capacity


def _stage_lines(
    w: InferenceWorkload | TrainingWorkload, cat: Catalog, d: Design, problem: Problem
) -> tuple[StageLine, ...]:
    out = []
    first = 0
    for s_i, st in enumerate(d.stages):
        fig = stage_figures(w, cat, d, s_i, problem)
        out.append(
            StageLine(
                st.device,
                st.tp,
                (first, first + st.layers - 1),
                fig.memory,
                fig.seconds,
                fig.boundary_bytes,
            )
        )
        first += st.layers
    return tuple(out)


def _split_by_device(d: Design, cat: Catalog, amount: float) -> dict[str, float]:
    """Split a replica's energy among its device types in proportion to count x TDP."""
    weights = {x: n * cat.accelerator(x).power.tdp_w for x, n in d.devices.items()}
    total = sum(weights.values())
    return {x: amount * v / total for x, v in weights.items()}


def _replica_cost(
    d: Design,
    r: int,
    site: str,
    hours: float,
    econ: dict[str, DeviceEconomics],
    problem: Problem,
) -> float:
    """What `r` replicas of `d` cost over `hours`: on premises, their devices' purchase with
    upkeep (a share for the hours) and their energy; in the cloud, on-demand rent."""
    if site == CLOUD:
        rate = sum(n * (job_rate(econ[x]) or 0.0) for x, n in d.devices.items())
        return r * rate * hours
    share = hours / horizon_hours(problem)
    own = ownership_factor(problem)
    capital = sum(
        n * (econ[x].unit_usd + econ[x].node.price_usd / econ[x].slots) * own
        for x, n in d.devices.items()
    )
    return r * (capital * share + d.power_w * hours * energy_usd_per_watt_hour(problem))


def _bill(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    tables: Tables,
    sol: Solution,
    use: dict[tuple[str, int, str], int],
    prem_energy_wh: dict[str, float],
    power: list[float],
    held: list[dict[str, dict[str, int]]],
) -> None:
    """Device and node lines: the fleet on premises (owned first, then bought), reserved and
    rented devices, their hours, rent, energy, upkeep, utilization and break-even; and per
    period into `held`, each device's on-premises devices at work and cloud devices held."""
    periods = tables.periods
    H = horizon_hours(problem)
    own = ownership_factor(problem)
    usd_wh = energy_usd_per_watt_hour(problem)
    avail = problem.market.spot_availability
    for dev in sorted({k[0] for k in use}):
        e = tables.econ[dev]
        prem = [use.get((dev, q, PREM), 0) for q in range(len(periods))]
        cloud = [use.get((dev, q, CLOUD), 0) for q in range(len(periods))]
        fleet = max(prem)
        owned = min(fleet, e.owned)
        bought = fleet - owned
        reserved = sol.reserved.get(dev, 0) if any(cloud) else 0
        spot = [sol.spot.get((dev, q), 0) if cloud[q] else 0 for q in range(len(periods))]
        on_demand = [
            min(
                sol.on_demand.get((dev, q), 0),
                max(0, cloud[q] - reserved - math.floor(avail * spot[q] + 1e-9)),
            )
            for q in range(len(periods))
        ]
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
            "on-premises": sum(u * p.hours for u, p in zip(prem, periods, strict=True)),
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
        hosts = -(-fleet // e.slots)
        host_bought = -(-bought // e.slots)
        purchase = e.unit_usd
        dev_energy = prem_energy_wh.get(dev, 0.0) * usd_wh
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
                maintenance_usd=(purchase * bought + e.node.price_usd * host_bought) * (own - 1),
                utilization=hours["on-premises"] / (fleet * H) if fleet else None,
                break_even_utilization=break_even_utilization(problem, e, watts_at_work),
            )
        )
        if fleet:
            plan.nodes.append(
                NodeLine(
                    e.node.id,
                    dev,
                    hosts,
                    e.node.price_usd,
                    e.node.price_usd * host_bought,
                    e.node.rack_units * hosts,
                )
            )
            plan.rack_units += e.node.rack_units * hosts
            for q in range(len(periods)):
                power[q] += e.node.power_overhead_w * hosts
            if e.node.intra_node_link not in plan.links:
                plan.links.append(e.node.intra_node_link)
    if (
        len(plan.devices) > 1
        or any(n.count > 1 for n in plan.nodes)
        or any(len(w.stages) > 1 for w in plan.workloads)
        or any(x.reserved or x.on_demand or x.spot for x in plan.devices)
    ):
        plan.links.append(problem.constraints.network)


def _carbon(
    plan: Plan,
    problem: Problem,
    cat: Catalog,
    energy_kwh: list[float],
    job_kwh: float,
    tokens: float,
) -> CarbonLine:
    """SCI: energy x grid intensity plus embodied carbon for the hours devices are held."""
    periods = plan.periods
    g0 = grid_intensity(problem, cat) or 0.0
    operational = sum(
        kwh * (p.gco2e_per_kwh or 0.0) / 1000 for kwh, p in zip(energy_kwh, periods, strict=True)
    )
    operational += job_kwh * g0 / 1000
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
    kwh = sum(energy_kwh) + job_kwh
    return CarbonLine(
        kwh, operational, embodied, total, tokens, total * 1000 / (tokens / 1e6) if tokens else None
    )


BINDING_SLACK = 0.05  # a constraint with under 5 % room left is reported as binding


def constraint_slack(plan: Plan, problem: Problem) -> dict[str, float]:
    """Relative room left under each stated limit: (limit - used) / limit, or (got - need) / need."""
    c = problem.constraints
    out: dict[str, float] = {}

    def room(name: str, used: float, limit: float | None) -> None:
        if limit:
            out[name] = float((limit - used) / limit)

    room("budget", plan.tco_usd, c.budget_usd)
    room("capex", plan.capex_usd, c.capex_usd)
    room("power", plan.wall_power_w, c.power_w)
    held = [sum(sum(m.values()) for m in p.devices.values()) for p in plan.periods]
    room("max_devices", max(held, default=0), c.max_devices)
    room("rack_units", plan.rack_units, c.max_rack_units)
    if plan.carbon is not None:
        room("carbon", plan.carbon.total_kgco2e, c.max_carbon_kgco2e)
    for w in problem.workloads:
        parts = [x for x in plan.workloads if x.name == w.name]
        if isinstance(w, InferenceWorkload):
            if w.min_tokens_per_s:
                out[f"throughput:{w.name}"] = min(
                    float((got - w.min_tokens_per_s * p.scale) / (w.min_tokens_per_s * p.scale))
                    for p in plan.periods
                    for got in [
                        sum(
                            x.tokens_per_s
                            for x in parts
                            if x.period in (None, p.name) or len(plan.periods) == 1
                        )
                    ]
                )
            if w.max_ms_per_token:
                worst = max(x.ms_per_token or 0.0 for x in parts)
                room(f"latency:{w.name}", worst, w.max_ms_per_token)
        elif w.deadline_hours:
            room(f"deadline:{w.name}", max(x.finish_hours or 0.0 for x in parts), w.deadline_hours)
    return out


def _objective(plan: Plan, problem: Problem, sol: Solution) -> tuple[float | None, float | None]:
    goal = problem.objective.goal
    if goal == "min_cost":
        return sol.objective, sol.bound  # the model's integer dollars (costs rounded up)
    if goal == "min_carbon":
        # The model's integer grams (rounded up), in kg.
        return (
            None if sol.objective is None else sol.objective / 1000,
            None if sol.bound is None else sol.bound / 1000,
        )
    thr = sum(w.tokens_per_s for w in plan.workloads if w.kind == "inference")
    if goal == "max_throughput":
        b = None if sol.bound is None else sol.bound / 1000
        return float(thr), b
    if goal == "max_tokens_per_joule":
        v = float(thr / plan.power_w) if plan.power_w else 0.0
        return v, (v if sol.status == "OPTIMAL" else None)
    seconds = working_hours(problem) * 3600
    cpt = float(plan.tco_usd / (thr * seconds) * 1e6) if thr else None
    return cpt, (cpt if sol.status == "OPTIMAL" else None)
