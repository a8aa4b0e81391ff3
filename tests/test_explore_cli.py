"""The what-if commands through the CLI: --set, sweep, frontier, explain, compare."""

from __future__ import annotations

import csv
import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import InputError
from planner.whatif.sweep import parse_vary

runner = CliRunner()
CHAT = "problems/chat-70b.yaml"


def run(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


def test_set_changes_the_problem() -> None:
    code, text = run("solve", CHAT, "--format", "json", "--no-timings")
    base = json.loads(text)
    code2, text2 = run(
        "solve",
        CHAT,
        "--set",
        "workloads.chat.min_tokens_per_s=20000",
        "--set",
        "workloads.chat.concurrency=1024",
        "--format",
        "json",
    )
    assert code == code2 == 0
    more = json.loads(text2)
    # Ten times the throughput floor (from four times the sequences) costs more, and is met.
    assert more["tco_usd"] > base["tco_usd"]
    assert sum(w["tokens_per_s"] for w in more["workloads"]) >= 20000


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("constraints.budjet_usd=5", "did you mean `budget_usd`"),
        ("workloads.chatt.concurrency=5", "did you mean `chat`"),
        ("constraints.budget_usd=-5", "--set constraints.budget_usd=-5"),
        ("horizon.procurement=lease", "`buy`, `rent` (on demand), or a list"),
        ("budget", "expected PATH=VALUE"),
    ],
)
def test_set_errors_name_the_override(setting: str, message: str) -> None:
    code, text = run("solve", CHAT, "--set", setting)
    assert code == 2
    assert message in text


def test_a_long_set_value_is_named_by_its_start() -> None:
    # 10,000 hourly levels once echoed whole in the message: 20 kB of "1,1,1,...".
    levels = "[" + ",".join(["1"] * 10_000) + "]"
    code, text = run("solve", "problems/rent-the-peak.yaml", "--set", f"demand.hourly={levels}")
    assert code == 2
    assert "--set demand.hourly=[1,1,1" in text and "... (20,015 characters)" in text
    assert "`hourly` has 10000 values: give 24 (a day) or 168 (a week)" in text
    assert len(text) < 400


def test_no_timings_gives_identical_bytes() -> None:
    a = run("solve", CHAT, "--format", "json", "--no-timings")[1]
    b = run("solve", CHAT, "--format", "json", "--no-timings")[1]
    assert a == b
    assert "solve_seconds" not in a


def test_parse_vary() -> None:
    assert parse_vary("constraints.power_w=5000..40000:8").values == (
        5000,
        10000,
        15000,
        20000,
        25000,
        30000,
        35000,
        40000,
    )
    assert parse_vary("horizon.procurement=buy,rent").values == ("buy", "rent")
    assert parse_vary("horizon.utilization=0.1..0.3:3").values == (0.1, 0.2, 0.3)
    with pytest.raises(InputError, match="POINTS"):
        parse_vary("constraints.power_w=1..2:x")
    with pytest.raises(InputError, match="not a number"):
        parse_vary("constraints.power_w=a..b")
    # Ranges in the units a problem file accepts (they were refused as not numbers).
    assert parse_vary("constraints.power_w=5 kW..10 kW:3").values == ("5 kW", "7.5 kW", "10 kW")
    assert parse_vary("constraints.budget_usd=$100k..$1M:3").values == (
        "$100000",
        "$550000",
        "$1000000",
    )
    # A bare suffix is the field's to read (k is 1,024 for token counts), never taken in.
    assert parse_vary("workloads.chat.context_tokens=8k..32k:4").values == (
        "8k",
        "16k",
        "24k",
        "32k",
    )
    assert parse_vary("horizon.utilization=1/4..3/4:3").values == (0.25, 0.5, 0.75)
    with pytest.raises(InputError, match="one suffix"):
        parse_vary("workloads.chat.context_tokens=8k..1M:2")
    with pytest.raises(InputError, match="one unit"):
        parse_vary("constraints.power_w=5 kW..10 mW:2")


@pytest.mark.parametrize("spec", ["5000..5000:3", "5 kW..5000 W:4", "1e4..10000"])
def test_a_range_whose_ends_are_one_value_is_refused(spec: str) -> None:
    # Once as many identical rows as points, each point solved.
    with pytest.raises(InputError, match="FROM and TO are the same value"):
        parse_vary(f"constraints.power_w={spec}")
    code, out = run("sweep", CHAT, "--vary", f"constraints.power_w={spec}")
    assert code == 2 and "--set constraints.power_w=" in " ".join(out.split())


