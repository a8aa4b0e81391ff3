"""Measured performance: one entry format for every measured figure.

An entry names a device (a tensor-parallel group of `devices`, or `tp`, of them), the
conditions it was measured at (batch, context or prompt_tokens, request class) and a metric
with its value in the metric's unit. The same format serves the calibration table in the
repository (published measurements with sources), a user's table for `planner estimate
--measured`, and a serving workload's `measured:` list in a problem file (inline, or the path
of such a table), where it replaces the estimate.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, WithJsonSchema, model_validator

from planner.errors import did_you_mean
from planner.schema.catalog import Frozen, KeyValueError, Reference
from planner.schema.units import (
    DATA_SIZE,
    DURATION,
    SHARE,
    TOKEN_RATE,
    Family,
    Limit,
    parse_quantity,
)
from planner.schema.yaml_io import Located, read_yaml, validate

# Whole-replica figures: a replica of `devices` devices at a batch (the calibration table's rows).
ReplicaMetric = Literal[
    "decode_tokens_per_s",
    "prefill_tokens_per_s",
    "train_tokens_per_s_per_device",
    "train_mfu",
    "peak_memory_gb",
    "ms_per_output_token",
]
# Figures of one device type in a serving workload: the time per transformer block of a decode
# step (by batch) or of one prompt's prefill (by prompt length), the memory one device may fill,
# and the requests/s of one request class a single-stage replica sustains.
WorkloadMetric = Literal[
    "decode_ms_per_layer", "prefill_ms_per_layer", "memory_gb", "requests_per_s"
]
Metric = Literal[ReplicaMetric, WorkloadMetric]
REPLICA_METRICS: tuple[str, ...] = get_args(ReplicaMetric)
WORKLOAD_METRICS: tuple[str, ...] = get_args(WorkloadMetric)

_TEXT = {"type": "string", "description": "a number with its unit"}
REQUEST_RATE = Family(
    "a rate of requests",
    "requests/s",
    {u: Fraction(1) for u in ("", "/s", "requests/s", "request/s", "req/s", "rps")},
    "requests/s",
    "`30` or `30 requests/s`",
)
_MS = DURATION.per(Fraction(1, 1000), "ms", "`2.4 ms` or `900 us`")
# Each metric's unit (the unit its value is kept in) and how it may be written.
UNITS: dict[str, Family] = {
    "decode_tokens_per_s": TOKEN_RATE,
    "prefill_tokens_per_s": TOKEN_RATE,
    "train_tokens_per_s_per_device": TOKEN_RATE,
    "train_mfu": SHARE,
    "peak_memory_gb": DATA_SIZE,
    "ms_per_output_token": _MS,
    "decode_ms_per_layer": _MS,
    "prefill_ms_per_layer": _MS,
    "memory_gb": DATA_SIZE,
    "requests_per_s": REQUEST_RATE,
}
# The most a value may be, in its unit, and why (a slip of units shows here first).
_BLOCK = Limit(gt=0, le=60_000, why="a minute per block is no measurement of a serving step")
_MEMORY = Limit(gt=0, le=100_000, why="no device holds 100 TB")
_LIMITS: dict[str, Limit] = {
    "decode_ms_per_layer": _BLOCK,
    "prefill_ms_per_layer": _BLOCK,
    "ms_per_output_token": Limit(
        gt=0, le=600_000, why="ten minutes per token is no measurement of decoding"
    ),
    "memory_gb": _MEMORY,
    "peak_memory_gb": _MEMORY,
    "requests_per_s": Limit(
        gt=0, le=1e6, why="a million requests/s from one replica is not a measurement"
    ),
    "train_mfu": Limit(gt=0, le=1, why="a model FLOPs utilization is at most 100 %"),
}
# The conditions each metric is measured at: required (True) or allowed (False); any other
# condition is refused. Whole-replica rows keep their old defaults (batch 1, context 0).
_CONDITIONS: dict[str, dict[str, bool]] = {
    "decode_ms_per_layer": {"batch": True},
    "prefill_ms_per_layer": {"prompt_tokens": True},
    "memory_gb": {},
    "requests_per_s": {"class": True},
    **{m: {"batch": False, "context": False} for m in REPLICA_METRICS},
}
_WHY = {
    "batch": "the sequences decoding at once",
    "prompt_tokens": "the prompt's length in tokens",
    "class": "the request class (a name in the workload's request_mix)",
}


def _value(metric: str, value: object, unit: object) -> float:
    """A measurement's value in its metric's unit: a number (in `unit` where given), or a string
    with its unit (`2.4 ms`, `22 GiB`); a unit of another kind is an error naming both."""
    family = UNITS[metric]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise KeyValueError("`value` must be a number or a number with its unit", ("value",))
    if unit is not None and not isinstance(unit, str):
        raise KeyValueError(f"`unit` must be a unit's name, e.g. {family.unit}", ("unit",))
    if isinstance(value, str) and unit is not None:
        raise KeyValueError(
            f"the unit is given twice (`value: {value}` and `unit: {unit}`): keep one", ("unit",)
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise KeyValueError(f"got {value}; write a finite number", ("value",))
    text = f"{value} {unit}" if unit is not None else value
    try:
        got = parse_quantity(text, family) if isinstance(text, str) else Fraction(text)
    except ValueError as e:
        raise KeyValueError(
            f"{metric} is {family.kind} in {family.unit or 'a plain number'}: {e}",
            ("unit",) if unit is not None else ("value",),
        ) from None
    out = float(got)
    try:
        _LIMITS.get(metric, Limit(gt=0)).check(out)
    except ValueError as e:
        raise KeyValueError(
            f"{metric} in {family.unit or 'a share'} {e}; check the unit", ("value",)
        ) from None
    return out


class Measurement(Frozen):
    """One measured figure: a device (a tensor-parallel group of `devices` of them), the
    conditions it was measured at, and a metric with its value in the metric's unit (UNITS).
    Infinity and NaN are not measurements (a `.inf` value once printed "inf tokens/s" and wrote
    `Infinity` into JSON).

    Whole-replica rows (REPLICA_METRICS) name their model and weight format in a table of their
    own (the calibration table, `planner estimate --measured`); in a problem file's workload
    they default to the workload's. Workload figures (WORKLOAD_METRICS) are of the workload's
    model and formats."""

    model_config = ConfigDict(allow_inf_nan=False, serialize_by_alias=True)

    model: str | None = Field(None, description="Catalog model id (a problem: the workload's).")
    device: str = Field(min_length=1, description="Catalog device id.")
    devices: int = Field(
        1,
        ge=1,
        le=100_000,
        description="Devices used (tensor parallel), all of this type; `tp` is the same key.",
    )
    weights: str | None = Field(
        None, description="Weight format id (fp16, q4_0, awq-int4...; a problem: the workload's)."
    )
    kv: str | None = Field(
        None,
        description="KV-cache format id: fp16 where a table's whole-replica row leaves it out; "
        "the workload's where a workload's entry does.",
    )
    metric: Metric
    batch: int | None = Field(
        None,
        ge=1,
        le=65_536,
        description="Concurrent sequences; null for a saturated server whose batch is not "
        "published. Whole-replica rows: 1 where left out.",
    )
    context: int | None = Field(
        None,
        ge=0,
        description="Tokens in context while decoding, or prompt length (whole-replica rows; "
        "0 where left out).",
    )
    prompt_tokens: int | None = Field(
        None, ge=1, le=2 * 2**20, description="prefill_ms_per_layer: the prompt's length."
    )
    request_class: str | None = Field(
        None, alias="class", description="requests_per_s: the request class measured."
    )
    value: Annotated[
        float, WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0}, _TEXT]})
    ] = Field(gt=0, description="The figure, in the metric's unit, or with its unit (`2.4 ms`).")
    unit: str = Field("", description="The metric's unit (filled in; given, it must agree).")
    engine: str | None = None
    source: str | None = Field(
        None, description="Reference id (required in the calibration table)."
    )
    notes: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        """`tp` for `devices`; the value in its metric's unit; each metric's conditions."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "tp" in data:
            if "devices" in data:
                raise KeyValueError("`tp` and `devices` are the same key: give one", ("tp",))
            data["devices"] = data.pop("tp")
        metric = data.get("metric")
        if metric not in UNITS or "value" not in data:
            return data  # the field validators name what is wrong
        data["value"] = _value(metric, data["value"], data.get("unit"))
        data["unit"] = UNITS[metric].unit
        _conditions(metric, data)
        if metric in REPLICA_METRICS:
            data.setdefault("batch", 1)
            data.setdefault("context", 0)
        return data

    @property
    def tp(self) -> int:
        """The tensor-parallel degree measured (`devices`)."""
        return self.devices

    @property
    def ms(self) -> float | None:
        """A time per block (decode_ms_per_layer, prefill_ms_per_layer), ms."""
        return self.value if self.metric.endswith("_ms_per_layer") else None

    @property
    def gb(self) -> float | None:
        """The memory one device may fill (memory_gb), GB."""
        return self.value if self.metric == "memory_gb" else None

    @property
    def requests_per_s(self) -> float:
        """Requests/s of one replica (requests_per_s; 0 for any other metric)."""
        return self.value if self.metric == "requests_per_s" else 0.0

    @property
    def replica(self) -> bool:
        """A whole-replica figure (the calibration table's kind)."""
        return self.metric in REPLICA_METRICS


