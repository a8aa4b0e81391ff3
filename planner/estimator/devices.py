"""Accelerators as numpy columns, so every formula runs over all candidate devices at once."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.estimator.efficiency import (
    Efficiency,
    batched_compute_for,
    efficiency_for,
    vendor_batched_scale,
)
from planner.estimator.formats import WeightFormat
from planner.estimator.tensor_rates import fp16_accumulate_ratio
from planner.schema.catalog import Accelerator, Link, Precision

Array = npt.NDArray[np.float64]
# A tensor-parallel degree: one for all rows, or one per row of a DeviceTable.
Degree = int | npt.NDArray[np.int64]


@dataclass(frozen=True)
class DeviceTable:
    """One row per device; units in the names."""

    ids: tuple[str, ...]
    memory_bytes: Array
    bandwidth_bytes_s: Array
    fp32_flops: Array  # vector (non-tensor) FP32 throughput, for dequantization work
    tdp_w: Array
    idle_w: Array
    purchase_usd: Array  # NaN where not sold
    rent_usd_per_hour: Array  # NaN where not rented
    scale_up_bytes_s: Array  # per direction; PCIe where there is no scale-up fabric
    domain_size: Array
    all_to_all: Array  # 1.0 where the scale-up domain is switched or fully meshed, else 0.0
    # seconds of one small all-reduce across n devices of the row's fabric, n = 0 .. 128 in
    # columns (planner.estimator.devices.small_allreduce_grid); NaN where nothing is measured
    allreduce_grid_s: Array
    # bytes/s each device reads inside its fabric's all-reduce kernel across n devices, n = 0 ..
    # 128 in columns (kernel_rate_bytes_s); NaN where not measured (the link's bandwidth applies)
    allreduce_kernel_grid: Array
    # efficiency factors, one column each
    eff_bandwidth: Array
    eff_compute: Array
    eff_batched_compute: Array  # batched serving matmuls, 16-bit (catalog/serving.yaml)
    eff_batched_low: Array  # the same on 8-bit tensor paths
    eff_batched_fp4: Array  # the same on 4-bit tensor paths
    eff_training_mfu: Array
    moe_routed_s: Array  # seconds per routed element per MoE layer (Efficiency.moe_routed_ns)
    moe_fused_share: Array
    layer_overhead_s: Array
    step_overhead_s: Array
    dequant_ops_per_weight: Array
    power_activity_floor: Array
    usable_memory_bytes: Array
    gpu_share: Array  # the share of memory the platform lets the accelerator hold (1 for most)
    devices: tuple[Accelerator, ...]
    # peak_flops per weight format, filled on first use (`take` keeps the rows it takes).
    _peak: dict[WeightFormat, Array] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # batched_compute per weight format, filled on first use (as _peak).
    _batched: dict[WeightFormat, Array] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # other columns derived from the devices' specifications alone, by key (`derived`).
    _derived: dict[Hashable, Array] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, idx: Sequence[int] | npt.NDArray[np.int_]) -> DeviceTable:
        """The rows at `idx`, as a new table."""
        ix = np.asarray(idx, dtype=int)
        arrays: dict[str, Any] = {
            f.name: getattr(self, f.name)[ix]
            for f in fields(self)
            if isinstance(getattr(self, f.name), np.ndarray)
        }
        out = replace(
            self,
            ids=tuple(self.ids[i] for i in ix),
            devices=tuple(self.devices[i] for i in ix),
            **arrays,
        )
        caches = ((out._peak, self._peak), (out._batched, self._batched))
        for known, mine in caches:
            for fmt, column in mine.items():  # rows of what is already known
                known[fmt] = column[ix]
                known[fmt].flags.writeable = False
        for key, column in self._derived.items():
            out._derived[key] = column[ix]
            out._derived[key].flags.writeable = False
        return out

    def derived(self, key: Hashable, make: Callable[[DeviceTable], Array]) -> Array:
        """A column computed by `make` from the devices' specifications alone (never from the
        efficiency factors), once per table and `key`; read-only, kept by `take`."""
        column = self._derived.get(key)
        if column is None:
            column = np.asarray(make(self), dtype=np.float64)
            column.flags.writeable = False
            self._derived[key] = column
        return column

    def small_allreduce_s(self, tp: Degree) -> Array:
        """Each row's measured time of one small all-reduce across `tp` of its devices (one
        degree, or one per row; a one-row table takes any shape of degrees); NaN where its
        fabric has no measurement."""
        return _at_degree(self, self.allreduce_grid_s, tp)

    def kernel_rate_bytes_s(self, tp: Degree) -> Array:
        """Each row's all-reduce kernel rate across `tp` of its devices (as small_allreduce_s);
        NaN where its fabric has no measurement."""
        return _at_degree(self, self.allreduce_kernel_grid, tp)

    def usable_bytes(self, headroom: float) -> Array:
        """Bytes an engine may fill with `headroom` of each device's memory kept free: at most
        the share its platform lets it hold (Memory.usable_bytes, one column)."""
        return self.memory_bytes * np.minimum(1.0 - headroom, self.gpu_share)

    def peak_flops(self, fmt: WeightFormat) -> Array:
        """Dense tensor FLOP/s for the best precision the device supports for `fmt` (read-only)."""
        peak = self._peak.get(fmt)
        if peak is None:
            peak = np.array([_peak(d, fmt) for d in self.devices])
            peak.flags.writeable = False
            self._peak[fmt] = peak
        return peak

    def batched_compute(self, fmt: WeightFormat) -> Array:
        """Batched serving compute efficiency for `fmt`: the factor of the tensor path the
        device runs the format on (4-bit, 8-bit, else 16-bit); read-only."""
        known = self._batched.get(fmt)
        if known is not None:
            return known
        prec = [_precision(d, fmt) for d in self.devices]
        four = np.array([p == "fp4" for p in prec])
        low = np.array([p in LOW_PRECISION for p in prec])
        out = np.where(
            four,
            self.eff_batched_fp4,
            np.where(low, self.eff_batched_low, self.eff_batched_compute),
        )
        out.flags.writeable = False
        self._batched[fmt] = out
        return out


LOW_PRECISION = ("fp8", "int8", "fp4")


# PCIe x16 per-direction bandwidth by generation, bytes/s (PCI-SIG: 16 GT/s x16 = 31.5 GB/s for
# gen 4 after 128b/130b encoding; doubles per generation).
PCIE_X16_BYTES_S = {3: 15.75e9, 4: 31.5e9, 5: 63.0e9, 6: 126.0e9}


def _block_scaled_mma(d: Accelerator) -> bool:
    """Whether engines multiply MX weights with MX activations on `d`: datacenter parts with
    FP4 tensor cores (B200, GB200, B300, GB300 in TensorRT-LLM's GPT-OSS guide; MI355X). The
    other Blackwell parts (RTX 50, RTX PRO, GB10) list an FP4 rate too, but the engines'
    MXFP4 kernels there dequantize to 16-bit: llama.cpp's gpt-oss prefill on a DGX Spark
    (calibration/measurements.yaml, llamacpp-bench-dgx-spark) runs below its 16-bit rate."""
    return bool(d.dense_tflops.tflops("fp4")) and d.device_class == "datacenter"


def _runs(d: Accelerator, fmt: WeightFormat, precision: Precision) -> bool:
    """Whether `d` multiplies `fmt` at `precision`: it lists a rate for it and, for a
    block-scaled format's 8-bit path, multiplies block-scaled operands (_block_scaled_mma)."""
    if not d.dense_tflops.tflops(precision):
        return False
    return not (fmt.block_scaled and precision == "fp8" and not _block_scaled_mma(d))


def _precision(d: Accelerator, fmt: WeightFormat) -> Precision | None:
    """The tensor precision `d` runs `fmt` on: the format's best one the device runs."""
    for precision in fmt.compute:
        if _runs(d, fmt, precision):
            return precision
    return None


def _at_degree(table: DeviceTable, grid: Array, tp: Degree) -> Array:
    """Each row's entry of a per-device-count `grid` (rows x ALLREDUCE_GRID) at `tp` devices:
    one degree, or one per row (a one-row table takes any shape of degrees)."""
    last = grid.shape[1] - 1
    if isinstance(tp, int | np.integer):  # one degree for every row: a column
        return np.asarray(grid[:, min(max(int(tp), 0), last)])
    n = np.clip(np.rint(np.asarray(tp, dtype=np.float64)).astype(np.int64), 0, last)
    if len(table) == 1:
        return np.asarray(grid[0, n], dtype=np.float64)
    rows = np.arange(len(table))
    return np.asarray(grid[rows, np.broadcast_to(n, rows.shape)])


def _peak(d: Accelerator, fmt: WeightFormat) -> float:
    best = _precision(d, fmt)
    if best is not None:
        return (d.dense_tflops.tflops(best) or 0.0) * 1e12
    # No listed precision: fall back to 16-bit tensor, then FP32.
    fallback: tuple[Precision, ...] = ("bf16", "fp16", "fp32")
    for precision in fallback:
        v = d.dense_tflops.tflops(precision)
        if v:
            return v * 1e12
    return 0.0


def _vector_flops(d: Accelerator) -> float:
    """FP32 vector throughput; where a vendor publishes none (TPU, Trainium), 1/16 of the 16-bit
    tensor rate, the ratio of NVIDIA's datacenter parts (A100 19.5/312, H100 67/989)."""
    if d.dense_tflops.fp32:
        return d.dense_tflops.fp32 * 1e12
    return (d.dense_tflops.bf16 or d.dense_tflops.fp16 or 0.0) * 1e12 / 16


def _host_link_bytes_s(d: Accelerator) -> float:
    ic = d.interconnect
    if ic.scale_up_gb_s:
        return ic.scale_up_gb_s * 1e9
    gen = ic.pcie_gen or 4
    lanes = ic.pcie_lanes or 16
    return PCIE_X16_BYTES_S[gen] * lanes / 16


# Device counts a fabric's measured all-reduce times are tabulated for (0 to 128; beyond, the
# last entry): every scale-up domain in the catalog fits.
ALLREDUCE_GRID = 129


def small_allreduce_seconds(
    points: Mapping[int, float] | None, n: npt.ArrayLike, ring: bool
) -> Array:
    """Seconds of one small all-reduce across `n` devices from a fabric's measured times
    (`Link.allreduce_us`, devices -> us). Between measured counts, linear. Outside them, by
    the algorithm's shape: a ring (`ring`: PCIe, a bridge, a torus, NCCL between machines)
    takes 2 (n - 1) steps, so its time scales with n - 1 from the nearest measured count; an
    all-to-all fabric's one-shot or two-shot kernels take about the same time on 2 and 8
    devices (SGLang PR #2904: vLLM's custom all-reduce on H100 takes 8.7, 9.2 and 11.8 us for
    32 KB on 2, 4 and 8 GPUs), so its nearest count's time holds. NaN without measurements;
    0 for n < 2 (nothing to reduce). Counts in `points` are 2 or more (the schema's rule)."""
    k = np.asarray(n, dtype=np.float64)
    if not points:
        return np.full(k.shape, np.nan)
    xs = np.array(sorted(points), dtype=np.float64)
    ys = np.array([points[int(x)] * 1e-6 for x in xs])
    out = np.interp(k, xs, ys)  # holds the end values outside the measured counts
    if ring:
        steps = np.maximum(k - 1.0, 0.0)
        out = np.where(k < xs[0], ys[0] * steps / (xs[0] - 1.0), out)
        out = np.where(k > xs[-1], ys[-1] * steps / (xs[-1] - 1.0), out)
    return np.asarray(np.where(k < 2, 0.0, out), dtype=np.float64)


def small_allreduce_grid(points: Mapping[int, float] | None, ring: bool) -> Array:
    """small_allreduce_seconds for n = 0 .. ALLREDUCE_GRID - 1 devices (DeviceTable's
    column; read-only, shared by every table of the same fabric)."""
    return _grid(tuple(sorted((points or {}).items())), ring)


@functools.lru_cache(maxsize=256)
def _grid(points: tuple[tuple[int, float], ...], ring: bool) -> Array:
    out = small_allreduce_seconds(dict(points), np.arange(ALLREDUCE_GRID), ring)
    out.flags.writeable = False
    return out


def _fabric_allreduce_s(devices: Sequence[Accelerator], links: Mapping[str, Link] | None) -> Array:
    """Rows of small_allreduce_grid for each device's fabric: its scale-up link, else the PCIe
    link of its generation, in `links` (the catalog's; by default the loaded catalog's)."""
    if links is None:
        from planner.catalog import load_catalog

        links = load_catalog().links
    rows: list[Array] = []
    for d in devices:
        ic = d.interconnect
        link = links.get(ic.scale_up or f"pcie{ic.pcie_gen or 4}")
        points = link.allreduce_us if link is not None else None
        rows.append(small_allreduce_grid(points, ring=not ic.all_to_all))
    return np.array(rows, dtype=np.float64).reshape(len(rows), ALLREDUCE_GRID)


def kernel_rate_bytes_s(
    points: Mapping[int, float] | None, n: npt.ArrayLike, link_bytes_s: float
) -> Array:
    """Bytes/s each of `n` devices reads inside its fabric's all-reduce kernel, from the rates
    measured at some device counts (`Link.allreduce_kernel_gb_s`, devices -> GB/s). Between
    measured counts, linear. Below the fewest measured, the rate falls with the peers each
    device reads from, n - 1: in a fully connected mesh (Infinity Fabric) every peer is its own
    links, so fewer peers read through fewer links. Above the most measured, the rate holds:
    the kernel reads through a fixed number of workgroups whatever the rank count (vLLM
    csrc/custom_all_reduce.cuh, defaultBlockLimit = 16 blocks of 512 threads on ROCm), so more
    peers share the same loads in flight rather than adding to them (vLLM PR #39080: vLLM's
    kernel on 8 MI355X reads 1.75 x 1.5 MB in 24.2 - 6.3 us, 154 GB/s per rank, 29 % of the
    7 x 76.8 GB/s its links carry). At most the link's bandwidth `link_bytes_s`. NaN without
    measurements (the link's bandwidth applies)."""
    k = np.asarray(n, dtype=np.float64)
    if not points:
        return np.full(k.shape, np.nan)
    xs = np.array(sorted(points), dtype=np.float64)
    ys = np.array([points[int(x)] * 1e9 for x in xs])
    out = np.interp(k, xs, ys)
    peers = np.maximum(k - 1.0, 1.0)
    out = np.where(k < xs[0], ys[0] * peers / (xs[0] - 1.0), out)  # np.interp holds above
    return np.asarray(np.minimum(out, link_bytes_s), dtype=np.float64)


def _fabric_kernel_grid(devices: Sequence[Accelerator], links: Mapping[str, Link] | None) -> Array:
    """Rows of kernel_rate_bytes_s for n = 0 .. ALLREDUCE_GRID - 1 devices, for each device's
    fabric (found as _fabric_allreduce_s finds it)."""
    if links is None:
        from planner.catalog import load_catalog

        links = load_catalog().links
    rows: list[Array] = []
    counts = np.arange(ALLREDUCE_GRID)
    for d in devices:
        ic = d.interconnect
        link = links.get(ic.scale_up or f"pcie{ic.pcie_gen or 4}")
        points = link.allreduce_kernel_gb_s if link is not None else None
        rows.append(kernel_rate_bytes_s(points, counts, _host_link_bytes_s(d)))
    return np.array(rows, dtype=np.float64).reshape(len(rows), ALLREDUCE_GRID)


def device_table(
    devices: Sequence[Accelerator],
    overrides: Mapping[str, dict[str, float]] | None = None,
    links: Mapping[str, Link] | None = None,
) -> DeviceTable:
    """Build the columns; `overrides` maps a device id, a class name or `class/architecture`
    to efficiency factors (the device's entry wins, then its architecture's, then its class's);
    `links`: the catalog's links, for the fabrics' measured all-reduce times (by default the
    loaded catalog's)."""
    ov = overrides or {}
    effs: list[Efficiency] = [
        efficiency_for(
            d.id,
            d.device_class,
            d.architecture,
            {
                **ov.get(d.device_class, {}),
                **ov.get(f"{d.device_class}/{d.architecture}", {}),
                **ov.get(d.id, {}),
            },
        )
        for d in devices
    ]

    def batched(d: Accelerator, e: Efficiency, **path: bool) -> float:
        """A user's `compute` override as given; else the class's batched serving figure on
        the format's tensor path, times the vendor's serving-stack multiplier. A class without
        one falls back on its single-prompt factor, which counts against llama.cpp's
        FP16-accumulate rate (planner.estimator.prefill_path): converted to the listed rate
        the batched path divides by, so both reach the same FLOP/s."""
        given = ov.get(d.id, {}).get("compute") or ov.get(d.device_class, {}).get("compute")
        if given:
            return given
        single = e.compute * fp16_accumulate_ratio(d)
        return batched_compute_for(d.device_class, single, **path) * vendor_batched_scale(d.vendor)

    def col(values: Sequence[float | None]) -> Array:
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)

    return DeviceTable(
        ids=tuple(d.id for d in devices),
        memory_bytes=col([d.memory.bytes for d in devices]),
        bandwidth_bytes_s=col([d.memory.usable_bandwidth_gb_s * 1e9 for d in devices]),
        fp32_flops=col([_vector_flops(d) for d in devices]),
        tdp_w=col([d.power.tdp_w for d in devices]),
        idle_w=col([d.power.idle_w for d in devices]),
        purchase_usd=col([d.price.purchase_usd for d in devices]),
        rent_usd_per_hour=col([d.price.rent_usd_per_hour for d in devices]),
        scale_up_bytes_s=col([_host_link_bytes_s(d) for d in devices]),
        domain_size=col([d.interconnect.domain_size for d in devices]),
        all_to_all=col([float(d.interconnect.all_to_all) for d in devices]),
        allreduce_grid_s=_fabric_allreduce_s(devices, links),
        allreduce_kernel_grid=_fabric_kernel_grid(devices, links),
        eff_bandwidth=col([e.bandwidth for e in effs]),
        eff_compute=col([e.compute for e in effs]),
        eff_batched_compute=col([batched(d, e) for e, d in zip(effs, devices, strict=True)]),
        eff_batched_low=col(
            [batched(d, e, low_precision=True) for e, d in zip(effs, devices, strict=True)]
        ),
        eff_batched_fp4=col(
            [batched(d, e, four_bit=True) for e, d in zip(effs, devices, strict=True)]
        ),
        eff_training_mfu=col([e.training_mfu for e in effs]),
        moe_routed_s=col([e.moe_routed_ns * 1e-9 for e in effs]),
        moe_fused_share=col([e.moe_fused_share for e in effs]),
        layer_overhead_s=col([e.layer_overhead_us * 1e-6 for e in effs]),
        step_overhead_s=col([e.step_overhead_us * 1e-6 for e in effs]),
        dequant_ops_per_weight=col([e.dequant_ops_per_weight for e in effs]),
        power_activity_floor=col([e.power_activity_floor for e in effs]),
        usable_memory_bytes=col(
            [
                min(e.usable_memory, d.memory.gpu_share or 1.0) * d.memory.bytes
                for e, d in zip(effs, devices, strict=True)
            ]
        ),
        gpu_share=col([d.memory.gpu_share or 1.0 for d in devices]),
        devices=tuple(devices),
    )
