"""The planner's serving figures beside published serving results, scored leave-one-source-out.

Rows come from benchmarks/serving/published.yaml (each with its source and quote). The metric of
each row type was chosen before any fitting and is not changed to suit a result (one row type,
the finite run below, was added after a fit, when two rows were found scored as steady state;
docs/serving.md gives the scores before and after):

- prefill (batch 1, no decodes): time to first token = one iteration carrying the whole prompt.
- offline (saturated throughput at a stated input/output length; MLPerf Offline): output
  tokens/s per accelerator of the planner's best single-stage design that fits memory (every
  batch the design ladder holds up to the engine's sequence limit: the row's max-num-seqs where
  the source states it, else the engine's default, ENGINE_MAX_SEQS; the row's tensor-parallel
  degree where the source states it, else the best degree the planner finds; one replica over
  all the row's devices where the source ran one instance on them).
- offline run of a stated request list (the source publishes each request's prompt and output
  tokens, as vLLM's benchmark_serving.py result files do; the list is in requests/): output
  tokens/s per accelerator of the best design over that whole run, every request queued at the
  start and the run replayed at the planner's own iteration time (planner.simulate), so a short
  run of long-tailed lengths is charged its drain, when few sequences are left in flight. Added
  when Lambda's two 1,280-request runs turned out to be scored as steady state: a row type for
  every source that publishes its requests, not a change to the offline metric.
- server with latency limits (MLPerf Server: p99 time to first token and time per output token
  limits; the interactive variant has tighter ones): output tokens/s per accelerator at the
  highest Poisson arrival rate whose modelled p99 first-token time and time per token
  (planner.estimator.serving.open_latency, no planning margin) meet the row's limits, best over
  the same designs as offline rows.
- server at a fixed concurrency: output tokens/s of that many sequences (closed load).
- decode at concurrency 1: time per output token.
- sizing (a published configurator's aggregated plan): output tokens/s per GPU of the stated
  replica (tensor parallel, batch) at that request shape.

The engine: each row is predicted at the engine its source ran, where the catalog knows it and
its support matrix runs the row's format on the row's device (vLLM before 0.6.0 would run as
`vllm-0.5`, whose host time per token the catalog carries; no scored row does today); other rows
at each device's default engine. Where a source's own files contradict its label (a release's
signature in the measurement, such as several tokens per streamed event from multi-step
scheduling), the files win and the row's note says why; Lambda's two rows keep their `vllm054`
ids, the label they were published under.

A row is scored only when its model, device, weight format and mean request shape (prompt and
output tokens) are stated by its source; otherwise it is listed as not expressible with each
missing piece named.
- disaggregated sizing (a configurator's prefill and decode pools for a stated demand): the
  accelerators the planner's best prefill pool and best decode pool need for the row's output
  tokens/s, each under the planner's own pool rules (mean first token and time per token within
  the row's targets, no planning margin), as for aggregated sizing. A pool measured alone, with
  no whole-system figure, is listed as not expressible.

The fitted factors are the batched serving compute efficiencies of datacenter devices, one per
tensor path (16-bit, 8-bit, 4-bit; AMD's stack on its own: catalog serving.yaml), fitted on the
rows of dense models: a mixture-of-experts model's expert products are grouped GEMMs, another
kernel path, so its rows are scored at the dense rows' factors and enter no fit. The rule came
with the first scored MoE rows: GPUStack's vLLM runs, 1.4 to 26 times above their measurements
on every saturated run, and TensorRT-LLM's overview, whose Qwen3 rows are over-predicted where
prompts dominate (Qwen3-235B FP8 on 8 H100 at 5000/500 tokens: +40 %) while the same page's dense
Llama 3.3 70B at that shape on H100 is within 5 %; the dense rows' factors and scores are as
before them. For each
source they are fitted on the other sources' rows (each path's factor minimizing the summed
|log(planner / measured)| of its rows, on a grid of 0.20-0.90 in steps of 0.02), then that
source's rows are scored with them. KV-cache format: as the source states it, else the engine's
default (vLLM's `auto`: the model's 16-bit data type beside FP8 weights; ENGINE_KV), else FP8
where the weights are 8- or 4-bit (TensorRT-LLM's FP8 and FP4 recipes) and FP16 otherwise.

Beside the scored figure, every scored row is shown at the planner's operating point with the
shipped factors: the replica it plans (tensor parallel, stages, sequences), its requests/s per
replica, mean first token, time per output token and accelerators, next to the same figures
where the source states them.

The MLPerf Llama-2-70B rows also feed the accelerator-order check (issue: the measured order of
accelerators per round must be kept): the planner's per-accelerator offline figure at the
shipped factors is ranked within each round beside the measured ranking.

Run: python benchmarks/serving/run.py [--markdown]   (about a minute; --markdown prints the
block that docs/serving.md carries between its benchmark markers)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import planner.estimator.devices as devices_module
import planner.estimator.iteration_parts as tables_module
from planner.catalog import add_file_model, load_catalog
from planner.estimator.designs import Design, allowed_devices, inference_designs
from planner.estimator.efficiency import load_serving
from planner.estimator.formats import kv_bytes, weight_format
from planner.estimator.pools import decode_engine_search, prefill_engine_search
from planner.estimator.replica import IterationTime, StageSpec
from planner.estimator.serving import (
    LoadedLatency,
    chunk_mix,
    max_rate,
    open_latency,
    prefill_pool_budget,
    token_budget,
)
from planner.estimator.support import engine_kernels, host_s_per_token, runtimes
from planner.hf_config import load_hf_config
from planner.schema.catalog import ModelArch
from planner.schema.problem import InferenceWorkload, Problem
from planner.simulate import simulate_engine

HERE = Path(__file__).resolve().parent
MODELS = {
    "llama-2-70b": "llama-2-70b",
    "llama-2-7b": "llama-2-7b",
    "llama_70b (as published)": "llama-2-70b",
    "llama-2-70b-chat-hf": "llama-2-70b",  # MLPerf's model: the chat fine-tune, same architecture
    "Llama-3.3-70B-Instruct": "llama-3.1-70b",  # the same architecture as Llama 3.1 70B
    "Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "Llama-3.1-405B": "llama-3.1-405b",
    "Llama-3.1-405B-Instruct": "llama-3.1-405b",
    "Llama-3.1-70B-Instruct": "llama-3.1-70b",
    "Meta-Llama-3-8B-Instruct": "llama-3.1-8b",  # Llama 3 8B: the architecture of Llama 3.1 8B
    "Qwen3-32B": "qwen3-32b",  # config.json in benchmarks/serving/models
    "gpt-oss-120b": "gpt-oss-120b",
    "Qwen3-235B-A22B-Instruct-2507": "qwen3-235b-a22b",  # the 2507 refresh: Qwen3-235B-A22B's config
    "Qwen3-235B-A22B": "qwen3-235b-a22b",
    "Qwen3-30B-A3B": "qwen3-30b-a3b",
}
DEVICES = {
    "H100-SXM-80GB (DGX H100)": "h100-sxm",
    "H100-SXM-80GB": "h100-sxm",
    "H100 (H100-HBM3-80GB)": "h100-sxm",
    "H100 80G": "h100-sxm",
    "H200-SXM-141GB (DGX H200)": "h200-sxm",
    "H200-SXM-141GB": "h200-sxm",
    "H200": "h200-sxm",
    "h200_sxm": "h200-sxm",
    "B200-180GB (DGX B200)": "b200",
    "B200-SXM-180GB": "b200",
    "GB200 192GB (GB200 NVL72)": "gb200",
    "A100": "a100-80gb-sxm",
    "A100-80GB-SXM": "a100-80gb-sxm",
    "H100-80GB-SXM": "h100-sxm",
    "L40S": "l40s",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI325X": "mi325x",
    "Intel Gaudi 2 (96 GB HBM2E)": "gaudi2",
    # GPUStack's performance lab names "NVIDIA H100 GPUs" only; read as SXM 80 GB (its rows' notes).
    "NVIDIA H100 (gpustack performance lab)": "h100-sxm",
}
# Sequences an engine batches when the run does not set its limit: vLLM's --max-num-seqs, 256
# in its V0 engine (EngineArgs.__post_init__: "256 if not envs.VLLM_USE_V1 else 1024",
# https://github.com/vllm-project/vllm/blob/001999d2f360c2c5da23a916510c273b1a73d06c/vllm/engine/
# arg_utils.py; V1 became the default in 0.8.0). Every vLLM row that states no limit ran before
# 0.8.0 (Lambda's harness also passes 256 in its benchmark.sh; Oracle's October 2024 run
# of benchmark_throughput.py states no flags); rows of later releases state theirs.
ENGINE_MAX_SEQS = {"vllm": 256, "vllm-0.5": 256}
# The KV-cache format of a row whose source states none: the engine's default. vLLM's
# --kv-cache-dtype defaults to "auto" ("If 'auto', will use model data type",
# https://docs.vllm.ai/en/v0.6.3.post1/models/engine_args.html): an FP8 checkpoint keeps a 16-bit
# cache unless the run asks for fp8. Other rows: FP8 where the weights are 8- or 4-bit
# (TensorRT-LLM's FP8 and FP4 recipes), else FP16 (_kv).
ENGINE_KV = {"vllm": "fp16", "vllm-0.5": "fp16"}
# TensorRT-LLM's FP4 on B200 is NVFP4; gpt-oss's checkpoint is MXFP4 (its own format in the catalog)
WEIGHTS = {"fp8": "fp8", "fp16": "fp16", "bf16": "bf16", "fp4": "nvfp4", "mxfp4": "mxfp4"}
GRID = np.round(np.arange(0.20, 0.901, 0.02), 2)
MARK_BEGIN = "<!-- benchmarks/serving/run.py --markdown: begin -->"
MARK_END = "<!-- benchmarks/serving/run.py --markdown: end -->"


@dataclass
class Row:
    id: str
    kind: str
    source: str
    measured: float
    metric: str
    predict: Callable[[], float] | None
    why_not: str = ""
    spec: dict[str, Any] = field(default_factory=dict)  # what the source states, resolved


def _model(name: str) -> ModelArch | None:
    mid = MODELS.get(name)
    if mid is None:
        return None
    if mid == "qwen3-32b":  # not in the shipped catalog: known to it as a problem file's model
        add_file_model(mid, load_hf_config(HERE / "models" / "qwen3-32b" / "config.json"))
    return load_catalog().model(mid)


def _kv(weights: str) -> str:
    return "fp16" if weights == "fp16" else "fp8"


def row_kv(r: dict[str, Any], engine: str | None, weights: str) -> str:
    """The row's KV-cache format: as its source states it, else its engine's default."""
    return str(r.get("kv") or ENGINE_KV.get(engine or "") or _kv(weights))


def _problem(
    m: ModelArch,
    dev: str,
    tp: int,
    weights: str,
    kv: str,
    prompt: int,
    output: int,
    stages: int = 1,
    engine: str | None = None,
) -> Problem:
    return Problem.model_validate(
        {
            "name": "published-row",
            "workloads": [
                {
                    "name": "w",
                    "model": m.id,
                    "weights": weights,
                    "kv": kv,
                    "context_tokens": prompt + output,
                    "prompt_tokens": prompt,
                    "output_tokens": output,
                    "concurrency": "unbounded",
                    **({"engine": engine} if engine else {}),
                }
            ],
            # Performance only: a device whose catalog price is refurbished is still a design.
            "market": {"conditions": ["new", "refurbished", "used"]},
            "constraints": {
                "allowed_devices": [dev],
                "max_stages": stages,
                "max_tensor_parallel": tp,
            },
        }
    )


def _iteration(
    m: ModelArch,
    dev: str,
    tp: int,
    weights: str,
    kv: str,
    batch: int,
    prompt: int,
    output: int,
    layers: tuple[int, ...] | None = None,
    engine: str | None = None,
) -> IterationTime:
    """One serving iteration of `tp`-way stages holding `layers` blocks each (one stage of every
    block by default), with the host work per token of `engine` (the row's, when the catalog
    knows it) and the kernel family of that engine, else of the device's default engine, which
    sets the rate of its products (planner.estimator.kernel_rates)."""
    cat = load_catalog()
    acc = cat.accelerator(dev)
    default = runtimes(cat, acc, weights, kv)
    kernels = engine_kernels(cat, engine or (default[0].engine if default else None))
    return IterationTime(
        m,
        weights,
        kv,
        batch=batch,
        context=prompt + output,
        prompt=prompt,
        output=output,
        stages=[StageSpec(acc, tp, n) for n in (layers or (m.num_layers,))],
        link=cat.link("eth-100g"),
        host_s_per_token=host_s_per_token(cat, engine),
        kernels=kernels,
    )


def _mean_iteration(it: IterationTime, batch: int, prompt: int, output: int) -> float:
    c, f = chunk_mix(batch, prompt, output, batch * prompt / output)
    return (1 - f) * it(batch, 0) + f * it(batch, c)


def _designs(s: dict[str, Any]) -> list[Design]:
    """Every design of the row's pipeline depth (one stage unless the source states more) that
    fits memory: the row's tensor-parallel degree where stated, else every degree up to 8; one
    replica over all the row's devices where the source says one instance ran on them; no
    more sequences in flight than the engine's limit (`max_seqs`)."""
    cat = load_catalog()  # these rows name catalog models only
    pp = s.get("pp") or 1
    prob = _problem(
        s["m"],
        s["dev"],
        s["tp"] or 8,
        s["weights"],
        s["kv"],
        s["prompt"],
        s["output"],
        pp,
        s["engine"],
    )
    w = prob.workloads[0]
    assert isinstance(w, InferenceWorkload)
    ds = inference_designs(w, prob, cat, allowed_devices(prob, cat), prune=False)
    each = s["devices"] // s["instances"] if s.get("instances") else None
    return [
        d
        for d in ds
        if len(d.stages) == pp
        and (not s["tp"] or all(st.tp == s["tp"] for st in d.stages))
        and (each is None or _accelerators(d) == each)
        and (not s.get("max_seqs") or d.batch * len(d.stages) <= s["max_seqs"])
    ]


