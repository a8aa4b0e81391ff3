"""Re-check a plan without the solver: recompute every figure from the estimator, the catalog
and the problem, reading from the plan only its choices (devices, stages, tensor-parallel
degrees, layers, batch, replicas, sequences, requests served, devices held and how). A plan
that fails is a bug and raises; `planner.verify_plan` lists every failure of a plan file.

Each failure names the plan's field by its path in the plan file with both figures. The
workloads' figures are checked in `planner.verify_workloads`; here the fleet (device and host
lines, period by period), every cost line, energy, carbon and the fleet's ratios.

Long because every fleet figure is checked here beside the others it depends on, in the order
the plan builder derives them."""

from __future__ import annotations

import math
from dataclasses import asdict

from planner.catalog import Catalog
from planner.estimator.economics import (
    RENT_MODES,
    Period,
    Prices,
    carbon_promise,
    demand_periods,
    device_prices,
    embodied_kg_per_hour,
    embodied_share,
    embodied_unknown,
    energy_usd_per_watt_hour,
    grid_intensity,
    horizon_hours,
    host_idle_hours,
    idle_device_hours,
    ownership_factor,
    reserved_hours,
    working_hours,
)
from planner.estimator.hosts import (
    devices_bought,
    host_options,
    hosts_for,
    purchase_unit,
    tp_limit,
    with_machines,
)
from planner.estimator.network import network_gear, network_link, ports_per_host
from planner.estimator.request_mix import mix_served_rate
from planner.estimator.routes import route_link_ids
from planner.plan.slack import BINDING_SLACK
from planner.plan.types import Costs, DeviceLine, Plan, WorkloadPlan
from planner.schema.catalog import Node
from planner.schema.problem import (
    MAX_DEVICES,
    InferenceWorkload,
    Problem,
    TrainingWorkload,
    Workload,
)
from planner.verify_hops import check_hops
from planner.verify_notes import check_problem_notes, check_training_notes
from planner.verify_workloads import (
    CLOUD,
    COLLECT,
    PREM,
    REL_TOL,
    Fleet,
    check_demand,
    check_replicas,
    check_stages,
    check_training,
    fail,
    mix_tokens,
    replica_figures,
    same,
)

__all__ = ["COLLECT", "REL_TOL", "replica_figures", "verify"]


def verify(plan: Plan, problem: Problem, cat: Catalog) -> None:
    """Raise InternalError if any constraint or figure of `plan` does not hold."""
    cat = with_machines(cat, problem)
    periods = demand_periods(problem)
    if len(plan.periods) != len(periods):
        fail(problem, f"`periods`: {len(plan.periods)} stated, the problem has {len(periods)}")
    for q, (got, want) in enumerate(zip(plan.periods, periods, strict=False)):
        if got.name != want.name:
            fail(problem, f"`periods.{q}.name`: `{got.name}`, the problem's is `{want.name}`")
        same(problem, f"periods.{q}.hours", got.hours, want.hours)
        same(problem, f"periods.{q}.scale", got.scale, want.scale)
        same(problem, f"periods.{q}.gco2e_per_kwh", got.gco2e_per_kwh, want.gco2e_per_kwh)
    f = Fleet(len(periods))
    f.hosts = chosen_hosts(plan, cat)
    by_workload: dict[str, list[tuple[str, WorkloadPlan]]] = {}
    names = {w.name for w in problem.workloads}
    for i, wp in enumerate(plan.workloads):
        if wp.name not in names:
            fail(problem, f"`workloads.{i}.name`: `{wp.name}` is no workload of the problem")
        by_workload.setdefault(wp.name, []).append((f"workloads.{i}", wp))
    for w in problem.workloads:
        parts = by_workload.get(w.name, [])
        if not parts:
            fail(problem, f"`workloads`: `{w.name}` has no replicas")
        for at, wp in parts:
            if wp.replicas < 1 or not wp.stages or min(s.tp for s in wp.stages) < 1:
                fail(
                    problem,
                    f"`{at}.replicas` {wp.replicas}, {len(wp.stages)} `{at}.stages`, "
                    "tensor-parallel degrees: each must be at least 1",
                )
                continue
            if wp.kind != ("training" if isinstance(w, TrainingWorkload) else "inference"):
                fail(problem, f"`{at}.kind`: `{wp.kind}` for a {type(w).__name__}")
            if wp.model != w.model:
                fail(problem, f"`{at}.model`: `{wp.model}`, the workload's is `{w.model}`")
            _check_not_theirs(problem, w, wp, at)
            fig = check_stages(problem, cat, w, wp, f, at)
            check_hops(problem, cat, w, wp, at)
            if wp.site != PREM:
                _check_rented_tp(problem, cat, wp, at)
            if isinstance(w, TrainingWorkload):
                check_training(problem, cat, w, wp, f, at, sum(p.hours for p in periods))
            else:
                assert fig is not None
                check_replicas(problem, cat, w, wp, fig, f, periods, at)
        if isinstance(w, InferenceWorkload):
            check_demand(problem, cat, w, parts, periods, f)
            for q, p in enumerate(periods):
                if (w.name, q) in f.capacity:
                    # Tokens served: the demand when one is stated, else the capacity.
                    cap = f.capacity[(w.name, q)]
                    rate = min(cap, w.min_tokens_per_s * p.scale) if w.min_tokens_per_s else cap
                    f.tokens[q] += rate * p.hours * 3600
            if w.request_mix is not None:
                mix_tokens(problem, w, periods, f)
    _check_fleet(plan, problem, cat, f, periods)
    _check_phases(plan, problem, f)
    _check_hosts(plan, problem, cat, f, periods)
    _check_costs(plan, problem, cat, f, periods)
    _check_energy_and_carbon(plan, problem, cat, f, periods)
    _check_slack(plan, problem, f)
    _check_capacity_objective(plan, problem, f, periods)
    check_training_notes(plan, problem, cat)
    check_problem_notes(plan, problem, cat)


