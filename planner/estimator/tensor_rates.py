"""Tensor rates a device reaches on paths its catalog entry does not list directly.

The catalog lists each part's dense 16-bit tensor rate with FP32 accumulation, the figure
training and serving frameworks reach (accelerators.yaml, e.g. the RTX 4090's notes). NVIDIA's
GeForce parts (and the GB10) run matmuls that accumulate in FP16 at twice that rate (Ada
whitepaper, appendix: RTX 4090 330.3 against 165.2 dense TFLOPS; RTX Blackwell whitepaper:
FP16 with FP16 accumulate is a quarter of dense FP4 on GeForce, with FP32 accumulate an
eighth: RTX 5090 419 and 209.5 against 1,676); on every NVIDIA tensor core
since Turing the FP16-accumulate rate is half the INT8 rate (RTX 4090 330.3 / 660.6, RTX 3090
142 / 284, RTX 2080 Ti 107.6 / 215.2, A100 312 / 624, H100 SXM 989.4 / 1978.9), which is how it
is read here, so that professional and datacenter parts, whose two accumulations run at one
rate, keep their listed figure.
"""

from __future__ import annotations

from planner.schema.catalog import Accelerator


def sixteen_bit_flops(d: Accelerator) -> float:
    """The listed dense 16-bit tensor rate (FP32 accumulate), FLOP/s; FP32 where none."""
    t = d.dense_tflops
    return (t.fp16 or t.bf16 or t.fp32 or 0.0) * 1e12


def fp16_accumulate_flops(d: Accelerator) -> float:
    """Dense FP16 matmuls accumulating in FP16, FLOP/s: half the INT8 rate on NVIDIA tensor
    cores (Turing and later), never below the listed 16-bit rate; the listed rate elsewhere."""
    listed = sixteen_bit_flops(d)
    if d.vendor != "nvidia" or not d.dense_tflops.int8:
        return listed
    return max(listed, d.dense_tflops.int8 * 1e12 / 2.0)


def fp16_accumulate_ratio(d: Accelerator) -> float:
    """fp16_accumulate_flops over the listed 16-bit rate (2 on GeForce parts, else 1)."""
    listed = sixteen_bit_flops(d)
    return fp16_accumulate_flops(d) / listed if listed > 0 else 1.0
