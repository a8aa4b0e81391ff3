"""Pydantic schema of a problem file: workloads, constraints, objective and horizon.

`planner schema` exports it as JSON Schema for editors. Quantities accept a plain number in the
unit of the field's name, or a string with a unit (`$2M`, `10 kW`, `50 ms`, `32k`); see
planner/schema/units.py for the conventions. Every bound says why it is there, so a value that trips it
is most likely a typo or a wrong unit.

Long because every field carries its description and bounds (they are the file format's
documentation); the cross-field checks sit beside the models they check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictBool,
    Tag,
    WithJsonSchema,
    field_serializer,
    field_validator,
    model_validator,
)

from planner.errors import did_you_mean
from planner.schema.catalog import MAX_RENT_USD_PER_HOUR, Frozen, KeyValueError
from planner.schema.measurements import Measurement
from planner.schema.units import (
    YEAR_S,
    Count,
    GigabitsPerSecond,
    Gigabytes,
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

Mode = Literal["buy", "on_demand", "reserved", "spot"]
MODES: tuple[Mode, ...] = ("buy", "on_demand", "reserved", "spot")
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
MAX_BATCH = 65_536  # concurrent sequences: more than any engine batches
MAX_MICRO_BATCH = 1024  # sequences per device per training step: larger fit on no device
MAX_LORA_RANK = 4096  # a LoRA rank this high is a full fine-tune
HOURS_PER_YEAR = YEAR_S // 3600  # 365 days, as in the cost model


class ProblemModel(Frozen):
    """A part of a problem file: immutable, unknown keys are errors, NaN and infinity are not
    numbers. Dumped with the keys a problem file uses (a capacity entry's `class`), so a
    dumped problem reads back."""

    model_config = ConfigDict(allow_inf_nan=False, serialize_by_alias=True)


def _spelled(pattern: str, what: str, rule: str) -> Callable[[str], str]:
    """A validator: the value matches `pattern`, else an error saying the `rule`."""

    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"`{value}` is not a valid {what}: {rule}")
        return value

    return check


_check_name = _spelled(
    NAME_PATTERN, "name", "use letters, digits, `_`, `.` and `-`, starting with a letter or a digit"
)


Name = Annotated[
    str,
    Field(min_length=1, max_length=MAX_NAME),
    AfterValidator(_check_name),
    WithJsonSchema({"type": "string", "pattern": NAME_PATTERN, "maxLength": MAX_NAME}),
]
CatalogId = Annotated[str, Field(min_length=1, max_length=MAX_ID)]
ID_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"


_check_id = _spelled(
    ID_PATTERN,
    "id",
    "use lower-case letters, digits, `.` and `-`, starting with a letter or a digit (e.g. "
    "`lab-server`, `home-lan`)",
)


# The id of a machine or a link the problem states (catalog ids are spelled alike).
StatedId = Annotated[
    str,
    Field(min_length=1, max_length=MAX_ID),
    AfterValidator(_check_id),
    WithJsonSchema({"type": "string", "pattern": ID_PATTERN, "maxLength": MAX_ID}),
]

Context = Annotated[
    TokenCount,
    Limit(ge=1, le=MAX_CONTEXT, why="longer than any model's context window (2M = 2,097,152)"),
]


class RequestClass(ProblemModel):
    """One bar of a request-length histogram: requests of this shape, and their share of all."""

    name: Name = Field(description="Name of the class, e.g. chat or documents.")
    input_tokens: Context = Field(description="Prompt tokens per request (`200`, `30k`).")
    output_tokens: Annotated[
        TokenCount, Limit(ge=1, le=MAX_CONTEXT, why="longer than any model's context window")
    ] = Field(description="Generated tokens per request.")
    share: Annotated[
        Share, Limit(gt=0, le=1, why="a share is at most 100 %", low_why="a class with no share")
    ] = Field(description="Share of all requests: 0.8 or `80%`; the shares add up to 100 %.")


class MeasuredCapacity(ProblemModel):
    """A measured serving capacity: requests/s of one class that one replica (a single stage of
    `tp` devices in tensor parallel) sustains under the workload's latency targets, as a serving
    engine's benchmark reports it. It replaces the estimate for that device, degree and class."""

    device: CatalogId = Field(description="Catalog device id.")
    tp: Annotated[Count, Limit(ge=1, le=72, why="the largest NVLink domains hold 72 devices")] = (
        Field(1, description="Devices in tensor parallel in the replica.")
    )
    request_class: Name = Field(alias="class", description="Name of the request class.")
    requests_per_s: Annotated[
        Number,
        Limit(gt=0, le=1e6, why="a million requests/s from one replica is not a measurement"),
    ] = Field(description="Requests per second one replica sustains.")

    def entry(self) -> Measurement:
        """The same figure as a `measured:` entry (the older spelling translated)."""
        return Measurement.model_validate(
            {
                "device": self.device,
                "tp": self.tp,
                "metric": "requests_per_s",
                "class": self.request_class,
                "value": self.requests_per_s,
            }
        )


class MeasuredLayerTime(ProblemModel):
    """A measured figure of one device type in this workload, as pooled-cluster profilers
    publish them: the time per transformer block (on a tensor-parallel group of `tp` of them)
    for the workload's model and formats, of one decode step of `batch` sequences or of the
    prefill of one prompt of `prompt_tokens`, replacing the estimator's for stages of that
    device and degree (planner.estimator.profiles); or the memory one device may fill
    (`memory_gb`: what the OS, a desktop session or other processes leave), capping the
    catalog's usable memory for this workload's stages on that device."""

    device: CatalogId = Field(description="Catalog device id.")
    tp: Annotated[Count, Limit(ge=1, le=72, why="the largest NVLink domains hold 72 devices")] = (
        Field(1, description="Devices in the tensor-parallel group measured.")
    )
    metric: Literal["decode_ms_per_layer", "prefill_ms_per_layer", "memory_gb"] = Field(
        description="What was measured: the time per block of a decode step or of a prompt's "
        "prefill (`ms`), or the memory one device may fill (`gb`)."
    )
    batch: (
        Annotated[Count, Limit(ge=1, le=MAX_BATCH, why="more sequences than any engine batches")]
        | None
    ) = Field(None, description="decode_ms_per_layer: the sequences decoding at once.")
    prompt_tokens: (
        Annotated[
            TokenCount, Limit(ge=1, le=MAX_CONTEXT, why="longer than any model's context window")
        ]
        | None
    ) = Field(None, description="prefill_ms_per_layer: the prompt's length in tokens.")
    ms: (
        Annotated[
            Milliseconds,
            Limit(gt=0, le=60_000, why="a minute per block is no measurement of a serving step"),
        ]
        | None
    ) = Field(None, description="Milliseconds per block (`2.4`, `2.4 ms`, `900 us`).")
    gb: (
        Annotated[
            Gigabytes,
            Limit(gt=0, le=100_000, why="no device holds 100 TB"),
        ]
        | None
    ) = Field(
        None,
        description="memory_gb: GB one device may fill (`22`, `22 GB`, `20.5 GiB`); the "
        "catalog's usable memory where that is less.",
    )
    source: str | None = Field(
        None, max_length=MAX_NAME, description="Where it was measured (a URL, a log)."
    )

    @model_validator(mode="after")
    def _point(self) -> MeasuredLayerTime:
        """A decode time is at a batch, a prefill time at a prompt length: one point each; a
        memory figure is of one device, at no point."""
        if self.metric == "memory_gb":
            self._memory_figure()
            return self
        if self.ms is None:
            raise KeyValueError(f"a {self.metric} figure needs its `ms` per block", ("ms",))
        if self.gb is not None:
            raise KeyValueError(
                f"`gb` is the figure of a memory_gb entry, not of {self.metric}: drop it",
                ("gb",),
            )
        if self.metric == "decode_ms_per_layer":
            if self.batch is None:
                raise KeyValueError(
                    "a decode time needs the `batch` it was measured at", ("batch",)
                )
            if self.prompt_tokens is not None:
                raise KeyValueError(
                    "a decode time is measured at a `batch`, not at prompt_tokens: drop it "
                    "(a prompt's time is a prefill_ms_per_layer entry)",
                    ("prompt_tokens",),
                )
        if self.metric == "prefill_ms_per_layer":
            if self.prompt_tokens is None:
                raise KeyValueError(
                    "a prefill time needs the `prompt_tokens` it was measured at",
                    ("prompt_tokens",),
                )
            if self.batch is not None:
                raise KeyValueError(
                    "a prefill time is of one prompt of `prompt_tokens`, not at a batch: drop "
                    "it (decode steps by batch are decode_ms_per_layer entries)",
                    ("batch",),
                )
        return self

    def entry(self) -> Measurement:
        """The same figure as a `measured:` entry (the older spelling translated)."""
        given = {"batch": self.batch, "prompt_tokens": self.prompt_tokens, "source": self.source}
        return Measurement.model_validate(
            {
                "device": self.device,
                "tp": self.tp,
                "metric": self.metric,
                "value": self.gb if self.metric == "memory_gb" else self.ms,
                **{k: v for k, v in given.items() if v is not None},
            }
        )

    def _memory_figure(self) -> None:
        if self.gb is None:
            raise KeyValueError("a memory_gb entry needs `gb`, the GB one device may fill", ("gb",))
        for key in ("ms", "batch", "prompt_tokens"):
            if getattr(self, key) is not None:
                raise KeyValueError(
                    f"a memory_gb entry is one device's memory, with no `{key}`: drop it", (key,)
                )
        if self.tp != 1:
            raise KeyValueError(
                "a memory_gb entry is the memory of one device, whatever group it serves in: "
                "drop `tp`",
                ("tp",),
            )


def _list_or_path(schema: dict[str, Any]) -> None:
    """In the JSON Schema, `measured` is a list of entries or the path of a measurement table
    (planner.load_measured reads it in before validation)."""
    listed = {k: schema.pop(k) for k in ("type", "items", "maxLength", "maxItems") if k in schema}
    schema["anyOf"] = [listed, {"type": "string", "description": "a measurement table's path"}]


def _unbounded_schema(schema: dict[str, Any]) -> None:
    """In the JSON Schema, concurrency is a count or the word `unbounded` (null is refused)."""
    kinds = schema.get("anyOf", [])
    schema["anyOf"] = [k for k in kinds if k.get("type") != "null"] + [{"const": "unbounded"}]


class InferenceWorkload(ProblemModel):
    """Serve a model: hold `concurrency` sequences and produce `min_tokens_per_s` output tokens/s,
    or serve `requests_per_s` requests shaped by `request_mix`."""

    name: Name = Field(description="Unique name of the workload.")
    kind: Literal["inference"] = "inference"
    model: CatalogId = Field(description="Catalog model id.")
    weights: CatalogId = Field(
        "fp16",
        description="Weight format (fp16, bf16, fp8, int8, awq-int4, q4_k_m, mxfp8...), or a "
        "file mixed per tensor class: `mxfp4-experts+mlx-q8` (routed experts in MXFP4, every "
        "other weight in MLX 8-bit).",
    )
    kv: CatalogId = Field("fp16", description="KV-cache format (fp16, fp8, q8_0...).")
    engine: CatalogId | None = Field(
        None,
        description="Serving engine every replica runs (vllm, sglang, tensorrt-llm, llama.cpp, "
        "mlx, vllm-gaudi, vllm-tpu, vllm-neuron...; `planner catalog list engines`). Default: "
        "per device, the first engine the catalog's support matrix lists for the device's "
        "architecture, weight and KV formats.",
    )
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
    output_tokens: Annotated[
        TokenCount, Limit(ge=1, le=MAX_CONTEXT, why="longer than any model's context window")
    ] = Field(
        256,
        description="Average output tokens per request. With prompt_tokens it sets how much "
        "prefill each generated token brings (prompt_tokens / output_tokens prompt tokens per "
        "output token), which the serving model charges to every iteration. The default, 256, "
        "is an assumption close to chat traffic; state yours. A stated one must fit with "
        "prompt_tokens in context_tokens (a sequence's KV cache holds both).",
    )
    prefix_cache_hit: Annotated[
        Share, Limit(ge=0, lt=1, why="a prompt always has a token of its own to compute")
    ] = Field(
        0.0,
        description="Share of prompt tokens found in the engine's prefix cache (a shared system "
        "prompt, earlier turns): they cost no prefill compute. 0 to below 1, or `40%`.",
    )
    concurrency: (
        Annotated[
            Count,
            Limit(ge=1, le=1_000_000, why="a million sequences at once is beyond any fleet"),
        ]
        | None
    ) = Field(
        1,
        description="Sequences that exist at once: the fleet holds them all, and its output is "
        "what they make (at most concurrency / time per token). `unbounded` sizes for open-ended "
        "demand: every slot of every replica counts as filled.",
        json_schema_extra=_unbounded_schema,
    )
    max_e2e_s: (
        Annotated[
            Seconds,
            Limit(
                gt=0,
                le=86_400,
                why="a day per request is no ceiling; leave the key out instead",
                low_why="a ceiling of zero cannot be met",
            ),
        ]
        | None
    ) = Field(
        None,
        description="Ceiling on end-to-end request latency (first token plus the rest of the "
        "answer), seconds, at `latency_percentile`.",
    )
    latency_percentile: Literal[50, 90, 95, 99] = Field(
        50,
        description="The percentile at which max_ttft_s, max_ms_per_token and max_e2e_s hold "
        "under the plan's load (50, 90, 95 or 99).",
    )
    max_utilization: Annotated[
        Share, Limit(gt=0, le=1, why="a replica cannot be busier than 100 %")
    ] = Field(
        0.9,
        description="Request mixes: the most of a replica's request capacity the plan may use "
        "(headroom against queueing; latency ceilings may lower it further).",
    )
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
    requests_per_s: (
        Annotated[
            Number,
            Limit(gt=0, le=1e7, why="ten million requests/s is beyond any fleet"),
        ]
        | None
    ) = Field(None, description="Requests per second to serve (with request_mix).")
    request_mix: list[RequestClass] | None = Field(
        None,
        min_length=1,
        max_length=16,
        description="Histogram of request lengths: classes with input and output tokens and "
        "their shares. Replaces context_tokens, prompt_tokens, output_tokens, concurrency and "
        "min_tokens_per_s.",
    )
    measured: list[Measurement] = Field(
        default_factory=list,
        max_length=1024,
        description="Measured figures replacing the estimate for the device and degree they "
        "were measured on, in the format of `planner estimate --measured` tables "
        "(planner.schema.measurements): per-block decode times by batch "
        "(`decode_ms_per_layer`), prefill times by prompt length (`prefill_ms_per_layer`), the "
        "memory a device may fill (`memory_gb`), a request class's requests/s of one replica "
        "(`requests_per_s`), a replica's decode tokens/s at a batch (`decode_tokens_per_s`). "
        "Inline, or the path of a measurement table relative to the problem file: "
        "`[{device: t4, metric: decode_ms_per_layer, batch: 8, value: 2.4 ms}]` or "
        "`measured/t4.yaml`.",
        json_schema_extra=_list_or_path,
    )
    capacity: list[MeasuredCapacity] = Field(
        default_factory=list,
        max_length=256,
        description="Older spelling of `measured` requests_per_s entries: measured requests/s "
        "per replica and class, replacing the estimate.",
    )
    profiles: list[MeasuredLayerTime] = Field(
        default_factory=list,
        max_length=1024,
        description="Older spelling of `measured` per-block and memory entries: measured "
        "times per block by device (decode by batch, prefill by prompt length) and the memory "
        "a device may fill: `[{device: t4, metric: decode_ms_per_layer, batch: 8, ms: 2.4}, "
        "{device: t4, metric: memory_gb, gb: 14}]`.",
    )
    # Every measured figure, the older spellings translated, with where each stands in the
    # workload: (("capacity" | "profiles" | "measured", index), entry).
    _entries: list[tuple[tuple[str, int], Measurement]] = PrivateAttr(default_factory=list)
    disaggregation: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Request mixes: prefill and decode in separate pools sized together "
        "(possibly on different devices, the KV cache crossing the problem's network): `auto` "
        "lets the optimizer choose per request class, `on` requires it, `off` serves each "
        "request on one replica.",
    )

    @field_serializer("concurrency")
    def _write_unbounded(self, value: int | None) -> int | str:
        """Unbounded concurrency is written as the word a problem file uses for it."""
        return "unbounded" if value is None else value

    @model_validator(mode="before")
    @classmethod
    def _unbounded(cls, data: object) -> object:
        if isinstance(data, dict) and "concurrency" in data and data["concurrency"] is None:
            # An empty value is a slip, not a choice: it would size for open-ended demand.
            raise KeyValueError(
                "`concurrency` is empty: give the sequences that exist at once (a whole "
                "number), or `unbounded` to size for open-ended demand",
                ("concurrency",),
            )
        said = data.get("concurrency") if isinstance(data, dict) else None
        if isinstance(said, str) and said.strip().lower() == "unbounded":
            data = {**data, "concurrency": None}  # type: ignore[dict-item]
        if isinstance(data, dict) and isinstance(data.get("disaggregation"), bool):
            # YAML 1.1 reads unquoted on / off as booleans: take them as meant.
            data = {**data, "disaggregation": "on" if data["disaggregation"] else "off"}
        return data

    @model_validator(mode="after")
    def _measured(self) -> InferenceWorkload:
        """Every measured figure as one entry list; one figure per device, degree, metric and
        measured point (one memory figure per device)."""
        entries = [(("capacity", j), m.entry()) for j, m in enumerate(self.capacity)]
        entries += [(("profiles", j), p.entry()) for j, p in enumerate(self.profiles)]
        entries += [(("measured", j), m) for j, m in enumerate(self.measured)]
        seen: dict[tuple[object, ...], tuple[str, int]] = {}
        for at, m in entries:
            key: tuple[object, ...] = (m.device, m.tp, m.metric, m.batch, m.prompt_tokens)
            key += (m.request_class,)
            if m.replica:
                key += (m.context, m.model, m.weights, m.kv)
            if key in seen:
                first = f"{seen[key][0]}[{seen[key][1]}]"
                raise KeyValueError(
                    f"{m.device} at tp {m.tp} has two {m.metric} figures at this point "
                    f"({first} and {at[0]}[{at[1]}]); keep one",
                    at,
                )
            seen[key] = at
        if any(m.metric == "memory_gb" and m.tp != 1 for _, m in entries):
            at = next(a for a, m in entries if m.metric == "memory_gb" and m.tp != 1)
            raise KeyValueError(
                "a memory_gb entry is the memory of one device, whatever group it serves in: "
                "drop `tp`",
                (*at, "tp"),
            )
        self._entries = entries
        return self

    @property
    def measured_entries(self) -> list[tuple[tuple[str, int], Measurement]]:
        """Every measured figure (`measured`, and the older `capacity` and `profiles`
        translated), with where it stands in the workload."""
        return list(self._entries)

    @property
    def capacities(self) -> list[Measurement]:
        """Measured requests/s of one replica by request class."""
        return [m for _, m in self._entries if m.metric == "requests_per_s"]

    @property
    def layer_times(self) -> list[Measurement]:
        """Measured times per block and memory figures (planner.estimator.profiles)."""
        kinds = ("decode_ms_per_layer", "prefill_ms_per_layer", "memory_gb")
        return [m for _, m in self._entries if m.metric in kinds]

    @property
    def replica_figures(self) -> list[Measurement]:
        """Measured whole-replica figures (decode tokens/s of a group at a batch)."""
        return [m for _, m in self._entries if m.replica]

    @property
    def has_profiles(self) -> bool:
        """Whether any measured figure changes a stage's time per block or its memory."""
        return bool(self.layer_times or self.replica_figures)

    def keeping(self, keep: Callable[[Measurement], bool]) -> InferenceWorkload:
        """The workload with only the measured figures `keep` accepts, in every spelling."""
        update = {
            "capacity": [m.model_dump() for m in self.capacity if keep(m.entry())],
            "profiles": [p.model_dump() for p in self.profiles if keep(p.entry())],
            "measured": [m.model_dump() for m in self.measured if keep(m)],
        }
        return type(self).model_validate({**self.model_dump(), **update})

    def capped_usable(self, device: str, usable: float) -> float:
        """`usable` bytes of one `device` (the catalog's), at most its memory_gb figure here."""
        cap = self.memory_cap_bytes(device)
        return usable if cap is None else min(usable, cap)

    def memory_cap_where(self, device: str) -> str:
        """Where `device`'s memory_gb figure stands (`workloads.chat.measured[2]`)."""
        for (key, j), m in self._entries:
            if m.metric == "memory_gb" and m.device == device:
                return f"workloads.{self.name}.{key}[{j}]"
        return f"workloads.{self.name}.measured"

    def memory_cap_bytes(self, device: str) -> float | None:
        """Bytes one `device` may fill in this workload's stages (its memory_gb entry), or None
        where the workload states none."""
        for m in self.layer_times:
            if m.metric == "memory_gb" and m.device == device:
                return m.value * 1e9
        return None

    @model_validator(mode="after")
    def _mix(self) -> InferenceWorkload:
        if self.prompt_tokens > self.context_tokens:
            given = "" if "prompt_tokens" in self.model_fields_set else " (the default)"
            raise KeyValueError(
                f"a prompt_tokens of {self.prompt_tokens:,}{given} does not fit in a "
                f"context_tokens of {self.context_tokens:,}: lower prompt_tokens or raise "
                "context_tokens",
                ("prompt_tokens",),
            )
        whole = self.prompt_tokens + self.output_tokens
        # (With a request_mix, output_tokens does not belong at all: that refusal below says so,
        # not this one's advice to raise a context_tokens that does not belong either.)
        stated = "output_tokens" in self.model_fields_set and self.request_mix is None
        if stated and whole > self.context_tokens:
            # A sequence holds its prompt and its answer in the KV cache, and the engine's
            # maximum length (vLLM's --max-model-len, the recipe's) is context_tokens: a stated
            # answer that cannot fit would be cut short, or the request refused, while the plan
            # counted every token. (The default of 256 is an assumption; a stated one is not.)
            raise KeyValueError(
                f"a prompt_tokens of {self.prompt_tokens:,} and an output_tokens of "
                f"{self.output_tokens:,} make {whole:,} tokens per sequence, more than the "
                f"context_tokens of {self.context_tokens:,} its KV cache holds: raise "
                f"context_tokens to at least {whole:,}, or lower prompt_tokens or output_tokens",
                ("output_tokens",),
            )
        if self.request_mix is None:
            for key in ("requests_per_s", "capacity"):
                if getattr(self, key):
                    raise KeyValueError(f"`{key}` goes with a request_mix", (key,))
            for at, m in self._entries:
                if m.metric == "requests_per_s":
                    raise KeyValueError(
                        "a requests_per_s figure is of a request class: it goes with a request_mix",
                        at,
                    )
            if self.disaggregation == "on":
                raise KeyValueError(
                    "disaggregated pools are sized from a request rate: give a request_mix "
                    "with requests_per_s, or leave `disaggregation` out",
                    ("disaggregation",),
                )
            return self
        if self.requests_per_s is None:
            raise KeyValueError("a request_mix needs requests_per_s", ("request_mix",))
        fields = type(self).model_fields
        for key in (
            "context_tokens",
            "prompt_tokens",
            "output_tokens",
            "concurrency",
            "min_tokens_per_s",
        ):
            if getattr(self, key) != fields[key].default:
                raise KeyValueError(
                    f"`{key}` does not go with a request_mix: the classes' lengths and the "
                    "request rate say it; leave the key out",
                    (key,),
                )
        total = sum(c.share for c in self.request_mix)
        if abs(total - 1.0) > 1e-3:
            raise KeyValueError(
                f"the request_mix shares add up to {total:.4g}, not 1 (100 %)", ("request_mix",)
            )
        names = [c.name for c in self.request_mix]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise KeyValueError(
                    f"two request classes are named `{n}`", ("request_mix", i, "name")
                )
        for at, m in self._entries:
            if m.metric == "requests_per_s" and m.request_class not in names:
                raise KeyValueError(
                    f"unknown request class `{m.request_class}`"
                    f"{did_you_mean(str(m.request_class), names)} (classes: {', '.join(names)})",
                    (*at, "class"),
                )
        return self


