"""One serving engine replayed: an iteration-level, seeded discrete-event simulation of its serving engines.

Each replica of S pipeline stages is S engines of `batch` sequence slots (one per micro-batch in
flight), whose iteration takes S x the slowest stage (planner.estimator.replica.IterationTime,
the estimator's own figure at the iteration's token mix). An iteration advances every decoding
sequence by one token and processes up to the token budget of prompt tokens, first come first
served, in chunks (continuous batching with chunked prefill, as vLLM, SGLang and TensorRT-LLM
schedule). A request is admitted when a slot is free and the KV cache has room for its whole
length (prompt + output tokens; the engine's KV holds `batch` sequences of the workload's
context), so no admitted sequence is ever preempted; requests wait in arrival order.

Arrivals: Poisson at each engine's share of the plan's request rate (request mixes), or a
trace; fixed-rate workloads with a concurrency are closed: every sequence that ends is replaced
at once by a new request of the workload's shape.

Engines of one replica group are statistically alike, so one engine per group is simulated
with a number of requests in proportion to the group's share of the traffic.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.estimator.replica import IterationTime


@dataclass
class EngineResult:
    """Per-request figures of one simulated engine (seconds) and its time series."""

    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    index: list[int] = field(default_factory=list)  # the request each figure belongs to
    tpot: list[float] = field(default_factory=list)
    output_tokens: int = 0
    seconds: float = 0.0
    queue: list[tuple[float, int]] = field(default_factory=list)  # (time, requests waiting)
    kv_share: list[tuple[float, float]] = field(default_factory=list)  # (time, KV in use / cap)
    # Output tokens made over the steady window (tokens_per_s) and its length, s.
    window_tokens: float = 0.0
    window_seconds: float = 0.0
    # Requests longer than the engine was launched to admit (`admits` tokens, prompt + output):
    # refused, in no figure above.
    refused: int = 0
    admits: float = math.inf

    @property
    def tokens_per_s(self) -> float:
        """Output tokens/s over the steady window: from the arrival of the request a tenth of
        the way in (the engine starts empty: ramp-up) to the last arrival (after it the engine
        only drains), so a short replay is not read as a slow one; the whole run where the
        window is empty."""
        if self.window_seconds > 0:
            return self.window_tokens / self.window_seconds
        return self.output_tokens / self.seconds if self.seconds > 0 else 0.0


def simulate_engine(
    it: IterationTime,
    *,
    slots: int,
    kv_tokens: float,
    budget: float,
    requests: list[tuple[float, int, int]],
    closed: int = 0,
    warmup: int = 0,
    prefilled: bool = False,
) -> EngineResult:
    """Run one engine over `requests` (arrival s, prompt, output), in arrival order. `closed`
    > 0: that many sequences exist; `requests` then gives the shapes, each arriving when one
    ends. The first `closed` start at time 0 in the closed system's stationary state, not as one
    wave: already admitted with their prompts' KV, the i-th of them (from 0) with
    ceil(output x (i + 1) / closed) tokens left, so their ends, and the arrivals that replace
    them, are spread evenly over one answer's iterations (a renewal process of fixed-length
    lives started in equilibrium has its ages uniform: Ross, "Stochastic Processes", 2nd ed.,
    sec. 3.5). Started empty instead, all `closed` prompts prefill in the first iterations and
    the engine alternates prefill waves and decode-only stretches for many rounds, which a
    short replay reads as a faster time per token and a slower first token than the steady
    engine's. The first `warmup` completed requests are not counted, nor, when `closed`, those
    that end once no request is left to replace them (the `closed` last: the engine drains, its
    iterations lighter than the steady ones).
    `prefilled`: a disaggregated decode pool's engine, whose requests arrive with their prompt's
    KV (it counts against `kv_tokens`) and their first token (made by the prefill engine: counted
    at admission) and decode `output` tokens from admission.

    Long because the event loop keeps its state in locals for speed (10,000 requests in about a
    second).
    """
    out = EngineResult()
    n_req = len(requests)
    arrival = [r[0] for r in requests]
    prompt = [r[1] for r in requests]
    output = [r[2] for r in requests]
    first = [math.nan] * n_req
    waiting: deque[int] = deque()
    prefilling: deque[list[float]] = deque()  # [request, prompt tokens left]
    decoding: list[tuple[int, int]] = []  # heap of (iteration at which it ends, request)
    kv_used = 0.0
    held = 0
    nxt = 0  # next request to arrive
    if closed:
        for i in range(min(closed, n_req)):
            arrival[i] = 0.0
        released = min(closed, n_req)
    else:
        released = n_req
    warm = released if closed else 0  # the opening sequences started mid-answer
    clock = 0.0
    k = 0
    done = 0
    sample_every = max(1, n_req // 500)
    made = 0.0  # output tokens made so far
    marks = (max(warmup, n_req // 10), n_req - 1)  # arrivals that open and close the window
    window: list[tuple[float, float]] = []  # (clock, made) at those arrivals
    while done < n_req:
        while nxt < released and arrival[nxt] <= clock:
            if nxt in marks:
                window.append((clock, made))
            waiting.append(nxt)
            nxt += 1
        while waiting and held < slots:
            i = waiting[0]
            need = prompt[i] + output[i]
            if kv_used + need > kv_tokens and held > 0:
                break
            waiting.popleft()
            held += 1
            kv_used += need
            if i < warm:  # a closed system's opening sequence, mid-answer (docstring)
                first[i] = clock
                heapq.heappush(decoding, (k + math.ceil(output[i] * (i + 1) / warm), i))
                continue
            if prefilled:  # a decode pool's request: its prompt's KV arrived with it
                first[i] = clock
                made += 1
                heapq.heappush(decoding, (k + max(output[i], 1), i))
                continue
            prefilling.append([float(i), float(prompt[i])])
        d = len(decoding)
        if d == 0 and not prefilling:
            if nxt >= released:
                break  # closed system drained
            clock = max(clock, arrival[nxt])
            continue
        if not prefilling and decoding:
            # Nothing changes until the next completion (or an arrival that can be admitted):
            # take the identical decode-only iterations in one step.
            dt = it(d, 0.0)
            skip = decoding[0][0] - k - 1
            if nxt < released and held < slots:
                skip = min(skip, int((arrival[nxt] - clock) / dt))
            if skip > 0:
                clock += skip * dt
                k += skip
                made += skip * d
        room = max(budget - d, 0.0)
        p = 0.0
        finished_prefill: list[int] = []
        for entry in prefilling:
            if room <= 0:
                break
            take = min(room, entry[1])
            entry[1] -= take
            room -= take
            p += take
            if entry[1] <= 0:
                finished_prefill.append(int(entry[0]))
        while prefilling and prefilling[0][1] <= 0:
            prefilling.popleft()
        dt = it(d, p)
        clock += dt
        k += 1
        made += d + len(finished_prefill)
        ended: list[int] = []
        for i in finished_prefill:
            first[i] = clock
            if output[i] <= 1:
                ended.append(i)
            else:
                heapq.heappush(decoding, (k + output[i] - 1, i))
        while decoding and decoding[0][0] <= k:
            ended.append(heapq.heappop(decoding)[1])
        for i in ended:
            held -= 1
            kv_used -= prompt[i] + output[i]
            done += 1
            full = released < n_req  # a closed engine still holds all its sequences
            if closed and full:
                arrival[released] = clock
                released += 1
            if done > warmup and (full or not closed):
                out.index.append(i)
                out.ttft.append(first[i] - arrival[i])
                out.e2e.append(clock - arrival[i])
                if output[i] > 1:
                    out.tpot.append((clock - first[i]) / (output[i] - 1))
                out.output_tokens += output[i]
        if k % sample_every == 0:
            out.queue.append((clock, len(waiting)))
            out.kv_share.append((clock, kv_used / kv_tokens if kv_tokens else 0.0))
    out.seconds = clock
    if len(window) == 2:
        out.window_seconds = window[1][0] - window[0][0]
        out.window_tokens = window[1][1] - window[0][1]
    return out


def simulate_disaggregated(
    prefill: IterationTime,
    decode: IterationTime,
    *,
    slots: int,
    kv_tokens: float,
    prefill_budget: float,
    transfer_s: float,
    requests: list[tuple[float, int, int]],
    warmup: int = 0,
) -> EngineResult:
    """One prefill engine feeding one decode engine (disaggregated serving): each request is
    prefilled FIFO (prompts batched up to `prefill_budget` tokens per iteration; the first token
    comes out of the prefill engine), its KV crosses the link in `transfer_s`, then it waits for
    a decode slot and KV room and decodes its other output - 1 tokens. Figures per request:
    ttft = prefill queue + prefill + transfer; e2e = that + decode wait + decoding."""
    pre = simulate_engine(
        prefill,
        slots=1 << 30,
        kv_tokens=math.inf,
        budget=prefill_budget,
        requests=[(t, p, 1) for t, p, _ in requests],
    )
    ready = {
        i: requests[i][0] + ttft + transfer_s for i, ttft in zip(pre.index, pre.ttft, strict=True)
    }
    order, dec = decode_prefilled(decode, slots, kv_tokens, ready, requests)
    out = EngineResult(seconds=dec.seconds, queue=dec.queue, kv_share=dec.kv_share)
    for n, (pos, e2e) in enumerate(zip(dec.index, dec.e2e, strict=True)):
        if n < warmup:
            continue
        i = order[pos]
        first = ready[i] - requests[i][0]
        out.index.append(i)
        out.ttft.append(first)
        out.e2e.append(first + e2e)
        out.output_tokens += requests[i][2]
    out.tpot = dec.tpot[warmup:]  # the decode engine's time per token (its first is the prefill's)
    return out


def decode_prefilled(
    decode: IterationTime,
    slots: int,
    kv_tokens: float,
    ready: Mapping[int, float],
    requests: Sequence[tuple[Any, ...]],
) -> tuple[list[int], EngineResult]:
    """A decode engine fed prefilled requests: request i (its prompt and output tokens at
    positions -2 and -1 of `requests[i]`) joins at `ready[i]` and decodes its other output - 1
    tokens. Returns the requests in the order they joined (EngineResult.index counts in it)
    and the engine's figures."""
    order = sorted(ready, key=lambda i: (ready[i], i))
    dec = simulate_engine(
        decode,
        slots=slots,
        kv_tokens=kv_tokens,
        budget=float(slots),
        requests=[(ready[i], requests[i][-2], max(requests[i][-1] - 1, 1)) for i in order],
        prefilled=True,
    )
    return order, dec
