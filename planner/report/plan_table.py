"""Render a Plan as readable tables.

Figures a plan does not use stay out of sight: how devices are had (owned, bought, reserved,
on-demand and spot peaks) only where any is non-zero, cost kinds only where non-zero, demand
periods only when there is more than one, carbon only when the problem has a `carbon` section.
"""

from __future__ import annotations

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from planner.plan.types import DeviceLine, Plan, WorkloadPlan
from planner.report.estimate import duration, gb

# How a device is had, as the plan's fields and their column headings.
_HAD: tuple[tuple[str, str], ...] = (
    ("owned", "owned"),
    ("bought", "bought"),
    ("reserved", "reserved"),
    ("on_demand", "on-demand peak"),
    ("spot", "spot peak"),
)
# Modes in PeriodLine.devices, in a fixed order, with short labels.
_MODES: tuple[tuple[str, str], ...] = (
    ("on-premises", "on-prem"),
    ("owned", "owned"),
    ("bought", "bought"),
    ("reserved", "reserved"),
    ("on_demand", "on-demand"),
    ("spot", "spot"),
)


def _money(x: float) -> str:
    return f"${x:,.0f}"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _on_premises(d: DeviceLine) -> bool:
    return d.owned + d.bought > 0


def _item(d: DeviceLine) -> str:
    """The device, and the cloud instances its rented devices come in (rented whole)."""
    if d.instance is None:
        return d.type
    n = d.devices_per_instance
    peak = (d.reserved + d.on_demand + d.spot) // n
    return f"{d.type} as {peak} x {d.instance} ({n} each)"


def _bill(plan: Plan) -> Table:
    had = [(f, h) for f, h in _HAD if any(getattr(d, f) for d in plan.devices)]
    buys = bool(plan.nodes) or any(d.bought for d in plan.devices)
    # Training jobs rented for their own hours: what each rents, for how long, at what cost.
    jobs = [w for w in plan.workloads if w.kind == "training" and w.site != "on-premises"]
    rents = any(sum(d.rent_usd.values()) for d in plan.devices) or bool(jobs)
    prem = [d for d in plan.devices if _on_premises(d)]
    util = any(d.utilization is not None for d in prem)
    even = any(d.break_even_utilization is not None for d in prem)
    cols = ["item", "count", *(h for _, h in had)]
    if buys:
        cols += ["unit price", "total"]
    if rents:
        cols.append("rent")
    if util:
        cols.append("utilization")
    if even:
        cols.append("break-even")
    bom = Table(title="bill of materials", title_justify="left")
    for col in cols:
        bom.add_column(col, justify="left" if col == "item" else "right")
    for d in plan.devices:
        row = [_item(d), str(d.count), *(str(getattr(d, f)) for f, _ in had)]
        if buys:
            row += [_money(d.unit_price_usd), _money(d.total_usd)] if d.bought else ["", ""]
        if rents:
            rent = sum(d.rent_usd.values())
            row.append(_money(rent) if rent else "")
        if util:
            row.append(_share(d.utilization) if _on_premises(d) else "")
        if even:
            row.append(_share(d.break_even_utilization) if _on_premises(d) else "")
        bom.add_row(*row)
    pad = [""] * (len(cols) - 2)
    for w in jobs:
        for dev, k in w.devices().items():
            row = [f"{dev} (rented for `{w.name}`, {w.finish_hours or 0:,.1f} h)", str(k), *pad]
            row[cols.index("rent")] = _money(w.job_usd or 0.0) if len(w.devices()) == 1 else ""
            bom.add_row(*row)
    for node in plan.nodes:
        named = f"{node.type}: {node.name}" if node.name else node.type
        row = [f"{named} (hosts {node.hosts})", str(node.count), *pad]
        at = cols.index("unit price")
        row[at : at + 2] = [_money(node.unit_price_usd), _money(node.total_usd)]
        bom.add_row(*row)
    net = plan.network
    if net is not None:
        at = cols.index("unit price")
        rows = [(f"{net.link} ports (NIC, optics or cable)", net.ports, net.unit_price_usd)]
        if net.switch:
            rows.append(
                (f"switch {net.switch}, {net.power_w:,.0f} W", net.switches, net.switch_price_usd)
            )
        for label, count, unit in rows:
            row = [label, str(count), *pad]
            row[at : at + 2] = [_money(unit), _money(unit * count)]
            bom.add_row(*row)
    bom.add_row("links", ", ".join(plan.links), *pad)
    if util:
        bom.caption = "utilization = hours at work / hours held" + (
            "; buying beats on-demand rent above break-even" if even else ""
        )
    return bom


