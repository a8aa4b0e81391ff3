"""The planner's single-stream decode tokens/s beside published runs of models split across machines.

Run: python benchmarks/pooled/run.py [--markdown] [--assume-link LINK]   (a few seconds;
--markdown wraps the block in markers for a docs page; --assume-link scores the inferred-link
rows again, in a separate table, on the catalog link LINK instead, e.g. eth-1g or thunderbolt5:
a sensitivity check, not part of the result)

Long because this docstring carries the benchmark's whole method and its result.

What it measures: for every row of benchmarks/pooled/published.yaml that maps to catalog ids
(model, weight format, one catalog accelerator per machine, catalog link), the planner's decode
tokens/s of ONE sequence (batch 1) on that pool of machines, beside the measured figure, and the
deviation (planner / measured - 1). Single-machine baseline rows are scored too but kept out of
the pooled summary (they separate the device model's error from the split's).

Every row falls in one of three classes, each printed apart (no row is left out), or is
anomalous (below):

- scored: the row maps. Where its source names no link (`catalog.link: null`), the row is
  scored on the link the planner itself assumes for a pool that names none
  (planner.estimator.built_in_link: the slowest built-in wired port all its machines share,
  from the catalog's sourced `ports` of each whole machine), shown as "<link> (inferred)" in
  the table and listed as "link inferred: <rule>"; so is a row whose mapping names a link the
  source does not state (`catalog.link_assumed` says how it was inferred: the Google Cloud VMs'
  zone network). The summary gives the pooled median with those rows, with the stated-link
  rows only, and with the inferred-link rows only.
- source incomplete (`source_incomplete`): the source leaves out a fact no rule can infer
  (the quantization, which device ran, a Wi-Fi setup). Listed with the missing fact, and where
  the rest maps, with what the planner gives on it; not scored.
- not expressible (`why_not`): the planner cannot express the row yet (a device, model,
  format or engine mode the catalog lacks). Listed with what is missing; not scored.

A row that maps but whose source calls its own figure pathological (`anomalous: true` in
published.yaml, with an `anomalous_note` saying why) is scored in a table of its own and kept
out of every summary: the figure measures a fault the source names, not the setup. So is a row
a catalog figure was fitted on (`fitted` in published.yaml, naming the figure): it cannot test
what was taken from it.

Result (catalog as of this commit): 84 rows (69 pooled, 15 one-machine baselines) from 26
sources. 73 scored (59 pooled, 14 baselines; 29 of them on an inferred link), 8 source
incomplete, 0 not expressible, 1 anomalous and 2 fitted on, each of the last two scored apart.
Pooled: median |deviation| 18.2 %, worst 133.0 % (8 x Pi 4B, Llama 2 70B, distributed-llama
0.1.0, whose measured transfer time jumps from 34 to 290 ms between four and eight machines,
which the engine's issue #20 puts down to the switch). With the stated-link rows only: 30 rows,
median 28.6 %; with the inferred-link rows only: 29 rows, 15.7 %. By engine (pooled rows):

- distributed-llama, 24 rows, median 16.9 %. Each release is scored as it runs (catalog
  engines distributed-llama-0.3 and distributed-llama, planner.estimator.engine_topology;
  benchmarks/pooled/distributed-llama.md): the README's 0.1.0 and 0.3.1 tables run a star
  through the root, ten exchanges per block, each with the engine's own time (172 us on a
  Pi 5, fitted on the 2 x Pi 5 Llama 3 8B row, which is therefore scored apart, and scaled to
  other machines by their one-machine task time: 59.3 us on a Pi 4B, 12.8 us on a Google
  Cloud C3D VM); releases from PR #64 exchange twice per block over a full mesh (796 us,
  fitted on PR #64's two-Pi-5 row, scored apart). Two to four Pi 4Bs +10.2 to +18.0 %, the
  Google Cloud VMs +2.5 to +21.0 %, eight Pi 4Bs +105 to +133 %.
- exo, 8 rows, median 18.2 %: tensor parallel over Thunderbolt 5 RDMA on M3 Ultras +1.2 to
  +18.2 % (Kimi K2 +52.1 %), pipelines of 8 Mac minis on the inferred Gigabit Ethernet +1.9 to
  +54.8 %.
- llama.cpp RPC, 17 rows, median 19.1 %: the engine's time per remote stage comes from its
  protocol (planner.estimator.rpc_hop: 1.975 ms per synchronous round trip, from LLMKube's
  two Sparks, a source no row here comes from, and in builds before PR #15405 the re-sent
  graph). Strix Halo clusters -16.3 to +30.3 %, DGX Spark pipelines +22.9 to +53.2 % (their
  one-Spark runs of the same Q2_K MoE model are +41.7 and +67.5 %: the error is the one
  machine's), BC-250 pairs +1.9 and +58.0 % (the Ministral board alone +23.7 %).
- vLLM, 7 rows, median 34.2 %; SGLang, 3 rows, median 94.7 % (two Qwen3.6-27B rows on two
  Sparks measure no faster than the planner's one Spark, +94.7 and +109.1 %).

Baselines: 14 rows, median 13.0 %. Given the source's own one-machine measurement (the second
table), the split model alone is within 8.7 % at the median of 26 rows. The rows not scored are
listed by class, each saying why. vLLM runs with --enforce-eager are scored under the catalog
engine vllm-eager (below). Two rows run Unsloth's UD-Q2_K_XL, a weight format added from its
file's size (2.701 bits per weight).

How a row is computed (planner estimator functions only; nothing is fitted on these rows, but
two catalog figures come from one each: distributed-llama's time per exchange, from
dllama-pr64-rpi5-2x-llama3-8b's transfer time, and distributed-llama-0.3's, from
dllama-rpi5-2x-llama3-8b's, so those two rows are scored apart, in no summary (`fitted`);
distributed-llama-0.3's per-machine task times, which scale that figure to a Pi 4B or a
c3d-highcpu-30 VM, come from the one-machine rows' T, whose own scores charge no exchange):

- split: pipeline (exo, llama.cpp RPC, prima.cpp): one stage per machine
  (planner.estimator.replica.StageSpec, tp 1), layers in proportion to each machine's catalog
  memory size (largest remainder; equal memory = the planner's even split). One sequence alone
  passes every stage in turn, so its time per token is the sum of the stages
  (planner.estimator.replica.single_stream_seconds): each stage = its layers x per-block time +
  head and step overhead + the hop of the batch-1 hidden state (hidden x 2 bytes) over the row's
  link (latency + bytes / bandwidth) + the engine's own time per hop
  (planner.schema.support.Engine.hop_overhead_us, sourced in the catalog; engines the catalog
  lacks add none) and, for llama.cpp's RPC backend, its time per remote stage from its
  protocol (planner.estimator.rpc_hop: each release's synchronous round trips, and in builds
  before PR #15405 the stage's serialized graph over the link), with S machines S - 1 remote
  stages per token, (S - 1) / S of one charged on each hop.
- split: tensor (distributed-llama, exo RDMA, vLLM and SGLang TP): one stage of tp = machines
  whose exchanges cross the row's link (StageSpec.link: two ring all-reduces of the hidden
  state per block, latency + bytes / bandwidth per step, or the link's measured all-reduce
  time where the catalog has one (Link.allreduce_us), and per all-reduce the engine's own time
  per exchange, planner.schema.support.Engine.exchange_overhead_us, none for engines without a
  measurement, scaled to the row's machine where the engine has that machine's one-machine
  task time (Engine.task_sync_us, planner.estimator.support.exchange_overhead_s); an engine release with a layout of its own, Engine.tensor_layout, is charged
  that layout's exchanges and root-only work instead: planner.estimator.engine_topology), in
  the same single-stream sum. Machines of one chip with different memory sizes run at the
  slowest memory's pace. A row's `catalog.engine` names the catalog engine (release) where it
  is not the one ENGINES gives for the row's engine.
- one machine (baselines): the pipeline formula with one stage.
- the engine's own fixed time per block and per step of every forward pass, in both splits
  (planner.estimator.support.engine_times): for vLLM run with --enforce-eager (catalog engine
  vllm-eager), the host's launch time per block, Engine.launch_us_per_layer, 339 us, taken
  from a published eager / CUDA-graph pair under vLLM on A800s (vLLM-Omni issue 7960:
  Qwen2.5-Omni-7B's thinker, 28 blocks, 9.5 ms per token apart), not fitted on any row here;
  it is charged serially with the device's work, and it does not shrink with the
  tensor-parallel degree (each machine launches every block's kernels).

Assumptions where the sources are silent (stated, not fitted): context = prompt + half the
output tokens where both are stated, else 256 tokens (batch-1 KV reads are small at that length
for these models); KV cache fp16 (llama.cpp's and MLX's default) unless the row's `catalog.kv`
names the format the run used (vLLM's --kv-cache-dtype fp8: fp8; llama.cpp's -ctk q8_0: q8_0).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from planner.catalog import load_catalog
from planner.estimator.built_in_link import NoSharedPort, built_in_link
from planner.estimator.engine_topology import exchange_layout
from planner.estimator.replica import IterationTime, StageSpec, single_stream_seconds
from planner.estimator.rpc_hop import NO_RPC
from planner.estimator.support import engine_times, exchange_overhead_s
from planner.schema.catalog import Accelerator, Link, ModelArch

HERE = Path(__file__).resolve().parent
KV = "fp16"
DEFAULT_CONTEXT = 256
MARK_BEGIN = "<!-- benchmarks/pooled/run.py --markdown: begin -->"
MARK_END = "<!-- benchmarks/pooled/run.py --markdown: end -->"


# The three classes of row (run.py prints each apart; none is hidden):
SCORED = "scored"  # maps to catalog ids, link stated or inferred by the built-in-port rule
SOURCE_INCOMPLETE = "source incomplete"  # the source omits a fact no rule can infer
NOT_EXPRESSIBLE = "not expressible"  # the planner cannot express it yet (a catalog gap)
ANOMALOUS = "anomalous"  # maps, but its source calls its own figure pathological (scored apart)
FITTED = "fitted"  # maps, but a catalog figure was fitted on it (scored apart)


@dataclass
class Row:
    id: str
    engine: str
    measured: float  # decode tokens/s of one sequence, as published
    machines: str  # as the table prints it
    link: str
    baseline: bool = False
    why_not: str = ""  # what the planner cannot express yet (a catalog gap)
    source_incomplete: str = ""  # a fact the source does not state and no rule infers
    link_rule: str = ""  # how the link was inferred where the source does not state it
    anomalous: str = ""  # why the source calls its own figure pathological (scored apart)
    fitted: str = ""  # the catalog figure fitted on the row (scored apart)
    network_ms: float | None = None  # network time per token where the source states it
    spec: dict[str, Any] = field(default_factory=dict)  # the row's catalog mapping
    source: str = ""  # the source's url, or its title where it has none

    @property
    def kind(self) -> str:
        """The row's class: a fact missing from the source outranks a catalog gap (closing
        the gap would not make the row scoreable)."""
        if self.source_incomplete:
            return SOURCE_INCOMPLETE
        if self.why_not:
            return NOT_EXPRESSIBLE
        if self.anomalous:
            return ANOMALOUS
        return FITTED if self.fitted else SCORED


def _context(r: dict[str, Any]) -> int:
    pub = r.get("as_published", {})
    prompt, output = pub.get("prompt_tokens"), pub.get("output_tokens")
    if prompt is not None and output is not None:
        return int(prompt + output / 2)
    return DEFAULT_CONTEXT


def _anomalous(r: dict[str, Any]) -> str:
    """Why the row's source calls its own figure pathological ("" for a row it does not)."""
    return (r.get("anomalous_note") or "flagged by its source") if r.get("anomalous") else ""


