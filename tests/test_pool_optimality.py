"""Pools of owned machines: the proved optimum moves the right way with the pool, and on small
pools it equals an exhaustive search that knows nothing of CP-SAT or the pruning.

- On the README's leftovers pool (4 A100 40GB PCIe, 8 L4 and 12 T4 on 1 Gb/s with 1 ms;
  benchmarks/bench_pools.py's 24-machine pool on its 1 Gb/s link), one machine fewer of a kind
  at work never raises the proved throughput, one fewer of a kind left idle leaves it as it is,
  and one machine more of any kind never lowers it (one more of the idle kind, a T4, leaves it
  as it is: nine T4s cannot hold the 16-bit model, and every A100 and L4 is at work).
- On pools of at most 8 machines of 2-4 kinds (models whose replicas span several machines; in
  two, only a pipeline of all three, or all four, kinds holds the model), the exhaustive search takes every
  replica design the estimator offers, unpruned
  (`inference_designs(prune=False)`), and every multiset of replicas that fits the inventory.
  Throughput counts as the model counts it under a stated concurrency (planner.model.quantities,
  made_tokens): every one of the workload's sequences is held by some replica, each replica
  holds at least one and at most its design's sequences, and each sequence makes one token per
  time per token of its replica's design. For a multiset, replicas taking the same devices may
  run any of the designs of those devices: each replica's best design for the sequences it holds
  is the fastest token among the designs holding that many, and every split of the sequences
  among the replicas is tried (a knapsack over the replicas, exact). With `concurrency:
  unbounded` every slot counts as filled, so each replica makes its design's tokens/s.

Only proved optima (OPTIMAL) are compared; the solver rounds each design's tokens/s down to
milli-tokens, so values agree within a milli-token per sequence.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from bench_scripts import ROOT, load_script

from planner.catalog import Catalog, load_catalog
from planner.estimator.designs import allowed_devices, inference_designs
from planner.load import load_problem
from planner.plan.types import Plan
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.status import Status
from planner.solve import solve_problem

pools = load_script("benchmarks/bench_pools.py", "bench_pools")
LEFTOVERS = ROOT / "problems" / "leftovers-pool.yaml"


@cache
def catalog() -> Catalog:
    return load_catalog()


def _solve(problem: Problem) -> Plan:
    plan = solve_problem(problem, time_limit=60, cat=catalog())
    assert plan.status == Status.OPTIMAL, (problem.name, plan.status, plan.notes)
    assert plan.objective is not None
    return plan


def _proved(problem: Problem) -> float:
    """The proved optimum in tokens/s; no throughput at all where no plan exists (proved
    infeasible: the pool cannot hold every sequence)."""
    plan = solve_problem(problem, time_limit=60, cat=catalog())
    if plan.status == Status.INFEASIBLE:
        return 0.0
    assert plan.status == Status.OPTIMAL, (problem.name, plan.status, plan.notes)
    assert plan.objective is not None
    return plan.objective


def _with_inventory(problem: Problem, counts: dict[str, int]) -> Problem:
    c = problem.constraints
    inventory = [o.model_copy(update={"count": counts[o.device]}) for o in c.inventory]
    inventory = [o for o in inventory if o.count > 0]
    return problem.model_copy(update={"constraints": c.model_copy(update={"inventory": inventory})})


def _used(plan: Plan) -> dict[str, int]:
    """Machines of each kind that serve in the plan."""
    out: dict[str, int] = {}
    for w in plan.workloads:
        for s in w.stages:
            out[s.device] = out.get(s.device, 0) + w.replicas * s.tp
    return out


def _close(a: float, b: float, sequences: int) -> bool:
    return abs(a - b) <= 1e-3 * sequences + 1e-9 * max(abs(a), abs(b))


def test_the_leftovers_pool_is_the_benchmark_pool() -> None:
    """The benchmark's 24-machine pool on 1 Gb/s is the README's leftovers pool."""
    ours = load_problem(LEFTOVERS)
    inst = next(i for i in pools.instances((24,)) if i.link == "lan-1g")
    theirs = Problem.model_validate(pools.problem_doc(inst))
    assert {o.device: o.count for o in ours.constraints.inventory} == inst.counts
    assert ours.workloads[0].model_dump(exclude={"name"}) == theirs.workloads[0].model_dump(
        exclude={"name"}
    )
    assert ours.links[0].model_dump(exclude={"id", "name"}) == theirs.links[0].model_dump(
        exclude={"id", "name"}
    )


def test_one_machine_more_or_less_moves_the_optimum_one_way() -> None:
    problem = load_problem(LEFTOVERS)
    counts = {o.device: o.count for o in problem.constraints.inventory}
    base = _solve(problem)
    assert base.objective is not None
    C = problem.workloads[0].concurrency
    assert isinstance(C, int)
    used = _used(base)
    idle = [d for d in counts if used.get(d, 0) < counts[d]]
    assert idle, "the leftovers pool leaves some T4s idle (README)"
    for dev in counts:
        fewer = _proved(_with_inventory(problem, {**counts, dev: counts[dev] - 1}))
        if dev in idle:  # the plan still fits: one idle machine fewer changes nothing
            assert _close(fewer, base.objective, C), (dev, fewer)
        else:  # (without one A100 no replica set holds the 96 chats: no plan, 0 tokens/s)
            assert fewer <= base.objective + 1e-3 * C, (dev, fewer)
        more = _proved(_with_inventory(problem, {**counts, dev: counts[dev] + 1}))
        assert more >= base.objective - 1e-3 * C, (dev, more)
        if dev in idle:  # here one more T4 joins the 8 idle ones, which cannot hold the model
            assert _close(more, base.objective, C), (dev, more)


# ----------------------------------------------------------------------------------------------
# Exhaustive search on small pools
# ----------------------------------------------------------------------------------------------

# (machines per kind, model, weights, sequences at once, link Gb/s, latency ms)
SMALL_POOLS: list[tuple[dict[str, int], str, str, int | None, float, float]] = [
    ({"a100-40gb-pcie": 1, "l4": 3, "t4": 4}, "llama-2-70b", "awq-int4", 32, 1.0, 1.0),
    ({"a100-40gb-pcie": 1, "l4": 2, "t4": 4}, "llama-2-70b", "int8", 8, 1.0, 1.0),
    ({"l4": 3, "t4": 5}, "llama-2-13b", "fp16", 16, 1.0, 1.0),
    ({"rtx-3090": 2, "t4": 6}, "llama-3.1-8b", "fp16", 24, 10.0, 0.2),
    ({"l4": 3, "t4": 3}, "llama-3.1-8b", "fp16", 4, 1.0, 1.0),
    ({"rtx-4090": 2, "l40s": 1, "t4": 3}, "llama-3.1-70b", "awq-int4", 12, 10.0, 0.2),
    # Only a pipeline of all three kinds holds the 16-bit model (tests/test_pipelines_of_many_types.py)
    ({"a100-40gb-pcie": 2, "l4": 2, "t4": 3}, "llama-2-70b", "fp16", 8, 1.0, 1.0),
    # ... and one of all four kinds (tests/test_pipelines_of_many_types.py)
    ({"a100-40gb-pcie": 1, "l4": 2, "rtx-3090": 2, "t4": 2}, "llama-2-70b", "fp16", 4, 1.0, 1.0),
]
# The same kind of pools with `concurrency: unbounded` (every slot of every replica counts).
UNBOUNDED_POOLS = [0, 2, 5]


def small_pool(i: int, unbounded: bool = False) -> Problem:
    counts, model, weights, sequences, gbit, ms = SMALL_POOLS[i]
    concurrency: int | str = "unbounded" if unbounded else sequences
    name = f"small-pool-{i}{'-unbounded' if unbounded else ''}"
    return pool_problem(name, counts, model, weights, concurrency, gbit, ms)


def pool_problem(
    name: str,
    counts: dict[str, int],
    model: str,
    weights: str,
    concurrency: int | str,
    gbit: float = 1.0,
    ms: float = 1.0,
    *,
    max_stages: int = 8,
    **constraints: Any,
) -> Problem:
    """A pool of owned machines (`counts` per device) on one link, serving one chat workload at
    the most tokens/s, without tensor parallelism; `constraints` add to or replace the rest."""
    doc: dict[str, Any] = {
        "name": name,
        "workloads": [
            {
                "name": "chat",
                "kind": "inference",
                "model": model,
                "weights": weights,
                "kv": "fp16",
                "context_tokens": 2048,
                "prompt_tokens": 256,
                "output_tokens": 256,
                "concurrency": concurrency,
            }
        ],
        "links": [{"id": "lan", "name": "lan", "bandwidth_gbit_s": gbit, "latency_ms": ms}],
        "constraints": {
            "allowed_devices": list(counts),
            "inventory": [{"device": d, "count": c} for d, c in counts.items()],
            "capex_usd": 0,
            "network": "lan",
            "max_tensor_parallel": 1,
            "max_stages": max_stages,
            **constraints,
        },
        "objective": {"goal": "max_throughput"},
    }
    return Problem.model_validate(doc)


def _best_rate(problem: Problem) -> dict[tuple[int, ...], npt.NDArray[np.float64]]:
    """Per device vector (machines of each inventory kind, sorted by id) that fits the pool:
    gain[x] = x times the fastest token (tokens/s per sequence) among the unpruned designs
    holding at least x sequences; -inf where none holds x."""
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload) and w.concurrency is not None
    C = w.concurrency
    inv = {o.device: o.count for o in problem.constraints.inventory}
    kinds = sorted(inv)
    cat = catalog()
    designs = inference_designs(w, problem, cat, allowed_devices(problem, cat), prune=False)
    rate: dict[tuple[int, ...], npt.NDArray[np.float64]] = {}
    for d in designs:
        assert set(d.devices) <= set(kinds), d
        v = tuple(d.devices.get(k, 0) for k in kinds)
        if any(n > inv[k] for n, k in zip(v, kinds, strict=True)):
            continue
        r = rate.setdefault(v, np.zeros(C + 1))
        x = min(d.concurrency, C)
        r[1 : x + 1] = np.maximum(r[1 : x + 1], 1000.0 / d.ms_per_token)
    gains = {}
    for v, r in rate.items():
        g = np.arange(C + 1) * r
        g[r == 0] = -np.inf
        gains[v] = g
    return gains


def _add_replica(g: npt.NDArray[np.float64], gain: npt.NDArray[np.float64]) -> np.ndarray:
    """Best throughput per sequences held, one replica (gain per sequences it holds) added."""
    out = np.full_like(g, -np.inf)
    for x in np.flatnonzero(np.isfinite(gain)):
        if x:
            out[x:] = np.maximum(out[x:], g[: len(g) - x] + gain[x])
    return out


def exhaustive_best(problem: Problem) -> float:
    """The most tokens/s of any multiset of replicas that fits the inventory and holds every
    sequence (see the module docstring); -inf when none does."""
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload) and w.concurrency is not None
    C = w.concurrency
    inv = {o.device: o.count for o in problem.constraints.inventory}
    gains = _best_rate(problem)
    vectors = sorted(gains)
    best = -np.inf

    def multisets(
        start: int, left: tuple[int, ...], g: npt.NDArray[np.float64]
    ) -> Iterator[npt.NDArray[np.float64]]:
        """Every multiset from vectors[start:] within `left`, each as its knapsack row."""
        for j in range(start, len(vectors)):
            v = vectors[j]
            if all(a <= b for a, b in zip(v, left, strict=True)):
                row = _add_replica(g, gains[v])
                yield row
                rest = tuple(b - a for a, b in zip(v, left, strict=True))
                yield from multisets(j, rest, row)

    empty = np.full(C + 1, -np.inf)
    empty[0] = 0.0
    for row in multisets(0, tuple(inv[k] for k in sorted(inv)), empty):
        best = max(best, float(row[C]))
    return best


def exhaustive_unbounded(problem: Problem) -> float:
    """With `concurrency: unbounded` every slot is filled: each replica makes its design's
    tokens/s, so a multiset is worth the sum of the fastest design of each replica's devices."""
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload) and w.concurrency is None
    inv = {o.device: o.count for o in problem.constraints.inventory}
    kinds = sorted(inv)
    cat = catalog()
    fastest: dict[tuple[int, ...], float] = {}
    for d in inference_designs(w, problem, cat, allowed_devices(problem, cat), prune=False):
        v = tuple(d.devices.get(k, 0) for k in kinds)
        if all(n <= inv[k] for n, k in zip(v, kinds, strict=True)):
            fastest[v] = max(fastest.get(v, 0.0), d.tokens_per_s)
    vectors = sorted(fastest)

    def best(start: int, left: tuple[int, ...]) -> float:
        """The most tokens/s of any multiset from vectors[start:] within `left` (0: none)."""
        top = 0.0
        for j in range(start, len(vectors)):
            v = vectors[j]
            if all(a <= b for a, b in zip(v, left, strict=True)):
                rest = tuple(b - a for a, b in zip(v, left, strict=True))
                top = max(top, fastest[v] + best(j, rest))
        return top

    return best(0, tuple(inv[k] for k in kinds))


