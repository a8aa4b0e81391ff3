"""The condition of every catalog purchase price (new, refurbished, used) and the market filter:
by default datacenter parts and ASICs are bought only at a new price."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.estimator.economics import device_prices
from planner.load import load_problem
from planner.schema.catalog import Price
from planner.schema.yaml_io import read_yaml
from planner.solve import solve_problem

PROBLEMS = Path(__file__).parent.parent / "problems"
CATALOG = Path(__file__).parent.parent / "catalog" / "accelerators.yaml"


def test_every_shipped_purchase_price_states_its_condition() -> None:
    doc = read_yaml(CATALOG).data
    priced = [a for a in doc["accelerators"] if a.get("price", {}).get("purchase_usd")]
    assert priced and all("condition" in a["price"] for a in priced)
    cat = load_catalog()
    # Second-hand and refurbished prices the catalog's notes describe as such.
    assert cat.accelerator("p100").price.condition == "used"  # about $60 second-hand
    assert cat.accelerator("a100-80gb-sxm").price.condition == "refurbished"  # $8,000-15,000
    assert cat.accelerator("h100-sxm").price.condition == "new"
    with pytest.raises(ValueError):
        Price(purchase_usd=1, purchase_date="2026-01", condition="broken")  # type: ignore[arg-type]


def test_refurbished_datacenter_parts_are_not_bought_by_default() -> None:
    cat = load_catalog()
    a100 = cat.accelerator("a100-80gb-sxm")
    rtx = cat.accelerator("rtx-3090")  # a consumer card at a used price: bought by default
    default = load_problem(PROBLEMS / "chat-70b.yaml")
    assert device_prices(default, a100).purchase_usd is None
    assert device_prices(default, a100).on_demand_usd_per_hour is not None  # still rentable
    assert device_prices(default, rtx).purchase_usd == rtx.price.purchase_usd
    allowed = load_problem(PROBLEMS / "chat-70b.yaml", ["market.conditions=[new, refurbished]"])
    assert device_prices(allowed, a100).purchase_usd == a100.price.purchase_usd
    strict = load_problem(PROBLEMS / "chat-70b.yaml", ["market.conditions=[new]"])
    assert device_prices(strict, rtx).purchase_usd is None
    # A price the problem states itself always counts.
    own = load_problem(
        PROBLEMS / "chat-70b.yaml", ["market.prices={a100-80gb-sxm: {purchase_usd: 9000}}"]
    )
    assert device_prices(own, a100).purchase_usd == 9000


def test_the_filter_changes_what_a_plan_may_buy() -> None:
    sets = ["constraints.allowed_devices=[a100-80gb-sxm]", "horizon.procurement=buy"]
    blocked = solve_problem(load_problem(PROBLEMS / "chat-70b.yaml", sets), time_limit=30)
    assert blocked.status == "INFEASIBLE"
    ok = solve_problem(
        load_problem(PROBLEMS / "chat-70b.yaml", [*sets, "market.conditions=[new, refurbished]"]),
        time_limit=30,
    )
    assert ok.status == "OPTIMAL" and {x.type for x in ok.devices} == {"a100-80gb-sxm"}
