"""Fit the efficiency factors of catalog/efficiency.yaml to the published measurements.

    python calibration/fit.py [--write] [--report calibration/report.md]

Batch-1 decode, per device class: the step time the estimator predicts is linear in four unknowns,

    t = a / eff_bw + n_layers * layer_overhead + step_overhead + n_layers * w * dq / fp32_flops

(a = bytes read per step / peak bandwidth; w = weights per layer; dq applies to weight-only
formats only). The coefficients are read off the project's own `decode_step_seconds` (it is
linear in these factors while decode is memory-bound, which holds at batch 1), every row is
divided by its measured time so the fit minimizes relative error, and a small non-negative least
squares solves it with 0 < eff_bw <= 1 and all overheads >= 0. A weak penalty pulls each factor
toward its prior, so a class with few rows cannot drift to extremes.

Prefill rows give the compute efficiency, training rows the training MFU, per class where rows
exist. Classes without rows keep the priors. Predictions before and after use the estimator's
functions with the factors passed as overrides, so the report shows exactly what the tool does.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from planner.catalog import load_catalog  # noqa: E402
from planner.estimator.architecture import (  # noqa: E402
    head_params,
)
from planner.estimator.devices import DeviceTable, device_table  # noqa: E402
from planner.estimator.efficiency import EfficiencyFile, load_efficiency  # noqa: E402
from planner.estimator.formats import WEIGHT_FORMATS, kv_bytes, weight_format  # noqa: E402
from planner.estimator.perf import (  # noqa: E402
    ROUTED_BYTES_FLOOR,
    decode_step_seconds,
    prefill_seconds,
    training_flops_per_token,
    training_tokens_per_second,
    weight_params_touched_per_layer,
)
from planner.estimator.prefill_path import (  # noqa: E402
    LLAMA_CPP_KERNELS,
    PREFILL_UBATCH_TOKENS,
    on_llama_cpp,
)
from planner.estimator.prompt_time import engine_prefill_seconds  # noqa: E402
from planner.estimator.row_split import row_split_step_seconds  # noqa: E402
from planner.estimator.support import engine_kernels, engine_times  # noqa: E402
from planner.estimator.training_layout import (  # noqa: E402
    layout_from_notes,
    layout_tokens_per_second,
)
from planner.schema.catalog import Accelerator, ModelArch  # noqa: E402
from planner.schema.measurements import Measurement, load_measurements  # noqa: E402

Vec = npt.NDArray[np.float64]
Params = dict[str, dict[str, float]]  # device class (or device id) -> efficiency factors

TABLE = ROOT / "calibration" / "measurements.yaml"
EFFICIENCY = ROOT / "catalog" / "efficiency.yaml"
FITTED_ROWS = ROOT / "calibration" / "fitted_rows.txt"  # the rows the shipped factors saw
CLASSES = ("datacenter", "workstation", "consumer", "unified-memory", "asic")

# The hand-set starting values (the file before any calibration). They are the "before" column
# of the report and the values the fit is pulled toward, so reruns do not drift.
# Time per routed activation element per MoE layer in training, before any fit: a floor, the
# estimator's ROUTED_BYTES_FLOOR (48 bytes, a count of the passes routing makes) at the fastest
# memory in the catalog (B200 and B300 HBM3e, 8 TB/s): 0.006 ns. Routing, load imbalance and
# grouped GEMMs of few tokens each add to it in real runs.
MOE_ROUTED_NS_PRIOR = round(ROUTED_BYTES_FLOOR / 8e12 * 1e9, 4)
# The largest time per routed element the fit may find (about 30x what the runs measured).
MOE_ROUTED_NS_MAX = 5.0
MOE_KEYS = ("moe_routed_ns", "moe_fused_share")
PRIORS: Params = {
    "datacenter": {
        "bandwidth": 0.80,
        "compute": 0.60,
        "training_mfu": 0.40,
        "layer_overhead_us": 15,
        "step_overhead_us": 400,
        "dequant_ops_per_weight": 4,
        "moe_routed_ns": MOE_ROUTED_NS_PRIOR,
        "moe_fused_share": 1.0,
    },
    "workstation": {
        "bandwidth": 0.80,
        "compute": 0.55,
        "training_mfu": 0.35,
        "layer_overhead_us": 15,
        "step_overhead_us": 400,
        "dequant_ops_per_weight": 4,
        "moe_routed_ns": MOE_ROUTED_NS_PRIOR,
        "moe_fused_share": 1.0,
    },
    "consumer": {
        "bandwidth": 0.80,
        "compute": 0.55,
        "training_mfu": 0.35,
        "layer_overhead_us": 15,
        "step_overhead_us": 400,
        "dequant_ops_per_weight": 4,
        "moe_routed_ns": MOE_ROUTED_NS_PRIOR,
        "moe_fused_share": 1.0,
    },
    "unified-memory": {
        "bandwidth": 0.75,
        "compute": 0.50,
        "training_mfu": 0.30,
        "layer_overhead_us": 30,
        "step_overhead_us": 800,
        "dequant_ops_per_weight": 4,
        "moe_routed_ns": MOE_ROUTED_NS_PRIOR,
        "moe_fused_share": 1.0,
    },
    "asic": {
        "bandwidth": 0.65,
        "compute": 0.50,
        "training_mfu": 0.35,
        "layer_overhead_us": 20,
        "step_overhead_us": 500,
        "dequant_ops_per_weight": 4,
        "moe_routed_ns": MOE_ROUTED_NS_PRIOR,
        "moe_fused_share": 1.0,
    },
}

# Decode unknowns x = (1/eff_bw, layer_overhead_us, step_overhead_us, dequant_ops_per_weight).
DECODE_KEYS = ("bandwidth", "layer_overhead_us", "step_overhead_us", "dequant_ops_per_weight")
LOWER = np.array([1.0, 0.0, 0.0, 0.0])
# The dequantization term is nearly collinear with the bandwidth term (both scale with the weights
# read; only the fp32/bandwidth ratio of the device tells them apart), so it stays at its prior
# (about 4 vector ops per weight: unpack, scale, convert; llama.cpp and Marlin kernels). Fitting it
# too was tried and gave a worse leave-one-device-out error.
FIT_DEQUANT = False
# Prior penalty: residual = (x - prior) / scale * sqrt(WEIGHT). With WEIGHT = 0.005, moving a
# factor by one `scale` costs as much as one row being 7 % off: enough to keep a class with a
# few rows near the prior, too weak to override a class with many. Chosen among 0.005, 0.05 and
# 0.5 by the leave-one-device-out error.
PRIOR_SCALE = np.array([0.5, 25.0, 500.0, 4.0])
PRIOR_WEIGHT = 0.005
NAIVE_EFF = 0.7  # the plain "0.7 x bandwidth / model bytes" rule


# ------------------------------------------------------------------------------------------------
# Rows
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Row:
    meas: Measurement
    model: ModelArch
    device: Accelerator
    context: float  # mean tokens in the KV cache while decoding (prompt length for prefill)

    @property
    def cls(self) -> str:
        return self.device.device_class


def mean_context(r: Measurement) -> float:
    """Average KV-cache length over the generated tokens.

    The table's `context` is the end of a llama-bench `tgN` run (started from an empty cache), the
    depth D of a `tgN @ dD` run, the number of generated tokens of a `llama.cpp main` run (its
    prompt, "N-token prompt", and its context window, "n_ctx N", in the notes where the source
    prints them: main_mean_context), or the input length of a serving run (output length in the
    notes).
    """
    ctx = float(r.context or 0)
    notes = r.notes or ""
    tg = re.search(r"\btg(\d+)", notes)
    if "@ d" in notes and tg:
        return ctx + int(tg.group(1)) / 2
    if "generated tokens" in notes:
        prompt = re.search(r"(\d+)-token prompt", notes)
        window = re.search(r"\bn_ctx (\d+)", notes)
        first = int(prompt.group(1)) if prompt else 400  # else "a prompt of a few hundred tokens"
        if window:
            return main_mean_context(first, int(ctx), int(window.group(1)))
        return first + ctx / 2
    if tg:
        return ctx / 2
    out = re.search(r"output (\d+)", notes) or re.search(r"\bTG (\d+)", notes)
    if out:
        return ctx + int(out.group(1)) / 2
    return ctx


def main_mean_context(prompt: int, generated: int, window: int) -> float:
    """Average KV-cache length over the `generated` tokens of a `llama.cpp main` run whose
    context holds `window` tokens (n_ctx). When the next token would not fit, main drops half of
    the cache after its first n_keep + 1 tokens and goes on (examples/main/main.cpp of 2023,
    "infinite text generation via context swapping": n_discard = (n_past - n_keep - 1) / 2,
    n_keep 0 by default), so the cache never holds more than `window` tokens. The first token
    comes from the prompt's own pass; each of the other generated - 1 evaluations reads the
    cache so far plus itself (n_past + 1)."""
    past, total = prompt, 0.0
    for _ in range(max(generated - 1, 1)):
        if past + 1 > window:
            past -= (past - 1) // 2
        total += past + 1
        past += 1
    return total / max(generated - 1, 1)


Skipped = list[tuple[Measurement, str]]  # a row left out of scoring, and why


def load_rows() -> tuple[list[Row], Skipped]:
    """Rows whose model, device and formats the catalog knows; the rest, with the reason."""
    cat = load_catalog()
    table = load_measurements(TABLE)
    rows: list[Row] = []
    skipped: Skipped = []
    for r in table.measurements:
        if r.device not in cat.accelerators:
            skipped.append((r, f"device `{r.device}` is not in the catalog"))
        elif r.model not in cat.models:
            skipped.append((r, f"model `{r.model}` is not in the catalog"))
        elif r.weights not in WEIGHT_FORMATS:
            skipped.append((r, f"weight format `{r.weights}` is not known to the estimator"))
        else:
            rows.append(
                Row(r, cat.models[r.model or ""], cat.accelerators[r.device], mean_context(r))
            )
    return rows, skipped


# A prefill row whose figure is the first prompt-sized evaluation of a fresh process says so
# in its notes. llama.cpp's `main` of late 2023 timed the prompt (llama_print_timings'
# "prompt eval time") right after a warm-up of 2 tokens, BOS and EOS
# (llama_init_from_gpt_params in common/common.cpp), so its one timed prompt was the first
# batch of that size: the GEMMs and buffers of a 494-token batch met for the first time.
# llama-bench of the same months warms up with min(n_batch, n_prompt, 32) tokens and reports
# the mean of 5 repetitions (examples/llama-bench/llama-bench.cpp, `// warmup run`, `reps`).
# On the same RTX 3090 and 4090 the FP16 Llama 2 7B prompt ran at 3,075 and 7,349 tokens/s in
# main (a 494-token prompt, Dec 2023) and 4,185 and 11,048 in llama-bench pp512 (Jan 2024,
# llama.cpp PR #4766): about 43 ms and 23 ms more per prompt than 494/512 of llama-bench's time.
FIRST_EVALUATION = re.compile(r"\bfirst prompt evaluation of its process\b")


def unscorable(r: Row) -> str | None:
    """Why a row that the catalog can describe is still not scored, or None."""
    if r.meas.metric == "peak_memory_gb":
        return "peak memory: no efficiency factor is fitted or scored on it"
    if r.meas.metric == "prefill_tokens_per_s" and not on_llama_cpp(kernels_of(r.meas.engine)):
        return (
            f"prefill under {r.meas.engine}: the single-prompt compute factor is fitted on "
            "llama.cpp's kernels, and other engines prefill at the serving factors"
        )
    if r.meas.metric == "prefill_tokens_per_s" and FIRST_EVALUATION.search(r.meas.notes or ""):
        return (
            "prefill timed as the first prompt evaluation of its process: llama.cpp's warm-up "
            "(common.cpp) decodes 2 tokens, so the timed prompt pays the one-time costs of the "
            "first prompt-sized batch (new GEMM shapes, buffer growth) that llama-bench's "
            "32-token warm-up and mean of 5 repetitions leave out and the planner does not plan"
        )
    if r.meas.metric == "decode_tokens_per_s" and r.meas.batch is None:
        return (
            "saturated server whose batch is not published: the throughput depends on the batch "
            "the scheduler chose, so the estimator cannot be asked the same question"
        )
    return None


def row_key(m: Measurement) -> str:
    """One row's identity in the list of rows a shipped fit was made on."""
    fields = (m.source, m.model, m.device, m.devices, m.weights, m.kv, m.metric, m.batch)
    return "|".join(str(x) for x in (*fields, m.context, m.value))


