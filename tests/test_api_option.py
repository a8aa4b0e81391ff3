"""A managed API as the third way to serve: its price for the tokens a plan serves, and
`planner options` comparing buy, rent and API at several demand levels."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.estimator.api import cheapest_api, prompt_per_output
from planner.load import load_problem
from planner.schema.problem import InferenceWorkload
from planner.solve import Solver, solve_problem
from planner.whatif.options import OptionRow, changes, compare_options, scaled

PROBLEMS = Path(__file__).parent.parent / "problems"
CHAT = PROBLEMS / "chat-70b.yaml"


def test_api_price_of_the_tokens_a_plan_serves() -> None:
    problem = load_problem(CHAT)
    plan = solve_problem(problem, time_limit=30)
    quote = cheapest_api(problem, load_catalog(), plan.served_tokens)
    assert quote is not None
    # Catalog llama-3.1-70b: DeepInfra $0.13 per M prompt and $0.40 per M completion tokens, the
    # cheaper of the two providers listed (AI Gateway $0.29 / $0.60).
    assert quote.price.provider == "deepinfra"
    (w,) = problem.workloads
    assert isinstance(w, InferenceWorkload)
    assert prompt_per_output(w) == pytest.approx(w.prompt_tokens / w.output_tokens)
    out = plan.served_tokens
    assert quote.usd == pytest.approx(
        (out * 0.40 + out * w.prompt_tokens / w.output_tokens * 0.13) / 1e6
    )


def test_no_api_for_training() -> None:
    problem = load_problem(PROBLEMS / "qlora-8b-deadline.yaml")
    assert cheapest_api(problem, load_catalog(), 1e9) is None


def test_demand_scales_every_inference_rate() -> None:
    problem = load_problem(CHAT)
    (w,) = scaled(problem, 0.1).workloads
    (w0,) = problem.workloads
    assert isinstance(w, InferenceWorkload) and isinstance(w0, InferenceWorkload)
    assert w.concurrency == max(1, round((w0.concurrency or 0) * 0.1))
    assert w.min_tokens_per_s == pytest.approx((w0.min_tokens_per_s or 0) * 0.1)


def test_options_compare_buy_rent_and_api_at_each_level() -> None:
    rows = compare_options(load_problem(CHAT), [0.1, 1.0], Solver(time_limit=30))
    for r in rows:
        assert r.buy.has_plan and r.rent.has_plan and r.api is not None
        assert all(x.type for x in r.rent.devices) and all(x.bought == 0 for x in r.rent.devices)
        assert all(x.bought == x.count for x in r.buy.devices)
        costs = r.costs()
        assert r.cheapest == min(costs, key=lambda k: costs[k])
    # The API is priced per token: a tenth of the demand, a tenth of the price (the plans serve
    # the stated tokens/s); a fleet does not shrink as far.
    small, full = rows
    assert small.api is not None and full.api is not None
    assert small.api.usd == pytest.approx(full.api.usd * 0.1, rel=1e-6)
    assert small.buy.tco_usd > full.buy.tco_usd * 0.1


def test_where_the_cheapest_changes() -> None:
    full = compare_options(load_problem(CHAT), [1.0], Solver(time_limit=30))[0]
    # DeepInfra's $0.13 / $0.40 per M tokens undercuts both fleets at chat-70b's demand.
    assert full.cheapest == "api"
    no_api = OptionRow(5.0, None, full.buy, full.rent, None)  # a level without an API price
    assert no_api.cheapest in ("buy", "rent")
    assert changes([full, no_api]) == [
        f"between 1x and 5x the demand, the cheapest changes from api to {no_api.cheapest}"
    ]
    assert changes([full, full]) == []


def test_options_command() -> None:
    r = CliRunner().invoke(
        app, ["options", str(CHAT), "--demand", "0.1,1", "--format", "json"], terminal_width=200
    )
    assert r.exit_code == 0, r.output
    assert '"cheapest"' in r.output and '"api_provider": "deepinfra"' in r.output
    bad = CliRunner().invoke(app, ["options", str(CHAT), "--demand", "a,b"])
    assert bad.exit_code == 2 and "--demand" in bad.output


@pytest.mark.parametrize("demand", ["0.1,,1", "1,", "0", "-1", "nan", "1e999"])
def test_options_refuses_empty_and_non_positive_multiples(demand: str) -> None:
    """`0.1,,1` was read as 0.1,1 (sweep refuses an empty value); 0 and NaN are no demand."""
    bad = CliRunner().invoke(app, ["options", str(CHAT), "--demand", demand])
    assert bad.exit_code == 2 and "--demand" in bad.output, bad.output
