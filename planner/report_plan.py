"""Render a Plan as readable tables."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from planner.plan import Plan
from planner.report_estimate import duration, gb


def _money(x: float) -> str:
    return f"${x:,.0f}"


def plan_renderable(plan: Plan) -> Group:
    parts: list[Table | Text] = []
    head = Text()
    head.append(f"{plan.problem}: ", style="bold")
    head.append(plan.status, style="bold green" if plan.status == "OPTIMAL" else "bold yellow")
    if plan.objective is not None:
        head.append(f"  {plan.objective_name} = {plan.objective:,.4g}")
    if plan.status == "FEASIBLE" and plan.gap is not None:
        head.append(f"  (bound {plan.bound:,.4g}, gap {plan.gap:.2%})")
    head.append(f"  solved in {plan.solve_seconds:.2f} s")
    parts.append(head)
    if plan.status not in ("OPTIMAL", "FEASIBLE"):
        for n in plan.notes:
            parts.append(Text(n))
        return Group(*parts)

    bom = Table(title="bill of materials", title_justify="left")
    for col in ("item", "count", "owned", "bought", "unit price", "total"):
        bom.add_column(col, justify="left" if col == "item" else "right")
    for d in plan.devices:
        bom.add_row(
            d.type,
            str(d.count),
            str(d.owned),
            str(d.bought),
            _money(d.unit_price_usd),
            _money(d.total_usd),
        )
    for node in plan.nodes:
        bom.add_row(
            f"{node.type} (hosts {node.hosts})",
            str(node.count),
            "",
            "",
            _money(node.unit_price_usd),
            _money(node.total_usd),
        )
    bom.add_row("links", ", ".join(plan.links), "", "", "", "")
    parts.append(bom)

    money = Table(title="cost and power", title_justify="left", show_header=False)
    money.add_column("figure")
    money.add_column("value", justify="right")
    money.add_row("capex", _money(plan.capex_usd))
    money.add_row("opex per year", _money(plan.opex_usd_per_year))
    money.add_row("total cost over the horizon", _money(plan.tco_usd))
    money.add_row("power at load (devices + hosts)", f"{plan.power_w:,.0f} W")
    money.add_row("power at the wall (x PUE)", f"{plan.wall_power_w:,.0f} W")
    money.add_row("rack units", str(plan.rack_units))
    parts.append(money)

    for w in plan.workloads:
        t = Table(
            title=f"workload {w.name} ({w.kind}, {w.model}): {w.replicas} x replica, batch {w.batch}",
            title_justify="left",
        )
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
        for i, s in enumerate(w.stages):
            mb = s.memory_bytes
            t.add_row(
                str(i),
                s.device,
                str(s.tp),
                f"{s.layers[0]}-{s.layers[1]}",
                gb(mb["weights"]),
                gb(mb["kv_cache"]),
                gb(mb["activations"]),
                gb(mb["gradients"] + mb["optimizer"]),
                gb(mb["total"]),
                f"{s.seconds_per_step * 1e3:,.2f}" if s.seconds_per_step else "-",
                f"{s.boundary_bytes_per_step / 1e3:,.1f}" if s.boundary_bytes_per_step else "-",
            )
        if w.kind == "inference":
            t.caption = (
                f"{w.tokens_per_s:,.0f} tokens/s, {w.ms_per_token:,.1f} ms/token, "
                f"first token {duration(w.ttft_s)}, {w.tokens_per_joule:,.3f} tokens/J, "
                f"${w.usd_per_million_tokens or 0:,.4f} per M tokens"
            )
        else:
            t.caption = f"{w.tokens_per_s:,.0f} tokens/s, finishes in {duration((w.finish_hours or 0) * 3600)}"
        parts.append(t)
    if plan.binding_constraints:
        parts.append(Text("binding constraints: " + ", ".join(plan.binding_constraints)))
    for n in plan.notes:
        parts.append(Text(n, style="dim"))
    return Group(*parts)