def _accelerators(d: Design) -> int:
    return sum(st.tp for st in d.stages)


def offline_per_accelerator(s: dict[str, Any]) -> float:
    """The offline metric: the best design's output tokens/s per accelerator."""
    return max((d.tokens_per_s / _accelerators(d) for d in _designs(s)), default=0.0)


def _replicas(s: dict[str, Any], d: Design) -> int:
    """Replicas of `d` the row's devices hold (0 where one needs more than the row has)."""
    return int(s["devices"] or _accelerators(d)) // _accelerators(d)


def _run(s: dict[str, Any], d: Design) -> tuple[float, float]:
    """Output tokens/s and mean time per output token of the source's whole request list on
    the replicas of `d` the row's devices hold: every request queued at the start and dealt
    round-robin to their engines (a replica of S stages is S engines of `d.batch` slots, one per
    micro-batch in flight, as planner.simulate replays plans), each engine replayed
    (planner.simulate.simulate_engine at the planner's own iteration time and token budget)
    until its last request ends; the run lasts as long as its slowest engine, and its output
    tokens are the source's own count. Two approximations, as in the planner's own replay of a
    plan: an engine's KV room is what `d` was sized for (`d.batch` sequences of the mean
    context; the device may hold more), and an iteration's attention is charged at the mean
    context, also while the drain leaves only the longer requests in flight."""
    it = _iteration(
        s["m"], s["dev"], d.stages[0].tp, s["weights"], s["kv"], d.batch, s["prompt"],
        s["output"], tuple(st.layers for st in d.stages), s["engine"],
    )  # fmt: skip
    engines = _replicas(s, d) * len(d.stages)
    seconds, tpot = 0.0, list[float]()
    for k in range(engines):
        res = simulate_engine(
            it,
            slots=d.batch,
            kv_tokens=d.batch * (s["prompt"] + s["output"]),
            budget=token_budget(d.batch, s["prompt"], s["output"]),
            requests=[(0.0, p, o) for p, o in s["requests"][k::engines]],
        )
        seconds, tpot = max(seconds, res.seconds), tpot + res.tpot
    tokens = sum(o for _, o in s["requests"])
    return (tokens / seconds if seconds > 0 else 0.0), statistics.fmean(tpot or [math.nan])


