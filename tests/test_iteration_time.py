"""A replica's iteration table (planner.estimator.replica.IterationTime): the single stream's
figure (`alone`) is made only when read, and reads the same stages as the table."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.estimator.replica import IterationTime, StageSpec, single_stream_seconds


def _table(stages: int) -> IterationTime:
    cat = load_catalog()
    m = cat.model("llama-3.1-8b")
    per = m.num_layers // stages
    split = [per] * (stages - 1) + [m.num_layers - per * (stages - 1)]
    return IterationTime(
        m, "fp16", "fp16", batch=8, context=2048, prompt=1024, output=256,
        stages=[StageSpec(cat.accelerator("h100-sxm"), 1, n) for n in split],
        link=cat.link("eth-100g"),
    )  # fmt: skip


def test_single_stream_is_made_only_when_read() -> None:
    it = _table(1)
    assert "alone" not in vars(it)  # a rate search never reads it
    first = single_stream_seconds(it)
    assert "alone" in vars(it)
    assert single_stream_seconds(it) == first


def test_one_stage_single_stream_is_its_iteration_at_one_sequence() -> None:
    # One stage, no hop: one sequence alone takes the stage's layers, its step work and the
    # output head, which is the table's iteration at one decoding sequence (S = 1 x slowest).
    it = _table(1)
    assert single_stream_seconds(it) == pytest.approx(it(1.0, 0.0), rel=1e-12)


def test_a_pipeline_single_stream_sums_its_stages() -> None:
    # Two equal stages: one sequence passes both in turn (each its layers, step work and hop)
    # and the output head once, 2 x (stage + hop) + head; the round of the table charges every
    # stage the head, 2 x (stage + hop + head). So the single stream is more than half the
    # round and at most the round.
    it = _table(2)
    one = single_stream_seconds(it)
    assert it(1.0, 0.0) / 2 < one <= it(1.0, 0.0)