def test_sweep_csv_and_plot(tmp_path: Path) -> None:
    out, png = tmp_path / "sweep.csv", tmp_path / "sweep.png"
    code, text = run(
        "sweep",
        CHAT,
        "--vary",
        "constraints.power_w=5000..20000:4",
        "--out",
        str(out),
        "--plot",
        str(png),
    )
    assert code == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["constraints.power_w"] for r in rows] == ["5000", "10000", "15000", "20000"]
    # 5 kW at the wall cannot carry 2,000 tokens/s of a 70B model; 20 kW can, and a looser cap
    # never loses a plan a tighter one had.
    status = [r["status"] for r in rows]
    assert status[0] == "INFEASIBLE" and status[-1] == "OPTIMAL"
    first = status.index("OPTIMAL")
    assert set(status[:first]) == {"INFEASIBLE"} and set(status[first:]) == {"OPTIMAL"}
    # Loosening a cap never makes the cheapest plan dearer.
    costs = [float(r["tco_usd"]) for r in rows[first:]]
    assert all(b <= a * (1 + 1e-9) for a, b in itertools.pairwise(costs)), costs
    img = imread(png)
    assert img.shape[0] > 200 and img.shape[1] > 200
    red = (img[..., 0] > 0.9) & (img[..., 1] < 0.1) & (img[..., 2] < 0.1)
    assert red.any()  # the infeasible point is marked
    assert "INFEASIBLE" in text and "OPTIMAL" in text


def test_two_parameter_sweep_json() -> None:
    code, text = run(
        "sweep",
        CHAT,
        "--vary",
        "horizon.utilization=0.3,0.9",
        "--vary",
        "horizon.electricity_usd_per_kwh=0.1,0.3",
        "--format",
        "json",
    )
    assert code == 0
    rows = json.loads(text)
    assert len(rows) == 4
    by = {(r["horizon.utilization"], r["horizon.electricity_usd_per_kwh"]): r for r in rows}
    # Dearer electricity and more working hours each raise the total cost.
    assert by[(0.3, 0.3)]["tco_usd"] > by[(0.3, 0.1)]["tco_usd"]
    assert by[(0.9, 0.1)]["tco_usd"] > by[(0.3, 0.1)]["tco_usd"]


def test_frontier_is_pareto_and_plotted(tmp_path: Path) -> None:
    svg = tmp_path / "frontier.svg"
    code, text = run(
        "frontier",
        CHAT,
        "--x",
        "cost",
        "--y",
        "tokens_per_s",
        "--points",
        "5",
        "--plot",
        str(svg),
        "--format",
        "json",
    )
    assert code == 0
    fr = json.loads(text)
    pts = fr["points"]
    assert len(pts) >= 2
    assert all(p["status"] == "OPTIMAL" for p in pts)
    # Pareto: more money buys strictly more throughput, and no point exceeds its cap.
    for a, b in itertools.pairwise(pts):
        assert b["tco_usd"] > a["tco_usd"] and b["tokens_per_s"] > a["tokens_per_s"]
    for p in pts:
        assert p["tco_usd"] <= p["cost_cap"] + 1
    root = ET.fromstring(svg.read_text())
    texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    assert "Total cost (USD)" in texts and "Throughput (tokens/s)" in texts
    assert pts[0]["devices"].split(" + ")[0] in texts  # the device mix is labelled


def test_frontier_rejects_two_resources() -> None:
    code, text = run("frontier", CHAT, "--x", "cost", "--y", "power")
    assert code == 2
    assert "cannot trade" in text


def test_explain_infeasible_gives_least_relaxations() -> None:
    code, text = run(
        "explain",
        CHAT,
        "--set",
        "constraints.budget_usd=50000",
        "--set",
        "constraints.power_w=3000",
        "--format",
        "json",
    )
    assert code == 0
    ex = json.loads(text)
    assert ex["feasible"] is False
    assert "power" in ex["core"]
    relax = {r["constraint"]: r for r in ex["relaxations"]}
    # The least budget is what the cheapest plan that meets the demand costs.
    cheapest = json.loads(run("solve", CHAT, "--format", "json")[1])["tco_usd"]
    # The solver counts whole dollars, each coefficient rounded up; the idle-draw terms (one per
    # device per period, 8 devices here) put the least budget a few dollars above the plan's cost.
    assert cheapest <= relax["budget"]["needed"] <= cheapest + 10
    assert relax["power"]["needed"] > 3000


def test_explain_file_without_design() -> None:
    # One card per desktop and no tensor-parallel group across desktops: at most 8 stages of
    # one 24-32 GB card cannot hold 405B in fp16.
    code, text = run(
        "explain",
        "problems/infeasible.yaml",
        "--set",
        "constraints.allowed_hosts=[desktop-1]",
        "--set",
        "constraints.max_tensor_parallel=1",
    )
    assert code == 0
    assert "infeasible" in text
    assert "812 GB" in text  # 405B parameters at fp16


def test_explain_file_names_the_budget() -> None:
    # In 8-slot PCIe servers (tensor parallel over PCIe) a plan exists; the budget rules it out.
    code, text = run("explain", "problems/infeasible.yaml")
    assert code == 0
    assert "infeasible because of `budget`" in text
    least = float(text.split("the least any plan needs is $")[1].split(" ")[0].replace(",", ""))
    assert least > 5000


