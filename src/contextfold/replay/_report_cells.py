"""Small pieces of the report's HTML that several sections share."""

from __future__ import annotations

from html import escape

from contextfold.compaction.pipeline import PresetName
from contextfold.replay._svg import preset_colour
from contextfold.replay.probes import Retention

__all__ = ["bad", "preset_chip", "rate", "table_box"]


def preset_chip(preset: PresetName, index: int) -> str:
    """A preset's name after a dot of its curve's colour (``index``: its place among the
    presets, for one without a colour of its own)."""
    return (
        f'<span class="chip"><i style="background:{preset_colour(preset, index)}"></i>'
        f"{escape(preset)}</span>"
    )


def bad(count: int) -> str:
    """The class of a cell whose count should be 0."""
    return "bad" if count else ""


def rate(retention: Retention | None) -> str:
    """The share of facts kept, ``—`` when nothing was probed."""
    share = retention.rate() if retention is not None else None
    return "—" if share is None else f"{share:.0%}"


def table_box(table: str) -> str:
    """``table`` in a box that scrolls sideways when the table is wider than its card, so that
    the page never does."""
    return f'<div class="table">{table}</div>'