def _row(r: dict[str, Any]) -> Row:
    cat = r.get("catalog") or {}
    machines = " + ".join(f"{m['count']}x {m['accelerator']}" for m in cat.get("machines", []))
    if not machines:
        machines = " + ".join(
            f"{m.get('count')}x {m.get('device')}" for m in r["as_published"].get("machines", [])
        )
    row = Row(
        id=r["id"],
        engine=r["engine"],
        measured=float(r["measured"]["decode_tokens_per_s"]),
        machines=machines,
        link=cat.get("link") or "-",
        baseline=bool(r.get("single_machine_baseline")),
        why_not=r.get("why_not", ""),
        source_incomplete=r.get("source_incomplete", ""),
        anomalous=_anomalous(r),
        fitted=r.get("fitted", ""),
        link_rule=cat.get("link_assumed", ""),  # a link the source does not state, inferred
        network_ms=r["measured"].get("network_transfer_ms"),
        spec=dict(cat, context=_context(r), engine=cat.get("engine") or ENGINES.get(r["engine"])),
        source=r["source"].get("url") or r["source"].get("title", ""),
    )
    if cat.get("machines") and not cat.get("link") and sum(m["count"] for m in cat["machines"]) > 1:
        _infer_link(row)
    return row


def _infer_link(row: Row) -> None:
    """A row whose source names no link: the planner's own rule for a pool that names none
    (planner.estimator.built_in_link: the slowest built-in wired port all its machines share),
    or, where the rule finds none, a gap of the source."""
    cat = load_catalog()
    devices = [cat.accelerator(m["accelerator"]) for m in row.spec["machines"]]
    try:
        assumed = built_in_link(cat, devices)
    except NoSharedPort as e:
        if row.kind in (SCORED, ANOMALOUS, FITTED):
            row.source_incomplete = f"link: not stated, and {e}"
        return
    row.link = row.spec["link"] = assumed.link.id
    row.link_rule = assumed.rule


