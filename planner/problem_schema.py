"""Pydantic schema of a problem file: workloads, constraints, objective and horizon.

`planner schema` exports it as JSON Schema for editors.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from planner.catalog_schema import Frozen

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=64)]


class InferenceWorkload(Frozen):
    """Serve a model: hold `concurrency` sequences and produce `min_tokens_per_s` output tokens/s."""

    name: Name
    kind: Literal["inference"] = "inference"
    model: str = Field(description="Catalog model id.")
    weights: str = Field(
        "fp16", description="Weight format (fp16, bf16, fp8, int8, awq-int4, q4_k_m...)."
    )
    kv: str = Field("fp16", description="KV-cache format (fp16, fp8, q8_0...).")
    context_tokens: int = Field(
        4096, gt=0, le=2_000_000, description="KV tokens held per sequence."
    )
    prompt_tokens: int = Field(
        1024, gt=0, description="Prompt tokens per request (time to first token)."
    )
    concurrency: int = Field(1, ge=1, le=1_000_000, description="Sequences served at once.")
    min_tokens_per_s: float = Field(
        0.0, ge=0, description="Output tokens/s the fleet must sustain."
    )
    max_ms_per_token: float | None = Field(
        None, gt=0, description="Ceiling on time per output token, ms."
    )
    max_ttft_s: float | None = Field(None, gt=0, description="Ceiling on time to first token, s.")


class TrainingWorkload(Frozen):
    """Train or fine-tune a model on `token_budget` tokens, optionally by a deadline."""

    name: Name
    kind: Literal["training"] = "training"
    model: str = Field(description="Catalog model id.")
    method: Literal["full", "lora", "qlora"] = "full"
    optimizer: Literal["adamw", "adamw-8bit", "sgd", "adafactor"] = "adamw"
    zero_stage: int = Field(1, ge=0, le=3, description="ZeRO stage across data-parallel ranks.")
    seq_len: int = Field(4096, gt=0, le=1_000_000)
    micro_batch: int = Field(1, ge=1, le=1024)
    recompute: Literal["none", "selective", "full"] = "selective"
    lora_rank: int = Field(16, ge=1, le=4096)
    token_budget: float = Field(gt=0, description="Tokens to train on.")
    deadline_hours: float | None = Field(None, gt=0, description="Finish within this many hours.")


def _kind(value: object) -> str:
    """Workloads are inference unless they say `kind: training`."""
    if isinstance(value, dict):
        return str(value.get("kind", "inference"))
    return str(getattr(value, "kind", "inference"))


Workload = Annotated[
    Annotated[InferenceWorkload, Tag("inference")] | Annotated[TrainingWorkload, Tag("training")],
    Discriminator(_kind),
]


class OwnedDevices(Frozen):
    device: str = Field(description="Catalog device id.")
    count: int = Field(ge=1, le=100_000)


class Constraints(Frozen):
    budget_usd: float | None = Field(
        None, gt=0, description="Ceiling on total cost over the horizon, USD."
    )
    capex_usd: float | None = Field(None, gt=0, description="Ceiling on money spent up front, USD.")
    power_w: float | None = Field(
        None, gt=0, description="Ceiling on power at the wall (with PUE), W."
    )
    max_devices: int | None = Field(
        None, ge=1, le=100_000, description="Ceiling on accelerator count."
    )
    allowed_devices: list[str] | None = Field(
        None, description="Only these device ids (default all)."
    )
    excluded_devices: list[str] = Field(default_factory=list, description="Never these device ids.")
    vendors: list[str] | None = Field(None, description="Only these vendors.")
    require_ecc: bool = Field(False, description="Only devices with ECC memory.")
    memory_headroom: float = Field(
        0.1, ge=0, lt=1, description="Share of each device's memory kept free (0.1 = use 90 %)."
    )
    max_tensor_parallel: int = Field(8, ge=1, le=72, description="Largest tensor-parallel group.")
    max_stages: int = Field(8, ge=1, le=64, description="Largest pipeline depth per replica.")
    tensor_parallel_over_pcie: bool = Field(
        True,
        description="Allow tensor parallelism over PCIe inside a node (not only NVLink-class).",
    )
    network: str = Field(
        "eth-100g", description="Link id between nodes (pipeline hops, gradients)."
    )
    heterogeneous_pipelines: bool = Field(
        True, description="Allow two device types in one replica."
    )
    max_rack_units: int | None = Field(
        None, ge=1, description="Ceiling on rack units of all nodes."
    )
    inventory: list[OwnedDevices] = Field(
        default_factory=list, description="Devices already owned: free to use, hosts included."
    )


class Horizon(Frozen):
    lifetime_years: float = Field(
        3.0, gt=0, le=20, description="Depreciation period and TCO horizon."
    )
    utilization: float = Field(
        0.6, gt=0, le=1, description="Share of hours the fleet works at load."
    )
    electricity_usd_per_kwh: float = Field(0.12, ge=0, le=10)
    pue: float = Field(1.3, ge=1, le=5, description="Power usage effectiveness.")
    procurement: Literal["buy", "rent"] = Field(
        "buy", description="Buy devices, or rent them by the hour."
    )


class Objective(Frozen):
    goal: Literal["min_cost", "max_throughput", "max_tokens_per_joule", "min_cost_per_token"] = (
        "min_cost"
    )
    tie_break: Literal["min_cost", "max_throughput", "min_power", None] = Field(
        None, description="Second objective among plans optimal for the first."
    )


class Problem(Frozen):
    name: Name
    description: str = ""
    workloads: list[Workload] = Field(min_length=1, max_length=64)
    constraints: Constraints = Constraints()
    horizon: Horizon = Horizon()
    objective: Objective = Objective()

    @model_validator(mode="after")
    def _names_unique(self) -> Problem:
        seen: set[str] = set()
        for w in self.workloads:
            if w.name in seen:
                raise ValueError(f"two workloads are named `{w.name}`; names must be unique")
            seen.add(w.name)
        if self.objective.goal in ("max_throughput",) and not (
            self.constraints.budget_usd
            or self.constraints.capex_usd
            or self.constraints.max_devices
            or self.constraints.power_w
        ):
            raise ValueError(
                "objective max_throughput needs a limit: set constraints.budget_usd, capex_usd, "
                "power_w or max_devices"
            )
        return self
