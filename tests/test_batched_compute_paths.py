"""Batched serving compute efficiency follows the tensor path a device runs a format on: 16-bit,
8-bit or 4-bit (catalog serving.yaml), the 8-bit figure where a class lists no 4-bit one."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.estimator.devices import device_table
from planner.estimator.efficiency import batched_compute_for, load_serving
from planner.estimator.formats import weight_format


@pytest.mark.parametrize(
    ("device", "fmt", "table"),
    [
        ("b200", "nvfp4", "batched_compute_fp4"),  # B200 lists an FP4 peak
        ("b200", "fp8", "batched_compute_low_precision"),
        ("h100-sxm", "fp8", "batched_compute_low_precision"),
        ("h100-sxm", "fp16", "batched_compute"),
        ("h100-sxm", "nvfp4", "batched_compute"),  # no FP4 peak: the format runs on 16-bit
        # MXFP4 weights are multiplied with MXFP8 activations on Blackwell (block-scaled tensor
        # cores) and with 16-bit ones on Hopper (TensorRT-LLM GPT-OSS deployment guide), never
        # FP4 x FP4.
        ("b200", "mxfp4", "batched_compute_low_precision"),
        ("h100-sxm", "mxfp4", "batched_compute"),
    ],
)
def test_factor_of_the_tensor_path(device: str, fmt: str, table: str) -> None:
    dev = device_table([load_catalog().accelerator(device)])
    expected = getattr(load_serving(), table)["datacenter"]
    assert float(dev.batched_compute(weight_format(fmt))[0]) == expected


def test_a_class_without_a_4_bit_figure_uses_its_8_bit_one() -> None:
    s = load_serving()
    assert "asic" not in s.batched_compute_fp4
    assert (
        batched_compute_for("asic", 0.5, four_bit=True) == s.batched_compute_low_precision["asic"]
    )


@pytest.mark.parametrize(
    ("device", "precision"),
    [
        ("b200", "fp8"),
        ("mi355x", "fp8"),
        ("h100-sxm", "bf16"),
        ("a100-80gb-sxm", "bf16"),
        ("dgx-spark", "bf16"),
        ("rtx-5090", "bf16"),
    ],
)
def test_mxfp4_peak_is_never_the_fp4_one(device: str, precision: str) -> None:
    """A weight-only MX format reaches the 8-bit rate on datacenter parts with block-scaled
    (FP4) tensor cores and the 16-bit rate elsewhere: on a device with an FP8 rate (H100) and
    on the Blackwell parts outside the datacenter, whose engines dequantize MXFP4 to 16-bit."""
    acc = load_catalog().accelerator(device)
    peak = float(device_table([acc]).peak_flops(weight_format("mxfp4"))[0])
    assert peak == pytest.approx(acc.dense_tflops.tflops(precision) * 1e12)