def load_rows() -> list[Row]:
    data = yaml.safe_load((HERE / "published.yaml").read_text(encoding="utf-8"))
    return [_row(r) for r in data["rows"]]


def layer_split(devices: list[Accelerator], layers: int) -> list[int]:
    """Layers per machine in proportion to catalog memory size (largest remainder)."""
    mem = [d.memory.size for d in devices]
    quota = [layers * x / sum(mem) for x in mem]
    out = [math.floor(q) for q in quota]
    for i in sorted(range(len(out)), key=lambda i: out[i] - quota[i])[: layers - sum(out)]:
        out[i] += 1
    return out


# The catalog engine whose figures a row's engine runs on (its time per pipeline hop and per
# exchange between machines, planner.schema.support.Engine.hop_overhead_us and
# exchange_overhead_us); engines the catalog lacks add none.
ENGINES = {
    "distributed-llama": "distributed-llama",
    "llama.cpp-rpc": "llama.cpp",
    "exo": "exo",
    "vllm": "vllm",
    "sglang": "sglang",
    "mlx-distributed": "mlx",
}


def _engine_args(engine: str, own: bool) -> dict[str, Any]:
    """The engine's own figures an iteration table reads (planner.estimator.support.
    engine_times): its kernel family, its fixed time per block and per step (an older
    release's fitted figures, and the host launch time of an engine run without CUDA graphs,
    Engine.launch_us_per_layer), and, where `own`, its time per pipeline hop and its RPC
    protocol's round trips (`own` False: the hops cost the link alone)."""
    t = engine_times(load_catalog(), engine or None)
    return {
        "kernels": t["kernels"],
        "engine_layer_s": t["engine_layer_s"],
        "engine_step_s": t["engine_step_s"],
        "hop_overhead_s": t["hop_overhead_s"] if own else 0.0,
        "rpc": t["rpc"] if own else NO_RPC,
    }


