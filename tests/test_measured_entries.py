"""One measurement format (planner.schema.measurements): the table `planner estimate --measured`
reads is the list a problem's serving workload takes (`measured:`, inline or the table's path),
and the older `capacity:` and `profiles:` spellings are the same entries."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.errors import InputError
from planner.estimator.designs import allowed_devices, inference_designs, stage_specs
from planner.estimator.network import network_link
from planner.estimator.profiles import layer_profile
from planner.estimator.replica import inference_replica
from planner.estimator.support import engine_times
from planner.load import load_problem
from planner.schema.problem import InferenceWorkload
from planner.solve import solve_problem

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "problems" / "measured" / "coding-assistant-spark.yaml"
TABLE = ROOT / "problems" / "measured" / "qwen2.5-7b-dgx-spark.yaml"
LEFTOVERS = ROOT / "problems" / "leftovers-pool.yaml"
# The example table's llama.cpp rows (benches/dgx-spark.md, build 6918): Qwen2.5 7B Q8_0 on one
# DGX Spark decodes 29.3 tokens/s at batch 1 (tg32) and 593.27 at batch 32 (S_TG).
PUBLISHED = {1: 29.3, 32: 593.27}


def _decode_only(problem: Any, batch: int) -> float:
    """Decode tokens/s of the problem's single-stage, one-device replica at `batch`, with no
    prompt work in its iterations (what a decode benchmark measures)."""
    cat = load_catalog()
    w = problem.workloads[0]
    designs = inference_designs(w, problem, cat, allowed_devices(problem, cat), prune=False)
    d = next(d for d in designs if len(d.stages) == 1 and d.stages[0].tp == 1 and d.batch == batch)
    fig = inference_replica(
        cat.model(w.model),
        w.weights,
        w.kv,
        batch=batch,
        context=w.context_tokens,
        prompt=w.prompt_tokens,
        output=w.output_tokens,
        stages=stage_specs(cat, problem, d),
        link=network_link(problem, cat),
        decode_only=True,
        **engine_times(cat, d.engine),
    )
    return fig.tokens_per_s


@pytest.mark.parametrize("batch", [1, 32])
def test_one_table_gives_estimate_and_problem_the_same_figure(batch: int) -> None:
    args = ["estimate", "-m", "qwen2.5-7b", "-d", "dgx-spark", "--weights", "q8_0"]
    args += ["--batch", str(batch), "--measured", str(TABLE), "--format", "json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["tokens_per_s"] == PUBLISHED[batch]
    # The problem points at the same table (`measured: qwen2.5-7b-dgx-spark.yaml`).
    problem = load_problem(EXAMPLE)
    assert math.isclose(_decode_only(problem, batch), PUBLISHED[batch], rel_tol=1e-9)


def test_the_table_is_read_relative_to_the_problem_and_changes_the_plan() -> None:
    problem = load_problem(EXAMPLE)
    w = problem.workloads[0]
    assert isinstance(w, InferenceWorkload)
    assert [m.metric for m in w.measured] == [
        "decode_tokens_per_s",
        "decode_tokens_per_s",
        "prefill_tokens_per_s",
    ]
    profile = layer_profile(w, "dgx-spark", 1, load_catalog(), None, "llama.cpp")
    assert profile is not None
    assert [b for b, _ in profile.decode] == [1.0, 32.0]
    assert [p for p, _ in profile.prefill] == [2048.0]  # the pp2048 row: one prompt
    # Without the table the estimator's figures stand: a different (slower) plan.
    bare = problem.model_copy(update={"workloads": [w.keeping(lambda m: False)]})
    with_table, without = solve_problem(problem), solve_problem(bare)
    assert with_table.objective is not None and without.objective is not None
    assert with_table.workloads[0].tokens_per_s != without.workloads[0].tokens_per_s


# Made-up figures for a T4 running Llama 2 70B in fp16 (the per-block tests' profile), in the
# older spelling and as `measured:` entries.
T4_PROFILE = [
    {"device": "t4", "metric": "decode_ms_per_layer", "batch": 1, "ms": 7.0},
    {"device": "t4", "metric": "decode_ms_per_layer", "batch": 8, "ms": 8.8},
    {"device": "t4", "metric": "prefill_ms_per_layer", "prompt_tokens": 256, "ms": 42.0},
    {"device": "t4", "metric": "memory_gb", "gb": 14},
]


def _as_measured(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k not in ("ms", "gb")}
    return {**out, "value": f"{row['gb']} GB" if "gb" in row else f"{row['ms']} ms"}


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_older_profiles_spelling_plans_alike(tmp_path: Path) -> None:
    doc = yaml.safe_load(LEFTOVERS.read_text())
    old, new = copy.deepcopy(doc), copy.deepcopy(doc)
    old["workloads"][0]["profiles"] = T4_PROFILE
    new["workloads"][0]["measured"] = [_as_measured(r) for r in T4_PROFILE]
    a = solve_problem(load_problem(_write(tmp_path, old, "old.yaml")))
    b = solve_problem(load_problem(_write(tmp_path, new, "new.yaml")))
    assert a.objective is not None
    assert a.objective == b.objective
    assert a.workloads[0].tokens_per_s == b.workloads[0].tokens_per_s


MIX = """
name: readme-mix
workloads:
  - name: assistant
    model: llama-3.1-8b
    requests_per_s: 40
    request_mix:
      - {name: chat, input_tokens: 300, output_tokens: 200, share: 90%}
      - {name: documents, input_tokens: 24k, output_tokens: 800, share: 10%}
    max_ms_per_token: 60
    ENTRIES