def _conditions(metric: str, data: dict[str, Any]) -> None:
    """A workload figure states the conditions it was measured at, and only those."""
    need = _CONDITIONS[metric]
    for key, required in need.items():
        if required and data.get(key) is None:
            raise KeyValueError(f"a {metric} figure needs {_WHY[key]} (`{key}`)", (key,))
    for key in ("batch", "context", "prompt_tokens", "class"):
        if data.get(key) is not None and key not in need:
            hint = {
                "context": " (a prefill_ms_per_layer entry gives its prompt as `prompt_tokens`)",
                "prompt_tokens": " (a prompt's time per block is a prefill_ms_per_layer entry)",
                "batch": " (a decode step's time per block is a decode_ms_per_layer entry)",
            }.get(key, "")
            raise KeyValueError(
                f"a {metric} figure is not measured at a `{key}`: drop it{hint}", (key,)
            )


class MeasurementFile(Frozen):
    """A table of measurements: the calibration table, a user's file for `planner estimate
    --measured`, or the file a problem's workload points at (`measured: FILE`)."""

    references: dict[str, Reference] = Field(default_factory=dict)
    measurements: list[Measurement]

    @model_validator(mode="before")
    @classmethod
    def _kv(cls, data: Any) -> Any:
        """A table's whole-replica row without `kv` measured an fp16 KV cache (llama.cpp's
        default, and the calibration table's convention)."""
        rows = data.get("measurements") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            return data
        filled = [
            {**r, "kv": "fp16"}
            if isinstance(r, dict) and r.get("metric") in REPLICA_METRICS and "kv" not in r
            else r
            for r in rows
        ]
        return {**data, "measurements": filled}

    @model_validator(mode="after")
    def _named(self) -> MeasurementFile:
        """A whole-replica row stands alone in a table: it names its model and weights."""
        for j, r in enumerate(self.measurements):
            for key in ("model", "weights"):
                if r.replica and getattr(r, key) is None:
                    raise KeyValueError(
                        f"a {r.metric} row of a table names its `{key}` (a workload's entries "
                        "take the workload's)",
                        ("measurements", j, key),
                    )
        return self

    @model_validator(mode="after")
    def _sourced(self) -> MeasurementFile:
        """A row's `source` is a reference the table defines under `references`."""
        for j, r in enumerate(self.measurements):
            if r.source is not None and r.source not in self.references:
                defined = ", ".join(f"`{x}`" for x in self.references) or "none"
                raise KeyValueError(
                    f"source `{r.source}` is no reference of this table (its `references`: "
                    f"{defined}): name one, or add it under `references` with its title and "
                    f"url{did_you_mean(r.source, self.references)}",
                    ("measurements", j, "source"),
                )
        return self


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
    engine: str | None = None,
) -> int | None:
    """The index of the measurement for exactly this configuration, if the table has one (the
    last one wins), under `engine` (a row that names another engine measured another program;
    one that names none, or an estimate of no named engine, matches any)."""
    if table is None:
        return None
    hit = None
    key = (model, device, weights, kv, metric, batch, devices)
    for i, row in enumerate(table.measurements):
        kv = row.kv or "fp16"
        at = (row.model, row.device, row.weights, kv, row.metric, row.batch, row.devices)
        if at == key and same_engine(row.engine, engine):
            hit = i
    return hit


def two_decode_figures(batch: int | None, device: str, tp: int) -> str:
    """The words a table (a problem's `measured:`, or `estimate --measured`) is refused with
    when two decode figures stand at one point: which would apply is arbitrary."""
    at = "null" if batch is None else f"{batch}"
    return (
        f"two decode figures at batch {at} on {device} at tp {tp} (times per block or whole "
        "replicas', at any context): keep one"
    )


def same_engine(measured: str | None, runs: str | None) -> bool:
    """Whether a figure measured under engine `measured` stands for a replica under `runs`:
    the same catalog engine id, in any case (`vLLM` is `vllm`); a figure that names no engine,
    or a replica of no named engine, matches any."""
    return not measured or not runs or measured.casefold() == runs.casefold()


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
