"""The verifier's check of each pipeline split: the route its hop crosses, recomputed from where
the problem places the stages' machines (planner.estimator.routes; two stages of one device
type inside one machine: the machine's own link, routes.machine_link), the activation bytes per
token that cross it and the hop's time at the plan's batch, in a decode-only iteration and in
one carrying a prompt chunk. A plan whose split names a faster route, fewer bytes or a shorter hop
than the problem's machines and links make is rejected.

The arithmetic is written out here, not taken from the replica model: forward, every token the
iteration processes sends its hidden states, hidden x 2 bytes (the decodes' and the chunk's,
whose size follows the serving rule, planner.estimator.serving.chunk_mix); back from the last
stage to the first, only the sampled token ids, 8 bytes each (one per decode and per prompt the
chunk finishes); a hop takes every link's latency plus its bytes over the slowest bandwidth,
each link counted once however often a route might name it (a link is one network, crossed once:
docs/networks.md).
"""

from __future__ import annotations

from planner.catalog import Catalog
from planner.estimator.comm import TOKEN_ID_BYTES, pipeline_activation_bytes
from planner.estimator.request_mix import class_workload
from planner.estimator.routes import Route, hop_routes
from planner.estimator.serving import chunk_mix, prefill_prompt
from planner.plan.types import StageLine, WorkloadPlan
from planner.schema.problem import InferenceWorkload, Problem, Workload
from planner.verify_workloads import fail, same


def _chunk_tokens(w: Workload, wp: WorkloadPlan) -> tuple[float, float]:
    """(prompt tokens of an iteration that carries a chunk, the prompt's length) for the
    replica's requests (its `sized_for` class); no chunk in a decode replica's iterations."""
    if not isinstance(w, InferenceWorkload):
        return 0.0, 1.0
    shape = w
    if w.request_mix is not None:
        names = [c.name for c in w.request_mix]
        shape = class_workload(w, names.index(wp.sized_for) if wp.sized_for in names else 0)
    P = prefill_prompt(shape.prompt_tokens, shape.prefix_cache_hit)
    if wp.role == "decode":
        return 0.0, float(max(P, 1))
    out = shape.output_tokens
    return chunk_mix(wp.batch, P, out, wp.batch * P / out)[0], float(max(P, 1))


def check_hops(problem: Problem, cat: Catalog, w: Workload, wp: WorkloadPlan, at: str) -> None:
    """Each stage's `hop_route`, `hop_bytes_per_token` and `hop_seconds` equal the recomputed
    ones: the route between its machine and the next stage's (the last stage's back to the
    first's), hidden x 2 bytes per token (planner.estimator.comm.pipeline_activation_bytes),
    and every link's latency plus the boundary bytes over the slowest bandwidth; the last
    stage's hop carries its sampled token ids only (8 bytes each); `hop_chunk_bytes` and
    `hop_chunk_seconds` the same in an iteration with a prompt chunk, whose tokens cross too. A plan
    written before split lines were recorded states none; it passes where its hop is the one
    network such plans meant (constraints.network), its step times checked as ever."""
    devices = [s.device for s in wp.stages]
    tps = [s.tp for s in wp.stages]
    routes = hop_routes(problem, cat, devices, tps) if wp.kind == "inference" else []
    hidden = cat.model(wp.model).hidden_size
    c, P = _chunk_tokens(w, wp)
    for j, s in enumerate(wp.stages):
        st = f"{at}.stages.{j}"
        if not routes:
            _no_hop(problem, s, st)
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
        back = j == len(devices) - 1
        why = f" (the hop from {s.device} to {nxt} over {r.id}, `{at}.batch` {wp.batch})"
        per_token = TOKEN_ID_BYTES if back else pipeline_activation_bytes(1, 1, hidden)
        same(problem, f"{st}.hop_bytes_per_token", s.hop_bytes_per_token, per_token, why)
        seconds = hop_seconds(r, per_token * wp.batch)
        same(problem, f"{st}.hop_seconds", s.hop_seconds, seconds, why)
        # With a chunk of c prompt tokens: (batch + c) hidden states forward, or back the ids
        # of the batch and of the c / P prompts the chunk finishes.
        chunk = (wp.batch + c / P) * TOKEN_ID_BYTES if back else (wp.batch + c) * per_token
        why = f"{why[:-1]}, {c:g} prompt tokens of a chunk)"
        same(problem, f"{st}.hop_chunk_bytes", s.hop_chunk_bytes, chunk, why)
        seconds = hop_seconds(r, chunk)
        same(problem, f"{st}.hop_chunk_seconds", s.hop_chunk_seconds, seconds, why)


def _no_hop(problem: Problem, s: StageLine, st: str) -> None:
    """A stage of a replica without hops (one stage; a training pipeline, whose hops the plan
    does not list) states none: the first split key it fills is named with its value."""
    stated = {
        "hop_route": s.hop_route is not None,
        "hop_bytes_per_token": s.hop_bytes_per_token != 0,
        "hop_seconds": s.hop_seconds != 0,
        "hop_chunk_bytes": s.hop_chunk_bytes != 0,
        "hop_chunk_seconds": s.hop_chunk_seconds != 0,
    }
    for key, filled in stated.items():
        if filled:
            fail(
                problem,
                f"`{st}.{key}`: `{getattr(s, key)}`, but the replica has no hop to state; "
                "leave the split keys out",
            )


def _written_before(s: StageLine) -> bool:
    """A stage line without split figures: a plan written before they were recorded."""
    return s.hop_route is None and s.hop_bytes_per_token == 0.0 and s.hop_seconds == 0.0


def hop_seconds(r: Route, nbytes: float) -> float:
    """One message of `nbytes` along route `r`, by Hockney's model along a path: the one-way
    latency of each distinct link, once, plus the bytes over the slowest link's bandwidth."""
    links = {lk.id: lk for lk in r.links}.values()
    latency_s = sum(lk.latency_us for lk in links) * 1e-6
    return latency_s + nbytes / (min(lk.bandwidth_gb_s for lk in links) * 1e9)
