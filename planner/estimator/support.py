"""What software runs a workload on a device: the support matrix (catalog support.yaml) read for
one device, weight format and KV-cache format, and the problem's engine and architecture limits.

A device's runtime for a workload is the engine the workload names, or else the supported
engine of lowest rank (experimental rows only when named), with the backend its row gives.
Devices of one replica run one engine; they may differ in vendor or backend only where that
engine runs such pipelines (llama.cpp RPC, exo) and the problem allows it
(`constraints.cross_stack_pipelines`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from planner.catalog import Catalog
from planner.errors import InputError
from planner.estimator.efficiency import load_efficiency
from planner.estimator.formats import GGUF_FORMATS, format_parts
from planner.estimator.rpc_hop import NO_RPC, RpcTimes
from planner.schema.catalog import Accelerator, ModelArch
from planner.schema.problem import Constraints, InferenceWorkload
from planner.schema.support import KernelFamily


@dataclass(frozen=True)
class Runtime:
    """An engine on a backend, as a support row names them."""

    engine: str
    backend: str
    experimental: bool
    source: str  # the row's reference id
    date: str

    @property
    def label(self) -> str:
        return f"{self.engine} ({self.backend})"


def runtimes(cat: Catalog, device: Accelerator, weights: str, kv: str) -> list[Runtime]:
    """Every engine and backend that runs `weights` with a `kv` cache on `device`, by engine
    rank (the supported, not experimental, ones first)."""
    arch = device.architecture
    out: dict[tuple[str, str], Runtime] = {}
    for row in cat.support:
        if gguf_row_refused(cat, row.engine, row.experimental, weights):
            continue
        # A mixed file (formats.mixed_format) runs where the row runs both of its formats.
        listed = all(part in row.weights for part in format_parts(weights))
        if arch in row.architectures and listed and kv in row.kv:
            key = (row.engine, row.backend)
            if key not in out or (out[key].experimental and not row.experimental):
                out[key] = Runtime(row.engine, row.backend, row.experimental, row.source, row.date)
    return sorted(
        out.values(),
        key=lambda r: (r.experimental, cat.engines[r.engine].rank, r.engine, r.backend),
    )


def runtime_for(
    cat: Catalog, device: Accelerator, w: InferenceWorkload, c: Constraints
) -> Runtime | None:
    """The runtime a replica of `w` uses on `device`: the engine the workload names (or the
    first the constraints allow), on its best backend; None when nothing runs it."""
    allowed = c.engines
    for r in runtimes(cat, device, w.weights, w.kv):
        if w.engine is not None:
            if r.engine == w.engine:
                return r
            continue
        if r.experimental or (allowed is not None and r.engine not in allowed):
            continue
        if cat.engines[r.engine].named_only:
            continue
        return r
    return None


def backends_of(
    cat: Catalog, devices: Iterable[str], w: InferenceWorkload, c: Constraints
) -> dict[str, str]:
    """Each device's backend under the runtime a replica of `w` uses on it."""
    out = {}
    for dev in devices:
        r = runtime_for(cat, cat.accelerator(dev), w, c)
        if r is not None:
            out[dev] = r.backend
    return out


def architecture_allowed(cat: Catalog, device: Accelerator, c: Constraints) -> bool:
    """The device's architecture meets the problem's floors (`min_architecture`: per family,
    the generation at least the named one's) and is not past its end of life when
    `exclude_end_of_life` is set."""
    arch = cat.architecture_of(device)
    if c.exclude_end_of_life and arch.end_of_life is not None:
        return False
    for name in c.min_architecture:
        floor = cat.architectures[name]
        if floor.family == arch.family and arch.generation < floor.generation:
            return False
    return True


def can_pipeline(cat: Catalog, a: Runtime, b: Runtime, c: Constraints, same_vendor: bool) -> bool:
    """Whether stages on runtimes `a` and `b` can form one replica: one engine, and one vendor
    and backend unless that engine runs pipelines across stacks and the problem allows it."""
    if a.engine != b.engine:
        return False
    if same_vendor and a.backend == b.backend:
        return True
    return c.cross_stack_pipelines and cat.engines[a.engine].cross_stack_pipeline


def supported_devices(
    cat: Catalog, devices: list[Accelerator], weights: str, kv: str
) -> list[Accelerator]:
    """The devices some engine runs `weights` with a `kv` cache on; an error naming what the
    matrix offers when none is left."""
    kept = [d for d in devices if runtimes(cat, d, weights, kv)]
    if not kept:
        shown = ", ".join(d.id for d in devices[:6]) + (", ..." if len(devices) > 6 else "")
        raise InputError(
            f"no engine in the catalog's support matrix runs {weights} weights with a {kv} KV "
            f"cache on {shown}; see `planner catalog list support` for what runs where"
        )
    return kept


