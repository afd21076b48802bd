"""A CompactResult says what it did: which messages changed and how, or that nothing did."""

from __future__ import annotations

from collections import Counter

from contextfold.compaction import (
    NOTHING_TO_REMOVE,
    BackgroundCompactor,
    CompactionContext,
    Compactor,
    DropOldest,
    Summarize,
)
from contextfold.compaction.pipeline import failed_result
from contextfold.edits import ContextEdit

from .conftest import CharCounter, agent_log, chat, make_ctx

counter = CharCounter()


class FindsNothing:
    """A strategy that never finds an edit worth making (everything is recent or small)."""

    name = "finds-nothing"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        return []


def test_a_compaction_that_changed_nothing_says_so() -> None:
    view = agent_log(rounds=20, output_chars=2_000)
    result = Compactor([FindsNothing()]).compact(make_ctx(view, target=100, window=20_000))

    assert not result.changed and result.edits == () and result.strategies_run == ()
    assert result.failed  # never mistaken for a compaction that worked
    assert result.describe() == f"nothing compacted: {NOTHING_TO_REMOVE}"
    assert result.what_changed() == "nothing" and result.message_changes() == {}
    # No figure from the internals: the user asked for room and got none, and why.
    assert "minimum progress" not in result.describe() and "target" not in result.describe()
    assert "changed=False" in repr(result) and "nothing compacted" in repr(result)


def test_a_conversation_under_its_target_is_already_small() -> None:
    view = chat(turns=2)
    result = Compactor.preset("mask-first").compact(make_ctx(view, target=10**6, window=10**6))
    tokens = counter.count_messages(view)
    assert not result.changed and not result.failed
    assert result.describe() == (
        f"nothing compacted: the conversation is already small ({tokens:,} tokens)"
    )


def test_a_worker_error_is_the_reason_given() -> None:
    view = chat(turns=2)
    result = failed_result(make_ctx(view, target=10, window=1_000), "summarizer crashed")
    assert result.describe() == "nothing compacted: summarizer crashed"


def test_the_changes_name_every_message_by_its_fate() -> None:
    view = chat(turns=8, rounds_per_turn=3, output_chars=2_000)
    result = Compactor.preset("mask-first").compact(make_ctx(view, target=3_000, window=40_000))
    changes = result.message_changes()

    assert result.changed and changes
    kept = {m.id: m for m in result.view}
    originals = {m.id: m for m in view}
    for message_id, action in changes.items():
        if action in ("summary", "drop"):
            assert message_id not in kept  # replaced by the summary or the drop note
        else:  # rewritten in place: same id, other content
            assert kept[message_id] is not originals[message_id]
    untouched = [m for m in view if m.id not in changes]
    assert all(kept[m.id] is m for m in untouched)  # everything else is the very same message
    # In the view's order, and the figures the sentence gives are these.
    assert list(changes) == [m.id for m in view if m.id in changes]
    tally = Counter(changes.values())
    words = {"mask": "masked", "truncate": "truncated", "summary": "summarized", "drop": "dropped"}
    listed = ", ".join(f"{words[a]} {tally[a]}" for a in words if a in tally)
    assert result.what_changed() == f"{len(changes)} of {len(view)} messages ({listed})"
    assert result.describe() == (
        f"compacted {len(changes)} of {len(view)} messages ({listed}): "
        f"{result.before_tokens:,} → {result.after_tokens:,} tokens of conversation"
    )


def test_a_summary_and_a_drop_are_counted_once_per_message() -> None:
    view = chat(turns=10, rounds_per_turn=3, output_chars=2_000)
    result = Compactor([Summarize(), DropOldest()]).compact(
        make_ctx(view, target=2_000, window=40_000), hard=True
    )
    changes = result.message_changes()
    gone = {m.id for m in view} - {m.id for m in result.view}
    assert set(changes) == gone  # summarized or dropped: none of them is still in the view
    assert set(changes.values()) <= {"summary", "drop", "truncate"}
    assert result.what_changed().startswith(f"{len(changes)} of {len(view)} messages (")


def test_a_rebased_background_result_describes_the_current_view() -> None:
    view = chat(turns=8, rounds_per_turn=3, output_chars=2_000)
    with BackgroundCompactor(Compactor.preset("mask-first")) as background:
        assert background.maybe_start(make_ctx(view, target=3_000, window=40_000))
        background.wait()
        current = [*view, *agent_log(rounds=1)[2:]]  # the transcript moved on meanwhile
        result = background.take(current)
    assert result is not None and result.changed
    assert result.before_view == tuple(current) and result.before_messages == len(current)
    assert set(result.message_changes()) <= {m.id for m in current}
    assert result.what_changed().endswith(")") and f"of {len(current)} messages" in (
        result.what_changed()
    )


def test_every_result_carries_the_target_and_mode_of_its_context() -> None:
    """Results are made in one place (``CompactResult.of_run``): a run in hard mode, a worker
    error and a rebased background result all say the target and mode they ran under."""
    view = chat(turns=8, rounds_per_turn=3, output_chars=2_000)
    ctx = make_ctx(view, target=3_000, window=40_000, hard=True)
    ran = Compactor.preset("mask-first").compact(ctx)
    failed = failed_result(ctx, "summarizer crashed")
    with BackgroundCompactor(Compactor.preset("mask-first")) as background:
        assert background.maybe_start(ctx)
        background.wait()
        rebased = background.take([*view, *agent_log(rounds=1)[2:]])
    assert rebased is not None
    for result in (ran, failed, rebased):
        assert (result.target_tokens, result.hard) == (3_000, True)
    assert ran.before_view == failed.before_view == tuple(view)
    assert failed.view == tuple(view) and failed.before_tokens == failed.after_tokens
