"""docs/serving.md carries the table of benchmarks/serving/run.py --markdown: the check here is
the cheap part of "the doc is current" (the rows scored and refused, the MLPerf request shape and
the factors the catalog ships), without re-running the fit."""

from __future__ import annotations

import re
from types import ModuleType

import pytest
from bench_scripts import ROOT, load_script


def _load() -> ModuleType:
    return load_script("benchmarks/serving/run.py", "bench_serving_run")


def _block(run: ModuleType) -> str:
    doc = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    assert run.MARK_BEGIN in doc and run.MARK_END in doc, "regenerate: run.py --markdown"
    return doc.split(run.MARK_BEGIN, 1)[1].split(run.MARK_END, 1)[0]


def test_doc_table_lists_the_rows_run_py_scores_and_refuses() -> None:
    run = _load()
    rows = run.load_rows()
    block = _block(run).split("MLPerf Server rows at", 1)[0]  # the scored table and refusals
    table = set(re.findall(r"^\| (\S+) \|", block, flags=re.M)) - {"row"}
    refused = set(re.findall(r"^- (\S+): ", block, flags=re.M))
    assert table == {r.id for r in rows if r.predict}
    assert refused == {r.id for r in rows if not r.predict}
    # Every refusal names what is missing.
    assert all(r.why_not for r in rows if not r.predict)


def test_doc_states_the_factors_the_catalog_ships() -> None:
    run = _load()
    line = next(ln for ln in _block(run).splitlines() if ln.startswith("Fitted on every row"))
    shipped = line.split("Catalog serving.yaml ships", 1)[1]
    for path, value in run.catalog_factors().items():
        assert f"{path} {value:.2f}" in shipped


def test_mlperf_rows_carry_the_dataset_shape() -> None:
    """Every MLPerf Llama-2-70B row is evaluated at the OpenOrca subset's mean request shape:
    213 input tokens (estimated from the published per-sample extraction, published.yaml header)
    and the reference 294.45 output tokens (mlcommons/inference llama2-70b README)."""
    run = _load()
    mlperf = [r for r in run.load_rows() if r.id.startswith("mlperf")]
    assert len(mlperf) >= 20
    assert {(r.spec["prompt"], r.spec["output"]) for r in mlperf} == {(213, 294)}
    server = [r for r in mlperf if r.kind == "server"]
    assert all(r.spec["ttft_limit"] and r.spec["tpot_limit"] for r in server)


def test_mlperf_offline_order_of_accelerators_is_kept() -> None:
    """Per MLPerf Inference round, the planner's offline output tokens/s per accelerator (the
    catalog's shipped factors, as plans use them) ranks the accelerators as the round's logs do
    (benchmarks/serving/published.yaml: Llama-2-70B Offline rows)."""
    run = _load()
    rounds: dict[str, list[tuple[str, float, float]]] = {}
    for r in run.load_rows():
        if r.predict and r.kind == "offline" and r.id.startswith("mlperf"):
            rnd = r.id.split("-llama2")[0]
            rounds.setdefault(rnd, []).append((r.spec["dev"], r.measured, float(r.predict())))
    assert len(rounds) >= 3
    for rnd, rows in rounds.items():
        measured = [d for d, *_ in sorted(rows, key=lambda x: -x[1])]
        planner = [d for d, *_ in sorted(rows, key=lambda x: -x[2])]
        assert planner == measured, (rnd, rows)


def test_each_scored_row_has_an_operating_point_that_restates_its_metric() -> None:
    """The operating-point table (requests/s per replica, first token, time per token and
    accelerators: the per-replica figures set beside the sources) restates each row's scored
    metric at the shipped factors: requests/s x output tokens over the replica's accelerators is
    a throughput row's tokens/s per accelerator (a fixed-concurrency row's tokens/s), a prefill
    row's first token is its TTFT, a decode row's time per token its TPOT, and a sizing row's
    accelerators its GPU count."""
    run = _load()
    kinds = set()
    for r in run.load_rows():
        if not r.predict:
            continue
        got, metric = run.planner_point(r), r.predict()
        kinds.add(r.kind)
        if r.kind == "prefill":
            assert got.ttft == metric, r.id
        elif r.kind == "decode":
            assert got.tpot == metric, r.id
        elif r.kind in ("sizing", "disaggregated"):
            assert got.accelerators == metric, r.id
        elif r.spec["concurrency"]:  # output tokens/s of that many sequences
            assert abs(got.rate * r.spec["output"] / metric - 1) < 1e-9, r.id
        else:  # offline and server: output tokens/s per accelerator
            requests = r.spec["requests"]  # a finite run's list: its own mean output
            output = sum(o for _, o in requests) / len(requests) if requests else r.spec["output"]
            per = got.rate * output / got.per_replica
            assert abs(per / metric - 1) < 1e-9, r.id
            assert got.tpot > 0 and (r.kind == "offline") == (got.ttft is None), r.id
    assert kinds >= {"prefill", "decode", "sizing", "disaggregated", "offline", "server"}


