"""benchmarks/pooled: the published rows validate and map to catalog ids, the script scores every
expressible row, and one row's figure is the hand arithmetic below."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import pytest
import yaml
from bench_scripts import ROOT, load_script

from planner.catalog import load_catalog
from planner.estimator.built_in_link import built_in_link, whole_machines
from planner.estimator.formats import weight_format
from planner.schema.support import KV_FORMAT_IDS

PUBLISHED = ROOT / "benchmarks" / "pooled" / "published.yaml"


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return load_script("benchmarks/pooled/run.py", "bench_pooled_run")


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = yaml.safe_load(PUBLISHED.read_text(encoding="utf-8"))["rows"]
    return rows


def _check_mapping(cat: dict[str, Any], *, needs_link: bool) -> None:
    catalog = load_catalog()
    catalog.model(cat["model"])  # raises on an unknown id
    weight_format(cat["weights"])
    assert cat["machines"], "no machines"
    for m in cat["machines"]:
        catalog.accelerator(m["accelerator"])
        assert isinstance(m["count"], int) and m["count"] >= 1
    if needs_link:
        catalog.link(cat["link"])
    assert cat["split"] in ("pipeline", "tensor", None)
    assert cat.get("kv", "fp16") in KV_FORMAT_IDS, cat.get("kv")
    assert cat.get("engine") is None or cat["engine"] in catalog.engines, cat.get("engine")


def test_every_row_cites_its_source_and_maps_or_says_why_not(raw: list[dict[str, Any]]) -> None:
    assert len(raw) >= 27
    assert len({r["id"] for r in raw}) == len(raw)
    for r in raw:
        src = r["source"]
        assert src.get("title"), r["id"]
        assert src.get("url") or src.get("where"), r["id"]
        assert "date" in src and "where" in src, r["id"]
        tps = r["measured"]["decode_tokens_per_s"]
        if r["measured"].get("derived_from_ms"):
            assert tps == pytest.approx(1000 / r["measured"]["decode_ms_per_token"], rel=1e-3)
        assert math.isfinite(tps) and tps > 0, r["id"]
        if r.get("source_incomplete"):
            assert len(r["source_incomplete"]) > 20, r["id"]
        if r.get("why_not"):
            assert len(r["why_not"]) > 20, r["id"]
        if "catalog" in r and not r.get("why_not"):
            cat = r["catalog"]
            n = sum(m["count"] for m in cat["machines"])
            # a pool whose source names no link leaves it null: the built-in-port rule picks it
            _check_mapping(cat, needs_link=n > 1 and not _inferable(cat))
            assert cat.get("mapping_note"), r["id"]
        elif not r.get("why_not"):
            assert r.get("source_incomplete"), r["id"]


def _inferable(cat: dict[str, Any]) -> bool:
    catalog = load_catalog()
    devices = [catalog.accelerator(m["accelerator"]) for m in cat["machines"]]
    return (
        cat.get("link") is None
        and whole_machines(devices)
        and bool(built_in_link(catalog, devices))
    )


def test_script_scores_every_expressible_row(run: ModuleType, raw: list[dict[str, Any]]) -> None:
    rows = run.load_rows()
    pairs = run.scored(rows)
    # A row its source flags as pathological (`anomalous`) is scored apart, in no summary.
    odd = {x["id"] for x in raw if x.get("anomalous") and not x.get("why_not")}
    clean = {x["id"] for x in raw if not x.get("why_not") and not x.get("source_incomplete")}
    # So is a row a catalog figure was fitted on (`fitted`): it cannot test that figure.
    fit = {x["id"] for x in raw if x.get("fitted")}
    assert {r.id for r, _ in pairs} == clean - odd - fit
    assert pairs, "no expressible row"
    for r, p in pairs:
        assert math.isfinite(p) and p > 0, r.id
    for r, p in run.scored(rows, "eth-1g"):  # the inferred-link rows on another link
        assert r.link_rule and r.kind == run.SCORED and math.isfinite(p) and p > 0, r.id
    text = "\n".join(run.report(rows, "eth-1g"))
    base = sum(bool(x.get("single_machine_baseline")) for x in raw)
    head = f"{len(raw)} rows ({len(raw) - base} pooled, {base} single-machine baselines)"
    assert f"{head}: {len(pairs)} scored" in text
    apart = text.split("Anomalous (", 1)[-1] if odd else ""
    assert all(f"| {i} |" in apart and f"- {i}: " in apart for i in odd)
    assert not any(f"({i})" in line for i in odd for line in text.splitlines() if "median" in line)
    assert "Pooled: " in text and "median |deviation|" in text
    listed = {line.split(":", 1)[0] + ": " for line in text.splitlines() if line.startswith("- ")}
    assert {f"- {r.id}: " for r in rows if r.kind != run.SCORED} <= listed


def test_three_classes_are_apart_and_none_hidden(run: ModuleType) -> None:
    """Every row is in exactly one class; a row whose source names no link is scored on the
    built-in-port rule's link and marked so; a row whose source leaves out a fact no rule
    infers is listed with that fact, apart from the catalog gaps."""
    rows = run.load_rows()
    kinds = {r.id: r.kind for r in rows}
    assert (
        run.SCORED
        in set(kinds.values())
        <= {
            run.SCORED,
            run.SOURCE_INCOMPLETE,
            run.NOT_EXPRESSIBLE,
            run.ANOMALOUS,
            run.FITTED,
        }
    )
    text = "\n".join(run.report(rows))
    parts = {
        k: text.split(head, 1)[1].split("\n\n", 2)[1]
        for k, head in (
            (run.SOURCE_INCOMPLETE, "Source incomplete ("),
            (run.NOT_EXPRESSIBLE, "Not expressible ("),
        )
    }
    for r in rows:
        for k, part in parts.items():
            assert (f"- {r.id}: " in part) == (r.kind == k), (r.id, k)
    # four Mac minis' only shared wired kinds: Gigabit Ethernet and Thunderbolt 5 -> eth-1g
    # (Apple's Mac mini (2024) tech specs); the table marks the link as inferred
    mini = next(r for r in rows if r.id == "exo-8x-macmini-m4pro-llama31-405b")
    assert mini.kind == run.SCORED and mini.link == "eth-1g" and mini.link_rule
    assert "| eth-1g (inferred) |" in text
    assert f"- {mini.id}: link inferred: eth-1g (" in text
    # a source that does not say which device ran: listed with the missing fact, not scored
    prima = next(r for r in rows if r.id == "primacpp-4dev-llama3-70b")
    assert prima.kind == run.SOURCE_INCOMPLETE
    assert "quantization is not stated" in parts[run.SOURCE_INCOMPLETE]
    pooled = [(r, p) for r, p in run.scored(rows) if not r.baseline]
    summary = "\n".join(run.summary(rows, run.scored(rows)))
    stated = [rp for rp in pooled if not rp[0].link_rule]
    assert f"link stated only (without the inferred-link rows): {run._stats(stated)}" in summary


def test_a_row_whose_machines_share_no_port_is_source_incomplete(run: ModuleType) -> None:
    """The rule, where it finds nothing, leaves the row unscored and says why."""
    row = run._row(
        {
            "id": "two-m1-minis",
            "engine": "llama.cpp-rpc",
            "measured": {"decode_tokens_per_s": 1.0},
            "as_published": {},
            "source": {"title": "t"},
            "catalog": {
                "model": "llama-3.1-8b",
                "weights": "q4_0",
                "machines": [{"accelerator": "m1-8gb", "count": 2}],
                "link": None,
                "split": "pipeline",
            },
        }
    )
    assert row.kind == run.SOURCE_INCOMPLETE and "m1-8gb" in row.source_incomplete


def test_layer_split_follows_memory(run: ModuleType) -> None:
    cat = load_catalog()
    big, small = cat.accelerator("m3-ultra-512gb"), cat.accelerator("m4-pro-64gb")
    assert run.layer_split([small] * 8, 61) == [8, 8, 8, 8, 8, 7, 7, 7]
    split = run.layer_split([big, small], 80)
    assert sum(split) == 80 and split[0] == round(80 * 512 / 576)


def test_two_pi5_tensor_parallel_row_is_the_hand_arithmetic(run: ModuleType) -> None:
    """dllama-rpi5-2x-llama3-8b: Llama 3.1 8B architecture in q4_0 (4.5 bits/weight), tensor
    parallel over 2 Raspberry Pi 5 8GB on eth-1g, batch 1, context 256 (the script's default),
    under release 0.3.1 (catalog engine distributed-llama-0.3: a star whose root runs attention
    and the output head alone, ten exchanges per block; benchmarks/pooled/distributed-llama.md).

    Catalog / device-table figures: Pi 5 17.1 GB/s x 0.907 achieved = 15.51e9 B/s, FP32 vector
    0.154e12 FLOP/s, 4 dequantization ops per weight, 75.8 us per block, 1.398 ms per step
    (the unified-memory class's factors as refitted on 2026-11-29, the LLaMA 2 main rows at
    their 512-token context);
    eth-1g 0.125e9 B/s, 50 us one way. llama-3.1-8b: 32 blocks, block weights 3.926e9 B in q4_0
    (6.98e9 params, 218.1e6 per block), hidden 4096, FFN 14336, 8 KV heads x 128, vocab 128,256.

    Per block, on the root (it holds half of the seven matrices and reads the whole KV cache):
      weights 3.926e9 / 32 / 2                       = 61.34e6 B
      KV read 256 tokens x 2 x 8 x 128 x 2 B          =  1.05e6 B
      memory time 62.39e6 / 15.51e9                   = 4.023 ms   (compute is far below this)
      per-block overhead                              = 0.0758 ms
      dequantization 218.1e6 / 2 x 4 / 0.154e12       = 2.832 ms
      ten star exchanges, each 50 us of latency and the engine's own 172 us (catalog, fitted
      on this row's T), and 35,904 B through the root's port (Q80, 34/32 B per value):
        10 x (50 + 172) us + 35,904 / 0.125e9 s      = 2.507 ms
      block total                                      = 9.438 ms; x 32 = 302.0 ms
    Head on the root alone: 128,256 x 4096 x 4.5 / 8 B = 295.5e6 B / 15.51e9 = 19.05 ms; step
    1.40 ms. Token: 302.0 + 19.05 + 1.40 = 322.5 ms -> 3.101 tokens/s (measured: 2.25).
    """
    rows = {r.id: r for r in run.load_rows()}
    r = rows["dllama-rpi5-2x-llama3-8b"]
    assert r.spec["engine"] == "distributed-llama-0.3"
    bw = 17.1e9 * 0.907
    block = (
        (3.926e9 / 32 / 2 + 256 * 2 * 8 * 128 * 2) / bw
        + 75.8e-6
        + 218.1e6 / 2 * 4 / 0.154e12
        + 10 * (50e-6 + 172e-6)
        + 35904 / 0.125e9
    )
    token_s = 32 * block + 128256 * 4096 * 4.5 / 8 / bw + 1.398e-3
    assert 1 / token_s == pytest.approx(3.101, rel=0.005)
    assert run.predict(r.spec) == pytest.approx(1 / token_s, rel=0.02)
    # The planner's share of that token spent between the machines (the exchanges and the
    # engine's 172 us each) against the 80.11 ms the source states for network transfer, the
    # figure the engine's time per exchange was fitted on:
    exchanges_ms = 32 * (10 * (50e-6 + 172e-6) + 35904 / 0.125e9) * 1e3
    assert run.link_ms(r.spec) == pytest.approx(exchanges_ms, rel=0.02)
    assert exchanges_ms == pytest.approx(r.network_ms, rel=0.01)


def test_current_release_row_is_the_mesh_arithmetic(run: ModuleType) -> None:
    """dllama-pr64-rpi5-2x-llama3-8b (PR #64, the mesh release, catalog engine
    distributed-llama): two all-gathers per block, each 50 us of latency, 4,096 x 34/32 B over
    0.125e9 B/s (34.8 us) and the engine's own 796 us (catalog, from this PR's 0.881 ms per
    exchange): 2 x 880.8 us x 32 blocks = 56.37 ms, the PR's 56.39 ms of transfer."""
    rows = {r.id: r for r in run.load_rows()}
    r = rows["dllama-pr64-rpi5-2x-llama3-8b"]
    assert r.spec["engine"] == "distributed-llama"
    per_exchange = 50e-6 + 4096 * 34 / 32 / 0.125e9 + 796e-6
    assert run.link_ms(r.spec) == pytest.approx(2 * 32 * per_exchange * 1e3, rel=0.02)
    assert 2 * 32 * per_exchange * 1e3 == pytest.approx(r.network_ms, rel=0.01)


