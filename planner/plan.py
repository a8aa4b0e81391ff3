"""The plan: what the solver chose and every figure a reader needs, as plain data (JSON-ready)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeviceLine:
    type: str
    count: int
    owned: int
    bought: int
    unit_price_usd: float
    total_usd: float


@dataclass(frozen=True)
class NodeLine:
    type: str
    hosts: str
    count: int
    unit_price_usd: float
    total_usd: float
    rack_units: int


@dataclass(frozen=True)
class StageLine:
    device: str
    tp: int
    layers: tuple[int, int]  # first and last layer, inclusive, 0-based
    memory_bytes: dict[str, float]
    seconds_per_step: float
    boundary_bytes_per_step: float  # hidden states sent to the next stage per step


@dataclass(frozen=True)
class WorkloadPlan:
    name: str
    kind: str
    model: str
    replicas: int  # inference replicas of this design (training: data-parallel degree)
    batch: int
    stages: tuple[StageLine, ...]
    tokens_per_s: float  # all replicas of this design
    ms_per_token: float | None
    ttft_s: float | None
    finish_hours: float | None
    power_w: float
    tokens_per_joule: float
    usd_per_million_tokens: float | None


@dataclass
class Plan:
    problem: str
    status: str  # OPTIMAL, FEASIBLE, INFEASIBLE, NO_PLAN
    objective_name: str
    objective: float | None
    bound: float | None
    solve_seconds: float
    devices: list[DeviceLine] = field(default_factory=list)
    nodes: list[NodeLine] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    capex_usd: float = 0.0
    opex_usd_per_year: float = 0.0
    tco_usd: float = 0.0
    power_w: float = 0.0  # devices and hosts at load
    wall_power_w: float = 0.0  # times PUE
    rack_units: int = 0
    workloads: list[WorkloadPlan] = field(default_factory=list)
    binding_constraints: list[str] = field(default_factory=list)
    slack: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None:
            return None
        denom = max(abs(self.objective), 1e-9)
        return abs(self.objective - self.bound) / denom

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gap"] = self.gap
        return d