@dataclass(frozen=True)
class Run:
    """A finite run replayed on one design: output tokens/s per accelerator at work and the
    mean time per output token of its requests."""

    design: Design
    per_accelerator: float
    tpot: float


def best_run(s: dict[str, Any]) -> Run | None:
    """The design whose replay of the row's request list gives the most output tokens/s per
    accelerator at work; designs larger than the row's devices are out (None: no design)."""
    best = None
    for d in _designs(s):
        n = _replicas(s, d)
        if n == 0:
            continue
        tokens, tpot = _run(s, d)
        run = Run(d, tokens / (n * _accelerators(d)), tpot)
        if best is None or run.per_accelerator > best.per_accelerator:
            best = run
    return best


def run_per_accelerator(s: dict[str, Any]) -> float:
    """The offline metric of a finite run whose source publishes each request's lengths: the
    best design's output tokens/s per accelerator at work over that request list, its start and
    its drain included (a short run of long-tailed lengths ends with few sequences in flight,
    which a steady-state figure does not see)."""
    run = best_run(s)
    return run.per_accelerator if run else 0.0


@dataclass
class Point:
    """The planner's operating point for a row: output tokens/s per accelerator, the design
    (tensor parallel, sequences per micro-batch) and its latency at that rate."""

    per_accelerator: float
    tp: int = 0
    batch: int = 0
    latency: LoadedLatency | None = None
    stages: int = 1
    rate: float = 0.0  # requests/s per replica