def test_llama_cpp_rpc_hop_is_the_catalog_time_per_remote_stage(run: ModuleType) -> None:
    """A pipeline of two DGX Sparks under llama.cpp RPC (a build since PR #15405): one
    sequence passes both stages and crosses the link twice per token (out and back), each
    crossing the link's latency and the hidden state's bytes, and the one remote stage makes
    one round trip of llama.cpp's own 1.975 ms (catalog, from a separate two-Spark
    measurement; planner.estimator.rpc_hop). The pooled time is the one-machine time (the same
    layers, no hop) plus exactly those, whatever the link, and the second stage's step work."""
    rows = {r.id: r for r in run.load_rows()}
    pooled = rows["dgxspark-notes-llamacpp-rpc-2x-dgxspark-qsfp-pair1-qwen3-235b-q2k"]
    alone = rows["dgxspark-notes-llamacpp-1x-dgxspark-qwen3-235b-q2k-baseline"]
    cat = load_catalog()
    e = cat.engines["llama.cpp"]
    assert (e.rpc_round_trip_us, e.rpc_round_trips, e.rpc_graph_resent) == (1975, 1, False)
    link = cat.link("eth-200g")
    crossing = link.latency_us * 1e-6 + 4096 * 2 / (link.bandwidth_gb_s * 1e9)
    one, two = 1 / run.predict(alone.spec), 1 / run.predict(pooled.spec)
    # The second stage adds its own step work (the head runs once, on the last stage).
    extra = two - one - 2 * crossing - 1.975e-3
    assert 0 <= extra < 0.05 * one
    # The split model given the measured machine: within a few per cent of the pooled run
    # (+5.0 %: the pooled run's own time per remote stage is not isolated by its source).
    split = {r.id: p for r, p, _ in run.given_baseline(run.load_rows())}
    assert split[pooled.id] == pytest.approx(pooled.measured, rel=0.06)