def pipeline_seconds(
    m: ModelArch,
    weights: str,
    devices: list[Accelerator],
    link: Link | None,
    context: int,
    engine: str = "",
    own: bool = True,
    kv: str = KV,
) -> float:
    """Seconds per token of one sequence through one stage per machine: the sum of the stages
    (planner.estimator.replica.single_stream_seconds), each hop over the row's link plus the
    engine's own time per hop (`own` False: without it), and each block and step with the
    engine's own fixed time (_engine_args)."""
    stages = [
        StageSpec(device=d, tp=1, layers=n)
        for d, n in zip(devices, layer_split(devices, m.num_layers), strict=True)
    ]
    if link is None:
        assert len(stages) == 1, "a pipeline of several machines needs a link"
        link = load_catalog().link("eth-1g")  # unused: one stage has no hop
    return _one_sequence(m, weights, kv, context, stages, link, _engine_args(engine, own))


def tensor_seconds(
    m: ModelArch,
    weights: str,
    devices: list[Accelerator],
    link: Link,
    context: int,
    engine: str = "",
    own: bool = True,
    kv: str = KV,
) -> float:
    """Seconds per token of one sequence on one tensor-parallel stage spanning the machines,
    its all-reduces over the row's link (planner.estimator.replica.StageSpec.link), each with
    the engine's own time per exchange (planner.schema.support.Engine.exchange_overhead_us;
    `own` False: without it), in the engine release's layout where it has its own
    (planner.estimator.engine_topology: distributed-llama's mesh all-gathers, or its early
    releases' star through a root that runs attention and the head alone). Machines of one chip
    with different memory sizes run at the pace of the slowest memory."""
    slowest = min(devices, key=lambda d: d.memory.bandwidth_gb_s)
    cat = load_catalog()
    exchange_s = exchange_overhead_s(cat, engine, slowest.id) if own else 0.0
    stage = StageSpec(
        device=slowest,
        tp=len(devices),
        layers=m.num_layers,
        link=link,
        exchange_s=exchange_s,
        layout=exchange_layout(cat, engine, m),
    )
    # One stage: no hop, so the engine's time per hop and RPC round trips never apply.
    return _one_sequence(m, weights, kv, context, [stage], link, _engine_args(engine, own=False))


