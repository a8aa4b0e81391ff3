"""MXFP8 and files mixed per tensor class: bits per weight from the formats' block layouts, a
model's weight bytes and the bytes a decode step reads by hand arithmetic, which engines run
them where, and a problem file that names a mix solved and verified."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.estimator.devices import _precision
from planner.estimator.formats import format_parts, weight_format
from planner.estimator.memory import block_weight_bytes, end_weight_bytes
from planner.estimator.perf import touched_weight_bits, weight_params_touched_per_layer
from planner.estimator.support import runtimes
from planner.load import load_problem
from planner.plan.io import dumps_plan, plan_document, plan_from_data
from planner.solve import solve_problem
from planner.verify_plan import plan_failures

CAT = load_catalog()
GLM5 = CAT.model("glm-5")

# GLM-5 by hand from its architecture (models.yaml glm-5: the GLM-5 report's table): hidden
# 6144, 64 heads, MLA with q_lora_rank 2048, kv_lora_rank 512, query/key heads of 192 + 64
# (rotary), value heads of 256; 3 dense blocks (FFN 12288) then 75 MoE blocks of 256 experts
# (FFN 2048), 8 routed and 1 shared per token; vocabulary 154,880, untied.
H, HEADS = 6144, 64
ATTN = (
    (H * 2048 + 2048 + 2048 * HEADS * (192 + 64))  # query: down, its norm, up
    + (H * (512 + 64) + 512 + 512 * HEADS * (192 + 256))  # latent KV + rotary key, norm, up
    + HEADS * 256 * H  # output
)  # 165,022,208
NORMS = 2 * H
DENSE_FFN = 3 * H * 12288
EXPERT = 3 * H * 2048  # 37,748,736
ROUTER = H * 256
ROUTED = 75 * 256 * EXPERT  # 724,775,731,200: every routed expert
REST = 3 * (ATTN + NORMS + DENSE_FFN) + 75 * (ATTN + NORMS + ROUTER + EXPERT)  # shared expert
ENDS = 2 * 154880 * H + H  # embedding, output head, final norm


def test_mxfp8_is_eight_bits_and_one_shared_exponent_per_32() -> None:
    # OCP MX Formats spec v1.0: 32 E4M3 elements share one 8-bit E8M0 scale.
    f = weight_format("mxfp8")
    assert f.bits_per_weight == 8 + 8 / 32 == 8.25
    assert f.block_scaled and f.expert_bits is None and f.least_bits == 8.25


def test_a_mix_takes_each_tensor_class_at_its_format() -> None:
    f = weight_format("mxfp4-experts+mlx-q8")
    assert f.expert_bits == 4 + 8 / 32  # MXFP4: 32 E2M1 values and one E8M0 scale
    assert f.bits_per_weight == f.embedding_bits == 8 + 32 / 64  # MLX affine 8-bit, group 64
    assert f.least_bits == 4.25
    assert f.compute == ("fp16", "bf16")  # MLX 8-bit runs no FP8 path
    assert weight_format("mlx-q8+mxfp4-experts") == weight_format("mlx-q8+mxfp4-experts")
    assert format_parts("mlx-q8+mxfp4-experts") == ("mxfp4", "mlx-q8")
    assert format_parts("mxfp8") == ("mxfp8",)


def test_glm5_weights_in_the_mixed_file_are_the_published_size() -> None:
    assert ATTN == 165_022_208 and ROUTED == 724_775_731_200
    f = weight_format("mxfp4-experts+mlx-q8")
    hand = REST * 8.5 / 8 + ROUTED * 4.25 / 8 + ENDS * 8.5 / 8  # 404.59e9 B
    planner = block_weight_bytes(GLM5, f) + sum(end_weight_bytes(GLM5, f))
    assert planner == pytest.approx(hand, rel=1e-12)
    # mlx-community/GLM-5.1-MXFP4-Q8 is "~378GB" (ml-explore/mlx issue 3402): 376.8 GiB here.
    assert planner / 2**30 == pytest.approx(378, rel=0.01)
    # The file in MLX 8-bit alone would be twice its size (in MXFP4 alone within 2 %: the
    # experts are 97.5 % of the weights; a token's reads tell the two apart, the next test).
    q8 = weight_format("mlx-q8")
    assert block_weight_bytes(GLM5, q8) + sum(end_weight_bytes(GLM5, q8)) > 1.9 * planner


def test_glm5_in_mxfp8_is_the_published_size() -> None:
    f = weight_format("mxfp8")
    hand = (REST + ROUTED) * 8.25 / 8 + ENDS * 16 / 8  # 768.25e9 B
    planner = block_weight_bytes(GLM5, f) + sum(end_weight_bytes(GLM5, f))
    assert planner == pytest.approx(hand, rel=1e-12)
    # exo issue 1468 (GLM-5-8bit-MXFP8 on Mac Studios): 767 GB of weights.
    assert planner / 1e9 == pytest.approx(767, rel=0.01)


def test_a_decode_step_reads_the_experts_it_routes_to_at_their_bits() -> None:
    """One token touches 8 routed experts per MoE block (and the rest of every block): its
    bits per weight read are those classes' average, not the file's."""
    f = weight_format("mxfp4-experts+mlx-q8")
    routed = 75 * 8 * EXPERT / 78
    rest = (3 * (ATTN + NORMS + DENSE_FFN) + 75 * (ATTN + NORMS + ROUTER + EXPERT)) / 78
    assert float(weight_params_touched_per_layer(GLM5, 1.0)) == pytest.approx(routed + rest)
    bits = float(touched_weight_bits(GLM5, f, 1.0))
    assert bits == pytest.approx((8.5 * rest + 4.25 * routed) / (rest + routed), rel=1e-12)
    # 22.6B routed weights at 4.25 bits and 16.5B others at 8.5: 6.04 bits a token, where the
    # file's own average (what one effective figure from its size would charge) is 4.35.
    assert bits == pytest.approx(6.04, abs=0.005)
    # A large batch touches every expert: the read tends to the file's own mix.
    whole = float(touched_weight_bits(GLM5, f, 1e6))
    assert whole == pytest.approx((8.5 * REST + 4.25 * ROUTED) / (REST + ROUTED), rel=1e-9)
    # A format of one class reads at its own bits; a dense model ignores the experts' bits.
    assert float(touched_weight_bits(GLM5, weight_format("mxfp8"), 1.0)) == 8.25
    dense = CAT.model("llama-3.1-8b")
    assert float(touched_weight_bits(dense, f, 1.0)) == 8.5


def _engines(device: str, weights: str) -> list[str]:
    return [r.engine for r in runtimes(CAT, CAT.accelerator(device), weights, "fp16")]


def test_mxfp8_runs_where_its_sources_say() -> None:
    # MLX's quantize modes (mlx-quantize) and exo's GLM-5 run (exo issue 1468) on Apple
    # silicon; vLLM's mxfp8 method (min capability 10.0), with or without CUDA graphs, and
    # TensorRT-LLM on Blackwell.
    assert set(_engines("m3-ultra-512gb", "mxfp8")) == {"mlx", "exo"}
    assert set(_engines("b200", "mxfp8")) == {"vllm", "vllm-eager", "tensorrt-llm"}
    assert _engines("h100-sxm", "mxfp8") == []
    # The block-scaled 8-bit path only where the tensor cores take MX operands.
    b200, spark = CAT.accelerator("b200"), CAT.accelerator("dgx-spark")
    assert _precision(b200, weight_format("mxfp8")) == "fp8"
    assert _precision(spark, weight_format("mxfp8")) == "fp16"


def test_a_mix_runs_where_an_engine_runs_both_of_its_formats() -> None:
    assert _engines("m3-ultra-256gb", "mxfp4-experts+mlx-q8") == ["mlx"]  # exo lists no MXFP4
    assert _engines("b200", "mxfp4-experts+mlx-q8") == []  # no CUDA engine runs MLX's format


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("mxfp4+mlx-q8", "ending in `-experts`"),
        ("mxfp4-experts+mlx-q8-experts", "ending in `-experts`"),
        ("mxfp4-experts+mlx-q8+fp8", "two catalog formats"),
        ("mxfp9-experts+mlx-q8", "did you mean `mxfp8`"),
        ("q4_k_m-experts+q8_0", "GGUF"),
        ("mxfp-8", "a mix such as"),
    ],
)
def test_a_badly_written_mix_names_the_fix(name: str, says: str) -> None:
    with pytest.raises(InputError) as e:
        weight_format(name)
    assert says in str(e.value)


def test_a_problem_file_names_a_mix_and_the_plan_verifies(tmp_path: Path) -> None:
    """GLM-5.1 in mlx-community's MXFP4-Q8 file on two 256 GB Mac Studios: 404.6 GB of weights
    fit only over both; solve plans it under MLX and the verifier recomputes every figure."""
    path = tmp_path / "glm51.yaml"
    path.write_text(
        "name: glm51-two-macs\n"
        "workloads:\n"
        "  - {name: chat, kind: inference, model: glm-5, weights: mxfp4-experts+mlx-q8,\n"
        "     context_tokens: 4096, prompt_tokens: 512, output_tokens: 256, concurrency: 1}\n"
        "constraints:\n"
        "  allowed_devices: [m3-ultra-256gb]\n"
        "  inventory: [{device: m3-ultra-256gb, count: 2}]\n"
        "  capex_usd: 0\n"
        "  network: thunderbolt5\n"
        "objective: {goal: max_throughput}\n",
        encoding="utf-8",
    )
    problem = load_problem(path)
    plan = solve_problem(problem, workers=1, seed=0, time_limit=30)
    assert plan.status == "OPTIMAL", plan.notes
    (wp,) = plan.workloads
    assert wp.engine == "mlx" and sum(s.tp for s in wp.stages) == 2
    doc = json.loads(dumps_plan(plan_document(plan, problem, CAT)))
    assert plan_failures(plan_from_data(doc, "glm51"), CAT) == []
    # A mix no engine on the devices runs both halves of is infeasible, saying why.
    bad = path.read_text(encoding="utf-8").replace("mlx-q8,", "gptq-int4,")
    path.write_text(bad, encoding="utf-8")
    none = solve_problem(load_problem(path), workers=1, seed=0, time_limit=30)
    assert none.status == "INFEASIBLE"
    assert any("mxfp4-experts+gptq-int4" in n for n in none.notes)


def test_a_measured_figure_in_a_mix_is_held_to_the_weight_read_floor(tmp_path: Path) -> None:
    """`estimate --measured` refuses a decode figure faster than reading the active weights at
    the device's peak bandwidth allows. A row in a mixed file was skipped (its format looked up
    among the catalog formats alone), so 1,000,000 tokens/s passed; it is held to the floor at
    the mix's fewest bits (the MXFP4 experts' 4.25), which keeps the floor generous."""
    from planner.estimator.architecture import block_groups
    from planner.estimator.measured_rows import check_speeds
    from planner.schema.measurements import read_measurements

    m = CAT.model("gpt-oss-120b")
    row = (
        "model: gpt-oss-120b, device: m3-ultra-512gb, weights: mxfp4-experts+mlx-q8, "
        "metric: decode_tokens_per_s, batch: 1"
    )
    path = tmp_path / "measured.yaml"
    path.write_text(f"measurements:\n  - {{{row}, value: 1.0e6}}\n")
    with pytest.raises(InputError, match="faster than reading its active weights") as err:
        check_speeds(*read_measurements(str(path)), m, CAT)
    # The floor's bytes: the blocks' active weights at 4.25 bits (MXFP4: 4 + 8/32).
    read_gb = sum(g.count * g.active_params for g in block_groups(m)) * 4.25 / 8 / 1e9
    assert f"({read_gb:.3g} GB in mxfp4-experts+mlx-q8" in str(err.value)
    # A figure under the floor passes.
    path.write_text(f"measurements:\n  - {{{row}, value: 50}}\n")
    check_speeds(*read_measurements(str(path)), m, CAT)


def test_a_mix_on_a_dense_model_is_refused_naming_its_one_format(tmp_path: Path) -> None:
    """A dense model has no routed experts to give a format of their own: the mix was planned
    as its other half, silently. The problem file now gets an error at the workload's weights
    naming the format to write."""
    path = tmp_path / "dense.yaml"
    path.write_text(
        "name: dense-mix\n"
        "workloads:\n"
        "  - {name: chat, kind: inference, model: llama-3.1-8b, weights: mxfp4-experts+mlx-q8,\n"
        "     context_tokens: 4096, prompt_tokens: 512, output_tokens: 256, concurrency: 1}\n"
        "constraints: {allowed_devices: [m3-ultra-256gb], capex_usd: 20000}\n"
        "objective: {goal: max_throughput}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as e:
        load_problem(path)
    text = str(e.value)
    assert str(path) in text and "workloads[0].weights" in text
    assert "llama-3.1-8b has no routed experts" in text and "write its one format, `mlx-q8`" in text


def test_estimate_refuses_a_mix_on_a_dense_model_too() -> None:
    """`planner estimate --weights` is held to the same rule as a problem file (exit 2, the
    flag and the format to write); a MoE model takes the mix."""
    from typer.testing import CliRunner

    from planner.cli import app

    args = ["estimate", "-d", "m3-ultra-256gb", "--weights", "mxfp4-experts+mlx-q8"]
    r = CliRunner().invoke(app, [*args, "-m", "llama-3.1-8b"])
    assert r.exit_code == 2, r.output
    assert "--weights mxfp4-experts+mlx-q8" in r.output and "`mlx-q8`" in r.output
    assert CliRunner().invoke(app, [*args, "-m", "gpt-oss-120b"]).exit_code == 0