def _check_capacity_objective(
    plan: Plan, problem: Problem, f: Fleet, periods: list[Period]
) -> None:
    """The goals read off capacity (max_throughput, max_tokens_per_joule, min_cost_per_token),
    recomputed from the verifier's own figures: fixed-rate workloads' tokens/s in the busiest
    period (with `objective.tokens: all`, each output token's share of its prompt), and each
    request mix at the rate its scarcest class is served (a request once both prefilled and
    decoded) times its tokens per request."""
    goal = problem.objective.goal
    if goal not in CAPACITY_GOALS or not plan.has_plan or not periods:
        return
    top = max(range(len(periods)), key=lambda q: periods[q].scale)
    scale = periods[top].scale
    every = problem.objective.tokens == "all"
    capacity = 0.0
    for w in problem.workloads:
        if not isinstance(w, InferenceWorkload):
            continue
        if w.request_mix is None:
            per = 1.0 + (w.prompt_tokens / w.output_tokens if every else 0.0)
            capacity += f.capacity.get((w.name, top), 0.0) * per
            continue
        if goal == "min_cost_per_token":
            continue  # a request mix serves its stated rate: no capacity goal reads it
        decoded = f.decoded.get((w.name, top), {})
        rate = mix_served_rate(w, scale, decoded, f.prefilled.get((w.name, top), {}))
        per = sum(
            c.share * (c.output_tokens + (c.input_tokens if every else 0)) for c in w.request_mix
        )
        capacity += rate * scale * per
    if goal == "max_throughput":
        want: float | None = capacity
    elif goal == "max_tokens_per_joule":
        want = capacity / plan.power_w if plan.power_w else 0.0
    else:
        tokens = capacity * working_hours(problem) * 3600
        want = plan.tco_usd / tokens * 1e6 if tokens else None
    same(problem, "objective", plan.objective, want, " (from the workloads' capacity)")


CAPACITY_GOALS = ("max_throughput", "max_tokens_per_joule", "min_cost_per_token")


def _check_slack(plan: Plan, problem: Problem, f: Fleet) -> None:
    """The room the plan states under each limit, and the limits it says bind, against the
    room recomputed from the verifier's own figures."""
    c = problem.constraints
    f.limit("max_stages", max((len(x.stages) for x in plan.workloads), default=0), c.max_stages)
    tps = [s.tp for x in plan.workloads for s in x.stages]
    f.limit("max_tensor_parallel", max(tps, default=0), c.max_tensor_parallel)
    for key in sorted(set(plan.slack) | set(f.room)):
        same(problem, f"slack.{key}", plan.slack.get(key), f.room.get(key))
    want = sorted(k for k, v in f.room.items() if v <= BINDING_SLACK)
    if sorted(plan.binding_constraints) != want:
        fail(
            problem,
            f"`binding_constraints`: stated {plan.binding_constraints}, the limits "
            f"with under {BINDING_SLACK:.0%} room left are {want}",
        )


def _check_not_theirs(problem: Problem, w: Workload, wp: WorkloadPlan, at: str) -> None:
    """Names a line carries only for some workloads: a training job serves no demand period
    under no engine, and only a request mix's designs are sized for one of its classes."""
    theirs = {"sized_for": isinstance(w, InferenceWorkload) and w.request_mix is not None}
    if isinstance(w, TrainingWorkload):
        theirs |= {"period": False, "engine": False}
    for key, allowed in theirs.items():
        if not allowed and getattr(wp, key) is not None:
            fail(problem, f"`{at}.{key}`: `{getattr(wp, key)}`, but `{w.name}` has none")


