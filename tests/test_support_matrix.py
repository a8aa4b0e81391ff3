"""The software support matrix (catalog support.yaml): designs exist for a device, weight format
and engine exactly where a sourced row allows it; the cases a new user hit are answered right
(no GGUF on TPU or Gaudi, no NVFP4 before Blackwell, a P100 only under an engine and format that
run on it, no cross-vendor replica by default); every plan names its engine and the verifier
holds it to the matrix."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from planner.catalog import load_catalog
from planner.errors import CatalogError, InputError
from planner.estimator.designs import allowed_devices, inference_designs
from planner.estimator.formats import KV_BYTES, WEIGHT_FORMATS
from planner.estimator.support import gguf_row_refused
from planner.load import check_names
from planner.schema.problem import InferenceWorkload, Problem
from planner.schema.support import KV_FORMAT_IDS, WEIGHT_FORMAT_IDS
from planner.solve import solve_problem
from planner.verify_rules import rule_failures

CAT = load_catalog()


def problem(weights: str, kv: str, devices: list[str], **extra: Any) -> Problem:
    engine = extra.pop("engine", None)
    work: dict[str, Any] = {
        "name": "w",
        "model": "llama-3.2-1b",
        "weights": weights,
        "kv": kv,
        "context_tokens": 2048,
        "prompt_tokens": 256,
        "concurrency": 4,
        "min_tokens_per_s": 10,
    }
    if engine:
        work["engine"] = engine
    return Problem.model_validate(
        {
            "name": "matrix",
            "workloads": [work],
            "constraints": {"allowed_devices": devices, **extra},
            "horizon": {"procurement": ["buy", "on_demand", "reserved", "spot"]},
            "objective": {"goal": "min_cost"},
        }
    )


def test_format_names_agree_with_the_estimator() -> None:
    assert tuple(WEIGHT_FORMATS) == WEIGHT_FORMAT_IDS
    assert tuple(KV_BYTES) == KV_FORMAT_IDS


def test_every_device_names_a_known_architecture_of_its_vendor() -> None:
    for d in CAT.accelerators.values():
        arch = CAT.architecture_of(d)
        assert arch.vendor == d.vendor, d.id
        assert arch.generation > 0


def test_every_row_is_sourced_and_dated() -> None:
    for row in CAT.support:
        assert row.source in CAT.references
        assert CAT.references[row.source].url
        assert len(row.date) >= 7


def _one_device_per_architecture() -> list[str]:
    """A plannable device (a price and a host) of every architecture that has one."""
    seen: dict[str, str] = {}
    for d in allowed_devices(problem("fp16", "fp16", list(CAT.accelerators)), CAT):
        seen.setdefault(d.architecture, d.id)
    return sorted(seen.values())


def _row_allows(arch: str, weights: str, engine: str) -> str | None:
    """A KV format some row of `engine` pairs with `weights` on `arch`, or None. vLLM's
    experimental GGUF rows are listed but never planned (support.gguf_refusal): on H100 under
    vllm, q4_0's only row is such a row, so no design."""
    for row in CAT.support:
        if gguf_row_refused(CAT, row.engine, row.experimental, weights):
            continue
        if row.engine == engine and arch in row.architectures and weights in row.weights:
            return row.kv[0]
    return None


@pytest.mark.parametrize("device", _one_device_per_architecture())
def test_designs_exist_exactly_where_a_row_allows_them(device: str) -> None:
    """Every weight format x engine on one device of each architecture: a named engine gives
    designs if and only if a support row runs that format on the architecture."""
    arch = CAT.accelerator(device).architecture
    for weights in WEIGHT_FORMATS:
        for engine in CAT.engines:
            kv = _row_allows(arch, weights, engine)
            p = problem(weights, kv or "fp16", [device], engine=engine)
            devs = allowed_devices(p, CAT)
            w = p.workloads[0]
            assert isinstance(w, InferenceWorkload)
            designs = inference_designs(w, p, CAT, devs)
            assert bool(designs) == (kv is not None), (device, weights, engine)
            assert all(d.engine == engine for d in designs)


