"""Labels beside points do not overlap: sweep, frontier, cost-over-time and study charts drawn
from dense data, and every pair of visible labels in the saved figure checked for intersecting
bounding boxes."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from planner.report import plot as plot_module
from planner.report.plot import plot_cumulative_cost, plot_frontier, plot_sweep
from planner.report.plot_study import plot_study

X = "constraints.power_w"
MIXES = [f"{n}x {d}" for n in (2, 4, 8) for d in ("h100-sxm", "mi300x", "gaudi2", "l40s")]


def dense_rows(n: int) -> list[dict[str, Any]]:
    """n points, 250 W apart, the mix changing at every point (every point is labelled)."""
    return [
        {
            X: 5000 + 250 * i,
            "status": "OPTIMAL",
            "tco_usd": 200_000 + 900 * i,
            "tokens_per_s": 4_000 + 10 * i,
            "power_w": 5000 + 240 * i,
            "devices": MIXES[i % len(MIXES)] + (" + 1x l4" if i % 3 == 0 else ""),
        }
        for i in range(n)
    ]


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the plot functions save."""
    figures: list[Figure] = []
    real = plot_module._save

    def keep(fig: Figure, path: Path, fmt: str) -> None:
        real(fig, path, fmt)
        figures.append(fig)

    monkeypatch.setattr(plot_module, "_save", keep)
    import planner.report.plot_study as study_module

    monkeypatch.setattr(study_module, "_save", keep)
    return figures


def visible_boxes(fig: Figure) -> list[Any]:
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    return [
        t.get_window_extent(renderer)
        for ax in fig.axes
        for t in ax.texts
        if isinstance(t, Annotation) and t.get_visible()
    ]


def assert_apart(fig: Figure, at_least: int) -> None:
    boxes = visible_boxes(fig)
    assert len(boxes) >= at_least, len(boxes)
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)
    inside = fig.bbox
    for box in boxes:
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0
        assert box.y1 <= inside.y1


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_dense_sweep_labels_do_not_overlap(
    tmp_path: Path, saved: list[Figure], suffix: str
) -> None:
    plot_sweep(dense_rows(40), X, ["tco_usd", "tokens_per_s"], tmp_path / f"s{suffix}", title="d")
    assert_apart(saved[-1], at_least=10)


def test_dense_two_parameter_sweep_labels_do_not_overlap(
    tmp_path: Path, saved: list[Figure]
) -> None:
    rows = [
        {**r, "horizon.procurement": mode, "tco_usd": r["tco_usd"] + k * 500}
        for k, mode in enumerate(("buy", "rent", "reserved"))
        for r in dense_rows(16)
    ]
    plot_sweep(rows, X, ["tco_usd"], tmp_path / "two.png", title="d", second="horizon.procurement")
    assert_apart(saved[-1], at_least=10)


def test_dense_frontier_labels_do_not_overlap(tmp_path: Path, saved: list[Figure]) -> None:
    points = [
        {"status": "OPTIMAL", "tco_usd": 100_000 + 5_000 * i, "tokens_per_s": 1_000 + 300 * i,
         "devices": MIXES[i % len(MIXES)]}
        for i in range(30)
    ]  # fmt: skip
    plot_frontier(points, "tco_usd", "tokens_per_s", tmp_path / "f.png", title="f")
    assert_apart(saved[-1], at_least=10)


def test_close_break_even_labels_do_not_overlap(tmp_path: Path, saved: list[Figure]) -> None:
    months = [float(m) for m in range(37)]
    series = {f"option {k}": [1000.0 * (k + 1) * m for m in months] for k in range(4)}
    breakeven = {f"option {k} vs rent": 12.0 + 0.2 * k for k in range(4)}
    plot_cumulative_cost(months, series, tmp_path / "t.png", title="t", breakeven=breakeven)
    assert_apart(saved[-1], at_least=4)


def test_close_study_percentiles_do_not_overlap(tmp_path: Path, saved: list[Figure]) -> None:
    summary = {
        "samples": 10,
        "cost_usd": {"p5": 100_000.0, "p50": 100_400.0, "p95": 100_900.0},
        "devices": {"h100-sxm": {"share_used": 1.0, "share_buying": 0.5}},
    }
    costs = [100_000.0 + 100 * i for i in range(10)]
    plot_study(summary, costs, tmp_path / "st.png", title="s")
    assert_apart(saved[-1], at_least=3)


def test_labels_that_find_no_room_are_left_out_and_counted(
    tmp_path: Path, saved: list[Figure]
) -> None:
    rows = dense_rows(200)
    plot_sweep(rows, X, ["tco_usd"], tmp_path / "crowded.png", title="crowded")
    fig = saved[-1]
    assert_apart(fig, at_least=5)
    notes = [t.get_text() for t in fig.texts if "left out for space" in t.get_text()]
    assert len(notes) == 1