def _earlier(problem: Problem, n: int) -> range:
    """Indices of the phases before the last in the fleet's use, past the n demand periods."""
    return range(n, n + max(0, len(problem.phases or []) - 1))


def _check_phases(plan: Plan, problem: Problem, f: Fleet) -> None:
    """Each phase of the problem, in order, with its hours (an earlier phase its jobs' longest
    deadline, the last the rest of the horizon) and its devices on premises at work."""
    phases = problem.phases or []
    if len(plan.phases) != len(phases):
        fail(problem, f"`phases`: {len(plan.phases)} stated, the problem has {len(phases)}")
    H = horizon_hours(problem)
    earlier = list(_earlier(problem, f.n))
    before = sum(problem.phase_hours(k) for k in range(len(earlier)))
    for k, (got, ph) in enumerate(zip(plan.phases, phases, strict=False)):
        at = f"phases.{k}"
        if got.name != ph.name or got.workloads != ph.workloads:
            fail(problem, f"`{at}`: `{got.name}` {got.workloads}, the problem's is `{ph.name}`")
        last = k == len(phases) - 1
        same(problem, f"{at}.hours", got.hours, H - before if last else problem.phase_hours(k))
        qs = range(f.n) if last else [earlier[k]]
        want = {
            dev: most
            for dev in sorted({d for d, _, site in f.use if site == PREM})
            if (most := max(f.use.get((dev, q, PREM), 0) for q in qs))
        }
        if got.devices != want:
            fail(problem, f"`{at}.devices`: {got.devices}, at work in the phase {want}")


def _check_rented_tp(problem: Problem, cat: Catalog, wp: WorkloadPlan, at: str) -> None:
    """A rented stage's tensor-parallel group lies inside one instance when its device is
    rented in whole instances (tensor parallelism does not span a network)."""
    for j, st in enumerate(wp.stages):
        acc = cat.accelerator(st.device)
        prices = device_prices(problem, acc, cat.instances_of(acc.id))
        if prices.instance is not None and st.tp > prices.rent_unit:
            fail(
                problem,
                f"`{at}.stages.{j}.tp`: {st.tp} rented {st.device}, more than one "
                f"{prices.instance} holds ({prices.rent_unit})",
            )


def _check_instances(
    problem: Problem, line: DeviceLine, prices: Prices, od: list[int], sp: list[int], at: str
) -> None:
    """Rented devices come from the offer the market allows at the lowest rate per device, in
    whole instances: the line names that instance, and every period's reserved, on-demand and
    spot count is a multiple of its devices."""
    rented = line.reserved or any(od) or any(sp)
    want = (prices.instance, prices.rent_unit) if rented else (None, 1)
    if (line.instance, line.devices_per_instance) != want:
        fail(
            problem,
            f"`{at}.instance` {line.instance}, `{at}.devices_per_instance` "
            f"{line.devices_per_instance}: the offer is {want[0] or 'per device'} x {want[1]}",
        )
    unit = prices.rent_unit
    for mode, counts in (("reserved", [line.reserved]), ("on_demand", od), ("spot", sp)):
        for q, k in enumerate(counts):
            if k % unit:
                fail(
                    problem,
                    f"`periods.{q}.devices.{line.type}.{mode}`: {k} devices, not whole "
                    f"{prices.instance} instances of {unit}",
                )


def _held_by_mode(plan: Plan, q: int, dev: str, mode: str) -> int:
    if q >= len(plan.periods):
        return 0
    return plan.periods[q].devices.get(dev, {}).get(mode, 0)