def _best_point(s: dict[str, Any], ok: Callable[[LoadedLatency], bool]) -> Point:
    """The highest Poisson arrival rate whose modelled latency passes `ok`, best over the row's
    designs (per accelerator)."""
    prompt, output = s["prompt"], s["output"]
    best = Point(0.0)
    for d in _designs(s):
        layers = tuple(st.layers for st in d.stages)
        tp = d.stages[0].tp
        it = _iteration(
            s["m"],
            s["dev"],
            tp,
            s["weights"],
            s["kv"],
            d.batch,
            prompt,
            output,
            layers,
            s["engine"],
        )
        cap = d.batch / (output * _mean_iteration(it, d.batch, prompt, output))

        def latency(r: float, it: IterationTime = it, b: int = d.batch) -> LoadedLatency:
            return open_latency(it, slots=b, rate=r, prompt=prompt, output=output)

        rate = max_rate(latency, ceiling=ok, capacity=cap)
        per = rate * len(layers) * output / _accelerators(d)
        if per > best.per_accelerator:
            lat = open_latency(it, slots=d.batch, rate=rate, prompt=prompt, output=output)
            best = Point(per, tp, d.batch, lat, len(layers), rate * len(layers))
    return best


def _rate_per_accelerator(s: dict[str, Any], ok: Callable[[LoadedLatency], bool]) -> float:
    return _best_point(s, ok).per_accelerator


def _server_ok(s: dict[str, Any]) -> Callable[[LoadedLatency], bool]:
    return lambda lat: lat.ttft_s[99] <= s["ttft_limit"] and lat.tpot_s <= s["tpot_limit"]


def server_per_accelerator(s: dict[str, Any]) -> float:
    """The server metric: the p99 first token and the time per token within the row's limits."""
    return _rate_per_accelerator(s, _server_ok(s))


def sizing_devices(s: dict[str, Any], demand: float) -> float:
    """The sizing metric: accelerators the planner's best design needs for `demand` output
    tokens/s with the mean first token and the time per token within the row's targets (a
    configurator's targets are means); not rounded, so the model's error is not hidden in it."""
    per = _rate_per_accelerator(
        {**s, "tp": None},
        lambda lat: lat.ttft_mean_s <= s["ttft_limit"] and lat.tpot_s <= s["tpot_limit"],
    )
    return demand / per if per > 0 else math.inf


def disaggregated_devices(s: dict[str, Any], demand: float) -> float:
    """The disaggregated sizing metric: accelerators in a prefill pool and a decode pool for
    `demand` output tokens/s, each pool of the planner's best single-stage design under its own
    rules (planner.estimator.request_mix: the prefill engine batches whole prompts up to its
    budget, sends each prompt's KV cache over one InfiniBand NDR port per device, and is held to
    the mean first-token target; the decode engine is held to the time per token), without the
    planning margin, as the aggregated sizing metric; not rounded."""
    cat = load_catalog()
    m, prompt, output = s["m"], s["prompt"], s["output"]
    link = cat.link("ib-ndr")
    acc = cat.accelerator(s["dev"])
    prefill = math.inf  # accelerators per request/s
    decode = math.inf
    for d in _designs({**s, "tp": None}):
        tp, family = d.stages[0].tp, engine_kernels(cat, d.engine)

        def engine(
            batch: int, budget: float | None, tp: int = tp, family: str = family
        ) -> IterationTime:
            return IterationTime(
                m, s["weights"], s["kv"], batch=batch, context=prompt + output,
                prompt=prompt, output=output, stages=[StageSpec(acc, tp, m.num_layers)],
                link=link, budget=budget, host_s_per_token=host_s_per_token(cat, s["engine"]),
                kernels=family,
            )  # fmt: skip

        if d.batch == 1:
            rate = prefill_engine_search(
                engine(1, prefill_pool_budget(prompt)), tp, 1, link, prompt,
                kv_bytes(s["kv"]),
                ceiling=lambda lat: lat.ttft_mean_s <= s["ttft_limit"], utilization=1.0,
            ).finish()  # fmt: skip
            if rate > 0:
                prefill = min(prefill, tp / rate)
        rate = decode_engine_search(
            engine(d.batch, None), d.batch, prompt, output,
            ceiling=lambda lat: lat.tpot_s <= s["tpot_limit"], utilization=1.0,
        ).finish()  # fmt: skip
        if rate > 0:
            decode = min(decode, tp / rate)
    return demand / output * (prefill + decode)


# Sizing rows: the devices a configurator chose for a demand, aggregated or in two pools.
SIZING: dict[str, tuple[str, Callable[[dict[str, Any], float], float]]] = {
    "sizing": ("", sizing_devices),
    "disaggregated": (" in prefill and decode pools", disaggregated_devices),
}


def _missing(r: dict[str, Any], m: ModelArch | None, dev: str | None, weights: str | None) -> str:
    """Each piece the planner needs and the row's source does not give (or the catalog lacks)."""
    out = []
    if m is None:
        out.append(f"model `{r.get('model')}` not in the catalog")
    if dev is None:
        out.append(f"device `{r.get('device')}` not in the catalog")
    if weights is None:
        out.append("weight precision not stated")
    if not r.get("output_tokens"):
        out.append("mean output length not stated")
    if not r.get("prompt_tokens"):
        out.append(
            "mean input length not stated (MLPerf OpenOrca subset: not published in any source "
            "found, inputs capped at 1,024 tokens)"
            if str(r["id"]).startswith("mlperf")
            else "mean input length not stated"
        )
    return "; ".join(out)