@pytest.mark.parametrize("device", ["tpu-v5e", "tpu-v6e", "gaudi2", "gaudi3", "trainium2"])
@pytest.mark.parametrize("weights", ["q4_k_m", "q4_0", "q8_0"])
def test_no_gguf_on_tpu_gaudi_or_neuron(device: str, weights: str) -> None:
    p = problem(weights, "fp16", [device])
    w = p.workloads[0]
    assert isinstance(w, InferenceWorkload)
    assert inference_designs(w, p, CAT, allowed_devices(p, CAT)) == []


@pytest.mark.parametrize(
    ("device", "runs"),
    [
        ("a100-80gb-sxm", False),
        ("h100-sxm", False),
        ("rtx-4090", False),
        ("mi300x", False),
        ("b200", True),
        ("rtx-5090", True),
    ],
)
def test_nvfp4_only_from_blackwell(device: str, runs: bool) -> None:
    p = problem("nvfp4", "fp8", [device])
    w = p.workloads[0]
    assert isinstance(w, InferenceWorkload)
    assert bool(inference_designs(w, p, CAT, allowed_devices(p, CAT))) == runs


def test_p100_only_with_an_engine_and_format_that_run_on_it() -> None:
    """Pascal: llama.cpp (CUDA or Vulkan) with 16-bit or GGUF files; no vLLM, SGLang or
    TensorRT-LLM, no bf16, no fp8 (vLLM docs: compute capability 7.5 and up)."""
    for weights, engine, runs in [
        ("fp16", None, True),
        ("q4_k_m", None, True),
        ("fp16", "vllm", False),
        ("fp16", "sglang", False),
        ("fp16", "tensorrt-llm", False),
        ("bf16", None, False),
        ("fp8", None, False),
        ("awq-int4", None, False),
    ]:
        p = problem(weights, "fp16", ["p100"], engine=engine)
        w = p.workloads[0]
        assert isinstance(w, InferenceWorkload)
        designs = inference_designs(w, p, CAT, allowed_devices(p, CAT))
        assert bool(designs) == runs, (weights, engine)
        assert all(d.engine == "llama.cpp" for d in designs)


def test_end_of_life_and_minimum_architecture_leave_devices_out() -> None:
    ids = {d.id for d in allowed_devices(problem("fp16", "fp16", ["p100", "t4", "a10g"]), CAT)}
    assert ids == {"p100", "t4", "a10g"}
    eol = problem("fp16", "fp16", ["p100", "t4", "a10g"], exclude_end_of_life=True)
    assert {d.id for d in allowed_devices(eol, CAT)} == {"t4", "a10g"}
    floor = problem("fp16", "fp16", ["p100", "t4", "a10g", "mi300x"], min_architecture=["ampere"])
    assert {d.id for d in allowed_devices(floor, CAT)} == {"a10g", "mi300x"}  # AMD not limited


def test_default_engine_is_the_first_supported_by_rank() -> None:
    cases = {
        ("h100-sxm", "fp8"): "vllm",
        ("gaudi3", "bf16"): "vllm-gaudi",
        ("tpu-v5e", "bf16"): "vllm-tpu",
        ("trainium1", "bf16"): "vllm-neuron",
        ("m4-max-128gb", "mlx-q4"): "mlx",
        ("rtx-3090", "q4_k_m"): "llama.cpp",  # vLLM's GGUF support is experimental
    }
    for (device, weights), engine in cases.items():
        p = problem(weights, "fp16" if weights != "bf16" else "bf16", [device])
        w = p.workloads[0]
        assert isinstance(w, InferenceWorkload)
        designs = inference_designs(w, p, CAT, allowed_devices(p, CAT))
        assert designs and {d.engine for d in designs} == {engine}, (device, weights)


