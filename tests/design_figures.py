"""The plan builder's scalar figures of one enumerated design, for tests that hold the design
columns to them (planner.plan.build.replica_figures, which the plan's stage lines come from)."""

from __future__ import annotations

from planner.catalog import load_catalog
from planner.estimator.designs import Design
from planner.estimator.replica import ReplicaFigures
from planner.plan.build import replica_figures
from planner.schema.problem import InferenceWorkload, Problem


def scalar_figures(prob: Problem, d: Design) -> ReplicaFigures:
    """Design `d` of the problem's first workload, stage by stage, with its engine's times."""
    w = prob.workloads[0]
    assert isinstance(w, InferenceWorkload)
    return replica_figures(w, load_catalog(), d, prob)