def _check_fleet(
    plan: Plan, problem: Problem, cat: Catalog, f: Fleet, periods: list[Period]
) -> None:
    """The bill of materials holds every device at work, in modes the problem allows, and
    stays under the fleet limits; each device line's figures recomputed.

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
        fail(
            problem,
            f"`devices`: {sorted(listed)}, the stages use {sorted({dev for dev, _, _ in f.use})}",
        )
    avail = problem.market.spot_availability
    spot_needed = [0] * n
    held = [0] * n
    own = ownership_factor(problem)
    usd_wh = energy_usd_per_watt_hour(problem)
    for i, line in enumerate(plan.devices):
        at = f"devices.{i}"
        dev = line.type
        acc = cat.accelerator(dev)
        prices = device_prices(problem, acc, cat.instances_of(acc.id))
        node = f.hosts.get(dev) or cat.host_for(acc)
        assert node is not None
        prem = [f.use.get((dev, q, PREM), 0) for q in range(n)]
        cloud = [f.use.get((dev, q, CLOUD), 0) for q in range(n)]
        # No device is booked twice: the fleet holds every period's and every earlier phase's
        # devices at work, each in its own time; owned ones first, then the fewest bought in
        # the host's purchase unit (a whole baseboard or kit where it is sold whole: spares).
        at_work = max(prem + [f.use.get((dev, q, PREM), 0) for q in _earlier(problem, n)])
        want_bought = devices_bought(node, at_work - line.owned)
        if line.bought != want_bought:
            unit = purchase_unit(node)
            why = (
                f"{node.id} is sold whole, {unit} {dev} at a time"
                if unit > 1
                else f"{dev} is bought one at a time in {node.id}"
            )
            fail(
                problem,
                f"`{at}.bought`: {line.bought} {dev}, but {at_work} are at work on premises "
                f"and {line.owned} owned; {why}: buy {want_bought}",
            )
        fleet = line.owned + want_bought
        if line.owned > owned_inv.get(dev, 0) or line.owned != min(at_work, owned_inv.get(dev, 0)):
            fail(
                problem,
                f"`{at}.owned`: {line.owned}, the inventory holds "
                f"{owned_inv.get(dev, 0)} {dev} (used first)",
            )
        if line.bought and ("buy" not in h.modes or prices.purchase_usd is None):
            fail(
                problem,
                f"`{at}.bought`: {line.bought}, but buying {dev} is not allowed or has no price",
            )
        od = [_held_by_mode(plan, q, dev, "on_demand") for q in range(n)]
        sp = [_held_by_mode(plan, q, dev, "spot") for q in range(n)]
        for q in range(n):
            pd = f"periods.{q}.devices.{dev}"
            rv = _held_by_mode(plan, q, dev, "reserved")
            if rv != (line.reserved if cloud[q] else 0):
                fail(problem, f"`{pd}.reserved`: {rv}, `{at}.reserved` is {line.reserved}")
            if cloud[q] > line.reserved + od[q] + math.floor(avail * sp[q] + 1e-9):
                fail(
                    problem,
                    f"`{pd}`: {cloud[q]} rented {dev} at work, fewer held "
                    f"(`{at}.reserved` {line.reserved})",
                )
            if _held_by_mode(plan, q, dev, PREM) != prem[q]:
                fail(
                    problem,
                    f"`{pd}.{PREM}`: stated {_held_by_mode(plan, q, dev, PREM)}, {prem[q]} at work",
                )
            stated = plan.periods[q].devices.get(dev, {}) if q < len(plan.periods) else {}
            extra = set(stated) - {PREM, *RENT_MODES}
            if extra:
                fail(problem, f"`{pd}`: unknown modes {sorted(extra)}")
            spot_needed[q] += max(0, cloud[q] - line.reserved - od[q])
            held[q] += fleet + cloud[q]
        for mode, count in (("reserved", line.reserved), ("on_demand", max(od)), ("spot", max(sp))):
            if count and (mode not in h.modes or prices.rate(mode) is None):
                fail(problem, f"`{at}.{mode}`: {count}, but {mode} is not allowed or has no price")
        _check_instances(problem, line, prices, od, sp, at)
        cells = [
            f"`periods.{q}.devices.{dev}.{mode}`"
            for mode, counts in ((PREM, prem), ("on_demand", od), ("spot", sp))
            if any(counts)
            for q in [counts.index(max(counts))]
        ]
        peaks = f" (from the peaks {', '.join(cells)})" if cells else ""
        same(problem, f"{at}.count", line.count, fleet + line.reserved + max(od) + max(sp), peaks)
        same(problem, f"{at}.on_demand", line.on_demand, max(od), peaks)
        same(problem, f"{at}.spot", line.spot, max(sp), peaks)
        hours = {
            PREM: sum(u * p.hours for u, p in zip(prem, periods, strict=True))
            + f.phase_hours.get(dev, 0.0)
        }
        rent: dict[str, float] = {}
        made_of: dict[str, str] = {}  # the periods' counts a rented mode's hours come from
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
                cells = [f"`periods.{q}.devices.{dev}.{mode}`" for q, k in enumerate(counts) if k]
                made_of[mode] = f" (from {', '.join(cells)}, each times its period's hours)"
        _same_dict(problem, f"{at}.device_hours", line.device_hours, hours, made_of)
        _same_dict(problem, f"{at}.rent_usd", line.rent_usd, rent, made_of)
        rates: dict[str, float] = {m: r for m in RENT_MODES if (r := prices.rate(m)) is not None}
        _same_dict(problem, f"{at}.rent_usd_per_hour", line.rent_usd_per_hour, rates)
        purchase = prices.purchase_usd or 0.0
        same(problem, f"{at}.unit_price_usd", line.unit_price_usd, purchase if line.bought else 0.0)
        same(
            problem,
            f"{at}.total_usd",
            line.total_usd,
            purchase * line.bought,
            f" (`{at}.bought` {line.bought})",
        )
        host_bought = hosts_for(node, line.bought)
        maint = (purchase * line.bought + node.price_usd * host_bought) * (own - 1)
        same(problem, f"{at}.maintenance_usd", line.maintenance_usd, maint)
        idle_wh = acc.power.idle_w * idle_device_hours(problem, fleet, hours[PREM])
        f.idle_wh += idle_wh
        same(
            problem,
            f"{at}.energy_usd",
            line.energy_usd,
            (f.prem_wh.get(dev, 0.0) + idle_wh) * usd_wh,
            " (at work, and idle while held)",
        )
        same(
            problem,
            f"{at}.utilization",
            line.utilization,
            hours[PREM] / (fleet * H) if fleet else None,
        )
        watts = f.prem_wh.get(dev, 0.0) / hours[PREM] if hours[PREM] else acc.power.tdp_w
        be = None
        if prices.purchase_usd is not None and prices.on_demand_usd_per_hour is not None:
            # Bought: purchase with its host share, idle draw and the host's overhead all the
            # horizon, and the draw above idle while at work; rented: rent while at work.
            margin = prices.on_demand_usd_per_hour - (watts - acc.power.idle_w) * usd_wh
            if margin > 0:
                fixed = (prices.purchase_usd + node.price_usd / node.slots) * own + H * (
                    acc.power.idle_w + node.power_overhead_w / node.slots
                ) * usd_wh
                be = fixed / (H * margin)
        same(problem, f"{at}.break_even_utilization", line.break_even_utilization, be)
        if c.allowed_devices is not None and dev not in c.allowed_devices and dev not in owned_inv:
            fail(problem, f"`{at}.type`: {dev} is not among allowed_devices")
        if dev in c.excluded_devices:
            fail(problem, f"`{at}.type`: {dev} is excluded")
        if c.require_ecc and not acc.ecc:
            fail(problem, f"`{at}.type`: {dev} has no ECC")
    for q in range(n):
        total = sum(f.use.get((d, q, s), 0) for d in listed for s in (PREM, CLOUD))
        if spot_needed[q] > problem.market.spot_max_share * total * (1 + REL_TOL) + 1e-9:
            fail(problem, f"`periods.{q}.devices`: spot carries more than its share")
        if c.max_devices is not None and held[q] > c.max_devices:
            fail(problem, f"`periods.{q}.devices`: {held[q]} devices > max_devices {c.max_devices}")
    f.limit("max_devices", max(held, default=0), c.max_devices)
    if c.max_devices is None:
        for x in plan.devices:
            fleet = max((f.use.get((x.type, q, PREM), 0) for q in range(n)), default=0)
            if (MAX_DEVICES - fleet) / MAX_DEVICES <= BINDING_SLACK:
                f.limit(f"design:fleet:{x.type}", fleet, MAX_DEVICES)


def _held_on_premises(plan: Plan, problem: Problem, f: Fleet) -> dict[str, int]:
    """Devices held on premises by type (owned and bought, checked by _check_fleet), for each
    type at work in a demand period or an earlier phase: a training phase's type may be one the
    last phase does not use, and its hosts are held all the same."""
    qs = [*range(f.n), *_earlier(problem, f.n)]
    held: dict[str, int] = {}
    for x in plan.devices:
        if max((f.use.get((x.type, q, PREM), 0) for q in qs), default=0):
            held[x.type] = x.owned + x.bought
    return held


def _check_hosts(
    plan: Plan, problem: Problem, cat: Catalog, f: Fleet, periods: list[Period]
) -> None:
    """One node line per device type on premises, in a host that may hold it and every
    tensor-parallel group it runs: the fewest hosts that hold the devices held, their price,
    rack units and idle power; the network joining them."""
    c = problem.constraints
    n = len(periods)
    want_hosts = _held_on_premises(plan, problem, f)
    groups = _largest_groups(plan)
    if sorted(x.hosts for x in plan.nodes) != sorted(want_hosts):
        fail(
            problem,
            f"`nodes`: host {sorted(x.hosts for x in plan.nodes)}, the devices on "
            f"premises are {sorted(want_hosts)}",
        )
    ru = 0
    bought = {x.type: x.bought for x in plan.devices}
    for i, node_line in enumerate(plan.nodes):
        at = f"nodes.{i}"
        nd = cat.node(node_line.type)
        _check_host_type(problem, cat, at, nd, node_line.hosts, groups.get(node_line.hosts, 1))
        fleet = want_hosts.get(node_line.hosts, 0)
        same(
            problem,
            f"{at}.count",
            node_line.count,
            hosts_for(nd, fleet),
            f" (the fewest {nd.id} hosts for {fleet} {node_line.hosts})",
        )
        same(problem, f"{at}.unit_price_usd", node_line.unit_price_usd, nd.price_usd)
        stated = next((m.name or "" for m in problem.machines if m.id == nd.id), "")
        if node_line.name != stated:
            named = f"`{stated}`" if stated else "no name (it is no machine the problem states)"
            fail(problem, f"`{at}.name`: `{node_line.name}`; {nd.id} has {named}")
        hosts_bought = hosts_for(nd, bought.get(node_line.hosts, 0))
        same(
            problem,
            f"{at}.total_usd",
            node_line.total_usd,
            nd.price_usd * hosts_bought,
            f" ({hosts_bought} hosts bought)",
        )
        same(problem, f"{at}.rack_units", node_line.rack_units, nd.rack_units * node_line.count)
        ru += nd.rack_units * node_line.count
        for q in range(n):
            f.power[q] += nd.power_overhead_w * node_line.count
    ru += _check_network(plan, problem, cat, f)
    same(problem, "rack_units", plan.rack_units, ru, " (the node lines' and switches' rack units)")
    f.limit("rack_units", ru, c.max_rack_units)
    if c.max_rack_units is not None and ru > c.max_rack_units:
        fail(problem, f"`rack_units`: {ru} > max_rack_units {c.max_rack_units}")
    for q, p in enumerate(plan.periods[:n]):
        why = f" (from {', '.join(f'`{x}`' for x in f.feeds[q])} and the hosts)"
        same(problem, f"periods.{q}.power_w", p.power_w, f.power[q], why)
    peak = max(f.power, default=0.0) + f.training_w
    same(problem, "power_w", plan.power_w, peak)
    f.limit("power", peak * problem.horizon.pue, c.power_w)
    if c.power_w is not None and peak * problem.horizon.pue > c.power_w * (1 + REL_TOL):
        fail(
            problem,
            f"`wall_power_w`: {peak * problem.horizon.pue:.0f} W > cap power_w {c.power_w} W",
        )
    _check_links(plan, problem, cat)


def _check_links(plan: Plan, problem: Problem, cat: Catalog) -> None:
    """`links`: the hosts' own links, the network where anything is joined, and every link a
    group across machines or a pipeline hop crosses."""
    hosts = sum(x.count for x in plan.nodes)
    rented = any(x.reserved or x.on_demand or x.spot for x in plan.devices)
    joined = (
        len(plan.devices) > 1
        or hosts > 1
        or rented
        or any(len(w.stages) > 1 for w in plan.workloads)
    )
    links = [nd.intra_node_link for x in plan.nodes if (nd := cat.node(x.type))]
    want = list(dict.fromkeys(links)) + ([problem.constraints.network] if joined else [])
    for w in plan.workloads:  # groups across machines and hops cross their routes' links
        devices, across = [s.device for s in w.stages], [s.across_machines for s in w.stages]
        tps = [s.tp for s in w.stages]
        for net in route_link_ids(problem, cat, devices, tps, across, w.kind == "inference"):
            if net not in want:
                want.append(net)
    if sorted(plan.links) != sorted(want):
        fail(problem, f"`links`: {plan.links}, the hosts and network make {want}")


def _largest_groups(plan: Plan) -> dict[str, int]:
    """Device -> its largest tensor-parallel group one host holds on premises (a group across
    machines puts one device in each)."""
    groups: dict[str, int] = {}
    for wp in plan.workloads:
        if wp.site == PREM:
            for st in wp.stages:
                held = 1 if st.across_machines else st.tp
                groups[st.device] = max(groups.get(st.device, 1), held)
    return groups


def _check_host_type(
    problem: Problem, cat: Catalog, at: str, nd: Node, device: str, tp: int
) -> None:
    """The node line's host type may hold `device` and its largest group of `tp`."""
    acc = cat.accelerator(device)
    options = [x.id for x in host_options(cat, acc, problem)]
    if nd.id not in options:
        fail(problem, f"`{at}.type`: {nd.id} cannot host {acc.id} (its hosts: {options})")
    limit = tp_limit(acc, nd, problem.constraints)
    if tp > limit:
        fail(
            problem,
            f"`{at}.type`: {nd.id} holds tensor-parallel groups of at most {limit} {acc.id}, "
            f"the stages on premises run {tp}",
        )


