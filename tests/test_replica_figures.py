"""Design enumeration (numpy columns over every candidate) and the scalar replica figures that
the plan builder prints and the verifier recomputes are the same serving model: every design of
every example agrees with its stage-by-stage recomputation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.estimator.designs import allowed_devices, inference_designs
from planner.estimator.hosts import sustained
from planner.estimator.network import network_link
from planner.estimator.replica import StageSpec, inference_replica
from planner.estimator.routes import group_link, hop_routes
from planner.estimator.support import engine_times, exchange_overhead_s, hop_overhead_s
from planner.load import load_problem
from planner.schema.problem import InferenceWorkload

PROBLEMS = sorted((Path(__file__).parent.parent / "problems").glob("*.yaml"))


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_designs_match_scalar_replica_figures(path: Path) -> None:
    cat = load_catalog()
    problem = load_problem(path)
    devs = allowed_devices(problem, cat)
    link = network_link(problem, cat)
    for w in problem.workloads:
        if not isinstance(w, InferenceWorkload) or w.request_mix is not None:
            continue
        designs = inference_designs(w, problem, cat, devs, prune=False)
        for d in designs[:: max(1, len(designs) // 200)]:  # an even sample of at most ~200
            hops = hop_routes(problem, cat, [s.device for s in d.stages], [s.tp for s in d.stages])
            fig = inference_replica(
                cat.model(w.model),
                w.weights,
                w.kv,
                batch=d.batch,
                context=w.context_tokens,
                prompt=w.prompt_tokens,
                output=w.output_tokens,
                # A consumer card in a multi-card chassis runs derated (`dense`).
                # A group across machines all-reduces over its machines' link, with the
                # engine's own time per exchange; each hop crosses the route joining its
                # stages' machines (planner.estimator.routes).
                stages=[
                    StageSpec(
                        sustained(cat.accelerator(s.device), problem)
                        if s.dense
                        else cat.accelerator(s.device),
                        s.tp,
                        s.layers,
                        link=group_link(problem, cat, s.device) if s.across_machines else None,
                        exchange_s=exchange_overhead_s(cat, d.engine, s.device)
                        if s.across_machines
                        else 0.0,
                        hop=hops[j] if hops else None,
                    )
                    for j, s in enumerate(d.stages)
                ],
                link=link,
                hop_overhead_s=hop_overhead_s(cat, d.engine),
                rpc=engine_times(cat, d.engine)["rpc"],
                # The engine's kernel family sets the rate of its products (kernel_rates).
                kernels=engine_times(cat, d.engine)["kernels"],
            )
            for got, want in (
                (d.tokens_per_s, fig.tokens_per_s),
                (d.ms_per_token, fig.ms_per_token),
                (d.ttft_s, fig.ttft_s),
                (d.power_w, fig.power_w),
            ):
                assert math.isclose(got, want, rel_tol=1e-9), (d, fig)
