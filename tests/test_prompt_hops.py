"""A prompt's activations cross every pipeline hop (docs/networks.md, "What a hop costs"): the
bytes a hop carries in an iteration with a prompt chunk, the sampled token ids that go back
from the last stage, and the time to first token and the iterations that grow by exactly the
hops' extra time. Figures by hand arithmetic from Llama 3.1 70B's hidden size (8,192, its
config.json) and 16-bit activations."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.estimator.comm import TOKEN_ID_BYTES
from planner.estimator.network import network_link
from planner.estimator.replica import (
    IterationTime,
    StageSpec,
    hop_bytes,
    hop_seconds,
    inference_replica,
)
from planner.estimator.routes import Route
from planner.estimator.serving import chunk_mix, prefill_room
from planner.load import load_problem
from planner.schema.catalog import Link

HIDDEN = 8192
POOL = Path(__file__).resolve().parent.parent / "problems" / "owners-pool.yaml"


def test_a_prompt_chunk_sends_its_hidden_states_forward_and_ids_back() -> None:
    """A 256-token chunk of Llama 70B is 256 x 8,192 x 2 = 4,194,304 bytes per hop (4.2 MB),
    a 2,000-token prompt 32,768,000; with 8 decodes besides, 264 tokens cross. Back from the
    last stage go the sampled ids: one per decode and per prompt finished, 8 bytes each."""
    fwd, back = hop_bytes(0.0, 256.0, 256, HIDDEN)
    assert float(fwd) == 4_194_304
    assert float(back) == 1 * TOKEN_ID_BYTES == 8  # the chunk is the whole prompt: one id
    fwd, back = hop_bytes(0.0, 2000.0, 2000, HIDDEN)
    assert float(fwd) == 32_768_000
    fwd, back = hop_bytes(8.0, 256.0, 512, HIDDEN)
    assert float(fwd) == 264 * HIDDEN * 2 == 4_325_376
    assert float(back) == (8 + 0.5) * 8 == 68  # half a 512-token prompt finishes


def _link(gbit_s: float, latency_ms: float) -> Link:
    return Link(
        id=f"lan-{gbit_s}",
        name="a LAN",
        kind="ethernet",
        scope="inter-node",
        bandwidth_gb_s=gbit_s / 8,
        latency_us=latency_ms * 1e3,
        sources={"spec": "problem-file"},
    )


def test_a_hop_takes_the_latencies_and_the_bytes_over_the_slowest_link() -> None:
    """Over 1 Gb/s (125 MB/s) with 0.5 ms: 0.5 ms + 4,194,304 / 125e6 s = 34.05 ms for the
    256-token chunk, 0.5 ms + 32,768,000 / 125e6 = 262.6 ms for the 2,000-token prompt; over a
    100 Mb/s VPN (10 ms) behind the LAN, 10.5 ms + 4,194,304 / 12.5e6 s = 346.0 ms. The last
    stage's hop carries 8 bytes, its latency's worth: 0.5 ms + 8 / 125e6 s."""
    cat = load_catalog()
    dev = cat.accelerator("rtx-5060-ti-16gb")
    lan, vpn = _link(1, 0.5), _link(0.1, 10)
    stages = [StageSpec(dev, 1, 40), StageSpec(dev, 1, 40)]
    fwd, back = hop_bytes(0.0, 256.0, 256, HIDDEN)
    got = [float(h) for h in hop_seconds(stages, lan, fwd, back)]
    assert got == pytest.approx([0.5e-3 + 4_194_304 / 125e6, 0.5e-3 + 8 / 125e6], rel=1e-12)
    assert got[0] == pytest.approx(34.05e-3, abs=1e-5)
    fwd, _ = hop_bytes(0.0, 2000.0, 2000, HIDDEN)
    assert float(Route((lan,)).seconds(fwd)) == pytest.approx(0.2626, abs=1e-4)
    far = [StageSpec(dev, 1, 40, hop=Route((lan, vpn))), StageSpec(dev, 1, 40)]
    fwd, back = hop_bytes(0.0, 256.0, 256, HIDDEN)
    assert float(hop_seconds(far, lan, fwd, back)[0]) == pytest.approx(
        10.5e-3 + 4_194_304 / 12.5e6, rel=1e-12
    )


def _replica(link: Link, prompt: int, output: int, batch: int) -> tuple[float, float, float]:
    cat = load_catalog()
    m = cat.model("llama-3.1-70b")
    dev = cat.accelerator("rtx-5060-ti-16gb")
    stages = [StageSpec(dev, 1, 40), StageSpec(dev, 1, 40)]
    fig = inference_replica(
        m, "q4_k_m", "q8_0", batch=batch, context=4096, prompt=prompt, output=output,
        stages=stages, link=link,
    )  # fmt: skip
    return fig.ttft_s, fig.step_seconds, fig.stages[0].seconds


@pytest.mark.parametrize("prompt", [200, 256])
def test_the_first_token_grows_by_exactly_the_hops_of_its_chunk(prompt: int) -> None:
    """Two stages, batch 4, a prompt of one chunk (200 or 256 tokens: at most the room,
    max(256, ceil(1.5 x 4 x P / O)) with O = 1,000, catalog serving.yaml). The same pipeline over
    1 Gb/s and over 10 Gb/s (latency alike): every stage of the one kind is charged its slowest
    hop, the forward one. A step with the chunk carries (4 + P) x 8,192 x 2 bytes per hop, a
    decode-only step 4 x 8,192 x 2; the round is S x the slowest stage, so the first token (half
    a mean round, then the chunk's round: serving.closed_ttft) grows by
    S x (1 + f / 2) x the chunk hop's extra time + S x (1 - f) / 2 x the decode hop's, f the
    share of steps with a chunk (4 x P / 1,000 prompt tokens a step in chunks of P)."""
    batch, output, S = 4, 1000, 2
    assert prefill_room(batch, prompt, output) >= prompt  # one chunk
    c, f = chunk_mix(batch, prompt, output, batch * prompt / output)
    assert c == prompt and f == pytest.approx(4 / 1000)
    slow_ttft, slow_t, slow_stage = _replica(_link(1, 0.5), prompt, output, batch)
    fast_ttft, fast_t, fast_stage = _replica(_link(10, 0.5), prompt, output, batch)

    def extra(nbytes: float) -> float:  # the same bytes over 1 Gb/s rather than 10 Gb/s
        return nbytes / 125e6 - nbytes / 1.25e9

    chunk_hop, decode_hop = extra((batch + prompt) * HIDDEN * 2), extra(batch * HIDDEN * 2)
    mean_hop = (1 - f) * decode_hop + f * chunk_hop
    assert slow_t - fast_t == pytest.approx(mean_hop, rel=1e-9)
    assert slow_stage - fast_stage == pytest.approx(mean_hop, rel=1e-9)
    want = 0.5 * S * mean_hop + S * chunk_hop
    assert slow_ttft - fast_ttft == pytest.approx(want, rel=1e-9)
    # 256 tokens: (4 + 256) x 16,384 = 4,259,840 bytes, 34.08 ms at 1 Gb/s against 3.41 ms at
    # 10 Gb/s: 30.67 ms more per hop, over 61 ms more to the first token of two stages.
    if prompt == 256:
        assert chunk_hop == pytest.approx(0.0306708, abs=1e-7)
        assert slow_ttft - fast_ttft > 2 * 0.0306


def test_each_iteration_carries_its_own_tokens_across_the_hops() -> None:
    """The queueing model's iteration time (IterationTime) on the owners' pool network (1 Gb/s,
    0.5 ms, problems/owners-pool.yaml) against the same at 10 Gb/s: at every grid point of n
    decodes and p prompt tokens, S x the hop's extra time for (n + p) x 8,192 x 2 bytes (the
    slowest stage's step holds the hop, one kind of stage)."""
    cat = load_catalog()
    m = cat.model("llama-3.1-70b")
    dev = cat.accelerator("rtx-5060-ti-16gb")
    home = network_link(load_problem(POOL), cat)
    assert (home.bandwidth_gb_s, home.latency_us) == (0.125, 500)  # 1 Gb/s, 0.5 ms
    fast = home.model_copy(update={"bandwidth_gb_s": 1.25})
    stages = [StageSpec(dev, 1, 27), StageSpec(dev, 1, 27), StageSpec(dev, 1, 26)]
    kw = dict(batch=8, context=4096, prompt=512, output=256, stages=stages)
    slow_it = IterationTime(m, "q4_k_m", "q8_0", link=home, **kw)  # type: ignore[arg-type]
    fast_it = IterationTime(m, "q4_k_m", "q8_0", link=fast, **kw)  # type: ignore[arg-type]
    for n in (1.0, 8.0):
        for p in (0.0, float(slow_it.p_grid[-1])):
            nbytes = (n + p) * HIDDEN * 2
            want = 3 * (nbytes / 0.125e9 - nbytes / 1.25e9)
            got = slow_it(n, p) - fast_it(n, p)
            assert math.isclose(got, want, rel_tol=1e-9), (n, p, got, want)
    # A 256-token chunk besides 8 decodes (between grid points: the hop is linear in the
    # tokens): 264 x 16,384 = 4,325,376 bytes, 34.60 ms at 1 Gb/s against 3.46 ms at 10 Gb/s
    # per hop, 3 x 31.14 ms = 93.43 ms more per round of three stages.
    assert slow_it(8.0, 256.0) - fast_it(8.0, 256.0) == pytest.approx(0.0934281, abs=1e-7)


def test_the_quick_estimate_sends_the_prompt_across_its_pipeline() -> None:
    """`planner estimate` at a given degree: a pipeline of S stages waits S - 1 hops of 100 GbE
    (12.5 GB/s, 20 us; estimate.ETHERNET_HOP) before the first token, each carrying the whole
    prompt: 2,000 x 8,192 x 2 = 32,768,000 bytes, 20 us + 2.62 ms, not one decode step's."""
    from planner.estimator.cost import Economics
    from planner.estimator.devices import device_table
    from planner.estimator.estimate import InferenceQuery, estimate_inference
    from planner.estimator.formats import weight_format
    from planner.estimator.perf import prefill_seconds

    cat = load_catalog()
    m = cat.model("llama-3.1-70b")
    dev = device_table([cat.accelerator("rtx-4090")])
    q = InferenceQuery(weights="fp16", kv="fp16", context=4096, batch=4, prompt=2000, tp=1)
    (row,) = estimate_inference(m, dev, q, Economics())
    stages = row.devices_needed
    assert row.parallelism == f"pipeline {stages}" and stages > 1
    alone = float(prefill_seconds(m, weight_format("fp16"), dev, batch=1, prompt=2000, tp=1)[0])
    hop = 20e-6 + 32_768_000 / 12.5e9
    assert hop == pytest.approx(2.6414e-3, abs=1e-7)
    assert row.prefill_s == pytest.approx(alone + (stages - 1) * hop, rel=1e-9)


def test_a_kind_is_its_device_id_not_the_entry_object() -> None:
    # A plan's stages each take their own derated copy of a consumer card (hosts.sustained)
    # where a design's stages share one entry: the kind-wide hop (replica.kind_hops) must group
    # them alike, or the verifier charges the last stage its own small return hop and disagrees
    # with the plan by the difference (a two-stage RTX 5090 pipeline failed verification so).
    from planner.estimator.replica import StageSpec, kind_hops

    acc = load_catalog().accelerator("rtx-5090")
    copy_a, copy_b = acc.model_copy(), acc.model_copy()
    assert copy_a is not copy_b
    stages = [StageSpec(copy_a, 1, 16), StageSpec(copy_b, 1, 16)]
    assert kind_hops(stages, [3.0, 1.0]) == [3.0, 3.0]
