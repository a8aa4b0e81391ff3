"""Quantities written with their units in problem files: `$2M`, `10 kW`, `50 ms`, `3 days`, `32k`.

Each type below is a float or an int with a pydantic `BeforeValidator` that takes a plain number
(unchanged) or a string with a unit, and converts the string to the field's unit exactly: the
digits are read with `decimal.Decimal` and scaled with `fractions.Fraction`, so `0.1 s` is 100 ms
and `$2M` is 2,000,000 with no binary rounding on the way; only the result becomes a float. A unit
of the wrong kind (`power_w: 10 GB`) is an error that names its kind and the accepted units.
Booleans, NaN and infinities are never numbers here. `Limit` adds bounds with their reason.

Conventions, chosen once:

- Money (`Usd`): `$` in front or `USD`/`dollars` behind; `k`, `M` (or `mn`, `mm`), `B` (or `bn`)
  and the words thousand, million, billion, trillion are powers of 1,000, in either case ($2m is
  two million). Commas only group thousands (`2,000,000`); the decimal mark is a point.
- Token budgets (`Tokens`): `k`, `M`, `B`, `T` and the words are powers of 1,000, as in "trained
  on 15T tokens": `2T` is 2×10¹², `300B tokens` is 3×10¹¹.
- Token counts of one sequence (`TokenCount`: context, prompt, sequence length): `k` is 1,024 and
  `M` is 1,024², as in "a 32k context" (32,768) or "128K" (131,072); the result must be whole.
- Token rates (`TokensPerSecond`): `k` and `M` are powers of 1,000 (`2k tokens/s` is 2,000).
- Durations: a year is 365 days (8,760 h, as in the cost model) and a month a twelfth of it
  (730 h), so `36 months` is exactly 3 years.
- Power (`Watts`): W, kW, MW, GW; case matters where it would be ambiguous (`mW` is not `MW`).
- Shares (`Share`): `70%` is 0.7.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any

from pydantic import BeforeValidator, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

MAX_TEXT = 64  # characters in a quantity string; longer is not a quantity
MAX_EXPONENT = 30  # |log10| of any number written: beyond 1e30 nothing in a problem makes sense
YEAR_S = 8760 * 3600  # 365 days, as HOURS_PER_YEAR in the cost model

_F = Fraction


@dataclass(frozen=True)
class Family:
    """One kind of quantity as people write it: unit spellings with their factor to the field's
    unit, the magnitudes allowed in front of a unit, and words for messages."""

    kind: str  # "a power"
    unit: str  # the unit of a bare number: "W"
    units: Mapping[str, Fraction]  # spelling (lower case unless case_sensitive) -> factor
    accepted: str  # "W, kW, MW or GW"
    example: str  # "`10 kW` or `1.2 MW`"
    magnitudes: Mapping[str, Fraction] = field(default_factory=dict)
    case_sensitive: bool = False
    currency: bool = False  # a leading `$` is allowed
    integer: bool = False

    def per(self, factor: Fraction | int, unit: str, example: str) -> Family:
        """The same spellings for a field whose unit is `factor` of this one's (ms: 1/1000 s);
        a bare number is in the new unit."""
        units = {k: v / factor for k, v in self.units.items()}
        units[""] = _F(1)
        return replace(self, unit=unit, units=units, example=example)


def _spell(factor: Fraction | int, *names: str) -> dict[str, Fraction]:
    return dict.fromkeys(names, _F(factor))


_THOUSANDS: dict[str, Fraction] = {
    **_spell(10**3, "k", "thousand"),
    **_spell(10**6, "m", "mn", "mm", "million"),
    **_spell(10**9, "b", "bn", "billion"),
}

MONEY = Family(
    "an amount of money",
    "USD",
    _spell(1, "", "usd", "$", "dollar", "dollars", "us$"),
    "`$` or `USD` with k, M, B (or thousand, million, billion: powers of 1,000)",
    "`$2M`, `$250k`, `2,000,000 USD` or `1.5 million`",
    magnitudes={**_THOUSANDS, **_spell(10**12, "trillion")},
    currency=True,
)

ENERGY_PRICE = Family(
    "a price of energy",
    "USD/kWh",
    {
        **_spell(1, "", "/kwh", "usd/kwh", "$/kwh", "per kwh", "usd per kwh", "dollars/kwh"),
        **_spell(_F(1, 1000), "/mwh", "usd/mwh", "$/mwh", "per mwh", "usd per mwh"),
        **_spell(_F(1, 100), "cents/kwh", "¢/kwh", "c/kwh"),
    },
    "USD/kWh, USD/MWh or cents/kWh",
    "`$0.12/kWh`, `$120/MWh` or `12 cents/kWh`",
    currency=True,
)

POWER = Family(
    "a power",
    "W",
    {
        **_spell(1, "", "W", "w", "watt", "watts"),
        **_spell(10**3, "kW", "KW", "kw", "Kw", "kilowatt", "kilowatts"),
        **_spell(10**6, "MW", "Mw", "megawatt", "megawatts"),
        **_spell(10**9, "GW", "Gw", "gigawatt", "gigawatts"),
    },
    "W, kW, MW or GW",
    "`10 kW`, `10000 W` or `1.2 MW`",
    case_sensitive=True,
)

DURATION = Family(
    "a duration",
    "seconds",
    {
        **_spell(1, "", "s", "sec", "secs", "second", "seconds"),
        **_spell(_F(1, 10**6), "us", "µs", "μs", "microsecond", "microseconds"),
        **_spell(_F(1, 1000), "ms", "msec", "millisecond", "milliseconds"),
        **_spell(60, "min", "mins", "minute", "minutes"),
        **_spell(3600, "h", "hr", "hrs", "hour", "hours"),
        **_spell(86400, "d", "day", "days"),
        **_spell(7 * 86400, "wk", "wks", "week", "weeks"),
        **_spell(_F(YEAR_S, 12), "mo", "month", "months"),
        **_spell(YEAR_S, "y", "yr", "yrs", "year", "years"),
    },
    "µs, ms, s, min, h, days, weeks, months or years",
    "`2 s` or `500 ms`",
)

_TOKEN_WORDS = _spell(1, "", "token", "tokens", "tok")
TOKENS = Family(
    "a number of tokens",
    "tokens",
    _TOKEN_WORDS,
    "k, M, B or T (powers of 1,000), optionally followed by `tokens`",
    "`2T`, `300B`, `300B tokens` or `1e12`",
    magnitudes={**_THOUSANDS, **_spell(10**12, "t", "trillion")},
)

TOKEN_COUNT = Family(
    "a number of tokens",
    "tokens",
    _TOKEN_WORDS,
    "k (1,024) or M (1,024²), optionally followed by `tokens`",
    "`8192`, `32k` (32,768) or `128K`",
    magnitudes={"k": _F(1024), "m": _F(1024**2)},
    integer=True,
)

TOKEN_RATE = Family(
    "a rate of tokens",
    "tokens/s",
    _spell(1, "", "/s", "tokens/s", "token/s", "tok/s", "tokens per second", "tps"),
    "tokens/s with k or M (powers of 1,000)",
    "`2000` or `2k tokens/s`",
    magnitudes={"k": _F(10**3), "m": _F(10**6)},
)

SHARE = Family(
    "a share",
    "",
    {"": _F(1), "%": _F(1, 100), "percent": _F(1, 100)},
    "a fraction or `%`",
    "`0.7` or `70%`",
)

DATA_SIZE = Family(
    "a data size",
    "GB",
    {
        **_spell(1, "", "GB", "gigabyte", "gigabytes"),
        **_spell(_F(2**30, 10**9), "GiB"),
        **_spell(_F(1, 10**3), "MB", "megabyte", "megabytes"),
        **_spell(_F(2**20, 10**9), "MiB"),
        **_spell(_F(1, 10**6), "KB", "kB", "kilobyte", "kilobytes"),
        **_spell(_F(2**10, 10**9), "KiB"),
        **_spell(_F(1, 10**9), "B", "byte", "bytes"),
        **_spell(10**3, "TB", "terabyte", "terabytes"),
        **_spell(_F(2**40, 10**9), "TiB"),
        **_spell(10**6, "PB"),
    },
    "GB (1e9 bytes), GiB (2^30), MB, MiB, KB, TB, TiB or PB; B for bytes (a lower-case b is a bit)",
    "`22 GB`, `20.5 GiB` or `22`",
    case_sensitive=True,
)

BANDWIDTH = Family(
    "a bandwidth",
    "Gb/s",
    {
        # A lower-case b is a bit in every spelling; GB/s and MB/s are bytes.
        **_spell(1, "", "Gb/s", "Gbit/s", "Gbits/s", "Gbps", "gb/s", "gbit/s", "gbps"),
        **_spell(_F(1, 10**3), "Mb/s", "Mbit/s", "Mbits/s", "Mbps", "mb/s", "mbit/s", "mbps"),
        **_spell(10**3, "Tb/s", "Tbit/s", "Tbps", "tb/s", "tbit/s", "tbps"),
        **_spell(8, "GB/s"),
        **_spell(_F(8, 10**3), "MB/s"),
    },
    "Gb/s (gigabits), Mb/s or Tb/s; GB/s and MB/s are bytes (x 8)",
    "`10 Gb/s`, `2.5` or `500 Mb/s`",
    case_sensitive=True,
)

NUMBER = Family("a number", "", {"": _F(1)}, "a plain number, without a unit", "`1.3`")

COUNT = Family(
    "a whole number",
    "",
    {"": _F(1)},
    "a whole number, without a unit",
    "`16` or `1,000`",
    integer=True,
)

# Units that no field of a problem file takes, to say what a misplaced one is.
_OTHER_KINDS: dict[str, tuple[str, ...]] = {
    "a number of bits (a lower-case b is a bit; B is a byte)": (
        *("b", "bit", "bits", "kb", "mb", "gb", "tb"),
        *("kbit", "mbit", "gbit", "tbit"),
    ),
    "a data size": ("pb", "pib", "gib", "mib", "kib", "tib", "bytes"),
    "a bandwidth": ("gb/s", "tb/s", "mb/s", "gbps", "gbit/s", "tbps", "gib/s"),
    "a compute rate": ("flops", "tflops", "pflops", "gflops", "tops"),
    "an energy": ("wh", "kwh", "mwh", "j", "kj", "mj"),
    "a currency other than US dollars": ("eur", "€", "gbp", "£", "jpy", "¥", "cny", "chf"),
}
_FAMILIES = (MONEY, ENERGY_PRICE, POWER, DURATION, TOKENS, TOKEN_RATE, SHARE, DATA_SIZE, BANDWIDTH)

_NUMBER = re.compile(
    r"""(?P<cur>\$|US\$)?\s*
    (?P<num>[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+(?:_\d+)*)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
    \s*(?P<rest>.*)""",
    re.VERBOSE | re.DOTALL,
)


def _kind_of(unit: str, family: Family) -> str:
    """What kind of quantity a unit the family does not take is ('' when unknown)."""
    low = unit.lower()
    if not low:
        return ""
    for other in _FAMILIES:
        if other.kind == family.kind:
            continue
        if (unit in other.units) if other.case_sensitive else (low in other.units):
            return other.kind
    for kind, names in _OTHER_KINDS.items():
        if low in names and kind != family.kind:
            return kind
    return ""


def _show(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(value: object) -> str:
    if value is None:
        return "an empty value (the key with nothing after it, or `null`)"
    if isinstance(value, bool):
        return f"the boolean `{str(value).lower()}`"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple | set):
        return "a list"
    return f"`{_show(str(value))}` ({type(value).__name__})"


def _expected(family: Family) -> str:
    unit = f" of {family.unit}" if family.unit and family.unit not in family.kind else ""
    return f"expected {family.kind}: a number{unit}, or a string such as {family.example}"


def _absurd(exponent: int) -> bool:
    return not -MAX_EXPONENT <= exponent <= MAX_EXPONENT


def _from_number(value: int | float, family: Family) -> int | float:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"got {value!r}, which is not a finite number; {_expected(family)}")
        if value != 0 and _absurd(math.floor(math.log10(abs(value)))):
            raise ValueError(f"got {value:g}, an absurd magnitude; {_expected(family)}")
        return value
    if abs(value) > 10**MAX_EXPONENT:
        digits = int(value.bit_length() * math.log10(2)) + 1
        raise ValueError(f"got a number of about {digits} digits; {_expected(family)}")
    return value


def _unit_factor(rest: str, family: Family) -> Fraction | None:
    """The factor of a unit text such as `M`, `kW`, `B tokens` or `/kWh`, or None."""
    text = " ".join(rest.split())
    key = text if family.case_sensitive else text.lower()
    if key in family.units:
        return family.units[key]
    for mag in sorted(family.magnitudes, key=len, reverse=True):  # `million` before `m`
        tail = key[len(mag) :].strip()
        if key.startswith(mag) and tail in family.units:
            return family.magnitudes[mag] * family.units[tail]
    return None


def _without_magnitude(rest: str, family: Family) -> str:
    """`EUR` of `k EUR`: the unit to name in a message."""
    key = rest if family.case_sensitive else rest.lower()
    for mag in sorted(family.magnitudes, key=len, reverse=True):
        tail = rest[len(mag) :]
        if key.startswith(mag) and tail[:1].isspace():
            return tail.strip()
    return rest


def parse_quantity(text: str, family: Family) -> Fraction:
    """A string such as `$2M` or `10 kW`, exactly, in the field's unit; ValueError otherwise."""
    raw = text.strip()
    if len(raw) > MAX_TEXT:
        raise ValueError(f"got a text of {len(raw)} characters; {_expected(family)}")
    m = _NUMBER.fullmatch(raw)
    if m is None:
        if raw.lower().lstrip("+-.") in ("nan", "inf", "infinity"):
            raise ValueError(f"got `{raw}`, which is not a finite number; {_expected(family)}")
        raise ValueError(f"got `{_show(raw)}`, which is not a number; {_expected(family)}")
    cur, num, rest = m["cur"], m["num"], m["rest"].strip()
    if rest.startswith(","):
        raise ValueError(
            f"got `{raw}`: commas group thousands (`2,000,000`) and the decimal mark is a point "
            f"(`1.5`); {_expected(family)}"
        )
    if cur and not family.currency:
        raise ValueError(f"got `{raw}`: `$` marks money, not {family.kind}; {_expected(family)}")
    exact = Decimal(num.replace(",", "").replace("_", ""))  # the pattern admits only decimals
    if exact and _absurd(exact.adjusted()):
        raise ValueError(f"got `{_show(raw)}`, an absurd magnitude; {_expected(family)}")
    factor = _unit_factor(rest, family)
    if factor is None:
        unit = _without_magnitude(rest, family)
        kind = _kind_of(unit, family)
        why = f"`{unit}` is {kind}, not {family.kind}" if kind else f"unknown unit `{_show(unit)}`"
        raise ValueError(
            f"got `{_show(raw)}`: {why}; use {family.accepted} (e.g. {family.example})"
        )
    return Fraction(exact) * factor


def _converter(family: Family) -> Callable[[Any], Any]:
    """The BeforeValidator function of a family: number or string in, int or float out."""

    def convert(value: Any) -> Any:
        exact: Fraction | int | float
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"got {_describe(value)}; {_expected(family)}")
        if isinstance(value, str):
            exact = parse_quantity(value, family)
        else:
            exact = _from_number(value, family)
        if not family.integer:
            # -0.0 is zero: kept, it reached the plan's notes as "$-0" while the verifier's
            # figure read "$0", and a valid plan was refused as an internal error.
            return float(exact) + 0.0
        if isinstance(exact, float) and not exact.is_integer():
            raise ValueError(f"got {exact!r}, which is not a whole number; {_expected(family)}")
        if isinstance(exact, Fraction) and exact.denominator != 1:
            raise ValueError(
                f"got `{value}` = {float(exact):g}, which is not a whole number; "
                f"{_expected(family)}"
            )
        return int(exact)

    return convert


