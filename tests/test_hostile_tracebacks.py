"""Regression tests for inputs that once ended in a Python traceback: each now gets a planner
error naming the file or option and the documented exit code (2 for bad input)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hostile_cli import LLAMA_CONFIG, run
from typer.testing import CliRunner

from planner.cli import app

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "problems"


def chat_problem(tmp_path: Path, old: str = "", new: str = "", name: str = "p.yaml") -> Path:
    text = (PROBLEMS / "chat-70b.yaml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["solve", "tco", "explain"])
def test_demand_of_zero_every_hour(tmp_path: Path, command: str) -> None:
    text = (PROBLEMS / "rent-the-peak.yaml").read_text(encoding="utf-8")
    zero = re.sub(r"hourly: \[.*?\]", "hourly: [" + ", ".join(["0"] * 24) + "]", text, flags=re.S)
    path = tmp_path / "zero.yaml"
    path.write_text(zero, encoding="utf-8")
    code, out = run(command, str(path), "--time-limit", "5")
    assert code == 2
    assert "zero.yaml:" in out and "demand.hourly" in out and "demand of 0" in out


@pytest.mark.parametrize(
    ("second", "scale", "messages"),
    [
        ("night", 0, ["demand.periods:", "demand of 0"]),
        ("day", 1, ["demand.periods[1].name", "two demand periods are named `day`"]),
    ],
)
def test_demand_periods(tmp_path: Path, second: str, scale: int, messages: list[str]) -> None:
    periods = f"    - {{name: day, share: 0.5, scale: {scale}}}\n"
    periods += f"    - {{name: {second}, share: 0.5, scale: 0}}\n"
    path = chat_problem(tmp_path, "objective:", f"demand:\n  periods:\n{periods}objective:")
    code, out = run("solve", str(path))
    assert code == 2 and all(m in out for m in messages), out


def test_frontier_of_a_problem_with_a_demand_profile() -> None:
    code, out = run("frontier", str(PROBLEMS / "rent-the-peak.yaml"), "--points", "2")
    assert code == 2
    assert "problem `rent-the-peak`" in out and "demand is given" in out and "planner sweep" in out


def test_frontier_of_a_request_mix() -> None:
    # Once a traceback; a request mix's served rate is now a decision, so it has a frontier.
    code, out = run("frontier", str(PROBLEMS / "request-mix.yaml"), "--points", "2")
    assert code == 0 and "Pareto-optimal points" in out


@pytest.mark.parametrize("command", ["solve", "tco", "sweep", "frontier", "explain", "compare"])
def test_seed_above_32_bits(command: str) -> None:
    code, out = run(command, str(PROBLEMS / "chat-70b.yaml"), "--seed", "2147483648")
    assert code == 2 and "--seed" in out and "2147483647" in out


def test_set_into_an_empty_section(tmp_path: Path) -> None:
    path = chat_problem(tmp_path, "  require_ecc: true\n  memory_headroom: 0.1\n", "")
    assert "constraints:\nhorizon:" in path.read_text(encoding="utf-8")
    code, out = run("solve", str(path), "--set", "constraints.budget_usd=5", "--time-limit", "5")
    assert code == 3  # a budget of $5 buys nothing: infeasible, not a crash
    assert "budget" in out


def test_prompt_longer_than_the_context(tmp_path: Path) -> None:
    path = chat_problem(tmp_path, "prompt_tokens: 1500", "prompt_tokens: 9000")
    code, out = run("solve", str(path))
    assert code == 2 and "p.yaml:12:" in out and "prompt_tokens" in out


def test_default_prompt_longer_than_a_short_context(tmp_path: Path) -> None:
    path = chat_problem(tmp_path, "    prompt_tokens: 1500\n", "")
    code, out = run("solve", str(path), "--set", "workloads.chat.context_tokens=512")
    assert code == 2 and "prompt_tokens of 1,024 (the default)" in out


def write_config(tmp_path: Path, text: str | bytes, folder: str = "m") -> Path:
    path = tmp_path / folder / "config.json"
    path.parent.mkdir(exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ('"4096"', '"4096"'),
        ('"abc"', '"abc"'),
        ("null", "null"),
        ("[4096]", "[4096]"),
        ("1e400", "Infinity"),
        ("4096.7", "4096.7"),
        ("-4096", "-4096"),
        ("0", "0"),
        ("true", "true"),
        ("99999999999999999999", "99999999999999999999"),
    ],
)
def test_config_json_hidden_size_not_a_count(tmp_path: Path, raw: str, shown: str) -> None:
    text = json.dumps(LLAMA_CONFIG).replace('"hidden_size": 4096', f'"hidden_size": {raw}')
    path = write_config(tmp_path, text)
    code, out = run("estimate", "--model", str(path), "--device", "h100-sxm")
    assert code == 2
    assert "config.json: `hidden_size`: expected a whole number" in out and shown in out


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_config_json_non_finite_constants(tmp_path: Path, constant: str) -> None:
    text = json.dumps(LLAMA_CONFIG).replace("14336", constant)
    code, out = run("estimate", "--model", str(write_config(tmp_path, text)), "-d", "h100-sxm")
    assert code == 2 and f"`{constant}` is not a number JSON allows" in out


def test_config_json_utf16_is_named(tmp_path: Path) -> None:
    path = write_config(tmp_path, json.dumps(LLAMA_CONFIG).encode("utf-16"))
    code, out = run("estimate", "--model", str(path), "-d", "h100-sxm")
    assert code == 2 and "UTF-16" in out and "save it as UTF-8" in out


def test_config_json_with_a_utf8_bom_is_read(tmp_path: Path) -> None:
    path = write_config(tmp_path, json.dumps(LLAMA_CONFIG).encode("utf-8-sig"))
    code, out = run("estimate", "--model", str(path), "-d", "h100-sxm")
    assert code == 0, out
    assert "weights" in out


def test_config_json_latin1_byte_has_a_line_and_column(tmp_path: Path) -> None:
    text = json.dumps(LLAMA_CONFIG, indent=1).replace('"llama"', '"caf\xe9"')
    path = write_config(tmp_path, text.encode("latin-1"))
    code, out = run("estimate", "--model", str(path), "-d", "h100-sxm")
    assert code == 2 and "config.json:2:" in out and "0xE9" in out


@pytest.mark.parametrize(
    ("per_token", "message"),
    [(0, "expected a whole number from 1"), (9, "9 experts per token, more than the 8")],
)
def test_config_json_experts_per_token(tmp_path: Path, per_token: int, message: str) -> None:
    cfg = {**LLAMA_CONFIG, "num_local_experts": 8, "num_experts_per_tok": per_token}
    path = write_config(tmp_path, json.dumps(cfg))
    code, out = run("estimate", "--model", str(path), "-d", "h100-sxm")
    assert code == 2 and "`num_experts_per_tok`" in out and message in out


def test_config_json_deeply_nested(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[" * 100_000 + "]" * 100_000)
    code, out = run("estimate", "--model", str(path), "-d", "h100-sxm")
    assert code == 2 and "config.json" in out


def test_config_json_folder_name_that_is_no_id(tmp_path: Path) -> None:
    path = write_config(tmp_path, json.dumps(LLAMA_CONFIG), folder="My Model (v2)")
    code, out = run("estimate", "--model", str(path), "-d", "h100-sxm")
    assert code == 0, out


def test_rich_does_not_turn_text_into_emoji() -> None:
    code, out = run(
        "solve", str(PROBLEMS / "chat-70b.yaml"), "--set", "workloads.chat.model=:smile:"
    )
    assert code == 2 and ":smile:" in out


def test_null_key_points_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text("name: x\nworkloads:\n  - name: a\n    model: llama-3.1-8b\n    ~: 5\n")
    code, out = run("solve", str(path))
    assert code == 2 and "k.yaml:5:5:" in out and "a key is empty" in out


def test_duplicate_through_an_alias_points_at_the_alias(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("name: x\nworkloads:\n  - &w\n    name: a\n    model: llama-3.1-8b\n  - *w\n")
    code, out = run("solve", str(path))
    assert code == 2 and "a.yaml:6:5: workloads[1].name: two workloads are named `a`" in out


def test_vary_keeps_list_values_whole() -> None:
    from planner.whatif.sweep import parse_vary

    v = parse_vary("constraints.allowed_devices=[h100-sxm, l4],[mi300x],'a,b'")
    assert v.values == (["h100-sxm", "l4"], ["mi300x"], "a,b")


def test_set_into_a_missing_list_names_the_option() -> None:
    args = ["solve", str(PROBLEMS / "chat-70b.yaml"), "--set", "constraints.inventory.0.count=3"]
    code, out = run(*args)
    assert code == 2 and out.startswith("error: --set constraints.inventory.0.count=3:")
    assert "set the whole list" in out


def test_vary_range_end_beyond_a_float() -> None:
    code, out = run("sweep", str(PROBLEMS / "chat-70b.yaml"), "--vary", "name=1e400..2")
    assert code == 2 and "--vary name=1e400..2: `1e400` is beyond any value" in out


def test_a_plan_nested_deeper_than_json_can_read(tmp_path: Path) -> None:
    # Once a RecursionError from the JSON reader (verify and compare).
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    shallow_but_deep = tmp_path / "deep2.json"
    shallow_but_deep.write_text('{"a": ' * 40 + "1" + "}" * 40, encoding="utf-8")
    for path in (deep, shallow_but_deep):
        code, out = run("verify", str(path))
        assert code == 2 and path.name in out and "nested deeper than 32 levels" in out


@pytest.mark.parametrize("example", ["qlora-8b-deadline.yaml", "train-13b-2m.yaml"])
def test_frontier_of_a_training_only_problem(example: str) -> None:
    # Once a TypeError inside the solver layer: nothing is served, so there is nothing to trade.
    code, out = run("frontier", str(PROBLEMS / example), "--points", "2", "--executor", "serial")
    assert code == 2 and "no inference workload" in out and "planner sweep" in out


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_frontier_of_an_infeasible_problem_exits_3(fmt: str) -> None:
    args = ["frontier", str(PROBLEMS / "infeasible.yaml"), "--points", "2", "--format", fmt]
    code, out = run(*args, "--executor", "serial")
    assert code == 3 and "no plan meets" in out


def test_estimate_on_every_device_exits_3_when_nothing_fits(tmp_path: Path) -> None:
    # A 16-million-layer config: no device count holds it; once exit code 0 with `-d all`.
    folder = tmp_path / "huge"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({**LLAMA_CONFIG, "num_hidden_layers": 16_000_000}), encoding="utf-8"
    )
    code, _ = run("estimate", "-m", str(folder / "config.json"), "-d", "all")
    assert code == 3


def test_options_demand_beyond_a_problem_s_limits() -> None:
    # Once the solver's model dump (exit 1): a scaled demand is validated as a file would be.
    code, out = run("options", str(PROBLEMS / "chat-70b.yaml"), "--demand", "1e9")
    assert code == 2 and "--demand 1e+09" in out and "workloads.0.concurrency" in out


def test_simulate_a_training_only_problem() -> None:
    code, out = run("simulate", str(PROBLEMS / "qlora-8b-deadline.yaml"), "--requests", "100")
    assert code == 2 and "no inference workload" in out


def test_solve_out_onto_its_own_problem_file(tmp_path: Path) -> None:
    path = chat_problem(tmp_path)
    before = path.read_text(encoding="utf-8")
    link = tmp_path / "link.yaml"
    link.symlink_to(path)
    for target in (path, link):
        code, out = run("solve", str(path), "--out", str(target))
        assert code == 2 and "names the problem file this command reads" in out
    assert path.read_text(encoding="utf-8") == before


def test_rows_out_suffix_is_checked_before_any_solve(tmp_path: Path) -> None:
    args = ["--vary", "constraints.max_devices=8,16", "--out", str(tmp_path / "rows.txt")]
    code, out = run("sweep", str(PROBLEMS / "chat-70b.yaml"), *args)
    assert code == 2 and "writes .csv or .json files" in out


def test_config_json_with_no_kv_heads(tmp_path: Path) -> None:
    path = write_config(tmp_path, json.dumps({**LLAMA_CONFIG, "num_key_value_heads": 0}))
    code, out = run("estimate", "--model", str(path), "-d", "h100-sxm")
    assert code == 2 and "num_key_value_heads" in out and "at least one KV head" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prompt", "100000000"], "--prompt 100,000,000 is longer than --context 4,096 (the"),
        (["--context", "1"], "--prompt 1,024 (the default) is longer than --context 1:"),
        (["--context", "1000000", "--prompt", "100"], "maximum context of 131,072 tokens"),
    ],
)
def test_estimate_checks_context_as_solve_does(args: list[str], message: str) -> None:
    code, out = run("estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", *args)
    assert code == 2 and message in out


def test_sweep_names_its_own_points() -> None:
    chat = str(PROBLEMS / "chat-70b.yaml")
    twice = ["--vary", "constraints.power_w=5000,16000", "--vary", "constraints.power_w=7e4,8e4"]
    code, out = run("sweep", chat, *twice)
    assert code == 2 and "is given twice" in out
    code, out = run("sweep", chat, "--vary", "workloads.chat.concurrency=1..1000000:3")
    assert code == 2 and "--vary point workloads.chat.concurrency=500000.5" in out
    assert "--set" not in out


def test_a_numeric_choice_lists_its_choices(tmp_path: Path) -> None:
    path = chat_problem(
        tmp_path, "max_ms_per_token: 50", "max_ms_per_token: 50\n    latency_percentile: 97"
    )
    code, out = run("solve", str(path))
    assert code == 2 and "got `97`; expected one of: 50, 90, 95, 99" in out
    assert "quote it" not in out


def test_a_plan_with_a_key_the_planner_never_writes(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    code, _ = run("solve", str(PROBLEMS / "chat-70b.yaml"), "--out", str(plan))
    assert code == 0
    data = json.loads(plan.read_text(encoding="utf-8"))
    data["extra_field"] = 1
    plan.write_text(json.dumps(data), encoding="utf-8")
    code, out = run("verify", str(plan))
    assert code == 2 and "`extra_field`: not a field of a version" in out


def test_a_plan_where_a_problem_belongs_and_back(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    assert run("solve", str(PROBLEMS / "chat-70b.yaml"), "--out", str(plan))[0] == 0
    for args in (["solve", str(plan)], ["simulate", str(plan)]):
        code, out = run(*args)
        assert code == 2 and "this is a plan" in out and "planner verify" in out
        assert "unknown key" not in out
    code, out = run("verify", str(PROBLEMS / "chat-70b.yaml"))
    assert code == 2 and "a problem file?" in out


RENTED_4090 = """
name: rent-4090
workloads:
  - {name: chat, kind: inference, model: llama-3.1-70b, weights: awq-int4, kv: fp16,
     context_tokens: 4096, prompt_tokens: 1000, concurrency: 16, min_tokens_per_s: 200,
     max_ms_per_token: 80}
