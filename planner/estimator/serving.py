"""Serving at load: continuous batching with chunked prefill, Little's law and queueing.

The engine (vLLM, SGLang, TensorRT-LLM and the like; Kwon et al. 2023 "PagedAttention", Yu et al.
2022 "Orca", Agrawal et al. 2024 "Sarathi-Serve") runs iterations. Each iteration advances every
running sequence by one token and processes up to a token budget of waiting prompt tokens in
chunks. A replica of S pipeline stages keeps S micro-batches in flight, so it behaves as S
engines of `b` sequence slots each whose iteration takes S x T, T being its slowest stage's
time for one micro-batch (Narayanan et al. 2021 for pipeline micro-batching).

Steady state at rate lambda requests/s per engine (Little's law, Little 1961):
    running sequences   n = lambda x output_tokens x iteration time
    prompt tokens per iteration   p = lambda x prompt_tokens x iteration time = n x P / O
with the iteration time from the estimator at that token mix (planner.estimator.perf
.serving_layer_seconds). At batch b the engine's capacity is b / (O x S x T) requests/s and
b / T output tokens/s per replica; a plain workload's replica design is evaluated there.

Token budget per iteration: max(the default, 2,048 tokens, and b + b x P / O), so the average
prefill always fits beside the decodes (an operator sets max_num_batched_tokens to it).

Latency under load (open arrivals, Poisson; request mixes):
- TPOT: the iteration time at the load's mean token mix (fixed point of the two equations above).
- TTFT: half an iteration (arrivals land mid-iteration) + the wait for a sequence slot
  (Erlang C over b slots whose service time is the request's whole stay; exponential tail) + the
  wait behind other prompts' prefill (M/D/1 on prompt tokens at the budget's spare room;
  Pollaczek-Khinchine mean with Kingman's exponential tail, Kingman 1962) + the iterations
  its own chunks take.
- End to end: TTFT + (O - 1) x TPOT.
- A percentile of TTFT adds the two waits' percentiles (an upper bound on the sum's).
Closed workloads (a fixed number of sequences, each replaced when it ends) have no queue: TTFT
is half an iteration plus the iterations the prompt's chunks take.

llama.cpp-style pools (GGUF formats) process a prompt with decode stopped: their iteration adds
the two passes (serial = True in the estimator).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from planner.estimator.efficiency import load_serving
from planner.estimator.formats import WeightFormat

# A percentile as a probability.
PERCENTILES = {50: 0.5, 90: 0.9, 95: 0.95, 99: 0.99}


def serial_engine(fmt: WeightFormat) -> bool:
    """Whether the format runs on a llama.cpp-style engine (prompt processing stops decode)."""
    return fmt.source.startswith("llama.cpp")


def token_budget(batch: float, prompt: float, output: float) -> float:
    """Tokens per iteration: the default budget, or what the decodes plus their average prefill
    need when that is more."""
    return max(float(load_serving().default_token_budget), batch + batch * prompt / output)


def prefill_room(batch: float, prompt: float, output: float) -> float:
    """Prompt tokens one iteration can take beside `batch` decodes."""
    return token_budget(batch, prompt, output) - batch


def chunk_mix(batch: float, prompt: float, output: float, per_iteration: float) -> tuple[float, float]:
    """(c, f): the prompt tokens an iteration that carries prefill takes, and the share of
    iterations that carry it, when `per_iteration` prompt tokens arrive per iteration on average.

    The scheduler takes every waiting prompt token up to the budget's room at once, so prefill
    comes in chunks of c = min(room, max(prompt, per_iteration)) tokens (a whole prompt, the
    prompts that pile up in one iteration, or the room) in a share f = per_iteration / c of the
    iterations; the mean iteration is (1 - f) x decode-only + f x decode-with-a-chunk. Averaging
    the prefill over every iteration instead would hide it under memory-bound decode, which
    greedy chunking does not do."""
    room = prefill_room(batch, prompt, output)
    c = min(room, max(prompt, per_iteration))
    return c, min(1.0, per_iteration / c) if c > 0 else 0.0


def closed_ttft(mean_s: float, chunk_s: float, batch: float, prompt: float, output: float) -> float:
    """Time to first token without a queue: half a mean iteration, then the prompt's chunks
    (iterations that carry a chunk)."""
    chunks = math.ceil(prompt / prefill_room(batch, prompt, output))
    return 0.5 * mean_s + chunks * chunk_s


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue (c servers, offered load a = lambda
    x mean service time < c), by the stable recurrence on Erlang B."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1.0 - rho + rho * b)


def _exp_tail_quantile(mass: float, rate: float, q: float) -> float:
    """The q-quantile of a wait with P(W > t) = mass x exp(-rate t)."""
    if mass <= 1.0 - q or rate <= 0:
        return 0.0 if rate > 0 else math.inf
    return math.log(mass / (1.0 - q)) / rate


@dataclass(frozen=True)
class LoadedLatency:
    """Latency of one engine at an arrival rate (seconds)."""

    rate: float  # requests/s into this engine
    running: float  # mean sequences decoding
    iteration_s: float  # mean iteration time = time per output token
    ttft_s: dict[int, float]  # percentile -> time to first token
    e2e_s: dict[int, float]  # percentile -> end-to-end latency
    ttft_mean_s: float
    e2e_mean_s: float

    @property
    def tpot_s(self) -> float:
        return self.iteration_s


def open_latency(
    iteration_s: Callable[[float, float], float],
    *,
    slots: int,
    rate: float,
    prompt: float,
    output: float,
) -> LoadedLatency:
    """Latency percentiles of one engine of `slots` sequence slots under Poisson arrivals at
    `rate` requests/s; `iteration_s(decodes, prefill_tokens)` is one iteration's time (the
    whole pipeline round for a pipelined replica). Formulas in the module docstring."""
    room = prefill_room(slots, prompt, output)
    t = iteration_s(0.0, 0.0)
    n = 0.0
    c, t_c = prompt, t
    for _ in range(100):  # fixed point of Little's law and the iteration time
        n = min(float(slots), rate * output * t)
        c, f = chunk_mix(slots, prompt, output, rate * prompt * t)
        t_c = iteration_s(n, c)
        t_new = (1.0 - f) * iteration_s(n, 0.0) + f * t_c
        if abs(t_new - t) <= 1e-9 * t_new:
            t = t_new
            break
        t = 0.5 * (t + t_new)
    chunks = math.ceil(prompt / room)
    service = prompt / c * t_c  # this prompt's share of prefill capacity, seconds
    rho_p = rate * service
    # Slots: each request holds one for its whole stay.
    hold = output * t + chunks * t_c
    offered = rate * hold
    if rho_p >= 1.0 or offered >= slots:
        inf = {p: math.inf for p in PERCENTILES}
        return LoadedLatency(rate, n, t, inf, inf, math.inf, math.inf)
    p_wait = erlang_c(slots, offered)
    slot_rate = slots / hold - rate
    pre_rate = 2.0 * (1.0 - rho_p) / service
    base = 0.5 * t + chunks * t_c
    ttft: dict[int, float] = {}
    e2e: dict[int, float] = {}
    decode = (output - 1.0) * t
    for pct, q in PERCENTILES.items():
        wait = _exp_tail_quantile(p_wait, slot_rate, q) + _exp_tail_quantile(rho_p, pre_rate, q)
        ttft[pct] = base + wait
        e2e[pct] = ttft[pct] + decode
    mean_wait = p_wait / slot_rate + rho_p / pre_rate
    return LoadedLatency(
        rate, n, t, ttft, e2e, base + mean_wait, base + mean_wait + decode
    )


def max_rate(
    iteration_s: Callable[[float, float], float],
    *,
    slots: int,
    prompt: float,
    output: float,
    ceiling: Callable[[LoadedLatency], bool],
    capacity: float,
) -> float:
    """The highest rate (at most `capacity`) at which `ceiling` still holds, by bisection
    (latency rises with the rate); 0 when even a trickle misses it."""
    lo, hi = 0.0, capacity
    if ceiling(open_latency(iteration_s, slots=slots, rate=hi, prompt=prompt, output=output)):
        return hi
    if not ceiling(
        open_latency(iteration_s, slots=slots, rate=hi * 1e-3, prompt=prompt, output=output)
    ):
        return 0.0
    lo = hi * 1e-3
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        ok = ceiling(open_latency(iteration_s, slots=slots, rate=mid, prompt=prompt, output=output))
        lo, hi = (mid, hi) if ok else (lo, mid)
        if hi - lo <= 1e-4 * hi:
            break
    return lo