def fitted_keys() -> set[str] | None:
    """Rows the shipped factors were fitted on (None before any list was written)."""
    if not FITTED_ROWS.is_file():
        return None
    return set(shipped_row_keys())


def shipped_row_keys() -> list[str]:
    """The keys of calibration/fitted_rows.txt in the file's order (none without the file)."""
    if not FITTED_ROWS.is_file():
        return []
    return [ln for ln in FITTED_ROWS.read_text().splitlines() if ln and not ln.startswith("#")]


def leave_one_source_out(rows: Sequence[Row]) -> dict[Row, float]:
    """Every row predicted by factors fitted without any row of its source: one refit per
    source, over every fitted category at once (decode, prefill, training), so a source never
    informs its own prediction in any of them."""
    out: dict[Row, float] = {}
    for src in sorted({r.meas.source or "" for r in rows}):
        params = fit_all([r for r in rows if (r.meas.source or "") != src])
        for r in rows:
            if (r.meas.source or "") == src:
                out[r] = predict(r, params)
    return out


def is_decode_b1(r: Row) -> bool:
    m = r.meas
    return m.metric == "decode_tokens_per_s" and m.batch == 1 and m.devices == 1


def is_layer_split(r: Row) -> bool:
    """llama.cpp over several GPUs at batch 1: the layers split (one GPU works at a time), or,
    where the notes say so, every matrix split by rows (is_row_split)."""
    m = r.meas
    return (
        m.metric == "decode_tokens_per_s"
        and m.batch == 1
        and m.devices > 1
        and m.engine is not None
        and kernels_of(m.engine) in LLAMA_CPP_KERNELS
    )


# A llama.cpp row whose notes say its GPUs split every weight matrix by rows (builds before
# llama.cpp PR #4766, January 2024, had no other multi-GPU mode; planner/estimator/row_split.py),
# and whether its GPUs had peer access ("no peer access": copies staged through host memory).
ROW_SPLIT = re.compile(r"\brow split\b")
NO_PEER_ACCESS = re.compile(r"\bno peer access\b")


def is_row_split(r: Row) -> bool:
    return is_layer_split(r) and ROW_SPLIT.search(r.meas.notes or "") is not None


def is_decode_batched(r: Row) -> bool:
    m = r.meas
    return (
        m.metric == "decode_tokens_per_s"
        and m.batch is not None
        and not is_decode_b1(r)
        and not is_layer_split(r)
    )


def is_prefill(r: Row) -> bool:
    return r.meas.metric == "prefill_tokens_per_s" and r.meas.devices == 1


def is_training(r: Row) -> bool:
    return r.meas.metric in ("train_mfu", "train_tokens_per_s_per_device")


# ------------------------------------------------------------------------------------------------
# Predictions, all through the estimator's own functions
# ------------------------------------------------------------------------------------------------


# A row whose figure is output tokens over end-to-end request time (vLLM's benchmark_latency.py):
# the notes give the output length and say the prompt's prefill is included.
END_TO_END = re.compile(
    r"output (?P<output>\d+).*end-to-end latency \(includes the (?P<prompt>\d+)-token prefill\)"
)


# Engine releases whose fixed times are fitted apart from the device classes' (which are then
# fitted on current releases): their rows name them as `engine`, and the fit gives each a time
# per layer and per step of every forward pass on top of the class's (the efficiency file's
# `engines`; planner.estimator.support.engine_times adds them where a workload names the engine).
ENGINE_FIT = ("llama.cpp-2024",)


def kernels_of(engine: str | None) -> str:
    """The kernel family a row's engine runs (the catalog's Engine.kernels; a row naming none
    is a current llama.cpp build's)."""
    return engine_kernels(load_catalog(), engine)


ENGINE_PRIOR = {"layer_overhead_us": 0.0, "step_overhead_us": 0.0}
ENGINE_SCALE = np.array([25.0, 500.0])  # the prior's pull, as the classes' overheads


def engine_key(engine: str) -> str:
    return f"engine:{engine}"


def engines_at_prior() -> Params:
    """Every fitted engine release at its prior (no time of its own)."""
    return {engine_key(e): dict(ENGINE_PRIOR) for e in ENGINE_FIT}


def engine_seconds(r: Row, params: Params) -> float:
    """Seconds the row's engine release adds to one forward pass of the whole model: the fitted
    figures in `params` where it has them, else the shipped ones (what the tool adds)."""
    fixed = params.get(engine_key(r.meas.engine or ""))
    if fixed is not None:
        layer_s = fixed["layer_overhead_us"] * 1e-6
        step_s = fixed["step_overhead_us"] * 1e-6
    else:
        t = engine_times(load_catalog(), r.meas.engine)
        layer_s, step_s = t["engine_layer_s"], t["engine_step_s"]
    return r.model.num_layers * layer_s + step_s


def engine_table(r: Row, params: Params) -> DeviceTable:
    """The row's device under the factors `params`, as the planner builds it from an efficiency
    file holding them. `compute` there is llama.cpp's single-prompt factor (prefill_path), and
    an engine on the serving grid charges its products at catalog serving.yaml's batched
    figures (kernel_rates.matmul_flops); device_table takes a `compute` override for a user's
    own figure and gives it to the serving grid too, so such a row's table is built without
    it."""
    if on_llama_cpp(kernels_of(r.meas.engine)):
        return device_table([r.device], params)
    own = {k: {f: v for f, v in fac.items() if f != "compute"} for k, fac in params.items()}
    return device_table([r.device], own)


