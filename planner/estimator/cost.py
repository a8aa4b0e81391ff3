"""Power, energy and money per token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.estimator.devices import Array

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class Economics:
    """How owned and rented hardware is paid for."""

    lifetime_years: float = 4.0  # depreciation period of bought hardware
    utilization: float = 0.6  # share of hours the hardware does useful work
    electricity_usd_per_kwh: float = (
        0.12  # US commercial average 2024-25 (EIA Electric Power Monthly)
    )
    pue: float = (
        1.3  # data-centre power usage effectiveness (Uptime Institute 2024 survey: ~1.5 avg)
    )


def power_w(tdp_w: Array, idle_w: Array, activity: Array, floor: Array) -> Array:
    """Board power at a given activity (share of the step the binding unit is busy).

    Linear between idle and TDP, with a floor: a loaded GPU never drops to idle between kernels.
    """
    a = np.clip(np.maximum(activity, floor), 0.0, 1.0)
    return np.asarray(idle_w + (tdp_w - idle_w) * a, dtype=np.float64)


def usd_per_million_tokens_bought(
    purchase_usd: Array,
    watts: Array,
    tokens_per_s: Array,
    econ: Economics,
    host_usd: float | Array = 0.0,
) -> Array:
    """Capex spread over the lifetime plus electricity at PUE, per million useful tokens.

    Tokens are produced only in utilized hours; capex accrues every hour.
    """
    hours = econ.lifetime_years * HOURS_PER_YEAR
    capex_per_h = (purchase_usd + host_usd) / hours
    energy_per_h = watts / 1000.0 * econ.pue * econ.electricity_usd_per_kwh * econ.utilization
    tokens_per_h = tokens_per_s * 3600.0 * econ.utilization
    return np.asarray((capex_per_h + energy_per_h) / tokens_per_h * 1e6, dtype=np.float64)


def usd_per_million_tokens_rented(
    rent_usd_per_hour: Array, tokens_per_s: Array, econ: Economics
) -> Array:
    """Rent for the hours paid, per million useful tokens (power is in the rent)."""
    tokens_per_h = tokens_per_s * 3600.0 * econ.utilization
    return np.asarray(rent_usd_per_hour / tokens_per_h * 1e6, dtype=np.float64)
