"""Buy, rent or call an API (planner.whatif.options) as a table and as JSON-ready rows."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from planner.plan.types import Plan
from planner.whatif.options import OptionRow, changes


def _cost(plan: Plan) -> str:
    if not plan.has_plan:
        return str(plan.status)
    return f"${plan.tco_usd:,.0f}" + ("" if plan.status == "OPTIMAL" else f" ({plan.status})")


def _fleet(plan: Plan) -> str:
    return ", ".join(f"{x.count} {x.type}" for x in plan.devices) if plan.has_plan else ""


def options_rows(rows: list[OptionRow]) -> list[dict[str, Any]]:
    return [
        {
            "demand": r.scale,
            "output_tokens_per_s": r.output_tokens_per_s,
            "buy_usd": r.buy.tco_usd if r.buy.has_plan else None,
            "buy_status": str(r.buy.status),
            "buy_fleet": _fleet(r.buy),
            "rent_usd": r.rent.tco_usd if r.rent.has_plan else None,
            "rent_status": str(r.rent.status),
            "rent_fleet": _fleet(r.rent),
            "api_usd": r.api.usd if r.api else None,
            "api_provider": r.api.price.provider if r.api else None,
            "api_price_date": r.api.price.date if r.api else None,
            "cheapest": r.cheapest,
        }
        for r in rows
    ]


def options_table(problem: str, years: float, rows: list[OptionRow]) -> Table:
    t = Table(
        title=f"{problem}: buy, rent instances, or call an API ({years:g} years)",
        title_justify="left",
    )
    for col in ("demand", "tokens/s", "buy", "fleet bought", "rent", "fleet rented", "API"):
        t.add_column(col, justify="left" if "fleet" in col else "right")
    t.add_column("cheapest")
    for r in rows:
        api = f"${r.api.usd:,.0f} ({r.api.price.provider})" if r.api else "no price"
        tps = f"{r.output_tokens_per_s:,.0f}" if r.output_tokens_per_s else "-"
        t.add_row(
            f"{r.scale:g}x",
            tps,
            _cost(r.buy),
            _fleet(r.buy),
            _cost(r.rent),
            _fleet(r.rent),
            api,
            r.cheapest or "-",
        )
    notes = changes(rows) or [
        "the cheapest option is the same at every demand level asked"
        if any(r.cheapest for r in rows)
        # Once "the same at every demand level" under a table of INFEASIBLE rows.
        else "no option serves the demand at any level asked: buying and renting have no plan "
        "(their status is shown) and no catalog API serves the model"
    ]
    t.caption = (
        "costs over the horizon; tokens/s: output served on average over the working hours; "
        "API: the cheapest catalog provider for the same prompt and output tokens\n"
        + "\n".join(notes)
    )
    return t
