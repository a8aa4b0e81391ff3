"""Measured times per block in place of the estimator's (InferenceWorkload.profiles).

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

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


def layer_profile(w: Workload | None, device: str, tp: int) -> LayerProfile | None:
    """The workload's measured times for `device` at degree `tp`, if it states any."""
    if not isinstance(w, InferenceWorkload) or not w.profiles:
        return None
    rows = [p for p in w.profiles if p.device == device and p.tp == tp]
    if not rows:
        return None
    decode = sorted(
        (float(p.batch), p.ms * 1e-3)
        for p in rows
        if p.metric == "decode_ms_per_layer" and p.batch is not None and p.ms is not None
    )
    prefill = sorted(
        (float(p.prompt_tokens), p.ms * 1e-3)
        for p in rows
        if p.metric == "prefill_ms_per_layer" and p.prompt_tokens is not None and p.ms is not None
    )
    if not decode and not prefill:
        return None  # only a memory figure for this device (InferenceWorkload.memory_cap_bytes)
    return LayerProfile(tuple(decode), tuple(prefill))


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