def default_recompute(method: str) -> Literal["selective", "full"]:
    """Activation recomputation when none is given, the same for `solve` and `estimate`: full for
    LoRA and QLoRA (the QLoRA paper's recipe, PEFT's and torchtune's defaults checkpoint every
    layer: memory is what these methods are chosen for), selective for full training (Korthikanti
    et al. 2022: most of the memory saving for a few percent of recomputation)."""
    return "full" if method in ("lora", "qlora") else "selective"


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
        Count, Limit(ge=1, le=MAX_MICRO_BATCH, why="larger micro-batches fit on no device")
    ] = Field(1, description="Sequences per device per step.")
    recompute: Literal["none", "selective", "full"] = Field(
        "selective",
        description="Activation recomputation; when not given, full for lora and qlora, "
        "selective for full training (see default_recompute).",
    )
    lora_rank: Annotated[
        Count,
        Limit(ge=1, le=MAX_LORA_RANK, why="a rank this high is a full fine-tune; use method: full"),
    ] = Field(16, description="LoRA rank (lora and qlora).")

    @model_validator(mode="before")
    @classmethod
    def _default_recompute(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("recompute") is None:
            method = data.get("method", "full")
            return {**data, "recompute": default_recompute(str(method))}
        return data

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

# A price (not a limit) of a device or its rent: zero would make it free.
Price = Annotated[
    Usd,
    Limit(
        gt=0,
        le=MAX_USD,
        why="more than a trillion dollars is no device's price; check the units",
        low_why="a device at no price is one you own: list it under `inventory` instead",
    ),
]
# A million dollars an hour (MAX_RENT_USD_PER_HOUR), not a trillion: a trillion times the
# 175,200 hours of a 20-year horizon overflowed the solver's 64-bit objective (exit 1).
RentRate = Annotated[
    Usd,
    Limit(
        gt=0,
        le=MAX_RENT_USD_PER_HOUR,
        why="a million dollars an hour is no device's rent; check the units",
        low_why="a rent of zero would make the device free; leave the field out to use the "
        "catalog's rate, or list devices you own under `inventory`",
    ),
]

# A monthly facility price of 0 is meaningful: the space or power capacity costs nothing (as
# leaving the field out says).
# Capped at a million dollars a month per unit: a trillion (the cap of other prices) times the
# rack units or kilowatts of a fleet and the months of its horizon overflowed the solver's 64-bit
# objective ("the solver model is invalid", exit 1) at $1e11 per U-month over 20 years.
MAX_FACILITY_USD_PER_MONTH = 1e6
FacilityPrice = Annotated[
    Usd,
    Limit(
        ge=0,
        le=MAX_FACILITY_USD_PER_MONTH,
        why="a million dollars a month for one rack unit or one kW is no facility's price; "
        "check the units",
        low_why="a negative price would pay for the space; leave the field out for no charge",
    ),
]

# A capex ceiling of 0 is meaningful: "buy nothing, use what we own" (the inventory).
CapexDollars = Annotated[
    Usd,
    Limit(
        ge=0,
        le=MAX_USD,
        why="more than a trillion dollars is no fleet's budget; check the units",
    ),
]


class OwnedDevices(ProblemModel):
    device: CatalogId = Field(description="Catalog device id.")
    count: Annotated[
        Count, Limit(ge=1, le=MAX_DEVICES, why=f"more than {MAX_DEVICES:,} devices of one type")
    ] = Field(description="How many are owned.")
    machine: StatedId | None = Field(
        None,
        description="The machines they sit in: a `machines` id (each holds its `slots` of "
        "them, so `count` / slots machines). Unset: the catalog's host for the device, filled "
        "to its slots.",
    )


# A share of an estimate held back (a risk margin, a derating): above 90 % nothing is left.
Discount = Annotated[
    Share, Limit(ge=0, le=0.9, why="more than 90 % held back leaves no estimate to plan on")
]


class Constraints(ProblemModel):
    budget_usd: Dollars | None = Field(
        None,
        description="Ceiling on total cost over the horizon, USD: a number, or `$2M`, `$250k`, "
        "`2,000,000 USD`, `1.5 million` (k, M, B are powers of 1,000).",
    )
    capex_usd: CapexDollars | None = Field(
        None,
        description="Ceiling on money spent up front, USD: a number or `$500k` (as budget_usd); "
        "0 buys nothing and plans on the inventory alone.",
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
    allowed_hosts: list[CatalogId] | None = Field(
        None,
        min_length=1,
        max_length=MAX_DEVICE_LIST,
        description="Only these host types on premises (catalog node ids, `planner catalog list "
        "nodes`; default every host that takes the device): for example [desktop-1] when the "
        "devices go one to a desktop. Owned devices stay in the hosts they sit in; rented ones "
        "in the provider's machines.",
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
        "eth-100g",
        description="Link id between nodes (pipeline hops, gradients). Unset where every "
        "device is a whole machine (a Mac mini, a DGX Spark, a Raspberry Pi): the slowest "
        "built-in wired port they all share (their catalog `ports`), which the plan notes as "
        "assumed, or an error where they share none. Unset otherwise: eth-100g.",
    )
    heterogeneous_pipelines: StrictBool = Field(
        True,
        description="Allow two device types in one replica (three or four where the problem "
        "owns that many device types the workload may use).",
    )
    cross_stack_pipelines: StrictBool = Field(
        False,
        description="Allow one replica to span vendors or engine backends (an NVIDIA card and "
        "a Mac) where its engine runs such pipelines (llama.cpp RPC, exo). Off: every replica "
        "runs on one vendor's stack.",
    )
    engines: list[CatalogId] | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Only these serving engines (default: any the support matrix lists).",
    )
    min_architecture: list[CatalogId] = Field(
        default_factory=list,
        max_length=64,
        description="Oldest architecture allowed, per line of chips: `[ampere, cdna3]` keeps "
        "NVIDIA GPUs from Ampere and AMD Instinct from CDNA 3 on; lines not named are not "
        "limited (`planner catalog list architectures`).",
    )
    min_confidence: Literal["prior", "extrapolated", "interpolated", "measured"] = Field(
        "prior",
        description="Weakest backing a design may have: `interpolated` allows only designs "
        "whose devices have calibration rows under their engine around their batch (or at it), "
        "`measured` only at it; `prior` (the default) allows every design and labels it.",
    )
    risk_margin: Discount = Field(
        0.0,
        description="Share of the estimated tokens/s held back on designs the calibration does "
        "not back (confidence `extrapolated` or `prior`): their replicas meet a workload's "
        "min_tokens_per_s with (1 - risk_margin) of their estimate, so the plan carries spare "
        "capacity where its figures are least certain. 0 (the default): none. Fixed-rate "
        "workloads; a request mix's rates are not discounted.",
    )
    exclude_end_of_life: StrictBool = Field(
        False,
        description="Leave out devices whose architecture the vendor's current software no "
        "longer supports (Pascal and Volta since CUDA 13).",
    )
    max_rack_units: (
        Annotated[Count, Limit(ge=1, le=1_000_000, why="a million rack units is ~20,000 racks")]
        | None
    ) = Field(None, description="Ceiling on rack units of all nodes.")
    max_carbon_kgco2e: (
        Annotated[
            Number,
            Limit(gt=0, le=1e10, why="ten million tonnes is beyond any fleet's footprint"),
        ]
        | None
    ) = Field(
        None,
        description="Ceiling on carbon over the horizon, kg CO2e: grid emissions of the energy "
        "used plus the embodied share of the devices (needs a `carbon` section).",
    )
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
    consumer_derating: Discount = Field(
        0.2,
        description="Throughput consumer cards (RTX 4090, RTX 3090...) lose sustained in a "
        "multi-card chassis, a share: built for one card in an open desktop case, packed ones "
        "throttle. 0.2 is the middle of the 15-25 % the reference text on GPU selection gives "
        "for dense deployments (reference text 001, 'Ignoring Thermal Constraints in Dense "
        "Deployments'); 0 turns it off. One card in a desktop runs at full speed.",
    )
    procurement: Literal["buy", "rent"] | list[Mode] = Field(
        "buy",
        description="How devices may be had: `buy`, `rent` (on demand), or a list the optimizer "
        "may mix: [buy, on_demand, reserved, spot].",
    )

    @field_validator("procurement", mode="before")
    @classmethod
    def _one_word(cls, value: object) -> object:
        """Anything but `buy`, `rent` or a list of modes gets every accepted form at once (the
        union's two branches would each say half of it)."""
        modes = get_args(Mode)
        forms = (
            "`buy`, `rent` (on demand), or a list of the modes to mix, "
            "[buy, on_demand, reserved, spot]"
        )
        if isinstance(value, list | tuple):
            bad = next((x for x in value if not (isinstance(x, str) and x in modes)), None)
            if bad is None or not value:
                return list(value)
            near = (
                "; in a list, renting on demand is `on_demand`"
                if bad == "rent"
                else did_you_mean(bad, modes)
                if isinstance(bad, str)
                else ""
            )
            raise ValueError(f"`{bad}` in the list is not a procurement mode: {forms}{near}")
        if isinstance(value, str) and value in ("buy", "rent"):
            return value
        if not isinstance(value, str):
            shown = "an empty value" if value is None else f"`{value}`"
            raise ValueError(f"{shown} is not a procurement: {forms}")
        one = f"; to allow only {value}, write [{value}]" if value in modes else ""
        near = "" if one else did_you_mean(value, ("rent", *modes))
        raise ValueError(f"`{value}` is not a procurement: {forms}{one}{near}")

    maintenance_per_year: Annotated[
        Share, Limit(ge=0, le=1, why="upkeep above the purchase price every year")
    ] = Field(
        0.0,
        description="Yearly upkeep of bought devices and hosts, share of their price: `5%`.",
    )
    rack_usd_per_u_month: FacilityPrice | None = Field(
        None,
        description="Rack space for what is on premises (hosts and switches), USD per rack unit "
        "per month, as colocation prices it; none: no charge.",
    )
    facility_usd_per_kw_month: FacilityPrice | None = Field(
        None,
        description="Facility power capacity, USD per kW of the on-premises fleet's power at "
        "load (its busiest period) per month, as colocation prices it; none: no charge. "
        "Electricity is `electricity_usd_per_kwh` on top.",
    )

    @property
    def modes(self) -> tuple[Mode, ...]:
        """The procurement modes allowed, in a fixed order."""
        if self.procurement == "buy":
            return ("buy",)
        if self.procurement == "rent":
            return ("on_demand",)
        return tuple(m for m in MODES if m in self.procurement)

    @model_validator(mode="after")
    def _modes(self) -> Horizon:
        if isinstance(self.procurement, list):
            if not self.procurement:
                raise KeyValueError("list at least one of " + ", ".join(MODES), ("procurement",))
            for i, m in enumerate(self.procurement):
                if m in self.procurement[:i]:
                    raise KeyValueError(f"`{m}` is listed twice", ("procurement", i))
        return self


class PriceOverride(ProblemModel):
    """Prices of one device that replace the catalog's for this problem."""

    purchase_usd: Price | None = Field(None, description="Purchase price of one device, USD.")
    rent_usd_per_hour: RentRate | None = Field(None, description="On-demand rent, USD/hour.")
    reserved_usd_per_hour: RentRate | None = Field(
        None, description="Reserved rent per device-hour, USD (paid for every hour of the term)."
    )
    spot_usd_per_hour: RentRate | None = Field(None, description="Spot rent, USD/hour.")


class Market(ProblemModel):
    """Rent terms and price overrides."""

    reserved_discount: Annotated[Share, Limit(ge=0, lt=1, why="a discount of 100 % is free")] = (
        Field(
            0.4,
            description="Reserved rent below on-demand, where the catalog has no reserved rate.",
        )
    )
    reserved_term_years: Annotated[
        Years, Limit(gt=0, le=5, why="reserved terms run one to three years")
    ] = Field(
        1.0,
        description="Reserved commitment; a term longer than the horizon is paid in full.",
    )
    spot_discount: Annotated[Share, Limit(ge=0, lt=1, why="a discount of 100 % is free")] = Field(
        0.65,
        description="Spot rent below on-demand, where the catalog has no spot rate.",
    )
    spot_availability: Annotated[
        Share, Limit(gt=0, le=1, why="a share", low_why="spot capacity that is never there")
    ] = Field(
        0.9,
        description="Share of rented spot devices expected up at any time; the plan rents "
        "enough spot devices that this share covers the load put on spot.",
    )
    spot_max_share: Annotated[Share, Limit(ge=0, le=1, why="a share")] = Field(
        0.5,
        description="Most of each period's devices in use that may be spot (the rest must not "
        "vanish).",
    )
    prices: dict[CatalogId, PriceOverride] = Field(
        default_factory=dict, description="Per device id: prices replacing the catalog's."
    )
    conditions: list[Literal["new", "refurbished", "used"]] | None = Field(
        None,
        description="Conditions a catalog purchase price may be in to be bought: any of new, "
        "refurbished, used. Unset: new only for datacenter parts and ASICs, any for the others "
        "(consumer cards, workstations, desktops). A device whose catalog price is in another "
        "condition can still be rented or owned; `prices` here always counts.",
    )

    rent_offers: list[CatalogId] | None = Field(
        None,
        min_length=1,
        description="Which rental offers a plan may rent from: cloud providers (`aws`, `azure`) "
        "or instance ids of catalog/instances.yaml (`aws-p5.48xlarge`), rented whole, and "
        "`per-device` for the catalog's per-device rents (clouds that rent one device at a time). "
        "Unset: all of them. Each device type is rented through the allowed offer with the "
        "lowest on-demand rate per device; `prices` here replaces the per-device rent.",
    )

    def may_buy(self, condition: str, device_class: str) -> bool:
        """Whether a catalog purchase price in `condition` counts for a device of that class."""
        if self.conditions is not None:
            return condition in self.conditions
        return condition == "new" or device_class not in ("datacenter", "asic")


class Period(ProblemModel):
    """A stretch of the typical day or week with its demand."""

    name: Name = Field(description="Name of the period, e.g. night.")
    share: Annotated[
        Share, Limit(gt=0, le=1, why="a share of the time", low_why="a period that never comes")
    ] = Field(description="Share of all hours: 0.25 or `25%` (the shares add up to at most 1).")
    scale: Annotated[Number, Limit(ge=0, le=1000, why="demand above 1000x the stated rate")] = (
        Field(description="Demand as a multiple of each inference workload's stated rate.")
    )
    grid_gco2e_per_kwh: (
        Annotated[Number, Limit(ge=0, le=2000, why="above the dirtiest grids (~1,000)")] | None
    ) = Field(None, description="Grid carbon intensity in this period (default: `carbon`'s).")


class Demand(ProblemModel):
    """How demand moves over time: per hour of a typical day or week, or named periods. Owned
    capacity is sized for the busiest period; on-demand and spot rent follow each period."""

    hourly: (
        list[Annotated[Number, Limit(ge=0, le=1000, why="above 1000x the stated rate")]] | None
    ) = Field(
        None,
        description="24 (a day) or 168 (a week) multiples of each inference workload's rate.",
    )
    periods: list[Period] | None = Field(None, min_length=1, max_length=168)
    levels: int | None = Field(
        None,
        ge=1,
        le=168,
        description="At most this many demand levels are planned for: the hourly values are "
        "merged into them, each hour rounded up to its level, so every hour is still met and the "
        "peak is unchanged (168 keeps every value). Default: at least 12, more while the rounding "
        "adds over 0.5 % to the demand-hours, at most 48. The plan states what merging added.",
    )

    @model_validator(mode="after")
    def _one(self) -> Demand:
        if (self.hourly is None) == (self.periods is None):
            raise KeyValueError("give either `hourly` or `periods`", ())
        if self.hourly is not None and len(self.hourly) not in (24, 168):
            raise KeyValueError(
                f"`hourly` has {len(self.hourly)} values: give 24 (a day) or 168 (a week)",
                ("hourly",),
            )
        scales = self.hourly if self.hourly is not None else [p.scale for p in self.periods or []]
        if not any(scales):
            raise KeyValueError(
                "every hour has a demand of 0: there is nothing to plan for; give at least one "
                "hour a demand above 0",
                ("hourly" if self.hourly is not None else "periods",),
            )
        if self.periods is not None:
            names = [p.name for p in self.periods]
            for i, n in enumerate(names):
                if n in names[:i]:
                    raise KeyValueError(
                        f"two demand periods are named `{n}`; names must be unique",
                        ("periods", i, "name"),
                    )
            total = sum(p.share for p in self.periods)
            if total > 1 + 1e-6:
                raise KeyValueError(
                    f"the period shares add up to {total:.4g}, more than all of the time",
                    ("periods",),
                )
        return self


class Carbon(ProblemModel):
    """Grid carbon intensity and how embodied carbon is spread (Software Carbon Intensity)."""

    region: CatalogId | None = Field(None, description="Catalog region id (its grid intensity).")
    grid_gco2e_per_kwh: (
        Annotated[Number, Limit(ge=0, le=2000, why="above the dirtiest grids (~1,000)")] | None
    ) = Field(None, description="Grid intensity, g CO2e per kWh (instead of a region).")
    device_life_years: Annotated[
        Years,
        Limit(
            ge=1 / HOURS_PER_YEAR,
            le=20,
            why="no accelerator serves more than 20 years",
            # 1e-9 years once overflowed the solver's integers (exit 1) on a rented fleet
            low_why="a device's embodied carbon is spread over at least an hour (1/8760 year)",
        ),
    ] = Field(
        5.0,
        description="Expected life over which a device's embodied carbon is spread; the plan "
        "carries the share for the hours it holds the device.",
    )

    @model_validator(mode="after")
    def _one(self) -> Carbon:
        if (self.region is None) == (self.grid_gco2e_per_kwh is None):
            raise KeyValueError("give either `region` or `grid_gco2e_per_kwh`", ())
        return self


class Objective(ProblemModel):
    goal: Literal[
        "min_cost", "max_throughput", "max_tokens_per_joule", "min_cost_per_token", "min_carbon"
    ] = "min_cost"
    tie_break: Literal["min_cost", "max_throughput", "min_power", None] = Field(
        None,
        description="Second objective among plans optimal for the first; by default min_cost "
        "for min_carbon and max_throughput (the cheapest of the best plans).",
    )
    tokens: Literal["output", "all"] = Field(
        "output",
        description="What max_throughput and max_tokens_per_joule count: output tokens, or "
        "prompt plus output tokens (`all`).",
    )


class StatedLink(ProblemModel):
    """A network the problem states by its figures (a home router, an office switch, a
    measured Wi-Fi), usable wherever a catalog link id is (`constraints.network`, a segment's
    `link`, a machine's `network` or `attach`), or a link `between` two machine kinds or two
    segments."""

    id: StatedId = Field(
        description="The name `constraints.network` (or a segment, a machine) uses; not a "
        "catalog link's id."
    )
    name: str | None = Field(None, max_length=MAX_NAME, description="Shown on the plan.")
    kind: Literal["ethernet", "wifi", "thunderbolt", "roce", "infiniband"] = Field(
        "ethernet", description="What carries it."
    )
    bandwidth_gbit_s: Annotated[
        GigabitsPerSecond,
        Limit(
            ge=0.001,
            le=100_000,
            why="100 Tb/s per port is beyond any link; check the units (Gb/s)",
            low_why="under 1 Mb/s no network carries a model's activations; check the units (Gb/s)",
        ),
    ] = Field(
        description="Per direction, per machine, gigabits per second (1 GbE: `1` or `1 Gb/s`; "
        "`500 Mb/s`; `1.25 GB/s` is bytes, 10 Gb/s)."
    )
    latency_ms: Annotated[
        Milliseconds,
        Limit(ge=0, le=1000, why="a second one way is not a network to split a model over"),
    ] = Field(description="One-way latency of a small message, milliseconds (`1 ms`, `50 us`).")
    price_usd_per_port: Annotated[
        Usd, Limit(ge=0, le=1e6, why="a million dollars is no port's price; check the units")
    ] = Field(0.0, description="What joining one more machine costs; 0: the network is there.")
    between: list[StatedId] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="What it joins directly, if not every machine: two `machines` kinds (a "
        "Thunderbolt cable between a mac-studio and a mac-mini) or two `segments` (the uplink "
        "between an office and a lab). A pipeline hop between those machines, or between "
        "machines of those segments, crosses it (docs/networks.md). Unset: a network named by "
        "`constraints.network`, a segment's `link`, a machine's `network` or `attach`.",
    )