def _costs(plan: Plan) -> Table:
    c = plan.costs
    t = Table(title="cost by kind", title_justify="left", show_header=False)
    t.add_column("kind")
    t.add_column("USD", justify="right")
    for label, x in (
        ("devices, hosts and network bought", c.capex_usd),
        ("maintenance", c.maintenance_usd),
        ("energy (on premises, x PUE)", c.energy_usd),
        ("rent: on demand", c.rent_on_demand_usd),
        ("rent: reserved", c.rent_reserved_usd),
        ("rent: spot", c.rent_spot_usd),
        ("training jobs", c.training_usd),
        ("rack space (colocation)", c.rack_space_usd),
        ("facility power capacity (colocation)", c.facility_power_usd),
    ):
        if x:
            t.add_row(label, _money(x))
    t.add_row("total over the horizon", _money(c.total_usd), style="bold")
    return t


def _at_work(devices: dict[str, dict[str, int]]) -> str:
    parts = []
    for dev in sorted(devices):
        modes = devices[dev]
        known = [m for m, _ in _MODES]
        order = [(m, lab) for m, lab in _MODES if modes.get(m)]
        order += [(m, m) for m in sorted(modes) if m not in known and modes[m]]
        parts.append(f"{dev}: " + " + ".join(f"{modes[m]} {lab}" for m, lab in order))
    return "; ".join(parts) or "-"


def _periods(plan: Plan) -> Table:
    grid = any(p.gco2e_per_kwh is not None for p in plan.periods)
    t = Table(title="demand periods", title_justify="left")
    cols = ["period", "hours", "scale", "devices at work", "power W", "energy kWh"]
    if grid:
        cols.append("g CO2e/kWh")
    for col in cols:
        t.add_column(col, justify="left" if col in ("period", "devices at work") else "right")
    for p in plan.periods:
        row = [
            escape(p.name),
            f"{p.hours:,.0f}",
            f"{p.scale:g}x",
            _at_work(p.devices),
            f"{p.power_w:,.0f}",
            f"{p.energy_kwh:,.0f}",
        ]
        if grid:
            row.append("-" if p.gco2e_per_kwh is None else f"{p.gco2e_per_kwh:,.0f}")
        t.add_row(*row)
    t.caption = "hours over the whole horizon; power at load before PUE; energy at the wall"
    return t


def _phases(plan: Plan) -> Table:
    t = Table(title="phases (one fleet, one after another)", title_justify="left")
    for col in ("phase", "workloads", "hours", "devices at work on premises"):
        t.add_column(col, justify="right" if col == "hours" else "left")
    for ph in plan.phases:
        devices = ", ".join(f"{n} x {d}" for d, n in ph.devices.items()) or "-"
        t.add_row(escape(ph.name), escape(", ".join(ph.workloads)), f"{ph.hours:,.0f}", devices)
    t.caption = "the fleet holds the largest phase; each phase's costs are in the lines above"
    return t


