"""Measured performance: a table of (model, device, format, batch) -> measured figure.

The same format serves two purposes: the calibration table in the repository (published
measurements with sources) and a user's own measurements, which replace the estimate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field

from planner.schema.catalog import Frozen, Reference
from planner.schema.yaml_io import Located, read_yaml, validate

Metric = Literal[
    "decode_tokens_per_s",
    "prefill_tokens_per_s",
    "train_tokens_per_s_per_device",
    "train_mfu",
    "peak_memory_gb",
    "ms_per_output_token",
]


class Measurement(Frozen):
    """One measured figure. Infinity and NaN are not measurements (a `.inf` value once printed
    "inf tokens/s" and wrote `Infinity` into JSON)."""

    model_config = ConfigDict(allow_inf_nan=False)

    model: str = Field(description="Catalog model id.")
    device: str = Field(description="Catalog device id.")
    devices: int = Field(1, ge=1, description="Devices used (tensor parallel), all of this type.")
    weights: str = Field(description="Weight format id (fp16, q4_0, awq-int4...).")
    kv: str = Field("fp16", description="KV-cache format id.")
    metric: Metric
    batch: int | None = Field(
        1,
        ge=1,
        description="Concurrent sequences; null for a saturated server whose batch is not published.",
    )
    context: int | None = Field(
        0, ge=0, description="Tokens in context while decoding, or prompt length."
    )
    value: float = Field(gt=0)
    engine: str | None = None
    source: str | None = Field(
        None, description="Reference id (required in the calibration table)."
    )
    notes: str | None = None


class MeasurementFile(Frozen):
    references: dict[str, Reference] = Field(default_factory=dict)
    measurements: list[Measurement]


def load_measurements(path: Path) -> MeasurementFile:
    return validate(read_yaml(path), MeasurementFile)


def read_measurements(path: Path) -> tuple[MeasurementFile, Located]:
    """The table and its parsed document (for messages that name a row's line)."""
    doc = read_yaml(path)
    return validate(doc, MeasurementFile), doc


def find(
    table: MeasurementFile | None,
    *,
    model: str,
    device: str,
    weights: str,
    metric: Metric,
    batch: int,
    devices: int = 1,
    kv: str = "fp16",
) -> int | None:
    """The index of the measurement for exactly this configuration, if the table has one (the
    last one wins)."""
    if table is None:
        return None
    hit = None
    key = (model, device, weights, kv, metric, batch, devices)
    for i, row in enumerate(table.measurements):
        if (row.model, row.device, row.weights, row.kv, row.metric, row.batch, row.devices) == key:
            hit = i
    return hit


class Residual(Frozen):
    """One calibration row as planner/catalog_data/calibration.yaml keeps it: what it measured
    and the estimator's error on it (calibration/confidence.py writes the file)."""

    device: str
    engine: str | None = None
    metric: Literal["decode", "prefill"]
    batch: int | None = Field(None, ge=1)
    devices: int = Field(1, ge=1)
    residual: float = Field(description="ln(estimate / measured); above 0: optimistic.")


class ResidualFile(Frozen):
    rows: list[Residual]