@pytest.mark.parametrize("i", UNBOUNDED_POOLS)
def test_unbounded_small_pool_optimum_is_the_exhaustive_optimum(i: int) -> None:
    problem = small_pool(i, unbounded=True)
    best = exhaustive_unbounded(problem)
    plan = _solve(problem)
    assert plan.objective is not None
    assert _close(plan.objective, best, 8), (
        f"{problem.name}: solver {plan.objective:.4f} tokens/s, exhaustive {best:.4f}"
    )


def _assert_solver_meets_exhaustive(problem: Problem, name: str) -> None:
    """The proved optimum of `problem` (one workload with a concurrency) is the exhaustive one."""
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload) and w.concurrency is not None
    best = exhaustive_best(problem)
    plan = _solve(problem)
    assert plan.objective is not None
    assert _close(plan.objective, best, w.concurrency), (
        f"{name}: solver {plan.objective:.4f} tokens/s, exhaustive {best:.4f}"
    )


@pytest.mark.parametrize("i", range(len(SMALL_POOLS)))
def test_small_pool_optimum_is_the_exhaustive_optimum(i: int) -> None:
    problem = small_pool(i)
    assert sum(o.count for o in problem.constraints.inventory) <= 8
    _assert_solver_meets_exhaustive(problem, problem.name)