def _engine(r: dict[str, Any], dev: str | None, weights: str | None) -> str | None:
    """The row's engine where the catalog knows it and its support matrix runs the row's
    weights on the row's device (None otherwise: then each device's default engine)."""
    cat = load_catalog()
    name = r.get("engine")
    if name not in cat.engines or dev is None or weights is None:
        return None
    ok = runtimes(cat, cat.accelerator(dev), weights, row_kv(r, name, weights))
    return name if any(rt.engine == name for rt in ok) else None


def _requests(r: dict[str, Any]) -> list[tuple[int, int]] | None:
    """The (prompt, output) tokens of every request of the row's run, where its source
    publishes them (a file under requests/ copied from the source's result file)."""
    if not r.get("requests"):
        return None
    data = json.loads((HERE / r["requests"]).read_text())
    return list(zip(data["input_lens"], data["output_lens"], strict=True))


def _row(r: dict[str, Any]) -> Row:
    src = r["source"]["title"]
    kind, meas = r["kind"], r["measured"]
    m = _model(r.get("model", ""))
    dev = DEVICES.get(str(r.get("device")))
    weights = WEIGHTS.get(str(r.get("weights")))
    tp = int(r["tensor_parallel"]) if r.get("tensor_parallel") else None
    base = Row(r["id"], kind, src, math.nan, "", None)
    missing = _missing(r, m, dev, weights)
    engine = _engine(r, dev, weights)
    if engine is None and not missing and r.get("engine") in load_catalog().engines:
        missing = f"the support matrix has no row for {r['engine']} running {weights} on {dev}"
    if kind == "disaggregated" and not missing and not meas.get("tokens_per_s_per_gpu"):
        missing = "no whole-system figure: one pool measured alone"
    base.spec = {
        "m": m, "dev": dev, "tp": tp, "pp": r.get("pipeline_parallel"), "weights": weights,
        "devices": r.get("devices"), "engine": engine, "instances": r.get("instances"),
        "max_seqs": r.get("max_num_seqs") or ENGINE_MAX_SEQS.get(engine or ""),
        "kv": row_kv(r, engine, weights) if weights else None,
        "path": tensor_path(dev, weights) if dev and weights else None,
        "ttft_p99": meas.get("ttft_p99_s"), "tpot_p99": meas.get("tpot_p99_s"),
        "prompt": round(r.get("prompt_tokens") or 0), "output": round(r.get("output_tokens") or 0),
        "ttft_limit": r.get("ttft_limit_s"), "tpot_limit": r.get("tpot_limit_s"),
        "per_accelerator": meas["tokens_per_s"] / r["devices"]
        if meas.get("tokens_per_s") and r.get("devices") else None,
        "measured": meas, "concurrency": meas.get("max_concurrency"),
        "demand": (meas.get("tokens_per_s_per_gpu") or 0) * (r.get("devices") or 0),
        "requests": _requests(r),
    }  # fmt: skip
    s = base.spec
    if missing:
        base.why_not = missing
        return base
    assert m is not None and dev is not None and weights is not None
    if kind == "offline" and s["requests"] and meas.get("tokens_per_s"):
        return Row(
            r["id"], kind, src, meas["tokens_per_s"] / r["devices"],
            "output tokens/s per accelerator over the run's requests",
            lambda: run_per_accelerator(s), spec=s,
        )  # fmt: skip
    if kind == "offline" and (meas.get("tokens_per_s") or meas.get("tokens_per_s_per_gpu")):
        per = meas.get("tokens_per_s_per_gpu") or meas["tokens_per_s"] / r["devices"]
        return Row(
            r["id"], kind, src, float(per), "output tokens/s per accelerator",
            lambda: offline_per_accelerator(s), spec=s,
        )  # fmt: skip
    if kind == "server" and s["ttft_limit"] and s["tpot_limit"] and "max_concurrency" not in meas:
        return Row(
            r["id"], kind, src, meas["tokens_per_s"] / r["devices"],
            "output tokens/s per accelerator within p99 limits",
            lambda: server_per_accelerator(s), spec=s,
        )  # fmt: skip
    if kind in SIZING and "tokens_per_s_per_gpu" in meas and s["ttft_limit"]:
        demand = meas["tokens_per_s_per_gpu"] * r["devices"]
        what, metric = SIZING[kind]
        return Row(
            r["id"], kind, src, float(r["devices"]),
            f"GPUs{what} for {demand:,.0f} output tokens/s within its targets",
            lambda: metric(s, demand), spec=s,
        )  # fmt: skip
    if tp is None:
        base.why_not = "tensor parallelism not stated"
        return base
    prompt, output = s["prompt"], s["output"]
    if kind == "prefill" and "ttft_s" in meas:
        return Row(
            r["id"], kind, src, meas["ttft_s"], "TTFT s",
            lambda: _iteration(m, dev, tp, weights, s["kv"], 1, prompt, 1, None, engine)(0, prompt),
            spec=s,
        )  # fmt: skip
    if kind == "server" and "max_concurrency" in meas and "tokens_per_s" in meas:
        n = int(meas["max_concurrency"])
        return Row(
            r["id"], kind, src, meas["tokens_per_s"], "output tokens/s",
            lambda: n / _mean_iteration(
                _iteration(m, dev, tp, weights, s["kv"], n, prompt, output, None, engine),
                n, prompt, output,
            ), spec=s,
        )  # fmt: skip
    if kind == "decode" and "tpot_s" in meas:
        return Row(
            r["id"], kind, src, meas["tpot_s"], "TPOT s",
            lambda: _iteration(m, dev, tp, weights, s["kv"], 1, prompt, output, None, engine)(1, 0),
            spec=s,
        )  # fmt: skip
    base.why_not = "no metric for this row type and measurement"
    return base


