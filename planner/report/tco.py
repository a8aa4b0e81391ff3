"""Cost over time of a plan: what each kind of cost adds up to, how the total builds up month by
month, and, per device type, whether buying beat renting the same hours on demand.

Pure functions of a Plan and its horizon (years); nothing here solves, reads files or prints.

Assumptions (the plan prices the horizon as a whole, so these say when its costs fall):

- A month is a twelfth of a year; the horizon is `years * 12` months, possibly fractional.
- Capex (devices and hosts bought) and training are paid at month 0.
- Maintenance, energy and every kind of rent (on demand, reserved, spot) accrue evenly over the
  horizon, so at the horizon's end the cumulative cost is exactly the plan's total.
- Nothing is priced beyond the horizon: asking for more months than it holds shows the horizon
  only, with a note (re-solve with a longer `horizon.lifetime_years` to see further).
- Buy versus rent, per device type that is owned or bought, on one basis with the plan's
  break-even utilization: buying costs the purchase of the bought devices and of the hosts bought
  for them at month 0 (owned ones are already paid for) plus their maintenance and the energy of
  the devices and their hosts, spread evenly; renting costs the same device-hours at work
  (`device_hours` on premises, owned and bought) at the on-demand rate the plan carries, which
  includes hosting, spread evenly. The break-even month is where the two straight lines cross,
  solved exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from planner.plan.types import Costs, DeviceLine, NodeLine, Plan, plain_data

WITH_PLAN = ("OPTIMAL", "FEASIBLE")
MONTHS_PER_YEAR = 12
MISSING = "—"
ON_PREMISES_MODES = ("on-premises",)  # device_hours key of the devices held
RENT_MODES = ("on_demand", "reserved", "spot")
# (Costs field, label, paid at month 0?) in the order the breakdown lists them.
COST_KINDS = (
    ("capex_usd", "capex (devices and hosts bought)", True),
    ("maintenance_usd", "maintenance", False),
    ("energy_usd", "energy (on premises, with PUE)", False),
    ("rent_on_demand_usd", "rent on demand", False),
    ("rent_reserved_usd", "rent reserved", False),
    ("rent_spot_usd", "rent spot", False),
    ("training_usd", "training jobs", True),
    ("rack_space_usd", "rack space (colocation)", False),
    ("facility_power_usd", "facility power capacity (colocation)", False),
)
FIRST_MILESTONES = (0, 1, 3, 6)  # then every 12 months, then the end
_EPS_MONTHS = 1e-9  # a month count this close to a whole number is that number


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostLine:
    """One kind of cost over the horizon, its share of the total and its yearly figure."""

    key: str  # the Costs field
    label: str
    usd: float
    share: float | None  # of the total, 0..1; None when the total is 0
    usd_per_year: float
    upfront: bool  # paid at month 0 (else spread evenly over the horizon)


@dataclass(frozen=True)
class Milestone:
    month: float
    cumulative_usd: float
    share: float | None  # of the total, 0..1; None when the total is 0


@dataclass(frozen=True)
class BuyVsRent:
    """Owned and bought devices of one type against renting their hours on demand.

    Both costs are straight lines in the month m (H = horizon months):
    buy(m) = purchase_usd + (maintenance_usd + energy_usd) * m / H, rent(m) = rent_usd * m / H.
    """

    owned: int
    bought: int
    purchase_usd: float  # the bought devices and their hosts; owned ones are already paid for
    maintenance_usd: float  # devices and hosts
    energy_usd: float  # devices and their hosts
    buy_usd: float  # buy(H)
    device_hours: float  # at work, owned + bought, over the horizon
    on_demand_usd_per_hour: float | None  # None: the plan carries no on-demand rate
    rent_usd: float | None  # rent(H); None when the rate is unknown
    break_even_month: float | None  # rent overtakes buy; None: not within the horizon
    utilization: float | None  # hours at work / hours held, as the plan carries it
    break_even_utilization: float | None  # buy beats on-demand rent above this


@dataclass(frozen=True)
class RentLine:
    """What one rent mode of one device type cost over the horizon."""

    mode: str  # on_demand, reserved, spot
    devices: int  # most rented at once (reserved: held)
    device_hours: float
    usd_per_hour: float | None
    usd: float
    usd_per_year: float


@dataclass(frozen=True)
class DeviceCost:
    device: str
    buy: BuyVsRent | None  # None when none is owned or bought
    rent: tuple[RentLine, ...]  # rented modes, in RENT_MODES order


@dataclass(frozen=True)
class TcoReport:
    problem: str
    status: str
    horizon_years: float
    horizon_months: float
    total_usd: float
    total_usd_per_year: float
    breakdown: tuple[CostLine, ...]
    months: tuple[float, ...]  # 0, 1, 2, ... and the end of what is shown
    cumulative_usd: tuple[float, ...]  # at each of `months`
    milestones: tuple[Milestone, ...]
    devices: tuple[DeviceCost, ...]
    requested_months: int | None  # --months as asked (None: the horizon)
    notes: tuple[str, ...]


# ------------------------------------------------------------------------------------------------
# Arithmetic
# ------------------------------------------------------------------------------------------------


def horizon_months(years: float) -> float:
    """The horizon in months (a twelfth of a year each), snapped to a whole number when within
    float noise of one."""
    if not (math.isfinite(years) and years > 0):
        raise ValueError(f"the horizon must be a positive number of years, not {years!r}")
    return _snap(years * MONTHS_PER_YEAR)


def cost_breakdown(costs: Costs, years: float) -> list[CostLine]:
    """Each kind of cost with its share of `costs.total_usd` and its figure per year."""
    horizon_months(years)  # checks the horizon
    total = costs.total_usd
    out = []
    for key, label, upfront in COST_KINDS:
        usd = float(getattr(costs, key))
        share = usd / total if total else None
        out.append(CostLine(key, label, usd, share, usd / years, upfront))
    return out


def upfront_usd(costs: Costs) -> float:
    """What is paid at month 0: capex and training."""
    return sum(float(getattr(costs, key)) for key, _, upfront in COST_KINDS if upfront)


def accruing_usd(costs: Costs) -> float:
    """What accrues evenly over the horizon: maintenance, energy and rent."""
    return sum(float(getattr(costs, key)) for key, _, upfront in COST_KINDS if not upfront)


def cumulative_cost(costs: Costs, years: float, month: float) -> float:
    """Cost paid from the start to `month` (0 <= month <= the horizon's months).

    Written as total - (still to accrue), so the horizon's end gives `costs.total_usd` exactly.
    """
    end = horizon_months(years)
    if not (0 <= month <= end + _EPS_MONTHS):
        raise ValueError(f"month {month:g} is outside the horizon (0 to {end:g} months)")
    left = max(0.0, 1.0 - month / end)
    return costs.total_usd - left * accruing_usd(costs)


def month_axis(years: float, months: int | None = None) -> list[float]:
    """Months 0, 1, 2, ... up to `months` (default: the horizon), and the horizon's end when it
    falls between whole months. Months beyond the horizon are clamped to it."""
    end = horizon_months(years)
    if months is not None:
        if months < 1:
            raise ValueError(f"show at least one month, not {months}")
        end = min(float(months), end)
    whole = math.floor(end + _EPS_MONTHS)
    axis = [float(m) for m in range(whole + 1)]
    if end - whole > _EPS_MONTHS:
        axis.append(end)
    return axis


def milestone_months(last: float) -> list[float]:
    """0, 1, 3, 6, then every 12 months, then `last`: those up to `last`."""
    picks = [float(m) for m in FIRST_MILESTONES]
    m = 12.0
    while m < last + _EPS_MONTHS:
        picks.append(m)
        m += 12.0
    picks.append(last)
    out: list[float] = []
    for p in picks:
        if p <= last + _EPS_MONTHS and not any(abs(p - q) <= _EPS_MONTHS for q in out):
            out.append(p)
    return out


def break_even_month(
    buy_start: float, buy_per_month: float, rent_per_month: float, end: float
) -> float | None:
    """Where rent (0 + rent_per_month * m) overtakes buy (buy_start + buy_per_month * m).

    The crossing of the two lines, m = buy_start / (rent_per_month - buy_per_month), when rent
    grows faster and the crossing falls within [0, end]; None otherwise (rent never overtakes).
    """
    if buy_start < 0:
        raise ValueError(f"a purchase cannot be negative ({buy_start:g})")
    steeper = rent_per_month - buy_per_month
    if steeper <= 0:
        return None  # rent starts no higher and grows no faster: it never overtakes
    month = buy_start / steeper
    return month if month <= end + _EPS_MONTHS else None


def buy_versus_rent(
    device: DeviceLine, years: float, hosts: Sequence[NodeLine] = ()
) -> BuyVsRent | None:
    """The owned and bought devices of a type, with `hosts` (the plan's host lines that hold
    them), against renting their hours on demand; None when none is owned or bought."""
    end = horizon_months(years)
    if device.owned + device.bought <= 0:
        return None
    mine = [n for n in hosts if n.hosts == device.type]
    purchase = device.total_usd + sum(n.total_usd for n in mine)
    energy = device.energy_usd + sum(n.energy_usd for n in mine)
    hours = sum(device.device_hours.get(m, 0.0) for m in ON_PREMISES_MODES)
    running = device.maintenance_usd + energy
    rate = device.rent_usd_per_hour.get("on_demand")
    rent = None if rate is None else rate * hours
    crossing = None
    if rent is not None:
        crossing = break_even_month(purchase, running / end, rent / end, end)
    return BuyVsRent(
        owned=device.owned,
        bought=device.bought,
        purchase_usd=purchase,
        maintenance_usd=device.maintenance_usd,
        energy_usd=energy,
        buy_usd=purchase + running,
        device_hours=hours,
        on_demand_usd_per_hour=rate,
        rent_usd=rent,
        break_even_month=crossing,
        utilization=device.utilization,
        break_even_utilization=device.break_even_utilization,
    )


def buy_cost_at(b: BuyVsRent, years: float, month: float) -> float:
    """Cumulative cost of the owned and bought devices at `month`."""
    return b.purchase_usd + (b.maintenance_usd + b.energy_usd) * month / horizon_months(years)


def rent_cost_at(b: BuyVsRent, years: float, month: float) -> float | None:
    """Cumulative cost of renting their hours on demand at `month`; None when the rate is unknown."""
    if b.rent_usd is None:
        return None
    return b.rent_usd * month / horizon_months(years)


def rent_lines(device: DeviceLine, years: float) -> list[RentLine]:
    """What each rent mode of a device type cost: the modes it rents, in RENT_MODES order."""
    out = []
    for mode in RENT_MODES:
        count = int(getattr(device, mode))
        usd = device.rent_usd.get(mode, 0.0)
        hours = device.device_hours.get(mode, 0.0)
        if count or usd or hours:
            rate = device.rent_usd_per_hour.get(mode)
            out.append(RentLine(mode, count, hours, rate, usd, usd / years))
    return out


def device_costs(plan: Plan, years: float) -> list[DeviceCost]:
    """Per device type in the plan: buy versus rent for the devices held, cost of the rented."""
    return [
        DeviceCost(d.type, buy_versus_rent(d, years, plan.nodes), tuple(rent_lines(d, years)))
        for d in plan.devices
    ]


def tco_report(plan: Plan, years: float, months: int | None = None) -> TcoReport:
    """Every figure of the cost-over-time report of a plan with a result (OPTIMAL or FEASIBLE)."""
    if plan.status not in WITH_PLAN:
        raise ValueError(f"plan `{plan.problem}` is {plan.status}: it has no costs to report")
    end = horizon_months(years)
    costs = plan.costs
    axis = month_axis(years, months)
    notes: list[str] = []
    if months is not None and months > end + _EPS_MONTHS:
        notes.append(
            f"{months} months asked, but the plan covers its horizon of {end:g} months only; "
            f"to see further, solve with --set horizon.lifetime_years={months / 12:g}"
        )
    added = upfront_usd(costs) + accruing_usd(costs)
    if not math.isclose(added, costs.total_usd, rel_tol=1e-9, abs_tol=1e-6):
        notes.append(
            f"the cost lines add up to ${added:,.2f}, not the plan's total ${costs.total_usd:,.2f}"
        )
    total = costs.total_usd
    shown = [
        Milestone(m, c, c / total if total else None)
        for m in milestone_months(axis[-1])
        for c in [cumulative_cost(costs, years, m)]
    ]
    devices = device_costs(plan, years)
    for d in devices:
        if d.buy is not None and d.buy.on_demand_usd_per_hour is None:
            notes.append(f"{d.device}: the plan carries no on-demand rate, so no rent comparison")
    return TcoReport(
        problem=plan.problem,
        status=plan.status,
        horizon_years=years,
        horizon_months=end,
        total_usd=total,
        total_usd_per_year=total / years,
        breakdown=tuple(cost_breakdown(costs, years)),
        months=tuple(axis),
        cumulative_usd=tuple(cumulative_cost(costs, years, m) for m in axis),
        milestones=tuple(shown),
        devices=tuple(devices),
        requested_months=months,
        notes=tuple(notes),
    )


def chart_series(
    report: TcoReport,
) -> tuple[list[float], dict[str, list[float]], dict[str, float]]:
    """Months, named cumulative-cost curves and break-even months, for plot_cumulative_cost.

    The plan's curve, and per device type bought or owned with a known on-demand rate, the plan
    with that type's held devices replaced by renting their hours on demand: plan - buy + rent.
    That curve crosses the plan's exactly at the type's break-even month.
    """
    months = list(report.months)
    series = {"plan": list(report.cumulative_usd)}
    marks: dict[str, float] = {}
    years = report.horizon_years
    for d in report.devices:
        b = d.buy
        if b is None or b.rent_usd is None:
            continue
        series[f"plan, {d.device} hours rented on demand"] = [
            c - buy_cost_at(b, years, m) + (rent_cost_at(b, years, m) or 0.0)
            for m, c in zip(months, report.cumulative_usd, strict=True)
        ]
        if b.break_even_month is not None and b.break_even_month <= months[-1] + _EPS_MONTHS:
            marks[d.device] = b.break_even_month
    return months, series, marks


def plot_tco(report: TcoReport, path: Path) -> None:
    """Draw the cumulative cost chart to a .png or .svg file."""
    from planner.report.plot import plot_cumulative_cost

    months, series, marks = chart_series(report)
    plot_cumulative_cost(
        months,
        series,
        path,
        title=f"{report.problem}: cumulative cost over {report.horizon_years:g} years",
        breakeven=marks,
    )


def _snap(months: float) -> float:
    whole = round(months)
    return float(whole) if abs(months - whole) <= _EPS_MONTHS else months


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


def tco_dict(report: TcoReport) -> dict[str, Any]:
    """The report as plain data, JSON-ready: numbers stay numbers, missing values are None."""
    return plain_data(report)


def tco_tables(report: TcoReport) -> list[Table]:
    """The report as rich tables: breakdown, cumulative milestones, buy or rent, rented devices.

    Long because it lays out the TCO report's tables in reading order.
    """
    years = report.horizon_years
    tables = []

    breakdown = Table(title=f"cost over the horizon ({years:g} years)", title_justify="left")
    for col in ("cost", "over the horizon", "share", "per year", "paid"):
        breakdown.add_column(col, justify="left" if col in ("cost", "paid") else "right")
    for line in report.breakdown:
        if not line.usd:
            continue  # kinds of cost the plan has none of
        breakdown.add_row(
            line.label,
            _usd(line.usd),
            _pct(line.share),
            _usd(line.usd_per_year),
            "at month 0" if line.upfront else "evenly",
        )
    breakdown.add_row(
        "total",
        _usd(report.total_usd),
        _pct(1.0 if report.total_usd else None),
        _usd(report.total_usd_per_year),
        "",
        style="bold",
    )
    if any(not line.usd for line in report.breakdown):
        breakdown.caption = "kinds of cost at $0 left out"
    tables.append(breakdown)

    cumulative = Table(title="cumulative cost", title_justify="left")
    for col in ("month", "cumulative", "share of total"):
        cumulative.add_column(col, justify="right")
    for m in report.milestones:
        cumulative.add_row(_month(m.month), _usd(m.cumulative_usd), _pct(m.share))
    tables.append(cumulative)

    held = [(d.device, d.buy) for d in report.devices if d.buy is not None]
    if held:
        t = Table(title="buy or rent the same hours on demand", title_justify="left")
        for col in (
            "device",
            "owned",
            "bought",
            "purchase",
            "upkeep + energy",
            "buy",
            "device-hours",
            "on-demand $/h",
            "rent",
            "break-even",
            "utilization",
            "break-even at",
        ):
            t.add_column(col, justify="left" if col == "device" else "right")
        for name, b in held:
            t.add_row(
                name,
                str(b.owned),
                str(b.bought),
                _usd(b.purchase_usd),
                _usd(b.maintenance_usd + b.energy_usd),
                _usd(b.buy_usd),
                f"{b.device_hours:,.0f}",
                "unknown"
                if b.on_demand_usd_per_hour is None
                else f"${b.on_demand_usd_per_hour:,.2f}",
                MISSING if b.rent_usd is None else _usd(b.rent_usd),
                _break_even(b),
                _pct(b.utilization),
                _pct(b.break_even_utilization),
            )
        t.caption = (
            "buy: devices and their hosts bought at month 0, plus upkeep and energy (hosts "
            "included); rent: the same device-hours on demand (hosting included); break-even "
            "at: the utilization above which buying beats renting, on the same basis"
        )
        tables.append(t)

    rented = [(d.device, r) for d in report.devices for r in d.rent]
    if rented:
        t = Table(title="rented devices", title_justify="left")
        for col in ("device", "mode", "most at once", "device-hours", "$/h", "rent", "per year"):
            t.add_column(col, justify="left" if col in ("device", "mode") else "right")
        for name, r in rented:
            t.add_row(
                name,
                r.mode.replace("_", " "),
                str(r.devices),
                f"{r.device_hours:,.0f}",
                MISSING if r.usd_per_hour is None else f"${r.usd_per_hour:,.2f}",
                _usd(r.usd),
                _usd(r.usd_per_year),
            )
        tables.append(t)
    return tables


def _break_even(b: BuyVsRent) -> str:
    if b.rent_usd is None:
        return MISSING
    if b.break_even_month is None:
        return "not within the horizon"
    return f"month {b.break_even_month:,.1f}"


def _usd(v: float) -> str:
    return f"-${-v:,.0f}" if v < 0 else f"${v:,.0f}"


def _pct(v: float | None) -> str:
    return MISSING if v is None else f"{100 * v:.1f} %"


def _month(m: float) -> str:
    return f"{m:g}" if float(m).is_integer() else f"{m:.2f}"
