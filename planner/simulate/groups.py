"""One engine of a plan's replica group as the replay runs it: its iteration time, slots, KV
and token budget, the KV transfer out of a prefill engine, and Poisson arrivals of its classes."""

from __future__ import annotations

import math

import numpy as np

from planner.catalog import Catalog
from planner.estimator.formats import kv_bytes
from planner.estimator.hosts import with_machines
from planner.estimator.memory import handoff_bytes
from planner.estimator.network import network_link
from planner.estimator.replica import IterationTime
from planner.estimator.request_mix import class_workload
from planner.estimator.serving import (
    kv_transfer_s,
    prefill_pool_budget,
    prefill_prompt,
    token_budget,
)
from planner.estimator.support import engine_times
from planner.plan.recipe import served_context
from planner.plan.types import WorkloadPlan
from planner.schema.problem import InferenceWorkload, Problem


def shape_of(w: InferenceWorkload, wp: WorkloadPlan) -> InferenceWorkload:
    """The workload with the lengths a replica group is sized for (a mix's class)."""
    if w.request_mix is None:
        return w
    names = [c.name for c in w.request_mix]
    return class_workload(w, names.index(wp.sized_for or names[0]))


def engine_of(
    problem: Problem, cat: Catalog, w: InferenceWorkload, wp: WorkloadPlan
) -> tuple[IterationTime, int, float, float]:
    """The iteration time, slots, KV tokens and token budget of one engine of a replica group
    (its devices as the problem's stated machines join them: planner.estimator.hosts)."""
    cat = with_machines(cat, problem)
    shape = shape_of(w, wp)
    prompt = prefill_prompt(shape.prompt_tokens, w.prefix_cache_hit)
    it = IterationTime(
        cat.model(w.model),
        w.weights,
        w.kv,
        batch=wp.batch,
        context=shape.context_tokens,
        prompt=prompt,
        output=shape.output_tokens,
        stages=wp.stage_specs(cat, problem),
        link=network_link(problem, cat),
        budget=prefill_pool_budget(prompt) if wp.role == "prefill" else None,
        **engine_times(cat, wp.engine),
    )
    kv = float(wp.batch * shape.context_tokens)
    budget = token_budget(
        wp.batch, prefill_prompt(shape.prompt_tokens, w.prefix_cache_hit), shape.output_tokens
    )
    if wp.role == "prefill":  # whole prompts, no decodes: no slot or KV limit of its own
        return it, 1 << 30, math.inf, it.budget
    return it, wp.batch, kv, budget


def transfer_of(
    problem: Problem, cat: Catalog, w: InferenceWorkload, wp: WorkloadPlan, prompt: int = 0
) -> float:
    """Seconds to send the KV of `prompt` computed tokens (default: the prefill group's sized
    class's) from a prefill engine to a decode pool."""
    shape = shape_of(w, wp)
    link = network_link(problem, cat)
    m = cat.model(w.model)
    tokens = prompt or prefill_prompt(shape.prompt_tokens, w.prefix_cache_hit)
    kv = handoff_bytes(m, kv_bytes(w.kv), tokens)
    ports = link.bandwidth_gb_s * 1e9 * sum(s.tp for s in wp.stages)
    return kv_transfer_s(kv, ports, link.latency_us * 1e-6)


def arrival_classes(
    w: InferenceWorkload, served: dict[str, float], rate: float, n: int, rng: np.random.Generator
) -> tuple[list[float], list[int]]:
    """Times (s) and classes (indices into the mix) of `n` Poisson arrivals at `rate` of the
    classes in `served` (class -> requests/s), in its shares."""
    assert w.request_mix is not None
    weights = [served.get(c.name, 0.0) for c in w.request_mix]
    probs = np.array(weights) / (sum(weights) or 1.0)
    cls = rng.choice(len(weights), size=n, p=probs)
    gaps = rng.exponential(1.0 / rate, size=n) if rate > 0 else np.full(n, math.inf)
    return np.cumsum(gaps).tolist(), cls.tolist()


def launched_context(solved: Problem, wp: WorkloadPlan) -> float:
    """The longest request (prompt + output tokens) the engines of a replica group were launched
    to admit (its recipe's vLLM --max-model-len, SGLang --context-length), from the problem the
    plan was solved for: planner.plan.recipe.served_context. A longer one is refused by a real
    engine. Unbounded where that problem has no such serving workload."""
    w = next((x for x in solved.workloads if x.name == wp.name), None)
    if not isinstance(w, InferenceWorkload):
        return math.inf
    if w.request_mix is not None and wp.sized_for not in {c.name for c in w.request_mix}:
        return math.inf
    return float(served_context(w, shape_of(w, wp), wp.requests_per_s))


def admitted(
    w: InferenceWorkload, times: list[float], cls: list[int], limit: float
) -> tuple[list[float], list[int], int]:
    """The arrivals (times, classes) whose requests fit the engines' context `limit`, and how
    many do not (refused, as the engine refuses them: not served, not in any figure)."""
    assert w.request_mix is not None
    fits = [c.input_tokens + c.output_tokens <= limit for c in w.request_mix]
    keep = [i for i, c in enumerate(cls) if fits[c]]
    return [times[i] for i in keep], [cls[i] for i in keep], len(cls) - len(keep)


def arrivals(
    w: InferenceWorkload,
    wp: WorkloadPlan,
    rate: float,
    n: int,
    rng: np.random.Generator,
    limit: float = math.inf,
) -> tuple[list[tuple[float, int, int]], int]:
    """Poisson arrivals at `rate` of the classes a replica group serves, in its shares, as
    (time s, prompt tokens computed, output tokens), those longer than `limit` left out; and
    how many were (admitted)."""
    assert w.request_mix is not None
    times, cls, refused = admitted(w, *arrival_classes(w, wp.requests_per_s, rate, n, rng), limit)
    return [
        (
            float(t),
            prefill_prompt(w.request_mix[c].input_tokens, w.prefix_cache_hit),
            w.request_mix[c].output_tokens,
        )
        for t, c in zip(times, cls, strict=True)
    ], refused