def tensor_path(dev: str, weights: str) -> str | None:
    """Which fitted factor a datacenter device's batched matmuls use for `weights`: that of its
    16-, 8- or 4-bit tensor path (None for other classes, whose factors are not fitted here)."""
    acc = load_catalog().accelerator(dev)
    if acc.device_class != "datacenter":
        return None
    prec = devices_module._precision(acc, weight_format(weights))
    path = (
        "4-bit" if prec == "fp4" else "8-bit" if prec in devices_module.LOW_PRECISION else "16-bit"
    )
    return f"{path} {acc.vendor}" if acc.vendor in STACK_VENDORS else path


PATHS = ("16-bit", "8-bit", "4-bit")
# Vendors whose serving stack is fitted on its own rows (catalog serving.yaml
# `vendor_batched_compute`: the ratio of the vendor's fitted figure to the class's on that path).
STACK_VENDORS = ("amd",)
ALL_PATHS = PATHS + tuple(f"{p} {v}" for v in STACK_VENDORS for p in PATHS)


def predictions(rows: list[Row]) -> dict[str, list[float]]:
    """Each expressible row's planner figure at every grid value of the factor its tensor path
    uses (a row's figure depends on that factor alone: one device type, one weight format)."""
    out: dict[str, list[float]] = {r.id: [] for r in rows if r.predict}
    real = devices_module.batched_compute_for

    def trial(v: float) -> Callable[..., float]:
        def fn(cls: str, fallback: float, **path: bool) -> float:
            return real(cls, fallback, **path) if cls != "datacenter" else v  # type: ignore[arg-type]

        return fn

    real_scale = devices_module.vendor_batched_scale
    devices_module.vendor_batched_scale = lambda vendor: 1.0  # the grid value is the figure
    try:
        for v in GRID.tolist():
            devices_module.batched_compute_for = trial(v)
            tables_module._TABLES.clear()
            for r in rows:
                if r.predict:
                    out[r.id].append(float(r.predict()))
    finally:
        devices_module.batched_compute_for = real
        devices_module.vendor_batched_scale = real_scale
        tables_module._TABLES.clear()
    return out


def _loss(rows: list[Row], pred: dict[str, list[float]], i: int) -> float:
    return sum(abs(math.log(pred[r.id][i] / r.measured)) for r in rows)


def fit(rows: list[Row], pred: dict[str, list[float]]) -> dict[str, int]:
    """Grid index of each tensor path's factor: the value minimizing the summed |log(planner /
    measured)| over the rows on that path (the loss separates by path, so each factor is fitted
    on its own rows). A path with no rows takes the value fitted on all rows pooled."""

    def best(on: list[Row]) -> int:
        return min(range(len(GRID)), key=lambda i: (round(_loss(on, pred, i), 9), i))

    fitted = [r for r in rows if r.spec.get("path") and dense_path(r)]
    pooled = best(fitted)
    out = {}
    for path in ALL_PATHS:  # a vendor's path is fitted only where it has rows
        on = [r for r in fitted if r.spec["path"] == path]
        if on or path in PATHS:
            out[path] = best(on) if on else pooled
    return out


def dense_path(r: Row) -> bool:
    """Whether the row's matrix products are the dense ones the fitted factors describe: a
    mixture-of-experts model's expert products run as grouped GEMMs over the tokens each expert
    receives (vLLM's fused_moe kernels, SGLang's and TensorRT-LLM's MoE backends), another kernel
    path. Its rows are scored at the factors the dense rows give and do not enter the fit: one
    source's MoE rows (GPUStack's) cannot set a figure for every MoE plan."""
    m = r.spec.get("m")
    return m is None or m.moe is None


def factor_for(fitted: dict[str, int], path: str) -> int:
    """The fitted grid index for a tensor path: the vendor's own where it was fitted, else its
    class's path ("16-bit amd" falls back to "16-bit")."""
    return fitted.get(path, fitted[path.split(" ")[0]])


def score(rows: list[Row], pred: dict[str, list[float]]) -> list[tuple[Row, dict[str, int], float]]:
    """(row, factors fitted without its source, deviation) for every expressible row."""
    out = []
    usable = [r for r in rows if r.predict]
    for src in sorted({r.source for r in usable}):
        idx = fit([r for r in usable if r.source != src], pred)
        for r in usable:
            if r.source == src:
                path = r.spec.get("path")
                i = factor_for(idx, path) if path else 0
                out.append((r, idx, pred[r.id][i] / r.measured - 1))
    return out


def order_check(
    rows: list[Row], pred: dict[str, list[float]], scored: list[tuple[Row, dict[str, int], float]]
) -> list[str]:
    """Markdown lines: per MLPerf round, the measured order of accelerators on the offline rows
    (output tokens/s per accelerator) beside the planner's, with the factors fitted on every row
    (what the catalog ships) and with those fitted without the round."""
    shipped = fit([r for r in rows if r.predict], pred)
    loso = {r.id: r.measured * (1 + e) for r, _, e in scored}
    rounds: dict[str, list[Row]] = {}
    for r in rows:
        if r.predict and r.kind == "offline" and r.id.startswith("mlperf"):
            rounds.setdefault(r.id.split("-llama2")[0], []).append(r)

    def ranked(rs: list[Row], fig: dict[str, float]) -> tuple[list[str], str]:
        order = sorted(rs, key=lambda r: -fig[r.id])
        return [r.id for r in order], " > ".join(f"{r.spec['dev']} {fig[r.id]:,.0f}" for r in order)

    lines = [
        "| round | measured | planner (shipped factors) | planner (fitted without the round) |",
        "|---|---|---|---|",
    ]
    kept_all = True
    for rnd, rs in sorted(rounds.items()):
        if len(rs) < 2:
            continue
        want, measured = ranked(rs, {r.id: r.measured for r in rs})
        cells = [measured]
        for fig in (
            {r.id: pred[r.id][factor_for(shipped, r.spec["path"])] for r in rs},
            {r.id: loso[r.id] for r in rs},
        ):
            got, text = ranked(rs, fig)
            kept_all &= got == want
            cells.append(("kept: " if got == want else "**not kept**: ") + text)
        lines.append(f"| {rnd} | " + " | ".join(cells) + " |")
    lines += ["", "Measured order kept in every round: " + ("yes." if kept_all else "no.")]
    return lines