class StatedMachine(ProblemModel):
    """A kind of machine owned devices sit in, stated by its figures (a lab PC with one GPU, a
    workstation with four, two cards joined by an NVLink bridge), named by
    `constraints.inventory[].machine`. Devices in such machines are the pool: more of them are
    bought only into new machines of the kind at its `price_usd`."""

    id: StatedId = Field(description="The name inventory entries use; not a catalog node's id.")
    name: str | None = Field(None, max_length=MAX_NAME, description="Shown on the plan.")
    slots: Annotated[
        Count,
        Limit(ge=1, le=72, why="more than 72 accelerators in one machine: state the machines"),
    ] = Field(1, description="Devices each machine holds (1: each device is its own machine).")
    link: CatalogId = Field(
        "pcie4",
        description="Catalog link between its devices: `pcie3`, `pcie4`, `pcie5`, or a "
        "scale-up link its devices carry (`nvlink-bridge-ampere` for two bridged RTX 3090s); "
        "tensor parallelism inside a machine runs over it where nothing is rented (over PCIe "
        "only where "
        "`tensor_parallel_over_pcie` allows).",
    )
    power_w: Annotated[
        Watts,
        Limit(ge=0, le=100_000, why="100 kW for one machine's own parts; check the units"),
    ] = Field(
        description="What one machine draws beyond its accelerators at load (CPU, memory, "
        "fans, disks, power-supply losses), watts: counted in the plan's power and energy."
    )
    rack_units: Annotated[
        Count, Limit(ge=1, le=64, why="more than 64 rack units for one machine")
    ] = Field(2, description="Rack units (or shelf units) one machine takes.")
    network: CatalogId | None = Field(
        None,
        description="The link joining machines of this kind among themselves (a cable between "
        "two DGX Sparks, a Thunderbolt ring of Macs): a catalog link or one stated under "
        "`links`. Tensor-parallel groups across these machines all-reduce over it; pipeline "
        "hops between two of them cross it too (only it). Unset: their segment's link, or "
        "constraints.network.",
    )
    segment: StatedId | None = Field(
        None,
        description="The network segment its machines sit on (a `segments` id: a home LAN, a "
        "lab): hops to machines of the same segment cross the segment's `link`, to other "
        "segments also the link `between` the two. Unset: the machines sit on "
        "`constraints.network`.",
    )
    attach: CatalogId | None = Field(
        None,
        description="The link its machines hang off their segment (or constraints.network) by, "
        "when it is not the segment's own: Wi-Fi to the access point, a slower port. A catalog "
        "link or one stated under `links`; every hop leaving such a machine for another also "
        "crosses it. Unset: a port of the segment's own link.",
    )
    price_usd: (
        Annotated[
            Usd,
            Limit(ge=0, le=1e7, why="ten million dollars is no machine's price; check the units"),
        ]
        | None
    ) = Field(
        None,
        description="What one more such machine costs without its devices, USD: devices of "
        "its kind may then be bought (at their catalog or market price) into new machines of "
        "this kind to top up the pool. Unset: the pool is what is owned, none bought.",
    )