def _same_dict(
    problem: Problem,
    at: str,
    got: dict[str, float],
    want: dict[str, float],
    why: dict[str, str] | None = None,
) -> None:
    """Each key of `got` against `want`; `why[key]` says what a recomputed figure is made of."""
    keys = {k for k, v in got.items() if v} | {k for k, v in want.items() if v}
    for k in sorted(keys):
        same(problem, f"{at}.{k}", got.get(k, 0.0), want.get(k, 0.0), (why or {}).get(k, ""))


def _check_network(plan: Plan, problem: Problem, cat: Catalog, f: Fleet) -> int:
    """The ports and switches joining the hosts, recounted from the host lines and the devices
    bought (planner.estimator.network), against the plan's network line; the switches' power
    joins every period's. Returns their rack units."""
    link = network_link(problem, cat)
    bought = {x.type: x.bought for x in plan.devices}
    ports = 0
    for x in plan.nodes:
        nd = cat.node(x.type)
        ports += ports_per_host(nd, link.id) * -(-bought.get(x.hosts, 0) // nd.slots)
    gear = network_gear(link, sum(x.count for x in plan.nodes), ports)
    line = plan.network
    if (gear is None) != (line is None):
        fail(problem, f"`network`: {line} where the hosts need {gear}")
    if gear is not None and line is not None:
        energy = gear.power_w * horizon_hours(problem) * energy_usd_per_watt_hour(problem)
        why = " (planner.estimator.network, from the host lines and devices bought)"
        same(problem, "network.ports", line.ports, gear.ports, why)
        same(problem, "network.unit_price_usd", line.unit_price_usd, gear.port_usd, why)
        switch = gear.switch
        if line.link != gear.link or line.switch != (switch.name if switch else None):
            fail(problem, f"`network`: link {line.link}, switch {line.switch}{why}")
        price = switch.price_usd if switch else 0.0
        same(problem, "network.switch_price_usd", line.switch_price_usd, price, why)
        same(problem, "network.switches", line.switches, gear.switches, why)
        same(problem, "network.total_usd", line.total_usd, gear.capex_usd, why)
        same(problem, "network.power_w", line.power_w, gear.power_w, why)
        same(problem, "network.rack_units", line.rack_units, gear.rack_units, why)
        same(problem, "network.energy_usd", line.energy_usd, energy, why)
    if gear is None:
        return 0
    for q in range(f.n):
        f.power[q] += gear.power_w
    return gear.rack_units


def _check_costs(
    plan: Plan, problem: Problem, cat: Catalog, f: Fleet, periods: list[Period]
) -> None:
    """Every cost figure, recomputed from catalog prices and the problem."""
    c = problem.constraints
    h = problem.horizon
    own = ownership_factor(problem)
    usd_wh = energy_usd_per_watt_hour(problem)
    whole_h = horizon_hours(problem)
    capex = 0.0
    bought = {x.type: x.bought for x in plan.devices}
    for x in plan.devices:
        capex += (
            device_prices(problem, cat.accelerator(x.type), cat.instances_of(x.type)).purchase_usd
            or 0.0
        ) * x.bought
    host_energy = 0.0
    for node_line in plan.nodes:
        nd = cat.node(node_line.type)
        capex += nd.price_usd * -(-bought.get(node_line.hosts, 0) // nd.slots)
        # A host draws its overhead through the whole horizon: at load, then as idle draw.
        hosts_usd = nd.power_overhead_w * node_line.count * whole_h * usd_wh
        same(
            problem,
            f"nodes.{plan.nodes.index(node_line)}.energy_usd",
            node_line.energy_usd,
            hosts_usd,
        )
        host_energy += hosts_usd
    if plan.network is not None:  # checked against the hosts by _check_network
        capex += plan.network.total_usd
        host_energy += plan.network.energy_usd
    energy = (sum(f.prem_wh.values()) + f.idle_wh) * usd_wh + host_energy
    rents = {
        m: sum(
            x.device_hours.get(m, 0.0)
            * (
                device_prices(problem, cat.accelerator(x.type), cat.instances_of(x.type)).rate(m)
                or 0.0
            )
            for x in plan.devices
        )
        for m in RENT_MODES
    }
    premises_w = max((p - q for p, q in zip(f.power, f.cloud_power, strict=True)), default=0.0)
    rack = plan.rack_units * (h.rack_usd_per_u_month or 0.0) * 12 * h.lifetime_years
    facility = (
        (premises_w + f.training_w) / 1000 * (h.facility_usd_per_kw_month or 0.0) * 12
    ) * h.lifetime_years
    want = Costs(
        capex_usd=capex,
        maintenance_usd=capex * (own - 1),
        energy_usd=energy,
        rent_on_demand_usd=rents["on_demand"],
        rent_reserved_usd=rents["reserved"],
        rent_spot_usd=rents["spot"],
        training_usd=f.training_usd,
        rack_space_usd=rack,
        facility_power_usd=facility,
        total_usd=capex * own + energy + sum(rents.values()) + f.training_usd + rack + facility,
    )
    for key, value in asdict(want).items():
        same(problem, f"costs.{key}", getattr(plan.costs, key), value)
    same(problem, "tco_usd", plan.tco_usd, want.total_usd, " (the sum of the cost lines)")
    same(problem, "capex_usd", plan.capex_usd, capex)
    opex = (want.total_usd - capex - f.training_usd) / h.lifetime_years
    same(problem, "opex_usd_per_year", plan.opex_usd_per_year, opex)
    f.limit("budget", want.total_usd, c.budget_usd)
    f.limit("capex", capex, c.capex_usd)
    if c.capex_usd is not None and capex > c.capex_usd * (1 + REL_TOL):
        fail(problem, f"`capex_usd`: {capex:.0f} > the capex ceiling capex_usd {c.capex_usd}")
    if c.budget_usd is not None and want.total_usd > c.budget_usd * (1 + REL_TOL):
        fail(problem, f"`tco_usd`: total cost {want.total_usd:.0f} > budget_usd {c.budget_usd}")


def _check_energy_and_carbon(
    plan: Plan, problem: Problem, cat: Catalog, f: Fleet, periods: list[Period]
) -> None:
    h = problem.horizon
    kwh = [pw * p.hours * h.pue / 1000 for pw, p in zip(f.power, periods, strict=True)]
    for q, p in enumerate(plan.periods[: len(periods)]):
        why = f" (from {', '.join(f'`{x}`' for x in f.feeds[q])})"
        same(problem, f"periods.{q}.energy_kwh", p.energy_kwh, kwh[q])
        same(problem, f"periods.{q}.tokens", p.tokens, f.tokens[q], why)
    always_w = sum(cat.node(x.type).power_overhead_w * x.count for x in plan.nodes)
    always_w += plan.network.power_w if plan.network is not None else 0.0
    idle_wh = f.idle_wh + always_w * host_idle_hours(problem)
    other_kwh = f.training_kwh + idle_wh * h.pue / 1000  # at the problem's grid intensity
    total_kwh = sum(kwh) + other_kwh
    same(problem, "energy_kwh_per_year", plan.energy_kwh_per_year, total_kwh / h.lifetime_years)
    tokens = sum(f.tokens)
    joules = total_kwh * 3.6e6
    serves = any(w.kind != "training" for w in problem.workloads)
    per_joule = tokens / joules if joules and serves else None
    same(problem, "tokens_per_joule", plan.tokens_per_joule, per_joule)
    if problem.carbon is None:
        if plan.carbon is not None:
            fail(problem, "`carbon`: carbon figures without a carbon section in the problem")
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
        fail(problem, "`carbon`: no carbon figures, but the problem has a carbon section")
        return
    total = operational + embodied
    for key, want in (
        ("energy_kwh", total_kwh),
        ("operational_kgco2e", operational),
        ("embodied_kgco2e", embodied),
        ("total_kgco2e", total),
        ("tokens", tokens),
        ("sci_g_per_million_tokens", total * 1000 / (tokens / 1e6) if tokens else None),
    ):
        same(problem, f"carbon.{key}", getattr(cl, key), want)
    kinds = [x.type for x in plan.devices]
    kinds += [st.device for wp in plan.workloads if wp.kind == "training" for st in wp.stages]
    unknown = embodied_unknown(kinds, cat)
    # A plan written before the field (null) holds only where no device lacks the figure: one
    # that does states its embodied carbon as a fact it is not.
    if tuple(cl.embodied_unknown or ()) != unknown:
        fail(
            problem,
            f"`carbon.embodied_unknown`: {cl.embodied_unknown}, not {list(unknown)} (devices "
            "without an embodied-carbon figure: the plan's embodied carbon is a lower bound)",
        )
    promise = carbon_promise(problem)
    if promise is not None and unknown:
        fail(problem, f"`devices`: {', '.join(unknown)} without an embodied figure under {promise}")
    cap = problem.constraints.max_carbon_kgco2e
    f.limit("carbon", total, cap)
    if cap is not None and total > cap * (1 + REL_TOL):
        fail(problem, f"`carbon.total_kgco2e`: {total:.0f} kg > max_carbon_kgco2e {cap} kg")


def chosen_hosts(plan: Plan, cat: Catalog) -> dict[str, Node]:
    """The node type the plan's node lines put each device type in (a choice the plan states;
    the checks of the host lines say whether it may)."""
    return {x.hosts: cat.nodes[x.type] for x in plan.nodes if x.type in cat.nodes}