def test_constraints_engines_limit_the_default() -> None:
    p = problem("fp16", "fp16", ["h100-sxm"], engines=["tensorrt-llm"])
    w = p.workloads[0]
    assert isinstance(w, InferenceWorkload)
    designs = inference_designs(w, p, CAT, allowed_devices(p, CAT))
    assert designs and {d.engine for d in designs} == {"tensorrt-llm"}


def test_unknown_engine_and_architecture_names_are_located_errors() -> None:
    with pytest.raises(InputError, match=r"unknown engine `vlm`.*vllm"):
        check_names(problem("fp16", "fp16", ["h100-sxm"], engine="vlm"), CAT)
    with pytest.raises(InputError, match="unknown architecture `amper`"):
        check_names(problem("fp16", "fp16", ["h100-sxm"], min_architecture=["amper"]), CAT)
    with pytest.raises(InputError, match=r"not among constraints\.engines"):
        check_names(problem("fp16", "fp16", ["h100-sxm"], engine="vllm", engines=["sglang"]), CAT)


def _mixed(**extra: Any) -> Problem:
    """Llama 3.1 70B in fp16 over an MI300X and a Gaudi 3 or an RTX 3090 and a Mac: two vendors'
    devices, each too small or too slow alone within the stage cap."""
    return problem("fp16", "fp16", extra.pop("devices"), **extra)


def test_no_cross_vendor_replica_by_default() -> None:
    for devices in (["mi300x", "gaudi3"], ["rtx-3090", "m4-max-128gb"], ["h100-sxm", "mi300x"]):
        p = _mixed(devices=devices)
        w = p.workloads[0]
        assert isinstance(w, InferenceWorkload)
        for d in inference_designs(w, p, CAT, allowed_devices(p, CAT), prune=False):
            vendors = {CAT.accelerator(x).vendor for x in d.devices}
            assert len(vendors) == 1, (devices, d.devices)


def test_one_tensor_parallel_size_per_replica_where_the_engine_takes_one() -> None:
    # vLLM (and the engines built on it) take one --tensor-parallel-size for every pipeline
    # stage (catalog support.yaml, vllm-distributed-serving): a Gaudi 2 + Gaudi 3 pipeline has
    # stages of one size, and a plan with stages of two sizes is refused.
    p = problem("fp16", "fp16", ["gaudi2", "gaudi3"], max_stages=8)
    w = p.workloads[0]
    assert isinstance(w, InferenceWorkload)
    designs = inference_designs(w, p, CAT, allowed_devices(p, CAT), prune=False)
    two = [d for d in designs if len(d.devices) == 2]
    assert two, "two-type Gaudi pipelines exist"
    assert all(len({s.tp for s in d.stages}) == 1 for d in designs)
    assert all(CAT.engines[e.id].uniform_tensor_parallel for e in CAT.engines.values())
    cards = problem("fp16", "fp16", ["l4", "a10g"])
    plan = solve_problem(cards, workers=1, seed=0)
    bad = copy.deepcopy(plan)
    stages = bad.workloads[0].stages
    if len(stages) == 1:  # a second stage of another size, the layers split between them
        stages = [stages[0], replace(stages[0], tp=stages[0].tp * 2)]
    else:
        stages = [stages[0], replace(stages[1], tp=stages[0].tp * 2), *stages[2:]]
    bad.workloads[0] = replace(bad.workloads[0], stages=stages)
    assert any("one size for every stage" in f for f in rule_failures(bad, cards, CAT))


