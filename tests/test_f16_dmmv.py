"""Old llama.cpp builds' F16 matrix-vector kernel on HBM parts (decode_reads.weight_read_scale), pinned
to hand arithmetic on the roofline."""

from __future__ import annotations

import pytest
from ideal_factors import IDEAL

from planner.catalog import load_catalog
from planner.estimator.decode_reads import DMMV_F16_HBM_SLOWDOWN
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.perf import decode_step_seconds

CAT = load_catalog()

# Zero overheads, the weights at 0.8 of the peak: the weight read's own time shows alone.
FACTORS = {**IDEAL, "bandwidth": 0.8}
# Llama 3.1 8B's blocks: 32 x (Q and O 4,096 x 4,096, K and V 4,096 x 1,024, three MLP
# matrices 4,096 x 14,336) = 6.98e9 weights, 13.96 GB in F16 (the norms add 0.004 %).
BLOCK_BYTES = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) * 2


def _extra_seconds(device: str, weights: str, batch: int) -> float:
    """Seconds the dequantizing family's step takes beyond a current build's."""
    m = CAT.model("llama-3.1-8b")
    dev = device_table([CAT.accelerator(device)], {CAT.accelerator(device).device_class: FACTORS})
    fmt = weight_format(weights)

    def step(kernels: str) -> float:
        return float(
            decode_step_seconds(m, fmt, 2.0, dev, batch=batch, context=0, kernels=kernels)[0]
        )

    return step("llama.cpp-dequantizing") - step("llama.cpp")


def test_old_f16_kernel_reads_slower_on_hbm() -> None:
    # A100 80GB PCIe, HBM2e at 1,935 GB/s (datasheet): 13.96 GB x 0.33 / (1,935 GB/s x 0.8)
    # = 2.98 ms more per token on the 2023-2024 builds.
    # The factor is llama.cpp PR #9816's: vector loads made the kernel 1.33x faster on an H100.
    block_bytes = float(BLOCK_BYTES)
    assert block_bytes == pytest.approx(13.96e9, rel=1e-3)
    want = block_bytes * (DMMV_F16_HBM_SLOWDOWN - 1) / (1935e9 * 0.8)
    assert want == pytest.approx(2.98e-3, rel=2e-3)
    assert _extra_seconds("a100-80gb-pcie", "fp16", 1) == pytest.approx(want, rel=1e-3)


@pytest.mark.parametrize(
    ("device", "weights", "batch"),
    [
        ("l40s", "fp16", 1),  # GDDR6: the scalar loads already near its peak (issue #9817)
        ("a100-80gb-pcie", "q4_0", 1),  # quantized weights run MMVQ, not this kernel
        ("a100-80gb-pcie", "fp16", 2),  # two tokens go to cuBLAS
    ],
)
def test_other_cases_read_as_current_builds(device: str, weights: str, batch: int) -> None:
    assert _extra_seconds(device, weights, batch) == pytest.approx(0.0, abs=1e-12)
