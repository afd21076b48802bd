"""Background compaction: prepared off-thread, swapped in or re-applied, errors surfaced."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from contextfold.compaction import BackgroundCompactor, CompactionContext, Compactor
from contextfold.edits import ContextEdit, MaskEdit, SummarizeEdit, apply_edits
from contextfold.history.repair import validate

from .conftest import CharCounter, agent_log, make_ctx, tool_round

counter = CharCounter()


@dataclass
class Gate:
    """A strategy that waits for the test to open it, then does nothing."""

    opened: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)
    name: str = "gate"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        self.entered.set()
        assert self.opened.wait(10)
        return []


@dataclass
class Broken:
    name: str = "broken"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        raise RuntimeError("summarizer exploded")


def _log_ctx(rounds: int = 30) -> CompactionContext:
    view = agent_log(rounds=rounds, output_chars=2_000)
    return make_ctx(view, target=8_000, window=20_000)


def test_result_is_used_as_is_when_the_view_did_not_move() -> None:
    ctx = _log_ctx()
    with BackgroundCompactor(Compactor.preset("mask-first")) as background:
        assert background.maybe_start(ctx)
        result = background.take(ctx.view, wait=True)
    assert result is not None and not result.failed
    direct = Compactor.preset("mask-first").compact(ctx)
    assert [m.id for m in result.view] == [m.id for m in direct.view]
    assert result.after_tokens == direct.after_tokens <= ctx.target_tokens


def _shape(edit: ContextEdit) -> tuple[object, ...]:
    """An edit without its random ids: what it does to which messages."""
    if isinstance(edit, MaskEdit):
        return ("mask", tuple((i.message_id, i.call_id, i.content) for i in edit.items))
    if isinstance(edit, SummarizeEdit):
        return ("summarize", edit.first_id, edit.last_id)
    return (edit.edit_kind, getattr(edit, "message_ids", ()))


def test_edits_are_reapplied_when_the_view_moved_on() -> None:
    ctx = _log_ctx()
    prepared = Compactor.preset("mask-first").compact(ctx)
    with BackgroundCompactor(Compactor.preset("mask-first")) as background:
        background.maybe_start(ctx)
        assert background.wait(10) and background.ready
        moved = list(ctx.view)
        for n in range(100, 110):
            moved += tool_round(n, f"cat new{n}.py", "n" * 3_000)
        result = background.take(moved)
    assert result is not None and not result.failed
    # The prepared edits come first, unchanged (they name message ids, so they still apply)...
    head = result.edits[: len(prepared.edits)]
    assert [_shape(e) for e in head] == [_shape(e) for e in prepared.edits]
    # ...then only what the prepared edits had not covered was compacted further.
    done = {i.message_id for e in prepared.edits if isinstance(e, MaskEdit) for i in e.items}
    later = {
        i.message_id
        for e in result.edits[len(prepared.edits) :]
        if isinstance(e, MaskEdit)
        for i in e.items
    }
    assert later and not later & done and "t100" in later
    assert list(result.view) == apply_edits(moved, result.edits)
    assert result.before_tokens == counter.count_messages(moved)
    assert result.after_tokens == counter.count_messages(result.view) <= ctx.target_tokens
    assert {"a109", "t109"} <= {m.id for m in result.view}
    validate(result.view)


def test_take_does_not_block_while_the_worker_runs() -> None:
    gate = Gate()
    ctx = _log_ctx()
    background = BackgroundCompactor(Compactor([gate]))
    try:
        assert background.maybe_start(ctx)
        assert gate.entered.wait(10)
        assert background.running
        assert background.take(ctx.view) is None
        assert not background.maybe_start(ctx)  # one job at a time
        gate.opened.set()
        result = background.take(ctx.view, wait=True)
        assert result is not None and not background.ready
    finally:
        gate.opened.set()
        background.close()


def test_a_worker_error_comes_back_as_a_failed_result() -> None:
    ctx = _log_ctx()
    with BackgroundCompactor(Compactor([Broken()])) as background:
        background.maybe_start(ctx)
        result = background.take(ctx.view, wait=True)
        assert result is not None and result.failed
        assert "RuntimeError: summarizer exploded" in result.reason
        assert result.edits == () and list(result.view) == list(ctx.view)
        assert isinstance(background.last_error, RuntimeError)
        # The slot is free again for the next job.
        assert background.maybe_start(make_ctx(ctx.view, target=10**6, window=20_000))


def test_closed_compactor_refuses_new_jobs() -> None:
    background = BackgroundCompactor(Compactor.preset("window"))
    background.close()
    assert not background.maybe_start(_log_ctx())
    assert background.take(_log_ctx().view) is None
