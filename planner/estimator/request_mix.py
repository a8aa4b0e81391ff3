"""Request mixes: replica designs per request class and the requests/s each serves.

A request-mix workload serves `requests_per_s` requests whose lengths follow a histogram of
classes (input and output tokens, share). Designs are enumerated per class as a fixed-rate
workload whose sequences hold input + output tokens and whose prompts are the class's input. A
replica sized for class c can also serve any class k that fits it (input_k <= input_c and
input_k + output_k <= input_c + output_c): its memory holds the shorter sequences and its latency
figures only improve.

Requests/s one replica sustains for class k: replica_rate (continuous batching with chunked
prefill, planner.estimator.serving): S engines of b slots finish b / (output_k x iteration_k)
requests/s each at full load, the iteration at class k's token mix (b decodes and b x input_k /
output_k prompt tokens) and class c's context; the plan uses at most `max_utilization` of it,
less where a latency ceiling at `latency_percentile` holds only at a lower rate. Sequences in
flight follow from the rate by Little's law, so no separate concurrency constraint is needed. A
replica's load is the sum over classes of rate / capacity <= 1 (shares of its time).

A measured capacity (requests/s per replica from benchmarking a serving engine) is
authoritative: it applies to every single-stage replica of that device and tensor-parallel
degree, whatever class sized it, and to that class only; classes with and without measurements
mix freely.

Pruning (exact for every objective a request mix may have, all of which rise with devices and
power): design B goes when m >= 1 replicas of another design A use no more of each device type
and no more power than one replica of B yet serve at least B's requests/s of every class
(m x rate_A >= rate_B). Any plan with B then has a plan no worse without it, so B is never
needed; m = 1 is ordinary dominance, m > 1 catches deep pipelines that m lone stages outrun.
Most designs fall to it, so their rates are searched bound first
(planner.estimator.mix_pruning): a design's bisection stops as soon as the upper end of its
rate's bracket is beaten by a design whose rates are known, and the design is left out, as the
pruning would have left it out.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from planner.catalog import Catalog
from planner.estimator.designs import (
    Design,
    Role,
)
from planner.estimator.efficiency import load_serving
from planner.estimator.measured import measured_rate
from planner.estimator.mix_pruning import Beaten
from planner.estimator.pools import decode_search, prefill_search
from planner.estimator.replica import GridCache, IterationTime, StageSpec
from planner.estimator.serving import (
    PERCENTILES,
    LoadedLatency,
    RateSearch,
    chunk_mix,
    open_latency,
    prefill_pool_budget,
    prefill_prompt,
)
from planner.estimator.support import engine_times
from planner.schema.catalog import Link
from planner.schema.problem import InferenceWorkload, RequestClass

# The replica roles each `disaggregation` setting lets a request mix use.
ROLES: dict[str, tuple[Role, ...]] = {
    "off": ("both",),
    "auto": ("both", "prefill", "decode"),
    "on": ("prefill", "decode"),
}


def class_workload(w: InferenceWorkload, k: int) -> InferenceWorkload:
    """The fixed-rate workload a design for class `k` of `w` is sized by."""
    assert w.request_mix is not None
    c = w.request_mix[k]
    if w.capacities:  # a class's rates are the mix's (measured.py), in neither spelling here
        w = w.keeping(lambda m: m.metric != "requests_per_s")
    return w.model_copy(
        update={
            "context_tokens": c.input_tokens + c.output_tokens,
            "prompt_tokens": c.input_tokens,
            "output_tokens": c.output_tokens,
            "concurrency": None,  # every batch level is a candidate
            # First-token and end-to-end ceilings hold under the mix's load (replica_rate),
            # not at a full batch: no design is dropped for them beforehand.
            "max_ttft_s": None,
            "max_e2e_s": None,
            "min_tokens_per_s": 0.0,
            "request_mix": None,
            "requests_per_s": None,
            "capacity": [],
        }
    )


def fits(small: RequestClass, big: RequestClass) -> bool:
    """Whether a replica sized for `big` can serve requests of `small`."""
    return small.input_tokens <= big.input_tokens and (
        small.input_tokens + small.output_tokens <= big.input_tokens + big.output_tokens
    )


_RATES: dict[tuple[object, ...], tuple[Catalog, float]] = {}


def _rate_key(
    w: InferenceWorkload,
    cat: Catalog,
    link: Link,
    batch: int,
    stages: list[StageSpec],
    sized_for: RequestClass,
    serve: RequestClass,
    role: Role,
    engine: str | None = None,
) -> tuple[object, ...]:
    """Every input replica_rate's figure reads (the catalog by identity)."""
    return (
        id(cat),
        w.model,
        w.weights,
        w.kv,
        w.prefix_cache_hit,
        w.latency_percentile,
        w.max_ttft_s,
        w.max_e2e_s,
        w.max_ms_per_token,
        w.max_utilization,
        (link.id, link.bandwidth_gb_s, link.latency_us),  # a stated link's figures too
        batch,
        # A consumer card derated for a multi-card chassis keeps its id: its bandwidth tells.
        tuple(
            (
                st.device.id,
                st.device.memory.bandwidth_gb_s,
                st.tp,
                st.layers,
                st.link_args(),
                st.profile,
            )
            for st in stages
        ),
        (sized_for.input_tokens, sized_for.output_tokens),
        (serve.input_tokens, serve.output_tokens),
        role,
        engine,
    )


