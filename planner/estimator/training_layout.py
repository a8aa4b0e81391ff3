"""What a training job's parallel layout costs beyond its FLOPs: the pipeline's idle time and the
expert-parallel all-to-all of a mixture-of-experts model.

`perf.training_tokens_per_second` is one device's rate at the class's MFU with the experts of a
MoE model inside its scale-up domain. A published run states its layout (tensor, pipeline,
virtual-pipeline, context and expert-parallel sizes, global batch, devices); this module turns
that layout into time:

- Pipeline bubble (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", sections 2.2.1 and 2.2.2): with p stages and m micro-batches per
  step the 1F1B schedule idles (p - 1) / m of the ideal step time; the interleaved schedule with
  v model chunks per device cuts that to (p - 1) / (v m).
- Tensor-parallel all-reduces: the planner's own charge (perf.training_tp_seconds_per_layer).
- Expert-parallel all-to-all (DeepSeek-V3 technical report, section 3.2.2; Megatron-Core MoE
  docs, token dispatcher `alltoall`): every MoE layer sends each token's hidden vector to the
  ranks holding its k routed experts (dispatch) and brings the k outputs back (combine), in the
  forward pass and, as their gradients, in the backward pass: four transfers of k x h 16-bit
  values per token and layer. An expert on another rank of the scale-up domain costs a copy over
  the scale-up fabric; one on another node costs a copy over the scale-out network. A dispatcher
  that deduplicates by node (DeepEP's internode kernels, written for DeepSeek-V3's
  "IB then NVLink forwarding", same section) sends a token over the network once per
  destination node and forwards it inside that node over NVLink.

The planner's own jobs (training_designs) pay the same all-to-all at the expert-parallel size
their stage's devices and scale-up domain give (job_expert_parallel,
job_alltoall_seconds_per_token), so a plan's MoE training figure carries what the calibrated
runs were charged apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.estimator.devices import DeviceTable
from planner.estimator.expert_parallel import job_expert_parallel
from planner.estimator.perf import training_tp_seconds_per_layer
from planner.schema.catalog import ModelArch

Array = npt.NDArray[np.float64]

# Dispatch and combine, forward and backward (DeepSeek-V3 report, section 3.2.2; Megatron-Core's
# alltoall token dispatcher runs the same two collectives in each direction).
ALLTOALL_PASSES = 4
ALLTOALL_BYTES_PER_VALUE = 2.0  # BF16 activations and gradients


@dataclass(frozen=True)
class TrainingLayout:
    """A training run's parallel layout, as Megatron-style launchers and benchmark tables state
    it. `global_batch` is in sequences, `micro_batch` in sequences per pipeline micro-batch."""

    devices: int
    tensor: int = 1
    pipeline: int = 1
    virtual: int = 1
    context: int = 1
    expert: int = 1
    global_batch: int | None = None
    micro_batch: int = 1
    node_dedup: bool = False  # all-to-all sent once per node, forwarded over NVLink (DeepEP)
    overlap_alltoall: bool = False  # all-to-all hidden behind another micro-batch's compute

    @property
    def data_parallel(self) -> int:
        return max(self.devices // (self.tensor * self.pipeline * self.context), 1)

    @property
    def micro_batches(self) -> int | None:
        """Micro-batches per step of one pipeline, or None if the global batch is not known."""
        if self.global_batch is None:
            return None
        return max(self.global_batch // (self.data_parallel * self.micro_batch), 1)


def pipeline_bubble_fraction(layout: TrainingLayout) -> float:
    """Idle time over the ideal step time (Narayanan et al. 2021, sections 2.2.1-2.2.2):
    (p - 1) / (v m) for p stages, v chunks per device, m micro-batches; 0 without a pipeline, and 0
    where the global batch is not stated (m, and so the bubble, is then not known)."""
    p, m = layout.pipeline, layout.micro_batches
    if p <= 1 or m is None:
        return 0.0
    return (p - 1) / (layout.virtual * m)


def alltoall_copies(k: int, expert: int, domain: int, node_dedup: bool) -> tuple[float, float]:
    """(copies of a token's hidden vector over the network, copies over the scale-up fabric) per
    MoE layer and transfer, for k routed experts spread uniformly over an expert-parallel group of
    `expert` ranks in scale-up domains of `domain` devices (a balanced gate). Without
    deduplication each expert on another node is one network copy: k (E - G) / E. With it, one
    network copy per other node holding any of the k experts: (n - 1)(1 - (1 - 1/n)^k) for
    n = E / G nodes, and every copy off the sending device crosses the scale-up fabric once."""
    g = min(expert, domain)
    n = expert / g
    other_nodes = k * (expert - g) / expert
    same_node = k * (g - 1) / expert
    if not node_dedup or n <= 1:
        return other_nodes, same_node
    nodes_hit = (n - 1) * (1.0 - (1.0 - 1.0 / n) ** k)
    return nodes_hit, same_node + other_nodes


def alltoall_seconds_per_token(
    m: ModelArch,
    layout: TrainingLayout,
    scale_up_bytes_s: Array,
    domain_size: Array,
    network_bytes_s: float,
) -> Array:
    """Seconds per token (per device, one row per device) of the expert-parallel all-to-all of
    a MoE model (zero for a dense model or expert parallelism 1): ALLTOALL_PASSES transfers per
    MoE layer of the copies `alltoall_copies` counts, each h 16-bit values, at the scale-up
    fabric's and the network's bandwidth per device."""
    rows = np.zeros(len(np.atleast_1d(scale_up_bytes_s)))
    if m.moe is None or layout.expert <= 1:
        return rows
    moe_layers = m.num_layers - m.moe.first_dense_layers
    vec = m.hidden_size * ALLTOALL_BYTES_PER_VALUE * ALLTOALL_PASSES * moe_layers
    out = []
    for bw, dom in zip(np.atleast_1d(scale_up_bytes_s), np.atleast_1d(domain_size), strict=True):
        net, fabric = alltoall_copies(
            m.moe.experts_per_token, layout.expert, int(dom), layout.node_dedup
        )
        out.append(vec * (net / network_bytes_s + fabric / float(bw)))
    return rows + np.asarray(out, dtype=np.float64)


def job_alltoall_seconds_per_token(
    m: ModelArch, dev: DeviceTable, stage_devices: npt.NDArray[np.int64], network_bytes_s: float
) -> Array:
    """Seconds per token, one row per device and one column per entry of `stage_devices` (the
    devices of one pipeline stage of a job), of the expert-parallel all-to-all the planner's jobs
    pay: alltoall_seconds_per_token at the expert-parallel size job_expert_parallel gives,
    neither deduplicated by node nor overlapped (Megatron-Core's alltoall dispatcher defaults:
    no DeepEP, no 1F1B all-to-all overlap). Zero for a dense model."""
    n = np.atleast_1d(np.asarray(stage_devices, dtype=np.int64))
    out = np.zeros((len(dev.devices), len(n)))
    if m.moe is None:
        return out
    for i in range(len(dev.devices)):
        dom = int(dev.domain_size[i])
        for ep in {job_expert_parallel(m, dom, int(x)) for x in n.tolist()}:
            layout = TrainingLayout(devices=ep, expert=ep)
            one = alltoall_seconds_per_token(
                m,
                layout,
                dev.scale_up_bytes_s[i : i + 1],
                dev.domain_size[i : i + 1],
                network_bytes_s,
            )
            cols = [j for j, x in enumerate(n.tolist()) if job_expert_parallel(m, dom, x) == ep]
            out[i, cols] = float(one[0])
    return out


def with_alltoall(
    base_tps: npt.NDArray[np.float64], alltoall_s: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """One device's tokens/s with the expert-parallel all-to-all added to each token's time, not
    overlapped (layout_tokens_per_second charges the calibration rows alike):
    `base_tps` per device row, `alltoall_s` per row and stage size (rows x sizes): the
    planner's jobs (training_designs) and `planner estimate --task full` (estimate) alike."""
    base = base_tps[:, None] * np.ones_like(alltoall_s)
    # Exactly `base_tps` where nothing is charged (a dense model), not its double reciprocal.
    out: npt.NDArray[np.float64] = np.where(alltoall_s > 0, 1.0 / (1.0 / base + alltoall_s), base)
    return out


def tensor_parallel_seconds_per_token(
    m: ModelArch, dev: DeviceTable, layout: TrainingLayout, seq_len: int, recompute: str
) -> Array:
    """Seconds per token (per device, one row per device) of the tensor-parallel group's
    all-reduces, as the planner's jobs charge them (perf.training_tp_seconds_per_layer:
    Megatron-LM's two per block in the forward pass, two in the backward, not overlapped), for a
    micro-batch of seq_len x micro_batch tokens split over the context-parallel ranks. A group of
    t devices spends that time on its micro-batch, 1 / t of it per device-token."""
    if layout.tensor <= 1:
        return np.zeros(len(dev.devices))
    tokens = seq_len * layout.micro_batch / layout.context
    per_layer = training_tp_seconds_per_layer(m, dev, tokens, layout.tensor, recompute)
    return np.asarray(per_layer * m.num_layers * layout.tensor / tokens, dtype=np.float64)


def layout_tokens_per_second(
    base_tps: Array,
    m: ModelArch,
    dev: DeviceTable,
    layout: TrainingLayout,
    *,
    seq_len: int,
    recompute: str,
    network_bytes_s: float,
) -> Array:
    """Tokens/s per device of a run with this layout, from one device's rate `base_tps`
    (perf.training_tokens_per_second): the tensor-parallel all-reduces and the expert-parallel
    all-to-all added to each token's time (the all-to-all, where the run overlaps it with another
    micro-batch's compute as DualPipe and Megatron-Core's 1F1B all-to-all overlap do, only as far
    as it exceeds that compute), then the step stretched by the pipeline bubble."""
    compute = 1.0 / np.asarray(base_tps, dtype=np.float64)
    a2a = alltoall_seconds_per_token(
        m, layout, dev.scale_up_bytes_s, dev.domain_size, network_bytes_s
    )
    exposed = np.maximum(a2a - compute, 0.0) if layout.overlap_alltoall else a2a
    tp = tensor_parallel_seconds_per_token(m, dev, layout, seq_len, recompute)
    out: Array = 1.0 / ((compute + tp + exposed) * (1.0 + pipeline_bubble_fraction(layout)))
    return out


_SIZES = {"tensor": "TP", "pipeline": "PP", "virtual": "VPP?", "context": "CP", "expert": "EP"}
# A size as the tables write it, "TP2", or with a separator, "TP 2", "TP=2", "TP: 2".
_SEP = r"\s*[=:]?\s*"
_GBS = re.compile(rf"(?<![A-Za-z])(?:GBS|global batch(?: size)?){_SEP}(\d[\d,]*)", re.IGNORECASE)
_MBS = re.compile(rf"(?<![A-Za-z])(?:MBS|micro[- ]batch(?: size)?){_SEP}(\d+)", re.IGNORECASE)
_NOT = r"\b(?:no|not|without|w/o)\s+(?:\w+\s+)?"


def _stated(notes: str, phrase: str) -> bool:
    """Whether `notes` say `phrase` and do not deny it ("no DeepEP", "without all-to-all
    overlap")."""
    said = re.search(re.escape(phrase), notes, re.IGNORECASE) is not None
    denied = re.search(_NOT + re.escape(phrase), notes, re.IGNORECASE) is not None
    return said and not denied


def layout_from_notes(notes: str, devices: int) -> TrainingLayout:
    """The layout a measurement's notes state in the benchmark tables' own words ("TP2 PP8 VPP4
    EP32", "GBS 2048", "DeepEP", "all-to-all overlap"); sizes not stated are 1. A layout whose
    tensor x pipeline x context ranks do not divide the run's devices is an error naming the
    notes (a misread or mistyped size would otherwise time another layout)."""
    sizes = {}
    for key, tag in _SIZES.items():
        # Not after a letter (FSDP is no DP, DeepEP no EP, ETP no TP) but after anything else,
        # so a recipe name's "llama3_70b_tp4_pp8" and a run-on "TP2PP8" read too.
        hit = re.search(rf"(?<![A-Za-z]){tag}{_SEP}(\d+)(?!\d)", notes, re.IGNORECASE)
        sizes[key] = int(hit.group(1)) if hit else 1
    gbs = _GBS.search(notes)
    mbs = _MBS.search(notes)
    group = sizes["tensor"] * sizes["pipeline"] * sizes["context"]
    if min(sizes.values()) < 1 or devices % group:
        raise ValueError(
            f"notes {notes!r}: TP {sizes['tensor']} x PP {sizes['pipeline']} x CP "
            f"{sizes['context']} = {group} ranks per model replica do not divide the row's "
            f"{devices} devices; correct the sizes in the notes or the row's `devices`"
        )
    layout = TrainingLayout(
        devices=devices,
        global_batch=int(gbs.group(1).replace(",", "")) if gbs else None,
        micro_batch=int(mbs.group(1)) if mbs else 1,
        node_dedup=_stated(notes, "DeepEP"),
        overlap_alltoall=_stated(notes, "all-to-all overlap"),
        **sizes,
    )
    _check_batches(notes, layout)
    return layout


def _check_batches(notes: str, layout: TrainingLayout) -> None:
    """A stated micro-batch is at least one sequence, and a stated global batch is a whole
    number of micro-batches per data-parallel rank: Megatron-Core's micro-batch calculator
    asserts that the global batch divides by micro-batch x data-parallel size
    (megatron/core/num_microbatches_calculator.py,
    ConstantNumMicroBatchesCalculator), as gradient accumulation does in every
    other stack. Otherwise a misread or mistyped size would time another pipeline bubble."""
    mbs, gbs, dp = layout.micro_batch, layout.global_batch, layout.data_parallel
    if mbs < 1:
        raise ValueError(f"notes {notes!r}: MBS {mbs}: a micro-batch holds at least one sequence")
    if gbs is not None and (gbs < mbs * dp or gbs % (mbs * dp)):
        raise ValueError(
            f"notes {notes!r}: GBS {gbs} is not a whole number (at least one) of micro-batches of "
            f"MBS {mbs} "
            f"sequences on each of the {dp} data-parallel ranks; correct GBS or MBS in the "
            "notes, or the row's `devices`"
        )