class EngineTimes(TypedDict):
    """The serving engine's own times that a replica's step takes, in seconds, as the keyword
    arguments of planner.estimator.replica.inference_replica and IterationTime, with the
    kernels its prompts run on (a llama.cpp-style pool's prefill rates depend on its release)."""

    kernels: KernelFamily  # Engine.kernels (engine_kernels)
    hop_overhead_s: float  # added to each pipeline hop (Engine.hop_overhead_us)
    rpc: RpcTimes  # its RPC backend's protocol per remote stage (planner.estimator.rpc_hop)
    host_s_per_token: float  # host work per generated token, serial with each step
    engine_layer_s: float  # added per layer of every forward step (older release, eager launch)
    engine_step_s: float  # added to every forward step (older release, eager launch)


def engine_times(cat: Catalog, engine: str | None) -> EngineTimes:
    """`engine`'s times (planner.schema.support.Engine, and the fixed times the efficiency file
    gives a release beyond the class figures, plus the host launch time per block and per step
    of an engine run without CUDA graphs, Engine.launch_us_per_layer and launch_us_per_step;
    0 without an engine)."""
    e = cat.engines.get(engine) if engine else None
    if e is None:
        return EngineTimes(
            kernels=engine_kernels(cat, engine),
            hop_overhead_s=0.0,
            rpc=NO_RPC,
            host_s_per_token=0.0,
            engine_layer_s=0.0,
            engine_step_s=0.0,
        )
    fixed = load_efficiency().engines.get(e.id)
    # An engine that launches kernel by kernel (no CUDA graph) pays its host launch time per
    # block and per step on top of any fitted fixed time (Engine.launch_us_per_layer/_step).
    layer_us = (fixed.layer_overhead_us if fixed else 0.0) + e.launch_us_per_layer
    step_us = (fixed.step_overhead_us if fixed else 0.0) + e.launch_us_per_step
    return EngineTimes(
        kernels=e.kernels,
        hop_overhead_s=e.hop_overhead_us * 1e-6,
        rpc=RpcTimes(e.rpc_round_trip_us * 1e-6, e.rpc_round_trips, e.rpc_graph_resent),
        host_s_per_token=e.host_us_per_token * 1e-6,
        engine_layer_s=layer_us * 1e-6,
        engine_step_s=step_us * 1e-6,
    )


def engine_kernels(cat: Catalog, engine: str | None) -> KernelFamily:
    """The kernels `engine` runs a prompt's matrix products on (Engine.kernels): without an
    engine, a current llama.cpp release's (the engine behind the calibration rows that name
    none); an id the catalog lacks (a measurement's), the serving grid's."""
    if not engine:
        return "llama.cpp"
    e = cat.engines.get(engine)
    return e.kernels if e is not None else "serving-grid"


def gguf_row_refused(cat: Catalog, engine: str, experimental: bool, weights: str) -> bool:
    """Whether a support row of `engine` (`experimental` or not) is never used for `weights`:
    a GGUF format on a row the engine calls experimental, under an engine that does not run
    llama.cpp's kernels (gguf_refusal says why). A plain row of the same engine for other
    architectures (a user catalog's) leaves this row refused: each device is served by its
    own architecture's rows."""
    if not experimental or weights not in GGUF_FORMATS:
        return False
    e = cat.engines.get(engine)
    return e is not None and e.kernels == "serving-grid"


