"""A compaction that changed the view but freed less than the minimum progress is reported as
what it is: a finished compaction (its edits are in the transcript) with a note saying it fell
short, not a failure beside the edits it applied (issue 15: inspect logged ``compaction_failed``
next to a summary that was applied)."""

from __future__ import annotations

from contextfold import ContextPolicy
from contextfold.budget import Thresholds
from contextfold.compaction import Compactor
from contextfold.events import CompactionFailed, CompactionFinished, CompactionStarted
from tests.engine.helpers import EngineFactory, start
from tests.engine.test_compaction_events import unmatched_starts

SHORT_OF_PROGRESS = Compactor.preset("summarize", min_progress=0.95)
"""A summarizing compactor that asks each compaction to free 95 % of the window: every one that
runs falls short."""

FAR_TARGET = ContextPolicy(
    background=False, cost_schedule=False, thresholds=Thresholds(compact_target=0.05)
)
"""A target no compaction reaches, so falling short of the minimum counts."""


def test_a_compaction_short_of_the_minimum_progress_finishes_with_a_note(
    make_engine: EngineFactory,
) -> None:
    engine, sink = make_engine(compactor=SHORT_OF_PROGRESS, policy=FAR_TARGET)
    driver = start(engine)
    request = driver.until(lambda r: r.compaction is not None and r.compaction.changed, limit=80)
    result = request.compaction
    assert result is not None and result.failed  # the compactor's verdict: short of its minimum

    (finished,) = sink.of_type(CompactionFinished)
    assert finished.trigger == "threshold"
    assert finished.edit_ids == tuple(e.id for e in result.edits)
    assert finished.before_tokens > finished.after_tokens
    assert finished.note == result.reason and "minimum progress" in finished.note
    assert sink.of_type(CompactionFailed) == []  # its edits stand: it did not fail
    stored = [r.edit.id for r in engine.store.iter_edits(driver.session.id)]
    assert stored[-len(result.edits) :] == list(finished.edit_ids)
    assert unmatched_starts(sink.events) == [] and len(sink.of_type(CompactionStarted)) == 1


def test_a_compaction_that_reached_its_target_has_no_note(make_engine: EngineFactory) -> None:
    engine, sink = make_engine(compactor="summarize")
    driver = start(engine)
    driver.until(lambda r: r.compaction is not None and r.compaction.changed, limit=80)
    (finished,) = sink.of_type(CompactionFinished)
    assert finished.note == ""