def test_unsloth_dynamic_q2_bits_are_the_published_files() -> None:
    # lhl/strix-halo-testing rpc-test README, llama-bench: "deepseek2 671B Q2_K - Medium |
    # 211.03 GiB | 671.03 B" for Unsloth's DeepSeek-R1 UD-Q2_K_XL: 211.03 x 2^33 bits over
    # 671.03e9 weights = 2.701 bits per weight (q2_k's file is 2.916).
    assert weight_format("ud-q2_k_xl").bits_per_weight == pytest.approx(
        211.03 * 2**33 / 671.03e9, rel=1e-3
    )
    assert weight_format("ud-q2_k_xl").bits_per_weight < weight_format("q2_k").bits_per_weight


def test_a_one_machine_run_stands_for_machines_of_its_chip(run: ModuleType) -> None:
    # The split model given the one machine pairs a pooled row with its source's one-machine
    # run when every pooled machine has that machine's chip (architecture and bandwidth), so a
    # pool of 512 GB and 256 GB M3 Ultras matches a 512 GB baseline, and a mixed pool nothing.
    rows = {r.id: r for r in run.load_rows()}
    mixed_sizes = rows["exo-rdma-4x-m3ultra-qwen3-235b"]
    alone = rows["exo-rdma-1x-m3ultra-qwen3-235b-baseline"]
    assert run._machine_of(mixed_sizes) == run._machine_of(alone)
    assert run._machine_of(mixed_sizes)[2]
    mixed_chips = rows["odysseus-rpc-2060s-plus-5060-qwen25-14b-q4km"]
    assert run._machine_of(mixed_chips)[2] == ""


