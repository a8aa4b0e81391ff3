"""Quantities with units in problem files: exact conversions, and rejections that say why."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter, ValidationError

from planner.schema import units
from planner.schema.problem import Problem
from planner.schema.units import (
    DURATION,
    MONEY,
    POWER,
    Count,
    Hours,
    Limit,
    Milliseconds,
    Seconds,
    Share,
    TokenCount,
    Tokens,
    TokensPerSecond,
    Usd,
    UsdPerKwh,
    Watts,
    Years,
    parse_quantity,
)


def value(kind: Any, raw: Any) -> Any:
    return TypeAdapter(kind).validate_python(raw)


def error(kind: Any, raw: Any) -> str:
    with pytest.raises(ValidationError) as e:
        TypeAdapter(kind).validate_python(raw)
    return str(e.value)


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        # Money: k, M, B are powers of 1,000 whatever their case.
        (Usd, "$2M", 2_000_000),
        (Usd, "$2m", 2_000_000),
        (Usd, "$250k", 250_000),
        (Usd, "2,000,000 USD", 2_000_000),
        (Usd, "1.5 million", 1_500_000),
        (Usd, "$1.5 mn", 1_500_000),
        (Usd, "3B dollars", 3_000_000_000),
        (Usd, "$8.2M", 8_200_000),  # 8.2 * 1e6 in floats is 8199999.999999999
        (Usd, "12_500", 12_500),
        (Usd, 500_000, 500_000),
        (Usd, 2.5e5, 250_000),
        # Power.
        (Watts, "10 kW", 10_000),
        (Watts, "10000 W", 10_000),
        (Watts, "1.2 MW", 1_200_000),
        (Watts, "4.1 MW", 4_100_000),  # 4.1 * 1e6 in floats is 4099999.9999999995
        (Watts, 350, 350),
        # Durations, each in its field's unit.
        (Milliseconds, "50 ms", 50),
        (Milliseconds, "0.05 s", 50),
        (Milliseconds, "0.1 s", 100),
        (Milliseconds, "1.001 s", 1001),  # 1.001 * 1000 in floats is 1000.9999999999999
        (Milliseconds, "50", 50),
        (Milliseconds, "250 us", 0.25),
        (Seconds, "2 s", 2),
        (Seconds, "500 ms", 0.5),
        (Seconds, "1.5 min", 90),
        (Seconds, "1.1 h", 3960),  # 1.1 * 3600 in floats is 3960.0000000000005
        (Hours, "72 h", 72),
        (Hours, "3 days", 72),
        (Hours, "2 weeks", 336),
        (Hours, "90 min", 1.5),
        (Hours, "1 month", 730),  # a twelfth of 8,760 h
        (Years, "3 years", 3),
        (Years, "36 months", 3),
        (Years, "1.5", 1.5),
        (Years, "8760 h", 1),
        (Years, "365 days", 1),
        # Token budgets: powers of 1,000.
        (Tokens, "2T", 2 * 10**12),
        (Tokens, "300B", 300 * 10**9),
        (Tokens, "300B tokens", 300 * 10**9),
        (Tokens, "300 billion tokens", 300 * 10**9),
        (Tokens, "1e12", 10**12),
        (Tokens, "2e9", 2 * 10**9),
        (Tokens, "1.5M", 1_500_000),
        # Token counts of one sequence: k = 1,024.
        (TokenCount, "32k", 32_768),
        (TokenCount, "128K", 131_072),
        (TokenCount, "1.5k", 1_536),
        (TokenCount, "2M", 2_097_152),
        (TokenCount, "8192", 8_192),
        (TokenCount, "8192 tokens", 8_192),
        (TokenCount, 4096.0, 4_096),
        # Rates, shares, prices, counts.
        (TokensPerSecond, "2k tokens/s", 2_000),
        (TokensPerSecond, "1500 tok/s", 1_500),
        (Share, "70%", 0.7),
        (Share, "0.7", 0.7),
        (Share, "7 %", 0.07),
        (UsdPerKwh, "$0.12/kWh", 0.12),
        (UsdPerKwh, "0.12 USD/kWh", 0.12),
        (UsdPerKwh, "$120/MWh", 0.12),
        (UsdPerKwh, "12 cents/kWh", 0.12),
        (Count, "1,000", 1_000),
        (Count, 16, 16),
        (Count, 3.0, 3),
    ],
)
def test_exact_conversion(kind: Any, raw: Any, expected: float) -> None:
    got = value(kind, raw)
    assert got == expected  # exactly: no tolerance
    assert type(got) is (int if kind in (TokenCount, Count) else float)


def test_parse_quantity_is_exact_before_the_float() -> None:
    assert parse_quantity("0.1 s", DURATION) == Fraction(1, 10)
    assert parse_quantity("$2M", MONEY) == 2_000_000
    assert parse_quantity("1.2 MW", POWER) == 1_200_000
    assert parse_quantity("1 month", DURATION) == 8760 * 3600 // 12


@pytest.mark.parametrize(
    ("kind", "raw", "message"),
    [
        (Watts, "10 GB", "`GB` is a data size, not a power; use W, kW, MW or GW"),
        (Watts, "5 kWh", "`kWh` is an energy, not a power"),
        (Watts, "1.2 mW", "unknown unit `mW`; use W, kW, MW or GW"),
        (Watts, "$5", "`$` marks money, not a power"),
        (Usd, "2 EUR", "`EUR` is a currency other than US dollars"),
        (Usd, "200k EUR", "`EUR` is a currency other than US dollars"),
        (Usd, "5%", "`%` is a share, not an amount of money"),
        (Usd, "2,00", "commas group thousands"),
        (Usd, "1,5M", "commas group thousands"),
        (Usd, "two million", "`two million`, which is not a number"),
        (Usd, "", "which is not a number"),
        (Milliseconds, "50 tokens", "`tokens` is a number of tokens, not a duration"),
        (Milliseconds, "5 GB", "`GB` is a data size, not a duration"),
        (Hours, "3 fortnights", "unknown unit `fortnights`; use µs, ms, s, min, h, days"),
        (Tokens, "2 days", "`days` is a duration, not a number of tokens"),
        (TokenCount, "1.3k", "`1.3k` = 1331.2, which is not a whole number"),
        (TokenCount, 4096.5, "4096.5, which is not a whole number"),
        (TokenCount, "8 KiB", "`KiB` is a data size"),
        (UsdPerKwh, "0.12 kWh", "`kWh` is an energy, not a price of energy; use USD/kWh"),
        (Count, "1k", "unknown unit `k`; use a whole number, without a unit"),
        (Count, 2.5, "2.5, which is not a whole number"),
    ],
)
def test_rejections_name_the_expected_units(kind: Any, raw: Any, message: str) -> None:
    assert message in error(kind, raw)


@pytest.mark.parametrize(
    "raw",
    [True, False, float("nan"), float("inf"), -float("inf"), "nan", "inf", "-Infinity", None],
)
def test_booleans_and_non_finite_values_are_not_numbers(raw: Any) -> None:
    for kind in (Usd, Watts, Seconds, TokenCount, Count, Share):
        msg = error(kind, raw)
        assert "expected" in msg


@pytest.mark.parametrize("raw", [[1], {"a": 1}, b"12", object()])
def test_containers_are_not_numbers(raw: Any) -> None:
    assert "expected an amount of money" in error(Usd, raw)


@pytest.mark.parametrize("raw", ["1e31", "1e999999999", 1e40, 10**40, 1e-40, "9" * 70])
def test_absurd_magnitudes_are_rejected_without_computing_them(raw: Any) -> None:
    msg = error(Usd, raw)
    assert "absurd magnitude" in msg or "digits" in msg or "characters" in msg


def test_limit_names_its_reason() -> None:
    from typing import Annotated

    capped = Annotated[Usd, Limit(gt=0, le=1e12, why="check the units", low_why="buys nothing")]
    assert value(capped, "$1T".replace("T", " trillion")) == 1e12
    assert "must be at most 1,000,000,000,000, got 2,000,000,000,000: check the units" in error(
        capped, "$2 trillion"
    )
    assert "must be more than 0, got 0: buys nothing" in error(capped, 0)


def test_problem_accepts_units_and_plain_numbers_alike() -> None:
    base: dict[str, Any] = {
        "name": "units",
        "workloads": [
            {
                "name": "chat",
                "model": "llama-3.1-8b",
                "context_tokens": "32k",
                "prompt_tokens": "2k",
                "min_tokens_per_s": "2k tokens/s",
                "max_ms_per_token": "0.05 s",
                "max_ttft_s": "500 ms",
            },
            {
                "name": "tune",
                "kind": "training",
                "model": "llama-3.1-8b",
                "seq_len": "4k",
                "token_budget": "300B tokens",
                "deadline_hours": "3 days",
            },
        ],
        "constraints": {"budget_usd": "$2M", "capex_usd": "$250k", "power_w": "10 kW"},
        "horizon": {
            "lifetime_years": "36 months",
            "utilization": "70%",
            "electricity_usd_per_kwh": "$0.12/kWh",
        },
    }
    p = Problem.model_validate(base)
    chat, tune = p.workloads
    assert (chat.context_tokens, chat.prompt_tokens) == (32_768, 2_048)
    assert (chat.min_tokens_per_s, chat.max_ms_per_token, chat.max_ttft_s) == (2000, 50, 0.5)
    assert (tune.seq_len, tune.token_budget, tune.deadline_hours) == (4096, 3e11, 72)
    c, h = p.constraints, p.horizon
    assert (c.budget_usd, c.capex_usd, c.power_w) == (2e6, 2.5e5, 1e4)
    assert (h.lifetime_years, h.utilization, h.electricity_usd_per_kwh) == (3, 0.7, 0.12)


def test_json_schema_takes_a_number_or_a_string_with_bounds() -> None:
    schema = Problem.model_json_schema()
    budget = schema["$defs"]["Constraints"]["properties"]["budget_usd"]
    types = [b.get("type") for b in budget["anyOf"]]
    assert types == ["number", "string", "null"]
    number = budget["anyOf"][0]
    assert number["exclusiveMinimum"] == 0 and number["maximum"] == 1e12
    assert "$2M" in budget["description"]
    context = schema["$defs"]["InferenceWorkload"]["properties"]["context_tokens"]
    assert [b.get("type") for b in context["anyOf"]] == ["integer", "string"]


def test_every_unit_family_has_lower_case_keys_unless_case_matters() -> None:
    for family in (
        units.MONEY,
        units.ENERGY_PRICE,
        units.DURATION,
        units.TOKENS,
        units.TOKEN_COUNT,
        units.TOKEN_RATE,
        units.SHARE,
    ):
        assert not family.case_sensitive
        assert all(k == k.lower() for k in family.units), family.kind
        assert all(k == k.lower() for k in family.magnitudes), family.kind


def test_schema_command_still_prints_json_schema() -> None:
    import json

    from typer.testing import CliRunner

    from planner.cli import app

    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    power = schema["$defs"]["Constraints"]["properties"]["power_w"]
    assert {"type": "string"} in power["anyOf"]
    assert "10 kW" in power["description"]


@pytest.mark.parametrize(
    ("value", "words"),
    [("lease", "[buy, on_demand, reserved, spot]"), ("spot", "write [spot]"), ("rnt", "`rent`")],
)
def test_a_procurement_word_that_is_not_one_names_every_form(value: str, words: str) -> None:
    """`lease` listed only buy and rent (the list form was a second, separate message)."""
    doc = yaml.safe_load(Path("problems/chat-70b.yaml").read_text(encoding="utf-8"))
    doc.setdefault("horizon", {})["procurement"] = value
    with pytest.raises(ValueError, match="is not a procurement") as e:
        Problem.model_validate(doc)
    assert words in str(e.value)


def test_an_empty_value_is_named_as_one() -> None:
    """A key left empty read as "got `None` (NoneType)", a Python type name."""
    doc = yaml.safe_load(Path("problems/chat-70b.yaml").read_text(encoding="utf-8"))
    from planner.errors import InputError
    from planner.schema.yaml_io import Located, validate

    doc["workloads"][0]["min_tokens_per_s"] = None
    with pytest.raises(InputError, match="an empty value") as e:
        validate(Located(doc, {}, "p.yaml"), Problem)
    assert "NoneType" not in str(e.value)


@pytest.mark.parametrize(
    ("value", "words"),
    [("Buy", "did you mean `buy`?"), (["buy", "rnet"], "`rnet` in the list"), (None, "empty")],
)
def test_every_wrong_procurement_gets_one_message_with_every_form(value: Any, words: str) -> None:
    """`Buy` suggested `buy` twice; a list with a bad mode, and an empty value, got two
    messages, one of them naming only buy and rent."""
    from planner.errors import InputError
    from planner.schema.yaml_io import Located, validate

    doc = yaml.safe_load(Path("problems/chat-70b.yaml").read_text(encoding="utf-8"))
    doc.setdefault("horizon", {})["procurement"] = value
    with pytest.raises(InputError) as e:
        validate(Located(doc, {}, "p.yaml"), Problem)
    text = str(e.value)
    assert words in text and "[buy, on_demand, reserved, spot]" in text
    assert text.count("procurement") <= 3 and "`buy` or `buy`" not in text


def test_unbounded_is_read_whatever_its_case() -> None:
    doc = yaml.safe_load(Path("problems/chat-70b.yaml").read_text(encoding="utf-8"))
    doc["workloads"][0]["concurrency"] = "Unbounded"
    w = Problem.model_validate(doc).workloads[0]
    assert getattr(w, "concurrency", 0) is None


@pytest.mark.parametrize(
    ("text", "gb"),
    [("22", 22.0), ("22 GB", 22.0), ("20.5 GiB", 20.5 * 2**30 / 1e9), ("500 MB", 0.5)],
)
def test_a_data_size_is_read_in_gigabytes(text: str, gb: float) -> None:
    assert float(units.parse_quantity(text, units.DATA_SIZE)) == pytest.approx(gb)
    assert float(units.parse_quantity("22 KB", units.DATA_SIZE)) == pytest.approx(22e-6)


@pytest.mark.parametrize(
    ("text", "words"),
    [("22 Gb", "a number of bits"), ("22 gb", "a number of bits"), ("22 W", "a power")],
)
def test_a_bit_is_no_byte(text: str, words: str) -> None:
    """`22 Gb` once read as 22 GB, and `22 KB` said it was 'a data size, not a data size'."""
    with pytest.raises(ValueError, match=words) as e:
        units.parse_quantity(text, units.DATA_SIZE)
    assert "not a data size" in str(e.value)


@pytest.mark.parametrize(
    ("text", "gbit"),
    [("10", 10.0), ("10 Gb/s", 10.0), ("500 Mb/s", 0.5), ("1.25 GB/s", 10.0), ("2 Tb/s", 2000.0)],
)
def test_a_stated_link_takes_a_bandwidth_with_its_unit(text: str, gbit: float) -> None:
    assert float(units.parse_quantity(text, units.BANDWIDTH)) == pytest.approx(gbit)


def test_a_link_slower_than_a_megabit_is_a_unit_slip() -> None:
    from planner.errors import InputError
    from planner.schema.yaml_io import Located, validate

    doc = yaml.safe_load(Path("problems/owners-pool.yaml").read_text(encoding="utf-8"))
    doc["links"][0]["bandwidth_gbit_s"] = 1e-9
    with pytest.raises(InputError, match="under 1 Mb/s"):
        validate(Located(doc, {}, "p.yaml"), Problem)