def _energy_line(plan: Plan) -> Text:
    line = Text()
    line.append("energy ", style="bold")
    line.append(f"{plan.energy_kwh_per_year:,.0f} kWh per year at the wall")
    if plan.tokens_per_joule is not None:
        line.append(f", {plan.tokens_per_joule:,.3f} tokens/J served (fleet, at the wall)")
    if plan.usd_per_million_tokens is not None:
        line.append(f", ${plan.usd_per_million_tokens:,.4f} per M tokens served")
    c = plan.carbon
    if c is not None:
        line.append("\ncarbon ", style="bold")
        # Without a device's embodied figure the plan's are lower bounds, not facts.
        missing = c.embodied_unknown or ()
        least = "at least " if missing else ""
        unknown = f" (unknown for {', '.join(missing)})" if missing else ""
        line.append(
            f"over the horizon: operational {c.operational_kgco2e:,.0f} kg, embodied {least}"
            f"{c.embodied_kgco2e:,.0f} kg{unknown}, total {least}{c.total_kgco2e:,.0f} kg CO2e"
        )
        if c.sci_g_per_million_tokens is not None:
            line.append(f"; SCI {least}{c.sci_g_per_million_tokens:,.1f} g CO2e per million tokens")
    return line


def _workload_title(w: WorkloadPlan, show_site: bool) -> str:
    about = [w.kind, w.model]
    if w.engine:
        about.append(f"engine {w.runtime}")
    if w.confidence is not None:
        about.append(f"confidence {w.confidence.text}")
    if w.period:
        about.append(f"period {w.period}")
    if show_site:
        about.append(w.site)
    head = f"workload {w.name} ({', '.join(about)})"
    budget = f", {w.token_budget:,} tokens per iteration" if w.token_budget else ""
    held = f", {w.sequences:,} sequences held" if w.sequences is not None else ""
    kind = {"both": "replica", "prefill": "prefill replica", "decode": "decode replica"}[w.role]
    return escape(f"{head}: {w.replicas} x {kind}, batch {w.batch}{budget}{held}")


def _workload(w: WorkloadPlan, show_site: bool, show_hops: bool = False) -> Table:
    t = Table(title=_workload_title(w, show_site), title_justify="left")
    for col in (
        "stage",
        "device",
        "tp",
        "layers",
        "weights GB",
        "KV GB",
        "act GB",
        "grad+opt GB",
        "total GB",
        "ms/step",
        "boundary KB",
    ):
        t.add_column(col, justify="right" if col not in ("device",) else "left")
    routes = show_hops and len(w.stages) > 1
    if routes:
        t.add_column("hop to next", justify="left")
        t.add_column("hop ms", justify="right")
        t.add_column("chunk hop ms", justify="right")
    for i, s in enumerate(w.stages):
        mb = s.memory_bytes
        hop = (
            s.hop_route or "-",
            f"{s.hop_seconds * 1e3:,.2f}" if s.hop_route else "-",
            f"{s.hop_chunk_seconds * 1e3:,.2f}" if s.hop_route else "-",
        )
        t.add_row(
            str(i),
            s.device,
            f"{s.tp} machines" if s.across_machines else str(s.tp),
            f"{s.layers[0]}-{s.layers[1]}",
            gb(mb["weights"]),
            gb(mb["kv_cache"]),
            gb(mb["activations"]),
            gb(mb["gradients"] + mb["optimizer"]),
            gb(mb["total"]),
            f"{s.seconds_per_step * 1e3:,.2f}" if s.seconds_per_step else "-",
            f"{s.boundary_bytes_per_step / 1e3:,.1f}" if s.boundary_bytes_per_step else "-",
            *(hop if routes else ()),
        )
    if w.kind == "inference" and w.role == "prefill":
        served = ", ".join(f"{k} {v:,.2f}" for k, v in w.requests_per_s.items())
        t.caption = escape(
            f"prefill pool: computes the prompts of {served} requests/s (sized for "
            f"{w.sized_for}) and sends their KV cache to the decode pool"
        )
    elif w.kind == "inference":
        t.caption = (
            f"{w.tokens_per_s:,.0f} tokens/s, {w.ms_per_token:,.1f} ms/token, "
            f"first token {duration(w.ttft_s)}; at capacity "
            f"{w.tokens_per_joule_at_capacity:,.3f} tokens/J (devices only) and "
            f"${w.usd_per_million_tokens_at_capacity or 0:,.4f} per M tokens"
        )
        if w.requests_per_s:
            served = ", ".join(f"{k} {v:,.2f}" for k, v in w.requests_per_s.items())
            sized = f" (sized for {w.sized_for})" if w.sized_for else ""
            t.caption += escape(f"\nrequests/s served: {served}{sized}")
        if w.recipe is not None:
            t.caption += escape(f"\nlaunch: {w.recipe.command}")
    else:
        t.caption = (
            f"{w.tokens_per_s:,.0f} tokens/s, finishes in {duration((w.finish_hours or 0) * 3600)}"
        )
    return t