def _quantity(family: Family) -> BeforeValidator:
    schema_input: Any = (int | str) if family.integer else (float | str)
    return BeforeValidator(_converter(family), json_schema_input_type=schema_input)


Usd = Annotated[float, _quantity(MONEY)]
UsdPerKwh = Annotated[float, _quantity(ENERGY_PRICE)]
Watts = Annotated[float, _quantity(POWER)]
Seconds = Annotated[float, _quantity(DURATION)]
Milliseconds = Annotated[float, _quantity(DURATION.per(_F(1, 1000), "ms", "`50 ms` or `0.05 s`"))]
Hours = Annotated[float, _quantity(DURATION.per(3600, "hours", "`72 h`, `3 days` or `2 weeks`"))]
Years = Annotated[float, _quantity(DURATION.per(YEAR_S, "years", "`3 years` or `36 months`"))]
Tokens = Annotated[float, _quantity(TOKENS)]
TokenCount = Annotated[int, _quantity(TOKEN_COUNT)]
TokensPerSecond = Annotated[float, _quantity(TOKEN_RATE)]
Share = Annotated[float, _quantity(SHARE)]
Gigabytes = Annotated[float, _quantity(DATA_SIZE)]
GigabitsPerSecond = Annotated[float, _quantity(BANDWIDTH)]
Number = Annotated[float, _quantity(NUMBER)]
Count = Annotated[int, _quantity(COUNT)]