def gguf_refusal(cat: Catalog, engine: str | None, weights: str) -> str | None:
    """Why `weights` under the named `engine` is not planned, or None where it is: a GGUF
    format (formats.GGUF_FORMATS) that the engine's support rows list as experimental only,
    under an engine that does not run llama.cpp's kernels (Engine.kernels). An engine with a
    GGUF format of its own that its rows state plainly (distributed-llama's Q40, measured on
    its own engine) is planned as before.

    vLLM, the one such engine whose support rows list GGUF, loads it through kernels of its
    own (vllm/model_executor/layers/quantization/gguf.py, `_fused_mul_mat_gguf`): a
    matrix-vector kernel for a few tokens, else a matrix-multiply one whose source
    (csrc/quantization/gguf/mmq.cuh) is copied from llama.cpp build b2899's ggml-cuda/mmq.cu,
    from before MMQ ran on tensor cores (llama.cpp PR #7676) and unlike either of the kernel
    families the planner times; its documentation calls GGUF support "highly experimental and
    under-optimized" (support.yaml `vllm-gguf`). No measurement here times those kernels, so
    a figure for them would be one nobody measured: the combination is refused instead."""
    if not engine or weights not in GGUF_FORMATS:
        return None
    e = cat.engines.get(engine)
    if e is None or e.kernels != "serving-grid":
        return None
    listed = [r for r in cat.support if r.engine == e.id and weights in r.weights]
    if not listed or not all(r.experimental for r in listed):
        return None
    llama = sorted(
        (x for x in cat.engines.values() if x.kernels == "llama.cpp"), key=lambda x: x.rank
    )
    fix = f"name `engine: {llama[0].id}`" if llama else "name an engine on llama.cpp's kernels"
    rows = [r for r in cat.support if r.engine == e.id and not r.experimental]
    native = sorted({f for r in rows for f in r.weights} - GGUF_FORMATS)
    return (
        f"{weights} is a GGUF format, which {e.id} runs only experimentally (support row "
        f"source `{listed[0].source}`) on GGUF kernels of its own, not llama.cpp's, that no "
        "measurement here times; "
        f"{fix} to serve the GGUF file on llama.cpp's kernels, or keep {e.id} with weights it "
        f"runs natively ({', '.join(native) or 'none listed'}; `planner catalog list support` "
        "shows on which devices)"
    )


def hop_overhead_s(cat: Catalog, engine: str | None) -> float:
    """Seconds the serving engine adds to each pipeline hop between machines."""
    return engine_times(cat, engine)["hop_overhead_s"]


def exchange_overhead_s(cat: Catalog, engine: str | None, device: str | None = None) -> float:
    """Seconds the serving engine adds to each tensor-parallel exchange between machines of
    `device` (Engine.exchange_overhead_us; 0 without an engine).

    The figure is measured on one device (Engine.exchange_overhead_device). Around every
    exchange the engine's threads meet at a spin barrier and its root loops over non-blocking
    socket calls (distributed-llama's TaskLoop in src/utils.cpp, SocketPool in src/socket.cpp):
    CPU-side work whose pace is the machine's. Where the engine's source also measured its own
    time per exchange task on ONE machine of a device (Engine.task_sync_us: the README tables'
    T column of a one-machine run over its exchange tasks, no network involved), the figure is
    scaled by that device's time over the measuring device's; a device without one takes the
    figure as measured."""
    e = cat.engines.get(engine) if engine else None
    if e is None:
        return 0.0
    tasks = e.task_sync_us or {}
    ref = e.exchange_overhead_device
    scale = tasks[device] / tasks[ref] if device in tasks and ref in tasks else 1.0
    return e.exchange_overhead_us * 1e-6 * scale


def host_s_per_token(cat: Catalog, engine: str | None) -> float:
    """Seconds of host work per generated token the serving engine does serially with the
    device's step."""
    return engine_times(cat, engine)["host_s_per_token"]


def check_estimate_group(cat: Catalog, engine: str | None, tp: int | None) -> None:
    """`planner estimate` prices a tensor-parallel group inside one host (two ring all-reduces
    per block over the device's own link). An engine with an exchange layout of its own
    (Engine.tensor_layout: distributed-llama's releases) runs a group only over machines joined
    by a network, which the estimate does not know: such a group is refused, pointing at a
    problem file, which states the network and which `planner solve` prices."""
    e = cat.engines.get(engine) if engine else None
    if e is None or tp is None or tp <= 1 or e.tensor_layout == "ring-allreduce":
        return
    raise InputError(
        f"--tp {tp} with --engine {e.id}: {e.id} runs a tensor-parallel group only over "
        f"machines joined by a network ({e.tensor_layout} exchanges, "
        f"{e.exchange_overhead_us:g} us of its own each), which planner estimate does not price "
        "(its groups sit inside one host); write a problem file with the workload's "
        f"`engine: {e.id}`, the machines in constraints.inventory and their link in "
        "constraints.network, and run planner solve on it, or give --tp 1"
    )


