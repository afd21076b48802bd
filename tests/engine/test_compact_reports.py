"""``session.compact()`` and ``session.recover()`` report what happened: a result that changed
nothing says so, and is never reported as a compaction (issue 15: ``CompactResult(before_tokens=
13147, after_tokens=13147, strategies_run=())``)."""

from __future__ import annotations

from contextfold import ContextOverflowError, Message, ToolCallPart
from contextfold.compaction import NOTHING_TO_REMOVE
from contextfold.events import CompactionFailed, CompactionFinished, OverflowRecovered
from tests.engine.helpers import EngineFactory, start


def test_a_manual_compaction_with_nothing_to_remove_says_so(make_engine: EngineFactory) -> None:
    engine, sink = make_engine()
    driver = start(engine)
    driver.turn()

    result = driver.session.compact()

    assert not result.changed and result.edits == ()
    assert result.describe() == f"nothing compacted: {NOTHING_TO_REMOVE}"
    assert "changed=False" in repr(result)
    assert sink.of_type(CompactionFinished) == []  # never announced as a compaction
    failed = sink.of_type(CompactionFailed)[-1]
    assert failed.trigger == "manual" and failed.reason == NOTHING_TO_REMOVE
    assert failed.before_tokens == failed.after_tokens


def test_a_manual_compaction_that_ran_names_the_messages_it_changed(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine(window=16_000)
    driver = start(engine)
    for _ in range(12):
        driver.turn()
    before = list(driver.session.view)

    result = driver.session.compact()

    assert result.changed
    changes = result.message_changes()
    assert changes and set(changes) <= {m.id for m in before}
    assert result.before_view == tuple(before)
    assert result.describe().startswith(f"compacted {len(changes)} of {len(before)} messages (")
    stored = [record.edit.id for record in engine.store.iter_edits(driver.session.id)]
    assert stored[-len(result.edits) :] == [e.id for e in result.edits]  # and it was applied


def test_recover_with_nothing_to_remove_says_nothing_was_compacted(
    make_engine: EngineFactory,
) -> None:
    engine, sink = make_engine()
    driver = start(engine)
    refused = driver.prepare()  # the view is only the task
    error = ContextOverflowError(
        "prompt is too long", provider="anthropic", prompt_tokens=refused.tokens + 5_000
    )

    result = driver.session.recover(error)

    assert not result.changed
    assert result.describe().startswith("nothing compacted: ")
    assert sink.of_type(CompactionFinished) == []
    assert sink.of_type(CompactionFailed)[-1].trigger == "overflow"
    assert sink.of_type(OverflowRecovered)  # the refusal itself is still reported


def test_the_compact_context_tool_tells_the_model_nothing_was_compacted(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    driver.turn()
    call = ToolCallPart.from_args("cc1", "compact_context", {})
    driver.session.add_assistant(Message.assistant("Making room.", [call]))

    result = driver.session.run_engine_tool(call)

    assert result is not None
    # Not "already small": the context was not small, nothing in it could be removed.
    assert result.content == f"Nothing compacted: {NOTHING_TO_REMOVE}."
