"""Money, time and carbon facts per device and per demand period, shared by the optimizer and the
verifier: prices after the problem's overrides, the hours each period stands for, and what one
device costs and emits in each procurement mode.

Conventions (stated once, used everywhere):
- The horizon is `lifetime_years` x 8,760 hours. Demand periods split those hours; without a
  demand profile there is one period, the working hours (`utilization` of them), at the stated rate.
- Bought devices and their hosts are paid up front, plus `maintenance_per_year` of their price per
  year; they draw electricity (at PUE) for the hours they serve, and their idle draw for the hours
  of the horizon they are held but not at work: a device its catalog `power.idle_w`, a host its
  `power_overhead_w` (the catalog gives hosts no separate idle figure, so a host is taken to draw
  its overhead through the whole horizon).
- Rent includes power and hosting. On-demand and spot are paid for the hours of the periods they
  are rented in; a reserved device is paid for every hour of the horizon, or of its whole term when
  that is longer.
- Carbon follows the Software Carbon Intensity specification: the energy of every device in use
  (owned or rented) times the grid intensity, plus embodied carbon in proportion to the hours a
  device is held over its expected life.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from planner.catalog import Catalog
from planner.estimator.cost import HOURS_PER_YEAR
from planner.estimator.demand_levels import Quantization, quantize
from planner.estimator.hosts import host_options
from planner.schema.catalog import Accelerator, Instance, Node
from planner.schema.problem import Mode, Problem, TrainingWorkload, Workload

RENT_MODES: tuple[Mode, ...] = ("on_demand", "reserved", "spot")


@dataclass(frozen=True)
class Period:
    """Hours of the horizon at one demand level (a scale of the workloads' stated rates)."""

    name: str
    hours: float
    scale: float
    gco2e_per_kwh: float | None


@dataclass(frozen=True)
class Prices:
    """One device's prices after the problem's overrides; None where there is none."""

    purchase_usd: float | None
    on_demand_usd_per_hour: float | None
    reserved_usd_per_hour: float | None
    reserved_term_years: float
    spot_usd_per_hour: float | None
    # Rates above are per device; a cloud instance rents `rent_unit` devices at a time, whole.
    rent_unit: int = 1
    instance: str | None = None  # the instance id rented (catalog/instances.yaml); None: per device

    def rate(self, mode: Mode) -> float | None:
        return {
            "buy": None,
            "on_demand": self.on_demand_usd_per_hour,
            "reserved": self.reserved_usd_per_hour,
            "spot": self.spot_usd_per_hour,
        }[mode]


@dataclass(frozen=True)
class DeviceEconomics:
    device: Accelerator
    node: Node  # the default host: what a rented device's share of a host is counted in
    owned: int
    prices: Prices
    modes: tuple[Mode, ...]  # the problem's modes this device has a price for ("buy" if owned)
    hosts: tuple[Node, ...] = ()  # hosts it may sit in on premises, cheapest per slot first

    @property
    def slots(self) -> int:
        return self.node.slots

    @property
    def unit_usd(self) -> float:
        """Purchase price (0 when it cannot be bought)."""
        return self.prices.purchase_usd or 0.0

    @property
    def on_premises(self) -> bool:
        return "buy" in self.modes or self.owned > 0

    @property
    def cloud(self) -> bool:
        return any(m in RENT_MODES for m in self.modes)


def horizon_hours(problem: Problem) -> float:
    return problem.horizon.lifetime_years * HOURS_PER_YEAR


def earlier_phase(problem: Problem, name: str) -> int | None:
    """The phase a workload runs in when that phase comes before the last (a training job
    done before serving starts, problem `phases`), else None (it runs with the last phase, or
    every workload runs at once)."""
    phases = problem.phases or []
    for i, ph in enumerate(phases[:-1]):
        if name in ph.workloads:
            return i
    return None


def earlier_phases_hours(problem: Problem) -> float:
    """Hours of the horizon the phases before the last take (0 without phases)."""
    n = len(problem.phases or [])
    return sum(problem.phase_hours(i) for i in range(n - 1))


def demand_periods(problem: Problem) -> list[Period]:
    """The demand periods over the hours the last phase has (problem `phases`: the horizon less
    the phases before it; without phases, the whole horizon), see `_demand_periods`."""
    periods = _demand_periods(problem)
    if not problem.phases:
        return periods
    left = 1.0 - earlier_phases_hours(problem) / horizon_hours(problem)
    return [replace(p, hours=p.hours * left) for p in periods]


def peak_scale(problem: Problem) -> float:
    """The busiest demand period's scale (1 with a flat demand)."""
    return max((p.scale for p in demand_periods(problem)), default=1.0)


def _demand_periods(problem: Problem) -> list[Period]:
    """The periods of the horizon with demand (scale > 0), equal levels of an hourly profile
    merged (the order of hours changes no cost), and an hourly profile of many values merged
    into at most `demand.levels` levels, each hour rounded up (estimator/demand_levels.py).
    Idle hours are left out: nothing runs then."""
    H = horizon_hours(problem)
    default_g = grid_intensity(problem)
    d = problem.demand
    if d is None:
        return [Period("working hours", H * problem.horizon.utilization, 1.0, default_g)]
    if d.hourly is not None:
        n = len(d.hourly)
        hourly, _ = quantize(d.hourly, d.levels)
        out: list[Period] = []
        for level in sorted({v for v in hourly if v > 0}, reverse=True):
            hours = [i for i, v in enumerate(hourly) if v == level]
            name = _hours_name(hours, n)
            if name[0].isdigit():  # "14 of 168 hours": several levels may span as many hours
                name += f" at {level:g}x"
            if any(p.name == name for p in out):  # levels equal to 6 digits: keep names unique
                name += f" #{len(out) + 1}"
            out.append(Period(name, H * len(hours) / n, level, default_g))
        return out
    assert d.periods is not None
    return [
        Period(
            p.name,
            H * p.share,
            p.scale,
            p.grid_gco2e_per_kwh if p.grid_gco2e_per_kwh is not None else default_g,
        )
        for p in d.periods
        if p.scale > 0
    ]


def demand_quantization(problem: Problem) -> Quantization | None:
    """What merging the hourly demand into levels did, for the plan to state (None: nothing)."""
    d = problem.demand
    if d is None or d.hourly is None:
        return None
    return quantize(d.hourly, d.levels)[1]


def _hours_name(hours: list[int], n: int) -> str:
    """`h07-09,h18` for a day; `d2 h07-09` style for a week is spelled as hour-of-week ranges."""
    runs: list[tuple[int, int]] = []
    for h in hours:
        if runs and runs[-1][1] == h - 1:
            runs[-1] = (runs[-1][0], h)
        else:
            runs.append((h, h))
    parts = [f"{a:02d}" if a == b else f"{a:02d}-{b:02d}" for a, b in runs]
    text = "h" + ",".join(parts)
    return text if len(text) <= 40 else f"{len(hours)} of {n} hours"


def grid_intensity(problem: Problem, cat: Catalog | None = None) -> float | None:
    """The problem's grid carbon intensity, g CO2e/kWh (None without a carbon section)."""
    c = problem.carbon
    if c is None:
        return None
    if c.grid_gco2e_per_kwh is not None:
        return c.grid_gco2e_per_kwh
    assert c.region is not None
    if cat is None:
        from planner.catalog import load_catalog

        cat = load_catalog()
    return cat.region(c.region).grid_gco2e_per_kwh


def device_prices(problem: Problem, d: Accelerator, instances: Sequence[Instance] = ()) -> Prices:
    """Catalog prices, replaced by the problem's `market.prices`; reserved and spot rates the
    catalog lacks are the on-demand rate less the market's discount. Rent comes from one offer:
    the device's per-device rent or one of `instances` (the catalog's instances of this device),
    those `market.rent_offers` allows, the one with the lowest on-demand rate per device (then
    fewer devices per instance, then the id)."""
    m = problem.market
    o = m.prices.get(d.id)
    p = d.price
    # A catalog purchase price counts only in a condition the market allows (new, for
    # datacenter parts, unless the problem says otherwise); the problem's own price always does.
    catalog_purchase = p.purchase_usd if m.may_buy(p.condition, d.device_class) else None
    purchase = (o.purchase_usd if o else None) or catalog_purchase
    mc = problem.machine_of(d.id)
    if mc is not None and mc.price_usd is None:
        purchase = None  # the pool of the problem's stated machines is what is owned
    per_device = _per_device_rent(problem, d) if _allowed(m.rent_offers, "per-device") else None
    offers: list[tuple[float, int, str, Prices]] = []
    if per_device is not None and per_device.on_demand_usd_per_hour is not None:
        offers.append((per_device.on_demand_usd_per_hour, 1, "", per_device))
    for i in instances:
        if i.device == d.id and (
            _allowed(m.rent_offers, i.id) or _allowed(m.rent_offers, i.provider)
        ):
            q = _instance_rent(problem, i)
            offers.append(
                (q.on_demand_usd_per_hour or q.spot_usd_per_hour or 0.0, i.devices, i.id, q)
            )
    if offers:
        rent = min(offers, key=lambda x: x[:3])[3]
    else:  # no on-demand rate anywhere: spot or reserved per device, or nothing
        rent = per_device or Prices(None, None, None, m.reserved_term_years, None)
    return replace(rent, purchase_usd=purchase)


def _allowed(offers: list[str] | None, name: str) -> bool:
    return offers is None or name in offers


def _per_device_rent(problem: Problem, d: Accelerator) -> Prices | None:
    """The device's per-device rent (the problem's prices first), None without any rate."""
    m = problem.market
    o = m.prices.get(d.id)
    p = d.price
    od = (o.rent_usd_per_hour if o else None) or p.rent_usd_per_hour
    reserved = (o.reserved_usd_per_hour if o else None) or p.reserved_usd_per_hour
    term = p.reserved_term_years if reserved == p.reserved_usd_per_hour and reserved else None
    if reserved is None and od is not None:
        reserved = od * (1 - m.reserved_discount)
    spot = (o.spot_usd_per_hour if o else None) or p.spot_usd_per_hour
    if spot is None and od is not None:
        spot = od * (1 - m.spot_discount)
    if od is None and reserved is None and spot is None:
        return None
    return Prices(None, od, reserved, term or m.reserved_term_years, spot)


def _instance_rent(problem: Problem, i: Instance) -> Prices:
    """An instance's rates per device (instance rate / devices), reserved and spot filled from
    the on-demand rate less the market's discounts where the catalog has none."""
    m = problem.market
    n = i.devices
    od = i.on_demand_usd_per_hour / n if i.on_demand_usd_per_hour else None
    reserved = i.reserved_usd_per_hour / n if i.reserved_usd_per_hour else None
    term = i.reserved_term_years if reserved is not None else None
    if reserved is None and od is not None:
        reserved = od * (1 - m.reserved_discount)
    spot = i.spot_usd_per_hour / n if i.spot_usd_per_hour else None
    if spot is None and od is not None:
        spot = od * (1 - m.spot_discount)
    return Prices(None, od, reserved, term or m.reserved_term_years, spot, n, i.id)


def rented_devices(devices: int, prices: Prices) -> int:
    """Devices paid for to rent `devices`: whole instances of `prices.rent_unit`."""
    return -(-devices // prices.rent_unit) * prices.rent_unit


def available_modes(
    problem: Problem,
    d: Accelerator,
    prices: Prices | None = None,
    instances: Sequence[Instance] = (),
) -> tuple[Mode, ...]:
    prices = prices or device_prices(problem, d, instances)
    return tuple(
        mode
        for mode in problem.horizon.modes
        if (prices.purchase_usd if mode == "buy" else prices.rate(mode)) is not None
    )


def in_fleet(w: Workload, problem: Problem) -> bool:
    """Whether a workload's devices join the fleet held for the horizon. A training job rents
    for its own hours when buying is not allowed, so its devices do not."""
    return not (isinstance(w, TrainingWorkload) and "buy" not in problem.horizon.modes)


def working_hours(problem: Problem) -> float:
    """Hours the fleet serves over the horizon (the demand periods' hours)."""
    return sum(p.hours for p in demand_periods(problem))


def energy_usd_per_watt_hour(problem: Problem) -> float:
    """Dollars for one watt drawn for one hour at the wall (PUE included)."""
    h = problem.horizon
    return h.pue * h.electricity_usd_per_kwh / 1000.0


def energy_usd_per_watt(problem: Problem) -> float:
    """Dollars over the horizon for one watt drawn at load during the working hours, at PUE."""
    return working_hours(problem) * energy_usd_per_watt_hour(problem)


def idle_device_hours(problem: Problem, fleet: int, hours_at_work: float) -> float:
    """Device-hours a fleet of `fleet` owned or bought devices is held but not at work: every
    device is held the whole horizon, less the device-hours it serves or trains."""
    return max(0.0, fleet * horizon_hours(problem) - hours_at_work)


def host_idle_hours(problem: Problem) -> float:
    """Hours of the horizon outside the working hours, when hosts on premises draw their idle
    power (taken as their `power_overhead_w`, see the module's conventions)."""
    return max(0.0, horizon_hours(problem) - working_hours(problem))


def facility_usd_per_rack_unit(problem: Problem) -> float:
    """Rack space over the horizon for one rack unit: `rack_usd_per_u_month` x months."""
    h = problem.horizon
    return (h.rack_usd_per_u_month or 0.0) * 12 * h.lifetime_years


def facility_usd_per_watt(problem: Problem) -> float:
    """Facility power capacity over the horizon for one watt of the on-premises peak:
    `facility_usd_per_kw_month` / 1,000 x months."""
    h = problem.horizon
    return (h.facility_usd_per_kw_month or 0.0) / 1000 * 12 * h.lifetime_years


def reserved_hours(problem: Problem, prices: Prices) -> float:
    """Hours a reserved device is paid for: the horizon, or the whole term when longer."""
    return max(horizon_hours(problem), prices.reserved_term_years * HOURS_PER_YEAR)


def ownership_factor(problem: Problem) -> float:
    """Purchase price times this is what a bought device or host costs over the horizon."""
    h = problem.horizon
    return 1.0 + h.maintenance_per_year * h.lifetime_years


def embodied_share(problem: Problem) -> float:
    """Share of an owned device's embodied carbon the horizon carries (hours held over life)."""
    assert problem.carbon is not None
    return min(1.0, problem.horizon.lifetime_years / problem.carbon.device_life_years)


def carbon_promise(problem: Problem) -> str | None:
    """The setting that makes the plan a promise about carbon (a ceiling, or the least carbon as
    the goal), or None. Under one, a device without an embodied-carbon figure is not planned
    with: its making would count as 0 kg, favouring it because its figure is unknown."""
    if problem.carbon is None:
        return None
    if problem.constraints.max_carbon_kgco2e is not None:
        return "constraints.max_carbon_kgco2e"
    return "objective.goal: min_carbon" if problem.objective.goal == "min_carbon" else None


# The wording of the carbon notes a plan carries (planner.plan.build writes them, planner.verify
# rebuilds them from its own recount and recognises them by these pieces).
UNKNOWN_EMBODIED_NOTE = "the catalog has no embodied-carbon figure for "
LEFT_OUT_NOTE = " devices without an embodied-carbon figure in the catalog were left out ("


def carbon_notes(unknown: Sequence[str], left_out: Sequence[str], promise: str | None) -> list[str]:
    """What the carbon figures leave out: the plan's devices without an embodied figure
    (`unknown`: its figures are lower bounds), or those the carbon `promise` kept out of the
    plan for lacking one (`left_out`)."""
    notes = []
    if unknown:
        notes.append(
            f"{UNKNOWN_EMBODIED_NOTE}{', '.join(unknown)}: their making is not counted, so "
            "embodied and total carbon are lower bounds (give embodied_kgco2e in a catalog "
            "overlay to count it)"
        )
    if left_out:
        shown = ", ".join(left_out[:8]) + (
            f" and {len(left_out) - 8} more" if len(left_out) > 8 else ""
        )
        notes.append(
            f"{promise}: {len(left_out)}{LEFT_OUT_NOTE}{shown}), so the promise does not rest on "
            "a 0 kg that means unknown; give embodied_kgco2e in a catalog overlay to plan with them"
        )
    return notes


def embodied_unknown(devices: Sequence[str], cat: Catalog) -> tuple[str, ...]:
    """The device ids among `devices` (once each, in order) without an embodied-carbon figure."""
    ids = dict.fromkeys(d for d in devices if cat.accelerator(d).embodied_kgco2e is None)
    return tuple(ids)


def embodied_kg_per_hour(problem: Problem, d: Accelerator) -> float:
    """Embodied kg CO2e a rented device carries per hour it is held."""
    assert problem.carbon is not None
    return (d.embodied_kgco2e or 0.0) / (problem.carbon.device_life_years * HOURS_PER_YEAR)


def device_economics(
    problem: Problem, cat: Catalog, devices: list[Accelerator]
) -> dict[str, DeviceEconomics]:
    owned: dict[str, int] = {}
    for o in problem.constraints.inventory:
        owned[o.device] = owned.get(o.device, 0) + o.count
    out = {}
    for d in devices:
        host = cat.host_for(d)
        if host is None:
            continue
        prices = device_prices(problem, d, cat.instances_of(d.id))
        out[d.id] = DeviceEconomics(
            d,
            host,
            owned.get(d.id, 0),
            prices,
            available_modes(problem, d, prices),
            tuple(host_options(cat, d, problem)),
        )
    return out


def cloud_host_watts(devices: dict[str, int], econ: dict[str, DeviceEconomics]) -> float:
    """A rented replica's share of its hosts' power: its slots' share of each host."""
    return sum(n * econ[x].node.power_overhead_w / econ[x].slots for x, n in devices.items())


def break_even_utilization(
    problem: Problem, e: DeviceEconomics, watts: float, node: Node | None = None
) -> float | None:
    """Share of the horizon's hours above which buying a device costs less than renting it on
    demand for the hours it works, both with the device's share of a host (rent includes
    hosting). Bought for the horizon H at utilization u: purchase and host share x ownership
    factor, electricity at `watts` for u H, its idle draw for (1 - u) H, and the host share's
    overhead for all of H; rented: rent x u H. They are equal at
    u = (own + H x price per Wh x (idle + host)) / (H x (rent - price per Wh x (watts - idle))).
    `node`: the host it sits in, when one is chosen (else its default host).
    None without both prices, or when rent never covers the electricity."""
    rent = e.prices.on_demand_usd_per_hour
    if e.prices.purchase_usd is None or rent is None:
        return None
    usd_wh = energy_usd_per_watt_hour(problem)
    idle = e.device.power.idle_w
    per_hour = rent - (watts - idle) * usd_wh
    if per_hour <= 0:
        return None
    H = horizon_hours(problem)
    host = node or e.node  # the host it sits in (its default host unless one is chosen)
    own = (e.prices.purchase_usd + host.price_usd / host.slots) * ownership_factor(problem)
    held = H * (idle + host.power_overhead_w / host.slots) * usd_wh
    return (own + held) / (H * per_hour)


# The least a cloud bills a rented instance for: per-second billing "with a minimum of 60
# seconds" (AWS EC2 On-Demand pricing, https://aws.amazon.com/ec2/pricing/on-demand/; Google
# Compute Engine bills per second after a 1-minute minimum). A rented job pays at least this much
# of every device it rents, so a tiny job is not planned on many devices for free.
MIN_BILLED_HOURS = 60.0 / 3600.0


def billed_hours(hours: float) -> float:
    """The hours a rented job is billed for: its own, at least the cloud's minimum."""
    return max(hours, MIN_BILLED_HOURS)


def job_rate(e: DeviceEconomics) -> float | None:
    """Rent per hour a training job pays for one device: on demand, else spot, else reserved."""
    p = e.prices
    return p.on_demand_usd_per_hour or p.spot_usd_per_hour or p.reserved_usd_per_hour
