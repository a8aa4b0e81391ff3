"""GGUF weights under an engine that does not run llama.cpp's kernels are refused, not priced:
vLLM loads GGUF through kernels of its own (vllm/model_executor/layers/quantization/gguf.py,
`_fused_mul_mat_gguf`; csrc/quantization/gguf/mmq.cuh is copied from llama.cpp build b2899,
from before MMQ ran on tensor cores) that its documentation calls "highly experimental and
under-optimized" and that no measurement here times. Before, such a workload was planned on
llama.cpp's prompt kernels and serial prefill, which vLLM does not run."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.estimator.support import gguf_refusal

CAT = load_catalog()

PROBLEM = """name: gguf-under-{engine}
workloads:
  - name: chat
    kind: inference
    model: llama-3.1-8b
    engine: {engine}
    weights: {weights}
    kv: fp16
    context_tokens: 4096
    prompt_tokens: 512
    output_tokens: 256
    min_tokens_per_s: 500
    concurrency: 16
constraints:
  allowed_devices: [rtx-4090]
objective:
  goal: min_cost
"""


def _solve(tmp_path: Path, engine: str, weights: str) -> tuple[int, str]:
    path = tmp_path / "p.yaml"
    path.write_text(PROBLEM.format(engine=engine, weights=weights), encoding="utf-8")
    r = CliRunner().invoke(app, ["solve", str(path), "--no-timings"])
    return r.exit_code, r.output


def test_gguf_under_vllm_is_refused_where_the_weights_are_named(tmp_path: Path) -> None:
    code, out = _solve(tmp_path, "vllm", "q4_k_m")
    assert code == 2, out
    flat = " ".join(out.split())
    # The file and line of `weights`, the workload, and the fix: llama.cpp, or native weights.
    assert "p.yaml:7:" in flat and "workloads[0].weights" in flat and "`chat`" in flat
    assert "engine: llama.cpp" in flat and "awq-int4" in flat
    assert "q4_k_m" not in flat.split("runs natively")[1]  # no GGUF format among the fixes


def test_the_fixes_it_names_are_planned(tmp_path: Path) -> None:
    for engine, weights in (("llama.cpp", "q4_k_m"), ("vllm", "awq-int4")):
        code, out = _solve(tmp_path, engine, weights)
        assert code == 0, out


@pytest.mark.parametrize("weights", ["q4_0", "q8_0", "q2_k", "ud-q2_k_xl"])
def test_every_gguf_format_under_every_engine(weights: str) -> None:
    # Refused exactly where the engine is not on llama.cpp's kernels and lists the format as
    # experimental only: vLLM's GGUF rows. distributed-llama's own Q40 (q4_0), a plain row
    # measured on that engine (benchmarks/pooled), stays planned.
    for e in CAT.engines.values():
        rows = [r for r in CAT.support if r.engine == e.id and weights in r.weights]
        experimental = bool(rows) and all(r.experimental for r in rows)
        refused = gguf_refusal(CAT, e.id, weights)
        assert (refused is not None) == (e.kernels == "serving-grid" and experimental), e.id
    assert gguf_refusal(CAT, None, weights) is None  # no engine named: experimental rows unused
    assert gguf_refusal(CAT, "distributed-llama", "q4_0") is None
    assert (gguf_refusal(CAT, "vllm", weights) is not None) == (weights != "ud-q2_k_xl")


def test_an_estimate_refuses_it_too() -> None:
    r = CliRunner().invoke(
        app, ["estimate", "-m", "llama-3.1-8b", "-d", "rtx-4090", "--weights", "q4_k_m",
              "--engine", "vllm"],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "--engine vllm" in r.output and "llama.cpp" in r.output


def test_every_gguf_format_stops_decode_for_its_prompts() -> None:
    """A llama.cpp-style engine processes a prompt with decode stopped (docs/serving.md), for
    every GGUF block format alike: Q2_K and UD-Q2_K_XL cite the llama-bench files their bits
    come from, not llama.cpp's README, and were once served as if batched with decode."""
    from planner.estimator.formats import GGUF_FORMATS, WEIGHT_FORMATS
    from planner.estimator.serving import serial_engine

    for name, fmt in WEIGHT_FORMATS.items():
        assert serial_engine(fmt) == (name in GGUF_FORMATS), name


def test_a_plain_row_elsewhere_does_not_open_the_experimental_rows(tmp_path: Path) -> None:
    # A user catalog states vLLM's Q8_0 plainly on Hopper. The RTX 3090's (Ampere) only vLLM
    # Q8_0 row is still the shipped experimental one, so the 3090 stays refused under vLLM while
    # the H100 is estimated; before, any plain row anywhere lifted the refusal on every device
    # and the 3090 was priced on kernels no measurement times (planner estimate gave it
    # 86.6 tokens/s).
    from planner.catalog import use_overlays
    from planner.schema.problem import InferenceWorkload
    from planner.verify_rules import _supported

    d = tmp_path / "cat"
    d.mkdir()
    row = "{engine: vllm, backend: cuda, architectures: [hopper], weights: [q8_0], kv: [fp16], "
    row += "source: vllm-gguf, date: 2026-01}"
    (d / "support.yaml").write_text(f"support:\n  - {row}\n", encoding="utf-8")
    base = ["--catalog", str(d), "estimate", "-m", "llama-3.1-8b", "--weights", "q8_0"]
    try:
        r = CliRunner().invoke(app, [*base, "-d", "rtx-3090", "--engine", "vllm"])
        assert r.exit_code == 2, r.output
        assert "does not run q8_0" in " ".join(r.output.split())
        r = CliRunner().invoke(app, [*base, "-d", "h100-sxm", "--engine", "vllm"])
        assert r.exit_code == 0, r.output
        cat = load_catalog()
        w = InferenceWorkload.model_validate(
            {"name": "chat", "kind": "inference", "model": "llama-3.1-8b", "engine": "vllm",
             "weights": "q8_0", "kv": "fp16", "context_tokens": 4096, "prompt_tokens": 512,
             "output_tokens": 256, "concurrency": 1}
        )  # fmt: skip
        # The verifier's own check of a plan's stage agrees: no usable row on the 3090.
        assert _supported(cat, "vllm", "cuda", "h100-sxm", w)
        assert not _supported(cat, "vllm", "cuda", "rtx-3090", w)
    finally:
        use_overlays([])
