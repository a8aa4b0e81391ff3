"""A deployable recipe per replica: the engine's launch settings the plan's figures assume.

Tensor- and pipeline-parallel sizes and the layers per stage come from the design; the most
sequences a replica holds is batch x stages (the serving model keeps S micro-batches of b
sequences in flight); the token budget per iteration is the one the serving model charges
(`planner.estimator.serving.token_budget`); the KV-cache type is the workload's. The command
line spells these in the engine's own flags (vLLM `--max-num-seqs`, `--max-num-batched-tokens`,
`--kv-cache-dtype`; SGLang `--max-running-requests`, `--chunked-prefill-size`; TensorRT-LLM
`--max_batch_size`, `--max_num_tokens`; llama.cpp `--parallel`, `--batch-size`,
`--tensor-split`, `--cache-type-k/v`, `--rpc` for hosts of another backend).
"""

from __future__ import annotations

import math
from typing import Any

from planner.catalog import Catalog
from planner.estimator.confidence import design_confidence
from planner.estimator.designs import Design
from planner.estimator.measured import measured_classes
from planner.estimator.support import backends_of
from planner.plan.types import Recipe, StageLine
from planner.schema.problem import Constraints, InferenceWorkload

# KV-cache format -> each engine family's name for it (None: the engine's default, `auto`).
_KV_NAMES: dict[str, dict[str, str | None]] = {
    "vllm": {"fp16": None, "bf16": None, "fp32": None, "fp8": "fp8"},
    "vllm-gaudi": {"fp16": None, "bf16": None, "fp8": "fp8_inc"},
    "sglang": {"fp16": None, "bf16": None, "fp8": "fp8_e4m3"},
    "tensorrt-llm": {"fp16": None, "bf16": None, "fp8": "fp8", "int8": "int8"},
    "llama.cpp": {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "q8_0": "q8_0", "q4_0": "q4_0"},
}
_VLLM_LIKE = ("vllm", "vllm-tpu", "vllm-neuron", "vllm-gaudi", "vllm-eager")


def served_context(w: InferenceWorkload, shape: InferenceWorkload, served: dict[str, float]) -> int:
    """The longest sequence a replica must admit: its sized class's context, or a longer class
    it is given (a measured capacity serves any class on the measured hardware), so the
    engine's length limit (vLLM --max-model-len) never refuses requests the plan sends it."""
    longest = shape.context_tokens
    for c in w.request_mix or ():
        if served.get(c.name, 0.0) > 0:
            longest = max(longest, c.input_tokens + c.output_tokens)
    return longest


def served_sequences(
    w: InferenceWorkload, stages: list[tuple[str, int]], batch: int, served: dict[str, float],
    ms_per_token: float, role: str = "both",
) -> int:  # fmt: skip
    """The sequences a replica's engine must admit: its design's batch x stages; or, where it
    serves a class at a measured rate (authoritative: made at the measurement's own settings;
    whole requests only), the sequences its traffic (`served`: one replica's requests/s)
    holds in flight by Little's law, requests/s x output tokens x time per token (the
    workload's ceiling where it states one, else the design's): a measured replica launched at
    the sized design's batch would hold too few of them."""
    seqs = batch * len(stages)
    if len(stages) != 1 or role != "both" or not w.capacities or w.request_mix is None:
        return seqs
    if not any(served.get(c, 0.0) > 0 for c in measured_classes(w, *stages[0])):
        return seqs
    tpot = (w.max_ms_per_token or ms_per_token) / 1000.0
    need = sum(served.get(c.name, 0.0) * c.output_tokens * tpot for c in w.request_mix)
    return max(seqs, math.ceil(need - 1e-9))


