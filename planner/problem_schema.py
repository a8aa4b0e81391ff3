"""Pydantic schema of a problem file: workloads, constraints, objective and horizon.

`planner schema` exports it as JSON Schema for editors. Quantities accept a plain number in the
unit of the field's name, or a string with a unit (`$2M`, `10 kW`, `50 ms`, `32k`); see
planner/units.py for the conventions. Every bound says why it is there, so a value that trips it
is most likely a typo or a wrong unit.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    WithJsonSchema,
    model_validator,
)

from planner.catalog_schema import Frozen
from planner.units import (
    YEAR_S,
    Count,
    Hours,
    Limit,
    Milliseconds,
    Number,
    Seconds,
    Share,
    TokenCount,
    Tokens,
    TokensPerSecond,
    Usd,
    UsdPerKwh,
    Watts,
    Years,
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
MAX_NAME = 64
MAX_ID = 128  # catalog ids are short; a longer string is pasted text, not an id
MAX_DESCRIPTION = 10_000
MAX_WORKLOADS = 64  # each workload multiplies the designs the model enumerates
MAX_DEVICE_LIST = 256  # the catalog holds well under this many devices
MAX_INVENTORY = 256
MAX_CONTEXT = 2 * 2**20  # 2M tokens (binary), the longest context windows published
MAX_USD = 1e12  # a trillion dollars: more than any fleet has cost
MAX_POWER_W = 1e10  # 10 GW: several times the largest data-center campuses
MAX_DEVICES = 100_000
HOURS_PER_YEAR = YEAR_S // 3600  # 365 days, as in the cost model


class ProblemModel(Frozen):
    """A part of a problem file: immutable, unknown keys are errors, NaN and infinity are not
    numbers."""

    model_config = ConfigDict(allow_inf_nan=False)


class KeyValueError(ValueError):
    """A cross-field error about one key, `at` relative to the model that raises it, so the
    message can point at that key's line rather than at the whole section."""

    def __init__(self, message: str, at: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.at = at


def _check_name(value: str) -> str:
    if not re.fullmatch(NAME_PATTERN, value):
        raise ValueError(
            f"`{value}` is not a valid name: use letters, digits, `_`, `.` and `-`, "
            "starting with a letter or a digit"
        )
    return value


Name = Annotated[
    str,
    Field(min_length=1, max_length=MAX_NAME),
    AfterValidator(_check_name),
    WithJsonSchema({"type": "string", "pattern": NAME_PATTERN, "maxLength": MAX_NAME}),
]
CatalogId = Annotated[str, Field(min_length=1, max_length=MAX_ID)]

Context = Annotated[
    TokenCount,
    Limit(ge=1, le=MAX_CONTEXT, why="longer than any model's context window (2M = 2,097,152)"),
]


class InferenceWorkload(ProblemModel):
    """Serve a model: hold `concurrency` sequences and produce `min_tokens_per_s` output tokens/s."""

    name: Name = Field(description="Unique name of the workload.")
    kind: Literal["inference"] = "inference"
    model: CatalogId = Field(description="Catalog model id.")
    weights: CatalogId = Field(
        "fp16", description="Weight format (fp16, bf16, fp8, int8, awq-int4, q4_k_m...)."
    )
    kv: CatalogId = Field("fp16", description="KV-cache format (fp16, fp8, q8_0...).")
    context_tokens: Context = Field(
        4096,
        description="KV tokens held per sequence: a whole number, or `32k` (k = 1,024, "
        "M = 1,024², so `32k` is 32,768).",
    )
    prompt_tokens: Context = Field(
        1024,
        description="Prompt tokens per request (time to first token): a whole number or `2k` "
        "(k = 1,024).",
    )
    concurrency: Annotated[
        Count, Limit(ge=1, le=1_000_000, why="a million sequences at once is beyond any fleet")
    ] = Field(1, description="Sequences served at once.")
    min_tokens_per_s: Annotated[
        TokensPerSecond,
        Limit(ge=0, le=1e9, why="a billion output tokens/s is beyond any fleet; check the units"),
    ] = Field(
        0.0,
        description="Output tokens/s the fleet must sustain: a number, or `2k tokens/s` "
        "(k = 1,000).",
    )
    max_ms_per_token: (
        Annotated[
            Milliseconds,
            Limit(
                gt=0,
                le=600_000,
                why="ten minutes per token is no ceiling; leave the key out instead",
                low_why="a ceiling of zero cannot be met",
            ),
        ]
        | None
    ) = Field(
        None,
        description="Ceiling on time per output token: milliseconds, or a string with µs, ms, s "
        "(`50 ms`, `0.05 s`).",
    )
    max_ttft_s: (
        Annotated[
            Seconds,
            Limit(
                gt=0,
                le=86_400,
                why="a day to the first token is no ceiling; leave the key out instead",
                low_why="a ceiling of zero cannot be met",
            ),
        ]
        | None
    ) = Field(
        None,
        description="Ceiling on time to first token: seconds, or a string with ms, s, min "
        "(`2 s`, `500 ms`).",
    )


class TrainingWorkload(ProblemModel):
    """Train or fine-tune a model on `token_budget` tokens, optionally by a deadline."""

    name: Name = Field(description="Unique name of the workload.")
    kind: Literal["training"] = "training"
    model: CatalogId = Field(description="Catalog model id.")
    method: Literal["full", "lora", "qlora"] = "full"
    optimizer: Literal["adamw", "adamw-8bit", "sgd", "adafactor"] = "adamw"
    zero_stage: Annotated[Count, Limit(ge=0, le=3, why="ZeRO has stages 0 to 3")] = Field(
        1, description="ZeRO stage across data-parallel ranks."
    )
    seq_len: Context = Field(
        4096, description="Training sequence length: a whole number, or `4k` (k = 1,024)."
    )
    micro_batch: Annotated[
        Count, Limit(ge=1, le=1024, why="larger micro-batches fit on no device")
    ] = Field(1, description="Sequences per device per step.")
    recompute: Literal["none", "selective", "full"] = "selective"
    lora_rank: Annotated[
        Count, Limit(ge=1, le=4096, why="a rank this high is a full fine-tune; use method: full")
    ] = Field(16, description="LoRA rank (lora and qlora).")
    token_budget: Annotated[
        Tokens,
        Limit(
            ge=1,
            le=1e15,
            why="a quadrillion tokens is far beyond any training run (the largest use tens of "
            "trillions); check the units",
        ),
    ] = Field(
        description="Tokens to train on: a number (`2e9`), or with k, M, B, T as powers of 1,000 "
        "(`300B`, `2T`, `300B tokens`)."
    )
    deadline_hours: (
        Annotated[
            Hours,
            Limit(
                gt=0,
                le=10 * HOURS_PER_YEAR,
                why="a deadline more than ten years away is no deadline; leave the key out",
                low_why="no run finishes in no time",
            ),
        ]
        | None
    ) = Field(
        None,
        description="Finish within this many hours; or a string with h, days, weeks, months, "
        "years (`72 h`, `3 days`, `2 weeks`; a month is 730 h).",
    )


def _kind(value: object) -> str:
    """Workloads are inference unless they say `kind: training`."""
    if isinstance(value, dict):
        return str(value.get("kind", "inference"))
    return str(getattr(value, "kind", "inference"))


Workload = Annotated[
    Annotated[InferenceWorkload, Tag("inference")] | Annotated[TrainingWorkload, Tag("training")],
    Discriminator(_kind),
]

Dollars = Annotated[
    Usd,
    Limit(
        gt=0,
        le=MAX_USD,
        why="more than a trillion dollars is no fleet's budget; check the units",
        low_why="a limit of zero buys nothing",
    ),
]


class OwnedDevices(ProblemModel):
    device: CatalogId = Field(description="Catalog device id.")
    count: Annotated[
        Count, Limit(ge=1, le=MAX_DEVICES, why=f"more than {MAX_DEVICES:,} devices of one type")
    ] = Field(description="How many are owned.")


class Constraints(ProblemModel):
    budget_usd: Dollars | None = Field(
        None,
        description="Ceiling on total cost over the horizon, USD: a number, or `$2M`, `$250k`, "
        "`2,000,000 USD`, `1.5 million` (k, M, B are powers of 1,000).",
    )
    capex_usd: Dollars | None = Field(
        None,
        description="Ceiling on money spent up front, USD: a number or `$500k` (as budget_usd).",
    )
    power_w: (
        Annotated[
            Watts,
            Limit(
                gt=0,
                le=MAX_POWER_W,
                why="more than 10 GW is beyond the largest data-center campuses; check the units",
                low_why="nothing runs on no power",
            ),
        ]
        | None
    ) = Field(
        None,
        description="Ceiling on power at the wall (with PUE), W: a number, or `10 kW`, `1.2 MW`.",
    )
    max_devices: (
        Annotated[
            Count,
            Limit(ge=1, le=MAX_DEVICES, why=f"the model counts at most {MAX_DEVICES:,} devices"),
        ]
        | None
    ) = Field(None, description="Ceiling on accelerator count.")
    allowed_devices: list[CatalogId] | None = Field(
        None,
        min_length=1,
        max_length=MAX_DEVICE_LIST,
        description="Only these device ids (default all).",
    )
    excluded_devices: list[CatalogId] = Field(
        default_factory=list, max_length=MAX_DEVICE_LIST, description="Never these device ids."
    )
    vendors: list[CatalogId] | None = Field(
        None, min_length=1, max_length=64, description="Only these vendors."
    )
    require_ecc: StrictBool = Field(False, description="Only devices with ECC memory.")
    memory_headroom: Annotated[
        Share, Limit(ge=0, lt=1, why="a headroom of 1 (100 %) leaves no memory to use")
    ] = Field(
        0.1,
        description="Share of each device's memory kept free: 0.1 or `10%` (use 90 %).",
    )
    max_tensor_parallel: Annotated[
        Count, Limit(ge=1, le=72, why="the largest NVLink domains hold 72 devices")
    ] = Field(8, description="Largest tensor-parallel group.")
    max_stages: Annotated[Count, Limit(ge=1, le=64, why="deeper pipelines are not enumerated")] = (
        Field(8, description="Largest pipeline depth per replica.")
    )
    tensor_parallel_over_pcie: StrictBool = Field(
        True,
        description="Allow tensor parallelism over PCIe inside a node (not only NVLink-class).",
    )
    network: CatalogId = Field(
        "eth-100g", description="Link id between nodes (pipeline hops, gradients)."
    )
    heterogeneous_pipelines: StrictBool = Field(
        True, description="Allow two device types in one replica."
    )
    max_rack_units: (
        Annotated[Count, Limit(ge=1, le=1_000_000, why="a million rack units is ~20,000 racks")]
        | None
    ) = Field(None, description="Ceiling on rack units of all nodes.")
    inventory: list[OwnedDevices] = Field(
        default_factory=list,
        max_length=MAX_INVENTORY,
        description="Devices already owned: free to use, hosts included.",
    )


class Horizon(ProblemModel):
    lifetime_years: Annotated[
        Years,
        Limit(
            ge=1 / HOURS_PER_YEAR,
            le=20,
            why="no accelerator is depreciated over more than 20 years",
            low_why="the horizon is at least an hour (1/8760 year)",
        ),
    ] = Field(
        3.0,
        description="Depreciation period and TCO horizon, years; or a string with h, days, "
        "weeks, months, years (`36 months`, `72 h`; a year is 365 days).",
    )
    utilization: Annotated[
        Share,
        Limit(
            ge=0.01,
            le=1,
            why="a fleet works at most all of the time",
            low_why="a fleet working under 1 % of the hours is idle",
        ),
    ] = Field(0.6, description="Share of hours the fleet works at load: 0.7 or `70%`.")
    electricity_usd_per_kwh: Annotated[
        UsdPerKwh, Limit(ge=0, le=10, why="ten dollars per kWh is beyond any grid price")
    ] = Field(
        0.12,
        description="Electricity price, USD per kWh: a number, or `$0.12/kWh`, `$120/MWh`, "
        "`12 cents/kWh`.",
    )
    pue: Annotated[
        Number,
        Limit(
            ge=1,
            le=5,
            why="even the worst server rooms stay under 5",
            low_why="the facility cannot use less than the IT load",
        ),
    ] = Field(1.3, description="Power usage effectiveness (facility power / IT power).")
    procurement: Literal["buy", "rent"] = Field(
        "buy", description="Buy devices, or rent them by the hour."
    )


class Objective(ProblemModel):
    goal: Literal["min_cost", "max_throughput", "max_tokens_per_joule", "min_cost_per_token"] = (
        "min_cost"
    )
    tie_break: Literal["min_cost", "max_throughput", "min_power", None] = Field(
        None, description="Second objective among plans optimal for the first."
    )


class Problem(ProblemModel):
    name: Name = Field(description="Name of the problem, shown on the plan.")
    description: Annotated[str, Field(max_length=MAX_DESCRIPTION)] = Field(
        "", description="The decision the problem asks for, in words."
    )
    workloads: list[Workload] = Field(
        min_length=1,
        max_length=MAX_WORKLOADS,
        description=f"What to run: 1 to {MAX_WORKLOADS} workloads with unique names.",
    )
    constraints: Constraints = Constraints()
    horizon: Horizon = Horizon()
    objective: Objective = Objective()

    @model_validator(mode="after")
    def _names_unique(self) -> Problem:
        seen: set[str] = set()
        for i, w in enumerate(self.workloads):
            if w.name in seen:
                raise KeyValueError(
                    f"two workloads are named `{w.name}`; names must be unique",
                    ("workloads", i, "name"),
                )
            seen.add(w.name)
        if self.objective.goal in ("max_throughput",) and not (
            self.constraints.budget_usd
            or self.constraints.capex_usd
            or self.constraints.max_devices
            or self.constraints.power_w
        ):
            raise KeyValueError(
                "objective max_throughput needs a limit: set constraints.budget_usd, capex_usd, "
                "power_w or max_devices",
                ("objective", "goal"),
            )
        return self