def test_one_pi4_streams_at_its_measured_stream_rate(run: ModuleType) -> None:
    """dllama-rpi4b-1x-llama2-7b-baseline: one Raspberry Pi 4B runs Llama 2 7B in q4_0 at
    0.7619 tokens/s (distributed-llama README, release 0.1.0). The planner reads the Pi 4's
    weights at the STREAM rate its catalog entry cites (5.56 GB/s, sci-pi.org.uk's STREAM
    Scale on a Pi 4; 43 % of the 12.8 GB/s wire rate) x 0.91 achieved = 5.060e9 B/s, not at the
    wire rate (11.65e9 B/s, which predicted 1.014 tokens/s: +33 %). FP32 vector 48e9 FLOP/s,
    and the unified-memory class's 4 dequantization ops per weight, 75.6 us per block and
    1.382 ms per step as fitted on 2026-11-29 (a refit moves the last figures a little).

    llama-2-7b: 32 blocks of 202.38e6 params (hidden 4096, FFN 11008, 32 KV heads x 128),
    vocab 32,000; q4_0 4.5 bits per weight. Per block:
      weights 202.38e6 x 4.5 / 8                  = 113.84e6 B
      KV read 256 tokens x 2 x 32 x 128 x 2 B       =   4.19e6 B
      memory time 118.03e6 / 5.060e9               = 23.33 ms  (FLOPs: 0.40e9 / 30.1e9 = 13.4 ms)
      per-block overhead                            =  0.076 ms
      dequantization 202.38e6 x 4 / 48e9            = 16.87 ms
      block 40.27 ms; x 32 = 1288.7 ms. Head 32,000 x 4096 x 4.5 / 8 / 5.060e9 = 14.57 ms,
      step 1.38 ms: 1304.6 ms -> 0.7665 tokens/s (measured 0.7619, +0.6 %).
    """
    rows = {r.id: r for r in run.load_rows()}
    r = rows["dllama-rpi4b-1x-llama2-7b-baseline"]
    bw = 5.56e9 * 0.91
    block = (202.38e6 * 4.5 / 8 + 256 * 2 * 32 * 128 * 2) / bw + 75.6e-6 + 202.38e6 * 4 / 48e9
    token_s = 32 * block + 32000 * 4096 * 4.5 / 8 / bw + 1.382e-3
    assert 1 / token_s == pytest.approx(0.7665, rel=0.005)
    assert run.predict(r.spec) == pytest.approx(1 / token_s, rel=0.01)
    assert run.predict(r.spec) == pytest.approx(r.measured, rel=0.05)


