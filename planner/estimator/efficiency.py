"""Efficiency factors: how much of a device's peak a real engine achieves, per device class.

Defaults ship in `catalog/efficiency.yaml`, fitted by `calibration/fit.py` on published
measurements; a user can override any factor per device class or per device.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import get_args

from pydantic import Field, ValidationError, field_validator

from planner.catalog import default_catalog_dir
from planner.errors import InputError, did_you_mean
from planner.schema.catalog import DeviceClass, Frozen
from planner.schema.yaml_io import read_validated


class Efficiency(Frozen):
    """Achieved fractions of peak, and fixed overheads, for one device class."""

    bandwidth: float = Field(
        gt=0, le=1, description="Achieved / peak memory bandwidth when streaming weights."
    )
    compute: float = Field(
        gt=0, le=1, description="Achieved / peak dense tensor FLOPs in inference matmuls."
    )
    training_mfu: float = Field(gt=0, le=1, description="Model FLOPs utilization in training.")
    moe_routed_ns: float = Field(
        ge=0,
        le=100,
        description="Training a mixture-of-experts model: nanoseconds per routed activation "
        "element per MoE layer (a token's hidden vector sent to one of its experts: gating, "
        "permutation, dispatch and combine, forward and backward), beside the FLOPs at "
        "training_mfu. A time, not bytes at the part's bandwidth: fitted per GPU generation as "
        "bytes, Blackwell runs needed 2.8x Hopper's bytes at 2.4x its bandwidth, about the same "
        "time (calibration/README.md).",
    )
    moe_fused_share: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Share of moe_routed_ns a run pays whose dispatcher fuses the permutation "
        "into its all-to-all kernels (DeepEP, Megatron-Core's `flex` dispatcher); the planner's "
        "own jobs run Megatron-Core's default `alltoall` dispatcher and pay all of it.",
    )
    layer_overhead_us: float = Field(
        ge=0, description="Fixed time per layer per forward step, microseconds."
    )
    step_overhead_us: float = Field(
        ge=0, description="Fixed time per decode step (sampling, host), microseconds."
    )
    dequant_ops_per_weight: float = Field(
        ge=0, description="Vector ops per weight to unpack weight-only quantized formats."
    )
    usable_memory: float = Field(
        gt=0, le=1, description="Share of device memory an engine may fill (vLLM default 0.9)."
    )
    power_activity_floor: float = Field(
        ge=0, le=1, description="Share of (TDP - idle) drawn even when lightly loaded."
    )


class EngineOverhead(Frozen):
    """Fixed times one engine release adds to every forward step beyond its device class's
    overheads (fitted by calibration/fit.py on the measurements tagged with that engine)."""

    layer_overhead_us: float = Field(
        0.0, ge=0, description="Added per layer per forward step, microseconds."
    )
    step_overhead_us: float = Field(0.0, ge=0, description="Added per forward step, microseconds.")


class EfficiencyFile(Frozen):
    fitted_on: str = Field(description="What the factors were fitted on, and when.")
    classes: dict[DeviceClass, Efficiency]
    architectures: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Per class and architecture overrides of single factors, keyed "
        "`class/architecture` (datacenter/hopper): where one generation of a class reaches a "
        "different share of its peak than the class as a whole.",
    )
    devices: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Per-device overrides of single factors."
    )
    engines: dict[str, EngineOverhead] = Field(
        default_factory=dict,
        description="Fixed times an engine release adds beyond the class figures, which are "
        "fitted on current releases (an older llama.cpp build, say), keyed by catalog engine id.",
    )

    @field_validator("architectures")
    @classmethod
    def _architecture_keys(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        """`class/architecture` keys of a known class, naming known factors."""
        classes = set(get_args(DeviceClass))
        for key, factors in v.items():
            klass, _, arch = key.partition("/")
            if klass not in classes or not arch:
                raise ValueError(
                    f"`{key}`: write `class/architecture` with a class of {sorted(classes)}"
                )
            unknown = set(factors) - set(Efficiency.model_fields)
            if unknown:
                raise ValueError(f"`{key}`: unknown factor {sorted(unknown)}")
        return v


@functools.cache
def load_efficiency(path: Path | None = None) -> EfficiencyFile:
    """The efficiency defaults (cached)."""
    p = path or default_catalog_dir() / "efficiency.yaml"
    return read_validated(p, EfficiencyFile)


def efficiency_for(
    device_id: str,
    device_class: DeviceClass,
    architecture: str,
    overrides: dict[str, float] | None = None,
    table: EfficiencyFile | None = None,
) -> Efficiency:
    """Class defaults, then the file's entries for the class's `architecture` and for the
    device, then the user's overrides."""
    t = table or load_efficiency()
    base = t.classes[device_class]
    merged = {
        **t.architectures.get(f"{device_class}/{architecture}", {}),
        **t.devices.get(device_id, {}),
        **(overrides or {}),
    }
    for key in merged:
        if key not in Efficiency.model_fields:
            raise InputError(
                f"unknown efficiency factor `{key}`{did_you_mean(key, Efficiency.model_fields)}"
                f" (choices: {', '.join(Efficiency.model_fields)})"
            )
    if not merged:
        return base
    try:
        return Efficiency.model_validate({**base.model_dump(), **merged})
    except ValidationError as e:
        first = e.errors()[0]
        raise InputError(
            f"efficiency for `{device_id}`: {'.'.join(map(str, first['loc']))}: {first['msg']}"
        ) from None