def server_points(rows: list[Row]) -> list[str]:
    """Markdown lines: each scored MLPerf Server row's operating point at the factors the catalog
    ships (the p99 figures the scenario limits, measured beside modelled)."""
    lines = [
        "| row | tokens/s per accelerator, measured / planner | p99 TTFT s, measured / planner "
        "| p99 TPOT ms, measured / planner (mean iteration) | planner's replica |",
        "|---|---:|---:|---:|---|",
    ]
    for r in rows:
        if not (r.predict and r.kind == "server" and r.spec.get("ttft_limit")):
            continue
        s = r.spec
        pt = _best_point(s, _server_ok(s))
        if pt.latency is None:
            continue
        ttft, tpot = s.get("ttft_p99"), s.get("tpot_p99")
        lines.append(
            f"| {r.id} | {r.measured:,.0f} / {pt.per_accelerator:,.0f} | "
            f"{ttft if ttft is not None else 'n/a'} / {pt.latency.ttft_s[99]:.3f} | "
            f"{tpot * 1e3 if tpot is not None else 'n/a':.4g} / {pt.latency.tpot_s * 1e3:.1f} | "
            f"TP{pt.tp}, {pt.batch} sequences |"
        )
    return lines


@dataclass
class Figures:
    """A row's operating point, the planner's (shipped factors) or its source's: the replica,
    requests/s per replica, mean first token (s), time per output token (s) and accelerators.
    None where the row type or the source has no such figure."""

    replica: str = ""
    rate: float | None = None
    ttft: float | None = None
    tpot: float | None = None
    accelerators: float | None = None
    per_replica: int = 0  # accelerators in one replica


def _offline_point(s: dict[str, Any]) -> Figures:
    """The best offline design at full load: every slot busy, so a first token waits for the
    whole queue (no figure)."""
    ds = _designs(s)
    if not ds:
        return Figures()
    d = max(ds, key=lambda d: d.tokens_per_s / _accelerators(d))
    it = _iteration(
        s["m"], s["dev"], d.stages[0].tp, s["weights"], s["kv"], d.batch, s["prompt"],
        s["output"], tuple(st.layers for st in d.stages), s["engine"],
    )  # fmt: skip
    tpot = _mean_iteration(it, d.batch, s["prompt"], s["output"])
    return Figures(
        _replica(d.stages[0].tp, len(d.stages), d.batch),
        d.tokens_per_s / s["output"],
        None,
        tpot,
        float(s["devices"]),
        _accelerators(d),
    )


def _run_point(s: dict[str, Any]) -> Figures:
    """A finite run's best design: its requests/s per replica over the whole run and the mean
    time per output token of its requests."""
    run = best_run(s)
    if run is None:
        return Figures()
    d, n = run.design, _replicas(s, run.design)
    seconds = sum(o for _, o in s["requests"]) / (run.per_accelerator * n * _accelerators(d))
    return Figures(
        _replica(d.stages[0].tp, len(d.stages), d.batch),
        len(s["requests"]) / seconds / n,
        None,
        run.tpot,
        float(n * _accelerators(d)),
        _accelerators(d),
    )


def _replica(tp: int, stages: int, batch: int) -> str:
    return f"TP{tp}" + (f" x {stages} stages" if stages > 1 else "") + f", {batch} sequences"


def _loaded_point(s: dict[str, Any], ok: Callable[[LoadedLatency], bool]) -> Figures:
    pt = _best_point(s, ok)
    if pt.latency is None:
        return Figures()
    return Figures(
        _replica(pt.tp, pt.stages, pt.batch),
        pt.rate,
        pt.latency.ttft_mean_s,
        pt.latency.tpot_s,
        s["demand"] / pt.per_accelerator if s["demand"] else float(s["devices"]),
        pt.tp * pt.stages,
    )


def planner_point(r: Row) -> Figures:
    """The planner's operating point for a scored row, at the factors the catalog ships."""
    s = r.spec
    prompt, output, tp = s["prompt"], s["output"], s["tp"]
    if r.kind == "offline" and s["requests"]:
        return _run_point(s)
    if r.kind == "offline":
        return _offline_point(s)
    if r.kind == "server" and s["ttft_limit"]:
        return _loaded_point(s, _server_ok(s))
    if r.kind == "sizing":
        return _loaded_point(
            {**s, "tp": None},
            lambda lat: lat.ttft_mean_s <= s["ttft_limit"] and lat.tpot_s <= s["tpot_limit"],
        )
    if r.kind == "disaggregated":
        pools = disaggregated_devices(s, s["demand"])
        return Figures("prefill and decode pools", accelerators=pools)
    if r.kind == "prefill":  # one prompt alone, as the row's metric
        it = _iteration(
            s["m"], s["dev"], tp, s["weights"], s["kv"], 1, prompt, 1, None, s["engine"]
        )
        return Figures(_replica(tp, 1, 1), None, it(0, prompt), None, float(s["devices"]), tp)
    n = int(s["concurrency"] or 1)
    it = _iteration(
        s["m"], s["dev"], tp, s["weights"], s["kv"], n, prompt, output, None, s["engine"]
    )
    tpot = _mean_iteration(it, n, prompt, output) if n > 1 else it(1, 0)
    return Figures(_replica(tp, 1, n), n / (output * tpot), None, tpot, float(s["devices"]), tp)


