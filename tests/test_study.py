"""Monte-Carlo studies: draws per sample from the seed and the index only, factors applied where
the syntax says, located errors, the summary's arithmetic, and the same bytes on every
executor."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from test_executor import run

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.whatif.study import Dist, _moves, parse_dist, summarize

CHAT = "problems/chat-70b.yaml"
DISTS = [
    "--vary-dist",
    "prices.h200-sxm=uniform:0.6..1.0",
    "--vary-dist",
    "electricity=lognormal:0.3",
    "--vary-dist",
    "demand=triangular:0.5..1..2",
]


def study_json(*extra: str, samples: int = 6, seed: int = 3) -> dict:
    code, text = run(
        "study", CHAT, *DISTS, "--samples", str(samples), "--seed", str(seed), "--format",
        "json", "--no-timings", *extra,
    )  # fmt: skip
    assert code == 0, text
    return json.loads(text)


def test_a_sample_depends_on_the_seed_and_its_index_only() -> None:
    few = study_json("--executor", "serial", samples=3)
    more = study_json("--executor", "serial", samples=6)
    assert more["samples"][:3] == few["samples"]
    other = study_json("--executor", "serial", samples=3, seed=4)
    assert other["samples"][0]["factor.electricity"] != few["samples"][0]["factor.electricity"]


@pytest.mark.slow
def test_a_study_is_the_same_on_every_executor(dask_cluster: str) -> None:
    serial = study_json("--executor", "serial")
    assert study_json("--executor", "local", "--jobs", "2") == serial
    assert study_json("--executor", "dask", "--executor-address", dask_cluster) == serial


@pytest.mark.slow
def test_factors_multiply_the_figures_they_name() -> None:
    problem = load_problem(Path(CHAT))
    base = problem.model_dump(mode="json")
    shipped = load_catalog().accelerators["h200-sxm"].price
    (move,) = _moves(parse_dist("prices.h200-sxm=uniform:0.5..0.9"), base)
    data = json.loads(json.dumps(base))
    move.apply(data, 0.8)
    prices = data["market"]["prices"]["h200-sxm"]
    assert prices["purchase_usd"] == pytest.approx(shipped.purchase_usd * 0.8)
    assert prices["rent_usd_per_hour"] == pytest.approx(shipped.rent_usd_per_hour * 0.8)
    (demand,) = _moves(parse_dist("demand=uniform:1..2"), base)
    demand.apply(data, 1.5)
    chat = data["workloads"][0]
    assert chat["min_tokens_per_s"] == 3000 and chat["concurrency"] == 384  # 2000 and 256 x 1.5
    every = _moves(parse_dist("prices.*=lognormal:0.1"), base)
    assert len(every) > 10 and len({m.column for m in every}) == len(every)


def test_distributions_draw_what_they_say() -> None:
    rng = np.random.default_rng(0)
    tri = Dist("", "x", "triangular", (0.5, 1.0, 2.0))
    draws = [tri.draw(rng) for _ in range(4000)]
    assert min(draws) >= 0.5 and max(draws) <= 2.0
    assert np.mean(draws) == pytest.approx((0.5 + 1.0 + 2.0) / 3, abs=0.02)  # triangular mean
    logn = [Dist("", "x", "lognormal", (0.3,)).draw(rng) for _ in range(4000)]
    assert np.median(logn) == pytest.approx(1.0, abs=0.03)  # median exp(0) = 1
    assert min(Dist("", "x", "normal", (2.0,)).draw(rng) for _ in range(500)) == 0.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("prices.h20=lognormal:0.2", "unknown device `h20`"),
        ("prices.h200-sxm=gauss:0.2", "unknown distribution `gauss`"),
        ("electricity=uniform:2..1", "rise from LO to HI"),
        ("electricity=lognormal:0", "above 0"),
        ("electricity=lognormal", "unknown distribution"),
        ("horizon.utilizaton=normal:0.1", "did you mean `utilization`"),
        ("workloads.chat.weights=normal:0.1", "not a number to vary"),
        ("horizon.utilization=uniform:1.5..3", "sample 0 (factors horizon.utilization"),
        ("electricity", "expected PATH=VALUE"),
    ],
)
def test_bad_distributions_are_located(spec: str, message: str) -> None:
    code, text = run("study", CHAT, "--vary-dist", spec, "--samples", "2", "--executor", "serial")
    assert code == 2
    assert message in text and "--vary-dist" in text
    assert "Traceback" not in text


def test_the_summary_is_the_samples_arithmetic() -> None:
    def sample(cost: float | None, lines: dict[str, tuple[int, int, int]]) -> dict:
        return {
            "status": "OPTIMAL" if cost else "INFEASIBLE",
            "tco_usd": cost,
            "device_lines": {
                k: {"count": c, "bought": b, "rented": r, "owned": 0}
                for k, (c, b, r) in lines.items()
            },
        }

    samples = [
        sample(100.0, {"a": (2, 2, 0)}),
        sample(200.0, {"a": (4, 0, 4), "b": (1, 1, 0)}),
        sample(300.0, {"b": (3, 3, 0)}),
        sample(400.0, {"a": (6, 6, 0)}),
        sample(None, {}),
    ]
    s = summarize(samples, 5)
    assert s["statuses"] == {"INFEASIBLE": 1, "OPTIMAL": 4}
    # numpy's linear quantiles of 100, 200, 300, 400: p50 = 250, p25 = 175, p5 = 115
    assert s["cost_usd"]["p50"] == 250 and s["cost_usd"]["p25"] == 175
    assert s["cost_usd"]["p5"] == pytest.approx(115)
    assert s["cost_usd"]["mean"] == 250 and s["cost_usd"]["max"] == 400
    assert s["devices"]["a"] == {
        "share_used": 0.6,
        "share_buying": 0.4,
        "share_renting": 0.2,
        "median_count": 4.0,
    }
    assert list(s["devices"]) == ["a", "b"]  # most used first


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_study_writes_its_chart_and_samples(tmp_path: Path, suffix: str) -> None:
    chart, rows = tmp_path / f"study{suffix}", tmp_path / "samples.csv"
    code, text = run(
        "study", CHAT, *DISTS, "--samples", "4", "--executor", "serial", "--plot", str(chart),
        "--out", str(rows),
    )  # fmt: skip
    assert code == 0, text
    assert "total cost" in text and "uses it" in text and "p50" in text
    assert chart.stat().st_size > 1000
    table = list(csv.DictReader(rows.open(encoding="utf-8")))
    assert [r["sample"] for r in table] == ["0", "1", "2", "3"]
    assert {"factor.prices.h200-sxm", "factor.electricity", "factor.demand", "tco_usd"} <= set(
        table[0]
    )