def estimate_engines(
    cat: Catalog, devices: list[Accelerator], weights: str, kv: str, engine: str | None
) -> tuple[list[Accelerator], list[tuple[str, EngineTimes]]]:
    """For `planner estimate`: the devices `engine` runs `weights` with a `kv` cache on (every
    device given when no engine is named) and, per device, the engine its figures assume (the
    named one, else the device's default: the first supported engine by rank) with its own
    times; an error naming what the matrix offers when the named engine runs
    on none of them."""
    if engine is not None and engine not in cat.engines:
        known = ", ".join(sorted(cat.engines))
        raise InputError(f"--engine `{engine}` is not in the catalog; choose one of {known}")
    refused = gguf_refusal(cat, engine, weights)
    if refused is not None:
        raise InputError(f"--weights {weights} with --engine {engine}: {refused}")
    kept: list[Accelerator] = []
    out: list[tuple[str, EngineTimes]] = []
    for d in devices:
        found = runtimes(cat, d, weights, kv)
        names = [
            r.engine
            for r in found
            if r.engine == engine or (engine is None and not cat.engines[r.engine].named_only)
        ]
        if not names:
            continue
        kept.append(d)
        out.append((names[0], engine_times(cat, names[0])))
    if not kept:
        shown = ", ".join(d.id for d in devices[:6]) + (", ..." if len(devices) > 6 else "")
        offered = sorted({r.engine for d in devices for r in runtimes(cat, d, weights, kv)})
        what = f"--engine {engine} does not run" if engine else "no default engine runs"
        raise InputError(
            f"{what} {weights} weights with a {kv} KV cache on {shown} (the support matrix "
            f"offers {', '.join(offered) or 'no engine'} there; name one with --engine); see "
            "`planner catalog list support`"
        )
    return kept, out


def tensor_parallel_refusal(
    cat: Catalog, engine: str | None, backend: str | None, m: ModelArch
) -> str | None:
    """Why `engine` on `backend` runs no tensor-parallel group of `m`, or None where it does:
    an engine without a tensor-parallel mode (Engine.tensor_parallel), a backend its mode is
    not planned on (Engine.tensor_parallel_backends), a model with multi-head latent attention
    (Engine.tensor_parallel_refuses_mla) or of a family its mode refuses
    (Engine.tensor_parallel_excluded_families). The design then keeps one device per stage
    (the engine's layer split), as the engine itself would run the model."""
    e = cat.engines.get(engine) if engine else None
    if e is None:
        return None
    listed = e.tensor_parallel_backends
    checks = [
        (
            not e.tensor_parallel,
            "tensor_parallel",
            "it has no tensor-parallel mode it is planned with",
        ),
        (
            listed is not None and backend not in listed,
            "tensor_parallel_backends",
            f"its tensor-parallel mode is planned on {', '.join(listed or [])} only, not on {backend}",
        ),
        (
            e.tensor_parallel_refuses_mla and m.mla is not None,
            "tensor_parallel_refuses_mla",
            f"its tensor-parallel mode refuses {m.id}'s multi-head latent attention",
        ),
        (
            m.family in e.tensor_parallel_excluded_families,
            "tensor_parallel_excluded_families",
            f"its tensor-parallel mode refuses the {m.family} architecture",
        ),
    ]
    for refused, section, why in checks:
        if refused:
            return (
                f"{e.id} runs no tensor-parallel group of {m.id}: {why} "
                f"(source `{e.source_of(section)}`); one device per stage"
            )
    return None


def estimate_tensor_groups(
    cat: Catalog,
    devices: list[Accelerator],
    engines: list[tuple[str, EngineTimes]],
    weights: str,
    kv: str,
    m: ModelArch,
    tp: int | None,
) -> tuple[list[Accelerator], list[tuple[str, EngineTimes]]]:
    """For `planner estimate --tp`: the devices (and their engines, estimate_engines's) whose
    engine runs a tensor-parallel group of `m` on the device's backend
    (tensor_parallel_refusal); an error giving each refusal where none does."""
    if tp is None or tp <= 1:
        return devices, engines
    kept, out, why = [], [], []
    for d, (name, times) in zip(devices, engines, strict=True):
        refused = _group_refusal(cat, d, name, weights, kv, m)
        if refused is None:
            kept.append(d)
            out.append((name, times))
        elif refused not in why:
            why.append(refused)
    if not kept:
        raise InputError(f"--tp {tp}: {'; '.join(why)}; give --tp 1")
    return kept, out


def _group_refusal(
    cat: Catalog, d: Accelerator, engine: str, weights: str, kv: str, m: ModelArch
) -> str | None:
    """tensor_parallel_refusal for `engine` on the backend its support row gives `d`."""
    backend = next(r.backend for r in runtimes(cat, d, weights, kv) if r.engine == engine)
    return tensor_parallel_refusal(cat, engine, backend, m)


def estimate_solo(
    cat: Catalog,
    devices: list[Accelerator],
    engines: list[tuple[str, EngineTimes]],
    weights: str,
    kv: str,
    m: ModelArch,
) -> list[bool]:
    """Per device of `planner estimate`: its engine runs no tensor-parallel group of `m` there
    (tensor_parallel_refusal), so a layout the estimate picks keeps one device per stage."""
    return [
        _group_refusal(cat, d, name, weights, kv, m) is not None
        for d, (name, _) in zip(devices, engines, strict=True)
    ]
