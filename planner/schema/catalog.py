"""Pydantic schema of the catalog: accelerators, nodes, links and model architectures.

Units are in the field names (`_gb_s` is 1e9 bytes per second, `_w` watts, `_usd` US dollars).
Every figure carries a source: each entry has a `sources` map from a section name to the id of a
reference in the same file; the `spec` key covers every section not named on its own.

Long because it is the schema of every catalog file (accelerators, nodes, links, models,
regions, instances) in one place, where the cross-references between them are read together.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, model_validator

GB = 1e9
GIB = 2**30


class Frozen(BaseModel):
    """A validated, immutable record; unknown keys are errors."""

    # No NaN or infinity: a user's catalog folder may hold `.inf` or `.nan`, which pass every
    # `gt=0` bound and turn the estimates they reach into `nan` figures.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class KeyValueError(ValueError):
    """A cross-field error about one key, `at` relative to the model that raises it, so the
    message can point at that key's line rather than at the whole section."""

    def __init__(self, message: str, at: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.at = at


class Reference(Frozen):
    """A published source: a spec sheet, a paper, a price list, a benchmark post."""

    title: str = Field(
        description="What the source is, e.g. 'NVIDIA H100 Tensor Core GPU datasheet'."
    )
    url: str | None = Field(None, description="Where it was published.")
    date: str | None = Field(
        None, description="When it was published or read (YYYY-MM or YYYY-MM-DD)."
    )
    note: str | None = Field(None, description="What to keep in mind when reading it.")


class Sourced(Frozen):
    """Mixin: a `sources` map from section to reference id; `spec` covers unnamed sections."""

    sources: dict[str, str] = Field(
        description="Section name -> reference id. `spec` is the default for sections not named."
    )

    def source_of(self, section: str) -> str:
        """The reference id that backs `section`."""
        return self.sources.get(section) or self.sources["spec"]

    @model_validator(mode="after")
    def _has_default_source(self) -> Sourced:
        if "spec" not in self.sources:
            raise ValueError(
                "`sources` needs a `spec` entry (the default reference for every figure)"
            )
        return self


# ---------------------------------------------------------------------------------------------
# Accelerators
# ---------------------------------------------------------------------------------------------

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")

DeviceClass = Literal["consumer", "workstation", "datacenter", "unified-memory", "asic"]


class Memory(Frozen):
    """On-device memory: size in the vendor's stated unit, and its bandwidth."""

    # Upper bounds far above any part (the largest holds 512 GB; CPU hosts a few TB): a value
    # past them is a typo, which would otherwise overflow the design tables.
    size: float = Field(gt=0, le=100_000, description="Memory size, in `unit` (at most 100 TB).")
    unit: Literal["GB", "GiB"] = Field(
        description="GB = 1e9 bytes, GiB = 2^30 bytes; say which the vendor's figure really is."
    )
    type: str = Field(description="Memory technology, e.g. HBM3, GDDR6X, LPDDR5X.")
    bandwidth_gb_s: float = Field(
        gt=0, le=1_000_000, description="Peak memory bandwidth, 1e9 bytes/s (at most 1 PB/s)."
    )
    bus_width_bits: int | None = Field(None, gt=0, description="Memory bus width, bits.")
    achievable_bandwidth_gb_s: float | None = Field(
        None,
        gt=0,
        description=(
            "Measured streaming bandwidth of a part that cannot reach its spec the way the parts of "
            "its class do (a CPU's memory controller, a shared-memory SoC), 1e9 bytes/s; the "
            "estimator uses it in place of bandwidth_gb_s. Needs sources.achievable_bandwidth."
        ),
    )

    gpu_share: float | None = Field(
        None, gt=0, le=1, description="Share of this memory the OS lets the accelerator hold "
        "(macOS: Metal's recommendedMaxWorkingSetSize); absent: all. Needs sources.gpu_share.",
    )  # fmt: skip

    @property
    def bytes(self) -> float:
        return self.size * (GB if self.unit == "GB" else GIB)

    def usable_bytes(self, headroom: float) -> float:
        """Bytes an engine may fill, `headroom` kept free, at most the OS's share for it."""
        return self.bytes * min(1.0 - headroom, self.gpu_share or 1.0)

    @property
    def usable_bandwidth_gb_s(self) -> float:
        """The bandwidth an engine can stream at: the measured figure where one is given."""
        return self.achievable_bandwidth_gb_s or self.bandwidth_gb_s

    @model_validator(mode="after")
    def _achievable_below_spec(self) -> Memory:
        if self.achievable_bandwidth_gb_s and self.achievable_bandwidth_gb_s > self.bandwidth_gb_s:
            raise ValueError("achievable_bandwidth_gb_s is above bandwidth_gb_s (the spec)")
        return self


class DenseCompute(Frozen):
    """Peak DENSE tensor throughput per precision (TFLOPS; TOPS for int8/int4). Never sparsity."""

    fp32: float | None = Field(None, gt=0, description="FP32 (non-tensor unless stated), TFLOPS.")
    tf32: float | None = Field(None, gt=0, description="TF32 tensor, dense TFLOPS.")
    bf16: float | None = Field(None, gt=0, description="BF16 tensor, dense TFLOPS.")
    fp16: float | None = Field(
        None,
        gt=0,
        description="FP16 tensor (FP32 accumulate where the vendor splits it), dense TFLOPS.",
    )
    fp8: float | None = Field(None, gt=0, description="FP8 tensor, dense TFLOPS.")
    int8: float | None = Field(None, gt=0, description="INT8 tensor, dense TOPS.")
    fp4: float | None = Field(None, gt=0, description="FP4 tensor, dense TFLOPS.")
    int4: float | None = Field(None, gt=0, description="INT4 tensor, dense TOPS.")

    def tflops(self, precision: Precision) -> float | None:
        value: float | None = getattr(self, precision)
        return value

    @model_validator(mode="after")
    def _some_precision(self) -> DenseCompute:
        if self.bf16 is None and self.fp16 is None:
            raise ValueError("dense_tflops needs at least bf16 or fp16")
        return self


class Power(Frozen):
    tdp_w: float = Field(gt=0, description="Board power / TDP at full load, watts.")
    idle_w: float = Field(
        ge=0, description="Power when idle with memory loaded, watts (at most tdp_w)."
    )


class Interconnect(Frozen):
    """How the device talks to its neighbours."""

    scale_up: str | None = Field(
        None,
        description="Link id of the scale-up fabric (NVLink, Infinity Fabric, ICI...), if any.",
    )
    scale_up_gb_s: float | None = Field(
        None, gt=0, description="Scale-up bandwidth per device, per direction, 1e9 bytes/s."
    )
    domain_size: int = Field(1, ge=1, description="Devices that share one scale-up domain.")
    all_to_all: bool = Field(
        False,
        description="Every device of the domain reaches every other directly (NVSwitch, or a "
        "fully connected mesh), so serving engines all-reduce small tensors in two "
        "synchronization steps whatever the number of devices, instead of a ring's 2 (n - 1).",
    )
    pcie_gen: int | None = Field(None, ge=3, le=6, description="Host PCIe generation.")
    pcie_lanes: int | None = Field(None, ge=1, le=16, description="Host PCIe lanes.")


Condition = Literal["new", "refurbished", "used"]


# Upper bounds on catalog prices (a user's catalog folder may hold any figure): past them the
# objective's coefficients (a price times the devices, hosts or hours of a 20-year horizon)
# overflow the solver's 64-bit integers, and no device has cost that much.
MAX_PRICE_USD = 1e12  # a trillion dollars for one device, host or switch
MAX_RENT_USD_PER_HOUR = 1e6  # a million dollars an hour for one device or instance


class Price(Frozen):
    purchase_usd: float | None = Field(
        None, gt=0, le=MAX_PRICE_USD, description="Street/list price of one device, USD."
    )
    purchase_date: str | None = Field(None, description="When that price was seen (YYYY-MM).")
    condition: Condition = Field(
        "new",
        description="What the purchase price buys: a `new` device, a `refurbished` one (tested "
        "and resold, often with a short warranty) or a `used` one (second-hand). Rents are "
        "for devices a provider keeps.",
    )
    rent_usd_per_hour: float | None = Field(
        None,
        gt=0,
        le=MAX_RENT_USD_PER_HOUR,
        description="Typical on-demand rent for one device from a cloud that rents them one at "
        "a time, USD per hour. Instances rented whole (8 GPUs at a time) are in instances.yaml.",
    )
    rent_date: str | None = Field(None, description="When that rent was seen (YYYY-MM).")
    reserved_usd_per_hour: float | None = Field(
        None,
        gt=0,
        le=MAX_RENT_USD_PER_HOUR,
        description="Effective rent per device-hour under a reserved commitment, USD.",
    )
    reserved_term_years: float | None = Field(
        None, gt=0, le=5, description="Length of that commitment, years (paid for every hour)."
    )
    reserved_date: str | None = Field(None, description="When that price was seen (YYYY-MM).")
    spot_usd_per_hour: float | None = Field(
        None,
        gt=0,
        le=MAX_RENT_USD_PER_HOUR,
        description="Typical spot/interruptible rent per device-hour, USD.",
    )
    spot_date: str | None = Field(None, description="When that price was seen (YYYY-MM).")

    @model_validator(mode="after")
    def _dated(self) -> Price:
        for key in ("purchase", "rent", "reserved", "spot"):
            value = getattr(self, f"{key}_usd" if key == "purchase" else f"{key}_usd_per_hour")
            if value is not None and not getattr(self, f"{key}_date"):
                raise ValueError(f"price.{key} needs a {key}_date")
        if (self.reserved_usd_per_hour is None) != (self.reserved_term_years is None):
            raise ValueError("price.reserved_usd_per_hour and reserved_term_years go together")
        return self


FormFactor = Literal["sxm", "oam", "pcie", "superchip", "soc-system", "module", "tpu-board"]


class Accelerator(Sourced):
    """One accelerator model, as sold."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="Catalog name, e.g. h100-sxm.")
    name: str = Field(description="Full product name.")
    vendor: Literal["nvidia", "amd", "intel", "google", "aws", "apple", "raspberry-pi"]
    device_class: DeviceClass = Field(description="Selects the default efficiency factors.")
    architecture: str
    released: str = Field(description="Launch date, YYYY-MM.")
    memory: Memory
    dense_tflops: DenseCompute
    power: Power
    interconnect: Interconnect = Interconnect()
    ecc: bool = Field(description="Whether device memory has ECC enabled by default.")
    form_factor: FormFactor
    price: Price = Price()
    embodied_kgco2e: float | None = Field(
        None,
        gt=0,
        description="Emissions of making one device (and its share of the board), kg CO2e.",
    )
    ports: list[str] = Field(
        default_factory=list,
        description="A whole machine's (form_factor soc-system) built-in wired network ports, "
        "as catalog link ids (`eth-1g`, `thunderbolt5`), as the base configuration ships: no "
        "build-to-order option, no adapter. A pool of such machines whose problem names no "
        "network is planned on the slowest port they all share (planner.estimator.built_in_link)."
        " Needs sources.ports. Empty: not recorded.",
    )
    notes: str | None = None

    @model_validator(mode="after")
    def _ports_sourced(self) -> Accelerator:
        if self.ports and self.form_factor != "soc-system":
            raise ValueError(
                f"`{self.id}`: ports are a whole machine's (form_factor soc-system); a card's "
                "network is its host's (nodes.yaml `nics`)"
            )
        if self.ports and "ports" not in self.sources:
            raise ValueError(
                f"`{self.id}`: ports need their own source: `sources: {{ports: <id>}}`"
            )
        return self

    @model_validator(mode="after")
    def _idle_below_tdp(self) -> Accelerator:
        if self.power.idle_w > self.power.tdp_w:  # a plan would draw more idle than at load
            raise KeyValueError(
                f"`{self.id}` idles at {self.power.idle_w:g} W, above its tdp_w of "
                f"{self.power.tdp_w:g} W: a device idles below its full-load power; give both "
                "in watts from the spec sheet (idle_w at most tdp_w)",
                ("power", "idle_w"),
            )
        return self

    @model_validator(mode="after")
    def _achievable_sourced(self) -> Accelerator:
        if self.vendor == "apple" and self.memory.gpu_share is None:  # macOS caps its GPU
            raise ValueError("an Apple machine needs memory.gpu_share (0.75 shipped), sourced")
        for key, field in (("achievable_bandwidth", "_gb_s"), ("gpu_share", "")):
            if getattr(self.memory, key + field) and key not in self.sources:
                raise ValueError(
                    f"memory.{key}{field} needs its own source: add `{key}: <reference id>` to "
                    "`sources`"
                )
        return self


# ---------------------------------------------------------------------------------------------
# Cloud instances (rented whole)
# ---------------------------------------------------------------------------------------------


class Instance(Sourced):
    """A cloud instance as a provider rents it: a fixed number of one accelerator type, with its
    host CPU and memory, paid per instance-hour. A plan rents it whole: 4 devices of an 8-device
    instance pay for 8."""

    id: str = Field(
        pattern=r"^[a-z0-9][a-z0-9.\-]*$",
        description="Catalog name: provider and instance, e.g. aws-p5.48xlarge.",
    )
    provider: str = Field(
        pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="Cloud provider, e.g. aws, azure, gcp."
    )
    name: str = Field(description="The provider's instance name, e.g. p5.48xlarge.")
    device: str = Field(description="Accelerator id of its devices.")
    devices: int = Field(ge=1, le=64, description="Accelerators per instance (GPUs or chips).")
    vcpus: int | None = Field(None, ge=1, description="Host vCPUs per instance.")
    memory_gib: float | None = Field(None, gt=0, description="Host memory per instance, GiB.")
    region: str = Field(description="Region the prices are for, e.g. us-east-1.")
    on_demand_usd_per_hour: float | None = Field(
        None,
        gt=0,
        le=MAX_RENT_USD_PER_HOUR,
        description="On-demand rent of one whole instance, USD per instance-hour.",
    )
    reserved_usd_per_hour: float | None = Field(
        None,
        gt=0,
        le=MAX_RENT_USD_PER_HOUR,
        description="Effective rent of one instance under a committed term, USD per "
        "instance-hour (paid for every hour of the term).",
    )
    reserved_term_years: float | None = Field(
        None, gt=0, le=5, description="Length of that commitment, years."
    )
    spot_usd_per_hour: float | None = Field(
        None,
        gt=0,
        le=MAX_RENT_USD_PER_HOUR,
        description="Spot rent of one instance, USD per instance-hour.",
    )
    date: str = Field(description="When the prices were seen (YYYY-MM).")
    notes: str | None = None

    @model_validator(mode="after")
    def _priced(self) -> Instance:
        if self.on_demand_usd_per_hour is None and self.spot_usd_per_hour is None:
            raise ValueError("an instance needs on_demand_usd_per_hour or spot_usd_per_hour")
        if (self.reserved_usd_per_hour is None) != (self.reserved_term_years is None):
            raise ValueError("reserved_usd_per_hour and reserved_term_years go together")
        return self


# ---------------------------------------------------------------------------------------------
# Regions (grid carbon intensity)
# ---------------------------------------------------------------------------------------------


class Region(Sourced):
    """An electricity grid: its carbon intensity and a typical industrial price."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="Catalog name, e.g. us-ca.")
    name: str
    grid_gco2e_per_kwh: float = Field(
        gt=0, le=2000, description="Average grid carbon intensity, g CO2e per kWh."
    )
    year: int = Field(ge=2000, le=2100, description="Year the intensity describes.")
    electricity_usd_per_kwh: float | None = Field(
        None, gt=0, le=2, description="Typical industrial/commercial electricity price, USD/kWh."
    )
    notes: str | None = None


# ---------------------------------------------------------------------------------------------
# Nodes, links
# ---------------------------------------------------------------------------------------------


class NicSpec(Frozen):
    link: str = Field(description="Link id of the network interface.")
    count: int = Field(ge=1)


class Node(Sourced):
    """A server, board or machine that hosts accelerators."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    kind: Literal[
        "hgx-board",
        "oam-board",
        "pcie-server",
        "workstation",
        "desktop",
        "standalone",
        "tpu-host",
        "trn-host",
    ]
    slots: int = Field(ge=1, description="Accelerators it holds.")
    sold_whole: bool = Field(
        False,
        description="Sold with every slot filled, as a baseboard, kit or system is (HGX, OAM, "
        "Gaudi kits): devices in it are bought `slots` at a time. False: cards go in one by one.",
    )
    scale_up_bridges: list[str] = Field(
        default_factory=list,
        description="Scale-up links it carries as bridges between cards (NVLink bridges in a "
        "PCIe server), beside its `intra_node_link`: cards with that scale-up link join it here.",
    )
    accepts_form_factors: list[FormFactor] = Field(
        default_factory=list, description="Form factors that fit its slots (PCIe cards, OAM...)."
    )
    accepts_devices: list[str] = Field(
        default_factory=list,
        description="Accelerator ids it is built for (baseboards), if limited.",
    )
    accepts_device_classes: list[DeviceClass] = Field(
        default_factory=list,
        description="Device classes it can run, if limited: a desktop or workstation case cools "
        "cards with their own fans (consumer and workstation cards), not the passively cooled "
        "datacenter PCIe cards built for a server's forced air. Empty: any.",
    )
    intra_node_link: str = Field(
        description="Link id between its accelerators (pcie5, nvlink4...)."
    )
    price_usd: float = Field(
        ge=0, le=MAX_PRICE_USD, description="Price of the node without accelerators, USD."
    )
    price_date: str
    power_overhead_w: float = Field(ge=0, description="CPUs, fans, NICs, storage at load, watts.")
    rack_units: int = Field(
        ge=0,
        description="Rack units it takes on premises; a tower or a small machine counts the "
        "rack-shelf units it stands in. 0 only for cloud hosts (rented, racked by the provider).",
    )
    nics: list[NicSpec] = Field(default_factory=list)
    notes: str | None = None

    @model_validator(mode="after")
    def _racked(self) -> Node:
        if self.rack_units == 0 and self.kind not in CLOUD_HOST_KINDS:
            raise ValueError(
                f"rack_units: 0 for a {self.kind}; only cloud hosts "
                f"({', '.join(CLOUD_HOST_KINDS)}) take no rack space: give the rack units it "
                "takes (a tower: the rack-shelf units it stands in)"
            )
        return self


CLOUD_HOST_KINDS = ("tpu-host", "trn-host")


LinkKind = Literal[
    "pcie",
    "nvlink",
    "infinity-fabric",
    "infiniband",
    "ethernet",
    "thunderbolt",
    "ici",
    "neuronlink",
    "roce",
    "on-package",
    "wifi",
]


class SwitchSpec(Frozen):
    """A switch model for a link between hosts: what a fleet of more than one host buys to join
    them (its source is the link's `sources.switch`)."""

    name: str
    ports: int = Field(
        ge=2, description="Ports at this link's speed (a breakout port counts as its parts)."
    )
    price_usd: float = Field(ge=0, le=MAX_PRICE_USD, description="Price of one switch, USD.")
    price_date: str
    power_w: float = Field(ge=0, description="Power drawn, watts (the maximum where published).")
    rack_units: int = Field(ge=0, description="Rack units of one switch.")


# The floor and ceiling of a link's figures: 1 Mb/s (in 1e9 bytes/s) and one second one way.
LINK_MIN_GB_S = 1e6 / 8 / 1e9
LINK_MAX_LATENCY_US = 1e6


class Link(Sourced):
    """An interconnect: bandwidth per direction per port and one-way latency."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    kind: LinkKind
    scope: Literal["intra-node", "inter-node", "both"]
    bandwidth_gb_s: float = Field(
        gt=0, description="Per direction, 1e9 bytes/s, per port or per device (>= 1 Mb/s)."
    )
    latency_us: float = Field(
        ge=0, description="One-way small-message latency, microseconds (at most 1 s)."
    )
    allreduce_us: dict[Annotated[int, Field(ge=2)], PositiveFloat] | None = Field(
        None,
        description="Measured time of one small all-reduce (64 KB or less: a tensor-parallel "
        "decode step's activations) across this many devices of the fabric, by the collective "
        "serving engines use on it: devices -> us (planner.estimator.devices."
        "small_allreduce_grid). Its source is `sources.allreduce_us`.",
    )
    allreduce_kernel_gb_s: dict[Annotated[int, Field(ge=2)], PositiveFloat] | None = Field(
        None,
        description="Bytes each device reads from its peers per second inside the serving "
        "engine's own all-reduce kernel at mid sizes (256 KB to a few MB), 1e9 bytes/s, across "
        "this many devices, from a published time-by-size sweep: devices -> GB/s (planner."
        "estimator.devices.kernel_rate_bytes_s); none: the link's bandwidth. Its source is "
        "`sources.allreduce_kernel_gb_s`.",
    )
    price_usd_per_port: float | None = Field(
        None,
        ge=0,
        le=MAX_PRICE_USD,
        description="Host side of one port: the NIC (or its share) with optics or cable, USD; "
        "the switch is priced by `switch`.",
    )
    price_date: str | None = None
    switch: SwitchSpec | None = Field(
        None, description="The switch joining hosts on this link; none: point-to-point cables."
    )
    notes: str | None = None

    @model_validator(mode="after")
    def _plausible(self) -> Link:
        """The bounds a problem file's stated links keep (problem.StatedLink), in these units."""
        if self.bandwidth_gb_s < LINK_MIN_GB_S:
            raise KeyValueError(
                f"link `{self.id}` carries {self.bandwidth_gb_s:g} GB/s, under 1 Mb/s "
                f"({LINK_MIN_GB_S:g} GB/s): no network that slow carries a model's activations; "
                "give bandwidth_gb_s in 1e9 bytes/s per direction (100 GbE: 12.5)",
                ("bandwidth_gb_s",),
            )
        if self.latency_us > LINK_MAX_LATENCY_US:
            raise KeyValueError(
                f"link `{self.id}` takes {self.latency_us:g} us one way, over a second: that is "
                "not a network to split a model over; give latency_us in microseconds "
                "(Ethernet TCP: about 15)",
                ("latency_us",),
            )
        return self

    @model_validator(mode="after")
    def _allreduce_source(self) -> Link:
        if self.allreduce_us and "allreduce_us" not in self.sources:
            raise ValueError("allreduce_us needs its own source: `sources: {allreduce_us: <id>}`")
        if self.allreduce_kernel_gb_s and "allreduce_kernel_gb_s" not in self.sources:
            raise ValueError(
                "allreduce_kernel_gb_s needs its own source: "
                "`sources: {allreduce_kernel_gb_s: <id>}`"
            )
        return self


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


class MoE(Frozen):
    """Mixture-of-experts feed-forward layers."""

    num_experts: int = Field(ge=2, description="Routed experts per MoE layer.")
    experts_per_token: int = Field(ge=1, description="Routed experts active per token.")
    shared_experts: int = Field(0, ge=0, description="Always-active shared experts.")
    expert_intermediate_size: int = Field(gt=0, description="FFN width of one expert.")
    first_dense_layers: int = Field(0, ge=0, description="Leading layers that use a dense FFN.")
    dense_intermediate_size: int | None = Field(
        None, gt=0, description="FFN width of those dense layers."
    )

    @model_validator(mode="after")
    def _routed(self) -> MoE:
        # A router picks its top-k among the experts there are (e.g. Mixtral's 2 of 8): more
        # per token than exist is no model, and made the tile and touched-expert sums NaN.
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token ({self.experts_per_token}) is more than the num_experts "
                f"({self.num_experts}) a token can be routed to: lower it to at most "
                f"{self.num_experts}"
            )
        return self


class MLA(Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank compressed KV."""

    q_lora_rank: int | None = Field(None, gt=0)
    kv_lora_rank: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)


class LinearAttention(Frozen):
    """The linear-attention layers of a hybrid model (Gated DeltaNet: Yang, Kautz and Hatamizadeh
    2024, "Gated Delta Networks"; Qwen3-Next, Qwen3.5 and Qwen3.6 interleave three of them with one
    full-attention layer). Each keeps a fixed-size recurrent state per sequence instead of a KV
    cache. Field names follow the config.json keys `linear_num_key_heads`, `linear_num_value_heads`,
    `linear_key_head_dim`, `linear_value_head_dim` and `linear_conv_kernel_dim`."""

    layers: int = Field(
        ge=1,
        description="Layers that are linear attention (config.json `layer_types` entries "
        "`linear_attention`); the rest of num_layers are full (or sliding-window) attention.",
    )
    num_key_heads: int = Field(gt=0, description="Query/key heads of a linear-attention layer.")
    num_value_heads: int = Field(gt=0, description="Value heads: one recurrent state each.")
    key_head_dim: int = Field(gt=0, description="Width of one query/key head.")
    value_head_dim: int = Field(gt=0, description="Width of one value head.")
    conv_kernel_dim: int = Field(
        gt=0, description="Taps of the short causal convolution over q, k and v."
    )

    @model_validator(mode="after")
    def _heads_group(self) -> LinearAttention:
        # Qwen3NextGatedDeltaNet repeats each query/key head over num_v_heads / num_k_heads
        # value heads: a count that does not divide is no model.
        if self.num_value_heads % self.num_key_heads:
            raise ValueError(
                f"num_value_heads ({self.num_value_heads}) must be a multiple of num_key_heads "
                f"({self.num_key_heads}): each query/key head serves a whole number of value heads"
            )
        return self


class ApiPrice(Frozen):
    """A managed API's published price for a model: per million prompt and completion tokens."""

    provider: str
    endpoint: str = Field(description="The provider's model name.")
    prompt_usd_per_m: float = Field(gt=0, description="USD per million prompt (input) tokens.")
    completion_usd_per_m: float = Field(
        gt=0, description="USD per million completion (output) tokens."
    )
    date: str = Field(description="When the price was read (YYYY-MM).")
    source: str = Field(description="Reference id of the price page.")


class ModelArch(Sourced):
    """A decoder-only transformer, described as its Hugging Face config does."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    family: str
    released: str
    api_prices: list[ApiPrice] = Field(
        default_factory=list, description="Managed APIs serving this model, and their prices."
    )
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0, description="= attention heads for MHA, fewer for GQA.")
    head_dim: int | None = Field(None, gt=0, description="Defaults to hidden_size / heads.")
    intermediate_size: int = Field(gt=0, description="Dense FFN width.")
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool = False
    mlp: Literal["gated", "plain"] = Field(
        description="gated: SwiGLU/GeGLU (3 matrices); plain: 2."
    )
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    attention_bias: Literal["none", "qkv", "all"] = Field(
        "none",
        description="Biases on attention projections: none, q/k/v only (Qwen2), or all four.",
    )
    mlp_bias: bool = False
    learned_position_embeddings: int = Field(
        0, ge=0, description="Positions with a learned embedding (GPT-2/3)."
    )
    extra_norms_per_layer: int = Field(
        0, ge=0, description="Norms beyond the usual two per block (Gemma 2: 2)."
    )
    moe: MoE | None = None
    mla: MLA | None = None
    attention_output_gate: bool = Field(
        False,
        description="Full-attention layers gate their output with a sigmoid of a second query-"
        "sized projection (Qwen3-Next, Qwen3.5: q_proj is twice as wide; config.json "
        "`attn_output_gate`).",
    )
    linear_attention: LinearAttention | None = Field(
        None, description="Linear-attention layers of a hybrid model (None: every layer attends)."
    )
    max_context: int = Field(gt=0, description="Longest context the model was trained for, tokens.")
    sliding_window: int | None = Field(
        None, gt=0, description="Tokens a local (sliding-window) attention layer attends to."
    )
    local_layers: int = Field(
        0,
        ge=0,
        description="Layers that attend within sliding_window; the rest attend to the whole context.",
    )
    published_params: float = Field(
        gt=0,
        description="Total parameters as published; within 5 % of the count the architecture "
        "implies (planner.catalog.PARAMS_TOLERANCE), else the catalog is refused.",
    )
    published_active_params: float | None = Field(None, gt=0, description="Active per token (MoE).")
    notes: str | None = None

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @model_validator(mode="after")
    def _heads_divide(self) -> ModelArch:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.moe and self.moe.first_dense_layers > self.num_layers:
            raise ValueError("moe.first_dense_layers exceeds num_layers")
        if self.local_layers > self.num_layers:
            raise ValueError(
                f"local_layers ({self.local_layers}) exceeds num_layers ({self.num_layers})"
            )
        linear = self.linear_attention.layers if self.linear_attention else 0
        if self.local_layers + linear > self.num_layers:
            raise ValueError(
                f"local_layers ({self.local_layers}) and linear_attention.layers ({linear}) "
                f"together exceed num_layers ({self.num_layers})"
            )
        if linear and linear >= self.num_layers:
            raise ValueError(
                f"linear_attention.layers ({linear}) leaves none of the {self.num_layers} layers "
                "full attention; a hybrid model keeps at least one"
            )
        if self.mla is not None and linear:
            raise ValueError(
                "a model with linear_attention layers uses GQA full attention, not mla"
            )
        if bool(self.local_layers) != (self.sliding_window is not None):
            raise ValueError(
                "sliding_window and local_layers go together: give the window and how many "
                "layers use it (every layer for Mistral 7B v0.1, half for Gemma 2)"
            )
        return self


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


class AcceleratorFile(Frozen):
    references: dict[str, Reference]
    accelerators: list[Accelerator]


class NodeFile(Frozen):
    references: dict[str, Reference]
    nodes: list[Node]


class InstanceFile(Frozen):
    references: dict[str, Reference]
    instances: list[Instance]


class LinkFile(Frozen):
    references: dict[str, Reference]
    links: list[Link]


class ModelFile(Frozen):
    references: dict[str, Reference]
    models: list[ModelArch]


class RegionFile(Frozen):
    references: dict[str, Reference]
    regions: list[Region]
