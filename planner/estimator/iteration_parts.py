"""Parts of replica.IterationTime kept apart from it: the one-row device tables its grids read,
the bytes and seconds of its pipeline hops over its grid, and one sequence alone in a pipeline
(replica.single_stream_seconds)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from planner.estimator.comm import pipeline_activation_bytes, sampled_token_bytes
from planner.estimator.devices import DeviceTable, device_table
from planner.estimator.engine_topology import head_divisor
from planner.estimator.formats import WeightFormat
from planner.estimator.perf import head_seconds
from planner.estimator.routes import Route
from planner.schema.catalog import Accelerator, Link, ModelArch

_TABLES: dict[int, tuple[Accelerator, DeviceTable]] = {}
_Floats = npt.NDArray[np.float64]


def one_device(device: Accelerator) -> DeviceTable:
    """A one-row device table, cached by the catalog entry's identity (grids are built for
    thousands of designs; the entry is kept with its table, so its id is never reused)."""
    hit = _TABLES.get(id(device))
    if hit is None or hit[0] is not device:
        if len(_TABLES) > 4096:
            _TABLES.clear()
        hit = _TABLES[id(device)] = (device, device_table([device]))
    return hit[1]


def alone_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    stages: list[Any],
    per_layer: dict[tuple[int, int], tuple[_Floats, _Floats]],
    hops: list[_Floats],
    n: _Floats,
    kernels: str = "",
) -> _Floats:
    """One micro-batch alone in the pipeline of `stages` (replica.StageSpec) passes every stage
    in turn (each its own step work, the output head once, on the last), and its token goes
    back to the first (S hops round the loop, as S x T counts them): a single stream. S x T
    charges every stage the head, as a bound on the slowest stage whichever holds it."""
    total = np.zeros_like(n)
    for st, hop in zip(stages, hops, strict=True):
        tau, step = per_layer[(id(st.device), st.tp)]
        total = total + st.layers * tau + step + hop
    last = stages[-1]
    batch: Any = np.maximum(n, 1.0)  # head_seconds takes a grid of batch sizes too
    head = head_seconds(m, fmt, one_device(last.device), batch, kernels)
    head = head / head_divisor(last.layout, last.tp)
    return np.asarray(total + head, dtype=np.float64)


def hop_bytes(decodes: Any, prompt_tokens: Any, prompt: float, hidden: int) -> tuple[Any, Any]:
    """(forward, back) bytes of one pipeline hop in an iteration of `decodes` decoding sequences
    and `prompt_tokens` prompt tokens (numbers or grids). Forward: the hidden states of every
    token the iteration processes, (decodes + prompt tokens) x hidden x 2
    (comm.pipeline_activation_bytes; a chunk's tokens cross each hop once, in the iteration
    that processes them). Back, the last stage's hop to the first: the token ids sampled, one
    per decode and per prompt the chunk finishes (prompt tokens / prompt length), 8 bytes each
    (comm.sampled_token_bytes)."""
    fwd = pipeline_activation_bytes(np.asarray(decodes) + prompt_tokens, 1, hidden)
    back = sampled_token_bytes(np.asarray(decodes) + np.asarray(prompt_tokens) / max(prompt, 1))
    return fwd, back


# Each grid's hop bytes (the grid kept with them, so its id stays its own), and each route's
# seconds over them by (bandwidth, latency): an enumeration's designs share a few routes.
_BYTES: dict[tuple[object, ...], tuple[_Floats, _Floats, _Floats]] = {}
_SECONDS: dict[tuple[object, ...], tuple[_Floats, _Floats]] = {}


def grid_hops(
    stages: list[Any], link: Link, n: _Floats, p: _Floats, prompt: int, m: ModelArch
) -> list[_Floats]:
    """replica.hop_seconds of `stages` (replica.StageSpec) over an iteration table's grid (`n`
    decodes, `p` prompt tokens): every token of the iteration crosses each hop (at least one:
    an empty iteration's hop is the latency's), the sampled ids come back (hop_bytes). The
    same arithmetic, each grid's bytes and each route's seconds made once."""
    if len(stages) < 2:
        return [np.zeros_like(n) for _ in stages]
    if len(_SECONDS) > 4096:
        _BYTES.clear()
        _SECONDS.clear()
    grid: tuple[object, ...] = (id(n), id(p), prompt, m.hidden_size)
    sent = _BYTES.get(grid)
    if sent is None or sent[0] is not n:
        fwd, back = hop_bytes(n, p, prompt, m.hidden_size)
        fwd = np.maximum(fwd, pipeline_activation_bytes(1, 1, m.hidden_size))
        back = np.maximum(back, sampled_token_bytes(1.0))
        sent = _BYTES[grid] = (n, fwd, back)
    alone, last, out = Route((link,)), len(stages) - 1, []
    for j, st in enumerate(stages):
        r = st.hop or alone
        key = (*grid, j == last, r.bandwidth_bytes_s, r.latency_s)
        got = _SECONDS.get(key)
        if got is None or got[0] is not n:
            got = _SECONDS[key] = (n, r.seconds(sent[2] if j == last else sent[1]))
        out.append(got[1])
    return out
