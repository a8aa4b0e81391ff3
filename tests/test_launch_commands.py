"""Launch commands start the replica the plan's figures describe: a pipeline's layer counts per
stage reach the engine (vLLM's VLLM_PP_LAYER_PARTITION and SGLang's SGLANG_PP_LAYER_PARTITION;
without them both split the layers evenly, and a plan timed on [28, 52] would run on [40, 40])."""

from __future__ import annotations

from planner.plan.recipe import launch_command


def _cmd(engine: str, stages: list[tuple[str, int, int]]) -> str:
    return launch_command(engine, {}, stages, 64, 2048, "fp16", 4096)


def test_vllm_pipeline_names_its_layer_partition() -> None:
    cmd = _cmd("vllm", [("gaudi2", 4, 28), ("gaudi3", 4, 52)])
    assert cmd.startswith("VLLM_PP_LAYER_PARTITION=28,52 vllm serve MODEL")
    assert "--pipeline-parallel-size 2" in cmd


def test_sglang_pipeline_names_its_layer_partition() -> None:
    cmd = _cmd("sglang", [("h100-sxm", 2, 60), ("h100-sxm", 2, 20)])
    assert cmd.startswith("SGLANG_PP_LAYER_PARTITION=60,20 python -m sglang.launch_server")


def test_one_stage_needs_no_partition() -> None:
    assert "PARTITION" not in _cmd("vllm", [("h100-sxm", 8, 80)])
    assert "PARTITION" not in _cmd("sglang", [("h100-sxm", 8, 80)])


def test_tensorrt_llm_states_an_uneven_split() -> None:
    cmd = _cmd("tensorrt-llm", [("h100-sxm", 4, 50), ("h100-sxm", 4, 30)])
    assert "layers per stage 50,30" in cmd
