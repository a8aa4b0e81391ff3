"""Training MFU per GPU generation (catalog efficiency.yaml `architectures`, fitted by
calibration/fit.py): an H100 trains about what published runs measure over an A100, and no
datacenter part is credited with the class's average over older and newer parts."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.estimator.devices import device_table
from planner.estimator.efficiency import EfficiencyFile, efficiency_for, load_efficiency
from planner.estimator.formats import weight_format
from planner.estimator.perf import training_tokens_per_second


def _tokens_per_s(device: str, model: str = "llama-2-7b", seq: int = 2048) -> float:
    cat = load_catalog()
    table = device_table([cat.accelerator(device)])
    return float(
        training_tokens_per_second(
            cat.model(model), table, seq_len=seq, precision_fmt=weight_format("bf16")
        )[0]
    )


def test_an_h100_trains_what_runs_measure_over_an_a100() -> None:
    """llm-foundry's published throughput table (calibration/measurements.yaml, source
    llm-foundry-benchmarks): Llama 2 7B in BF16 at 2,048 tokens, 10,643 tokens/s per H100 SXM
    and 4,641 per A100 80GB SXM, 2.29x. With one training MFU for the class the planner said
    3.2x (the ratio of their dense BF16 peaks, 989 / 312 TFLOP/s)."""
    ratio = _tokens_per_s("h100-sxm") / _tokens_per_s("a100-80gb-sxm")
    assert ratio == pytest.approx(10_643 / 4_641, rel=0.15)
    assert ratio < 989 / 312 * 0.85


def test_every_datacenter_generation_has_a_measured_or_borrowed_figure() -> None:
    """A datacenter part of a generation no run measured takes a measured generation's MFU
    (the nearest release), never the class average: MI300X (CDNA 3) does not out-train an H100
    per FLOP of its peak on a prior."""
    cat = load_catalog()
    table = load_efficiency()
    archs = {d.architecture for d in cat.accelerators.values() if d.device_class == "datacenter"}
    assert archs <= {k.split("/", 1)[1] for k in table.architectures if k.startswith("datacenter/")}
    mfu = {
        d: efficiency_for(d, "datacenter", architecture=cat.accelerator(d).architecture)
        for d in ("h100-sxm", "mi300x", "b200", "a100-80gb-sxm")
    }
    assert mfu["mi300x"].training_mfu <= mfu["h100-sxm"].training_mfu
    assert mfu["a100-80gb-sxm"].training_mfu > mfu["h100-sxm"].training_mfu


def test_an_architecture_entry_sits_between_the_class_and_the_user() -> None:
    """Class figure, then the file's class/architecture entry, then its device entry, then the
    user's overrides (a user's class-wide figure reaches every generation of the class)."""
    table = EfficiencyFile.model_validate(
        {
            "fitted_on": "test",
            "classes": load_efficiency().classes,
            "architectures": {"datacenter/hopper": {"training_mfu": 0.2}},
            "devices": {"h200-sxm": {"training_mfu": 0.3}},
        }
    )
    base = table.classes["datacenter"].training_mfu
    assert efficiency_for("a100-80gb-sxm", "datacenter", None, table, "ampere").training_mfu == base
    assert efficiency_for("h100-sxm", "datacenter", None, table, "hopper").training_mfu == 0.2
    assert efficiency_for("h200-sxm", "datacenter", None, table, "hopper").training_mfu == 0.3
    mine = efficiency_for("h100-sxm", "datacenter", {"training_mfu": 0.5}, table, "hopper")
    assert mine.training_mfu == 0.5
