"""What the engine does in each zone, as the model and the store see it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from contextfold import ConfigError, ContextPolicy, Message, ToolCallPart, validate
from contextfold.budget import Thresholds, Zone
from contextfold.compaction.strategies import DEFAULT_MASK_BATCH_SHARE
from contextfold.edits import MaskEdit
from contextfold.events import (
    CompactionFinished,
    CompactionStarted,
    ObservationsMasked,
)
from contextfold.providers.scripted import estimate_tokens
from tests.engine.helpers import EngineFactory, event_names, listing, start


def test_ok_zone_sends_the_view_as_it_is(make_engine: EngineFactory) -> None:
    engine, sink = make_engine()
    driver = start(engine)
    for _ in range(5):
        request = driver.turn()
        assert request.zone is Zone.OK
        assert request.compaction is None
        assert request.events == ()
        assert request.note == ""
    request = driver.prepare()
    assert [m.id for m in request.messages] == [m.id for m in driver.session.view]
    assert list(engine.store.iter_edits(driver.session.id)) == []
    assert not sink.of_type(CompactionStarted)


def test_mask_zone_masks_old_outputs_in_one_batch(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    before = driver.until(lambda r: r.zone is Zone.OK and r.budget.fraction > 0.55)
    request = driver.until_zone(Zone.MASK)

    masked = [e for e in request.events if isinstance(e, ObservationsMasked)]
    assert len(masked) == 1 and masked[0].count > 1  # one batch of several outputs
    assert not any(isinstance(e, CompactionStarted) for e in request.events)
    edits = [r.edit for r in engine.store.iter_edits(driver.session.id)]
    assert len(edits) == 1 and isinstance(edits[0], MaskEdit)
    assert len(edits[0].items) == masked[0].count
    # The masked outputs are placeholders with a ref; the request got smaller and fits.
    placeholders = [
        p for m in request.messages for p in m.tool_results if p.content.startswith("[masked]")
    ]
    assert len(placeholders) == masked[0].count
    # Smaller as the provider counts it (the scripted model's count is its "tokenizer"); the
    # engine's own figure right after an edit is deliberately conservative.
    sent = estimate_tokens(request.to_chat_request())
    assert sent < estimate_tokens(before.to_chat_request())
    assert sent < engine.policy.thresholds.mask_at * engine.effective_window
    assert request.tokens <= engine.effective_window


def test_mask_batches_are_never_small_cache_breakers(make_engine: EngineFactory) -> None:
    """Every edit breaks the provider's prompt cache: the engine masks a large batch now and
    then, never one output per turn (each break makes the provider read the prefix anew)."""
    engine, _ = make_engine()
    driver = start(engine)
    driver.until_zone(Zone.COMPACT)
    least = DEFAULT_MASK_BATCH_SHARE * engine.effective_window
    # What each batch freed in the counter's tokens (the masking strategy's own figure): the
    # engine's estimate of the request after it is deliberately conservative (see
    # Measurement.after_compaction), so CompactionFinished may show less.
    batches = [
        e
        for r in driver.requests
        if r.zone is Zone.MASK
        for e in r.events
        if isinstance(e, ObservationsMasked)
    ]
    assert batches
    raw_window = engine.effective_window / driver.session._core.state.estimator.calibration
    for batch in batches:
        assert batch.freed_tokens >= DEFAULT_MASK_BATCH_SHARE * raw_window * 0.95, batch
    assert least > 0
    turns_with_a_mask = [
        i
        for i, r in enumerate(driver.requests)
        if any(isinstance(e, ObservationsMasked) for e in r.events)
    ]
    gaps = [b - a for a, b in itertools.pairwise(turns_with_a_mask)]
    assert all(gap > 1 for gap in gaps), turns_with_a_mask


def test_compact_zone_compacts_to_the_target_and_not_again_next_turn(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine(compactor="summarize")  # no masking: straight to the COMPACT zone
    driver = start(engine)
    request = driver.until_zone(Zone.COMPACT)

    names = event_names(request.events)
    assert "CompactionStarted" in names and "CompactionFinished" in names
    finished = next(e for e in request.events if isinstance(e, CompactionFinished))
    assert finished.trigger == "threshold"
    assert request.compaction is not None and request.compaction.changed
    thresholds = engine.policy.thresholds
    assert 0.25 < request.budget.fraction <= thresholds.compact_target + 0.05
    assert any(p for m in request.messages for p in m.parts if type(p).__name__ == "SummaryPart")
    validate(list(request.messages), provider="anthropic")
    # Hysteresis: the next turns stay out of the COMPACT zone and change nothing.
    for _ in range(3):
        following = driver.turn()
        assert following.zone is Zone.OK
        assert not following.events


def _parallel_calls(count: int, turn: int) -> Message:
    calls = [
        ToolCallPart.from_args(f"par_{turn}_{i}", "bash", {"command": f"cat big{i}.log"})
        for i in range(count)
    ]
    return Message.assistant("Reading all the logs at once.", calls)


def test_block_zone_compacts_hard_before_the_call(make_engine: EngineFactory) -> None:
    policy = ContextPolicy(
        background=False, cost_schedule=False, thresholds=Thresholds(block_at=0.85)
    )
    engine, sink = make_engine(compactor="summarize", policy=policy)
    driver = start(engine)
    driver.until(lambda r: r.budget.fraction > 0.55)
    # One reply with many tool calls: the outputs push the request past block_at at once.
    session = driver.session
    session.add_assistant(_parallel_calls(14, 1))
    for i in range(14):
        session.add_tool_result(f"par_1_{i}", listing(100 + i, lines=300))
    request = driver.prepare()

    # BLOCK, or past the window (the calibrated estimate of 14 new outputs may err high).
    assert request.zone in (Zone.BLOCK, Zone.OVERFLOW)
    started = next(e for e in request.events if isinstance(e, CompactionStarted))
    assert started.trigger == "block" and started.zone == request.zone.value
    assert started.before_tokens >= engine.policy.thresholds.block_at * engine.effective_window
    assert request.tokens <= engine.effective_window
    assert request.budget.fraction < engine.policy.thresholds.compact_at
    validate(list(request.messages), provider="anthropic")
    # The newest outputs were kept or masked behind refs, never silently lost.
    assert sink.of_type(CompactionFinished)[-1].trigger == "block"


def test_every_request_fits_through_all_zones(make_engine: EngineFactory) -> None:
    policy = ContextPolicy(
        background=False, cost_schedule=False, thresholds=Thresholds(awareness_at=0.5)
    )
    engine, _ = make_engine(policy=policy)
    driver = start(engine)
    for _ in range(120):
        request = driver.turn()
        assert request.tokens <= engine.effective_window
        validate(list(request.messages), provider="openai")
    assert {r.zone for r in driver.requests} >= {Zone.OK, Zone.MASK, Zone.COMPACT}


def test_a_view_past_the_window_is_compacted_hard_before_any_call(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine(compactor="summarize")
    driver = start(engine)
    driver.until(lambda r: r.budget.fraction > 0.55)
    session = driver.session
    session.add_assistant(_parallel_calls(30, 2))
    for i in range(30):
        session.add_tool_result(f"par_2_{i}", listing(200 + i, lines=300))
    request = driver.prepare()

    assert request.zone is Zone.OVERFLOW
    started = next(e for e in request.events if isinstance(e, CompactionStarted))
    assert started.trigger == "block" and started.before_tokens > engine.effective_window
    assert request.tokens <= engine.effective_window
    validate(list(request.messages), provider="anthropic")


def test_a_system_prompt_larger_than_the_window_is_refused_with_the_figures(
    make_engine: EngineFactory,
) -> None:
    """No compaction can make room when the fixed part alone fills the window: a setting to
    change, said with the sizes, before anything is compacted or sent."""
    engine, sink = make_engine()
    session = start(engine).session
    with pytest.raises(ConfigError) as raised:
        session.prepare(system="Follow every rule below. " * 3_000)
    message = str(raised.value)
    assert raised.value.setting == "window"
    assert "window of 8,000 tokens is too small" in message
    assert "system prompt takes about" in message and "1,000 are kept for the reply" in message
    assert not sink.of_type(CompactionStarted)


def test_a_failed_compaction_is_not_retried_every_turn(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextfold.compaction.pipeline import failed_result

    engine, _ = make_engine(window=8_000, max_output=1_000)
    calls: list[int] = []

    def cannot_free(ctx: Any, *, hard: bool | None = None) -> Any:
        calls.append(len(ctx.view))
        return failed_result(ctx, "freed less than the minimum progress")

    monkeypatch.setattr(engine.compactor, "compact", cannot_free)
    driver = start(engine, output=lambda turn: listing(turn, lines=8))
    driver.until(lambda r: r.zone is Zone.COMPACT, limit=200)
    assert len(calls) == 1
    for _ in range(3):  # small turns: less growth than the minimum progress share
        request = driver.turn()
        assert request.zone is Zone.COMPACT
    assert len(calls) == 1  # not retried on every turn: it would only break the cache again