def _eager_rows(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in raw if (r.get("catalog") or {}).get("engine") == "vllm-eager"]


def test_eager_rows_are_the_graph_figure_plus_the_catalog_launch_time(
    run: ModuleType, raw: list[dict[str, Any]]
) -> None:
    """Every --enforce-eager row: the planner's seconds per token under vllm-eager are its
    seconds under vLLM with CUDA graphs plus layers x 339 us (Engine.launch_us_per_layer), on
    one machine and across machines alike (each machine launches every block's kernels);
    gpt-oss-120b: 36 x 0.339 = 12.204 ms, Llama 3.1 70B: 80 x 0.339 = 27.12 ms."""
    rows = {r.id: r for r in run.load_rows()}
    eager = _eager_rows(raw)
    assert len(eager) == 7
    for x in eager:
        r = rows[x["id"]]
        assert not r.why_not, r.id
        graphs = dict(r.spec, engine="vllm")
        layers = load_catalog().model(r.spec["model"]).num_layers
        extra = 1 / run.predict(r.spec) - 1 / run.predict(graphs)
        assert extra == pytest.approx(layers * 339e-6, rel=1e-6), r.id


def test_the_eager_figure_is_not_fitted_on_a_scored_row(raw: list[dict[str, Any]]) -> None:
    """The launch time per block cites a source none of the benchmark's rows comes from."""
    cat = load_catalog()
    key = cat.engines["vllm-eager"].sources["launch_us_per_layer"]
    url = cat.references[key].url
    assert url and all(url != (r["source"].get("url") or "") for r in raw)


