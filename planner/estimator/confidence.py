"""How well a design's figures are backed by measurements: a label from the calibration rows of
its devices, engine and batch, and an error band from the estimator's residuals on those rows.

Labels, best first (`CONFIDENCE`): `measured` (a row for the device under the engine at this
batch), `interpolated` (rows under the engine on both sides of the batch), `extrapolated` (rows
for the device, but not around this batch or not under this engine), `prior` (no row for the
device: its class's fitted factors alone). A design takes its weakest device's label. The band
is the 10th to 90th percentile of the residuals behind the label (the device under the engine,
else the device, else its class, else every row): the measured figure has been between
exp(-q90) and exp(-q10) times the estimate. Adding a calibration row can change both
(calibration/confidence.py regenerates planner/catalog_data/calibration.yaml).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import ConfigDict, with_config

from planner.catalog import Catalog
from planner.schema.catalog import Accelerator
from planner.schema.measurements import Residual, ResidualFile
from planner.schema.yaml_io import read_validated

CONFIDENCE = ("measured", "interpolated", "extrapolated", "prior")


@with_config(ConfigDict(extra="forbid"))  # read back from plan files: no other key
@dataclass(frozen=True)
class Confidence:
    """A design's backing: its label, the rows behind the band, and the band itself as the
    share the measured tokens/s has fallen below (`low_pct`) and above (`high_pct`) the
    estimate on those rows."""

    label: str
    rows: int
    low_pct: float
    high_pct: float

    @property
    def text(self) -> str:
        return f"{self.label} (-{self.low_pct:.0f} % / +{self.high_pct:.0f} %, {self.rows} rows)"


@functools.cache
def residuals() -> tuple[Residual, ...]:
    """The calibration rows with a stated batch (a saturated server's row names no batch the
    estimator could be held to)."""
    path = Path(str(resources.files("planner.catalog_data"))) / "calibration.yaml"
    return tuple(r for r in read_validated(path, ResidualFile).rows if r.batch is not None)


def _label(rows: list[Residual], engine: str, batch: int) -> str:
    mine = [r for r in rows if r.engine == engine and r.metric == "decode"]
    batches = {r.batch for r in mine if r.batch is not None}
    if batch in batches:
        return "measured"
    if batches and min(batches) < batch < max(batches):
        return "interpolated"
    return "extrapolated" if rows else "prior"


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    i = q * (len(xs) - 1)
    lo, hi = math.floor(i), math.ceil(i)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def design_confidence(
    cat: Catalog, devices: list[Accelerator], engine: str, batch: int
) -> Confidence:
    """The confidence of a replica of `devices` running `engine` at `batch` per micro-batch."""
    table = residuals()

    def cls(device: str) -> str:
        acc = cat.accelerators.get(device)
        return acc.device_class if acc else ""

    worst, behind = 0, list(table)
    # In id order: among devices of one label the last one's rows back the design, so the
    # stage order (the plan builder's) and a sorted set (the verifier's) give the same rows.
    for d in sorted(devices, key=lambda a: a.id):
        rows = [r for r in table if r.device == d.id]
        label = CONFIDENCE.index(_label(rows, engine, batch))
        under = [r for r in rows if r.engine == engine]
        if label == 0:  # measured: the rows at this very batch
            under = [r for r in under if r.batch == batch and r.metric == "decode"]
        backing = under or rows or [r for r in table if cls(r.device) == d.device_class]
        if label >= worst:
            worst, behind = label, backing or list(table)
    res = [r.residual for r in behind]
    q10, q90 = _quantile(res, 0.1), _quantile(res, 0.9)
    low = (1 - math.exp(-q90)) * 100 if q90 > 0 else 0.0
    high = (math.exp(-q10) - 1) * 100 if q10 < 0 else 0.0
    return Confidence(CONFIDENCE[worst], len(res), max(0.0, low), max(0.0, high))


def kept_share(problem_margin: float, label: str) -> float:
    """The share of a design's estimated tokens/s a throughput floor counts: all of it where
    the calibration backs the design (`measured`, `interpolated`), else 1 - the problem's
    `constraints.risk_margin`."""
    backed = CONFIDENCE.index(label) <= CONFIDENCE.index("interpolated")
    return 1.0 if backed else 1.0 - problem_margin


def margin_kept(
    cat: Catalog, margin: float, devices: dict[str, int], engine: str, batch: int
) -> float:
    """kept_share for a replica of `devices` running `engine` at `batch`, its label recomputed
    from the calibration rows (1 without a margin)."""
    if not margin:
        return 1.0
    accs = [cat.accelerator(x) for x in sorted(devices)]
    return kept_share(margin, design_confidence(cat, accs, engine, batch).label)