def serving_fields(
    cat: Catalog,
    c: Constraints,
    w: InferenceWorkload,
    shape: InferenceWorkload,
    d: Design,
    stages: tuple[StageLine, ...],
    budget: int,
    machines: int = 1,
    served: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A serving replica's engine, backends, token budget and recipe (WorkloadPlan fields);
    `shape` is the workload with the lengths design `d` is sized for (a mix's class), `budget`
    the tokens per iteration its figures assume, `machines` the hosts one replica spans,
    `served` one replica's requests/s per class (a mix's)."""
    engine, devices, batch = d.engine, d.devices, d.batch
    backends = backends_of(cat, devices, w, c)
    parts = [(s.device, s.tp, s.layers[1] - s.layers[0] + 1) for s in stages]
    context = served_context(w, shape, served or {})
    pairs = [(s.device, s.tp) for s in stages]
    seqs = served_sequences(w, pairs, batch, served or {}, d.ms_per_token, d.role)
    recipe = make_recipe(engine, backends, parts, seqs, budget, w.weights, w.kv, context, machines)
    backing = design_confidence(cat, [cat.accelerator(x) for x in devices], engine, batch)
    return {
        "token_budget": budget,
        "engine": engine or None,
        "backends": backends,
        "recipe": recipe if engine else None,
        "confidence": backing,
    }


def make_recipe(
    engine: str,
    backends: dict[str, str],
    stages: list[tuple[str, int, int]],
    seqs: int,
    token_budget: int | None,
    weights: str,
    kv: str,
    context_tokens: int,
    machines: int = 1,
) -> Recipe:
    """The recipe of a replica of `stages` (device, tensor-parallel size, layers), in order,
    holding `seqs` sequences, over `machines` hosts."""
    tps = tuple(tp for _, tp, _ in stages)
    layers = tuple(n for _, _, n in stages)
    return Recipe(
        engine,
        tps,
        len(stages),
        layers,
        seqs,
        token_budget,
        kv,
        weights,
        launch_command(engine, backends, stages, seqs, token_budget, kv, context_tokens, machines),
    )


def launch_command(
    engine: str,
    backends: dict[str, str],
    stages: list[tuple[str, int, int]],
    seqs: int,
    budget: int | None,
    kv: str,
    context: int,
    machines: int = 1,
) -> str:
    """The command that starts one replica under `engine` (stages as (device, tp, layers)),
    shared by the plan builder's recipe and the verifier's check of it."""
    tp, pp = stages[0][1], len(stages)
    # Engines that join machines over the network (vLLM and SGLang multi-node docs): say how.
    joined = f"  # over {machines} machines: a Ray cluster of them first" if machines > 1 else ""
    family = "vllm" if engine in ("vllm", "vllm-tpu", "vllm-neuron", "vllm-eager") else engine
    kv_name = _KV_NAMES.get(family, {}).get(kv)
    # A pipeline's layer ranges as the plan's figures assume them: vLLM and SGLang split the
    # layers evenly unless their partition variable names each stage's count (vLLM's
    # envs.VLLM_PP_LAYER_PARTITION, read by distributed/utils.get_pp_indices; SGLang's
    # SGLANG_PP_LAYER_PARTITION, the same rule).
    layers = ",".join(str(n) for _, _, n in stages)
    if engine in _VLLM_LIKE:
        out = "" if pp == 1 else f"VLLM_PP_LAYER_PARTITION={layers} "
        out += (
            f"vllm serve MODEL --tensor-parallel-size {tp} --pipeline-parallel-size {pp} "
            f"--max-num-seqs {seqs} --max-model-len {context}"
        )
        out += f" --max-num-batched-tokens {budget}" if budget else ""
        out += " --enforce-eager" if engine == "vllm-eager" else ""  # no CUDA graphs
        return out + (f" --kv-cache-dtype {kv_name}" if kv_name else "") + joined
    if engine == "sglang":
        out = "" if pp == 1 else f"SGLANG_PP_LAYER_PARTITION={layers} "
        out += (
            f"python -m sglang.launch_server --model-path MODEL --tp-size {tp} --pp-size {pp} "
            f"--max-running-requests {seqs} --context-length {context}"
        )
        out += f" --chunked-prefill-size {budget}" if budget else ""
        return out + (f" --kv-cache-dtype {kv_name}" if kv_name else "")
    if engine == "tensorrt-llm":
        out = f"trtllm-serve MODEL --tp_size {tp} --pp_size {pp} --max_batch_size {seqs}"
        out += f" --max_num_tokens {budget}" if budget else ""
        notes = [f"kv_cache_config.dtype={kv_name}"] if kv_name else []
        if pp > 1 and len({n for _, _, n in stages}) > 1:
            notes.append(f"layers per stage {layers}, as the plan's figures assume")
        return out + (f"  # {'; '.join(notes)}" if notes else "")
    if engine == "llama.cpp":
        # Share of the layers per device, in stage order (each device of a stage an equal part).
        # A tensor-parallel replica is one stage of all its devices (-sm tensor, which needs
        # flash attention); the layer split otherwise.
        split = ",".join(f"{n / tp_i:g}" for _, tp_i, n in stages for _ in range(tp_i))
        mode = "tensor -fa on" if any(t > 1 for _, t, _ in stages) else "layer"
        out = (
            f"llama-server -m MODEL.gguf -ngl 999 --split-mode {mode} --tensor-split {split} "
            f"--parallel {seqs} --ctx-size {context * seqs}"
        )
        out += f" --batch-size {budget}" if budget else ""
        if kv_name:
            out += f" --cache-type-k {kv_name} --cache-type-v {kv_name}"
        if machines > 1 or len(set(backends.values())) > 1:
            others = (
                f"the other {machines - 1} machine{'s' if machines > 2 else ''}"
                if machines > 1
                else "each other host"
            )
            out += f" --rpc HOST:PORT[,...]  # rpc-server on {others} (llama.cpp RPC)"
        return out
    if engine == "mlx":
        return "mlx_lm.server --model MODEL" + (
            f"  # pipeline over {pp} machines: mlx.launch" if pp > 1 else ""
        )
    if engine == "exo":
        return "exo  # on every machine; the layer split below is the plan's"
    if engine == "optimum-habana":
        return (
            f"python run_generation.py --model_name_or_path MODEL --batch_size {seqs} --bf16 "
            f"--use_hpu_graphs --use_kv_cache  # on {tp} HPUs with deepspeed when > 1"
        )
    return f"{engine} MODEL"
