"""The cost × grounding plot of the compaction benchmark: valid SVG, one mark per method and
window, placed by its figures."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from benchmarks._plot import OVER, PlotPoint, cost_grounding_svg

POINTS = [
    PlotPoint("32k", "mask-first", "ours", 53.0, 0.835, 0),
    PlotPoint("32k", "trim_messages", "peer", 127.5, 0.95, 1_758),
    PlotPoint("32k", "Codex-like (baseline)", "baseline", 43.8, 0.362, 0),
    PlotPoint("128k", "mask-first", "ours", 60.7, 0.963, 0),
    PlotPoint("128k", "trim_messages", "peer", 68.8, 0.994, 125),
    PlotPoint("128k", "Codex-like (baseline)", "baseline", 57.0, 0.246, 0),
]


def _marks(svg: str) -> dict[tuple[str, str], ET.Element]:
    root = ET.fromstring(svg)
    return {
        (e.get("data-window", ""), e.get("data-method", "")): e
        for e in root.iter()
        if e.get("data-method")
    }


def _position(mark: ET.Element) -> tuple[float, float]:
    x = mark.get("cx") or mark.get("x")
    y = mark.get("cy") or mark.get("y")
    assert x is not None and y is not None
    return float(x), float(y)


def test_one_mark_per_method_and_window_shaped_by_kind() -> None:
    marks = _marks(cost_grounding_svg(POINTS))
    assert set(marks) == {(p.window, p.method) for p in POINTS}
    assert marks["32k", "mask-first"].tag.endswith("circle")
    assert marks["32k", "mask-first"].get("fill") != "white"  # ours: filled
    assert marks["32k", "Codex-like (baseline)"].tag.endswith("rect")  # baselines: squares
    assert marks["32k", "trim_messages"].get("stroke") == OVER  # sent requests over the window


def test_cheaper_is_left_and_better_grounded_is_higher_within_a_panel() -> None:
    marks = _marks(cost_grounding_svg(POINTS))
    ours, codex = (
        _position(marks["32k", "mask-first"]),
        _position(marks["32k", "Codex-like (baseline)"]),
    )
    trim = _position(marks["32k", "trim_messages"])
    assert codex[0] < ours[0] < trim[0]  # cost grows to the right
    assert trim[1] < ours[1] < codex[1]  # grounding grows upwards (SVG y grows down)
    # The second window has its own panel, to the right of the first.
    assert _position(marks["128k", "Codex-like (baseline)"])[0] > trim[0]