def test_a_finite_run_is_scored_over_the_requests_its_source_published() -> None:
    """Rows whose source publishes each request's lengths (vLLM benchmark_serving.py result
    files) carry them whole: as many requests as the quoted run completed, summing to the
    quoted token totals; such a run is scored over that list and, ending with few sequences in
    flight, gives less than the steady-state figure of the same design."""
    run = _load()
    finite = [r for r in run.load_rows() if r.predict and r.spec["requests"]]
    assert len(finite) >= 2
    for r in finite:
        raw = next(x for x in run.load_raw() if x["id"] == r.id)
        quote = raw["source"]["quote"]
        requests = r.spec["requests"]

        def quoted(key: str, quote: str = quote) -> int:
            return int(re.search(rf'"{key}": (\d+)', quote).group(1))  # type: ignore[union-attr]

        assert len(requests) == quoted("completed")
        assert sum(p for p, _ in requests) == quoted("total_input_tokens")
        assert sum(o for _, o in requests) == quoted("total_output_tokens")
        assert r.metric == "output tokens/s per accelerator over the run's requests"
        assert r.predict() < 0.95 * run.offline_per_accelerator(r.spec), r.id


def test_a_finite_run_counts_every_accelerator_it_uses() -> None:
    """Per accelerator means per accelerator at work: two devices given the list twice over run
    as two replicas of the one-device figure, and a device left free to pick its degree gets no
    design larger than itself (nor beats its own steady state)."""
    run = _load()
    r = next(r for r in run.load_rows() if r.predict and r.spec["requests"])
    one = run.run_per_accelerator(r.spec)
    doubled = [q for q in r.spec["requests"] for _ in (0, 1)]
    two = {**r.spec, "devices": 2, "requests": doubled}
    assert run.run_per_accelerator(two) == pytest.approx(one, rel=1e-9)
    free = {**r.spec, "tp": None}
    assert run.run_per_accelerator(free) <= run.offline_per_accelerator(free)


def test_a_long_run_of_like_requests_replays_at_the_steady_state_rate() -> None:
    """The replay and the steady-state figure are one model: a run of many identical requests
    (so its start and drain are a small share of it) comes within 5 % of the steady rate."""
    run = _load()
    r = next(r for r in run.load_rows() if r.predict and r.spec["requests"])
    prompt, output = r.spec["prompt"], r.spec["output"]
    s = {**r.spec, "requests": [(prompt, output)] * 40 * int(r.spec["max_seqs"])}
    steady = run.offline_per_accelerator(s)
    assert run.run_per_accelerator(s) == pytest.approx(steady, rel=0.05)


def test_a_printed_serving_result_gives_its_row_the_quoted_totals() -> None:
    """Rows copied from a `vllm bench serve` printout (GPUStack's performance lab) carry what
    the quote states: the mean request shape is the quoted total input and generated tokens over
    the successful requests, and the figure scored is the quoted output token throughput."""
    run = _load()
    printed = [x for x in run.load_raw() if "Total generated tokens:" in x["source"]["quote"]]
    assert len(printed) >= 30
    for x in printed:
        quote = x["source"]["quote"]

        def quoted(label: str, quote: str = quote, rid: str = x["id"]) -> float:
            found = re.search(rf"{re.escape(label)} ([\d.]+)", quote)
            assert found, (rid, label)
            return float(found.group(1))

        n = quoted("Successful requests:")
        assert x["prompt_tokens"] == round(quoted("Total input tokens:") / n, 2), x["id"]
        assert x["output_tokens"] == round(quoted("Total generated tokens:") / n, 2), x["id"]
        assert x["measured"]["tokens_per_s"] == quoted("Output token throughput (tok/s):"), x["id"]
        assert x["measured"].get("max_concurrency") == (
            quoted("Maximum request concurrency:")
            if "Maximum request concurrency:" in quote
            else None
        ), x["id"]
