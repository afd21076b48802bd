"""Conformance: snapshots and resume (both backends)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import ConcurrentWriteError, SessionNotFoundError, UsageError
from contextfold.edits import (
    ArchiveEdit,
    ContextEdit,
    DropEdit,
    MaskEdit,
    ReplacedResult,
    SummarizeEdit,
    apply_edit,
    apply_edits,
)
from contextfold.messages import Message, Meta, SummaryPart
from contextfold.store import SessionStore
from contextfold.store._integrity import _check_session as check_session

from .conftest import StoreTarget
from .helpers import tool_turn

# Each example makes a session of its own, so sharing the store fixture across examples is fine.
FIXTURE_OK = [HealthCheck.function_scoped_fixture]


def _summary(n: int) -> Message:
    return Message("user", (SummaryPart(f"summary {n}"),), id=f"s{n}", meta=Meta(kind="summary"))


def test_without_a_snapshot_the_view_is_the_transcript_with_its_edits(
    store: SessionStore,
) -> None:
    sid = store.create_session().id
    turns = [*tool_turn(1), *tool_turn(2)]
    store.append_messages(sid, turns)
    mask = MaskEdit((ReplacedResult("t1", "call_1", "[masked]"),))
    store.append_edit(sid, mask)
    hidden = Message.user("note for the user only", meta=Meta(agent_visible=False))
    store.append_messages(sid, [hidden])

    loaded = store.load_view(sid)

    assert loaded.view == apply_edits([*turns, hidden], [mask])
    assert loaded.view[2].tool_results[0].content == "[masked]"
    assert loaded.snapshot is None
    assert (loaded.replayed_messages, loaded.replayed_edits) == (7, 1)
    assert (loaded.last_seq, loaded.last_edit) == (7, 1)


def test_an_edit_applies_where_it_sits_in_the_transcript(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1))
    store.append_edit(sid, SummarizeEdit("u1", "t1", _summary(1)))
    store.append_messages(sid, tool_turn(2))

    assert [m.id for m in store.load_view(sid).view] == ["s1", "u2", "a2", "t2"]


def test_resume_reads_the_snapshot_and_only_the_tail(target: StoreTarget) -> None:
    store = target.open()
    sid = store.create_session().id
    for n in range(1, 41):
        store.append_messages(sid, tool_turn(n))
    store.append_edit(sid, SummarizeEdit("u1", "t38", _summary(1)))
    live = store.load_view(sid)
    store.save_snapshot(sid, live.view, 1234, last_seq=live.last_seq, last_edit=live.last_edit)
    store.append_messages(sid, tool_turn(41))
    store.append_edit(sid, MaskEdit((ReplacedResult("t41", "call_41", "[masked]"),)))
    store.append_messages(sid, tool_turn(42))

    # Spoil every message before the snapshot behind the store's back: a resume that touched
    # them would fail to parse them. It must not need them.
    target.raw("UPDATE messages SET data = 'not json' WHERE seq <= 120")
    resumed = target.open().load_view(sid)

    assert resumed.snapshot is not None
    assert resumed.snapshot.token_count == 1234
    assert (resumed.replayed_messages, resumed.replayed_edits) == (6, 1)
    assert [m.id for m in resumed.view] == [
        "s1", "u39", "a39", "t39", "u40", "a40", "t40", "u41", "a41", "t41", "u42", "a42", "t42",
    ]  # fmt: skip
    assert resumed.view[9].tool_results[0].content == "[masked]"


def test_only_the_latest_snapshot_is_kept(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1))
    store.save_snapshot(sid, [], 0, last_seq=3, last_edit=0)
    store.append_messages(sid, tool_turn(2))
    view = store.load_view(sid).view
    store.save_snapshot(sid, view, 77, last_seq=6, last_edit=0)

    snapshot = store.load_snapshot(sid)
    assert snapshot is not None
    assert (snapshot.last_seq, snapshot.token_count, list(snapshot.view)) == (6, 77, view)


def test_a_snapshot_past_the_transcript_is_refused(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1))

    with pytest.raises(UsageError, match="past the transcript"):
        store.save_snapshot(sid, [], 0, last_seq=4, last_edit=0)
    with pytest.raises(UsageError, match="past the transcript"):
        store.save_snapshot(sid, [], 0, last_seq=3, last_edit=1)
    assert store.load_snapshot(sid) is None
    with pytest.raises(SessionNotFoundError):
        store.save_snapshot("nope", [], 0, last_seq=0, last_edit=0)


def test_a_snapshot_that_skips_an_earlier_edit_is_refused(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1))
    store.append_edit(sid, ArchiveEdit(("u1",)))
    store.append_messages(sid, tool_turn(2))

    # Edit 1 came after message 3: a view of messages 1..6 without it never existed.
    with pytest.raises(UsageError, match="edit 1 was recorded after message 3"):
        store.save_snapshot(sid, [], 0, last_seq=6, last_edit=0)
    # Nor did a view of messages 1..2 with it.
    with pytest.raises(UsageError, match="edit 1 was recorded after message 3"):
        store.save_snapshot(sid, [], 0, last_seq=2, last_edit=1)


def test_a_snapshot_from_a_writer_that_fell_behind_is_refused(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1))
    seen = store.load_view(sid)
    store.append_messages(sid, tool_turn(2))  # another writer goes on

    with pytest.raises(ConcurrentWriteError, match="expected last seq 3, found 6"):
        store.save_snapshot(
            sid, seen.view, 10, last_seq=3, last_edit=0, expected_seq=3, expected_edit=0
        )
    assert store.load_snapshot(sid) is None
    live = store.load_view(sid)
    saved = store.save_snapshot(
        sid, live.view, 20, last_seq=6, last_edit=0, expected_seq=6, expected_edit=0
    )
    assert saved.last_seq == 6


def test_integrity_finds_a_snapshot_that_no_replay_gives(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, [*tool_turn(1), *tool_turn(2)])
    before_the_edit = store.load_view(sid).view
    store.append_edit(sid, ArchiveEdit(("u1",)))
    live = store.load_view(sid)
    store.save_snapshot(sid, live.view, 50, last_seq=live.last_seq, last_edit=live.last_edit)
    assert store.check_integrity() == []

    # What a writer that missed edit 1 would save: its own view, at the store's point.
    store.save_snapshot(sid, before_the_edit, 60, last_seq=6, last_edit=1)
    problems = store.check_integrity()

    assert len(problems) == 1, problems
    assert f"session {sid!r}" in problems[0]
    assert "not what a replay of the transcript and its edits gives" in problems[0]
    assert "message 0 is 'u1' in the snapshot, 'a1' in the replay" in problems[0]


def test_integrity_skips_a_session_deleted_while_it_runs(store: SessionStore) -> None:
    rows = store._rows  # type: ignore[attr-defined]  # what check_integrity gives the check
    assert check_session(rows, "deleted-since-the-check-listed-it", "{}") == []


# -- the property: resuming gives exactly what the live agent had ---------------------------------

operations = st.lists(
    st.sampled_from(["turn", "turn", "turn", "mask", "summarize", "archive", "drop", "snapshot"]),
    min_size=1,
    max_size=14,
)


def _edit_for(kind: str, view: list[Message], n: int) -> ContextEdit | None:
    results = [m for m in view if m.tool_results]
    if kind == "mask" and results:
        target = results[0]
        call = target.tool_results[0].call_id
        return MaskEdit((ReplacedResult(target.id, call, f"[masked {n}]"),))
    if kind == "summarize" and len(view) >= 4:
        return SummarizeEdit(view[0].id, view[len(view) // 2].id, _summary(n))
    if kind in ("archive", "drop") and view:
        cls = ArchiveEdit if kind == "archive" else DropEdit
        return cls((view[-1].id,))
    return None


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
def test_resume_from_any_snapshot_equals_the_live_view(store: SessionStore, ops: list[str]) -> None:
    sid = store.create_session().id
    live: list[Message] = []
    for n, op in enumerate(ops, start=1):
        if op == "turn":
            turn = tool_turn(n)
            store.append_messages(sid, turn)
            live.extend(turn)
        elif op == "snapshot":
            head = store.load_view(sid)
            store.save_snapshot(
                sid, live, len(live), last_seq=head.last_seq, last_edit=head.last_edit
            )
        elif (edit := _edit_for(op, live, n)) is not None:
            store.append_edit(sid, edit)
            live = apply_edit(live, edit)

    assert store.load_view(sid).view == live
