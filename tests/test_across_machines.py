"""Tensor parallelism across machines: where every host of a device holds one (a DGX Spark, a
Mac), a tensor-parallel group may span several such machines, its all-reduces over the
problem's network, under an engine that runs a group over machines. The optimizer picks it
beside pipelines; the verifier holds it to those conditions."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.catalog import load_catalog
from planner.estimator.designs import MAX_ACROSS_MACHINES, across_machine_degrees
from planner.load import load_problem, parse_problem
from planner.plan.io import dumps_plan, plan_document, plan_from_data
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.yaml_io import Located
from planner.simulate import engine_of
from planner.simulate.plan_file import workloads_from_json
from planner.solve import solve_problem
from planner.verify_plan import plan_failures

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def _two_sparks(sets: list[str] | None = None) -> Problem:
    return load_problem(PROBLEMS / "two-sparks.yaml", sets or [])


def _solved(sets: list[str] | None = None) -> tuple[Problem, Any]:
    problem = _two_sparks(sets)
    plan = solve_problem(problem, workers=1, seed=0, time_limit=30)
    assert plan.status == "OPTIMAL", plan.notes
    return problem, plan


def test_two_sparks_serve_one_group_over_both_machines() -> None:
    """Llama 3.3 70B in BF16 does not fit one Spark: the fastest single stream is one
    tensor-parallel group of the two, over their 200 Gb/s link."""
    _, plan = _solved()
    (wp,) = plan.workloads
    (stage,) = wp.stages
    assert stage.device == "dgx-spark" and stage.tp == 2 and stage.across_machines
    assert wp.recipe is not None and "--tensor-parallel-size 2" in wp.recipe.command
    assert "machines" in wp.recipe.command  # the launch line says the group spans machines
    # rykersun/vllm-dgx-spark, PERFORMANCE_ANALYSIS.md (commit a23f576): "3.17 tokens/second,
    # Llama-3.3-70B across 2x DGX Spark (TP=2)", vLLM with CUDA graphs, 500 output tokens.
    # Nothing is fitted on this row; the link's all-reduce time comes from another source
    # (NCCL between two Sparks, links.yaml roce-200g).
    assert wp.tokens_per_s == pytest.approx(3.17, rel=0.15)


def test_the_group_beats_the_pipeline_the_planner_gave_before() -> None:
    """Without groups over machines (max_tensor_parallel 1) the pair is a two-stage pipeline,
    whose one sequence passes each stage in turn: about half the tokens/s. The larger design
    space never serves less."""
    _, group = _solved()
    _, pipeline = _solved(["constraints.max_tensor_parallel=1"])
    (wp,) = pipeline.workloads
    assert [s.tp for s in wp.stages] == [1, 1]
    assert not any(s.across_machines for s in wp.stages)
    assert group.objective > 1.6 * pipeline.objective


def test_an_engine_without_groups_over_machines_pipelines_instead() -> None:
    """llama.cpp's RPC backend splits layers, not matrices, across machines."""
    _, plan = _solved(["workloads.chat.engine=llama.cpp"])
    (wp,) = plan.workloads
    assert wp.engine == "llama.cpp"
    assert len(wp.stages) == 2 and not any(s.across_machines for s in wp.stages)


def test_only_devices_that_are_their_own_machine_form_groups_over_machines() -> None:
    cat = load_catalog()
    problem = _two_sparks()
    m = cat.model("llama-3.1-70b")  # 64 attention heads
    spark, h100 = cat.accelerator("dgx-spark"), cat.accelerator("h100-sxm")
    assert across_machine_degrees(spark, cat, problem, m, "vllm") == [2, 4, 8]
    assert across_machine_degrees(spark, cat, problem, m, "llama.cpp") == []
    # An 8-GPU baseboard holds its groups inside the host.
    doc = {**_doc(), "constraints": {"allowed_devices": ["h100-sxm"], "max_devices": 8}}
    wide = parse_problem(Located(doc, {}, "t.yaml"), [])
    assert across_machine_degrees(h100, cat, wide, m, "vllm") == []
    capped = _two_sparks(["constraints.max_tensor_parallel=4"])
    assert across_machine_degrees(spark, cat, capped, m, "vllm") == [2, 4]
    assert MAX_ACROSS_MACHINES == 8


def _doc() -> dict[str, Any]:
    return dict(yaml.safe_load((PROBLEMS / "two-sparks.yaml").read_text()))


def _document() -> tuple[dict[str, Any], Problem]:
    problem, plan = _solved()
    return json.loads(dumps_plan(plan_document(plan, problem, load_catalog()))), problem


def _failures(doc: dict[str, Any]) -> list[str]:
    return plan_failures(plan_from_data(copy.deepcopy(doc), "two-sparks"), load_catalog())


def test_the_verifier_holds_the_group() -> None:
    doc, _ = _document()
    assert _failures(doc) == []
    stage = ["workloads", 0, "stages", 0]

    def edited(path: list[Any], value: Any) -> dict[str, Any]:
        d = copy.deepcopy(doc)
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        return d

    # Said to sit in one host: a Spark's host has one slot.
    found = _failures(edited([*stage, "across_machines"], False))
    assert any("node slots" in f for f in found), found
    # Under an engine that splits no matrices over machines.
    found = _failures(edited(["workloads", 0, "engine"], "llama.cpp"))
    assert any("runs no tensor-parallel group over machines" in f for f in found), found
    # Rented: a cloud rents no network between its machines.
    found = _failures(edited(["workloads", 0, "site"], "cloud"))
    assert any("across machines is rented" in f for f in found), found
    # Wider than the design space's 2, 4 or 8 machines.
    found = _failures(edited([*stage, "tp"], 16))
    assert any("2, 4 or 8 machines" in f for f in found), found


def test_a_saved_plan_replays_its_group_across_machines() -> None:
    """`planner simulate PLAN.json` reads the group's flag and engine from the plan file, so
    its iterations are the plan's: the same time per step as the plan in memory."""
    problem, plan = _solved()
    doc = json.loads(dumps_plan(plan_document(plan, problem, load_catalog())))
    (saved,) = workloads_from_json(doc, "plan.json")
    assert saved.stages[0].across_machines and saved.engine == "vllm"
    cat = load_catalog()
    (w,) = problem.workloads
    assert isinstance(w, InferenceWorkload)
    held, replayed = (
        engine_of(problem, cat, w, plan.workloads[0]),
        engine_of(problem, cat, w, saved),
    )
    assert replayed[0](1.0, 0.0) == pytest.approx(held[0](1.0, 0.0), rel=1e-12)
    assert held[0](1.0, 0.0) == pytest.approx(
        plan.workloads[0].stages[0].seconds_per_step, rel=0.05
    )


def test_a_plan_file_without_the_field_reads_as_one_host() -> None:
    """Plan files written before the field existed hold every group in one host."""
    doc, _ = _document()
    del doc["workloads"][0]["stages"][0]["across_machines"]
    plan = plan_from_data(doc, "two-sparks").plan
    assert plan.workloads[0].stages[0].across_machines is False