def _one_sequence(
    m: ModelArch,
    weights: str,
    kv: str,
    context: int,
    stages: list[StageSpec],
    link: Link,
    engine_args: dict[str, Any],
) -> float:
    """Seconds per token of one sequence decoding alone at `context` tokens through `stages`
    (planner.estimator.replica.single_stream_seconds on a batch-1 iteration table)."""
    it = IterationTime(
        m, weights, kv, batch=1, context=context, prompt=1, output=1, stages=stages, link=link,
        **engine_args,
    )  # fmt: skip
    return single_stream_seconds(it)


def _seconds(spec: dict[str, Any], link: Link | None, own: bool = True) -> float:
    cat = load_catalog()
    m = cat.model(spec["model"])
    devices = [
        cat.accelerator(x["accelerator"]) for x in spec["machines"] for _ in range(x["count"])
    ]
    if len(devices) > 1 and link is None:
        raise ValueError("several machines and no link")
    engine = spec.get("engine") or ""
    kv = spec.get("kv") or KV
    if spec.get("split") == "tensor" and len(devices) > 1:
        assert link is not None
        return tensor_seconds(m, spec["weights"], devices, link, spec["context"], engine, own, kv)
    return pipeline_seconds(m, spec["weights"], devices, link, spec["context"], engine, own, kv)


def _link(spec: dict[str, Any], link_id: str | None) -> Link | None:
    lid = link_id or spec.get("link")
    return load_catalog().link(lid) if lid else None


def predict(spec: dict[str, Any], link_id: str | None = None) -> float:
    """The planner's decode tokens/s of one sequence for a row's catalog mapping (`link_id`
    replaces the row's link)."""
    return 1.0 / _seconds(spec, _link(spec, link_id))


def link_ms(spec: dict[str, Any], link_id: str | None = None) -> float:
    """Milliseconds per token the planner spends crossing machines: the row's time minus the
    same pool's over an ideal link (no latency, no measured all-reduce time, unbounded
    bandwidth) and without the engine's own time per hop or exchange. 0 for one machine."""
    link = _link(spec, link_id)
    if link is None:
        return 0.0
    ideal = link.model_copy(
        update={"bandwidth_gb_s": 1e12, "latency_us": 0.0, "allreduce_us": None}
    )
    return (_seconds(spec, link) - _seconds(spec, ideal, own=False)) * 1e3


def scored(rows: list[Row], assume_link: str | None = None) -> list[tuple[Row, float]]:
    """(row, planner tokens/s) for every scored row (link stated or inferred), or with
    `assume_link` for the rows whose link is inferred, on that link instead."""
    if assume_link is None:
        return [(r, predict(r.spec)) for r in rows if r.kind == SCORED]
    return [(r, predict(r.spec, assume_link)) for r in rows if r.link_rule and r.kind == SCORED]