def test_benchmark_small_pools_match_the_exhaustive_optimum() -> None:
    """The benchmark's 8-machine pools, on both links."""
    for inst in pools.instances((8,)):
        problem = Problem.model_validate(pools.problem_doc(inst))
        _assert_solver_meets_exhaustive(problem, inst.name)


def test_the_exhaustive_search_sees_multi_stage_replicas() -> None:
    """Most small pools' best plans run replicas over several machines (else the search would
    prove little about pipelines)."""
    deep = 0
    for i in range(len(SMALL_POOLS)):
        plan = _solve(small_pool(i))
        deep += any(len(w.stages) > 1 for w in plan.workloads)
    assert deep >= len(SMALL_POOLS) // 2, deep


@pytest.mark.parametrize("i", range(len(SMALL_POOLS)))
def test_the_solver_over_unpruned_designs_agrees_with_the_search(i: int) -> None:
    """The same designs, unpruned, searched by CP-SAT (`tuned=False`): the exhaustive search
    and the model count throughput alike, so a difference above is the pruning's."""
    problem = small_pool(i)
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload) and w.concurrency is not None
    plan = solve_problem(problem, time_limit=60, cat=catalog(), tuned=False)
    assert plan.status == Status.OPTIMAL and plan.objective is not None
    best = exhaustive_best(problem)
    assert _close(plan.objective, best, w.concurrency), (problem.name, plan.objective, best)