def _remembered(key: tuple[object, ...], cat: Catalog) -> float | None:
    hit = _RATES.get(key)
    return hit[1] if hit is not None and hit[0] is cat else None


def _remember(key: tuple[object, ...], cat: Catalog, rate: float) -> float:
    _keep(_RATES, key, cat, rate)
    return rate


# What this process wrote to the remembered figures (_RATES, _STOPPED, _PREFILL) while a
# journal is open (None: none is): an enumeration run in another process (mix_enumeration)
# hands it back, so this process remembers what that one found (replay).
_JOURNAL: list[tuple[str, tuple[object, ...], object]] | None = None
_GONE = "gone"  # a journal entry's value when the key was taken out (no figure is a string)


def _keep(cache: dict[Any, Any], key: tuple[object, ...], cat: Catalog, value: object) -> None:
    """Remember `value` of `key` (for `cat`) in `cache`, which is emptied past 100,000 keys."""
    if len(cache) > 100_000:
        cache.clear()
    cache[key] = (cat, value)
    if _JOURNAL is not None:
        _JOURNAL.append((_NAMES[id(cache)], key, value))


def open_journal() -> None:
    """Start noting what this process remembers (_JOURNAL), for `journal()` to hand over."""
    global _JOURNAL
    _JOURNAL = []


def journal() -> list[tuple[str, tuple[object, ...], object]]:
    """What was remembered since open_journal (catalogs left out: `replay` puts its own)."""
    return list(_JOURNAL or [])


def replay(entries: list[tuple[str, tuple[object, ...], object]], cat: Catalog) -> None:
    """Remember in this process what another noted in its journal, for the catalog `cat`
    (the one its figures were found for, the same object in both since one was forked from the
    other, so the ids in the keys hold)."""
    for name, key, value in entries:
        cache = _CACHES[name]
        if isinstance(value, str):  # _GONE
            cache.pop(key, None)
        else:
            _keep(cache, key, cat, value)


def replica_rate(
    w: InferenceWorkload,
    cat: Catalog,
    link: Link,
    batch: int,
    stages: list[StageSpec],
    sized_for: RequestClass,
    serve: RequestClass,
    role: Role = "both",
    engine: str | None = None,
) -> float:
    """Requests/s of class `serve` one replica sustains (_engine), remembered: a session
    solves variants of one problem (explanations, one device type at a time, sweeps) whose
    designs repeat. The key holds every input the figure reads; the catalog is kept alive
    beside its figure so that its identity stays unique."""
    args = (w, cat, link, batch, stages, sized_for, serve, role, engine)
    key = _rate_key(*args)
    hit = _remembered(key, cat)
    if hit is not None:
        return hit
    return _remember(key, cat, _engine(*args).rate())


# The batch a prefill engine's iteration table is built for (_engine), and the batch in its
# rate's key (_class_rates): its search never reads the design's batch, so designs that differ
# only in their batch share one remembered rate, or one stopped search resumed.
PREFILL_TABLE_BATCH = 1

# Which end of its rate search (serving.RateSearch.settled) settled the last search of a
# (role, class) in one enumeration: a ceiling no load meets tends to be missed by the next
# design too, a full load that meets it tends to be met again.
Ends = dict[tuple[Role, int], str]


# Rate searches bound-first pruning stopped early, by rate key: where each stands.
_STOPPED: dict[tuple[object, ...], tuple[Catalog, tuple[float, float, int, bool, bool]]] = {}

# The last few iteration tables _engine built, with the stage specs they were built for.
_ITERATIONS: dict[tuple[object, ...], tuple[list[StageSpec], IterationTime]] = {}
# The per-block grids of the stage kinds those tables were built from (IterationTime's
# `grids`): a design's table shares them with pipelines of other depths of the same kind.
_GRIDS: GridCache = {}


