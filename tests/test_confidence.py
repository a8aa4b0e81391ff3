"""Confidence on every design: a label from the calibration rows of its devices, engine and batch
(measured, interpolated, extrapolated, prior), an error band from the estimator's residuals on
them, in the plan's JSON, table and memo; min_confidence keeps only designs that are backed."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from planner.catalog import load_catalog
from planner.estimator.confidence import design_confidence, residuals
from planner.plan.types import Plan
from planner.schema.problem import Problem
from planner.solve import solve_problem

CAT = load_catalog()
ROOT = Path(__file__).resolve().parent.parent


def label(device: str, engine: str, batch: int) -> str:
    return design_confidence(CAT, [CAT.accelerator(device)], engine, batch).label


def test_labels_follow_the_rows() -> None:
    # calibration.yaml: MI300X under vLLM at batches 1, 2, 4, 8, 16, 32, 64, 128 and 256 (OCI's
    # MI300X vLLM latency table).
    assert label("mi300x", "vllm", 64) == "measured"
    assert label("mi300x", "vllm", 32) == "measured"
    assert label("mi300x", "vllm", 48) == "interpolated"
    assert label("mi300x", "vllm", 512) == "extrapolated"
    assert label("mi300x", "sglang", 64) == "extrapolated"  # rows, but not under this engine
    assert label("gaudi3", "vllm-gaudi", 64) == "prior"  # no row for Gaudi 3
    assert label("tpu-v5e", "vllm-tpu", 8) == "prior"


def test_the_band_is_the_residual_of_the_measured_rows() -> None:
    # MI300X under vLLM at batch 64: OCI's Llama 3.1 405B row and ROCm/vllm's dev-docker rows
    # (Llama 3.1 70B and 405B at 128 and 2048 prompt tokens), all estimated above the measured
    # figure (the estimate is exp(residual) times it).
    rows = sorted(
        r.residual
        for r in residuals()
        if r.device == "mi300x" and r.engine == "vllm" and r.batch == 64
    )
    c = design_confidence(CAT, [CAT.accelerator("mi300x")], "vllm", 64)
    assert len(rows) == 5 and rows[0] > 0
    # The band's low side is the rows' 90th percentile, interpolated between the 4th and 5th
    # of the five sorted residuals at 0.9 x (5 - 1) = 3.6.
    q90 = rows[3] + (rows[4] - rows[3]) * 0.6
    assert c.low_pct == (1 - math.exp(-q90)) * 100
    assert c.high_pct == 0.0 and c.rows == 5


def test_a_design_takes_its_weakest_device() -> None:
    two = design_confidence(CAT, [CAT.accelerator("mi300x"), CAT.accelerator("gaudi3")], "vllm", 64)
    assert two.label == "prior"


def problem(**extra: Any) -> Problem:
    return Problem.model_validate(
        {
            "name": "backed",
            "workloads": [
                {
                    "name": "chat",
                    "model": "llama-3.1-8b",
                    "weights": "bf16",
                    "kv": "bf16",
                    "concurrency": 64,
                    "min_tokens_per_s": 500,
                }
            ],
            "constraints": extra,
            "objective": {"goal": "min_cost"},
        }
    )


def _labels(plan: Plan) -> set[str]:
    return {w.confidence.label for w in plan.workloads if w.confidence is not None}


def test_every_plan_states_confidence_and_min_confidence_holds() -> None:
    free = solve_problem(problem(), workers=1, seed=0)
    assert free.has_plan and all(w.confidence is not None for w in free.workloads)
    backed = solve_problem(problem(min_confidence="interpolated"), workers=1, seed=0)
    if backed.has_plan:
        assert _labels(backed) <= {"measured", "interpolated"}
        assert backed.tco_usd >= free.tco_usd - 1e-6


def test_the_committed_calibration_residuals_are_current() -> None:
    sys.path.insert(0, str(ROOT / "calibration"))
    try:
        import confidence as gen  # calibration/confidence.py

        text = gen.document()
    finally:
        sys.path.remove(str(ROOT / "calibration"))
    committed = (ROOT / "planner" / "catalog_data" / "calibration.yaml").read_text()
    assert committed == text, "run `python calibration/confidence.py --write`"
