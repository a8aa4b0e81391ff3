"""The FLOP rate a forward pass's matrix products reach, per engine kernel family (Engine.kernels).

Two figures of achieved / peak FLOPs exist, fitted on different engines' measurements:

- `compute` (catalog/efficiency.yaml), fitted by calibration/fit.py on single-prompt prefill
  rows, all of them llama.cpp's prompt processing, and counted against the rates of llama.cpp's
  own kernels (planner.estimator.prefill_path);
- the batched serving figures (catalog/serving.yaml `batched_compute`, per tensor path and
  vendor; DeviceTable.batched_compute), fitted by benchmarks/serving/run.py on published
  vLLM, SGLang and TensorRT-LLM serving results, and charged by the serving grid's iteration
  (perf.serving_layer_seconds).

A matrix product is run by the engine's kernels whatever the phase, so a decode step's products
(its block and its output head) take the figure of the engine's family: llama.cpp's factor on
llama.cpp's families, the serving figure on every other engine's. One engine's decode step is
then the same number in `planner estimate`, in a plan's serving iteration and in the
calibration's check of published fixed-batch throughputs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.estimator.devices import Array, DeviceTable
from planner.estimator.formats import WeightFormat
from planner.estimator.prefill_path import Kernels, on_llama_cpp


def llama_rows(dev: DeviceTable, kernels: Kernels) -> npt.NDArray[np.bool_]:
    """True for each device row on one of llama.cpp's kernel families (`kernels`: one for all
    rows or one per row; None: a current llama.cpp release's, as prefill_path.on_llama_cpp)."""
    if kernels is None or isinstance(kernels, str):
        return np.full(len(dev), on_llama_cpp(kernels))
    return np.array([on_llama_cpp(k) for k in kernels], dtype=bool)


def matmul_flops(dev: DeviceTable, fmt: WeightFormat, kernels: Kernels) -> Array:
    """Achieved FLOP/s of a forward pass's matrix products on weights in `fmt`, per device row:
    the format's dense peak (DeviceTable.peak_flops) times the class's single-prompt `compute`
    factor on llama.cpp's kernel families (llama_rows), times the batched serving figure of the
    format's tensor path (DeviceTable.batched_compute) on any other engine's."""
    share = np.where(llama_rows(dev, kernels), dev.eff_compute, dev.batched_compute(fmt))
    return np.asarray(dev.peak_flops(fmt) * share, dtype=np.float64)