@dataclasses.dataclass(frozen=True)
class _Engine:
    """A replica's `engines` serving one class: `search()` starts the search for one engine's
    requests/s (serving.RateSearch), whose bound starts at that engine's full load at
    `max_utilization`, a figure the rate never exceeds."""

    engines: int
    search: Callable[[], RateSearch]
    # What the search reads, by content (`_prefill_content`); None: not shared across keys.
    content: tuple[object, ...] | None = None

    def rate(self) -> float:
        return self.search().finish() * self.engines


def _engine(
    w: InferenceWorkload,
    cat: Catalog,
    link: Link,
    batch: int,
    stages: list[StageSpec],
    sized_for: RequestClass,
    serve: RequestClass,
    role: Role = "both",
    engine: str | None = None,
) -> _Engine:
    """Requests/s of class `serve` one replica sustains (`engine`: the serving engine, for its
    time per pipeline hop and its host time per token): its S engines of `batch` slots each
    finish batch / (output tokens x iteration) requests/s at full load (Little's law), the
    iteration being the serving model's at the class's token mix and the sized class's context
    (planner.estimator.serving); the plan uses at most `max_utilization` of that, and less when
    a latency ceiling at `latency_percentile` is met only at a lower rate (the queueing
    approximation of planner.estimator.serving.open_latency).

    Disaggregated roles (planner.estimator.serving, DistServe): a `prefill` replica computes
    prompts only, at most its token budget per iteration, and sends each prompt's KV cache over
    `link` (one port per device); it is held to the first-token ceiling (or a share of the
    end-to-end one, serving.yaml) with the transfer, and its ports to max_utilization of their
    bandwidth. A `decode` replica decodes prefilled sequences, held to the time-per-token
    ceiling and to what the end-to-end ceiling leaves after the prefill pool's share."""
    m = cat.model(w.model)
    P, out = prefill_prompt(serve.input_tokens, w.prefix_cache_hit), serve.output_tokens
    pct = w.latency_percentile
    k = 1.0 + load_serving().latency_margin  # the queueing model's measured deviation
    context = sized_for.input_tokens + sized_for.output_tokens
    budget = prefill_pool_budget(P) if role == "prefill" else None
    # A prefill engine reads its table at no decodes only (_prefill_content), a row that the
    # batch does not change (the table is elementwise in the decodes): one table for every batch.
    batch = PREFILL_TABLE_BATCH if role == "prefill" else batch
    # A design's whole-request and decode roles iterate alike: one table serves both.
    times = engine_times(cat, engine)
    net = (link.id, link.bandwidth_gb_s, link.latency_us, *times.values())  # a stated link's too
    key: tuple[object, ...] = (id(m), w.weights, w.kv, batch, context, P, out, net, budget)
    key += tuple((id(st.device), st.tp, st.layers, st.link_args(), st.profile) for st in stages)
    hit = _ITERATIONS.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], stages, strict=False)):
        it = IterationTime(
            m, w.weights, w.kv, batch=batch, context=context, prompt=P, output=out,
            stages=stages, link=link, budget=budget, grids=_GRIDS, **times,
        )  # fmt: skip
        if len(_ITERATIONS) >= 8:
            del _ITERATIONS[next(iter(_ITERATIONS))]
        # The stages are kept with their table, so the ids in the key stay theirs.
        _ITERATIONS[key] = (list(stages), it)
    else:
        it = hit[1]
    S = len(stages)
    if role == "prefill":
        same = _prefill_content(_rate_key(w, cat, link, batch, stages, sized_for, serve, role), it)
        return _Engine(S, lambda: prefill_search(w, it, stages, link, P), same)
    if role == "decode":
        return _Engine(S, lambda: decode_search(w, it, batch, P, out))
    c, f = chunk_mix(batch, P, out, batch * P / out)
    full = batch / (out * ((1.0 - f) * it(batch, 0.0) + f * it(batch, c)))  # one engine

    only: dict[int, float] = {pct: PERCENTILES[pct]}

    def meets(lat: LoadedLatency) -> bool:
        return (
            (w.max_ttft_s is None or lat.ttft_s[pct] * k <= w.max_ttft_s)
            and (w.max_e2e_s is None or lat.e2e_s[pct] * k <= w.max_e2e_s)
            and (w.max_ms_per_token is None or lat.tpot_s * 1e3 * k <= w.max_ms_per_token)
        )

    return _Engine(
        S,
        lambda: RateSearch(
            # Only the percentile `meets` reads is computed (the others' quantiles are most of
            # a latency evaluation's time).
            lambda r: open_latency(it, slots=batch, rate=r, prompt=P, output=out, percentiles=only),
            ceiling=meets,
            capacity=w.max_utilization * full,
        ),
    )


