"""Charts: each file is read back and checked for what it claims to show.

PNGs are read as pixels (size, ink, the pure-red infeasible mark); SVGs keep their text as text
(svg.fonttype "none"), so titles, axis labels with units and device-mix labels can be read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pytest
from matplotlib.image import imread

from planner.errors import InputError
from planner.report.plot import axis_label, plot_cumulative_cost, plot_frontier, plot_sweep

SVG_NS = "{http://www.w3.org/2000/svg}"
X = "constraints.power_w"


def row(x: float, status: str = "OPTIMAL", devices: str = "8x gaudi2") -> dict[str, Any]:
    """A sweep row as the sweep command builds it; no figures when there is no plan."""
    r: dict[str, Any] = {X: x, "status": status}
    if status in ("OPTIMAL", "FEASIBLE"):
        r |= {
            "tco_usd": 100_000 + 3 * x,
            "capex_usd": 80_000 + 2 * x,
            "tokens_per_s": 1_000 + x / 2,
            "power_w": 0.8 * x,
            "tokens_per_joule": (1_000 + x / 2) / (0.8 * x),
            "usd_per_million_tokens": 0.2,
            "devices": devices,
        }
    else:
        r |= {
            "tco_usd": None,
            "capex_usd": None,
            "tokens_per_s": None,
            "power_w": None,
            "tokens_per_joule": None,
            "usd_per_million_tokens": None,
            "devices": "",
        }
    return r


def sweep_rows(*, infeasible: bool) -> list[dict[str, Any]]:
    rows = [
        row(4000),
        row(6000),
        row(8000, devices="4x mi300x + 2x l40s"),
        row(10000, status="FEASIBLE", devices="4x mi300x + 2x l40s"),
        row(12000, devices="8x gaudi2"),  # back to the first mix: labelled again
    ]
    if infeasible:
        rows.insert(0, row(2000, status="INFEASIBLE"))
    return rows


def svg_texts(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()) for t in root.iter(f"{SVG_NS}text")]


def red_pixels(path: Path) -> int:
    img = imread(str(path))
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return int(np.count_nonzero((r > 0.9) & (g < 0.1) & (b < 0.1)))


# ------------------------------------------------------------------------------------------------
# Sweep
# ------------------------------------------------------------------------------------------------


def test_sweep_png_size_ink_and_infeasible_mark(tmp_path: Path) -> None:
    one = tmp_path / "one.png"
    three = tmp_path / "three.png"
    plot_sweep(sweep_rows(infeasible=True), X, ["tco_usd"], one, title="power")
    plot_sweep(
        sweep_rows(infeasible=True), X, ["tco_usd", "tokens_per_s", "power_w"], three, title="power"
    )
    img1, img3 = imread(str(one)), imread(str(three))
    assert img1.shape[1] == img3.shape[1] == 800  # 8 in at 100 dpi
    assert img3.shape[0] > img1.shape[0] + 400  # one more panel per metric
    # Something is drawn: a good share of pixels is not the white background.
    ink = np.any(img3[..., :3] < 0.9, axis=-1)
    assert ink.mean() > 0.02
    assert red_pixels(one) > 20
    assert red_pixels(three) > 3 * 20  # the mark is on every panel


def test_sweep_png_has_no_red_without_infeasible_rows(tmp_path: Path) -> None:
    path = tmp_path / "ok.png"
    plot_sweep(sweep_rows(infeasible=False), X, ["tco_usd", "tokens_per_s"], path, title="ok")
    assert red_pixels(path) == 0


def test_sweep_svg_text(tmp_path: Path) -> None:
    path = tmp_path / "s.svg"
    plot_sweep(
        sweep_rows(infeasible=True), X, ["tco_usd", "tokens_per_s"], path, title="chat-70b: power"
    )
    texts = svg_texts(path)
    for expected in (
        "chat-70b: power",
        "Total cost (USD)",
        "Throughput (tokens/s)",
        "Power ceiling (W)",
        "infeasible",
        "feasible, not proved optimal",
        "12,000",  # x ticks with thousands separators
    ):
        assert expected in texts, expected
    # The mix is labelled where it changes: gaudi2 at 4,000 W and again at 12,000 W, mi300x once.
    assert texts.count("8x gaudi2") == 2
    assert texts.count("4x mi300x + 2x l40s") == 1


def test_sweep_two_parameters(tmp_path: Path) -> None:
    path = tmp_path / "two.svg"
    budget = "constraints.budget_usd"
    rows = [row(p) | {budget: usd} for usd in (200_000, 100_000) for p in (4000, 8000)]
    rows.append(row(2000, status="INFEASIBLE") | {budget: 100_000})
    rows.append(row(2000, status="NO_PLAN") | {budget: 200_000})
    plot_sweep(rows, X, ["tco_usd"], path, title="two", second=budget)
    texts = svg_texts(path)
    assert "Budget (USD)" in texts  # legend title
    # One legend entry per line, sorted by value, then the marks once each.
    legend = [t for t in texts if t in ("100,000", "200,000", "infeasible", "no plan (time limit)")]
    assert legend == ["100,000", "200,000", "infeasible", "no plan (time limit)"]


def test_sweep_categorical_x(tmp_path: Path) -> None:
    path = tmp_path / "cat.svg"
    rows = [
        {"horizon.procurement": "buy", **row(1)},
        {"horizon.procurement": "rent", **row(2, devices="2x h100-sxm")},
    ]
    plot_sweep(rows, "horizon.procurement", ["tco_usd"], path, title="buy or rent")
    texts = svg_texts(path)
    assert {"buy", "rent", "Procurement"} <= set(texts)
    assert {"8x gaudi2", "2x h100-sxm"} <= set(texts)


def test_sweep_with_no_rows_still_writes(tmp_path: Path) -> None:
    path = tmp_path / "empty.svg"
    plot_sweep([], X, ["tco_usd"], path, title="empty")
    assert "no points" in svg_texts(path)


# ------------------------------------------------------------------------------------------------
# Frontier and cumulative cost
# ------------------------------------------------------------------------------------------------


def test_frontier_svg(tmp_path: Path) -> None:
    path = tmp_path / "f.svg"
    points = [
        row(8000, devices="4x mi300x"),
        row(4000, devices="8x gaudi2"),
        row(12000, devices="16x h100-sxm"),
        row(1000, status="INFEASIBLE"),  # not a frontier point: ignored
    ]
    plot_frontier(points, "tco_usd", "tokens_per_s", path, title="cost vs throughput")
    texts = svg_texts(path)
    assert {"cost vs throughput", "Total cost (USD)", "Throughput (tokens/s)"} <= set(texts)
    for mix in ("4x mi300x", "8x gaudi2", "16x h100-sxm"):
        assert texts.count(mix) == 1  # every point labelled once
    assert "infeasible" not in texts


def test_frontier_png_without_points(tmp_path: Path) -> None:
    path = tmp_path / "f.png"
    plot_frontier([row(1, status="INFEASIBLE")], "tco_usd", "tokens_per_s", path, title="none")
    assert imread(str(path)).shape[1] == 800


def test_cumulative_cost(tmp_path: Path) -> None:
    svg = tmp_path / "c.svg"
    png = tmp_path / "c.png"
    months = [0.0, 12.0, 24.0, 36.0]
    series = {"buy": [100e3, 120e3, 140e3, 160e3], "rent on-demand": [0.0, 80e3, 160e3, 240e3]}
    for path in (svg, png):
        plot_cumulative_cost(
            months, series, path, title="buy or rent", breakeven={"buy vs rent": 15.0}
        )
    texts = svg_texts(svg)
    for expected in (
        "buy or rent",
        "Months",
        "Cumulative cost (USD)",
        "buy",
        "rent on-demand",
        "break-even buy vs rent: 15.0 months",
    ):
        assert expected in texts, expected
    assert red_pixels(png) == 0
    with pytest.raises(ValueError, match="rent on-demand"):
        plot_cumulative_cost(months, {"rent on-demand": [1.0]}, png, title="bad")


# ------------------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_same_data_same_bytes(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"d{suffix}"
    rows = sweep_rows(infeasible=True)
    plot_sweep(rows, X, ["tco_usd", "tokens_per_s"], path, title="d")
    first = path.read_bytes()
    plot_sweep(rows, X, ["tco_usd", "tokens_per_s"], path, title="d")
    assert path.read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary file left


def test_bad_suffix(tmp_path: Path) -> None:
    path = tmp_path / "chart.gif"
    with pytest.raises(InputError) as err:
        plot_sweep(sweep_rows(infeasible=False), X, ["tco_usd"], path, title="t")
    msg = str(err.value)
    assert str(path) in msg and ".png" in msg and ".svg" in msg and ".pdf" in msg
    assert not path.exists()
    with pytest.raises(InputError):
        plot_frontier([], "tco_usd", "tokens_per_s", tmp_path / "chart", title="t")


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        plot_sweep([], X, ["tco_usd"], tmp_path / "nope" / "c.png", title="t")


def test_global_settings_untouched(tmp_path: Path) -> None:
    before = dict(mpl.rcParams)
    plot_sweep(sweep_rows(infeasible=True), X, ["tco_usd"], tmp_path / "g.svg", title="g")
    assert dict(mpl.rcParams) == before


def test_no_pyplot_needed(tmp_path: Path) -> None:
    """Charting works headless and never imports pyplot (which would pick a GUI backend)."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from planner.report.plot import plot_frontier\n"
        "plot_frontier([{'status': 'OPTIMAL', 'tco_usd': 1.0, 'tokens_per_s': 2.0, 'devices': 'x'}],"
        " 'tco_usd', 'tokens_per_s', Path(sys.argv[1]), title='t')\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    out = tmp_path / "h.png"
    subprocess.run(
        [sys.executable, "-c", code, str(out)],
        check=True,
        env={**os.environ, "MPLBACKEND": "qtagg"},
    )
    assert out.stat().st_size > 0


# ------------------------------------------------------------------------------------------------
# Labels
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("tco_usd", "Total cost (USD)"),
        ("power_w", "Wall power (W)"),
        ("tokens_per_joule", "Tokens per joule"),
        ("usd_per_million_tokens", "Cost per million tokens (USD)"),
        ("constraints.budget_usd", "Budget (USD)"),
        ("horizon.electricity_usd_per_kwh", "Electricity price (USD/kWh)"),
        ("horizon.lifetime_years", "Lifetime (years)"),
        ("workloads.chat.max_ms_per_token", "Latency ceiling of workload chat (ms/token)"),
        ("workloads.chat.context_tokens", "Context of workload chat (tokens)"),
        ("constraints.max_devices", "Maximum devices"),
        ("constraints.some_new_limit_gb", "Some new limit (GB)"),
        ("x.min_gap_ms", "Minimum gap (ms)"),
    ],
)
def test_axis_label(key: str, label: str) -> None:
    assert axis_label(key) == label