def test_cross_stack_pipeline_only_under_an_engine_that_runs_it() -> None:
    p = _mixed(devices=["rtx-3090", "m4-max-128gb"], cross_stack_pipelines=True)
    w = p.workloads[0]
    assert isinstance(w, InferenceWorkload)
    designs = inference_designs(w, p, CAT, allowed_devices(p, CAT), prune=False)
    # fp16 by default runs vLLM on the card and MLX on the Mac: two engines, no shared replica.
    assert designs and all(len(d.devices) == 1 for d in designs)
    for engine in ("llama.cpp", "exo"):
        p = _mixed(devices=["rtx-3090", "m4-max-128gb"], cross_stack_pipelines=True, engine=engine)
        w = p.workloads[0]
        assert isinstance(w, InferenceWorkload)
        designs = inference_designs(w, p, CAT, allowed_devices(p, CAT), prune=False)
        assert any(len(d.devices) == 2 for d in designs), engine
        assert {d.engine for d in designs} == {engine}
    p = _mixed(devices=["rtx-3090", "m4-max-128gb"], engine="llama.cpp")  # not allowed: one stack
    w = p.workloads[0]
    assert isinstance(w, InferenceWorkload)
    designs = inference_designs(w, p, CAT, allowed_devices(p, CAT), prune=False)
    assert designs and all(len(d.devices) == 1 for d in designs)


def test_plan_names_its_engine_and_the_verifier_holds_it_to_the_matrix() -> None:
    p = problem("fp16", "fp16", ["l4", "a10g"])
    plan = solve_problem(p, workers=1, seed=0)
    assert plan.has_plan
    for wp in plan.workloads:
        assert wp.engine == "vllm"
        assert set(wp.backends.values()) == {"cuda"}
        assert wp.runtime == "vllm (cuda)"
    assert rule_failures(plan, p, CAT) == []
    bad = copy.deepcopy(plan)
    bad.workloads[0] = replace(bad.workloads[0], engine="vllm-tpu")
    assert any("workloads.engine" in f for f in rule_failures(bad, p, CAT))
    stacked = copy.deepcopy(plan)
    stacked.workloads[0] = replace(
        stacked.workloads[0], backends={d: "vulkan" for d in stacked.workloads[0].backends}
    )
    assert any("workloads.engine" in f for f in rule_failures(stacked, p, CAT))


def test_catalog_refuses_a_device_of_an_unknown_architecture(tmp_path: Any) -> None:
    from planner.catalog import _overlay

    (tmp_path / "accelerators.yaml").write_text(
        "accelerators:\n"
        + "\n".join(
            "  " + line for line in _device_yaml(CAT.accelerator("l4"), "ampere-next").splitlines()
        )
        + "\n"
    )
    with pytest.raises(CatalogError, match="unknown architecture `ampere-next`"):
        _overlay(CAT, tmp_path)


def _device_yaml(dev: Any, arch: str) -> str:
    import yaml

    data = dev.model_dump(mode="json", exclude_none=True)
    data["id"] = "l4-next"
    data["architecture"] = arch
    return str(yaml.safe_dump([data], sort_keys=False))


def test_the_committed_support_matrix_doc_is_current() -> None:
    from pathlib import Path

    from planner.catalog import default_catalog_dir
    from planner.report.support_doc import support_markdown

    doc = Path(__file__).resolve().parent.parent / "docs" / "support-matrix.md"
    want = support_markdown(load_catalog(default_catalog_dir()))
    assert doc.read_text() == want, (
        "docs/support-matrix.md is stale: run "
        "`python -m planner.report.support_doc > docs/support-matrix.md`"
    )


def test_every_serving_replica_carries_its_recipe_and_the_verifier_checks_it() -> None:
    p = problem("q4_k_m", "q8_0", ["rtx-3090"], engine="llama.cpp")
    plan = solve_problem(p, workers=1, seed=0)
    assert plan.has_plan
    for wp in plan.workloads:
        r = wp.recipe
        assert r is not None and r.engine == "llama.cpp"
        assert r.max_sequences == wp.batch * len(wp.stages)
        assert r.token_budget == wp.token_budget
        assert "--cache-type-k q8_0" in r.command and f"--parallel {r.max_sequences}" in r.command
    assert rule_failures(plan, p, CAT) == []
    wp = plan.workloads[0]
    assert wp.recipe is not None
    bad = replace(wp, recipe=replace(wp.recipe, max_sequences=wp.recipe.max_sequences + 1))
    plan.workloads[0] = bad
    assert any("recipe.max_sequences" in f for f in rule_failures(plan, p, CAT))