def decode_tps(r: Row, params: Params) -> float:
    m = r.meas
    dev = engine_table(r, params)
    batch = float(m.batch or 1)
    # llama.cpp's layer split runs one GPU at a time: the step is that of one device holding
    # every layer (link hops are negligible at batch 1). Its row split shares every weight
    # matrix and pays a host synchronization per product (row_split). Other multi-device rows
    # are tensor parallel.
    tp = 1 if is_layer_split(r) else m.devices
    fmt = weight_format(m.weights or "")
    kernels = kernels_of(m.engine)
    kv = kv_bytes(m.kv or "fp16")
    if is_row_split(r):
        peer = NO_PEER_ACCESS.search(m.notes or "") is None
        t = row_split_step_seconds(
            r.model, fmt, kv, dev, batch=batch, context=r.context, devices=m.devices,
            kernels=kernels, peer_access=peer,
        )  # fmt: skip
    else:
        t = decode_step_seconds(
            r.model, fmt, kv, dev, batch=batch, context=r.context, tp=tp, kernels=kernels
        )
    step = float(t[0]) + engine_seconds(r, params)
    e2e = END_TO_END.search(m.notes or "")
    if e2e is None:
        return batch / step
    # Output tokens over the whole request: the prompts' prefill on the engine's kernels
    # (llama.cpp's, or the serving grid's), which samples each sequence's first output token,
    # then one step for each of the other out - 1 (vLLM's own benchmark counts them so:
    # benchmark_serving.py's TPOT is (latency - TTFT) / (output_len - 1)).
    out = int(e2e.group("output"))
    first = engine_prefill_seconds(
        r.model, fmt, kv_bytes(m.kv or "fp16"), dev, prompt=int(e2e.group("prompt")), tp=tp,
        kernels=kernels, prompts=batch,
    )  # fmt: skip
    return batch * out / (float(first[0]) + (out - 1) * step)


# A prefill row run with another llama.cpp micro-batch than the default says so in its notes
# ("n_ubatch 2048", "ubatch 512"): each micro-batch reads the weights once.
UBATCH = re.compile(r"\bn?_?ubatch (\d+)")


def prefill_tps(r: Row, params: Params) -> float:
    m = r.meas
    dev = device_table([r.device], params)
    batch = float(m.batch or 1)
    prompt = float(m.context or 512)
    fmt = weight_format(m.weights or "")
    # Only llama.cpp's prompt processing is timed on its kernels (unscorable skips the rest).
    assert on_llama_cpp(kernels_of(m.engine)), f"prefill row under {m.engine} on llama.cpp's path"
    ub = UBATCH.search(m.notes or "")
    t = prefill_seconds(
        r.model,
        fmt,
        dev,
        batch=batch,
        prompt=prompt,
        kernels=kernels_of(m.engine),
        ubatch=float(ub.group(1)) if ub else PREFILL_UBATCH_TOKENS,
    )
    return batch * prompt / (float(t[0]) + engine_seconds(r, params))


def training_setup(r: Row) -> tuple[str, str]:
    """(method, recompute) from the row's notes and weights."""
    notes = r.meas.notes or ""
    method = "qlora" if "QLoRA" in notes else "lora" if "LoRA" in notes else "full"
    if "no activation checkpointing" in notes:
        recompute = "none"
    elif "selective op activation checkpointing" in notes:
        recompute = "op"  # torchtitan's per-op policy (perf.RECOMPUTED_FORWARDS)
    elif "full activation checkpointing" in notes or (
        re.search(r"\bactivation checkpointing", notes) and "selective" not in notes
    ):
        recompute = "full"
    else:
        recompute = "selective"
    return method, recompute


def network_bytes_s(device: Accelerator) -> float:
    """Scale-out bandwidth per device of the servers that hold `device` (nodes.yaml: the DGX and
    HGX H100/B200 servers and the GB200 NVL72 rack carry one ConnectX-7 NDR 400 Gb/s port per
    GPU, 50 GB/s): the first catalog node accepting the device with NICs listed, else NDR's."""
    cat = load_catalog()
    for node in cat.nodes.values():
        if device.id in node.accepts_devices and node.nics:
            ports = sum(n.count * cat.link(n.link).bandwidth_gb_s for n in node.nics)
            return ports * 1e9 / node.slots
    return cat.link("ib-ndr").bandwidth_gb_s * 1e9


def training_value(r: Row, params: Params) -> float:
    """What the estimator says for this row: tokens/s/device, or the MFU the source would report.

    The estimator's tokens/s is peak x training_mfu / FLOPs per token, with recomputation counted
    in the FLOPs. A source's MFU counts model FLOPs only, so the MFU the estimator implies is
    training_mfu x (FLOPs without recomputation) / (FLOPs with it). A row whose notes state its
    parallel layout (TP, PP, VP, CP, EP, GBS, DeepEP, all-to-all overlap) is run at that layout
    (planner.estimator.training_layout: the tensor-parallel all-reduces, the expert-parallel
    all-to-all over the servers' fabric and network, the pipeline bubble), so the MFU fitted is
    the devices' own, and the planner's jobs charge their layouts' costs on top of it as these
    rows do. A run whose notes name DeepEP routes through its fused dispatcher
    (perf.moe_routing_seconds_per_token).
    """
    m = r.meas
    method, recompute = training_setup(r)
    seq = int(m.context or 2048)
    fmt = weight_format("bf16" if m.weights == "nf4" else m.weights or "")
    dev = device_table([r.device], params)
    layout = layout_from_notes(m.notes or "", m.devices)
    base = training_tokens_per_second(
        r.model,
        dev,
        seq_len=seq,
        method=method,
        recompute=recompute,
        precision_fmt=fmt,
        fused_dispatch=layout.node_dedup,
    )
    net = network_bytes_s(r.device)
    tps = float(
        layout_tokens_per_second(
            base, r.model, dev, layout, seq_len=seq, recompute=recompute, network_bytes_s=net
        )[0]
    )
    if m.metric == "train_tokens_per_s_per_device":
        return tps
    model_flops = training_flops_per_token(r.model, seq, method, "none")
    return tps * model_flops / float(dev.peak_flops(fmt)[0])


def predict(r: Row, params: Params) -> float:
    if r.meas.metric == "decode_tokens_per_s":
        return decode_tps(r, params)
    if r.meas.metric == "prefill_tokens_per_s":
        return prefill_tps(r, params)
    return training_value(r, params)


def naive_tps(r: Row) -> float:
    """0.7 x peak bandwidth / bytes of weights read per token (active experts only for MoE)."""
    m, fmt = r.model, weight_format(r.meas.weights or "")
    block = float(weight_params_touched_per_layer(m, 1.0)) * m.num_layers * fmt.bits_per_weight / 8
    head = head_params(m) * fmt.embedding_bits / 8
    return NAIVE_EFF * r.device.memory.bandwidth_gb_s * 1e9 / (block + head)


# ------------------------------------------------------------------------------------------------
# Fitting
# ------------------------------------------------------------------------------------------------