class Segment(ProblemModel):
    """A network segment machines sit on (a home LAN, a lab's switch), named by
    `machines[].segment`; segments meet over a link stated `between` them, else over
    `constraints.network`."""

    id: StatedId = Field(description="The name machines' `segment` uses.")
    name: str | None = Field(None, max_length=MAX_NAME, description="Shown on the plan.")
    link: CatalogId = Field(
        description="The link joining machines on this segment: a catalog link or one stated "
        "under `links`."
    )


def _check_between(
    lk: StatedLink, i: int, kinds: set[str], segs: set[str], pairs: dict[frozenset[str], str]
) -> None:
    """Link `lk` (entry `i` of `links`) joins two machine kinds or two segments, each pair by
    one link only (`pairs`: what earlier links join)."""
    at = ("links", i, "between")
    a, b = lk.between or ("", "")
    if a == b:
        raise KeyValueError(
            f"`{lk.id}` is between `{a}` and itself: machines of one kind join over the "
            "machine's `network`, those of one segment over the segment's `link`",
            at,
        )
    for x in (a, b):
        if x not in kinds and x not in segs:
            known = ", ".join(sorted(kinds | segs)) or "none: add `machines` or `segments`"
            raise KeyValueError(
                f"`{lk.id}` is between `{x}`, which is no machine or segment (names: {known})",
                at,
            )
    if (a in kinds) != (b in kinds):
        raise KeyValueError(
            f"`{lk.id}` is between a machine and a segment (`{a}`, `{b}`): name two machine "
            "kinds (a cable between them) or two segments (the link joining them); a machine "
            "joins its segment by its `attach`",
            at,
        )
    pair = frozenset((a, b))
    if pair in pairs:
        raise KeyValueError(
            f"`{lk.id}` and `{pairs[pair]}` are both between `{a}` and `{b}`; state one link "
            "per pair",
            at,
        )
    pairs[pair] = lk.id


