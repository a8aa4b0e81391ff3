"""What an engine's layout allows and charges, on every path alike (design enumeration, the
verifier, `planner estimate`): engines that split no layers over stages (support.yaml
`pipeline_parallel: false`) get replicas of one stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile_cli import run

from planner.catalog import load_catalog
from planner.estimator.designs import allowed_devices, inference_designs
from planner.load import load_problem
from planner.plan.io import dumps_plan, plan_document, plan_from_data
from planner.schema.problem import Problem
from planner.solve import solve_problem
from planner.verify_plan import plan_failures

CAT = load_catalog()

# Sixteen Raspberry Pi 5s serving Llama 3.1 70B in Q4_0: 70.6e9 x 4.5 / 8 = 39.7 GB of weights,
# more than four Pis hold (7.7 GB usable each), so a group of four would need two stages.
PI_POOL_70B = """
name: pi-pool
workloads:
  - {{name: chat, kind: inference, model: llama-3.1-70b, weights: q4_0, kv: fp32,
     engine: {engine}, context_tokens: 256, prompt_tokens: 64, output_tokens: 128,
     concurrency: 4}}
constraints:
  allowed_devices: [raspberry-pi-5-8gb]
  inventory: [{{device: raspberry-pi-5-8gb, count: 16}}]
  capex_usd: 0
  network: eth-1g
horizon: {{lifetime_years: 3, utilization: 0.3, electricity_usd_per_kwh: 0.25, pue: 1.0}}
objective: {{goal: max_throughput}}
"""

UNPIPELINED = sorted(e.id for e in CAT.engines.values() if not e.pipeline_parallel)


def _problem(tmp_path: Path, engine: str) -> Problem:
    path = tmp_path / "pool.yaml"
    path.write_text(PI_POOL_70B.format(engine=engine), encoding="utf-8")
    return load_problem(path)


def _pipelining(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """The catalog's `engine` as if it split layers over stages (what the planner did before)."""
    e = CAT.engines[engine]
    monkeypatch.setitem(CAT.engines, engine, e.model_copy(update={"pipeline_parallel": True}))


def test_the_distributed_llama_releases_run_no_pipeline() -> None:
    # support.yaml: both releases split every block over the machines and no layers over stages.
    assert {"distributed-llama", "distributed-llama-0.3"} <= set(UNPIPELINED)


@pytest.mark.parametrize("engine", ["distributed-llama", "distributed-llama-0.3"])
def test_designs_under_an_engine_without_pipelines_have_one_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    problem = _problem(tmp_path, engine)
    w = problem.workloads[0]
    devs = allowed_devices(problem, CAT)
    designs = inference_designs(w, problem, CAT, devs, prune=False)
    assert designs and all(len(d.stages) == 1 for d in designs)
    # One stage of 8 machines holds the 70B model; 4 machines only in two stages.
    assert {d.stages[0].tp for d in designs} == {8}
    # The same enumeration under an engine that pipelines splits stages: the check can fail.
    _pipelining(monkeypatch, engine)
    piped = inference_designs(w, problem, CAT, devs, prune=False)
    assert any(len(d.stages) > 1 for d in piped)


def test_verify_rejects_stages_under_an_engine_without_pipelines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = "distributed-llama-0.3"
    problem = _problem(tmp_path, engine)
    with monkeypatch.context() as m:
        _pipelining(m, engine)
        plan = solve_problem(problem, workers=1, seed=0)
        stages = len(plan.workloads[0].stages)
        doc = dumps_plan(plan_document(plan, problem, CAT))
    assert stages == 2  # 2 x 4 machines, the plan the review found
    found = plan_failures(plan_from_data(json.loads(doc), "pool"), CAT)
    assert any(
        f"splits its layers over 2 pipeline stages under {engine}, which runs no pipeline" in f
        for f in found
    ), found


def test_verify_accepts_the_one_stage_plan(tmp_path: Path) -> None:
    problem = _problem(tmp_path, "distributed-llama-0.3")
    plan = solve_problem(problem, workers=1, seed=0)
    assert [(s.device, s.tp) for s in plan.workloads[0].stages] == [("raspberry-pi-5-8gb", 8)]
    doc = dumps_plan(plan_document(plan, problem, CAT))
    assert plan_failures(plan_from_data(json.loads(doc), "pool"), CAT) == []


def test_estimate_refuses_a_pipeline_under_an_engine_without_one() -> None:
    # Llama 3.1 8B, Q4_0 weights, fp32 KV of 64 sequences x 4,096 tokens: 68.7 GB of KV cache;
    # four Pis in tensor parallel would need three stages of them.
    base = ("estimate", "-m", "llama-3.1-8b", "-d", "raspberry-pi-5-8gb", "--weights", "q4_0")
    args = (*base, "--kv", "fp32", "--engine", "distributed-llama", "--batch", "64")
    code, out = run(*args, "--tp", "4")
    assert code == 3  # no layout on this device (README, exit codes)
    assert "pipeline 3" in out and "runs no pipeline stages" in out
    assert "--engine distributed-llama" in out and "give --tp 16 (the least degree" in out
    assert "decode throughput" not in out
    # The degree it names holds the model in one stage and is estimated.
    code, out = run(*args, "--tp", "16")
    assert code == 0 and "16 (tensor-parallel 16)" in out and "decode throughput" in out
    # An engine that pipelines keeps its layout of 4 x 3.
    code, out = run(*base, "--kv", "fp32", "--engine", "llama.cpp", "--batch", "64", "--tp", "4")
    assert code == 0 and "tensor-parallel 4 x pipeline 3" in out
