"""What a solve returns: named keys for the model's variables and the solution's values, with
the solver's status mapped onto the planner's own (unknown statuses fail loudly)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from planner.errors import InternalError
from planner.model.ortools_cp import cp_model
from planner.schema.status import Status


class ReplicaKey(NamedTuple):
    workload: str
    design: int  # index into the workload's designs
    period: int  # demand period; -1 for a training job (it spans the horizon)
    site: str  # a planner.schema.status.Site value


class ShareKey(NamedTuple):
    """A request class's share of one replica group's time (request mixes)."""

    workload: str
    design: int
    request_class: int
    period: int
    site: str


@dataclass
class Solution:
    status: Status
    objective: float | None  # the solver's value, at the model's integer scale
    bound: float | None  # the solver's bound, same scale
    seconds: float
    replicas: dict[ReplicaKey, int]
    bought: dict[str, int]
    hosts: dict[str, str]  # device on premises -> the node type chosen to host it
    iterations: int = 1
    values: tuple[int, ...] = ()  # requested expressions evaluated at the solution
    reserved: dict[str, int] = field(default_factory=dict)
    on_demand: dict[tuple[str, int], int] = field(default_factory=dict)  # (device, period)
    spot: dict[tuple[str, int], int] = field(default_factory=dict)  # (device, period)
    shares: dict[ShareKey, int] = field(default_factory=dict)  # in 1/SHARE_STEPS of a replica
    sequences: dict[ReplicaKey, int] = field(default_factory=dict)  # sequences a group holds
    rounding: float = 0.0  # most the integer objective can differ from its exact value (raw)
    units: tuple[float, ...] = ()  # the same bound for each evaluated expression


def status_of(code: int, describe: str) -> Status:
    """The planner's status for a CP-SAT status code; MODEL_INVALID and unknown codes are bugs."""
    status = {
        cp_model.OPTIMAL: Status.OPTIMAL,
        cp_model.FEASIBLE: Status.FEASIBLE,
        cp_model.INFEASIBLE: Status.INFEASIBLE,
        cp_model.UNKNOWN: Status.NO_PLAN,
    }.get(code)  # type: ignore[call-overload]
    if status is None:
        raise InternalError(f"unexpected solver status {describe}")
    return status
