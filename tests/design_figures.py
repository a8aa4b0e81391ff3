"""The plan builder's scalar figures of one enumerated design, for tests that hold the design
columns to them (planner.plan.build.stage_lines computes them the same way)."""

from __future__ import annotations

from planner.catalog import load_catalog
from planner.estimator.designs import Design, stage_specs
from planner.estimator.network import network_link
from planner.estimator.replica import ReplicaFigures, inference_replica
from planner.estimator.serving import prefill_prompt
from planner.estimator.support import engine_times
from planner.schema.problem import InferenceWorkload, Problem


def scalar_figures(prob: Problem, d: Design) -> ReplicaFigures:
    """Design `d` of the problem's first workload, stage by stage, with its engine's times."""
    cat = load_catalog()
    w = prob.workloads[0]
    assert isinstance(w, InferenceWorkload)
    return inference_replica(
        cat.model(w.model),
        w.weights,
        w.kv,
        batch=d.batch,
        context=w.context_tokens,
        prompt=prefill_prompt(w.prompt_tokens, w.prefix_cache_hit),
        output=w.output_tokens,
        stages=stage_specs(cat, prob, d),
        link=network_link(prob, cat),
        decode_only=d.role == "decode",
        **engine_times(cat, d.engine),
    )