class ServingFile(Frozen):
    """Serving-engine factors (catalog/serving.yaml)."""

    min_prefill_room: int = Field(gt=0, description="Least prompt tokens per iteration.")
    prefill_pool_budget: int = Field(
        gt=0, description="Least prompt tokens per iteration of a disaggregated prefill engine."
    )
    disaggregated_ttft_share: float = Field(
        gt=0,
        lt=1,
        description="Share of an end-to-end ceiling a prefill pool may use when no first-token "
        "ceiling is given.",
    )
    latency_margin: float = Field(
        ge=0, le=1, description="Share added to modelled latencies under open arrivals."
    )
    prefill_room_margin: float = Field(
        ge=1, description="Prefill room over the average prompt tokens per iteration."
    )
    batched_compute: dict[DeviceClass, float] = Field(
        description="Achieved / dense 16-bit peak FLOPs of batched serving matmuls, per class."
    )
    batched_compute_low_precision: dict[DeviceClass, float] = Field(
        description="The same on the 8-bit tensor paths (of their own peak), per class."
    )
    batched_compute_fp4: dict[DeviceClass, float] = Field(
        default_factory=dict,
        description="The same on the 4-bit tensor paths (of their own peak), per class; the "
        "8-bit figure where a class is not listed.",
    )
    vendor_batched_compute: dict[str, float] = Field(
        default_factory=dict,
        description="Multiplier on the batched figures above for devices of a vendor whose "
        "serving stack reaches a different share of its peak (1 where a vendor is not listed).",
    )


@functools.cache
def load_serving(path: Path | None = None) -> ServingFile:
    """The serving-engine factors (cached)."""
    p = path or default_catalog_dir() / "serving.yaml"
    return read_validated(p, ServingFile)


def vendor_batched_scale(vendor: str) -> float:
    """The serving stack's multiplier on a vendor's batched compute figures (catalog
    serving.yaml `vendor_batched_compute`; 1 where the vendor is not listed)."""
    return load_serving().vendor_batched_compute.get(vendor, 1.0)


def batched_compute_for(
    device_class: DeviceClass,
    fallback: float,
    *,
    low_precision: bool = False,
    four_bit: bool = False,
) -> float:
    """Batched serving compute efficiency of a class on its 16-bit, 8-bit (`low_precision`) or
    4-bit (`four_bit`) tensor path; the 8-bit figure for a 4-bit path the file does not list,
    the class's single-prompt factor where the class is unlisted."""
    s = load_serving()
    if four_bit and device_class in s.batched_compute_fp4:
        return s.batched_compute_fp4[device_class]
    table = s.batched_compute_low_precision if low_precision or four_bit else s.batched_compute
    return table.get(device_class, fallback)
