"""Measured times per block in place of the estimator's (a serving workload's `measured`
entries, planner.schema.measurements; `profiles` is their older spelling).

A profile gives, for one device type at one tensor-parallel degree and the workload's model and
formats, the time one block takes for a decode step at some batch sizes and for one prompt's
prefill at some lengths, as pooled-cluster profilers publish them. The estimator keeps its own
shape between and beyond the measured points and is scaled to meet them:

- decode: at a batch of n sequences the time per block is the estimate times the ratio
  measured / estimated, that ratio interpolated linearly in log(batch) between the measured
  batches and held beyond the first and the last;
- prefill: the prompt work of an iteration (its time less the decode-only time at the same
  decodes) is scaled the same way by the prefill ratio at the iteration's prompt tokens.

An iteration with n decodes and p prompt tokens then takes

    t(n, p) = r_d(n) t(n, 0) + r_p(p) (t(n, p) - t(n, 0))

per block (t the estimate): a profile of decode points alone leaves the prompt work the
estimator's, and at a measured point the time is exactly the measurement. The estimate includes
everything the replica's per-block time does (the serving engine's own time per block, the
all-reduces of a tensor-parallel group), since a measurement does.

A whole-replica figure of a single-stage replica (decode tokens/s of `devices` devices in tensor
parallel at a batch, or ms per output token) is a decode point too: the step it measures,
batch / tokens/s, less the work outside the blocks that the replica's step adds to them (the
output head on the group, the device's step overhead, the engine's time per step and its host
work per sequence: planner.estimator.replica.inference_replica, designs._setting), spread over
the model's blocks. A single-stage replica's decode step at that batch then takes exactly the
measured step, the figure `planner estimate --measured` reports
(planner.estimator.estimate.estimate_inference). A prefill figure of one prompt (prefill
tokens/s at batch 1, its `context` the prompt's length) is a prefill point the same way: the
prompt's time, context / tokens/s, less an iteration's work outside the blocks at one sequence.
The row's `context` of a decode figure is not matched, as `estimate --measured` does not match
it either: the estimator's own shape carries the figure to the workload's context.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.catalog import Catalog
from planner.estimator.devices import device_table
from planner.estimator.engine_topology import exchange_layout, head_divisor
from planner.estimator.formats import weight_format
from planner.estimator.perf import head_seconds
from planner.estimator.support import engine_times
from planner.schema.catalog import Accelerator
from planner.schema.measurements import Measurement
from planner.schema.problem import InferenceWorkload, Workload

Floats = npt.NDArray[np.float64]
# The estimator's seconds per block at (decoding sequences, prompt tokens, prompt length).
Estimate = Callable[[Floats, Floats, float], Floats]


@dataclass(frozen=True)
class LayerProfile:
    """Measured seconds per block: (batch, s) of decode steps and (prompt tokens, s) of
    prefills, each sorted by its first figure."""

    decode: tuple[tuple[float, float], ...] = ()
    prefill: tuple[tuple[float, float], ...] = ()


def layer_profile(
    w: Workload | None,
    device: str,
    tp: int,
    cat: Catalog | None = None,
    acc: Accelerator | None = None,
    engine: str | None = None,
) -> LayerProfile | None:
    """The workload's measured times for `device` at degree `tp`, if it states any. Its
    whole-replica decode figures need the catalog, the stage's accelerator `acc` (the
    catalog's `device` unless given: a derated copy) and the serving `engine`."""
    if not isinstance(w, InferenceWorkload) or not w.has_profiles:
        return None
    rows = [p for p in w.layer_times if p.device == device and p.tp == tp]
    decode = [
        (float(p.batch), p.value * 1e-3)
        for p in rows
        if p.metric == "decode_ms_per_layer" and p.batch is not None
    ]
    prefill = [
        (float(p.prompt_tokens), p.value * 1e-3)
        for p in rows
        if p.metric == "prefill_ms_per_layer" and p.prompt_tokens is not None
    ]
    whole = [(m, replica_point(m, w, device, tp)) for m in w.replica_figures]
    for m, point in whole:
        if point is None:
            continue
        if cat is None:
            raise ValueError("whole-replica figures need the catalog to become per-block times")
        kind, x, _ = point
        block = block_seconds(m, w, cat, acc or cat.accelerator(device), engine)
        (decode if kind == "decode" else prefill).append((x, block))
    if not decode and not prefill:
        return None  # only a memory figure for this device (InferenceWorkload.memory_cap_bytes)
    return LayerProfile(tuple(sorted(decode)), tuple(sorted(prefill)))


