"""Problem -> designs (estimator) -> CP-SAT -> Plan -> verified Plan."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from planner.catalog import Catalog, load_catalog
from planner.errors import InputError, did_you_mean
from planner.estimator.formats import kv_bytes, weight_format
from planner.model.cpsat import PlannerModel, Solution, Tables
from planner.model.designs import (
    Design,
    allowed_devices,
    inference_designs,
    tp_degrees,
    training_designs,
)
from planner.model.economics import (
    DeviceEconomics,
    device_economics,
    energy_usd_per_watt,
    in_fleet,
    working_hours,
)
from planner.overrides import apply_overrides, blame
from planner.plan import DeviceLine, NodeLine, Plan, StageLine, WorkloadPlan
from planner.problem_schema import InferenceWorkload, Problem, TrainingWorkload
from planner.verify import stage_figures, verify
from planner.yaml_io import Located, dotted, read_yaml, validate


def load_problem(path: Path, overrides: Sequence[str] = ()) -> Problem:
    """Read, override (`--set PATH=VALUE`), validate and name-check a problem file."""
    return parse_problem(read_yaml(path), overrides)


def parse_problem(doc: Located, overrides: Sequence[str] = ()) -> Problem:
    doc, origin = apply_overrides(doc, overrides)
    try:
        problem = validate(doc, Problem)
        check_names(problem, load_catalog(), doc)
    except InputError as e:
        raise blame(e, origin) from None
    return problem


def check_names(problem: Problem, cat: Catalog, doc: Located | None = None) -> None:
    """Every name a problem uses exists in the catalog (with a located, suggesting error)."""

    def where(loc: tuple[str | int, ...]) -> str:
        return f"{doc.where(loc)}: {dotted(loc)}: " if doc else f"{dotted(loc)}: "

    for i, w in enumerate(problem.workloads):
        if w.model not in cat.models:
            raise InputError(
                f"{where(('workloads', i, 'model'))}workload `{w.name}`: unknown model `{w.model}`"
                f"{did_you_mean(w.model, cat.models)}"
            )
        if isinstance(w, InferenceWorkload):
            for key, check in (("weights", weight_format), ("kv", kv_bytes)):
                try:
                    check(getattr(w, key))
                except InputError as e:
                    raise InputError(
                        f"{where(('workloads', i, key))}workload `{w.name}`: {e}"
                    ) from None
    c = problem.constraints
    for key, names in (
        ("allowed_devices", c.allowed_devices or []),
        ("excluded_devices", c.excluded_devices),
        ("inventory", [o.device for o in c.inventory]),
    ):
        for j, n in enumerate(names):
            if n not in cat.accelerators:
                loc: tuple[str | int, ...] = ("constraints", key, j)
                if key == "inventory":
                    loc = (*loc, "device")
                raise InputError(
                    f"{where(loc)}unknown device `{n}`{did_you_mean(n, cat.accelerators)}"
                )
    vendors = {a.vendor for a in cat.accelerators.values()}
    for j, v in enumerate(c.vendors or []):
        if v not in vendors:
            raise InputError(
                f"{where(('constraints', 'vendors', j))}unknown vendor `{v}`"
                f"{did_you_mean(v, vendors)} (vendors: {', '.join(sorted(vendors))})"
            )
    if c.network not in cat.links:
        raise InputError(
            f"{where(('constraints', 'network'))}unknown link `{c.network}`"
            f"{did_you_mean(c.network, cat.links)}"
        )


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
    if designs is None:
        designs = {}
        for w in problem.workloads:
            if isinstance(w, InferenceWorkload):
                designs[w.name] = inference_designs(w, problem, cat, devs, prune=tuned)
            else:
                designs[w.name] = training_designs(w, problem, cat, devs, prune=tuned)
    training_cost: dict[tuple[str, int], float] = {}
    for w in problem.workloads:
        if isinstance(w, TrainingWorkload):
            for j, d in enumerate(designs[w.name]):
                hours = w.token_budget / d.tokens_per_s / 3600
                if problem.horizon.procurement == "buy":
                    h = problem.horizon
                    training_cost[(w.name, j)] = (
                        d.power_w * hours / 1000 * h.pue * h.electricity_usd_per_kwh
                    )
                else:
                    training_cost[(w.name, j)] = sum(
                        n * (cat.accelerator(dev).price.rent_usd_per_hour or 0.0) * hours
                        for dev, n in d.devices.items()
                    )
    return Tables(problem, designs, econ, training_cost, tuned)


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
        """`why=False` skips naming the blocking constraint of an infeasible problem (one solve
        per constraint family), for callers that only report the status. `gap` > 0 accepts a
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
        self._last: dict[tuple[str, int], int] | None = None
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
        return plan


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
    """Turn the solver's counts into a bill of materials and per-workload figures."""
    h = problem.horizon
    buy = h.procurement == "buy"
    per_w = energy_usd_per_watt(problem)
    plan = Plan(problem.name, sol.status, problem.objective.goal, None, None, sol.seconds)
    used: dict[str, int] = {}
    device_power = 0.0
    for (wn, j), r in sorted(sol.replicas.items()):
        d = tables.designs[wn][j]
        w = next(x for x in problem.workloads if x.name == wn)
        if in_fleet(w, problem):
            for dev, n in d.devices.items():
                used[dev] = used.get(dev, 0) + n * r
        stages = []
        first = 0
        for s_i, st in enumerate(d.stages):
            fig = stage_figures(w, cat, d, s_i, problem)
            stages.append(
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
        if isinstance(w, TrainingWorkload):
            hours = w.token_budget / d.tokens_per_s / 3600
            cost = tables.training_cost[(wn, j)]
            plan.workloads.append(
                WorkloadPlan(
                    wn,
                    "training",
                    w.model,
                    d.replicas_dp,
                    d.batch,
                    tuple(stages),
                    d.tokens_per_s,
                    None,
                    None,
                    hours,
                    d.power_w,
                    d.tokens_per_s / d.power_w,
                    None,
                )
            )
            plan.notes.append(
                f"training `{wn}`: {hours:,.1f} h on {sum(d.devices.values())} devices; "
                f"{'energy' if buy else 'rent'} for the job ${cost:,.0f}"
            )
        else:
            tps = d.tokens_per_s * r
            watts = d.power_w * r
            device_power += watts
            plan.workloads.append(
                WorkloadPlan(
                    wn,
                    "inference",
                    w.model,
                    r,
                    d.batch,
                    tuple(stages),
                    tps,
                    d.ms_per_token,
                    d.ttft_s,
                    None,
                    watts,
                    tps / watts,
                    None,
                )
            )
    econ = tables.econ
    for dev in sorted(used):
        e = econ[dev]
        bought = sol.bought.get(dev, 0)
        unit = e.unit_usd
        plan.devices.append(
            DeviceLine(dev, used[dev], used[dev] - bought, bought, unit, unit * bought)
        )
        hosts = -(
            -used[dev] // e.slots
        )  # the fewest hosts that hold them (the solver may leave free ones idle)
        host_bought = -(-bought // e.slots)
        plan.nodes.append(
            NodeLine(
                e.node.id,
                dev,
                hosts,
                e.node.price_usd if buy else 0.0,
                (e.node.price_usd if buy else 0.0) * host_bought,
                e.node.rack_units * hosts,
            )
        )
        plan.rack_units += e.node.rack_units * hosts
        device_power += e.node.power_overhead_w * hosts
        if e.node.intra_node_link not in plan.links:
            plan.links.append(e.node.intra_node_link)
    if (
        len(used) > 1
        or any(n.count > 1 for n in plan.nodes)
        or any(len(w.stages) > 1 for w in plan.workloads)
    ):
        plan.links.append(problem.constraints.network)
    plan.capex_usd = (
        sum(x.total_usd for x in plan.devices) + sum(n.total_usd for n in plan.nodes)
        if buy
        else 0.0
    )
    plan.power_w = device_power
    plan.wall_power_w = device_power * h.pue
    years = h.lifetime_years
    energy = device_power * per_w / years if buy else 0.0
    rent = sum(x.total_usd for x in plan.devices) / years if not buy else 0.0
    plan.opex_usd_per_year = energy + rent
    training = sum(tables.training_cost[k] for k in sol.replicas if k in tables.training_cost)
    plan.tco_usd = plan.capex_usd + plan.opex_usd_per_year * years + training
    # Cost per million tokens for each serving workload: its share of devices and power.
    seconds = working_hours(problem) * 3600
    for wp in plan.workloads:
        if wp.kind == "inference" and wp.tokens_per_s > 0:
            share = _workload_cost(wp, plan, problem, econ)
            object.__setattr__(
                wp, "usd_per_million_tokens", share / (wp.tokens_per_s * seconds) * 1e6
            )
    plan.objective, plan.bound = _objective(plan, problem, sol)
    plan.slack = constraint_slack(plan, problem)
    plan.binding_constraints = [k for k, v in plan.slack.items() if v <= BINDING_SLACK]
    return plan


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
    room("max_devices", sum(d.count for d in plan.devices), c.max_devices)
    room("rack_units", plan.rack_units, c.max_rack_units)
    for w in problem.workloads:
        parts = [x for x in plan.workloads if x.name == w.name]
        if isinstance(w, InferenceWorkload):
            if w.min_tokens_per_s:
                got = sum(x.tokens_per_s for x in parts)
                out[f"throughput:{w.name}"] = float((got - w.min_tokens_per_s) / w.min_tokens_per_s)
            if w.max_ms_per_token:
                worst = max(x.ms_per_token or 0.0 for x in parts)
                room(f"latency:{w.name}", worst, w.max_ms_per_token)
        elif w.deadline_hours:
            room(f"deadline:{w.name}", max(x.finish_hours or 0.0 for x in parts), w.deadline_hours)
    return out


def _workload_cost(
    wp: WorkloadPlan, plan: Plan, problem: Problem, econ: dict[str, DeviceEconomics]
) -> float:
    """Devices of this workload at their unit price plus its energy over the horizon."""
    per_w = energy_usd_per_watt(problem)
    counts: dict[str, int] = {}
    for st in wp.stages:
        counts[st.device] = counts.get(st.device, 0) + st.tp * wp.replicas
    capital = sum(econ[d].unit_usd * n for d, n in counts.items())
    energy = wp.power_w * per_w if problem.horizon.procurement == "buy" else 0.0
    return capital + energy


def _objective(plan: Plan, problem: Problem, sol: Solution) -> tuple[float | None, float | None]:
    goal = problem.objective.goal
    if goal == "min_cost":
        return sol.objective, sol.bound  # the model's integer dollars (costs rounded up)
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