def plan_renderable(plan: Plan, *, timings: bool = True) -> Group:
    """The plan as tables; `timings=False` (--no-timings) leaves the solve time out."""
    parts: list[Table | Text] = []
    head = Text()
    head.append(f"{plan.problem}: ", style="bold")
    head.append(plan.status, style="bold green" if plan.status == "OPTIMAL" else "bold yellow")
    if plan.objective is not None:
        head.append(f"  {plan.objective_name} = {plan.objective:,.4g}")
    if plan.status == "FEASIBLE" and plan.gap is not None:
        head.append(f"  (bound {plan.bound:,.4g}, gap {plan.gap:.2%})")
    if timings:
        head.append(f"  solved in {plan.solve_seconds:.2f} s")
    parts.append(head)
    if plan.status not in ("OPTIMAL", "FEASIBLE"):
        for n in plan.notes:
            parts.append(Text(n))
        return Group(*parts)

    parts.append(_bill(plan))

    money = Table(title="cost and power", title_justify="left", show_header=False)
    money.add_column("figure")
    money.add_column("value", justify="right")
    money.add_row("capex", _money(plan.capex_usd))
    money.add_row("opex per year", _money(plan.opex_usd_per_year))
    money.add_row("total cost over the horizon", _money(plan.tco_usd))
    money.add_row("power at load (devices, hosts, switches)", f"{plan.power_w:,.0f} W")
    money.add_row("power at the wall (x PUE)", f"{plan.wall_power_w:,.0f} W")
    rented_jobs = [w for w in plan.workloads if w.kind == "training" and w.site != "on-premises"]
    if rented_jobs:
        watts = sum(w.power_w for w in rented_jobs)
        money.add_row("rented training jobs at load (devices)", f"{watts:,.0f} W")
    money.add_row("rack units", str(plan.rack_units))
    parts.append(money)
    parts.append(_costs(plan))
    if plan.phases:
        parts.append(_phases(plan))
    if len(plan.periods) > 1:
        parts.append(_periods(plan))
    parts.append(_energy_line(plan))

    show_site = any(w.site != "on-premises" for w in plan.workloads)
    # Each split's route where hops cross more than one network (segments, stated links).
    routes = {s.hop_route for w in plan.workloads for s in w.stages} - {None}
    show_hops = len(routes) > 1 or any(">" in r for r in routes if r)
    for w in plan.workloads:
        parts.append(_workload(w, show_site, show_hops))
    if plan.binding_constraints:
        bind = [f"{k} ({plan.slack.get(k, 0.0):.1%} room)" for k in plan.binding_constraints]
        parts.append(Text("binding constraints: " + ", ".join(bind)))
    rest = [f"{k} {v:.1%}" for k, v in plan.slack.items() if k not in plan.binding_constraints]
    if rest:
        parts.append(Text("room under the other limits: " + ", ".join(rest), style="dim"))
    for n in plan.notes:
        parts.append(Text(n, style="dim"))
    return Group(*parts)