# Prefill rates by what their search reads (_prefill_content): designs that differ only in
# their batch share them.
_PREFILL: dict[tuple[object, ...], tuple[Catalog, float]] = {}
# The remembered figures by the name a journal gives them (_keep).
_CACHES: dict[str, dict[Any, Any]] = {"rates": _RATES, "stopped": _STOPPED, "prefill": _PREFILL}
_NAMES = {id(cache): name for name, cache in _CACHES.items()}


def _prefill_content(key: tuple[object, ...], it: IterationTime) -> tuple[object, ...] | None:
    """Everything a prefill engine's search reads (pools.prefill_search): its rate key (made
    with PREFILL_TABLE_BATCH, so equal for every batch: no entry is cut out by its place), and
    the iteration table's prompt-token grid and its row at no decodes, which is all that `it(0, tokens)` reads when the decode grid starts at 0 and
    the next row is finite (the bilinear weight of that row is then exactly 0). The table's
    other rows follow from the batch, which a prefill engine never reads otherwise; so two
    designs with equal content find equal rates. None when the table is not of that shape."""
    xs = it._xs
    if len(xs) < 2 or xs[0] != 0.0 or not all(math.isfinite(v) for v in it.row(1)):
        return None
    return (*key, tuple(it._ys), tuple(it.row(0)))


def _class_rates(
    w: InferenceWorkload,
    cat: Catalog,
    link: Link,
    d: Design,
    specs: list[StageSpec],
    c_i: int,
    role: Role,
    beaten: Beaten | None = None,
    settled: Ends | None = None,
) -> dict[int, float] | None:
    """Requests/s a replica of `d` (sized for class `c_i`) in `role` serves of each class it
    fits; a measurement stands for the engine on that hardware (whole requests only). With
    `beaten`: None, without searching the rates, when bounds on them (each class's full-load
    capacity, _Engine) are beaten. `settled`: which end settled the last search of each (role,
    class), to try that end first (serving.RateSearch; the rates are the same either way)."""
    assert w.request_mix is not None
    rates: dict[int, float] = {}
    todo: dict[int, tuple[tuple[object, ...], tuple[object, ...]]] = {}
    for k, other in enumerate(w.request_mix):
        known = measured_rate(w, d, k) if role == "both" else None
        if known is not None:
            rates[k] = known
        elif fits(other, w.request_mix[c_i]):
            batch = PREFILL_TABLE_BATCH if role == "prefill" else d.batch  # see _engine
            args = (w, cat, link, batch, specs, w.request_mix[c_i], other, role, d.engine)
            key = _rate_key(*args)
            hit = _remembered(key, cat)
            if hit is None:
                todo[k] = (key, args)
            elif hit > 0:
                rates[k] = hit
    S = len(specs)
    if beaten is not None and not todo and beaten(rates):
        return None  # every rate known (an earlier search): beaten as the search would find
    if beaten is not None and todo:
        # Searches stopped before (an earlier solve of a variant of this problem) left their
        # brackets: their upper ends may settle it without an iteration table.
        stopped = {k: _STOPPED.get(key) for k, (key, _) in todo.items()}
        ends = {k: v[1][1] * S for k, v in stopped.items() if v is not None and v[0] is cat}
        if len(ends) == len(todo) and beaten({**rates, **ends}):
            return None
    engines = {k: _engine(*args) for k, (_, args) in todo.items()}  # type: ignore[arg-type]
    if _shared_rates(cat, todo, engines, rates) and beaten is not None and beaten(rates):
        return None  # as for rates remembered above
    searches = _searches(cat, todo, engines, role, settled)
    if beaten is not None:
        # Narrow each class's bound (a search's upper end) one latency evaluation at a time,
        # until the bounds are beaten or every search is over.
        bound = dict(rates)
        while True:
            bound.update({k: s.bound * S for k, s in searches.items()})
            if beaten(bound):
                for k, s in searches.items():
                    _keep(_STOPPED, todo[k][0], cat, s.state)
                _settled(settled, role, searches)
                return None
            going = [(k, s) for k, s in searches.items() if not s.done]
            if not going:
                break
            # Step the first search on until its bound could be beaten (the test is False
            # above the threshold, so testing each step there would change nothing).
            k, first = going[0]
            most = beaten.threshold(bound, k)
            first.step()
            while not first.done and first.bound * S > most:
                first.step()
    for k, s in searches.items():
        rate = _remember(todo[k][0], cat, s.finish() * S)
        _settled(settled, role, {k: s})
        same = engines[k].content
        if same is not None:
            _keep(_PREFILL, same, cat, rate)
        if rate > 0:
            rates[k] = rate
    return dict(sorted(rates.items()))