def _fmt(x: float) -> str:
    """A bound or value for a message: `1,000,000` rather than `1e+06`."""
    if float(x).is_integer() and abs(x) < 1e16:
        return f"{int(x):,}"
    return f"{x:g}"


@dataclass(frozen=True)
class Limit:
    """Bounds on a parsed quantity with their reason: `why` for the upper bound (`le`, `lt`),
    `low_why` for the lower one (`gt`, `ge`). They also go into the field's JSON Schema."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    why: str = ""
    low_why: str = ""

    def check(self, value: float) -> float:
        rule = ""
        if self.gt is not None and value <= self.gt:
            rule, why = f"more than {_fmt(self.gt)}", self.low_why
        elif self.ge is not None and value < self.ge:
            rule, why = f"at least {_fmt(self.ge)}", self.low_why
        elif self.lt is not None and value >= self.lt:
            rule, why = f"less than {_fmt(self.lt)}", self.why
        elif self.le is not None and value > self.le:
            rule, why = f"at most {_fmt(self.le)}", self.why
        if rule:
            raise ValueError(f"must be {rule}, got {_fmt(value)}" + (f": {why}" if why else ""))
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        js = handler(schema)
        target = js
        for branch in js.get("anyOf", ()):
            if branch.get("type") in ("number", "integer"):
                target = branch
        for key, bound in (
            ("exclusiveMinimum", self.gt),
            ("minimum", self.ge),
            ("exclusiveMaximum", self.lt),
            ("maximum", self.le),
        ):
            if bound is not None:
                target[key] = bound
        return js