def nnls(a: Vec, b: Vec, max_iter: int = 200) -> Vec:
    """min ||a x - b|| subject to x >= 0 (Lawson and Hanson 1974, active set)."""
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 1e-12 * max(1.0, float(np.abs(a).max()))
    for _ in range(max_iter):
        w = a.T @ (b - a @ x)
        if passive.all() or float(np.max(np.where(passive, -np.inf, w))) <= tol:
            break
        passive[int(np.argmax(np.where(passive, -np.inf, w)))] = True
        while True:
            s = np.zeros(n)
            s[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if np.all(s[passive] > 0):
                x = s
                break
            neg = passive & (s <= 0)
            alpha = float(np.min(x[neg] / (x[neg] - s[neg])))
            x = x + alpha * (s - x)
            passive &= x > tol
            x[~passive] = 0.0
    return x


def _unit_factors(base: dict[str, float]) -> dict[str, float]:
    """`base` with full bandwidth and no overheads: the decode fit's unit point."""
    unit = {"bandwidth": 1.0, "layer_overhead_us": 0.0, "step_overhead_us": 0.0}
    return {**base, **unit, "dequant_ops_per_weight": 0.0}


def kv_fixed_seconds(r: Row, base: dict[str, float]) -> float:
    """Seconds of a row's step spent reading its KV cache under llama.cpp's kernel families,
    whose attention reads it at a fixed share of the peak (decode_reads.kv_read_seconds_per_byte), a
    time the class's bandwidth factor does not scale, so the decode fit takes it as known; 0
    under other engines, whose cache is read at that factor like the weights."""
    if not r.meas.batch or not on_llama_cpp(kernels_of(r.meas.engine)):
        return 0.0
    params = {r.cls: _unit_factors(base), **engines_at_prior()}
    empty = Row(r.meas, r.model, r.device, 0.0)
    return r.meas.batch / decode_tps(r, params) - r.meas.batch / decode_tps(empty, params)


def decode_design(r: Row, base: dict[str, float]) -> Vec:
    """Coefficients of (1/eff_bw, layer_us, step_us, dq) in the predicted step time, read off
    decode_step_seconds by unit steps (exact: the step is linear in them at batch 1), without
    an engine release's own fixed time (engine_seconds, fitted apart) or the KV reads of
    llama.cpp's attention at its own share of the peak (kv_fixed_seconds, known)."""
    zero = _unit_factors(base)
    engines = engines_at_prior()

    def step(**kw: float) -> float:
        if not r.meas.batch:
            return 0.0
        return r.meas.batch / decode_tps(r, {r.cls: {**zero, **kw}, **engines})

    t0 = step()
    return np.array(
        [
            t0 - kv_fixed_seconds(r, base),
            step(layer_overhead_us=1.0) - t0,
            step(step_overhead_us=1.0) - t0,
            step(dequant_ops_per_weight=1.0) - t0,
        ]
    )


def fit_decode_class(
    rows: Sequence[Row],
    prior: dict[str, float],
    current: dict[str, float],
    known: Vec | None = None,
) -> dict[str, float]:
    """Relative-error least squares with a weak pull toward the prior; bounds via NNLS.
    `current` supplies the factors not fitted here (compute), which the design rows use;
    `known`, per row, seconds of the step fitted elsewhere (an engine release's own time); the
    KV reads of llama.cpp's attention at its own share of the peak (kv_fixed_seconds) are added
    to it."""
    p = np.array(
        [
            1.0 / prior["bandwidth"],
            prior["layer_overhead_us"],
            prior["step_overhead_us"],
            prior["dequant_ops_per_weight"],
        ]
    )
    if not rows:
        return {k: prior[k] for k in DECODE_KEYS}
    design = np.array([decode_design(r, current) for r in rows])
    t_obs = np.array([1.0 / r.meas.value for r in rows])  # batch 1: seconds per token
    a = design / t_obs[:, None]
    fixed = np.array([kv_fixed_seconds(r, current) for r in rows])
    fixed = fixed + (0.0 if known is None else known)
    b = 1.0 - a @ LOWER - fixed / t_obs
    free = np.array([True, True, True, FIT_DEQUANT])
    b = b - a[:, ~free] @ (p - LOWER)[~free]  # fixed terms move to the right-hand side
    reg = np.diag(np.sqrt(PRIOR_WEIGHT) / PRIOR_SCALE[free])
    a_all = np.vstack([a[:, free], reg])
    b_all = np.concatenate([b, reg @ (p - LOWER)[free]])
    x = p.copy()
    x[free] = nnls(a_all, b_all) + LOWER[free]
    return {
        "bandwidth": round(float(1.0 / x[0]), 3),
        "layer_overhead_us": round(float(x[1]), 1),
        "step_overhead_us": round(float(x[2])),
        "dequant_ops_per_weight": round(float(x[3]), 2),
    }


def fit_scalar(
    rows: Sequence[Row],
    params: Params,
    cls: str,
    key: str,
    prior: float,
    value: Callable[[Row, Params], float],
    prior_weight: float = 1.0,
    weights: Sequence[float] | None = None,
) -> float:
    """One factor in (0, 1]: minimize the summed |log(predicted / measured)| (each row's times
    its weight in `weights`, 1 unless given), with the prior counted as `prior_weight` more
    rows at the same cost. Prefill and training rows include
    cases the model cannot explain (MoE prefill and training); a squared relative error
    would let a few large over-predictions drag the factor for every other row, the L1 of
    log-ratios (for a pure multiplier, the median implied factor) does not."""
    if not rows:
        return prior

    w = np.ones(len(rows)) if weights is None else np.asarray(weights, dtype=np.float64)

    def loss(log_f: float) -> float:
        f = float(np.exp(log_f))
        ps = {**params, cls: {**params[cls], key: f}}
        errs = np.array([np.log(value(r, ps) / r.meas.value) for r in rows])
        return float(np.sum(w * np.abs(errs)) + prior_weight * abs(log_f - np.log(prior)))

    return round(float(np.exp(grid_minimum(loss, np.linspace(np.log(0.02), 0.0, 60)))), 3)


def grid_minimum(loss: Callable[[float], float], grid: Vec) -> float:
    """The minimum of `loss`: the best grid point, then golden-section search between the grid
    points beside it."""
    i = int(np.argmin([loss(float(x)) for x in grid]))
    lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
    g = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(30):
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
        if loss(c) < loss(d):
            hi = d
        else:
            lo = c
    return (lo + hi) / 2.0


MAX_PLAUSIBLE_MFU = 0.6
ROUNDS = 3  # decode -> compute -> decode ...: decode rows must stay memory-bound at the fitted
# compute efficiency; the prefill fit uses the fitted overheads. Three rounds settle both.


# Devices fitted on their own, written under `devices:` and left out of their class's fit. The
# DGX Spark is the one CUDA part in the unified-memory class; its llama.cpp backend behaves
# like a GPU's (high share of peak bandwidth, small overheads), while the Apple parts run Metal.
# Fitted together, the Spark's nine rows set the class factors (full bandwidth, small overheads),
# and the M1/M2/M3 rows, which the catalog lacks, come out about 17 % fast at the median when
# those chips are described by their published bandwidth and FP32 rate.
OWN_FIT: dict[str, str] = {"dgx-spark": "unified-memory"}
# Groups whose prefill runs the kernels another class's rows measure, so that class's fitted
# compute efficiency is their prior (in place of a hand-set one): the workstation parts (AD102,
# GA102) and the DGX Spark's GB10 run llama.cpp's CUDA kernels (cuBLAS, MMQ) as the GeForce
# parts of the consumer class do. The workstation class has one prefill row, the Spark five of
# two sources: held out, they would otherwise be predicted at a hand-set share of peak.
PREFILL_PRIOR_FROM: dict[str, str] = {"workstation": "consumer", "dgx-spark": "consumer"}
# The prior's weight in the compute fits, in rows: half a row, so that one measured row outweighs
# it (at one row's weight the L1 loss is flat between a lone row and the prior, and the grid's
# tie-break, not the data, chose the factor).
PREFILL_PRIOR_WEIGHT = 0.5
# Training MFU per GPU generation within a class: published runs of one framework and model put
# A100s at 0.5-0.65 MFU and H100s at 0.4-0.45 (llm-foundry's tables, torchtitan's; the Llama 3
# paper's 38-43 % on H100): a newer part's peak grows faster than what feeds it, so one class
# figure makes an H100 about 3.2x an A100 in training where runs measure 2-2.5x. A generation's
# tensor cores are one design across market segments (the RTX A6000 and the A100 are both Ampere,
# the RTX 4090 and the L40S both Ada Lovelace), so the workstation and consumer classes are
# fitted per generation too, and a generation without rows in its class takes the same
# generation's figure from another class, else the lowest any measured generation reaches
# (borrowed_architectures).
ARCHITECTURE_FIT = ("datacenter", "workstation", "consumer")


def group_rows(rows: Sequence[Row], key: str, sel: Callable[[Row], bool]) -> list[Row]:
    """Rows of a class (without the devices fitted on their own) or of one such device."""
    if key in OWN_FIT:
        return [r for r in rows if sel(r) and r.device.id == key]
    return [r for r in rows if sel(r) and r.cls == key and r.device.id not in OWN_FIT]


def architecture_groups(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Dense-model training rows of the classes whose MFU is fitted per GPU generation, keyed
    `class/architecture` (catalog efficiency.yaml `architectures`). Mixture-of-experts runs stay
    out of every MFU fit: they fit the routing factor given the MFU (fit_moe_routing), so the
    MFU stays what dense matmuls reach and the routing cost what MoE runs lose beside it."""
    out: dict[str, list[Row]] = {}
    for cls in ARCHITECTURE_FIT:
        for r in group_rows(rows, cls, is_training):
            if r.model.moe is None:
                out.setdefault(f"{cls}/{r.device.architecture}", []).append(r)
    return out


def borrowed_architectures(params: Params) -> Params:
    """Training MFU for every other architecture of a class fitted per generation (lender): the
    same generation measured in another class, else the lowest figure any measured generation
    reaches. A part no run measured is not credited with more than
    measured parts reach (the class's figure, an average over older and newer parts, sat at an
    A100's MFU while H100 runs measured a third less, and would have let an unmeasured MI300X or
    V100 out-train measured parts on a prior)."""
    cat = load_catalog()
    measured = [k for k in params if "/" in k and k.split("/", 1)[0] in ARCHITECTURE_FIT]
    out: Params = {}
    if not measured:
        return out
    for cls in ARCHITECTURE_FIT:
        archs = {d.architecture for d in cat.accelerators.values() if d.device_class == cls}
        for arch in sorted(archs):
            key = f"{cls}/{arch}"
            lent = lender(key, params, measured)
            if lent is not None:
                out[key] = dict(params[lent])
    return out


def lender(key: str, params: Params, measured: Iterable[str]) -> str | None:
    """For a `class/architecture` entry: None where it was fitted on rows of its own (a key of
    `measured`), else the fitted entry it takes its figure from: the same generation in another
    class, else the lowest fitted generation of any class (the lowest, on a tie the first by
    name)."""
    measured = sorted(set(measured))
    if key in measured:
        return None
    arch = key.split("/", 1)[1]
    same = [m for m in measured if m.split("/", 1)[1] == arch]
    return min(same or measured, key=lambda m: params[m]["training_mfu"])


def arch_note(key: str, params: Params, measured: Iterable[str]) -> str:
    """Where a `class/architecture` entry's training MFU comes from."""
    lent = lender(key, params, measured)
    return "training_mfu fitted" if lent is None else f"training_mfu: no rows, {lent}'s"


def fit_all(rows: Sequence[Row]) -> Params:
    params: Params = {c: dict(v) for c, v in PRIORS.items()}
    params.update({d: dict(PRIORS[c]) for d, c in OWN_FIT.items()})
    params.update(engines_at_prior())
    # The groups whose prefill prior is another's fitted figure come after it.
    keys = sorted((*CLASSES, *OWN_FIT), key=lambda k: k in PREFILL_PRIOR_FROM)
    for _ in range(ROUNDS):
        for e in ENGINE_FIT:
            params[engine_key(e)] = fit_engine(rows, e, params)
        for key in keys:
            prior = PRIORS[OWN_FIT.get(key, key)]
            dec = group_rows(rows, key, is_decode_b1)
            known = np.array([engine_seconds(r, params) for r in dec])
            params[key].update(fit_decode_class(dec, prior, params[key], known))
            pre = group_rows(rows, key, is_prefill)
            src = PREFILL_PRIOR_FROM.get(key)
            pre_prior = params[src]["compute"] if src else prior["compute"]
            params[key]["compute"] = fit_scalar(
                pre, params, key, "compute", pre_prior, prefill_tps, PREFILL_PRIOR_WEIGHT
            )
    for key in keys:
        prior = PRIORS[OWN_FIT.get(key, key)]
        tr = [r for r in group_rows(rows, key, is_training) if r.model.moe is None]
        mfu = fit_scalar(
            tr, params, key, "training_mfu", prior["training_mfu"], training_value,
            weights=weak_scaling_weights(tr),
        )  # fmt: skip
        # No published large-model run sustains more than ~0.6 MFU (PaLM 46 %, MegaScale 55 %,
        # Llama 3 38-43 %): a higher fit means the few rows behind it are off, not the GPU.
        params[key]["training_mfu"] = min(mfu, MAX_PLAUSIBLE_MFU)
    for key, tr in architecture_groups(rows).items():
        # One GPU generation of a class, where its rows say it reaches another share of its
        # peak than the class (the class's figure is its prior, one row's weight).
        cls = key.split("/", 1)[0]
        params[key] = {"training_mfu": params[cls]["training_mfu"]}
        mfu = fit_scalar(
            tr, params, key, "training_mfu", params[cls]["training_mfu"], training_value,
            weights=weak_scaling_weights(tr),
        )  # fmt: skip
        params[key]["training_mfu"] = min(mfu, MAX_PLAUSIBLE_MFU)
    params.update(borrowed_architectures(params))
    fit_moe_routing(rows, params)
    for dev_id, cls in OWN_FIT.items():  # keep only the factors that differ from the class
        params[dev_id] = {k: v for k, v in params[dev_id].items() if v != params[cls][k]}
    return params


def fit_engine(rows: Sequence[Row], engine: str, params: Params) -> dict[str, float]:
    """An engine release's own time per layer and per step, on its batch-1 decode rows given
    the classes' factors as they stand (relative error, a weak pull toward 0, NNLS; the
    classes are then refitted given it, ROUNDS times)."""
    mine = [r for r in rows if is_decode_b1(r) and r.meas.engine == engine]
    if not mine:
        return dict(ENGINE_PRIOR)
    zero = {**params, engine_key(engine): dict(ENGINE_PRIOR)}
    t_obs = np.array([1.0 / r.meas.value for r in mine])
    t_cls = np.array([1.0 / decode_tps(r, zero) for r in mine])
    a = np.array([[r.model.num_layers * 1e-6, 1e-6] for r in mine]) / t_obs[:, None]
    b = 1.0 - t_cls / t_obs
    reg = np.diag(np.sqrt(PRIOR_WEIGHT) / ENGINE_SCALE)
    x = nnls(np.vstack([a, reg]), np.concatenate([b, np.zeros(2)]))
    return {"layer_overhead_us": round(float(x[0]), 1), "step_overhead_us": round(float(x[1]))}


def fit_moe_routing(rows: Sequence[Row], params: Params) -> None:
    """`moe_routed_ns` and `moe_fused_share` per class from its mixture-of-experts training
    rows, given the MFU fitted on the dense rows. The time per routed element is fitted on the
    runs of Megatron-Core's default dispatcher, the one the planner's jobs run (every MoE row
    where none names DeepEP), as the value minimizing the summed |log(predicted / measured)|,
    never below the prior (a floor, not a belief); the share a fused dispatcher pays on the
    runs that name DeepEP, given that time. The time is one per class, every GPU generation's
    runs at once: it does not follow the parts' bandwidth (perf.moe_routing_seconds_per_token),
    and a generation with few runs (Blackwell: four, from two stacks six months apart) would
    otherwise set it from those alone. A class without such rows takes the largest fitted
    time of any class (a run no one measured is not assumed to route more cheaply than
    measured ones) and the smallest saving, or the prior when no row exists."""
    times: list[float] = []
    shares: list[float] = []
    for cls in CLASSES:
        moe = [r for r in group_rows(rows, cls, is_training) if r.model.moe is not None]
        fused = [r for r in moe if dispatch_fused(r)]
        plain = [r for r in moe if not dispatch_fused(r)] or fused
        if not plain:
            continue
        params[cls]["moe_fused_share"] = 1.0
        params[cls]["moe_routed_ns"] = fit_nonnegative(
            plain, params, cls, "moe_routed_ns", training_value, weak_scaling_weights(plain)
        )
        times.append(params[cls]["moe_routed_ns"])
        if fused and plain is not fused:
            params[cls]["moe_fused_share"] = fit_scalar(
                fused, params, cls, "moe_fused_share", 1.0, training_value, PREFILL_PRIOR_WEIGHT,
                weak_scaling_weights(fused),
            )  # fmt: skip
            shares.append(params[cls]["moe_fused_share"])
    for cls in CLASSES:
        if not any(r.model.moe is not None and r.cls == cls for r in rows if is_training(r)):
            params[cls]["moe_routed_ns"] = max(times, default=MOE_ROUTED_NS_PRIOR)
            params[cls]["moe_fused_share"] = max(shares, default=1.0)
    for dev_id, cls in OWN_FIT.items():  # no device fitted on its own has MoE training rows
        for k in ("moe_routed_ns", "moe_fused_share"):
            params[dev_id][k] = params[cls][k]


def dispatch_fused(r: Row) -> bool:
    """Whether a training row's notes name a fused dispatcher (DeepEP)."""
    return layout_from_notes(r.meas.notes or "", r.meas.devices).node_dedup


def weak_scaling_weights(rows: Sequence[Row]) -> list[float]:
    """Each training row's weight in a fit: 1 / (rows of its weak-scaling series). A series is
    one source's runs of one model on one part at the same layout per model replica (tensor,
    pipeline, context and expert sizes, micro-batch and sequences per replica, dispatcher),
    differing only in data parallel replicas: the same work per GPU at 256 and 512 GPUs, one
    measurement of the software repeated (DGX Cloud's DeepSeek-V3 on GB200 reads 958.3 and
    956.1 tokens/s per GPU), which counted per row would outvote a run of another stack."""
    keys = []
    for r in rows:
        lay = layout_from_notes(r.meas.notes or "", r.meas.devices)
        per_replica = None if lay.global_batch is None else lay.global_batch / lay.data_parallel
        same_work: tuple[object, ...] = (lay.tensor, lay.pipeline, lay.virtual, lay.context)
        same_work += (lay.expert,)
        same_work += (lay.micro_batch, per_replica, lay.node_dedup, lay.overlap_alltoall)
        # A run whose global batch is not stated is in no series (its work per GPU is not
        # known to be the same as another's).
        ungrouped = id(r) if lay.global_batch is None else None
        row = (r.meas.source, r.meas.model, r.meas.metric, r.device.id, r.meas.weights)
        keys.append((*row, r.meas.context, r.meas.engine, r.meas.batch, ungrouped, *same_work))
    count = {k: keys.count(k) for k in keys}
    return [1.0 / count[k] for k in keys]


def fit_nonnegative(
    rows: Sequence[Row],
    params: Params,
    cls: str,
    key: str,
    value: Callable[[Row, Params], float],
    weights: Sequence[float] | None = None,
    lower: float = MOE_ROUTED_NS_PRIOR,
    upper: float = MOE_ROUTED_NS_MAX,
) -> float:
    """One factor in [lower, upper] that slows predictions as it grows: minimize the summed
    |log(predicted / measured)| (grid_minimum), to four decimals."""

    w = [1.0] * len(rows) if weights is None else list(weights)

    def loss(f: float) -> float:
        ps = {**params, cls: {**params[cls], key: f}}
        return float(
            sum(x * abs(np.log(value(r, ps) / r.meas.value)) for r, x in zip(rows, w, strict=True))
        )

    return round(grid_minimum(loss, np.geomspace(lower, upper, 101)), 4)


def leave_one_device_out(rows: Sequence[Row], fitted: Params) -> dict[str, list[tuple[Row, float]]]:
    """Batch-1 decode: refit each class without one device, predict that device's rows. A device
    fitted on its own is predicted by its class's factors, as a device without rows would be."""
    out: dict[str, list[tuple[Row, float]]] = {}
    dec = [r for r in rows if is_decode_b1(r)]
    engines = {engine_key(e): fitted[engine_key(e)] for e in ENGINE_FIT}
    for dev_id in sorted({r.device.id for r in dec}):
        held = [r for r in dec if r.device.id == dev_id]
        cls = held[0].cls
        train = [r for r in group_rows(dec, cls, is_decode_b1) if r.device.id != dev_id]
        known = np.array([engine_seconds(r, fitted) for r in train])
        held_out = {**fitted[cls], **fit_decode_class(train, PRIORS[cls], fitted[cls], known)}
        for r in held:
            out.setdefault(cls, []).append((r, decode_tps(r, {cls: held_out, **engines})))
    return out


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------


def rel(pred: float, meas: float) -> float:
    return pred / meas - 1.0


def stats(errs: Sequence[float]) -> str:
    if not errs:
        return "- | -"
    a = np.abs(np.array(errs)) * 100
    return f"{np.median(a):.1f} | {np.percentile(a, 90):.1f}"


def fmt_num(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


GROUPS: tuple[tuple[str, str, Callable[[Row], bool]], ...] = (
    ("decode, batch 1, one device (fitted)", "decode_b1", is_decode_b1),
    ("prefill, batch 1 (fitted: compute)", "prefill", is_prefill),
    ("training (fitted: training_mfu, moe_routed_ns, moe_fused_share)", "training", is_training),
    (
        "decode, batch 1, llama.cpp layer or row split over several GPUs (check only)",
        "split",
        is_layer_split,
    ),
    (
        "decode, batch > 1 or tensor parallel, batch published (check only)",
        "batched",
        is_decode_batched,
    ),
)


def report(
    rows: Sequence[Row],
    left_out: Skipped,
    fitted: Params,
    loo: dict[str, list[tuple[Row, float]]],
    loso: dict[Row, float],
    shipped: set[str] | None,
) -> str:
    """The calibration report (markdown). Long because it is one document, section by section."""
    n_total = len(rows) + len(left_out)
    out: list[str] = ["# Calibration report", ""]
    out.append(
        f"Table: `calibration/measurements.yaml`, {n_total} rows; {len(rows)} scored, "
        f"{len(left_out)} left out of scoring, each with its reason (last section)."
    )
    out.append(
        "Error = predicted / measured - 1. Columns give the median and 90th percentile of "
        "|error| in %. **Held out** is leave-one-source-out cross-validation: every row is "
        "predicted by factors fitted with no row of its own source (one refit per source over "
        "all fitted categories), so no figure in that column was fitted on its own publisher's "
        "rows. It is the error to expect on a new measurement; the in-sample column is not."
    )
    out.append("")
    before = {r: predict(r, PRIORS) for r in rows}
    after = {r: predict(r, fitted) for r in rows}

    out += [
        "## Error: priors, in-sample fit, held out (leave-one-source-out)",
        "",
        "| rows | class | n | sources | priors median | priors p90 | in-sample median "
        "| in-sample p90 | held-out median | held-out p90 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for title, _, sel in GROUPS:
        group = [r for r in rows if sel(r)]
        for cls in (*CLASSES, "all"):
            g = [r for r in group if cls in ("all", r.cls)]
            if not g:
                continue
            b = [rel(before[r], r.meas.value) for r in g]
            a = [rel(after[r], r.meas.value) for r in g]
            h = [rel(loso[r], r.meas.value) for r in g]
            nsrc = len({r.meas.source for r in g})
            out.append(
                f"| {title} | {cls} | {len(g)} | {nsrc} | {stats(b)} | {stats(a)} | {stats(h)} |"
            )
    dec = [r for r in rows if is_decode_b1(r)]
    naive = [rel(naive_tps(r), r.meas.value) for r in dec]
    signed = np.median(np.array(naive)) * 100
    out += [
        "",
        f"Naive rule on batch-1 decode (tokens/s = {NAIVE_EFF} x peak bandwidth / bytes "
        f"of weights read per token), {len(dec)} rows: median |error| "
        f"{np.median(np.abs(naive)) * 100:.1f} %, p90 {np.percentile(np.abs(naive), 90) * 100:.1f}"
        f" %, median signed error {signed:+.1f} %.",
    ]
    out += _targets_section(rows, loso)
    out += _source_section(rows, loso)
    out += _new_rows_section(rows, shipped)
    out += _device_section(dec, loo, after)
    out += ["", "## Factors", "", "| class | factor | prior | fitted |", "|---|---|---:|---:|"]
    for cls in CLASSES:
        for k in ("bandwidth", "compute", "training_mfu", *MOE_KEYS, *DECODE_KEYS[1:]):
            if PRIORS[cls][k] != fitted[cls][k]:
                out.append(f"| {cls} | {k} | {PRIORS[cls][k]:g} | {fitted[cls][k]:g} |")
    for dev_id, cls in OWN_FIT.items():
        for k, v in fitted.get(dev_id, {}).items():
            out.append(f"| {dev_id} (device entry) | {k} | {PRIORS[cls][k]:g} | {v:g} |")
    for e in ENGINE_FIT:
        n = sum(is_decode_b1(r) and r.meas.engine == e for r in rows)
        for k, v in fitted.get(engine_key(e), {}).items():
            out.append(f"| {e} (engine release, {n} rows) | {k} (added) | 0 | {v:g} |")
    measured = architecture_groups(rows)
    for key in sorted(k for k in fitted if "/" in k):
        cls, lent = key.split("/", 1)[0], lender(key, fitted, measured)
        what = f"{len(measured[key])} dense rows" if lent is None else f"no rows: {lent}'s"
        prior = f"{fitted[cls]['training_mfu']:g} (class)" if lent is None else "-"
        out.append(f"| {key} ({what}) | training_mfu | {prior} | {fitted[key]['training_mfu']:g} |")
    out.append("")
    out.append(
        "Factors not listed kept their prior (no rows for that class and metric; "
        "dequant_ops_per_weight is held at its prior). Training MFU is fitted per GPU "
        "generation of the datacenter, workstation and consumer classes on their dense-model "
        "rows; a generation without rows in its class takes the same generation's figure from "
        "another class, else the lowest fitted figure of any generation. Mixture-of-experts training rows fit "
        "moe_routed_ns given that MFU, one time for every generation of a class, on the runs "
        "of Megatron-Core's default dispatcher, and moe_fused_share on the runs that name "
        "DeepEP (a class without such rows takes the largest fitted time and the smallest "
        "saving; the time's prior is a count of the passes routing makes, a floor). These are this "
        "fit's figures; "
        "`catalog/efficiency.yaml` ships the factors of the last `fit.py --write` (its "
        "`fitted_on` says which were refitted when)."
    )
    out += _row_tables(rows, before, after, loso)
    out += ["", "## Rows left out of scoring", "", "| model | device | metric | source | reason |"]
    out.append("|---|---|---|---|---|")
    for m, why in sorted(left_out, key=lambda x: (x[1], x[0].device, x[0].model)):
        out.append(f"| {m.model} | {m.device} | {m.metric} | {m.source} | {why} |")
    return "\n".join(out) + "\n"


# The goals the estimator is held to, on held-out (leave-one-source-out) error: (title, row
# selector, median goal %, p90 goal %). None: no goal for that statistic.
TARGETS: tuple[tuple[str, Callable[[Row], bool], float | None, float | None], ...] = (
    ("decode, batch 1, one device", is_decode_b1, 7.0, 20.0),
    ("prefill", is_prefill, None, 30.0),
    (
        "training tokens/s per device",
        lambda r: r.meas.metric == "train_tokens_per_s_per_device",
        10.0,
        20.0,
    ),
    (
        "decode on several devices",
        lambda r: r.meas.metric == "decode_tokens_per_s" and r.meas.devices > 1,
        None,
        25.0,
    ),
    # The goal is scored on every row above; these two lines only split it, so a reader sees
    # which mode the error comes from (the row split is scored in calibration, not planned).
    (
        "of which llama.cpp's row split, builds before January 2024",
        lambda r: r.meas.metric == "decode_tokens_per_s" and r.meas.devices > 1 and is_row_split(r),
        None,
        None,
    ),
    (
        "of which tensor parallel or layer split",
        lambda r: (
            r.meas.metric == "decode_tokens_per_s" and r.meas.devices > 1 and not is_row_split(r)
        ),
        None,
        None,
    ),
)


def _targets_section(rows: Sequence[Row], loso: dict[Row, float]) -> list[str]:
    out = [
        "",
        "## Goals, held out",
        "",
        "| rows | n | held-out median | goal | held-out p90 | goal | met |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for title, sel, med_goal, p90_goal in TARGETS:
        errs = np.abs([rel(loso[r], r.meas.value) for r in rows if sel(r)]) * 100
        if not len(errs):
            continue
        med, p90 = float(np.median(errs)), float(np.percentile(errs, 90))
        met = (med_goal is None or med <= med_goal) and (p90_goal is None or p90 <= p90_goal)
        verdict = "-" if med_goal is None and p90_goal is None else "yes" if met else "no"
        goal_m = "-" if med_goal is None else f"{med_goal:g}"
        goal_p = "-" if p90_goal is None else f"{p90_goal:g}"
        out.append(
            f"| {title} | {len(errs)} | {med:.1f} | {goal_m} | {p90:.1f} | {goal_p} | {verdict} |"
        )
    out += [
        "",
        "Saturated serving (MLPerf and engine tables whose batch is not published) is scored by "
        "the serving benchmark (`benchmarks/serving/run.py`), not here.",
    ]
    return out


def _source_section(rows: Sequence[Row], loso: dict[Row, float]) -> list[str]:
    out = [
        "",
        "## Held out, per source",
        "",
        "Each source's rows predicted without it; a source far from 0 in the signed column is one "
        "the other sources do not describe (an engine, a build era, a measuring method).",
        "",
        "| source | rows | held-out median |error| % | held-out p90 % | median signed % |",
        "|---|---:|---:|---:|---:|",
    ]
    for src in sorted({r.meas.source or "" for r in rows}):
        errs = [rel(loso[r], r.meas.value) for r in rows if (r.meas.source or "") == src]
        a = np.abs(np.array(errs)) * 100
        out.append(
            f"| {src} | {len(errs)} | {np.median(a):.1f} | {np.percentile(a, 90):.1f} | "
            f"{np.median(errs) * 100:+.1f} |"
        )
    return out


def _new_rows_section(rows: Sequence[Row], shipped: set[str] | None) -> list[str]:
    """Rows the shipped factors were not fitted on, scored by the shipped factors (the tool with
    no overrides) before they join a fit."""
    out = ["", "## Rows not yet in the shipped fit", ""]
    if shipped is None:
        return [*out, "No list of fitted rows is shipped (`calibration/fitted_rows.txt`)."]
    new = [r for r in rows if row_key(r.meas) not in shipped]
    if not new:
        return [
            *out,
            f"None: every scored row is among the {len(shipped)} rows the shipped factors "
            "(`catalog/efficiency.yaml`) were fitted on. A row added to the table is scored "
            "here by the shipped factors, before any refit sees it.",
        ]
    out.append(
        f"{len(new)} scored rows are not among the {len(shipped)} rows the shipped factors "
        "(`catalog/efficiency.yaml`) were fitted on; here they are scored by those factors as "
        "shipped, before any refit sees them. `fit.py --write` adds them to the fit."
    )
    out += ["", "| rows | n | median | p90 |", "|---|---:|---:|---:|"]
    for title, _, sel in GROUPS:
        g = [rel(predict(r, {}), r.meas.value) for r in new if sel(r)]
        if g:
            out.append(f"| {title} | {len(g)} | {stats(g)} |")
    out += ["", "| model | device | metric | weights | measured | shipped | error % |"]
    out.append("|---|---|---|---|---:|---:|---:|")
    for r in sorted(new, key=lambda r: (r.device.id, r.meas.model, r.meas.metric)):
        pred = predict(r, {})
        out.append(
            f"| {r.meas.model} | {r.device.id} | {r.meas.metric} | {r.meas.weights} | "
            f"{fmt_num(r.meas.value)} | {fmt_num(pred)} | {rel(pred, r.meas.value) * 100:+.1f} |"
        )
    return out


def _device_section(
    dec: Sequence[Row], loo: dict[str, list[tuple[Row, float]]], after: dict[Row, float]
) -> list[str]:
    out = [
        "",
        "## Leave-one-device-out, batch-1 decode",
        "",
        "Each device's rows are predicted by factors fitted on the other devices of its class.",
        "",
        "| class | devices | n | median | p90 |",
        "|---|---:|---:|---:|---:|",
    ]
    all_loo: list[float] = []
    for cls in CLASSES:
        pairs = loo.get(cls, [])
        if not pairs:
            continue
        errs = [rel(p, r.meas.value) for r, p in pairs]
        all_loo += errs
        ndev = len({r.device.id for r, _ in pairs})
        out.append(f"| {cls} | {ndev} | {len(pairs)} | {stats(errs)} |")
    out.append(f"| all | {len({r.device.id for r in dec})} | {len(all_loo)} | {stats(all_loo)} |")
    out += [
        "",
        "Per device: held-out error, and the signed median error of the full fit (a device "
        "far from 0 there is one the class factors do not describe).",
        "",
        "| device | class | n | held-out median |error| % | held-out worst % "
        "| full-fit median signed % |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for cls in CLASSES:
        for dev_id in sorted({r.device.id for r, _ in loo.get(cls, [])}):
            errs = [rel(p, r.meas.value) for r, p in loo[cls] if r.device.id == dev_id]
            worst = max(errs, key=abs) * 100
            full = [rel(after[r], r.meas.value) for r in dec if r.device.id == dev_id]
            out.append(
                f"| {dev_id} | {cls} | {len(errs)} | "
                f"{np.median(np.abs(errs)) * 100:.1f} | {worst:+.1f} | "
                f"{np.median(full) * 100:+.1f} |"
            )
    return out


def _row_tables(
    rows: Sequence[Row],
    before: dict[Row, float],
    after: dict[Row, float],
    loso: dict[Row, float],
) -> list[str]:
    out: list[str] = []
    for title, key, sel in GROUPS:
        g = [r for r in rows if sel(r)]
        if not g:
            continue
        naive_col = key == "decode_b1"
        out += [
            "",
            f"## Rows: {title}",
            "",
            "| model | device | class | weights | batch | ctx | source | measured | before | after "
            "| held out | error before % | error after % | error held out % |"
            + (" naive rule error % |" if naive_col else ""),
            "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
            + ("---:|" if naive_col else ""),
        ]
        for r in sorted(g, key=lambda r: (r.cls, r.device.id, r.meas.model, r.meas.weights)):
            m = r.meas
            batch = "-" if m.batch is None else str(m.batch)
            if m.devices > 1:
                batch += f" (x{m.devices})"
            unit = " MFU" if m.metric == "train_mfu" else ""
            out.append(
                f"| {m.model} | {m.device} | {r.cls} | {m.weights} | {batch} | "
                f"{r.context:g} | {m.source} | {fmt_num(m.value)}{unit} | {fmt_num(before[r])} | "
                f"{fmt_num(after[r])} | {fmt_num(loso[r])} | {rel(before[r], m.value) * 100:+.1f} | "
                f"{rel(after[r], m.value) * 100:+.1f} | {rel(loso[r], m.value) * 100:+.1f} |"
                + (f" {rel(naive_tps(r), m.value) * 100:+.1f} |" if naive_col else "")
            )
    return out


# ------------------------------------------------------------------------------------------------
# Writing catalog/efficiency.yaml
# ------------------------------------------------------------------------------------------------

HEADER = """\
# Efficiency factors per device class: achieved fractions of peak and fixed overheads.
#   bandwidth               achieved / peak memory bandwidth when streaming weights and KV cache
#   compute                 achieved / peak dense tensor FLOP/s in inference matmuls (prefill)
#   training_mfu            model FLOPs utilization in training (recomputation counted as work)
#   moe_routed_ns           training an MoE model: nanoseconds per routed activation element per
#                           MoE layer (gating, permute, dispatch, combine; forward and backward)
#   moe_fused_share         share of that time a dispatcher fusing the permutation into its
#                           all-to-all (DeepEP) pays; the planner's jobs pay all of it
#   layer_overhead_us       fixed time per layer per forward step (kernel launches, syncs), us
#   step_overhead_us        fixed time per decode step (sampling, scheduling, host work), us
#   dequant_ops_per_weight  FP32 vector ops per weight to unpack weight-only quantized formats
#   usable_memory           share of device memory an engine may fill
#   power_activity_floor    share of (TDP - idle) drawn even when lightly loaded
# usable_memory: vLLM's gpu_memory_utilization default is 0.9. A platform that lets the accelerator
# hold less (macOS: Metal's recommendedMaxWorkingSetSize, about 75 % of an Apple machine's unified
# memory) says so per device in accelerators.yaml (memory.gpu_share), which caps this share.
# Rewritten by `python calibration/fit.py --write`; calibration/README.md gives the fit and its error.
"""

ARCHITECTURES_HEADER = """\
# Training factors per GPU generation of a class (calibration/fit.py ARCHITECTURE_FIT). The MFU is
# fitted on the dense-model training rows of each generation that has some (prior: the class's
# figure); a generation without rows in its class takes the same generation's figure from
# another class (one tensor-core design), else the lowest figure any fitted generation reaches.
# The routing time of MoE training (moe_routed_ns) is one per class: it does not follow the
# parts' bandwidth (planner/estimator/perf.py, moe_routing_seconds_per_token).
"""
# `--only` groups: the factors a partial refit rewrites.
ENGINES_HEADER = """\
# Fixed times an older engine release adds to every forward pass beyond its class's figures
# (calibration/fit.py ENGINE_FIT: fitted on the measurements that name the release as their
# engine, the classes' overheads on the rest); added where a workload names that engine.
"""
ONLY_GROUPS = {"training": ("training_mfu", *MOE_KEYS), "prefill": ("compute",)}
# The rows each `--only` group is fitted on, and their metrics (row_key's seventh field).
ONLY_ROWS: dict[str, Callable[[Row], bool]] = {"training": is_training, "prefill": is_prefill}
ONLY_METRICS = {
    "training": ("train_mfu", "train_tokens_per_s_per_device"),
    "prefill": ("prefill_tokens_per_s",),
}
ORDER = (
    "bandwidth",
    "compute",
    "training_mfu",
    "moe_routed_ns",
    "moe_fused_share",
    "layer_overhead_us",
    "step_overhead_us",
    "dequant_ops_per_weight",
    "power_activity_floor",
    "usable_memory",
)


def write_efficiency(
    fitted: Params,
    fitted_on: str,
    measured: Iterable[str],
    only: str | None = None,
) -> None:
    """Rewrite catalog/efficiency.yaml with the fitted factors (`only`: that group's factors,
    ONLY_GROUPS, every other shipped factor kept as it is). `measured`: the class/architecture keys fitted on
    rows of their own (the others took a measured generation's figure)."""
    current = load_efficiency_file()
    if only:
        group = ONLY_GROUPS[only]
        fitted = {k: {f: v for f, v in fac.items() if f in group} for k, fac in fitted.items()}
    lines = [HEADER.rstrip("\n"), f"fitted_on: {json.dumps(fitted_on)}", "classes:"]
    for cls in CLASSES:
        keep = current.classes[cls].model_dump()  # type: ignore[index]
        vals = {**keep, **fitted[cls]}
        body = ", ".join(f"{k}: {vals[k]:g}" for k in ORDER)
        lines.append(f"  {cls}: {{{body}}}")
    arch = {k: v for k, v in fitted.items() if "/" in k and v}
    if arch:
        lines.append(ARCHITECTURES_HEADER.rstrip("\n"))
        lines.append("architectures:")
        for key in sorted(arch):
            body = ", ".join(f"{k}: {arch[key][k]:g}" for k in ORDER if k in arch[key])
            lines.append(f"  {key}: {{{body}}}  # {arch_note(key, fitted, measured)}")
    elif current.architectures:  # a partial refit of no per-generation factor keeps them
        lines.extend(architecture_lines_as_written())
    devices = {
        **current.devices,
        **{d: {**current.devices.get(d, {}), **fitted[d]} for d in OWN_FIT if fitted.get(d)},
    }
    if devices:
        lines.append("devices:")
        for dev_id, factors in devices.items():
            body = ", ".join(f"{k}: {factors[k]:g}" for k in ORDER if k in factors)
            lines.append(f"  {dev_id}: {{{body}}}")
    else:
        lines.append("devices: {}")
    engines = {e: fitted.get(engine_key(e)) or current.engines[e].model_dump() for e in ENGINE_FIT}
    lines.append(ENGINES_HEADER.rstrip("\n"))
    lines.append("engines:")
    for eid, fixed in engines.items():
        body = ", ".join(f"{k}: {fixed[k]:g}" for k in ENGINE_PRIOR)
        lines.append(f"  {eid}: {{{body}}}")
    EFFICIENCY.write_text("\n".join(lines) + "\n")
    load_efficiency.cache_clear()
    load_efficiency(EFFICIENCY)  # validates what was written


def architecture_lines_as_written() -> list[str]:
    """The shipped file's per-generation block (its header comment to `devices:`), verbatim."""
    text = EFFICIENCY.read_text().splitlines()
    start = text.index(ARCHITECTURES_HEADER.splitlines()[0])
    return text[start : text.index("devices:", start)]


def load_efficiency_file() -> EfficiencyFile:
    """The shipped efficiency file as it stands (before a write)."""
    return load_efficiency(EFFICIENCY)


def check_written(rows: Sequence[Row], fitted: Params) -> float:
    """Largest relative difference between the report's "after" and the tool with no overrides."""
    worst = 0.0
    for r in rows:
        worst = max(worst, abs(predict(r, {}) / predict(r, fitted) - 1.0))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--write", action="store_true", help="rewrite catalog/efficiency.yaml")
    ap.add_argument(
        "--only",
        choices=tuple(ONLY_GROUPS),
        help="with --write: refit the training factors (training_mfu, moe_routed_ns, moe_fused_share) or the "
        "prefill factor (compute) alone and keep every other shipped factor",
    )
    ap.add_argument("--report", type=Path, help="also write the markdown report here")
    args = ap.parse_args()

    all_rows, skipped = load_rows()
    left_out: Skipped = list(skipped)
    rows: list[Row] = []
    for r in all_rows:
        why = unscorable(r)
        if why:
            left_out.append((r.meas, why))
        else:
            rows.append(r)
    fitted = fit_all(rows)
    loo = leave_one_device_out(rows, fitted)
    loso = leave_one_source_out(rows)
    if args.write:
        n_dec = sum(is_decode_b1(r) for r in rows)
        n_pre = sum(is_prefill(r) for r in rows)
        n_tr = sum(is_training(r) for r in rows)
        fitted_on = (
            f"calibration/measurements.yaml: {n_dec} batch-1 single-device decode rows, {n_pre} "
            f"prefill rows and {n_tr} training rows with catalog devices (calibration/fit.py, "
            f"{datetime.date.today().isoformat()})"
        )
        measured = architecture_groups(rows)
        if args.only:  # the other factors stay as fitted before, on the rows they saw then
            fitted_on = (
                f"{load_efficiency_file().fitted_on.split('; ', 1)[0]}; "
                f"{' and '.join(ONLY_GROUPS[args.only])} refitted "
                f"on {sum(ONLY_ROWS[args.only](r) for r in rows)} {args.only} rows "
                f"({datetime.date.today().isoformat()})"
            )
        write_efficiency(fitted, fitted_on, measured, args.only)
        # A partial refit puts the rows its factors saw (training or prefill rows) in place of
        # that group's rows of the last fit; the others have not joined any shipped fit yet.
        joined = [r for r in rows if ONLY_ROWS[args.only](r)] if args.only else rows
        earlier = (
            [k for k in shipped_row_keys() if k.split("|")[6] not in ONLY_METRICS[args.only]]
            if args.only
            else []
        )
        keys = list(dict.fromkeys(earlier + [row_key(r.meas) for r in joined]))
        FITTED_ROWS.write_text(
            "# Rows the shipped factors were fitted on (written by calibration/fit.py "
            "--write);\n# the report scores any other row with the shipped factors before "
            "it joins a fit.\n" + "".join(f"{k}\n" for k in keys)
        )
        checked = joined
        diff = check_written(checked, fitted)
    # After a --write, the report reads the rows the factors just written were fitted on.
    text = report(rows, left_out, fitted, loo, loso, fitted_keys())
    print(text)
    if args.report:
        args.report.write_text(text)
    if args.write:
        print(
            f"wrote {EFFICIENCY.relative_to(ROOT)}; tool vs report max difference "
            f"{diff * 100:.3f} %"
        )


if __name__ == "__main__":
    main()
