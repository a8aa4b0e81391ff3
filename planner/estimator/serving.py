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

Token budget per iteration (token_budget): the b decodes plus a prefill room of 1.5 x their
average prompt tokens per iteration, at least 256 (catalog serving.yaml), so the average
prefill always fits beside the decodes with room for bursts (an operator sets
max_num_batched_tokens to it).

Latency under load (open arrivals, Poisson; request mixes):
- TPOT: the iteration time at the load's mean token mix (fixed point of the two equations above).
- TTFT: the rest of the running iteration (uniform on 0..T: arrivals land mid-iteration) + a
  wait + the iterations its own chunks take. The wait is either for a sequence slot or behind
  other prompts, seldom both (while requests queue for slots, each is admitted at a departure
  and finds the prefill queue empty), so it is the mixture of the two:
  - the slot wait: a birth-death chain over b slots whose service time is the request's whole
    stay, its prefill wait included; the prompts of a burst lengthen every held stay, which
    makes the count held peaked (Hayward's approximation); while requests queue, they are
    admitted at the saturated departure rate; exponential tail (Allen-Cunneen) after the
    Cosmetatos delay of few slots at moderate load;
  - the prefill wait: M/D/1 on prompt tokens at the budget's spare room beside the n sequences
    decoding; Pollaczek-Khinchine mean with Kingman's exponential tail (Kingman 1962).
- End to end: TTFT + (O - 1) x TPOT.
- A percentile of a sum: the means add and the excesses of the parts' percentiles over their
  means add in quadrature (_combine; exact for independent normal parts).
Closed workloads (a fixed number of sequences, each replaced when it ends) have no queue: TTFT
is half an iteration plus the iterations the prompt's chunks take.

llama.cpp-style pools (GGUF formats) process a prompt with decode stopped: their iteration adds
the two passes (serial = True in the estimator).

Long because the waits, their quantiles and the rate search of both serving layouts are one model.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.estimator.efficiency import load_serving
from planner.estimator.formats import GGUF_FORMATS, WeightFormat

# A percentile as a probability.
PERCENTILES = {50: 0.5, 90: 0.9, 95: 0.95, 99: 0.99}


def prefill_prompt(prompt: int, cache_hit: float) -> int:
    """Prompt tokens an engine computes when a share `cache_hit` of them is in its prefix cache
    (vLLM automatic prefix caching, SGLang RadixAttention: cached tokens skip prefill)."""
    return max(1, round(prompt * (1.0 - cache_hit)))


def serial_engine(fmt: WeightFormat) -> bool:
    """Whether the format runs on a llama.cpp-style engine (prompt processing stops decode):
    every GGUF block format (formats.GGUF_FORMATS), whatever text its source cites (Q2_K's and
    UD-Q2_K_XL's cite the llama-bench files their bits were read from)."""
    return fmt.id in GGUF_FORMATS


def token_budget(batch: float, prompt: float, output: float) -> float:
    """Tokens per iteration: the decodes plus a prefill room of margin x their average prompt
    tokens per iteration, at least the least room (catalog serving.yaml)."""
    s = load_serving()
    room = max(
        float(s.min_prefill_room), math.ceil(s.prefill_room_margin * batch * prompt / output)
    )
    return batch + room


def prefill_room(
    batch: float,
    prompt: float,
    output: float,
    decoding: float | None = None,
    budget: float | None = None,
) -> float:
    """Prompt tokens one iteration can take beside `decoding` decodes (all `batch` of them
    unless given: fewer running sequences leave the budget more room). `budget`: the token
    budget of these batch, prompt and output when the caller has it (token_budget)."""
    if budget is None:
        budget = token_budget(batch, prompt, output)
    return budget - (batch if decoding is None else decoding)


def chunk_mix(
    batch: float,
    prompt: float,
    output: float,
    per_iteration: float,
    decoding: float | None = None,
    budget: float | None = None,
) -> tuple[float, float]:
    """(c, f): the prompt tokens an iteration that carries prefill takes, and the share of
    iterations that carry it, when `per_iteration` prompt tokens arrive per iteration on average.

    The scheduler takes every waiting prompt token up to the budget's room at once, so prefill
    comes in chunks of c = min(room, max(prompt, per_iteration)) tokens (a whole prompt, the
    prompts that pile up in one iteration, or the room) in a share f = per_iteration / c of the
    iterations; the mean iteration is (1 - f) x decode-only + f x decode-with-a-chunk. Averaging
    the prefill over every iteration instead would hide it under memory-bound decode, which
    greedy chunking does not do. `budget`: token_budget(batch, prompt, output), if known."""
    room = prefill_room(batch, prompt, output, decoding, budget)
    c = min(room, max(prompt, per_iteration))
    return c, min(1.0, per_iteration / c) if c > 0 else 0.0


def _mean_iteration(
    iteration_s: Callable[[float, float], float],
    batch: float,
    prompt: float,
    output: float,
    per_iteration: float,
    decoding: float,
    budget: float | None = None,
) -> float:
    """The mean iteration with `decoding` sequences decoding and `per_iteration` prompt tokens
    arriving per iteration (chunk_mix's share of iterations carrying a chunk)."""
    c, f = chunk_mix(batch, prompt, output, per_iteration, decoding=decoding, budget=budget)
    with_chunk, decode_only = _both(iteration_s, decoding, c)
    return (1.0 - f) * decode_only + f * with_chunk


def _both(
    iteration_s: Callable[[float, float], float], decodes: float, prefill_tokens: float
) -> tuple[float, float]:
    """(iteration_s(decodes, prefill_tokens), iteration_s(decodes, 0)), the queueing model's
    pair at every step: an iteration table's own `pair` (replica.IterationTime, the decodes'
    row looked up once), or two calls of any other function of the two."""
    pair = getattr(iteration_s, "pair", None)
    if pair is None:
        return iteration_s(decodes, prefill_tokens), iteration_s(decodes, 0.0)
    got: tuple[float, float] = pair(decodes, prefill_tokens)
    return got


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
    if (servers - offered) / math.sqrt(max(offered, 1.0)) > 6.0:
        return 0.0  # Halfin-Whitt: below 1e-8 this far under the servers' capacity
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1.0 - rho + rho * b)


