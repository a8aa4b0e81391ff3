"""Efficiency factors for hand arithmetic: every single-prompt and overhead factor at its ideal
(full bandwidth and compute, no fixed time, no dequantization work), the pure roofline; the
batched serving factors stay as shipped."""

from __future__ import annotations

IDEAL = {
    "bandwidth": 1.0,
    "compute": 1.0,
    "layer_overhead_us": 0.0,
    "step_overhead_us": 0.0,
    "dequant_ops_per_weight": 0.0,
}
