"""The engine as an input: vLLM run with --enforce-eager (catalog engine `vllm-eager`).

Without CUDA graphs every operator of a forward step is dispatched from Python and launched one
by one, so each block of every step pays the host's launch time (Engine.launch_us_per_layer).
The catalog's figure comes from one published eager / CUDA-graph pair under vLLM (vLLM-Omni
issue 7960, https://github.com/vllm-project/vllm-omni/issues/7960: Qwen2.5-Omni-7B's thinker,
a 28-block Qwen2.5-7B language model, on A800s under vLLM 0.29.0, ~22 -> ~13 and ~23 -> ~13 ms
per token): 9.5 ms / 28 blocks = 339 us per block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.estimator.support import engine_times
from planner.load import load_problem
from planner.plan.io import dumps_plan, plan_document, plan_from_data
from planner.plan.recipe import launch_command
from planner.schema.problem import Problem
from planner.solve import solve_problem
from planner.verify import verify
from planner.verify_plan import plan_failures

ROOT = Path(__file__).resolve().parent.parent
LAUNCH_S_PER_BLOCK = 9.5e-3 / 28  # vLLM-Omni issue 7960: 9.5 ms per token over 28 blocks


def _estimate(*args: str) -> dict[str, object]:
    r = CliRunner().invoke(app, ["estimate", *args, "--format", "json"])
    assert r.exit_code == 0, r.output
    out: dict[str, object] = json.loads(r.output)
    return out


def test_the_catalog_figure_is_the_published_pair_per_block() -> None:
    cat = load_catalog()
    eager, graphs = engine_times(cat, "vllm-eager"), engine_times(cat, "vllm")
    assert eager["engine_layer_s"] == pytest.approx(LAUNCH_S_PER_BLOCK, rel=2e-3)
    assert eager["engine_step_s"] == 0.0  # the pair does not separate a per-step part
    assert graphs["engine_layer_s"] == 0.0 and graphs["engine_step_s"] == 0.0
    # The same figure as a cost per kernel: 339 us over a block's 19 kernels is 17.8 us, inside
    # the 5-25 us of CPU work per PyTorch operator the catalog's check source gives.
    assert 5.0 <= cat.engines["vllm-eager"].launch_us_per_layer / 19 <= 25.0


@pytest.mark.parametrize(
    ("model", "device", "weights", "blocks"),
    [("llama-3.1-8b", "h100-sxm", "bf16", 32), ("gpt-oss-120b", "dgx-spark", "mxfp4", 36)],
)
def test_eager_decode_at_batch_one_is_the_graph_step_plus_the_launches(
    model: str, device: str, weights: str, blocks: int
) -> None:
    """One sequence, one device: the eager step is the CUDA-graph step plus blocks x 339 us
    (Llama 3.1 8B: 32 x 0.339 = 10.848 ms; gpt-oss-120b: 36 x 0.339 = 12.204 ms), so eager
    decodes slower than graphs at batch 1."""
    base = ["-m", model, "-d", device, "--weights", weights, "--kv", "fp16", "--batch", "1"]
    graphs = _estimate(*base, "--engine", "vllm")
    eager = _estimate(*base, "--engine", "vllm-eager")
    assert eager["engine"] == "vllm-eager"
    extra_ms = float(eager["ms_per_token"]) - float(graphs["ms_per_token"])  # type: ignore[arg-type]
    assert extra_ms == pytest.approx(blocks * 0.339, rel=1e-6)
    assert float(eager["tokens_per_s"]) < float(graphs["tokens_per_s"])  # type: ignore[arg-type]


def test_the_launch_time_does_not_shrink_with_tensor_parallelism() -> None:
    """Each device of a tensor-parallel group launches every block's kernels: at tp 2 the
    eager step is still the graph step plus 32 x 339 us."""
    base = ["-m", "llama-3.1-8b", "-d", "h100-sxm", "--weights", "bf16", "--kv", "bf16"]
    base += ["--batch", "1", "--tp", "2"]
    graphs = _estimate(*base, "--engine", "vllm")
    eager = _estimate(*base, "--engine", "vllm-eager")
    extra_ms = float(eager["ms_per_token"]) - float(graphs["ms_per_token"])  # type: ignore[arg-type]
    assert extra_ms == pytest.approx(32 * 0.339, rel=1e-6)


def test_a_problem_file_naming_the_engine_is_planned_slower_and_verified(tmp_path: Path) -> None:
    """problems/two-sparks.yaml with `engine: vllm-eager`: the plan runs at the eager speed
    (80 blocks x 339 us = 27.1 ms more per token than under CUDA graphs), its launch line says
    --enforce-eager, and the verifier, which recomputes every figure, passes it."""
    cat = load_catalog()
    doc = yaml.safe_load((ROOT / "problems" / "two-sparks.yaml").read_text(encoding="utf-8"))
    ms = {}
    for engine in ("vllm", "vllm-eager"):
        doc["workloads"][0]["engine"] = engine
        path = tmp_path / f"{engine}.yaml"
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        prob = load_problem(path)
        plan = solve_problem(prob, time_limit=30)
        assert plan.status == "OPTIMAL"
        verify(plan, prob, cat)
        wp = plan.workloads[0]
        assert wp.engine == engine and wp.ms_per_token is not None and wp.recipe is not None
        ms[engine] = wp.ms_per_token
        assert ("--enforce-eager" in wp.recipe.command) == (engine == "vllm-eager")
    assert ms["vllm-eager"] - ms["vllm"] == pytest.approx(80 * 0.339, rel=0.02)


def test_the_verifier_recomputes_a_graph_plan_relabelled_eager(tmp_path: Path) -> None:
    """The CUDA-graph plan of two-sparks, its engine renamed vllm-eager (problem, plan and
    launch line) but its figures kept: the verifier, timing the step itself, finds each
    step 80 x 339 us = 27.12 ms longer than stated."""
    cat = load_catalog()
    doc = yaml.safe_load((ROOT / "problems" / "two-sparks.yaml").read_text(encoding="utf-8"))
    doc["workloads"][0]["engine"] = "vllm"
    path = tmp_path / "graphs.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    prob = load_problem(path)
    data = json.loads(dumps_plan(plan_document(solve_problem(prob, time_limit=30), prob, cat)))
    data["problem_document"]["workloads"][0]["engine"] = "vllm-eager"
    w = data["workloads"][0]
    w["engine"] = w["recipe"]["engine"] = "vllm-eager"
    w["recipe"]["command"] = launch_command(
        "vllm-eager", {}, [("dgx-spark", 2, 80)], 1, w["token_budget"], "bf16", 4096, 2
    )
    stated = w["stages"][0]["seconds_per_step"]
    problem = Problem.model_validate(data["problem_document"])
    fresh = plan_document(plan_from_data(data, "relabelled").plan, problem, cat)
    fresh["gap"], fresh["summary"] = data["gap"], data["summary"]
    found = plan_failures(plan_from_data(json.loads(dumps_plan(fresh)), "relabelled"), cat)
    step = [f for f in found if f.startswith("`workloads.0.stages.0.seconds_per_step`")]
    assert step, found
    recomputed = float(step[0].split("recomputed ")[1].split()[0])
    assert recomputed - stated == pytest.approx(80 * 339e-6, rel=1e-6)
    assert not any("command" in f for f in found), found  # the relabelled launch line is right


def test_an_unsupported_format_under_eager_is_refused() -> None:
    """vllm-eager runs what vLLM runs on NVIDIA only: no AMD row, so an MI300X is refused."""
    r = CliRunner().invoke(
        app, ["estimate", "-m", "llama-3.1-8b", "-d", "mi300x", "--engine", "vllm-eager"]
    )
    assert r.exit_code == 2 and "vllm-eager" in r.output


def test_the_launch_line_asks_for_eager_mode() -> None:
    line = launch_command("vllm-eager", {}, [("dgx-spark", 1, 36)], 1, 257, "fp8", 4096)
    assert line.startswith("vllm serve MODEL") and "--enforce-eager" in line
    assert "--kv-cache-dtype fp8" in line
    assert "--enforce-eager" not in launch_command(
        "vllm", {}, [("dgx-spark", 1, 36)], 1, 257, "fp8", 4096
    )


def _combos(engine: str) -> set[tuple[str, str, str]]:
    """(architecture, weight format, KV format) an engine's non-experimental CUDA rows list."""
    return {
        (a, w, k)
        for row in load_catalog().support
        if row.engine == engine and row.backend == "cuda" and not row.experimental
        for a in row.architectures
        for w in row.weights
        for k in row.kv
    }


def test_eager_runs_every_format_vllm_runs_on_nvidia() -> None:
    """--enforce-eager changes how kernels are launched, not which: vllm-eager's CUDA rows list
    what vLLM's list (its MXFP8 row on Blackwell was once left out, so an MXFP8 workload naming
    vllm-eager on a B200 was refused while vLLM ran it). vLLM's experimental GGUF row is left out:
    the planner refuses GGUF under vLLM either way."""
    assert _combos("vllm-eager") == _combos("vllm")
