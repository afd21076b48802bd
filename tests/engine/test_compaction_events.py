"""Every compaction the engine announces ends: a CompactionStarted is always followed by a
CompactionFinished or a CompactionFailed of the same trigger (issue 13 §7)."""

from __future__ import annotations

import pytest

from contextfold import ContextPolicy
from contextfold.events import CompactionFailed, CompactionFinished, CompactionStarted, Event
from tests.engine.helpers import EngineFactory, listing, start


def unmatched_starts(events: list[Event]) -> list[CompactionStarted]:
    """The announced compactions that never ended, matched in order by trigger."""
    open_by_trigger: dict[str, list[CompactionStarted]] = {}
    for event in events:
        if isinstance(event, CompactionStarted):
            open_by_trigger.setdefault(event.trigger, []).append(event)
        elif isinstance(event, CompactionFinished | CompactionFailed):
            started = open_by_trigger.get(event.trigger)
            if started:
                started.pop(0)
            else:
                assert event.trigger == "mask", f"an end without a start: {event}"
    return [s for starts in open_by_trigger.values() for s in starts]


@pytest.mark.parametrize("preset", ["mask-first", "summarize", "window", "restart"])
@pytest.mark.parametrize("background", [True, False])
def test_every_started_compaction_ends(
    make_engine: EngineFactory, preset: str, background: bool
) -> None:
    engine, sink = make_engine(
        compactor=preset, policy=ContextPolicy(background=background), window=6_000
    )
    driver = start(engine, output=lambda turn: listing(turn, lines=30 + 7 * (turn % 9)))
    for turn in range(90):
        driver.turn()
        if turn % 30 == 29:
            driver.session.compact()  # manual ones too, even with little left to free
    engine.close()

    assert sink.of_type(CompactionStarted)
    assert unmatched_starts(sink.events) == []
