"""A prompt's prefill on the kernel family of a device's engine (Engine.kernels): llama.cpp's
prompt processing on llama.cpp's families (perf.prefill_seconds), an iteration of the serving
grid carrying the prompts on every other engine's (serving_prefill_seconds), so that an
estimate, a plan and the calibration's end-to-end rows time a prompt alike."""

from __future__ import annotations

import numpy as np

from planner.estimator.devices import Array, DeviceTable
from planner.estimator.formats import WeightFormat
from planner.estimator.kernel_rates import llama_rows
from planner.estimator.perf import head_seconds, prefill_seconds, serving_layer_seconds
from planner.estimator.prefill_path import Kernels
from planner.schema.catalog import ModelArch


def serving_prefill_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    *,
    prompt: float,
    tp: int = 1,
    prompts: float = 1.0,
) -> Array:
    """Time to first token for `prompts` prompts of `prompt` tokens each, processed together
    (one by default), under an engine that is not llama.cpp's (prefill_path.on_llama_cpp): one
    serving iteration of the serving grid with every prompt token and no decodes
    (serving_layer_seconds: the linear layers at the format's peak x its batched factor,
    attention at the KV cache format's), plus the head over each prompt's last token and the
    step overhead, as the grid's fixed work per iteration, so that an estimate and a plan time
    a prompt alike."""
    layer = serving_layer_seconds(
        m, fmt, kv_dtype_bytes, dev, batch=0.0, context=prompt, prefill_tokens=prompts * prompt,
        prompt=prompt, tp=tp,
    )  # fmt: skip
    return (
        m.num_layers * layer
        + head_seconds(m, fmt, dev, prompts, "serving-grid") / tp
        + dev.step_overhead_s
    )


def engine_prefill_seconds(
    m: ModelArch,
    fmt: WeightFormat,
    kv_dtype_bytes: float,
    dev: DeviceTable,
    *,
    prompt: float,
    tp: int,
    kernels: Kernels,
    prompts: float = 1.0,
) -> Array:
    """`prompts` prompts of `prompt` tokens processed together (one by default) on each device
    row's kernel family `kernels` (one for all rows or one per row): on llama.cpp's families
    at llama.cpp's kernel rates (prefill_seconds; a release that dequantizes GGUF weights at
    its own), else as the serving grid times them (serving_prefill_seconds)."""
    own = llama_rows(dev, kernels)
    out = np.zeros(len(dev))
    if own.any():
        llama = prefill_seconds(m, fmt, dev, batch=prompts, prompt=prompt, tp=tp, kernels=kernels)
        out = np.where(own, llama, out)
    if not own.all():
        batched = serving_prefill_seconds(
            m, fmt, kv_dtype_bytes, dev, prompt=prompt, tp=tp, prompts=prompts
        )
        out = np.where(own, out, batched)
    return np.asarray(out, dtype=np.float64)
