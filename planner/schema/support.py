"""Pydantic schema of the software support matrix (catalog support.yaml): device architectures,
serving engines, and which engine runs which weight and KV-cache formats on which architecture.

A device names its architecture (accelerators.yaml `architecture`); the architecture gives its
vendor, family and generation, and whether its vendor has ended software support. A support row
says: this engine (on this backend) runs these weight formats with these KV-cache formats on
these architectures, as of `date`, per `source`. A combination no row names is unsupported.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, model_validator

from planner.schema.catalog import Frozen, Reference, Sourced

# Names of the number formats the estimator knows (planner/estimator/formats.py holds their
# figures; a test keeps the two lists equal). Here so the catalog can check the matrix's names.
WEIGHT_FORMAT_IDS: tuple[str, ...] = (
    "fp32",
    "bf16",
    "fp16",
    "fp8",
    "int8",
    "gptq-int4",
    "awq-int4",
    "q4_0",
    "q4_k_m",
    "q2_k",
    "ud-q2_k_xl",
    "q5_k_m",
    "q6_k",
    "q8_0",
    "nf4",
    "mxfp4",
    "mxfp8",
    "nvfp4",
    "mlx-q4",
    "mlx-q8",
)
KV_FORMAT_IDS: tuple[str, ...] = ("fp32", "fp16", "bf16", "fp8", "int8", "q8_0", "q4_0")

Backend = Literal["cuda", "rocm", "metal", "vulkan", "sycl", "cpu", "hpu", "tpu", "neuron", "mlx"]
ID = r"^[a-z0-9][a-z0-9.\-]*$"
# The kernel families an engine entry names (Engine.kernels).
KernelFamily = Literal["llama.cpp", "llama.cpp-dequantizing", "serving-grid"]


class Architecture(Sourced):
    """A device architecture (a generation of one vendor's line of chips)."""

    id: str = Field(pattern=ID, description="Catalog name, e.g. hopper, cdna3, gaudi2, tpu-v5e.")
    name: str = Field(description="Full name, e.g. 'NVIDIA Hopper (SM 9.0)'.")
    vendor: Literal["nvidia", "amd", "intel", "google", "aws", "apple", "raspberry-pi"]
    family: str = Field(
        pattern=ID,
        description="The line of chips generations are counted in: nvidia-gpu, amd-instinct, "
        "amd-radeon, intel-gaudi, google-tpu, aws-neuron, apple-silicon.",
    )
    generation: float = Field(
        gt=0,
        description="Order within the family (NVIDIA: the SM version, 8.0 Ampere, 9.0 Hopper; "
        "others: the generation number). A problem's `min_architecture` compares it.",
    )
    released: str = Field(description="First product of the architecture, YYYY-MM.")
    end_of_life: str | None = Field(
        None,
        description="When the vendor's current software stopped supporting it, YYYY-MM; "
        "`exclude_end_of_life` leaves such devices out.",
    )
    notes: str | None = None


# The most any of an engine's fixed times may be, microseconds: one second per hop, exchange,
# token, block or step is no engine's, so a larger figure is a unit slip (seconds or nanoseconds
# written as microseconds), refused rather than planned at a token a day.
MAX_ENGINE_US = 1_000_000


class Engine(Sourced):
    """A serving engine (or an engine's distribution for one kind of device)."""

    id: str = Field(pattern=ID, description="Catalog name, e.g. vllm, llama.cpp, vllm-gaudi.")
    name: str
    rank: int = Field(
        ge=0,
        description="Preference when a workload names no engine: the supported engine of "
        "lowest rank is the device's default.",
    )
    tensor_parallel: bool = Field(description="Splits a layer's matrices over several devices.")
    pipeline_parallel: bool = Field(description="Splits the layers over stages of devices.")
    cross_stack_pipeline: bool = Field(
        False,
        description="Runs one pipeline over devices of different vendors or backends "
        "(llama.cpp RPC, exo); other engines keep a replica on one vendor's stack.",
    )
    uniform_tensor_parallel: bool = Field(
        True,
        description="One tensor-parallel size for every pipeline stage of a replica (vLLM's "
        "--tensor-parallel-size applies to each stage; so do the engines built on it and "
        "SGLang's and TensorRT-LLM's): a replica's stages then run groups of one size.",
    )
    tensor_parallel_across_machines: bool = Field(
        False,
        description="Runs one tensor-parallel group over devices in different machines, its "
        "all-reduces over the network between them (vLLM on a Ray cluster, SGLang with "
        "--nnodes, distributed-llama, exo over Thunderbolt): a DGX Spark or a Mac, its own "
        "machine, then joins others of its kind in one group.",
    )
    hop_overhead_us: float = Field(
        0.0,
        ge=0,
        le=MAX_ENGINE_US,
        description="Software time the engine adds to each pipeline hop between machines, "
        "beyond the link's own latency and transfer (remote-procedure round trips, "
        "serialization), microseconds. 0 where no measurement isolates it.",
    )
    rpc_round_trip_us: float = Field(
        0.0,
        ge=0,
        le=MAX_ENGINE_US,
        description="Time of one synchronous round trip between the client and a remote "
        "pipeline stage of the engine's RPC backend (llama.cpp's ggml-rpc: the client waits "
        "for the server's reply), beyond the link's own transfer of the hidden state, "
        "microseconds (planner.estimator.rpc_hop). 0 for engines without an RPC backend.",
    )
    rpc_round_trips: int = Field(
        0,
        ge=0,
        description="Synchronous round trips each remote pipeline stage makes per forward step "
        "(planner.estimator.rpc_hop: 1 in llama.cpp builds since PR #15405, 2 between PRs "
        "#12943 and #15405, 6 before PR #12943).",
    )
    rpc_graph_resent: bool = Field(
        False,
        description="The RPC backend sends each remote stage's whole serialized graph with "
        "every step (llama.cpp builds before PR #15405, whose GRAPH_RECOMPUTE replays a kept "
        "one), its bytes crossing the link each token (planner.estimator.rpc_hop.graph_bytes).",
    )
    exchange_overhead_us: float = Field(
        0.0,
        ge=0,
        le=MAX_ENGINE_US,
        description="Software time the engine adds to each tensor-parallel exchange (one "
        "all-reduce or all-gather of a block's activations) between machines, beyond the "
        "link's own latency and transfer (socket polling, synchronization), microseconds. 0 "
        "where no measurement isolates it.",
    )
    exchange_overhead_device: str | None = Field(
        None,
        description="The catalog device `exchange_overhead_us` was measured on; with "
        "`task_sync_us` the time is scaled to other devices (planner.estimator.support."
        "exchange_overhead_s). None: one figure for every device.",
    )
    task_sync_us: dict[str, PositiveFloat] | None = Field(
        None,
        description="The engine's own time per exchange task on ONE machine of a device, where "
        "no network is involved (its threads' synchronisation around the task), microseconds, "
        "by catalog device id: the per-device figure `exchange_overhead_us` is scaled by "
        "(device's / exchange_overhead_device's). Its source is `sources.task_sync_us`.",
    )
    tensor_layout: Literal["ring-allreduce", "mesh-allgather", "star-root"] = Field(
        "ring-allreduce",
        description="How a tensor-parallel group across machines divides a block and exchanges "
        "its activations (planner.estimator.engine_topology): ring-allreduce, every matrix "
        "split and two ring all-reduces per block (Megatron-LM's layout); mesh-allgather, two "
        "all-gathers of the block's partial sums per block over a full mesh (distributed-llama "
        "from 0.7); star-root, ten exchanges per block through a root that runs attention, the "
        "norms and the output head alone (distributed-llama 0.1.0 to 0.3.x).",
    )
    exchange_value_bytes: float | None = Field(
        None,
        gt=0,
        description="Bytes per activation value the engine sends between machines "
        "(distributed-llama's Q80 sync buffer: 34 bytes per 32 values); None: 2 (fp16/bf16).",
    )
    kernels: KernelFamily = Field(
        description="The kernels the engine runs a prompt's matrix products on, which sets the "
        "rates the planner times its prefill at (planner.estimator.prefill_path): `llama.cpp`, "
        "llama.cpp's own (MMQ on int8 tensor cores for GGUF weights, cuBLAS with FP16 "
        "accumulation for 16-bit ones), the rates the single-prompt compute factor is fitted "
        "on; `llama.cpp-dequantizing`, llama.cpp builds from before MMQ ran on tensor cores "
        "(PR #7676, June 2024), which dequantize GGUF weights to FP16 for cuBLAS; "
        "`serving-grid`, batched GEMMs in continuous-batching iterations (vLLM, SGLang, "
        "TensorRT-LLM), timed as an iteration of the serving grid (prompt_time.serving_prefill_seconds)."
    )
    tensor_parallel_backends: list[str] | None = Field(
        None,
        description="Backends (support rows' `backend`) on which the engine's tensor-parallel "
        "mode runs at the speed the planner charges (two all-reduces per block at the link's "
        "speed); on its other backends a design keeps one device per stage. None: every "
        "backend the engine runs on. Its source is `sources.tensor_parallel_backends`.",
    )
    tensor_parallel_single_stage: bool = Field(
        False,
        description="The engine's tensor-parallel mode takes every device of the replica "
        "(llama.cpp's `--split-mode tensor` is one mode for all visible devices, not combined "
        "with its layer split or its RPC backend): a group of two or more devices serves as a "
        "replica of one stage only.",
    )
    tensor_parallel_refuses_mla: bool = Field(
        False,
        description="The engine's tensor-parallel mode refuses models with multi-head latent "
        "attention (a compressed KV latent it does not split over devices).",
    )
    tensor_parallel_excluded_families: list[str] = Field(
        default_factory=list,
        description="Model families (catalog models' `family`) whose architecture the engine's "
        "tensor-parallel mode refuses.",
    )
    named_only: bool = Field(
        False,
        description="Planned only where a workload (or `planner estimate --engine`) names it, "
        "never as a device's default: an older release kept for fleets pinned to it.",
    )
    host_us_per_token: float = Field(
        0.0,
        ge=0,
        le=MAX_ENGINE_US,
        description="Host (CPU) time the engine spends per generated token serially with the "
        "device's step (scheduling the next step, processing outputs, the API server), "
        "microseconds: a step of b sequences takes b times this on top of the device's own "
        "time. 0 for engines that overlap this work with the device's step.",
    )
    launch_us_per_layer: float = Field(
        0.0,
        ge=0,
        le=MAX_ENGINE_US,
        description="Host (CPU) time the engine spends launching one block's kernels one by one "
        "in every forward step, where it runs without a CUDA graph (vLLM --enforce-eager: every "
        "operator dispatched from Python each step), microseconds per block, added to the "
        "device's own time per block (planner.estimator.support.engine_times). 0 for engines "
        "that replay a captured graph (the device class's fitted per-block time covers them).",
    )
    launch_us_per_step: float = Field(
        0.0,
        ge=0,
        le=MAX_ENGINE_US,
        description="The same host launch time for the kernels outside the blocks (embedding, "
        "final norm, output head, sampling), microseconds per forward step. 0 where no source "
        "separates it from the per-block time.",
    )
    notes: str | None = None

    @model_validator(mode="after")
    def _task_reference(self) -> Engine:
        """Per-device task times scale the exchange time only from the device it was measured
        on, which must have a task time of its own."""
        if self.task_sync_us and self.exchange_overhead_device not in self.task_sync_us:
            raise ValueError(
                f"engine `{self.id}`: task_sync_us scales exchange_overhead_us from the device "
                f"it was measured on; set exchange_overhead_device to one of "
                f"{', '.join(sorted(self.task_sync_us))} (got {self.exchange_overhead_device})"
            )
        return self


class SupportRow(Frozen):
    """An engine on a backend runs these weight and KV formats on these architectures."""

    engine: str = Field(pattern=ID, description="Engine id.")
    backend: Backend = Field(description="The engine's device backend (cuda, rocm, metal...).")
    architectures: list[str] = Field(min_length=1, description="Architecture ids.")
    weights: list[str] = Field(min_length=1, description="Weight format ids it loads.")
    kv: list[str] = Field(min_length=1, description="KV-cache format ids it keeps.")
    source: str = Field(description="Reference id of the document that states the support.")
    date: str = Field(
        pattern=r"^\d{4}-\d{2}(-\d{2})?$",
        description="When the source stated it (YYYY-MM or YYYY-MM-DD).",
    )
    experimental: bool = Field(
        False,
        description="The engine calls the support experimental: used only when a workload "
        "names the engine, never as a default.",
    )
    notes: str | None = None

    @model_validator(mode="after")
    def _known_formats(self) -> SupportRow:
        for key, known in (("weights", WEIGHT_FORMAT_IDS), ("kv", KV_FORMAT_IDS)):
            for name in getattr(self, key):
                if name not in known:
                    raise ValueError(f"{key}: unknown format `{name}` (known: {', '.join(known)})")
        return self


class SupportFile(Frozen):
    references: dict[str, Reference]
    architectures: list[Architecture]
    engines: list[Engine]
    support: list[SupportRow]
