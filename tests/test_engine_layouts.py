"""What an engine's layout allows and charges, on every path alike (design enumeration, the
verifier, `planner estimate`): engines that split no layers over stages (support.yaml
`pipeline_parallel: false`) get replicas of one stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hostile_cli import run

from planner.catalog import load_catalog
from planner.estimator.designs import allowed_devices, inference_designs
from planner.estimator.support import engine_kernels
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
    # Llama 3.1 405B in bf16 on Gaudi 2 (96 GB): 811 GB of weights need 2 x 5 devices at --tp 2,
    # a pipeline optimum-habana does not run; a group holding it alone needs at least 9 of
    # them, and the least degree at or above that dividing the 128 heads is 16.
    base = ("estimate", "-m", "llama-3.1-405b", "-d", "gaudi2", "--weights", "bf16")
    args = (*base, "--engine", "optimum-habana")
    code, out = run(*args, "--tp", "2")
    assert code == 3  # no layout on this device (README, exit codes)
    assert "tensor-parallel 2 x pipeline 5" in out and "runs no pipeline stages" in out
    assert "--engine optimum-habana" in out and "give --tp 16 (the least degree" in out
    assert "decode throughput" not in out
    # The degree it names holds the model in one stage and is estimated.
    code, out = run(*args, "--tp", "16")
    assert code == 0 and "16 (tensor-parallel 16)" in out and "decode throughput" in out
    # An engine that pipelines keeps the layout of 2 x 5.
    code, out = run(*base, "--engine", "vllm-gaudi", "--tp", "2")
    assert code == 0 and "tensor-parallel 2 x pipeline 5" in out


def test_estimate_refuses_a_pipeline_of_an_engine_over_machines() -> None:
    # Llama 3.1 70B Q4_0 (39.7 GB) on Pi 5s (7.7 GB usable) needs 7 stages of one Pi;
    # distributed-llama runs none, and its groups run over machines: a problem file's.
    args = ("estimate", "-m", "llama-3.1-70b", "-d", "raspberry-pi-5-8gb", "--weights", "q4_0")
    code, out = run(*args, "--kv", "fp32", "--engine", "distributed-llama")
    assert code == 3 and "needs pipeline 7" in out and "runs no pipeline stages" in out
    assert "planner solve on a problem file naming `engine: distributed-llama`" in out


# Llama 3.1 8B: 32 blocks, 8 KV heads x 128 = 1,024 values each of K and V per token per block.
LLAMA3_8B = CAT.model("llama-3.1-8b")
FP32 = 4.0  # bytes per KV value at kv: fp32


def test_a_star_root_holds_the_whole_kv_cache_and_the_ends() -> None:
    from planner.estimator.formats import weight_format
    from planner.estimator.memory import block_weight_bytes, inference_memory, weight_bytes

    fmt = weight_format("q4_0")
    # Hand: 32 layers x 1,024 x 2 (K and V) x 4 B x 8,192 tokens x 4 sequences = 8.59 GB on the
    # root, which alone runs attention (distributed-llama 0.3, src/llama2-tasks.cpp); a mesh
    # splits it over the KV heads, half on each of two machines.
    whole = 32 * 1024 * 2 * 4 * 8192 * 4
    assert whole == 8_589_934_592
    star = inference_memory(LLAMA3_8B, fmt, FP32, batch=4, context=8192, tp=2, root_alone=True)
    split = inference_memory(LLAMA3_8B, fmt, FP32, batch=4, context=8192, tp=2)
    assert star.kv_cache == whole and split.kv_cache == whole / 2
    # Weights: half the blocks' matrices, and the embedding, final norm and output head whole
    # (Q4_0: 4.5 bits a weight; 128,256 x 4,096 x 4.5 / 8 = 295.5 MB for each of embedding and
    # head).
    blocks, ends = block_weight_bytes(LLAMA3_8B, fmt), weight_bytes(LLAMA3_8B, fmt)
    ends -= blocks
    assert ends == pytest.approx(2 * 128256 * 4096 * 4.5 / 8, rel=1e-5)
    assert star.weights == pytest.approx(blocks / 2 + ends)
    assert split.weights == pytest.approx((blocks + ends) / 2)
    # 8.59 GB of KV alone exceeds a Raspberry Pi 5 8 GB's usable memory.
    pi5 = CAT.accelerator("raspberry-pi-5-8gb")
    assert star.total > pi5.memory.usable_bytes(0.0)


def _two_pis(tmp_path: Path, engine: str, context: int, concurrency: int) -> Problem:
    text = (
        PI_POOL_70B.format(engine=engine)
        .replace("llama-3.1-70b", "llama-3.1-8b")
        .replace("count: 16", "count: 2")
        .replace("context_tokens: 256", f"context_tokens: {context}")
        .replace("concurrency: 4", f"concurrency: {concurrency}")
    )
    path = tmp_path / "two.yaml"
    path.write_text(text, encoding="utf-8")
    return load_problem(path)


def test_the_replica_figures_the_verifier_recomputes_hold_the_roots_kv(tmp_path: Path) -> None:
    """planner verify recomputes a stage's memory through inference_replica (verify_workloads
    .replica_figures): a star group of two Pis at 4 sequences of 8,192 tokens needs 8.59 GB of
    KV on its root."""
    from planner.estimator.designs import Design, Stage, stage_specs
    from planner.estimator.network import network_link
    from planner.estimator.replica import inference_replica

    problem = _two_pis(tmp_path, "distributed-llama-0.3", 8192, 4)
    w = problem.workloads[0]
    stage = Stage("raspberry-pi-5-8gb", 2, 32, across_machines=True)
    d = Design("chat", 4, (stage,), 1, 0.0, 4, 0.0, 0.0, 0.0, {}, engine="distributed-llama-0.3")
    fig = inference_replica(
        LLAMA3_8B,
        w.weights,
        w.kv,
        batch=4,
        context=8192,
        prompt=w.prompt_tokens,
        output=w.output_tokens,
        stages=stage_specs(CAT, problem, d),
        link=network_link(problem, CAT),
    )
    assert fig.stages[0].memory["kv_cache"] == 32 * 1024 * 2 * 4 * 8192 * 4


@pytest.mark.parametrize(
    ("engine", "most"), [("distributed-llama-0.3", 1), ("distributed-llama", 4)]
)
def test_designs_fit_the_roots_kv_cache(tmp_path: Path, engine: str, most: int) -> None:
    """Two Pis (7.73 GB usable each), Llama 3.1 8B Q4_0 with fp32 KV of 8,192 tokens (1.07 GB a
    sequence, 32 x 1,024 x 2 x 4 B x 8,192): a star root holds 2.55 GB of weights (half the
    blocks, the ends whole), 1 GB of framework and every sequence's KV, so one sequence fits
    and two (2.15 GB of KV) do not; a mesh splits weights and KV in halves (2.26 GB and
    0.54 GB a sequence), so four fit."""
    problem = _two_pis(tmp_path, engine, 8192, 4)
    w = problem.workloads[0]
    designs = inference_designs(w, problem, CAT, allowed_devices(problem, CAT), prune=False)
    pairs = [d for d in designs if d.stages[0].across_machines and d.stages[0].tp == 2]
    assert pairs and max(d.batch * len(d.stages) for d in pairs) == most


def test_two_pis_cannot_hold_four_long_sequences_on_a_star(tmp_path: Path) -> None:
    # The review's case: 4 sequences of 8,192 tokens need 8.59 GB of KV on the star's root; two
    # Pis have no plan (a mesh splits it, 4.29 GB a machine, and serves them).
    star = solve_problem(_two_pis(tmp_path, "distributed-llama-0.3", 8192, 4), workers=1, seed=0)
    assert star.status.value == "INFEASIBLE"
    mesh = solve_problem(_two_pis(tmp_path, "distributed-llama", 8192, 4), workers=1, seed=0)
    assert mesh.status.value == "OPTIMAL"
    assert mesh.workloads[0].stages[0].memory_bytes["kv_cache"] == 32 * 1024 * 2 * 4 * 8192 * 4 / 2


@pytest.mark.parametrize("engine", ["distributed-llama", "distributed-llama-0.3"])
def test_estimate_refuses_a_group_it_cannot_price_over_machines(engine: str) -> None:
    """planner estimate prices a --tp group inside one host; these releases run theirs only
    over machines joined by a network, which a problem file states (the two Pis of the
    template: planner solve gives 308.30 / 347.42 ms per token for the mesh / the star, where
    the estimate gave 232.76 ms for both, the network ignored)."""
    args = ("estimate", "-m", "llama-3.1-8b", "-d", "raspberry-pi-5-8gb", "--weights", "q4_0")
    args += ("--kv", "fp32", "--engine", engine, "--context", "256", "--prompt", "64")
    code, out = run(*args, "--tp", "2")
    assert code == 2
    assert f"--tp 2 with --engine {engine}: {engine} runs a tensor-parallel group only" in out
    assert "constraints.network, and run planner solve on it, or give --tp 1" in out
    code, out = run(*args, "--tp", "1")
    assert code == 0 and "1 (single)" in out and "decode throughput" in out


def test_solve_prices_the_group_estimate_refuses(tmp_path: Path) -> None:
    """What the refusal points at: the problem file's two Pis over eth-1g, each release's own
    exchanges priced (engine_topology), the star's slower than the mesh's at one sequence."""
    ms = {}
    for engine in ("distributed-llama", "distributed-llama-0.3"):
        plan = solve_problem(_two_pis(tmp_path, engine, 256, 1), workers=1, seed=0)
        [stage] = plan.workloads[0].stages
        assert (stage.tp, plan.status.value) == (2, "OPTIMAL")
        ms[engine] = plan.workloads[0].ms_per_token
    assert ms["distributed-llama-0.3"] > ms["distributed-llama"]


# A whole-replica figure: two Pis in a group decode 2.25 tokens/s at batch 1.
MEASURED = {
    "device": "raspberry-pi-5-8gb",
    "devices": 2,
    "metric": "decode_tokens_per_s",
    "batch": 1,
    "value": "2.25 tokens/s",
}


@pytest.mark.parametrize("engine", ["distributed-llama", "distributed-llama-0.3"])
def test_a_measured_replica_is_reproduced_under_either_layout(tmp_path: Path, engine: str) -> None:
    """docs/measurements.md: a single-stage replica of the measured devices at the measured
    batch decodes exactly the measured tokens/s. 2.25 tokens/s at batch 1 on two Pis is a
    decode step of 1 / 2.25 = 444.44 ms, the star's root-only work (the whole KV cache, the
    head on the root) inside it, not on top (it gave 457.04 ms); at batch 2, an estimated
    point, the star's root still reads more than the mesh's machines."""
    from planner.estimator.designs import Design, Stage, stage_specs
    from planner.estimator.network import network_link
    from planner.estimator.replica import inference_replica

    doc = yaml.safe_load(PI_POOL_70B.format(engine=engine))
    doc["workloads"][0] |= {"model": "llama-3.1-8b", "concurrency": 1, "measured": [MEASURED]}
    doc["constraints"]["inventory"][0]["count"] = 2
    path = tmp_path / "measured.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    problem = load_problem(path)
    w = problem.workloads[0]
    ms = {}
    for b in (1, 2):
        stage = Stage("raspberry-pi-5-8gb", 2, 32, across_machines=True)
        d = Design("chat", b, (stage,), 1, 0.0, b, 0.0, 0.0, 0.0, {}, engine=engine)
        fig = inference_replica(
            LLAMA3_8B,
            w.weights,
            w.kv,
            batch=b,
            context=w.context_tokens,
            prompt=w.prompt_tokens,
            output=w.output_tokens,
            stages=stage_specs(CAT, problem, d),
            link=network_link(problem, CAT),
            decode_only=True,
            kernels=engine_kernels(CAT, engine),
        )
        ms[b] = fig.ms_per_token
    assert ms[1] == pytest.approx(1e3 / 2.25, rel=1e-9)
    assert ms[2] > ms[1]
    # Design enumeration scales its columns the same way: its figures are the replica's.
    designs = inference_designs(w, problem, CAT, allowed_devices(problem, CAT), prune=False)
    for d in (x for x in designs if x.stages[0].across_machines and x.stages[0].tp == 2):
        fig = inference_replica(
            LLAMA3_8B,
            w.weights,
            w.kv,
            batch=d.batch,
            context=w.context_tokens,
            prompt=w.prompt_tokens,
            output=w.output_tokens,
            stages=stage_specs(CAT, problem, d),
            link=network_link(problem, CAT),
            # The engine's kernel family, as the plan and the verifier pass it (engine_times):
            # it sets the rate a decode reads the KV cache at (decode_reads.kv_read_seconds_per_byte).
            kernels=engine_kernels(CAT, d.engine),
        )
        assert d.ms_per_token == pytest.approx(fig.ms_per_token, rel=1e-9)


def test_no_plan_names_the_engine_without_pipelines(tmp_path: Path) -> None:
    """Four Pis in one group hold 4 x 7.7 = 31 GB, less than Llama 3.1 70B's 40 GB of Q4_0
    weights, and distributed-llama-0.3 adds no stages: the diagnosis says so rather than
    asking for a shorter context."""
    from planner.model.diagnose import why_no_design

    problem = _problem(tmp_path, "distributed-llama-0.3")
    problem = problem.model_copy(
        update={"constraints": problem.constraints.model_copy(update={"max_tensor_parallel": 4})}
    )
    why = why_no_design(problem.workloads[0], problem, CAT)
    assert "distributed-llama-0.3 runs no pipeline" in why
    assert "one stage of 4-way tensor parallelism holds 31 GB" in why
    assert "raise constraints.max_tensor_parallel" in why