class Phase(ProblemModel):
    """A stretch of the horizon in which some workloads run on the fleet, before or after the
    workloads of the other phases."""

    name: Name = Field(description="Name of the phase, e.g. train or serve.")
    workloads: list[Name] = Field(
        min_length=1, description="Names of the workloads that run in this phase."
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
    market: Market = Market()
    demand: Demand | None = None
    carbon: Carbon | None = None
    objective: Objective = Objective()
    links: list[StatedLink] = Field(
        default_factory=list,
        max_length=64,
        description="Networks stated by their figures, named in `constraints.network` (or a "
        "segment's `link`, a machine's `network` or `attach`) like a catalog link: "
        "`[{id: home-lan, bandwidth_gbit_s: 1, latency_ms: 1}]`; with `between: [a, b]`, a "
        "link joining only two machine kinds or two segments.",
    )
    machines: list[StatedMachine] = Field(
        default_factory=list,
        max_length=64,
        description="Kinds of machines owned devices sit in, stated by their figures, named by "
        "`constraints.inventory[].machine`: `[{id: lab-pc, slots: 1, power_w: 150}]`.",
    )
    segments: list[Segment] = Field(
        default_factory=list,
        max_length=64,
        description="Network segments machines sit on, each with the link joining its "
        "machines: `[{id: home, link: home-lan}, {id: lab, link: lab-10g}]`; a link stated "
        "`between: [home, lab]` joins two of them (docs/networks.md).",
    )
    phases: list[Phase] | None = Field(
        None,
        min_length=2,
        max_length=MAX_WORKLOADS,
        description="Workloads that run one after another on the same devices, in order: "
        "`[{name: train, workloads: [pretrain]}, {name: serve, workloads: [chat]}]`. Every "
        "workload is in one phase; phases before the last hold training jobs with a "
        "`deadline_hours`, and each lasts its longest deadline; the last phase runs the rest of "
        "the horizon (its demand periods share those hours). Owned devices serve every phase, "
        "so the fleet is sized for the largest phase, not their sum. Unset: every workload "
        "runs at once.",
    )

    @model_validator(mode="after")
    def _workload_names(self) -> Problem:
        """Workload names are unique. Checked first: every check after it finds a workload by
        its name (two named `pretrain` once read "`pretrain` is an inference workload: it
        belongs in the last phase")."""
        seen: set[str] = set()
        for i, w in enumerate(self.workloads):
            if w.name in seen:
                raise KeyValueError(
                    f"two workloads are named `{w.name}`; names must be unique",
                    ("workloads", i, "name"),
                )
            seen.add(w.name)
        return self

    @model_validator(mode="after")
    def _links(self) -> Problem:
        for i, lk in enumerate(self.links):
            if any(q.id == lk.id for q in self.links[:i]):
                raise KeyValueError(f"two links are named `{lk.id}`", ("links", i, "id"))
        return self

    @model_validator(mode="after")
    def _machines(self) -> Problem:
        """Machine ids are unique, every inventory `machine` names one, and a device type sits
        in one kind of machine (the plan puts every device of a type in one host type)."""
        ids = [mc.id for mc in self.machines]
        for i, mc in enumerate(self.machines):
            if mc.id in ids[:i]:
                raise KeyValueError(f"two machines are named `{mc.id}`", ("machines", i, "id"))
        kind: dict[str, str | None] = {}
        for i, o in enumerate(self.constraints.inventory):
            at = ("constraints", "inventory", i, "machine")
            if o.machine is not None and o.machine not in ids:
                known = ", ".join(ids) if ids else "none: add a `machines` section"
                raise KeyValueError(f"unknown machine `{o.machine}` (machines: {known})", at)
            if o.device in kind and kind[o.device] != o.machine:
                raise KeyValueError(
                    f"{o.device} is listed in machine `{kind[o.device] or 'the catalog host'}` "
                    f"and in `{o.machine or 'the catalog host'}`; every {o.device} sits in one "
                    "kind of machine: list it once",
                    at,
                )
            kind[o.device] = o.machine
        return self

    @model_validator(mode="after")
    def _segments(self) -> Problem:
        """Segment ids are unique and apart from machine ids, every machine's `segment` names
        one, and a link `between` joins two machine kinds or two segments, once per pair."""
        segs = [g.id for g in self.segments]
        kinds = {mc.id for mc in self.machines}
        for i, g in enumerate(self.segments):
            if g.id in segs[:i]:
                raise KeyValueError(f"two segments are named `{g.id}`", ("segments", i, "id"))
            if g.id in kinds:
                raise KeyValueError(
                    f"`{g.id}` names a segment and a machine; a link `between` it would be "
                    "ambiguous: rename one",
                    ("segments", i, "id"),
                )
        for j, mc in enumerate(self.machines):
            if mc.segment is not None and mc.segment not in segs:
                known = ", ".join(segs) if segs else "none: add a `segments` section"
                raise KeyValueError(
                    f"unknown segment `{mc.segment}` (segments: {known})",
                    ("machines", j, "segment"),
                )
        pairs: dict[frozenset[str], str] = {}
        for i, lk in enumerate(self.links):
            if lk.between is not None:
                _check_between(lk, i, kinds, set(segs), pairs)
        return self

    def devices_in(self, machine: str) -> list[str]:
        """The owned device types that sit in stated machine `machine`, sorted."""
        return sorted(o.device for o in self.constraints.inventory if o.machine == machine)

    def machine_of(self, device: str) -> StatedMachine | None:
        """The stated machine the owned `device`s sit in, if any."""
        for o in self.constraints.inventory:
            if o.device == device and o.machine is not None:
                return next(mc for mc in self.machines if mc.id == o.machine)
        return None

    @model_validator(mode="after")
    def _phases(self) -> Problem:
        if self.phases is None:
            return self
        kinds = {w.name: w for w in self.workloads}
        seen: dict[str, int] = {}
        for i, ph in enumerate(self.phases):
            if any(q.name == ph.name for q in self.phases[:i]):
                raise KeyValueError(f"two phases are named `{ph.name}`", ("phases", i, "name"))
            for j, name in enumerate(ph.workloads):
                at = ("phases", i, "workloads", j)
                if name not in kinds:
                    raise KeyValueError(
                        f"unknown workload `{name}` (workloads: {', '.join(kinds)})", at
                    )
                if name in seen:
                    raise KeyValueError(
                        f"workload `{name}` is in phase `{self.phases[seen[name]].name}` "
                        "already; a workload runs in one phase",
                        at,
                    )
                seen[name] = i
                w = kinds[name]
                if i < len(self.phases) - 1:
                    if not isinstance(w, TrainingWorkload):
                        raise KeyValueError(
                            f"`{name}` is an inference workload: it serves to the end of the "
                            "horizon, so it belongs in the last phase",
                            at,
                        )
                    if w.deadline_hours is None:
                        raise KeyValueError(
                            f"training `{name}` has no deadline_hours: a phase before the last "
                            "lasts its jobs' deadline, so give the job one",
                            at,
                        )
        missing = [n for n in kinds if n not in seen]
        if missing:
            raise KeyValueError(
                f"workload `{missing[0]}` is in no phase; list every workload in one phase",
                ("phases",),
            )
        if "buy" not in self.horizon.modes:
            raise KeyValueError(
                "phases share the devices on premises, but horizon.procurement does not buy: "
                "a rented training job rents for its own hours; add `buy` or drop `phases`",
                ("phases",),
            )
        earlier = sum(self.phase_hours(i) for i in range(len(self.phases) - 1))
        if earlier >= self.horizon.lifetime_years * HOURS_PER_YEAR:
            raise KeyValueError(
                f"the phases before the last take {earlier:,.0f} h, the whole horizon of "
                f"{self.horizon.lifetime_years:g} years: nothing is left for the last phase",
                ("phases",),
            )
        return self

    def phase_hours(self, i: int) -> float:
        """Hours phase `i` (before the last) lasts: its training jobs' longest deadline."""
        assert self.phases is not None
        names = set(self.phases[i].workloads)
        return max(
            (w.deadline_hours or 0.0)
            for w in self.workloads
            if w.name in names and isinstance(w, TrainingWorkload)
        )

    @model_validator(mode="after")
    def _tokens_served(self) -> Problem:
        """A goal or tie-break that counts served tokens needs a workload that serves some."""
        if any(isinstance(w, InferenceWorkload) for w in self.workloads):
            return self
        counting = ("max_throughput", "max_tokens_per_joule", "min_cost_per_token")
        for key, value in (("goal", self.objective.goal), ("tie_break", self.objective.tie_break)):
            if value in counting:
                raise KeyValueError(
                    f"objective {key} {value} counts the tokens a plan serves, but every "
                    "workload of this problem is a training job, which serves none: use "
                    + ("min_cost or min_carbon" if key == "goal" else "min_cost or min_power"),
                    ("objective", key),
                )
        return self

    @model_validator(mode="after")
    def _names_unique(self) -> Problem:
        if self.objective.goal in ("max_throughput",) and not (
            self.constraints.budget_usd
            or self.constraints.capex_usd is not None
            or self.constraints.max_devices
            or self.constraints.power_w
        ):
            raise KeyValueError(
                "objective max_throughput needs a limit: set constraints.budget_usd, capex_usd, "
                "power_w or max_devices",
                ("objective", "goal"),
            )
        goal = self.objective.goal
        mixed = any(isinstance(w, InferenceWorkload) and w.request_mix for w in self.workloads)
        if (
            self.demand is not None
            and self.horizon.utilization != Horizon.model_fields["utilization"].default
        ):
            raise KeyValueError(
                "horizon.utilization and a demand profile both say when the fleet works; "
                "leave utilization out (the profile's hours replace it)",
                ("horizon", "utilization"),
            )
        if goal in ("max_throughput", "max_tokens_per_joule", "min_cost_per_token") and (
            self.demand is not None or (mixed and goal == "min_cost_per_token")
        ):
            raise KeyValueError(
                f"objective {goal} needs one fixed demand; with a demand profile or a "
                "request_mix the demand is given, so use min_cost or min_carbon"
                + ("" if self.demand is not None else " (or max_throughput)"),
                ("objective", "goal"),
            )
        if self.carbon is None and (
            goal == "min_carbon" or self.constraints.max_carbon_kgco2e is not None
        ):
            at: tuple[str | int, ...] = (
                ("objective", "goal")
                if goal == "min_carbon"
                else ("constraints", "max_carbon_kgco2e")
            )
            raise KeyValueError(
                "carbon needs a `carbon` section with a region or grid_gco2e_per_kwh", at
            )
        return self
