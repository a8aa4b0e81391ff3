"""Labels beside points that do not overlap: after the chart's layout is fixed, each label (an
annotation kept out of the layout) is tried at its own place, then a line higher or lower, step
by step, then on the other side of its point; it takes the first place inside its panel that
no earlier label and no legend covers. A label that finds none is left out, and the chart says
how many were (the table and the `--out` rows list them all).

Places depend only on the data and the font's metrics, so the same data gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, cast

from matplotlib.figure import Figure
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox, BboxBase

Align = Literal["left", "center", "right"]
STEPS = 6  # lines above and below the label's own place that are tried, on each side
PAD_PX = 1.0  # pixels kept free around a label


def labels(fig: Figure) -> list[Annotation]:
    """The movable labels: annotations outside the layout, in the order they were added."""
    return [
        t
        for ax in fig.axes
        for t in ax.texts
        if isinstance(t, Annotation) and not t.get_in_layout() and t.get_visible()
    ]


def _candidates(dx: float, dy: float, step: float) -> Iterator[tuple[float, float]]:
    for side in (dx, -dx):
        yield side, dy
        for k in range(1, STEPS + 1):
            yield side, dy + k * step
            yield side, dy - k * step


def _free(box: Bbox, inside: BboxBase, taken: list[Bbox]) -> bool:
    return (
        box.x0 >= inside.x0
        and box.x1 <= inside.x1
        and box.y0 >= inside.y0
        and box.y1 <= inside.y1
        and not any(box.overlaps(t) for t in taken)
    )


def place_labels(fig: Figure) -> int:
    """Move the figure's labels apart (see the module's docstring); the number left out."""
    todo = labels(fig)
    if not todo:
        return 0
    fig.draw_without_rendering()  # runs the layout: axes are where they will be drawn
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    taken = [
        leg.get_window_extent(renderer) for ax in fig.axes if (leg := ax.get_legend()) is not None
    ]
    left_out = 0
    for ann in todo:
        dx, dy = ann.xyann
        align: Align = cast(Align, ann.get_horizontalalignment())
        mirrored: Align = "right" if align == "left" else "left" if align == "right" else align
        height = ann.get_window_extent(renderer).height
        step = height * 72.0 / fig.dpi + 1.0  # one line, in points
        for x, y in _candidates(dx, dy, step):
            ann.xyann = (x, y)
            # On the other side of the point the text grows away from it.
            ann.set_horizontalalignment(mirrored if x != dx else align)
            box = ann.get_window_extent(renderer).padded(PAD_PX)
            if _free(box, ann.axes.bbox if ann.axes else fig.bbox, taken):
                taken.append(box)
                break
        else:
            ann.xyann = (dx, dy)
            ann.set_horizontalalignment(align)
            ann.set_visible(False)
            left_out += 1
    if left_out:
        fig.text(
            0.995,
            0.005,
            f"{left_out} label{'s' if left_out > 1 else ''} left out for space (see the table)",
            ha="right",
            va="bottom",
            fontsize=7,
            color="0.4",
        ).set_in_layout(False)
    return left_out