def _table(pairs: list[tuple[Row, float]], link: str | None = None) -> list[str]:
    lines = [
        "| row | engine | machines | link | measured tok/s | planner tok/s | deviation "
        "| link and engine ms/token, source / planner |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r, p in pairs:
        stated = r.network_ms
        shown = link or (f"{r.link} (inferred)" if r.link_rule else r.link)
        lines.append(
            f"| {r.id} | {r.engine} | {r.machines} | {shown} | {r.measured:.4g} | "
            f"{p:.4g} | {p / r.measured - 1:+.1%} | "
            f"{'n/a' if stated is None else f'{stated:.4g}'} / {link_ms(r.spec, link):.3g} |"
        )
    return lines


def _machine_of(r: Row) -> tuple[str, str, str]:
    """(model, weights, the one chip) of a row whose machines are all of one chip: one
    architecture and one memory bandwidth (machines of one chip with different memory sizes run
    a token at one pace, so a source's one-machine run of either size stands for all)."""
    cat = load_catalog()
    devices = [cat.accelerator(m["accelerator"]) for m in r.spec.get("machines", [])]
    chips = {f"{d.architecture} at {d.memory.bandwidth_gb_s:g} GB/s" for d in devices}
    return (
        r.spec.get("model", ""),
        r.spec.get("weights", ""),
        chips.pop() if len(chips) == 1 else "",
    )


def given_baseline(rows: list[Row]) -> list[tuple[Row, float, Row]]:
    """The split model alone: for each expressible pooled row whose source also measured ONE of
    its machines on the same model and weights, the planner's pooled tokens/s scaled by that
    measurement over the planner's own one-machine figure (what the planner predicts for the
    pool when the machine's speed is the measured one). (row, tokens/s, baseline row)."""
    base = {(r.source, *_machine_of(r)): r for r in rows if r.baseline and r.kind == SCORED}
    out = []
    for r in rows:
        b = base.get((r.source, *_machine_of(r)))
        if r.baseline or r.kind != SCORED or b is None or not _machine_of(r)[2]:
            continue
        out.append((r, predict(r.spec) * b.measured / predict(b.spec), b))
    return out


def _stats(pairs: list[tuple[Row, float]]) -> str:
    errs = sorted(abs(p / r.measured - 1) for r, p in pairs)
    if not errs:
        return "no rows"
    worst = max(pairs, key=lambda rp: abs(rp[1] / rp[0].measured - 1))[0].id
    return (
        f"{len(errs)} row{'s' if len(errs) != 1 else ''}, median |deviation| "
        f"{statistics.median(errs):.1%}, "
        f"worst {errs[-1]:.1%} ({worst})"
    )


def summary(rows: list[Row], pairs: list[tuple[Row, float]]) -> list[str]:
    pooled = [(r, p) for r, p in pairs if not r.baseline]
    base = [(r, p) for r, p in pairs if r.baseline]
    n_pooled = sum(not r.baseline for r in rows)
    kinds = (SOURCE_INCOMPLETE, NOT_EXPRESSIBLE, ANOMALOUS, FITTED)
    count = {k: sum(r.kind == k for r in rows) for k in kinds}
    apart = f", {count[ANOMALOUS]} anomalous (scored apart)" if count[ANOMALOUS] else ""
    apart += f", {count[FITTED]} fitted on (scored apart)" if count[FITTED] else ""
    lines = [
        f"{len(rows)} rows ({n_pooled} pooled, {len(rows) - n_pooled} single-machine baselines): "
        f"{len(pairs)} scored ({len(pooled)} pooled, {len(base)} single-machine baselines; "
        f"{sum(bool(r.link_rule) for r, _ in pairs)} on an inferred link), "
        f"{count[SOURCE_INCOMPLETE]} source incomplete, {count[NOT_EXPRESSIBLE]} not "
        f"expressible{apart}.",
        f"Pooled: {_stats(pooled)}.",
        f"Pooled, link stated only (without the inferred-link rows): "
        f"{_stats([(r, p) for r, p in pooled if not r.link_rule])}.",
        f"Pooled, link inferred only: {_stats([(r, p) for r, p in pooled if r.link_rule])}.",
    ]
    by_engine: dict[str, list[tuple[Row, float]]] = defaultdict(list)
    for rp in pooled:
        by_engine[rp[0].engine].append(rp)
    lines += [f"Pooled, {e}: {_stats(v)}." for e, v in sorted(by_engine.items())]
    lines.append(f"Baselines: {_stats(base)}.")
    return lines


def _incomplete(r: Row) -> str:
    """A source-incomplete row with its missing facts, its catalog gaps if any, and where the
    rest maps, what the planner gives on the mapping as far as it goes (not scored)."""
    line = f"- {r.id}: {r.source_incomplete}" + (f" Also: {r.why_not}" if r.why_not else "")
    if r.why_not or not r.spec.get("machines"):
        return line
    p = predict(r.spec)
    link = f", link {r.link} inferred" if r.link_rule else ""
    return (
        f"{line} The rest maps: the planner gives {p:.4g} tokens/s on it{link}, against "
        f"{r.measured:.4g} measured ({p / r.measured - 1:+.1%}; not scored)."
    )


def _classes(rows: list[Row], pairs: list[tuple[Row, float]]) -> list[str]:
    """The rows scored on an inferred link (with the rule), the rows whose source is
    incomplete (with the missing fact) and the rows the planner cannot express yet."""
    return [
        "Link inferred (scored above; the source names no link, so the planner's rule for a "
        "pool that names none chose it, planner.estimator.built_in_link, or the mapping says "
        "how it was inferred):",
        "",
        *(f"- {r.id}: link inferred: {r.link} ({r.link_rule})" for r, _ in pairs if r.link_rule),
        "",
        "Source incomplete (not scored: the source does not state a fact no rule can infer):",
        "",
        *(_incomplete(r) for r in rows if r.kind == SOURCE_INCOMPLETE),
        "",
        "Not expressible (not scored: the planner cannot express the row yet):",
        "",
        *(f"- {r.id}: {r.why_not}" for r in rows if r.kind == NOT_EXPRESSIBLE),
        *_apart(
            rows,
            ANOMALOUS,
            "Anomalous (scored here apart, kept out of every summary: the source calls its own "
            "figure pathological):",
        ),
        *_apart(
            rows,
            FITTED,
            "Fitted on (scored here apart, kept out of every summary: a catalog figure was "
            "fitted on each):",
        ),
    ]


def _apart(rows: list[Row], kind: str, heading: str) -> list[str]:
    """The rows of `kind` (anomalous or fitted on), scored in a table of their own under
    `heading` and kept out of every summary, each with its reason."""
    pairs = [(r, predict(r.spec)) for r in rows if r.kind == kind]
    if not pairs:
        return []
    why = {ANOMALOUS: lambda r: r.anomalous, FITTED: lambda r: r.fitted}[kind]
    return ["", heading, "", *_table(pairs), "", *(f"- {r.id}: {why(r)}" for r, _ in pairs)]


def report(rows: list[Row], assume_link: str | None = None) -> list[str]:
    """The Markdown block: table, summary, the three classes of row (and the assumed-link
    table)."""
    pairs = scored(rows)
    lines = [*_table(pairs), "", *summary(rows, pairs), "", *_classes(rows, pairs)]
    split = given_baseline(rows)
    lines += [
        "",
        "The split model alone: pooled rows whose source also measured one of the machines "
        "alone (same model and weights), the planner's pooled figure scaled by that "
        "measurement over the planner's one-machine figure:",
        "",
        "| row | one-machine row | measured tok/s | planner, given the one machine | deviation |",
        "|---|---|---:|---:|---:|",
        *(
            f"| {r.id} | {b.id} | {r.measured:.4g} | {p:.4g} | {p / r.measured - 1:+.1%} |"
            for r, p, b in split
        ),
        "",
        f"Given the one machine: {_stats([(r, p) for r, p, _ in split])}.",
        *(
            f"Given the one machine, {e}: {_stats([(r, p) for r, p, _ in split if r.engine == e])}."
            for e in sorted({r.engine for r, _, _ in split})
        ),
    ]
    if assume_link is not None:
        extra = scored(rows, assume_link)
        lines += [
            "",
            f"The inferred-link rows again, on {assume_link} in place of the rule's link "
            "(a sensitivity check, not a published setup; not in the summary above):",
            "",
            *_table(extra, assume_link),
            "",
            f"Assumed link {assume_link}: {_stats(extra)}.",
        ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--markdown", action="store_true", help="wrap the block in doc markers")
    ap.add_argument(
        "--assume-link",
        metavar="LINK",
        help="also score the inferred-link rows on this catalog link instead, apart",
    )
    args = ap.parse_args()
    lines = report(load_rows(), args.assume_link)
    if args.markdown:
        lines = [MARK_BEGIN, "", *lines, "", MARK_END]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
