"""The verifier's check of each pipeline split: the route its hop crosses, recomputed from where
the problem places the stages' machines (planner.estimator.routes), the activation bytes per
token that cross it and the hop's time at the plan's batch. A plan whose split names a faster
route, fewer bytes or a shorter hop than the problem's machines and links make is rejected.
"""

from __future__ import annotations

from planner.catalog import Catalog
from planner.estimator.comm import pipeline_activation_bytes
from planner.estimator.routes import hop_routes
from planner.plan.types import StageLine, WorkloadPlan
from planner.schema.problem import Problem
from planner.verify_workloads import fail, same


def check_hops(problem: Problem, cat: Catalog, wp: WorkloadPlan, at: str) -> None:
    """Each stage's `hop_route`, `hop_bytes_per_token` and `hop_seconds` equal the recomputed
    ones: the route between its machine and the next stage's (the last stage's back to the
    first's), hidden x 2 bytes per token (planner.estimator.comm.pipeline_activation_bytes),
    and every link's latency plus the boundary bytes over the slowest bandwidth. A plan
    written before split lines were recorded states none; it passes where its hop is the one
    network such plans meant (constraints.network), its step times checked as ever."""
    devices = [s.device for s in wp.stages]
    routes = hop_routes(problem, cat, devices) if wp.kind == "inference" else []
    hidden = cat.model(wp.model).hidden_size
    for j, s in enumerate(wp.stages):
        st = f"{at}.stages.{j}"
        if not routes:
            if s.hop_route is not None or s.hop_bytes_per_token or s.hop_seconds:
                fail(problem, f"`{st}.hop_route`: `{s.hop_route}`, but the replica has no hop")
            continue
        r, nxt = routes[j], devices[(j + 1) % len(devices)]
        if _written_before(s) and r.id == problem.constraints.network:
            continue  # a plan from before split lines, on the one network it then meant
        if s.hop_route != r.id:
            fail(
                problem,
                f"`{st}.hop_route`: `{s.hop_route}`, but the problem joins {s.device} and "
                f"{nxt} over `{r.id}` (machines, segments and links)",
            )
        why = f" (the hop from {s.device} to {nxt} over {r.id}, `{at}.batch` {wp.batch})"
        per_token = pipeline_activation_bytes(1, 1, hidden)
        same(problem, f"{st}.hop_bytes_per_token", s.hop_bytes_per_token, per_token, why)
        seconds = float(r.seconds(per_token * wp.batch))
        same(problem, f"{st}.hop_seconds", s.hop_seconds, seconds, why)


def _written_before(s: StageLine) -> bool:
    """A stage line without split figures: a plan written before they were recorded."""
    return s.hop_route is None and s.hop_bytes_per_token == 0.0 and s.hop_seconds == 0.0
