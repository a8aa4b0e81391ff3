"""llama.cpp's tensor parallelism as `--split-mode tensor` runs it (support.tensor_parallel_refusal).

Sources (planner/catalog_data/support.yaml references):
- llama.cpp PR #19378 (2026-02): `-sm tensor`, a meta backend over several devices; only the
  CUDA backend has the extensions that make it faster than the layer split;
- docs/multi-gpu.md (PR #22729, 2026-05): `row` deprecated, superseded by `tensor`; one split
  mode for every device of a run;
- src/llama-arch.cpp, llm_arch_supports_sm_tensor: the refused architectures, among them every
  one with multi-head latent attention (deepseek2, which loads Kimi K2; glm-dsa, GLM-5) and mpt;
- PR #23792 (merged 2026-05-27): quantized KV caches with `-sm tensor`.
"""

from __future__ import annotations

from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.estimator.designs import allowed_devices, inference_designs
from planner.estimator.support import tensor_parallel_refusal
from planner.schema.problem import InferenceWorkload, Problem
from planner.solve import solve_problem
from planner.verify_rules import rule_failures


def test_the_refusals_follow_the_engine_source() -> None:
    cat = load_catalog()
    dense = cat.model("llama-3.1-70b")
    assert tensor_parallel_refusal(cat, "llama.cpp", "cuda", dense) is None
    assert tensor_parallel_refusal(cat, "llama.cpp", "rocm", dense) is None
    assert tensor_parallel_refusal(cat, "llama.cpp", "sycl", dense) is None  # PR #24152
    for backend in ("vulkan", "cpu", "metal"):  # Vulkan crashes (#22197); CPU devices left out
        why = tensor_parallel_refusal(cat, "llama.cpp", backend, dense)
        assert why is not None and f"not on {backend}" in why
    for mla in ("deepseek-v3", "deepseek-v2-lite", "kimi-k2", "glm-5"):
        why = tensor_parallel_refusal(cat, "llama.cpp", "cuda", cat.model(mla))
        assert why is not None and "multi-head latent attention" in why
        assert "llama-cpp-arch-sm-tensor" in why
    why = tensor_parallel_refusal(cat, "llama.cpp", "cuda", cat.model("mpt-7b"))
    assert why is not None and "mpt architecture" in why
    # Builds before -sm tensor had the row split only, which no design is charged for.
    for old in ("llama.cpp-2024", "llama.cpp-2025"):
        assert tensor_parallel_refusal(cat, old, "cuda", dense) is not None
    # Other engines keep their tensor parallelism everywhere they run.
    assert tensor_parallel_refusal(cat, "vllm", "cuda", cat.model("deepseek-v3")) is None


def _problem(model: str, weights: str, kv: str, devices: list[str]) -> Problem:
    return Problem.model_validate(
        {
            "name": "llamacpp-tensor",
            "workloads": [
                {
                    "name": "w",
                    "model": model,
                    "weights": weights,
                    "kv": kv,
                    "context_tokens": 4096,
                    "prompt_tokens": 512,
                    "output_tokens": 256,
                    "concurrency": "unbounded",
                    "engine": "llama.cpp",
                }
            ],
            "constraints": {
                "allowed_devices": devices,
                "max_stages": 4,
                "tensor_parallel_over_pcie": True,
            },
            "market": {"conditions": ["new", "refurbished", "used"]},
        }
    )


def _designs(prob: Problem) -> list[tuple[int, ...]]:
    cat = load_catalog()
    w = prob.workloads[0]
    assert isinstance(w, InferenceWorkload)
    ds = inference_designs(w, prob, cat, allowed_devices(prob, cat), prune=False)
    assert ds
    return [tuple(s.tp for s in d.stages) for d in ds]


def test_a_dense_model_on_cuda_gets_groups_of_one_stage_with_a_quantized_kv_cache() -> None:
    """Llama 3.1 70B in Q4_K_M with a q8_0 KV cache on RTX 4090s (CUDA): tensor-parallel
    designs exist (a quantized cache runs with -sm tensor since PR #23792), and each is a
    replica of one stage; pipelines keep one device per stage."""
    tps = _designs(_problem("llama-3.1-70b", "q4_k_m", "q8_0", ["rtx-4090"]))
    grouped = [t for t in tps if max(t) > 1]
    assert grouped and all(len(t) == 1 for t in grouped)
    assert any(len(t) > 1 for t in tps)  # the layer split is still planned


def test_mla_and_mpt_models_get_the_layer_split_only() -> None:
    for model in ("deepseek-v2-lite", "mpt-13b"):
        tps = _designs(_problem(model, "q4_k_m", "fp16", ["rtx-4090"]))
        assert all(max(t) == 1 for t in tps), model


def test_estimate_refuses_a_group_the_engine_does_not_run() -> None:
    args = ["-m", "deepseek-v2-lite", "-d", "rtx-4090", "--weights", "q4_k_m", "--kv", "fp16"]
    r = CliRunner().invoke(app, ["estimate", *args, "--engine", "llama.cpp", "--tp", "2"])
    assert r.exit_code != 0
    assert "multi-head latent attention" in r.output


def test_a_solved_group_launches_sm_tensor_and_verify_checks_the_backend() -> None:
    """Llama 3.1 70B Q4_K_M at 40 ms per token on RTX 4090s over PCIe: the plan is one stage
    of a tensor-parallel group, launched with -sm tensor and flash attention (PR #19378; the
    deprecated -sm row of docs/multi-gpu.md no longer). The verifier passes it, and fails the
    same plan under a catalog whose llama.cpp runs its groups on ROCm only."""
    prob = _problem("llama-3.1-70b", "q4_k_m", "q8_0", ["rtx-4090"])
    w = prob.workloads[0].model_copy(update={"min_tokens_per_s": 100, "max_ms_per_token": 40})
    prob = prob.model_copy(update={"workloads": [w]})
    plan = solve_problem(prob, time_limit=30)
    assert plan.status == "OPTIMAL"
    wp = plan.workloads[0]
    assert len(wp.stages) == 1 and wp.stages[0].tp > 1
    assert wp.recipe is not None and "--split-mode tensor -fa on" in wp.recipe.command
    cat = load_catalog()
    assert rule_failures(plan, prob, cat) == []
    engine = cat.engines["llama.cpp"]
    cat.engines["llama.cpp"] = engine.model_copy(update={"tensor_parallel_backends": ["rocm"]})
    try:
        failures = rule_failures(plan, prob, cat)
    finally:
        cat.engines["llama.cpp"] = engine
    assert any("not on cuda" in f for f in failures)


def test_the_plan_says_why_an_mla_model_keeps_one_device_per_stage() -> None:
    """DeepSeek V2 Lite under llama.cpp on RTX 4090s: the plan's notes carry the refusal
    (llm_arch_supports_sm_tensor refuses deepseek2); Llama 3.1 8B's plan has no such note."""
    for model, refused in (("deepseek-v2-lite", True), ("llama-3.1-8b", False)):
        prob = _problem(model, "q4_k_m", "fp16", ["rtx-4090"])
        w = prob.workloads[0].model_copy(update={"min_tokens_per_s": 100})
        plan = solve_problem(prob.model_copy(update={"workloads": [w]}), time_limit=30)
        notes = [n for n in plan.notes if "runs no tensor-parallel group" in n]
        assert bool(notes) == refused, model
        assert all("multi-head latent attention" in n for n in notes)