constraints: {allowed_devices: [rtx-4090]}
horizon: {procurement: rent, lifetime_years: 0.25, utilization: 1.0}
objective: {goal: min_cost}
"""


def test_a_rented_consumer_plan_verifies_and_replays(tmp_path: Path) -> None:
    # The launch command of replicas rented on desktop machines (one card each) spans as many
    # machines as cards: the verifier counts them on the same default host as the plan.
    problem = tmp_path / "rent.yaml"
    problem.write_text(RENTED_4090, encoding="utf-8")
    plan = tmp_path / "plan.json"
    assert run("solve", str(problem), "--out", str(plan))[0] == 0
    assert "over" in json.loads(plan.read_text())["workloads"][0]["recipe"]["command"]
    assert run("verify", str(plan), str(problem))[0] == 0
    assert run("simulate", str(plan), str(problem), "--requests", "100")[0] == 0


def test_a_plan_with_no_stages_fails_verification(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    assert run("solve", str(PROBLEMS / "chat-70b.yaml"), "--out", str(plan))[0] == 0
    data = json.loads(plan.read_text(encoding="utf-8"))
    data["workloads"][0]["stages"] = []
    plan.write_text(json.dumps(data), encoding="utf-8")
    code, out = run("verify", str(plan))
    assert code == 5 and "fails verification" in out


def test_plan_files_that_are_null_or_carry_a_nested_key(tmp_path: Path) -> None:
    null = tmp_path / "null.json"
    null.write_text("null", encoding="utf-8")
    code, out = run("verify", str(null))
    assert code == 2 and "no `status` and `devices`" in out
    plan = tmp_path / "plan.json"
    assert run("solve", str(PROBLEMS / "chat-70b.yaml"), "--out", str(plan))[0] == 0
    data = json.loads(plan.read_text(encoding="utf-8"))
    data["workloads"][0]["foo"] = 1
    plan.write_text(json.dumps(data), encoding="utf-8")
    code, out = run("verify", str(plan))
    assert code == 2 and "`workloads.0.foo`: not a field the planner writes there" in out


@pytest.mark.parametrize("values", ["8,,16", "8,16,", ",8"])
def test_a_vary_list_with_an_empty_value(values: str) -> None:
    # Once dropped without a word: `8,,16` swept two points where three were meant.
    code, out = run(
        "sweep", str(PROBLEMS / "chat-70b.yaml"), "--vary", f"constraints.max_devices={values}"
    )
    assert code == 2 and "an empty value between commas" in out


def test_two_spellings_of_one_vary_path() -> None:
    chat = str(PROBLEMS / "chat-70b.yaml")
    args = ["--vary", "workloads.chat.concurrency=64,128", "--vary", "workloads.0.concurrency=256"]
    code, out = run("sweep", chat, *args)
    assert code == 2 and "is given twice" in out


def test_options_scales_a_request_mix_by_its_rate() -> None:
    from planner.load import load_problem
    from planner.schema.problem import InferenceWorkload
    from planner.whatif.options import scaled

    base = load_problem(PROBLEMS / "request-mix.yaml")
    double = scaled(base, 2.0)
    for a, b in zip(base.workloads, double.workloads, strict=True):
        assert isinstance(a, InferenceWorkload) and isinstance(b, InferenceWorkload)
        assert b.requests_per_s == pytest.approx(2 * (a.requests_per_s or 0))
        assert b.request_mix == a.request_mix


def test_a_frontier_whose_first_solve_ran_out_of_time() -> None:
    from planner.load import load_problem
    from planner.schema.status import Status
    from planner.solve import Solver
    from planner.whatif.frontier import frontier

    class OutOfTime(Solver):
        def least_status(self, *args: object) -> tuple[float | None, Status]:
            return None, Status.NO_PLAN

    fr = frontier(load_problem(PROBLEMS / "chat-70b.yaml"), "cost", "tokens_per_s", 2, OutOfTime())
    assert fr.status == Status.NO_PLAN and "within the time limit" in fr.notes[0]


def _measured(tmp_path: Path, *rows: str) -> str:
    path = tmp_path / "measured.yaml"
    path.write_text("measurements:\n" + "".join(f"  - {{{r}}}\n" for r in rows))
    return str(path)


ROW = "model: llama-3.1-8b, device: h100-sxm, weights: fp16, metric: decode_tokens_per_s, batch: 1"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        # Once "inf tokens/s" and `Infinity` in the JSON; once 1,000,000,000 tokens/s and 2.1 M
        # tokens per joule: faster than reading 8B's weights at the H100's 3,350 GB/s allows.
        (".inf", "measurements[0].value: got inf; write a finite number"),
        ("1.0e9", "measurements[0].value: 1e+09 decode tokens/s of llama-3.1-8b on h100-sxm"),
    ],
)
def test_a_measured_figure_no_device_reaches_is_refused(
    tmp_path: Path, value: str, message: str
) -> None:
    path = _measured(tmp_path, f"{ROW}, value: {value}")
    code, out = run("estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", "--measured", path)
    assert code == 2 and f"{path}:2:" in out and message in out, out
    if value == "1.0e9":
        assert "faster than reading its active weights" in out and "tokens/s at most" in out


def test_measured_rows_the_estimate_does_not_use_are_noted(tmp_path: Path) -> None:
    # Once silently ignored: a metric estimate does not read, an unknown model, another format.
    path = _measured(
        tmp_path,
        f"{ROW}, value: 150",
        ROW.replace("decode_tokens_per_s", "ms_per_output_token") + ", value: 1000",
        ROW.replace("llama-3.1-8b", "nosuch") + ", value: 100",
        ROW.replace("fp16", "fp8") + ", value: 200",
    )
    code, out = run("estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", "--measured", path)
    assert code == 0 and "150.0 tokens/s (measured)" in out
    assert "measurements[0] not used" not in out
    assert f"{path}:3:5: measurements[1] not used: metric `ms_per_output_token`" in out
    assert "measurements[2] not used: model `nosuch` is not in the catalog" in out
    assert "measurements[3] not used: weights `fp8`; this estimate is of fp16" in out
    # JSON: the notes on stderr, the document on stdout stays one JSON value.
    args = ["estimate", "-m", "llama-3.1-8b", "-d", "h100-sxm", "--measured", path]
    r = CliRunner().invoke(app, [*args, "--format", "json"])
    assert json.loads(r.stdout)["tokens_per_s"] == 150.0 and "not used" in r.stderr


def test_the_estimate_json_writer_writes_no_infinity() -> None:
    from planner.report.json_text import json_text

    text = json_text({"a": [1.0, float("inf")], "b": (float("nan"), {"c": -float("inf")})})
    assert json.loads(text) == {"a": [1.0, None], "b": [None, {"c": None}]}


def test_a_negative_zero_is_zero(tmp_path: Path) -> None:
    """`electricity_usd_per_kwh: -0.0` once made a training note say "energy for the job $-0"
    while the verifier's figure said "$0": the plan was refused as an internal error, exit 1."""
    from planner.load import load_problem

    text = (PROBLEMS / "train-13b-2m.yaml").read_text(encoding="utf-8")
    old = "electricity_usd_per_kwh: 0.10"
    assert old in text
    path = tmp_path / "p.yaml"
    path.write_text(text.replace(old, "electricity_usd_per_kwh: -0.0"), encoding="utf-8")
    code, out = run("solve", str(path))
    assert code == 0, out
    assert "OPTIMAL" in out and "$-0" not in out
    assert str(load_problem(path).horizon.electricity_usd_per_kwh) == "0.0"


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_options_with_no_option_at_any_demand_exits_3(fmt: str) -> None:
    """infeasible.yaml under `planner options` once printed INFEASIBLE buying and renting at
    every level with "the cheapest option is the same at every demand level asked", exit 0."""
    code, out = run("options", str(PROBLEMS / "infeasible.yaml"), "--format", fmt)
    assert code == 3, out
    assert "the cheapest option is the same" not in out
    if fmt == "table":
        assert "no option serves the demand at any level asked" in out


def test_a_device_life_of_a_blink_is_refused() -> None:
    """carbon.device_life_years 1e-9 on a rented fleet (`planner options`, or procurement rent)
    once overflowed the solver's integers: "the solver model is invalid", exit 1."""
    rent = ("solve", str(PROBLEMS / "carbon-cap.yaml"), "--set", "horizon.procurement=rent")
    code, out = run(*rent, "--set", "carbon.device_life_years=1e-9")
    assert code == 2, out
    assert "carbon.device_life_years: must be at least 0.000114155, got 1e-09" in out
    # An hour, the least a device life may be, solves (the carbon ceiling then binds).
    code, out = run(*rent, "--set", "carbon.device_life_years=1 h", "--time-limit", "60")
    assert code == 3 and "infeasible because of `carbon`" in out, out
