"""Training MFU per GPU generation (catalog efficiency.yaml `architectures`, fitted by
calibration/fit.py): an H100 trains about what published runs measure over an A100, and no
datacenter part is credited with the class's average over older and newer parts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

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
    llm-foundry-benchmarks): MPT-7B in BF16 at 2,048 tokens, 10,643 tokens/s per H100 SXM
    and 4,641 per A100 80GB SXM, 2.29x. With one training MFU for the class the planner said
    3.2x (the ratio of their dense BF16 peaks, 989 / 312 TFLOP/s)."""
    ratio = _tokens_per_s("h100-sxm", "mpt-7b") / _tokens_per_s("a100-80gb-sxm", "mpt-7b")
    assert ratio == pytest.approx(10_643 / 4_641, rel=0.15)
    assert ratio < 989 / 312 * 0.85


def test_no_unmeasured_generation_is_credited_with_more_than_a_measured_one() -> None:
    """A part of a generation no run measured, in any class, takes the lowest MFU a measured
    generation reaches, never a class average: no unmeasured part trains faster per FLOP of its
    peak than a measured one, and an H100 (measured) keeps its own figure."""
    cat = load_catalog()
    shipped = load_efficiency().architectures
    fitted = {"datacenter/ampere", "datacenter/hopper", "datacenter/blackwell"}
    # torchtune's rows: the RTX 4090 and the board its table calls '1x A6000', read as the RTX 6000
    # Ada (calibration/measurements.yaml says why)
    fitted |= {"workstation/ada-lovelace", "consumer/ada-lovelace"}
    measured = {k.split("/", 1)[1] for k in fitted}
    lowest = min(shipped[k]["training_mfu"] for k in fitted)
    unmeasured = [k for k in shipped if k.split("/", 1)[1] not in measured]
    assert unmeasured and all(shipped[k]["training_mfu"] == lowest for k in unmeasured)
    table = device_table([cat.accelerator(d) for d in ("mi300x", "v100-sxm2-32gb", "h100-sxm")])
    mi300x, v100, h100 = table.eff_training_mfu
    assert mi300x == v100 == lowest < h100


def test_a_generation_measured_in_one_class_lends_its_figure_to_another() -> None:
    """One tensor-core design across market segments: the RTX A6000 (workstation) and the RTX
    3090 (consumer) are Ampere like the A100, the L40S (datacenter) is Ada Lovelace like the RTX
    4090 and the RTX 6000 Ada. A class without rows of a generation takes that generation's
    fitted figure (the lower where two classes measured it), so the RTX A6000 trains at the
    A100's MFU rather than a hand-set class prior."""
    shipped = load_efficiency().architectures
    ampere = shipped["datacenter/ampere"]["training_mfu"]
    assert shipped["consumer/ampere"]["training_mfu"] == ampere
    assert shipped["workstation/ampere"]["training_mfu"] == ampere
    ada = min(shipped[f"{c}/ada-lovelace"]["training_mfu"] for c in ("consumer", "workstation"))
    assert shipped["datacenter/ada-lovelace"]["training_mfu"] == ada


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
    assert efficiency_for("a100-80gb-sxm", "datacenter", "ampere", None, table).training_mfu == base
    assert efficiency_for("h100-sxm", "datacenter", "hopper", None, table).training_mfu == 0.2
    assert efficiency_for("h200-sxm", "datacenter", "hopper", None, table).training_mfu == 0.3
    mine = efficiency_for("h100-sxm", "datacenter", "hopper", {"training_mfu": 0.5}, table)
    assert mine.training_mfu == 0.5
    cat = load_catalog()
    users = device_table([cat.accelerator("h100-sxm")], {"datacenter": {"training_mfu": 0.55}})
    assert users.eff_training_mfu[0] == 0.55


@pytest.mark.parametrize(
    ("key", "factors"),
    [("hopper", {"training_mfu": 0.4}), ("datacenter/", {"training_mfu": 0.4}),
     ("datacenter/hopper", {"training_mfi": 0.4})],
)  # fmt: skip
def test_a_malformed_architecture_entry_is_refused(key: str, factors: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        EfficiencyFile.model_validate(
            {
                "fitted_on": "t",
                "classes": load_efficiency().classes,
                "architectures": {key: factors},
            }
        )