def _settled(ends: Ends | None, role: Role, searches: Mapping[int, RateSearch]) -> None:
    """Note in `ends` the end that settled each of `searches` (of `role`, by class)."""
    if ends is not None:
        for k, s in searches.items():
            if s.settled is not None:
                ends[(role, k)] = s.settled


def _searches(
    cat: Catalog,
    todo: dict[int, tuple[tuple[object, ...], tuple[object, ...]]],
    engines: dict[int, _Engine],
    role: Role,
    settled: Ends | None,
) -> dict[int, RateSearch]:
    """The rate searches of `engines`, each trying first the end that settled the last search
    of its role and class (`settled`), and each resumed where a search stopped before on the
    same key left off (_STOPPED; its order with it)."""
    searches = {k: e.search() for k, e in engines.items()}
    for k, (key, _) in todo.items():
        searches[k].trickle_first = settled is not None and settled.get((role, k)) == "trickle"
        was = _STOPPED.pop(key, None)
        if _JOURNAL is not None:
            _JOURNAL.append(("stopped", key, _GONE))
        if was is not None and was[0] is cat:
            searches[k].resume(was[1])
    return searches


def _shared_rates(
    cat: Catalog,
    todo: dict[int, tuple[tuple[object, ...], tuple[object, ...]]],
    engines: dict[int, _Engine],
    rates: dict[int, float],
) -> bool:
    """Take out of `todo` and `engines` the classes whose rate a search on equal content found
    (_PREFILL), as remembered rates (into `rates` when above 0); whether none is left."""
    for k, e in list(engines.items()):
        hit = _PREFILL.get(e.content) if e.content is not None else None
        if hit is not None and hit[0] is cat:
            rate = _remember(todo.pop(k)[0], cat, hit[1])
            del engines[k]
            if rate > 0:
                rates[k] = rate
    return not todo


def add_served(
    decoded: dict[str, float],
    prefilled: dict[str, float],
    role: Role,
    requests_per_s: Mapping[str, float],
) -> None:
    """Add a replica group's requests/s per class name to those decoded (whole-request and
    decode pools) and prefilled (whole-request and prefill pools) of its mix."""
    for side, kept in (("decode", decoded), ("prefill", prefilled)):
        if role in ("both", side):
            for name, rate in requests_per_s.items():
                kept[name] = kept.get(name, 0.0) + rate


def mix_served_rate(
    w: InferenceWorkload,
    scale: float,
    decoded: Mapping[str, float],
    prefilled: Mapping[str, float],
) -> float:
    """The rate the whole mix is served at, as requests/s at demand scale 1: each class's
    requests served (a request once both prefilled and decoded) over its share, at its
    scarcest class."""
    assert w.request_mix is not None
    return min(
        (
            min(decoded.get(c.name, 0.0), prefilled.get(c.name, 0.0)) / (c.share * scale)
            for c in w.request_mix
            if c.share > 0
        ),
        default=0.0,
    )


def mix_tokens_served_per_s(
    w: InferenceWorkload,
    scale: float,
    decoded: Mapping[str, float],
    prefilled: Mapping[str, float],
    *,
    throughput_goal: bool,
) -> float:
    """Output tokens/s a request mix serves in a period at demand `scale`, from the requests/s
    per class name its replica groups decode and prefill (add_served). Only requests that
    exist make tokens: the groups' shares may hold more time than the requests need. At a fixed
    rate each class serves at most its load; under a throughput goal (the mix's rate is what
    the plan serves) the whole mix runs at the rate its scarcest class allows
    (mix_served_rate), each class at its share of it."""
    assert w.request_mix is not None
    if throughput_goal:
        rate = mix_served_rate(w, scale, decoded, prefilled)
        return sum(c.share * scale * rate * c.output_tokens for c in w.request_mix)
    rps = (w.requests_per_s or 0.0) * scale
    return sum(
        min(decoded.get(c.name, 0.0), prefilled.get(c.name, 0.0), rps * c.share) * c.output_tokens
        for c in w.request_mix
    )
