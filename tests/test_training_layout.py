"""A training run's parallel layout in time: pipeline bubble, tensor-parallel all-reduces and the
expert-parallel all-to-all (planner.estimator.training_layout), pinned to hand arithmetic on the
layouts published runs state (calibration/measurements.yaml)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.estimator.devices import device_table
from planner.estimator.formats import weight_format
from planner.estimator.perf import training_tokens_per_second
from planner.estimator.training_layout import (
    TrainingLayout,
    alltoall_copies,
    alltoall_seconds_per_token,
    layout_from_notes,
    layout_tokens_per_second,
    pipeline_bubble_fraction,
    tensor_parallel_seconds_per_token,
)

NDR = 50e9  # InfiniBand NDR 400 Gb/s per GPU (catalog/links.yaml `ib-ndr`)


def test_notes_give_the_layout_the_tables_publish() -> None:
    # megatron-moe-modelzoo-qwen3 (Qwen3-235B-A22B on 256 H100s)
    notes = (
        "TP2 PP8 VPP4 EP32 DP16, GBS 2048, DeepEP, recompute norm and activation, "
        "1F1B all-to-all overlap; 17.6 s per step"
    )
    got = layout_from_notes(notes, 256)
    assert (got.tensor, got.pipeline, got.virtual, got.expert, got.context) == (2, 8, 4, 32, 1)
    assert got.global_batch == 2048 and got.node_dedup and got.overlap_alltoall
    assert got.data_parallel == 16  # 256 / (2 x 8), as the notes say
    plain = layout_from_notes("Llama 3 8B, FSDP2 on 64 A100 80GB, local batch 1", 64)
    assert plain == TrainingLayout(devices=64)


def test_pipeline_bubble_is_narayanans() -> None:
    # Megatron-Bridge Llama 3 70B on 64 H100s: TP4 PP8 VP5, GBS 128 -> DP 2, 64 micro-batches;
    # interleaved bubble (p - 1) / (v m) = 7 / 320 (Narayanan et al. 2021, section 2.2.2).
    seventy = layout_from_notes("LLAMA3_70B, FP8-CS, TP4 PP8 VP5, GBS 128", 64)
    assert seventy.micro_batches == 64
    assert pipeline_bubble_fraction(seventy) == pytest.approx(7 / 320)
    # DGX Cloud DeepSeek-V3 on 1,024 H100s: TP2 PP16, GBS 8192 -> DP 32, m = 256, 1F1B: 15 / 256.
    dgxc = layout_from_notes("TP2 PP16 EP64 DP32, GBS 8192", 1024)
    assert pipeline_bubble_fraction(dgxc) == pytest.approx(15 / 256)
    # Megatron-Bridge gpt-oss-120b on 64 H100s: PP4 EP8, GBS 512, MBS 4 -> DP 16, 512 / (16 x 4)
    # = 8 micro-batches of 4 sequences, 1F1B: 3 / 8 (a micro-batch of 1 would give 3 / 32).
    oss = layout_from_notes("GPT OSS 120B, BF16, PP4 EP8, GBS 512, MBS 4; pre-training", 64)
    assert (oss.micro_batch, oss.micro_batches) == (4, 8)
    assert pipeline_bubble_fraction(oss) == pytest.approx(3 / 8)
    # No pipeline, or no stated global batch (the micro-batch count is then unknown): none.
    assert pipeline_bubble_fraction(layout_from_notes("EP8, GBS 512", 8)) == 0.0
    assert pipeline_bubble_fraction(layout_from_notes("TP8 CP1 PP16 DP64", 8192)) == 0.0


def test_alltoall_copies_with_and_without_node_deduplication() -> None:
    # DeepSeek-V3 (8 routed experts per token) over EP64 in 8-GPU servers: 56 of the 64 ranks
    # are in other servers, so 8 x 56 / 64 = 7 copies cross the network and 8 x 7 / 64 = 0.875
    # stay on NVLink; deduplicated per server, 7 (1 - (7/8)^8) = 4.595 cross it (each server hit
    # once) and every copy off the GPU crosses NVLink once: 7.875.
    assert alltoall_copies(8, 64, 8, node_dedup=False) == pytest.approx((7.0, 0.875))
    net, fabric = alltoall_copies(8, 64, 8, node_dedup=True)
    assert net == pytest.approx(7 * (1 - (7 / 8) ** 8))
    assert fabric == pytest.approx(7.875)
    # Inside one scale-up domain (EP8 in a server, EP32 in an NVL72 rack): no network copy.
    assert alltoall_copies(8, 8, 8, node_dedup=False) == pytest.approx((0.0, 7.0))
    assert alltoall_copies(8, 32, 72, node_dedup=True) == pytest.approx((0.0, 8 * 31 / 32))


def test_alltoall_seconds_by_hand() -> None:
    """DeepSeek-V3 on H100s at EP64 without deduplication: 4 transfers x 7,168 x 2 bytes x 58
    MoE layers = 3.33 MB per token, 7 copies at 50 GB/s and 0.875 at NVLink's 450 GB/s:
    472 us per token, a third of the 1,494-1,588 us per token the DGX Cloud recipes measure."""
    cat = load_catalog()
    m = cat.model("deepseek-v3")
    table = device_table([cat.accelerator("h100-sxm")], links=cat.links)
    layout = layout_from_notes("TP2 PP16 EP64 DP32, GBS 8192", 1024)
    got = alltoall_seconds_per_token(m, layout, table.scale_up_bytes_s, table.domain_size, NDR)
    per_token = 4 * 7168 * 2 * 58
    assert float(got[0]) == pytest.approx(per_token * (7 / NDR + 0.875 / 450e9), rel=1e-9)
    assert float(got[0]) == pytest.approx(472e-6, rel=0.01)
    dense = cat.model("llama-3.1-70b")
    zero = alltoall_seconds_per_token(dense, layout, table.scale_up_bytes_s, table.domain_size, NDR)
    assert list(zero) == [0.0]


def test_layout_rate_adds_its_costs_to_the_device_rate() -> None:
    """The run's rate is the device's with the all-to-all and the tensor-parallel all-reduces
    added to each token's time and the step stretched by the bubble; an overlapped all-to-all
    costs only what exceeds the compute beside it."""
    cat = load_catalog()
    m = cat.model("deepseek-v3")
    table = device_table([cat.accelerator("h100-sxm")], links=cat.links)
    base = training_tokens_per_second(m, table, seq_len=4096, precision_fmt=weight_format("bf16"))
    layout = layout_from_notes("TP2 PP16 EP64 DP32, GBS 8192", 1024)
    a2a = alltoall_seconds_per_token(m, layout, table.scale_up_bytes_s, table.domain_size, NDR)
    tp = tensor_parallel_seconds_per_token(m, table, layout, 4096, "selective")
    assert float(tp[0]) > 0.0
    got = layout_tokens_per_second(
        base, m, table, layout, seq_len=4096, recompute="selective", network_bytes_s=NDR
    )
    want = 1.0 / ((1.0 / base + a2a + tp) * (1.0 + 15 / 256))
    assert np.allclose(got, want, rtol=1e-12)
    hidden = TrainingLayout(devices=1024, expert=64, overlap_alltoall=True)
    got_hidden = layout_tokens_per_second(
        base, m, table, hidden, seq_len=4096, recompute="selective", network_bytes_s=NDR
    )
    assert np.allclose(got_hidden, base)  # 472 us of all-to-all under more compute per token
    assert float(1.0 / base[0]) > float(a2a[0])


def test_tensor_parallel_time_is_zero_without_tensor_parallelism() -> None:
    cat = load_catalog()
    table = device_table([cat.accelerator("h100-sxm")], links=cat.links)
    m = cat.model("llama-3.1-8b")
    got = tensor_parallel_seconds_per_token(m, table, TrainingLayout(devices=8), 8192, "selective")
    assert list(got) == [0.0]


@pytest.mark.parametrize(
    "notes",
    [
        "TP2 PP8 VPP4 EP32, GBS 2048, DeepEP, 1F1B all-to-all overlap",
        "TP=2, PP=8, VPP=4, EP=32, GBS=2,048, DeepEP, all-to-all overlap",
        "TP 2 PP 8 VP 4 EP: 32; global batch size 2048; deepep; All-to-all overlap",
    ],
)
def test_notes_written_with_separators_give_the_same_layout(notes: str) -> None:
    # The same published layout (Qwen3-235B-A22B on 256 H100s) however the sizes are written;
    # before, "TP=2" or "GBS=2048" read as TP 1 and no global batch, silently timing another
    # layout (no bubble: PP 8 x VPP 4 over 2048 / 16 = 128 micro-batches is 7 / 512 = 1.4 %).
    got = layout_from_notes(notes, 256)
    assert (got.tensor, got.pipeline, got.virtual, got.expert) == (2, 8, 4, 32)
    assert got.global_batch == 2048 and got.node_dedup and got.overlap_alltoall
    assert pipeline_bubble_fraction(got) == pytest.approx(7 / (4 * 128))


def test_denied_features_are_not_read_as_stated() -> None:
    got = layout_from_notes("EP8, GBS 512, without DeepEP, no all-to-all overlap", 8)
    assert got.expert == 8 and not got.node_dedup and not got.overlap_alltoall


def test_a_layout_that_does_not_divide_the_devices_is_an_error() -> None:
    # TP8 x PP16 = 128 ranks per replica on 64 devices: no such run; the error names the notes.
    with pytest.raises(ValueError, match="TP8 PP16"):
        layout_from_notes("TP8 PP16, GBS 512", 64)


@pytest.mark.parametrize(
    "notes",
    [
        # 64 devices at PP4: 16 data-parallel ranks. 512 sequences are 8 micro-batches of 4 per
        # rank, but not a whole number of micro-batches of 3 (512 / 48 = 10.67), which a
        # launcher refuses (Megatron-Core's ConstantNumMicroBatchesCalculator asserts it):
        # floored to 10, the bubble would read 3 / 10 instead of an error.
        "PP4 EP8, GBS 512, MBS 3",
        "PP4 EP8, GBS 32, MBS 4",  # 32 sequences are less than one micro-batch per rank (64)
        "PP4 EP8, GBS 512, MBS 0",  # no sequence in a micro-batch: not read as 1
    ],
)
def test_a_global_batch_that_is_no_whole_number_of_micro_batches_is_an_error(notes: str) -> None:
    with pytest.raises(ValueError, match="MBS"):
        layout_from_notes(notes, 64)
    # The stated sizes that divide read as they are: 512 / (16 x 4) = 8 micro-batches.
    assert layout_from_notes("PP4 EP8, GBS 512, MBS 4", 64).micro_batches == 8


@pytest.mark.parametrize(
    ("notes", "sizes"),
    [
        ("llama3_70b_tp4_pp8_vp5_gbs128", (4, 8, 5, 1, 1, 128)),  # a recipe's name
        ("TP2PP8EP32, GBS 2048", (2, 8, 1, 1, 32, 2048)),  # run on, without spaces
        ("ETP1 EP8 FSDP8, GBS 512", (1, 1, 1, 1, 8, 512)),  # ETP is not TP, FSDP not DP
        ("DeepEP32 dispatcher, EP8, GBS 512", (1, 1, 1, 1, 8, 512)),  # DeepEP32 is not EP32
    ],
)
def test_sizes_next_to_other_text(notes: str, sizes: tuple[int, ...]) -> None:
    # Before, a size had to stand between word boundaries: "_tp4_" and "TP2PP8" read as 1.
    got = layout_from_notes(notes, 256)
    tp, pp, vp, cp, ep = got.tensor, got.pipeline, got.virtual, got.context, got.expert
    assert (tp, pp, vp, cp, ep, got.global_batch) == sizes