def measured_point(r: Row) -> Figures:
    """The source's figures in the same units: requests/s per replica of the source's layout
    (its tensor-parallel degree, or its one instance) where it states one."""
    s, meas = r.spec, r.spec["measured"]
    each = (
        s["devices"] / s["instances"]
        if s.get("instances")
        else s["tp"] * (s.get("pp") or 1)
        if s["tp"]
        else None
    )
    rate = None
    if each and s["devices"] and r.kind in ("offline", "server"):
        total = meas.get("requests_per_s")
        tokens = meas.get("tokens_per_s") or (meas.get("tokens_per_s_per_gpu") or 0) * s["devices"]
        if total is None and tokens and s["output"]:
            total = tokens / s["output"]
        rate = total * each / s["devices"] if total else None
    return Figures(
        "",
        rate,
        meas.get("ttft_s"),
        meas.get("tpot_s"),
        float(s["devices"]) if s.get("devices") else None,
    )


def _pair(measured: float | None, planner: float | None, scale: float = 1.0) -> str:
    def cell(v: float | None) -> str:
        return "-" if v is None or not math.isfinite(v) else f"{v * scale:,.3g}"

    return f"{cell(measured)} / {cell(planner)}"


def operating_points(rows: list[Row]) -> list[str]:
    """Markdown lines: every scored row's operating point beside its source's figures."""
    lines = [
        "| row | planner's replica | requests/s per replica, measured / planner | mean TTFT s, "
        "measured / planner | TPOT ms, measured / planner | accelerators, measured / planner |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        if not r.predict:
            continue
        got = planner_point(r)
        meas = measured_point(r)
        lines.append(
            f"| {r.id} | {got.replica or '-'} | {_pair(meas.rate, got.rate)} | "
            f"{_pair(meas.ttft, got.ttft)} | {_pair(meas.tpot, got.tpot, 1e3)} | "
            f"{_pair(meas.accelerators, got.accelerators)} |"
        )
    return lines


def catalog_factors() -> dict[str, float]:
    """The datacenter factors catalog serving.yaml ships, by tensor path."""
    sv = load_serving()
    low = sv.batched_compute_low_precision["datacenter"]
    base = {
        "16-bit": sv.batched_compute["datacenter"],
        "8-bit": low,
        "4-bit": sv.batched_compute_fp4.get("datacenter", low),
    }
    out = dict(base)
    for v in STACK_VENDORS:
        scale = sv.vendor_batched_compute.get(v, 1.0)
        out |= {f"{p} {v}": f * scale for p, f in base.items()}
    return out


def _factor_cell(r: Row, idx: dict[str, int]) -> str:
    path = r.spec.get("path")
    if not path:
        return "not fitted (class prior)"
    return f"{path} {GRID[idx.get(path, idx[path.split(' ')[0]])]:.2f}"


def report(rows: list[Row]) -> list[str]:
    """The Markdown block (table, summary, unscored rows, accelerator order)."""
    pred = predictions(rows)
    scored = score(rows, pred)
    lines = [
        "| row | metric | measured | planner | deviation | factor (fitted without the row's "
        "source) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r, idx, err in scored:
        planner = r.measured * (1 + err)
        lines.append(
            f"| {r.id} | {r.metric} | {r.measured:,.4g} | {planner:,.4g} | {err:+.1%} | "
            f"{_factor_cell(r, idx)} |"
        )
    errs = sorted(abs(e) for *_, e in scored)
    mlperf = sorted(abs(e) for r, _, e in scored if r.id.startswith("mlperf"))
    shipped = fit([r for r in rows if r.predict], pred)
    lines += [
        "",
        f"{len(scored)} rows from {len({r.source for r, *_ in scored})} sources, scored "
        f"leave-one-source-out: median |deviation| {statistics.median(errs):.1%}, worst "
        f"{errs[-1]:.1%}; the {len(mlperf)} MLPerf rows: median "
        f"{statistics.median(mlperf):.1%}, worst {mlperf[-1]:.1%}."
        if mlperf
        else "",
        "Fitted on every row: "
        + ", ".join(f"{p} {GRID[i]:.2f}" for p, i in shipped.items())
        + ". Catalog serving.yaml ships "
        + ", ".join(f"{p} {v:.2f}" for p, v in catalog_factors().items())
        + " (a vendor's multiplier applies on all its paths: "
        + ", ".join(
            f"{v} {load_serving().vendor_batched_compute.get(v, 1.0):.2f}" for v in STACK_VENDORS
        )
        + ").",
        "",
        "Not expressible (each missing piece named):",
        "",
    ]
    lines += [f"- {r.id}: {r.why_not}" for r in rows if not r.predict]
    lines += [
        "",
        "Every scored row at the planner's operating point (shipped factors): the replica it "
        "plans, its requests/s, mean first token, time per output token and accelerators, beside "
        "the source's figures where it states them (requests/s per replica of the source's "
        "layout, its tensor-parallel degree or its one instance; output tokens/s / mean output "
        "tokens where it states no request rate). Offline rows have no first-token figure (every "
        "request is queued at the start); first-token and time-per-token rows, no rate.",
        "",
    ]
    lines += operating_points(rows)
    lines += ["", "MLPerf Server rows at the planner's operating point (shipped factors):", ""]
    lines += server_points(rows)
    lines += ["", "Accelerator order on the MLPerf Llama-2-70B offline rows:", ""]
    lines += order_check(rows, pred, scored)
    return lines


def load_raw() -> list[dict[str, Any]]:
    """The rows of published.yaml as written."""
    data = yaml.safe_load((HERE / "published.yaml").read_text(encoding="utf-8"))
    return list(data["rows"])


def load_rows() -> list[Row]:
    return [_row(r) for r in load_raw()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--markdown", action="store_true", help="the block for docs/serving.md")
    args = ap.parse_args()
    lines = report(load_rows())
    if args.markdown:
        lines = [MARK_BEGIN, "", *lines, "", MARK_END]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