# Allen-Cunneen's (ca^2 + cs^2) / 2 for Poisson arrivals and nearly constant stays.
SLOT_WAIT_SCALE = 0.5
# Kingman's heavy-traffic tail rate of an M/D/1 wait, in units of (1 - rho) / service:
# 2 / (ca^2 + cs^2) with ca = 1, cs = 0 (Kingman 1962).
PREFILL_WAIT_RATE = 2.0


def md_c_wait_scale(servers: int, rho: float) -> float:
    """The M/D/c mean wait over the M/M/c one at load `rho` per server: Cosmetatos (1975,
    "Approximate explicit formulae for the average queueing time in the processes (M/D/r) and
    (D/M/r)", INFOR 13) corrects Allen-Cunneen's 1/2, which holds in heavy traffic, for few
    servers at moderate load: 1/2 x (1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c))."""
    if rho <= 0 or servers <= 1:
        return SLOT_WAIT_SCALE
    c = float(servers)
    return SLOT_WAIT_SCALE * (
        1.0 + (1.0 - rho) * (c - 1.0) * (math.sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * rho * c)
    )


def slot_wait_probability(
    slots: int,
    rate: float,
    hold_one: float,
    hold_full: float,
    hold_queued: float | None = None,
    peakedness: float = 1.0,
) -> float:
    """Probability that an arrival finds every slot taken: the birth-death chain of requests in
    the engine with arrivals at `rate` and, with k of the slots busy, departures at
    k / hold(k), the stay growing linearly from `hold_one` (one sequence decoding) to
    `hold_full` (all of them): Erlang C with service that slows as the batch fills. While
    requests queue, departures are at slots / `hold_queued` (hold_full unless given).

    `peakedness` Z (variance / mean of the requests held, 1 for Poisson) > 1: Hayward's
    approximation (Fredericks 1980, "Congestion in blocking systems: a simple approximation
    technique"): the chain of units of Z requests, slots / Z of them at rate / Z, interpolated
    between the whole numbers of units on either side."""
    if rate <= 0:
        return 0.0
    hq = hold_full if hold_queued is None else hold_queued
    if rate * hq >= slots:  # the queue never drains
        return 1.0
    units = slots / max(peakedness, 1.0)
    lo = max(1, math.floor(units))
    if units <= lo or lo >= slots:
        return _slot_chain(lo, slots, rate, hold_one, hold_full, hq)
    a = units - lo
    return (1.0 - a) * _slot_chain(lo, slots, rate, hold_one, hold_full, hq) + a * _slot_chain(
        lo + 1, slots, rate, hold_one, hold_full, hq
    )


