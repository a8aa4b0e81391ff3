"""Names shared by the model, the plan, the verifier and every report: how a solve ended and
where a replica runs. String enums, so they read and serialize as their plain values."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    OPTIMAL = "OPTIMAL"  # proved best within the design space the plan states
    FEASIBLE = "FEASIBLE"  # a plan, not proved best (time limit, gap limit or Ctrl-C)
    INFEASIBLE = "INFEASIBLE"  # proved: no plan meets the constraints
    NO_PLAN = "NO_PLAN"  # no plan found within the time limit, nothing proved

    @property
    def has_plan(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


class Site(StrEnum):
    PREMISES = "on-premises"  # owned or bought devices in the user's hosts
    CLOUD = "cloud"  # rented devices (reserved, on demand, spot)
    JOB = "job"  # a rented training job, paid for its hours
