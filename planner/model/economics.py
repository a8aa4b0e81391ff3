"""Per-device money and hosting facts the optimizer and the verifier both use."""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog import Catalog
from planner.catalog_schema import Accelerator, Node
from planner.estimator.cost import HOURS_PER_YEAR
from planner.problem_schema import Problem, TrainingWorkload, Workload


@dataclass(frozen=True)
class DeviceEconomics:
    device: Accelerator
    node: Node  # cheapest host per slot
    owned: int
    unit_usd: float  # purchase price (buy) or rent over the horizon's working hours (rent)

    @property
    def slots(self) -> int:
        return self.node.slots


def in_fleet(w: Workload, problem: Problem) -> bool:
    """Whether a workload's devices join the fleet that is bought or rented for the horizon.
    A training job under rent pays rent for its own hours only, so its devices do not."""
    return not (isinstance(w, TrainingWorkload) and problem.horizon.procurement == "rent")


def working_hours(problem: Problem) -> float:
    h = problem.horizon
    return h.lifetime_years * HOURS_PER_YEAR * h.utilization


def energy_usd_per_watt(problem: Problem) -> float:
    """Dollars over the horizon for one watt drawn at load during the working hours, at PUE."""
    h = problem.horizon
    return working_hours(problem) / 1000.0 * h.pue * h.electricity_usd_per_kwh


def device_economics(
    problem: Problem, cat: Catalog, devices: list[Accelerator]
) -> dict[str, DeviceEconomics]:
    owned: dict[str, int] = {}
    for o in problem.constraints.inventory:
        owned[o.device] = owned.get(o.device, 0) + o.count
    out = {}
    for d in devices:
        if problem.horizon.procurement == "buy":
            unit = d.price.purchase_usd
        else:
            unit = (
                None
                if d.price.rent_usd_per_hour is None
                else d.price.rent_usd_per_hour * working_hours(problem)
            )
        host = cat.host_for(d)
        if host is None:
            continue
        out[d.id] = DeviceEconomics(d, host, owned.get(d.id, 0), float(unit or 0.0))
    return out