constraints:
  require_ecc: true
  allowed_devices: [l4, l40s, h100-sxm]
"""


def test_older_capacity_spelling_plans_alike(tmp_path: Path) -> None:
    old = MIX.replace("ENTRIES", "capacity: [{device: h100-sxm, class: chat, requests_per_s: 55}]")
    new = MIX.replace(
        "ENTRIES",
        "measured: [{device: h100-sxm, metric: requests_per_s, class: chat, value: 55}]",
    )
    (tmp_path / "old.yaml").write_text(old)
    (tmp_path / "new.yaml").write_text(new)
    a = solve_problem(load_problem(tmp_path / "old.yaml"))
    b = solve_problem(load_problem(tmp_path / "new.yaml"))
    assert a.objective is not None
    assert a.objective == b.objective


def test_units_are_read_into_the_metric_unit(tmp_path: Path) -> None:
    doc = yaml.safe_load(LEFTOVERS.read_text())
    doc["workloads"][0]["measured"] = [
        {"device": "t4", "metric": "decode_ms_per_layer", "batch": 1, "value": "7000 us"},
        {"device": "t4", "metric": "memory_gb", "value": 20.5, "unit": "GiB"},
    ]
    w = load_problem(_write(tmp_path, doc)).workloads[0]
    assert isinstance(w, InferenceWorkload)
    assert w.measured[0].value == 7.0 and w.measured[0].unit == "ms"
    # 20.5 GiB = 20.5 x 2^30 bytes = 22.011707392 GB.
    assert w.memory_cap_bytes("t4") == pytest.approx(22.011707392e9, rel=1e-12)


BAD = [
    ({"device": "t4", "metric": "decode_ms_per_layr", "batch": 1, "value": 7}, "metric"),
    ({"device": "t4", "metric": "decode_ms_per_layer", "value": 7}, "needs the sequences"),
    ({"device": "t4", "metric": "prefill_ms_per_layer", "context": 256, "value": 40}, "prompt's"),
    ({"device": "t4", "metric": "decode_ms_per_layer", "batch": 1, "value": "7 GB"}, "a data size"),
    ({"device": "t4", "metric": "memory_gb", "value": 14, "unit": "ms"}, "a duration, not a data"),
    ({"device": "t4", "metric": "memory_gb", "value": "14 GB", "unit": "GB"}, "given twice"),
    ({"device": "t4", "metric": "memory_gb", "value": 14, "batch": 2}, "not measured at a `batch`"),
    ({"device": "t4", "metric": "decode_ms_per_layer", "batch": 1, "value": 7, "tp": 1, "devices": 1}, "same key"),
    ({"device": "t4", "metric": "requests_per_s", "class": "chat", "value": 3}, "request_mix"),
    ({"device": "t4", "metric": "decode_ms_per_layer", "batch": 1, "value": 1e9}, "at most 60,000"),
    ({"device": "t4", "metric": "decode_tokens_per_s", "model": "llama-3.1-8b", "batch": 1, "value": 9}, "cannot stand"),
    ({"device": "t4", "metric": "decode_tokens_per_s", "batch": None, "value": 9}, "batch null"),
    ({"device": "t4", "metric": "train_mfu", "value": 0.4}, "not used in a problem"),
    ({"device": "t4", "metric": "prefill_tokens_per_s", "batch": 4, "context": 512, "value": 900}, "batch 1"),
    # Llama 2 70B on a T4: a 1 ms step is shorter than the output head alone takes; a 10 ms step
    # is 0.125 ms per block over its 80, under half the 5.35 ms a block's 1.71 GB take at 320 GB/s.
    ({"device": "t4", "metric": "decode_tokens_per_s", "batch": 1, "value": 1000}, "outside the blocks"),
    ({"device": "t4", "metric": "decode_tokens_per_s", "batch": 1, "value": 100}, "faster than reading"),
    ({"device": "h100-sxm", "metric": "decode_ms_per_layer", "batch": 1, "value": 7}, "may use"),
]  # fmt: skip


@pytest.mark.parametrize(("row", "words"), BAD)
def test_bad_entries_are_named(row: dict[str, Any], words: str, tmp_path: Path) -> None:
    doc = yaml.safe_load(LEFTOVERS.read_text())
    doc["workloads"][0]["measured"] = [row]
    with pytest.raises(InputError) as e:
        load_problem(_write(tmp_path, doc, "pool.yaml"))
    text = str(e.value)
    assert words in text and "pool.yaml:" in text and "measured" in text, text
    assert "Traceback" not in text


def test_a_problem_with_measured_entries_reads_back_as_dumped() -> None:
    problem = load_problem(EXAMPLE)
    again = type(problem).model_validate(problem.model_dump())
    assert again == problem
    w = again.workloads[0]
    assert isinstance(w, InferenceWorkload) and len(w.replica_figures) == 3


def test_an_entry_without_kv_is_the_workloads_and_stays_so_when_dumped(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["workloads"][0]["kv"] = "q8_0"
    doc["workloads"][0]["measured"] = [
        {"device": "dgx-spark", "metric": "decode_tokens_per_s", "batch": 32, "value": 593.27}
    ]
    problem = load_problem(_write(tmp_path, doc))
    again = type(problem).model_validate(problem.model_dump())
    for p in (problem, again):
        w = p.workloads[0]
        assert isinstance(w, InferenceWorkload) and w.measured[0].kv is None
        assert layer_profile(w, "dgx-spark", 1, load_catalog(), None, "llama.cpp") is not None
    # The same row in a table measured an fp16 KV cache (the table's convention): refused here.
    (tmp_path / "t.yaml").write_text(
        yaml.safe_dump({"measurements": [{"model": "qwen2.5-7b", "weights": "q8_0",
                                          **doc["workloads"][0]["measured"][0]}]})
    )  # fmt: skip
    doc["workloads"][0]["measured"] = "t.yaml"
    with pytest.raises(InputError, match="kv `fp16` cannot stand for this workload"):
        load_problem(_write(tmp_path, doc))


def test_a_whole_replica_entry_takes_no_request_class(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    row = {"device": "dgx-spark", "metric": "decode_tokens_per_s", "batch": 1, "value": 29.3}
    doc["workloads"][0]["measured"] = [{**row, "class": "chat"}]
    with pytest.raises(InputError, match="not measured at a `class`"):
        load_problem(_write(tmp_path, doc))


def test_a_table_error_names_the_table_and_its_line(tmp_path: Path) -> None:
    (tmp_path / "t4.yaml").write_text(
        "measurements:\n"
        "  - {device: t4, metric: decode_ms_per_layer, batch: 1, value: 7 ms}\n"
        "  - {device: t4, metric: decode_ms_per_layer, value: 9 ms}\n"
    )
    doc = yaml.safe_load(LEFTOVERS.read_text())
    doc["workloads"][0]["measured"] = "t4.yaml"
    with pytest.raises(InputError) as e:
        load_problem(_write(tmp_path, doc))
    assert "t4.yaml:3:" in str(e.value) and "needs the sequences" in str(e.value)


def test_a_missing_table_is_named(tmp_path: Path) -> None:
    doc = yaml.safe_load(LEFTOVERS.read_text())
    doc["workloads"][0]["measured"] = "nosuch.yaml"
    with pytest.raises(InputError, match="no measurement file at"):
        load_problem(_write(tmp_path, doc))


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("../t4.yaml", "leaves the models folder"),
        ("/etc/hostname", "leaves the models folder"),
        ("a\x00b", "leaves the models folder"),
        ("x" * 5000, "no measurement file at"),  # inside, but no file the system would open
    ],
)
def test_a_confined_problem_reads_no_table_outside_its_folder(
    name: str, words: str, tmp_path: Path
) -> None:
    from planner.load import parse_problem
    from planner.schema.yaml_io import Located

    doc = yaml.safe_load(LEFTOVERS.read_text())
    doc["workloads"][0]["measured"] = name
    inner = tmp_path / "inner"
    inner.mkdir()
    with pytest.raises(InputError, match=words):
        parse_problem(Located(doc, {}, "p.yaml"), [], base=inner, confine=True)


def test_one_point_in_two_spellings_is_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load(LEFTOVERS.read_text())
    doc["workloads"][0]["profiles"] = T4_PROFILE[:1]
    doc["workloads"][0]["measured"] = [_as_measured(T4_PROFILE[0])]
    with pytest.raises(InputError, match=r"two decode_ms_per_layer figures .*profiles\[0\]"):
        load_problem(_write(tmp_path, doc))


def test_a_whole_replica_figure_and_a_block_time_at_one_batch_are_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load(LEFTOVERS.read_text())
    # 0.05 tokens/s at batch 1: a 20 s step, 250 ms per block over Llama 2 70B's 80.
    whole = {"device": "t4", "metric": "decode_tokens_per_s", "batch": 1, "value": 0.05}
    doc["workloads"][0]["measured"] = [_as_measured(T4_PROFILE[0]), whole]
    with pytest.raises(InputError, match=r"two decode figures at batch 1 on t4 at tp 1"):
        load_problem(_write(tmp_path, doc))


def test_a_whole_replica_figure_of_a_group_no_host_holds_is_refused(tmp_path: Path) -> None:
    # A DGX Spark is a machine of one device, and llama.cpp runs no group across machines.
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["workloads"][0]["measured"] = [
        {"device": "dgx-spark", "devices": 2, "metric": "decode_tokens_per_s", "batch": 1,
         "value": 20}
    ]  # fmt: skip
    with pytest.raises(InputError, match=r"measured\[0\]\.devices: .*group of 2 dgx-spark"):
        load_problem(_write(tmp_path, doc))


def test_estimate_names_the_workload_entries_it_does_not_use(tmp_path: Path) -> None:
    table = tmp_path / "t.yaml"
    table.write_text(
        "measurements:\n"
        "  - {device: dgx-spark, metric: decode_ms_per_layer, batch: 1, value: 1.2 ms}\n"
    )
    args = ["estimate", "-m", "qwen2.5-7b", "-d", "dgx-spark", "--measured", str(table)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "measurements[0] not used: metric `decode_ms_per_layer`" in res.output


def _estimate(table: Path, *extra: str) -> Any:
    args = ["estimate", "-m", "qwen2.5-7b", "-d", "dgx-spark", "--weights", "q8_0"]
    res = CliRunner().invoke(app, [*args, "--measured", str(table), *extra])
    assert res.exit_code == 0, res.output
    return res


def _no_engine(tmp_path: Path) -> Path:
    """The example table with no row naming its engine."""
    doc = yaml.safe_load(TABLE.read_text())
    for row in doc["measurements"]:
        row.pop("engine", None)
    out = tmp_path / "any-engine.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def test_estimate_takes_a_row_only_under_its_engine(tmp_path: Path) -> None:
    """The table's rows ran llama.cpp: an estimate under llama.cpp takes them, and a row that
    names no engine holds for it too. The one other engine that runs Q8_0 on a DGX Spark is
    vLLM, experimentally, on GGUF kernels of its own that nothing measures: that estimate is
    refused before any row is read (planner.estimator.support.gguf_refusal)."""
    json_out = ["--batch", "32", "--format", "json"]
    under = json.loads(_estimate(TABLE, *json_out, "--engine", "llama.cpp").stdout)
    assert under["tokens_per_s"] == PUBLISHED[32] and under["measured"]
    anyone = json.loads(_estimate(_no_engine(tmp_path), *json_out, "--engine", "llama.cpp").stdout)
    assert anyone["tokens_per_s"] == PUBLISHED[32] and anyone["measured"]
    args = ["estimate", "-m", "qwen2.5-7b", "-d", "dgx-spark", "--weights", "q8_0"]
    res = CliRunner().invoke(app, [*args, "--measured", str(TABLE), "--engine", "vllm"])
    assert res.exit_code == 2 and "GGUF" in res.output, res.output


def test_a_problem_refuses_a_row_of_another_engine(tmp_path: Path) -> None:
    """A workload that names vLLM for these Q8_0 (GGUF) weights is refused at its `weights`
    before its rows are read (vLLM runs GGUF only experimentally, on kernels of its own:
    planner.estimator.support.gguf_refusal); under llama.cpp, the same rows naming no engine
    apply to it."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["workloads"][0]["engine"] = "vllm"
    doc["workloads"][0]["measured"] = str(TABLE)
    with pytest.raises(InputError) as e:
        load_problem(_write(tmp_path, doc))
    msg = str(e.value)
    assert "workloads[0].weights" in msg and "engine: llama.cpp" in msg, msg
    doc["workloads"][0]["engine"] = "llama.cpp"
    doc["workloads"][0]["measured"] = str(_no_engine(tmp_path))
    problem = load_problem(_write(tmp_path, doc))
    assert math.isclose(_decode_only(problem, 32), PUBLISHED[32], rel_tol=1e-9)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: p.mkdir(), "a folder, not a regular file"),
        (lambda p: os.mkfifo(p), "a named pipe (FIFO), not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "a character device, not a regular file"),
    ],
)
def test_a_table_that_is_no_file_is_named_as_estimate_names_it(
    make: Any, words: str, tmp_path: Path
) -> None:
    """A folder, a FIFO (never waited on) or a link to a device as a workload's table is
    refused in the words `estimate --measured` uses for the same path (schema.files)."""
    make(tmp_path / "t")
    args = ["estimate", "-m", "qwen2.5-7b", "-d", "dgx-spark", "--measured", str(tmp_path / "t")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code != 0 and words in res.output, res.output
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["workloads"][0]["measured"] = "t"
    with pytest.raises(InputError) as e:
        load_problem(_write(tmp_path, doc))
    assert "p.yaml:" in str(e.value) and "workloads[0].measured" in str(e.value)
    assert words in str(e.value) and "no measurement file" not in str(e.value), str(e.value)


def test_two_rows_at_one_point_are_refused_by_estimate_as_by_a_problem(tmp_path: Path) -> None:
    """The table's batch-32 row again at another context: which one stands for the point would
    be arbitrary, so estimate refuses it (it said "the last one is used") in a problem's words;
    a row of another engine at that point is no second figure."""
    doc = yaml.safe_load(TABLE.read_text())
    again = {**doc["measurements"][1], "context": 4096, "value": 500.0}
    doc["measurements"].append(again)
    table = tmp_path / "t.yaml"
    table.write_text(yaml.safe_dump(doc, sort_keys=False))
    words = "two decode figures at batch 32 on dgx-spark at tp 1"
    args = ["estimate", "-m", "qwen2.5-7b", "-d", "dgx-spark", "--weights", "q8_0"]
    res = CliRunner().invoke(app, [*args, "--batch", "32", "--measured", str(table)])
    assert res.exit_code != 0 and words in res.output and "measurements[3]" in res.output
    assert "t.yaml:" in res.output, res.output
    problem = yaml.safe_load(EXAMPLE.read_text())
    problem["workloads"][0]["measured"] = str(table)
    with pytest.raises(InputError, match=words):
        load_problem(_write(tmp_path, problem))
    # A row of another engine at that point is no second figure: under llama.cpp the table's
    # own row stands. (vLLM, the one other engine for Q8_0 here, is refused for GGUF weights.)
    doc["measurements"][-1] = {**again, "engine": "vllm"}
    table.write_text(yaml.safe_dump(doc, sort_keys=False))
    run = [*args, "--batch", "32", "--measured", str(table), "--format", "json"]
    res = CliRunner().invoke(app, [*run, "--engine", "llama.cpp"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["tokens_per_s"] == PUBLISHED[32]


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("llamacpp-bench-dgx-sparc", "did you mean `llamacpp-bench-dgx-spark`?"),
        ("my own bench", "add it under `references`"),
    ],
)
def test_a_source_the_table_does_not_define_is_refused(
    source: str, words: str, tmp_path: Path
) -> None:
    """A row's `source` names a reference of its table; any other is refused at its line, in
    estimate and in a problem alike."""
    doc = yaml.safe_load(TABLE.read_text())
    doc["measurements"][1]["source"] = source
    table = tmp_path / "t.yaml"
    table.write_text(yaml.safe_dump(doc, sort_keys=False))
    line = next(
        n
        for n, text in enumerate(table.read_text().splitlines(), 1)
        if text.strip() == f"source: {source}"
    )
    args = ["estimate", "-m", "qwen2.5-7b", "-d", "dgx-spark", "--measured", str(table)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code != 0, res.output
    problem = yaml.safe_load(EXAMPLE.read_text())
    problem["workloads"][0]["measured"] = str(table)
    with pytest.raises(InputError) as e:
        load_problem(_write(tmp_path, problem))
    for text in (res.output, str(e.value)):
        assert f"t.yaml:{line}:" in text and "measurements[1].source" in text, text
        assert f"source `{source}` is no reference of this table" in text and words in text