@functools.lru_cache(maxsize=1024)
def _chain_grid(units: int, slots: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """_slot_chain's units 1..units and the sequences each holds less one, j x z - 1: the same
    few chains are evaluated thousands of times in an enumeration (shared, never written to)."""
    j = np.arange(1, units + 1, dtype=np.float64)
    fill = j * (slots / units) - 1
    j.flags.writeable = fill.flags.writeable = False
    return j, fill


def _slot_chain(
    units: int, slots: int, rate: float, hold_one: float, hold_full: float, hold_queued: float
) -> float:
    """slot_wait_probability's chain over `units` units of slots / units requests each."""
    z = slots / units
    j, fill = _chain_grid(units, slots)
    hold = hold_one + (hold_full - hold_one) * fill / max(slots - 1, 1)
    log_pi = np.concatenate([[0.0], np.cumsum(np.log(rate / z * hold / j))])
    top = float(log_pi[-1])
    r = rate * hold_queued / slots  # the geometric ratio once every slot is taken
    peak = max(top, float(log_pi.max()))
    below = float(np.exp(log_pi[:-1] - peak).sum())
    # The top unit covers the last z counts of requests held; only its last (every slot
    # taken) makes an arrival wait. Queued requests do not prefill, so the queue moves one
    # request at a time: geometric in requests from there.
    full = math.exp(top - peak) / z
    queued = full / (1.0 - r)
    return queued / (below + full * (z - 1.0) + queued)


def _exp_tail_quantile(mass: float, rate: float, q: float) -> float:
    """The q-quantile of a wait with P(W > t) = mass x exp(-rate t)."""
    if mass <= 1.0 - q or rate <= 0:
        return 0.0 if rate > 0 else math.inf
    return math.log(mass / (1.0 - q)) / rate


def _mixture_tail_quantile(parts: list[tuple[float, float, float, float]], q: float) -> float:
    """The q-quantile of a wait that is, with probability share_i, a wait with P(W > t) =
    mass_i x exp(-rate_i max(t - shift_i, 0)), for parts (share_i, mass_i, rate_i, shift_i);
    by bisection (the tail falls with t)."""
    live = [(w * min(m, 1.0), r, d) for w, m, r, d in parts if w * m > 0 and r < math.inf]
    if any(r <= 0 for _, r, _ in live):
        return math.inf

    def tail(t: float) -> float:
        # max(t - d, 0) spelled as a comparison (the same float; called ~7 times per part in
        # each latency evaluation's bisection).
        return sum([m * math.exp(-r * (0.0 if (x := t - d) < 0.0 else x)) for m, r, d in live])

    if tail(0.0) <= 1.0 - q:
        return 0.0
    hi = max(d + _exp_tail_quantile(len(live) * m, r, q) for m, r, d in live)
    lo = 0.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if tail(mid) > 1.0 - q else (lo, mid)
        if hi - lo <= 1e-4 * hi:
            break
    return hi


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


_NORMAL_Z = {0.5: 0.0, 0.9: 1.2816, 0.95: 1.6449, 0.99: 2.3263}  # standard normal quantiles


def _poisson_quantile(mean: float, q: float) -> int:
    """The least k with P(K <= k) >= q for K ~ Poisson(mean)."""
    if mean <= 0:
        return 0
    if mean > 100:  # normal approximation with a continuity correction
        z = _NORMAL_Z.get(q, 0.0)
        return max(0, math.ceil(mean + z * math.sqrt(mean) - 0.5))
    k, term = 0, math.exp(-mean)
    cdf = term
    while cdf < q and k < 100_000:
        k += 1
        term *= mean / k
        cdf += term
    return k


def _combine(means: list[float], quantiles: list[float]) -> float:
    """A quantile of a sum of independent parts from theirs: the means add, the excesses over
    the means add in quadrature (shortfalls add as they are)."""
    ex = [q - m for m, q in zip(means, quantiles, strict=True)]
    return sum(means) + sum(e for e in ex if e < 0) + math.sqrt(sum(e * e for e in ex if e > 0))


def open_latency(
    iteration_s: Callable[[float, float], float],
    *,
    slots: int,
    rate: float,
    prompt: float,
    output: float,
    kv_tokens: float | None = None,
    percentiles: Mapping[int, float] = PERCENTILES,  # those the caller reads
) -> LoadedLatency:
    """Latency percentiles of one engine of `slots` sequence slots under Poisson arrivals at
    `rate` requests/s; `iteration_s(decodes, prefill_tokens)` is one iteration's time (the
    whole pipeline round for a pipelined replica). With `kv_tokens` (the engine's KV cache in
    tokens), admission stops when the KV of the sequences held would not fit: requests of one
    shape then hold at most kv_tokens // (prompt + output) slots.

    Long because the fixed point, the two waits and the decode phase's spread are one
    computation. A request decodes beside the others decoding (Poisson arrivals see the time
    average, n) plus itself, so its time per token is the iteration at n + 1; n = rate x
    output x that time (Little). Its decode phase is stretched by the prompts of the K requests
    that arrive meanwhile (K ~ Poisson(rate x decode time)), each adding its chunks' extra time.
    Percentiles of sums combine by _combine.
    """
    batch = slots  # the token budget is set for the engine's batch
    budget = token_budget(batch, prompt, output)  # read in every step below
    if kv_tokens is not None:
        slots = max(1, min(slots, int(kv_tokens // (prompt + output))))

    pair = getattr(iteration_s, "pair", None)  # _both's choice, made once

    def loaded(t: float) -> tuple[float, float, float, float, float, float]:
        """The iteration that `t` implies: (its time, n, c, f, t_c, t_d)."""
        n = min(float(slots) - 1.0, rate * output * t)
        # The others decoding leave the rest of the budget to prompts (vLLM's scheduler fills
        # max_num_batched_tokens with decodes first, then prefill chunks): chunk_mix written
        # out, its arithmetic unchanged (this runs a few times in each latency evaluation).
        per_iteration = rate * prompt * t
        c = min(budget - n, max(prompt, per_iteration))
        f = min(1.0, per_iteration / c) if c > 0 else 0.0
        seen = min(float(slots), n + 1.0)
        if pair is None:
            t_c, t_d = iteration_s(seen, c), iteration_s(seen, 0.0)
        else:
            t_c, t_d = pair(seen, c)
        return (1.0 - f) * t_d + f * t_c, n, c, f, t_c, t_d

    # The fixed point of Little's law and the iteration time: t = loaded(t), found from the
    # unloaded iteration (h = loaded(t) - t >= 0) by secant steps kept inside the bracket of
    # the points seen on either side (bisection when a step leaves it). There is one fixed
    # point below saturation: loaded(t) grows with t at rate x output x (the time one more
    # sequence adds to an iteration), the busy share of the resource it loads (bandwidth for
    # its KV reads, compute for its token), which is below 1 unless that resource is over
    # capacity. (A loaded time with several fixed points, which the roofline does not give,
    # could send the steps past the lowest; damped plain steps from below, as before, would
    # stop there. On the examples' 8,000 evaluations both agree within 3e-8.)
    t = iteration_s(1.0, 0.0)
    n, c, f, t_c, t_d = 0.0, prompt, 0.0, t, t
    below, above = -math.inf, math.inf  # t with h > 0, t with h < 0
    prev: tuple[float, float] | None = None
    for _ in range(200):
        t_new, n, c, f, t_c, t_d = loaded(t)
        h = t_new - t
        if abs(h) <= 1e-7 * t_new:
            t = t_new
            break
        if h > 0:
            below = max(below, t)
        else:
            above = min(above, t)
        nxt = t_new  # a plain step
        if prev is not None and h != prev[1]:
            nxt = t - h * (t - prev[0]) / (h - prev[1])
        if not (below < nxt < above and nxt > 0):
            nxt = 0.5 * (below + above) if math.isfinite(above) and below > 0 else t_new
        prev = (t, h)
        t = nxt
    room = prefill_room(batch, prompt, output, decoding=n, budget=budget)
    chunks = math.ceil(prompt / room)
    # This prompt's share of prefill capacity, seconds (none in a decode pool, prompt = 0).
    service = prompt / c * t_c if prompt > 0 else 0.0
    rho_p = rate * service
    own = prompt / room * t_c + (chunks - prompt / room) * t_d  # its chunks: the last is part
    # A slot is held for the whole stay. Requests wait for one only while all are taken, and
    # then all of them decode: the stay is counted at the full batch's iteration.
    t_full = _mean_iteration(iteration_s, batch, prompt, output, rate * prompt * t, slots, budget)
    # While requests wait for a slot, each departure admits one: prompts then arrive at the
    # departures' rate (slots / (O x iteration)), not at the arrivals'.
    queued_in = slots * prompt / output
    t_queued = _mean_iteration(iteration_s, batch, prompt, output, queued_in, slots, budget)
    if rho_p >= 1.0:
        inf = {p: math.inf for p in PERCENTILES}
        return LoadedLatency(rate, n, t, inf, inf, math.inf, math.inf)
    pre_rate = PREFILL_WAIT_RATE * (1.0 - rho_p) / service if service > 0 else math.inf
    # A sequence holds its slot from admission: through the wait behind other prompts, its
    # own chunks and every decode.
    hold = output * t_full + own + rho_p / pre_rate
    hold_queued = output * t_queued + own + rho_p / pre_rate
    # (The second test: the first after rounding, a slot rate rounded to zero is saturated.)
    if rate * hold_queued >= slots or slots / hold_queued <= rate:
        inf = {p: math.inf for p in PERCENTILES}
        return LoadedLatency(rate, n, t, inf, inf, math.inf, math.inf)
    t_one = (1.0 - f) * iteration_s(1.0, 0.0) + f * iteration_s(1.0, c)
    # Each arrival's chunks lengthen the stays of every sequence held (`extra`), and the longer
    # stays hold more of the later arrivals: a burst of d more arrivals holds d / (1 - rate x
    # extra) more sequences, so the number held varies (1 / (1 - rate x extra))^2 times as
    # much as a Poisson count (its peakedness).
    # (Capped: past 0.9 the prefill alone nearly fills the engine and rho_p governs.)
    extra = prompt / c * max(t_c - t_d, 0.0) if prompt > 0 else 0.0
    # One more sequence decoding lengthens every iteration by `slope` (the weights are read once
    # for all, its KV cache is read on its own), so every stay by (O - 1) x slope, which holds
    # more of the later arrivals in turn: a feedback of gain g = rate x (O - 1) x slope on the
    # count held. Linearized (an Ornstein-Uhlenbeck count: arrivals at `rate`, departures n /
    # stay(n), whose drift back to the mean is (1 - g) / stay), its variance is n / (1 - g)
    # instead of a Poisson count's n, so its excess over the mean grows by 1 / sqrt(1 - g). This
    # widens the decode phase only: folded into the slot wait's peakedness too, it overstated
    # the replay's p95 first token (worst case +27 %, benchmarks/serving/model_vs_replay.py).
    slope = iteration_s(min(float(slots), n + 2.0), 0.0) - t_d
    gain = min(rate * (output - 1.0) * max(slope, 0.0), 0.9)
    peaked = 1.0 / (1.0 - min(rate * extra, 0.9)) ** 2
    p_wait = slot_wait_probability(
        slots, rate, output * t_one + own, hold, hold_queued, peakedness=peaked
    )
    # Exponential stays corrected to nearly constant ones (Allen-Cunneen: waits scale with
    # (ca^2 + cs^2) / 2, here SLOT_WAIT_SCALE, for Poisson arrivals and fixed-length requests).
    # The queue drains at the rate of departures while it lasts (hold_queued).
    slot_rate = (slots / hold_queued - rate) / SLOT_WAIT_SCALE
    # Cosmetatos' excess over that mean, from the rest of the first slot to free, as a delay
    # before the exponential tail.
    slot_shift = (md_c_wait_scale(slots, rate * hold_queued / slots) - SLOT_WAIT_SCALE) / (
        slots / hold_queued - rate
    )
    # Arrivals land in a running iteration: the rest of it is uniform on (0, t).
    base = 0.5 * t + own
    # A request waits for a slot or behind other prompts, seldom both: while requests queue for
    # slots, each is admitted at a departure, so their prompts reach the prefill queue spaced
    # out and find it empty. The wait is the mixture of the two.
    wait = [(1.0 - p_wait, rho_p, pre_rate, 0.0), (p_wait, 1.0, slot_rate, slot_shift)]
    wait_mean = p_wait * (slot_shift + 1.0 / slot_rate) + (1.0 - p_wait) * rho_p / pre_rate
    # Decode: (O - 1) iterations at t_d plus the extra of each prompt that arrives meanwhile.
    arrivals = rate * (output - 1.0) * t
    decode_mean = (output - 1.0) * t_d + arrivals * extra
    ttft: dict[int, float] = {}
    e2e: dict[int, float] = {}
    for pct, q in percentiles.items():
        wq = _mixture_tail_quantile(wait, q)
        ttft[pct] = own + _combine([0.5 * t, wait_mean], [q * t, wq])
        # Others decoding alongside: Poisson(n) at arrival, most of them there throughout, the
        # excess widened by the feedback above.
        crowd = (_poisson_quantile(n, q) - n) * slope * (output - 1.0) / math.sqrt(1.0 - gain)
        burst = (_poisson_quantile(arrivals, q) - arrivals) * extra
        # A longer decode lets more prompts in, each lengthening it by `extra`: an excess d
        # grows to d / (1 - rate x extra) (as the count held does above).
        decode_q = decode_mean + (burst + crowd) / (1.0 - min(rate * extra, 0.9))
        e2e[pct] = own + _combine([0.5 * t, wait_mean, decode_mean], [q * t, wq, decode_q])
    ttft_mean = base + wait_mean
    return LoadedLatency(rate, n, t, ttft, e2e, ttft_mean, ttft_mean + decode_mean)


def max_rate(
    latency: Callable[[float], LoadedLatency],
    *,
    ceiling: Callable[[LoadedLatency], bool],
    capacity: float,
) -> float:
    """The highest rate (at most `capacity`) at which `ceiling` holds for `latency(rate)` (an
    engine's loaded latency), by bisection (latency rises with the rate); 0 when even a trickle
    misses it."""
    return RateSearch(latency, ceiling=ceiling, capacity=capacity).finish()


class RateSearch:
    """max_rate one latency evaluation at a time: `bound` never falls below the rate the search
    ends with, and is that rate once `step` has returned True (callers that only need to know
    the rate is below some figure can stop early).

    The rates that meet the ceiling are taken to be those up to one rate (latency rises with
    the load, as max_rate says): the bisection keeps a rate that meets it below one that does
    not and never looks between. So the two ends, the full load and a trickle (capacity /
    1000), may be tried in either order: a full load that meets the ceiling ends the search at
    it, a trickle that misses it ends it at 0 (every higher rate misses it too), and otherwise
    both are tried and the bisection is the same. `trickle_first` (set before the first step)
    only saves evaluations: a caller whose searches mostly end at 0 (an end-to-end ceiling no
    load meets) sets it; `settled` says which end settled a search ("trickle", "full", or None
    when it bisected), for a caller to choose the next search's order by."""

    def __init__(
        self,
        latency: Callable[[float], LoadedLatency],
        *,
        ceiling: Callable[[LoadedLatency], bool],
        capacity: float,
        trickle_first: bool = False,
    ) -> None:
        self.latency, self.ceiling = latency, ceiling
        self.lo, self.hi = 0.0, capacity
        self.done = False
        self.trickle_first = trickle_first
        self.settled: str | None = None
        self._steps = -2  # the two ends (full load and trickle), then up to 40 halvings

    @property
    def bound(self) -> float:
        """The rate found once done, else an upper bound on it."""
        return self.lo if self.done else self.hi

    @property
    def state(self) -> tuple[float, float, int, bool, bool]:
        """Where the search stands, to resume it later (`resume`) on the same inputs."""
        return self.lo, self.hi, self._steps, self.done, self.trickle_first

    def resume(self, state: tuple[float, float, int, bool, bool]) -> None:
        """Continue from `state` (before any step): a search stopped early on the same
        latency, ceiling and capacity goes on as if it had never stopped, and one that had
        ended stays ended (bisecting on would give another rate than a fresh search)."""
        self.lo, self.hi, self._steps, self.done, self.trickle_first = state

    def finish(self) -> float:
        """The rate: the search run to its end."""
        while not self.step():
            pass
        return self.lo

    def step(self) -> bool:
        """One latency evaluation; True when the search is over."""
        if self.done:
            return True
        lo, hi = self.lo, self.hi
        if self._steps < 0:
            if (self._steps == -2) == self.trickle_first:
                if not self.ceiling(self.latency(hi * 1e-3)):
                    self.hi, self.done, self.settled = 0.0, True, "trickle"  # lo is 0
                else:
                    self.lo = hi * 1e-3
            elif self.ceiling(self.latency(hi)):
                self.lo, self.done, self.settled = hi, True, "full"
        else:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self.ceiling(self.latency(mid)) else (lo, mid)
            self.lo, self.hi = lo, hi
            # The plan rounds rates finer than this only at random.
            self.done = hi - lo <= 2e-3 * hi or self._steps == 39
        self._steps += 1
        return self.done


# --- Disaggregated serving -------------------------------------------------------------------
# Prefill and decode run in separate pools (Zhong et al. 2024 "DistServe", Patel et al. 2024
# "Splitwise"): a prefill engine computes whole prompts, batching the waiting ones up to its token
# budget, and makes the first token; the prompt's KV cache then crosses the network to a decode
# engine, which holds the sequence in one of its slots until its last token. Each pool is sized
# for the same requests/s, so neither pool's work slows the other's iterations.


def prefill_pool_budget(prompt: float) -> float:
    """Prompt tokens per iteration of a prefill engine: whole prompts, at least the catalog's
    `prefill_pool_budget` (serving.yaml) so that short prompts batch."""
    return max(float(load_serving().prefill_pool_budget), float(prompt))


def kv_transfer_s(kv_bytes: float, bandwidth_bytes_s: float, latency_s: float) -> float:
    """Seconds to move a prompt's KV cache to a decode engine: its bytes over the ports that
    carry it, plus one link latency (the bandwidth term of DistServe's section 4.3)."""
    return kv_bytes / bandwidth_bytes_s + latency_s


def prefill_latency(
    iteration_s: Callable[[float, float], float],
    *,
    rate: float,
    prompt: float,
    transfer_s: float,
) -> LoadedLatency:
    """First-token latency of one prefill engine under Poisson arrivals at `rate` requests/s:
    the wait behind other prompts (M/D/1 in units of this prompt's share of the engine:
    Pollaczek-Khinchine mean, Kingman's exponential tail) + its own iterations + the KV
    transfer. `iteration_s(0, tokens)` is an iteration that computes `tokens` prompt tokens.

    Prompts that arrive during an iteration are batched into the next one up to the budget,
    so an iteration carries c = min(budget, max(prompt, rate x prompt x iteration)) tokens (a
    fixed point, as in chunk_mix); e2e_s holds the same figures (the decode pool adds its own)."""
    budget = prefill_pool_budget(prompt)
    c = min(budget, float(prompt))
    t_c = iteration_s(0.0, c)
    for _ in range(100):
        c_new = min(budget, max(float(prompt), rate * prompt * t_c))
        t_new = iteration_s(0.0, c_new)
        if abs(t_new - t_c) <= 1e-9 * t_new:
            break
        c, t_c = c_new, t_new
    service = prompt / c * t_c
    rho = rate * service
    if rho >= 1.0:
        inf = {p: math.inf for p in PERCENTILES}
        return LoadedLatency(rate, 0.0, t_c, inf, inf, math.inf, math.inf)
    own = math.ceil(prompt / budget) * t_c
    # The engine's work is that of a FIFO M/D/1 server (it is work-conserving), but a prompt
    # finishes with its batch, after the prompts that joined the batch behind it: about as much
    # work again as the batch held before it when it arrived (arrivals before and after it are
    # alike), counted as rho / 2 of its wait, and at most the prompts the budget leaves room for.
    mates = max(0.0, math.floor(budget / prompt) - 1.0) * service
    # While prompts wait, every iteration takes a full budget of them: the queue drains at
    # the full batch's cost per token, which its fixed costs make lower.
    queued = min(service, prompt / budget * iteration_s(0.0, budget))
    rho_q = rate * queued
    pre_rate = PREFILL_WAIT_RATE * (1.0 - rho_q) / queued
    wait_mean = rho_q / pre_rate
    wait_mean += min(0.5 * rho * wait_mean, mates)
    ttft: dict[int, float] = {}
    for pct, q in PERCENTILES.items():
        wait = _exp_tail_quantile(rho_q, pre_rate, q)
        ttft[pct] = own + transfer_s + wait + min(0.5 * rho * wait, mates)
    mean = own + transfer_s + wait_mean
    return LoadedLatency(rate, rho, t_c, ttft, dict(ttft), mean, mean)


def decode_latency(
    iteration_s: Callable[[float, float], float],
    *,
    slots: int,
    rate: float,
    prompt: float,
    output: float,
    percentiles: Mapping[int, float] = PERCENTILES,
) -> LoadedLatency:
    """Latency of one decode engine of `slots` slots fed prefilled sequences at `rate`: the
    wait for a slot and `output` decode iterations (one more than the tokens left after the
    prefill pool's first one: the first iteration after admission is counted whole). Its KV
    holds prompt + output tokens per sequence; ttft_s is the wait before decoding starts."""
    return open_latency(
        iteration_s,
        slots=slots,
        rate=rate,
        prompt=0.0,
        output=output,
        kv_tokens=slots * (prompt + output),
        percentiles=percentiles,
    )