def test_a_stated_fp8_kv_cache_is_read_at_one_byte(run: ModuleType) -> None:
    """kubis's runs use --kv-cache-dtype fp8: the row maps kv fp8, and at its 1,088-token
    context the one-Spark step reads less KV cache than the same row in fp16."""
    r = {x.id: x for x in run.load_rows()}["kubis-vllm-1x-dgxspark-gptoss120b-eager-baseline"]
    assert r.spec["kv"] == "fp8"
    assert run.predict(r.spec) > run.predict(dict(r.spec, kv="fp16"))


def test_a_row_a_catalog_figure_was_fitted_on_is_scored_apart(
    run: ModuleType, raw: list[dict[str, Any]]
) -> None:
    """distributed-llama-0.3's 172 us per exchange is fitted on the two-Pi-5 Llama 3 8B row's T
    and distributed-llama's 796 us on PR #64's two-Pi-5 row: both rows were scored in the pooled
    summary, testing figures taken from them. They are scored in a table of their own now and
    counted in no median; every other scored row stays."""
    fit = {x["id"] for x in raw if x.get("fitted")}
    assert {"dllama-rpi5-2x-llama3-8b", "dllama-pr64-rpi5-2x-llama3-8b"} <= fit
    rows = run.load_rows()
    assert {r.id for r in rows if r.kind == run.FITTED} == fit
    assert not fit & {r.id for r, _ in run.scored(rows)}
    text = "\n".join(run.report(rows))
    apart = text.split("Fitted on (", 1)[1]
    assert all(f"| {i} |" in apart and f"- {i}: " in apart for i in fit)
    summary = "\n".join(run.summary(rows, run.scored(rows)))
    assert f"{len(fit)} fitted on (scored apart)" in summary
    assert not any(i in summary for i in fit)


def test_a_link_the_source_does_not_state_counts_as_inferred(
    run: ModuleType, raw: list[dict[str, Any]]
) -> None:
    """The Google Cloud VM rows' source says only "x VM"; the mapping infers gcp-vpc-zone (one
    zone assumed). They were counted among the "link stated only" rows of the summary. A
    mapping's `link_assumed` now marks such a link inferred, as the built-in-port rule's are."""
    assumed = {x["id"] for x in raw if (x.get("catalog") or {}).get("link_assumed")}
    assert {x["id"] for x in raw if (x.get("catalog") or {}).get("link") == "gcp-vpc-zone"} == (
        assumed
    )
    rows = {r.id: r for r in run.load_rows()}
    for i in assumed:
        assert rows[i].link_rule and rows[i].link == "gcp-vpc-zone", i
    text = "\n".join(run.report(list(rows.values())))
    assert all(f"- {i}: link inferred: gcp-vpc-zone (" in text for i in assumed)
    lines = text.splitlines()
    for i in assumed:  # its row of the scored table shows the link as inferred
        assert any(x.startswith(f"| {i} |") and "| gcp-vpc-zone (inferred) |" in x for x in lines)
    stated = [rp for rp in run.scored(list(rows.values())) if not rp[0].baseline]
    assert not assumed & {r.id for r, _ in stated if not r.link_rule}