def test_explain_feasible_prices_binding_limits() -> None:
    # chat-product's cheapest plan sits on its latency ceiling (`binding_constraints`).
    code, text = run(
        "explain",
        "problems/chat-product.yaml",
        "--set",
        "constraints.budget_usd=400000",
        "--format",
        "json",
    )
    assert code == 0
    ex = json.loads(text)
    assert ex["feasible"] is True
    names = {m["constraint"] for m in ex["marginal"]}
    assert "latency:chat" in names
    lat = next(m for m in ex["marginal"] if m["constraint"] == "latency:chat")
    # A looser latency ceiling can only make the cheapest plan cheaper or equal.
    assert lat["objective_after"] <= lat["objective"]


def test_compare_plans_and_forced_device(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run("solve", CHAT, "--out", str(a))[0] == 0
    assert (
        run("solve", CHAT, "--set", "constraints.allowed_devices=[h100-sxm]", "--out", str(b))[0]
        == 0
    )
    code, text = run("compare", str(a), str(b), "--format", "json")
    assert code == 0
    c = json.loads(text)
    pa, pb = json.loads(a.read_text()), json.loads(b.read_text())
    tco = next(r for r in c["metrics"] if r["metric"] == "tco_usd")
    assert tco["change"] == pytest.approx(pb["tco_usd"] - pa["tco_usd"])
    code, text = run("compare", CHAT, "--force-device", "h100-sxm")
    assert code == 0
    assert "h100-sxm" in text


def test_compare_rejects_a_non_plan(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    code, text = run("compare", str(bad), str(bad))
    assert code == 2
    assert "not a plan" in text


def test_infeasibility_names_a_raised_memory_headroom() -> None:
    """Keeping 99 % of memory free is why nothing fits: the note names memory_headroom (it
    suggested the latency ceiling, context and concurrency only)."""
    code, text = run("solve", CHAT, "--set", "constraints.memory_headroom=0.99")
    assert code == 3
    assert "memory_headroom (99% of memory kept free)" in " ".join(text.split())


def test_infeasibility_explains_the_default_of_one_sequence(tmp_path: Path) -> None:
    """A file without `concurrency` holds one sequence, which cannot make 2,000 tokens/s: the
    note says it is the default, what one sequence makes and how to state the sequences."""
    f = tmp_path / "p.yaml"
    lines = Path(CHAT).read_text(encoding="utf-8").splitlines()
    f.write_text("\n".join(ln for ln in lines if "concurrency" not in ln) + "\n")
    code, text = run("solve", str(f))
    assert code == 3
    flat = " ".join(text.split())
    assert "the default: the file states none" in flat and "`concurrency: N`" in flat


def test_a_qlora_job_that_fits_no_device_counts_its_base_weights_in_4_bit() -> None:
    """QLoRA holds its base model in 4-bit NF4: the note counted it in bf16 (16 GB for 8B)."""
    code, text = run(
        "solve", "problems/qlora-8b-deadline.yaml", "--set", "constraints.allowed_devices=[t4]",
        "--set", "constraints.max_stages=1", "--set", "constraints.max_tensor_parallel=1",
    )  # fmt: skip
    assert code == 3
    assert "(nf4)" in text and "(bf16)" not in text


def test_a_rule_across_fields_names_the_override_that_broke_it() -> None:
    """The rule sits at `phases` in the file, but the `--set` broke it: say so."""
    problem = Path(__file__).resolve().parent.parent / "problems" / "train-then-serve-13b.yaml"
    code, text = run("solve", str(problem), "--set", "horizon.procurement=rent")
    assert code == 2
    assert "(as --set horizon.procurement=rent sets it)" in text


def test_an_unmeetable_latency_target_is_named() -> None:
    """A 1 ms first token is out of every design's reach: the request constraint was named as
    the cause, and not the ceiling that emptied its prefill side."""
    problem = Path(__file__).resolve().parent.parent / "problems" / "request-mix.yaml"
    code, text = run(
        "solve", str(problem), "--set", "workloads.assistant.max_ttft_s=0.001", "--time-limit", "20"
    )
    flat = " ".join(text.split())
    assert code == 3, text
    assert "no replica design prefills `chat` or `documents`" in flat
    assert "max_ttft_s 0.001" in flat


def test_a_deadline_no_shape_meets_names_the_shortest_that_has_a_plan(tmp_path: Path) -> None:
    """The advice was to lower micro_batch or seq_len; the fastest shape's hours are the
    deadline to ask for, and that deadline has a plan."""
    doc = (
        "name: t\nworkloads:\n  - {name: ft, kind: training, model: llama-3.1-8b, method: full,"
        " seq_len: 4096, micro_batch: 1, token_budget: 1e9, deadline_hours: 0.5}\n"
        "constraints: {allowed_devices: [rtx-4090], max_devices: 64}\n"
        "horizon: {procurement: buy, lifetime_years: 3}\nobjective: {goal: min_cost}\n"
    )
    path = tmp_path / "t.yaml"
    path.write_text(doc)
    code, text = run("solve", str(path))
    flat = " ".join(text.split())
    assert code == 3 and "no shape of at most 64 devices" in flat, text
    hours = flat.split("relax deadline_hours to at least ")[1].split(",")[0]
    code, _ = run("solve", str(path), "--set", f"workloads.ft.deadline_hours={hours}")
    assert code == 0