def replica_point(
    m: Measurement, w: InferenceWorkload, device: str, tp: int
) -> tuple[str, float, float] | None:
    """What a whole-replica figure measures on `tp` x `device` for `w`: ("decode", batch, the
    step's seconds: batch / tokens/s, or ms per output token) or ("prefill", prompt tokens, the
    prompt's seconds: its `context` / tokens/s, one prompt); None where it is not one of these
    (another metric, device, degree, model or format, a saturated server's unknown batch, a
    prefill of several prompts)."""
    if (m.device, m.devices) != (device, tp):
        return None
    said = {"model": w.model, "weights": w.weights}
    if any(getattr(m, k) not in (None, v) for k, v in said.items()):
        return None
    if m.kv is not None and m.kv != w.kv:
        return None
    if m.metric == "prefill_tokens_per_s" and m.batch == 1 and m.context:
        return "prefill", float(m.context), m.context / m.value
    if m.metric not in ("decode_tokens_per_s", "ms_per_output_token") or m.batch is None:
        return None
    if m.metric == "ms_per_output_token":
        return "decode", float(m.batch), m.value * 1e-3
    return "decode", float(m.batch), m.batch / m.value


def outside_blocks(
    w: InferenceWorkload, cat: Catalog, acc: Accelerator, tp: int, batch: float, engine: str | None
) -> float:
    """Seconds a single-stage replica's iteration of `batch` sequences spends outside its
    blocks: the output head on the group (on a star's root alone: an engine with a layout of
    its own runs its groups over machines, engine_topology.head_divisor), the device's step
    overhead, the engine's time per step and its host work per sequence
    (planner.estimator.replica.inference_replica)."""
    t = engine_times(cat, engine)
    dev = device_table([acc])
    fmt = weight_format(w.weights)
    m = cat.model(w.model)
    ways = head_divisor(exchange_layout(cat, engine, m), tp)
    head = float(np.ravel(head_seconds(m, fmt, dev, batch, t["kernels"]))[0]) / ways
    fixed = float(dev.step_overhead_s[0]) + t["engine_step_s"]
    return head + fixed + t["host_s_per_token"] * batch


def block_seconds(
    m: Measurement, w: InferenceWorkload, cat: Catalog, acc: Accelerator, engine: str | None
) -> float:
    """The time per block a whole-replica figure stands for (module docstring): its step, or
    its prompt's time, less the work outside the blocks of an iteration of that batch (of one
    sequence, for a prompt), over the model's blocks. At least a nanosecond (the loader
    refuses a figure no longer than the work outside the blocks, planner.load_measured)."""
    point = replica_point(m, w, m.device, m.devices)
    assert point is not None
    kind, x, seconds = point
    rest = outside_blocks(w, cat, acc, m.devices, x if kind == "decode" else 1.0, engine)
    return max(seconds - rest, 1e-9) / cat.model(w.model).num_layers


def _ratio(
    points: tuple[tuple[float, float], ...], estimated: Floats
) -> Callable[[Floats], Floats]:
    """measured / estimated at the points, as a function of x: linear in log x between them,
    held beyond them."""
    xs = np.log(np.array([x for x, _ in points], dtype=np.float64))
    rs = np.array([t for _, t in points], dtype=np.float64) / np.maximum(estimated, 1e-15)
    return lambda x: np.interp(np.log(np.maximum(np.asarray(x, dtype=np.float64), 1.0)), xs, rs)


def profiled(
    profile: LayerProfile,
    estimate: Estimate,
    decodes: Floats,
    prompt_tokens: Floats,
    decode_only: Floats,
    with_prompts: Floats,
) -> Floats:
    """Seconds per block of iterations of `decodes` sequences and `prompt_tokens` prompt tokens
    (arrays of one shape) whose estimates are `decode_only` (no prompt tokens) and
    `with_prompts`, scaled to the profile (module docstring). `estimate` gives the estimator's
    time at the measured points."""
    n = np.asarray(decodes, dtype=np.float64)
    p = np.asarray(prompt_tokens, dtype=np.float64)
    r_d: Floats | float = 1.0
    r_p: Floats | float = 1.0
    if profile.decode:
        b = np.array([x for x, _ in profile.decode], dtype=np.float64)
        r_d = _ratio(profile.decode, estimate(b, np.zeros_like(b), 1.0))(n)
    if profile.prefill:
        # One prompt of each measured length, alone in its iteration.
        one = [estimate(np.zeros(1), np.full(1, x), x) for x, _ in profile.prefill]
        r_p = _ratio(profile.prefill, np.array([float(np.ravel(e)[0]) for e in one]))(p)
    out = r_d * decode_only + r_p * (with_prompts - decode_only)
    return np.asarray(out, dtype=np.float64)


def profiled_pair(
    profile: LayerProfile,
    estimate: Estimate,
    decodes: Floats | float,
    chunk: Floats | float,
    decode_only: Floats | float,
    with_chunk: Floats | float,
) -> tuple[Floats, Floats]:
    """(decode-only, with a prompt chunk of `chunk` tokens) seconds per block scaled to the
    profile, from the estimates of the two iterations at `decodes` sequences (scalars, or
    arrays of one shape: one entry per batch level)."""
    n, c = np.atleast_1d(decodes).astype(np.float64), np.atleast_1d(chunk).astype(np.float64)
    d = np.atleast_1d(decode_only).astype(np.float64)
    w = np.atleast_1d(with_chunk).astype(np.float64)
    dec = profiled(profile, estimate, n, np.zeros_like(n), d, d)
    mix = profiled(profile, estimate, n, c, d, w)
    return dec, mix
