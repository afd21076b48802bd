"""Conformance: the append-only transcript, edits and events (both backends)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import ConcurrentWriteError, SessionNotFoundError, UsageError
from contextfold.edits import ArchiveEdit, MaskEdit, ReplacedResult, SummarizeEdit
from contextfold.errors import MessageNotFoundError
from contextfold.messages import Message, SummaryPart
from contextfold.store import SessionStore
from tests.strategies import messages as any_message

from .conftest import StoreTarget
from .helpers import tool_turn

# Each example makes a session of its own, so sharing the store fixture across examples is fine.
FIXTURE_OK = [HealthCheck.function_scoped_fixture]


def test_seqs_run_from_one_without_gaps(store: SessionStore) -> None:
    sid = store.create_session().id

    assert store.append_messages(sid, tool_turn(1)) == 3
    assert store.append_messages(sid, [Message.user("and then?")]) == 4
    assert store.append_messages(sid, []) == 4

    assert [seq for seq, _ in store.iter_messages(sid)] == [1, 2, 3, 4]
    assert store.last_seq(sid) == 4
    assert store.get_session(sid).message_count == 4


def test_messages_come_back_exactly_as_appended(store: SessionStore) -> None:
    sid = store.create_session().id
    sent = [*tool_turn(1, output="line\x00with NUL, \udcff lone surrogate, ünïcödé"), *tool_turn(2)]
    store.append_messages(sid, sent)

    assert [m for _, m in store.iter_messages(sid)] == sent
    assert store.get_message(sid, "t1") == sent[2]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(any_message, min_size=1, max_size=4, unique_by=lambda m: m.id))
def test_any_message_round_trips(target: StoreTarget, batch: list[Message]) -> None:
    # redact=False: this checks the codec, and random text could look like a key by chance.
    store = target.opened[0] if target.opened else target.open(redact=False)
    sid = store.create_session().id
    store.append_messages(sid, batch)
    assert [m for _, m in store.iter_messages(sid)] == batch


def test_iteration_can_start_after_a_seq_and_stop_at_a_limit(store: SessionStore) -> None:
    sid = store.create_session().id
    for n in range(1, 5):
        store.append_messages(sid, tool_turn(n))

    assert [seq for seq, _ in store.iter_messages(sid, after_seq=7)] == [8, 9, 10, 11, 12]
    assert [seq for seq, _ in store.iter_messages(sid, after_seq=2, limit=3)] == [3, 4, 5]
    assert list(store.iter_messages(sid, after_seq=12)) == []


def test_iteration_is_lazy_and_memory_stays_flat(target: StoreTarget) -> None:
    store = target.open(batch_size=50)
    sid = store.create_session().id
    payload = "x" * 2000
    for start in range(0, 2000, 250):
        store.append_messages(sid, [Message.user(payload, id=f"m{start + i}") for i in range(250)])
    whole_session = 2000 * len(payload)

    iterator = store.iter_messages(sid)
    assert isinstance(iterator, Iterator)
    gc.collect()
    tracemalloc.start()
    try:
        count = sum(1 for _ in iterator)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert count == 2000
    assert peak < whole_session / 4


def test_an_unknown_session_fails_at_the_call_not_later(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError, match="'nope'"):
        store.iter_messages("nope")
    with pytest.raises(SessionNotFoundError, match="'nope'"):
        store.append_messages("nope", [Message.user("hi")])
    with pytest.raises(SessionNotFoundError):
        store.last_seq("nope")
    with pytest.raises(SessionNotFoundError):
        store.iter_edits("nope")
    with pytest.raises(SessionNotFoundError):
        store.append_event("nope", "x", {})
    with pytest.raises(SessionNotFoundError):
        store.get_message("nope", "m1")


def test_an_unknown_message_id_is_named(store: SessionStore) -> None:
    sid = store.create_session().id
    with pytest.raises(MessageNotFoundError, match="'m404'"):
        store.get_message(sid, "m404")


def test_expected_seq_guards_against_a_stale_writer(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1), expected_seq=0)

    with pytest.raises(ConcurrentWriteError) as caught:
        store.append_messages(sid, tool_turn(2), expected_seq=0)

    assert (caught.value.expected_seq, caught.value.actual_seq) == (0, 3)
    assert store.last_seq(sid) == 3
    assert store.append_messages(sid, tool_turn(2), expected_seq=3) == 6


def test_two_writers_on_one_session_never_fork_it(target: StoreTarget) -> None:
    alice, bob = target.open(), target.open()
    sid = alice.create_session().id
    seen_by_alice = alice.last_seq(sid)
    seen_by_bob = bob.last_seq(sid)

    alice.append_messages(sid, [Message.user("from alice", id="alice")], expected_seq=seen_by_alice)
    with pytest.raises(ConcurrentWriteError, match=sid):
        bob.append_messages(sid, [Message.user("from bob", id="bob")], expected_seq=seen_by_bob)

    assert [m.id for _, m in alice.iter_messages(sid)] == ["alice"]


def test_an_edit_from_a_writer_that_fell_behind_is_refused(target: StoreTarget) -> None:
    alice, bob = target.open(), target.open()
    sid = alice.create_session().id
    alice.append_messages(sid, tool_turn(1), expected_seq=0, expected_edit=0)
    assert alice.append_edit(sid, ArchiveEdit(("u1",)), expected_seq=3, expected_edit=0) == 1

    # Bob saw messages 1..3 and no edit: his edit was made from a view Alice has moved on from.
    with pytest.raises(ConcurrentWriteError, match="last edit 0") as behind_an_edit:
        bob.append_edit(sid, ArchiveEdit(("a1",)), expected_seq=3, expected_edit=0)
    alice.append_messages(sid, tool_turn(2), expected_seq=3, expected_edit=1)
    with pytest.raises(ConcurrentWriteError) as behind_an_append:
        bob.append_edit(sid, ArchiveEdit(("a1",)), expected_seq=3, expected_edit=1)
    with pytest.raises(ConcurrentWriteError):
        bob.append_messages(sid, tool_turn(3), expected_seq=6, expected_edit=0)

    assert (behind_an_edit.value.expected_edit, behind_an_edit.value.actual_edit) == (0, 1)
    assert (behind_an_append.value.expected_seq, behind_an_append.value.actual_seq) == (3, 6)
    assert [(r.number, r.edit.edit_kind) for r in alice.iter_edits(sid)] == [(1, "archive")]
    assert alice.last_seq(sid) == 6
    assert alice.append_edit(sid, ArchiveEdit(("a1",)), expected_seq=6, expected_edit=1) == 2


def test_a_failed_append_writes_none_of_its_messages(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1))

    with pytest.raises(UsageError, match="already holds message 'u1'"):
        store.append_messages(
            sid, [Message.user("new", id="fresh"), Message.user("again", id="u1")]
        )
    with pytest.raises(UsageError, match="twice"):
        store.append_messages(sid, [Message.user("a", id="x"), Message.user("b", id="x")])

    assert store.last_seq(sid) == 3
    with pytest.raises(MessageNotFoundError):
        store.get_message(sid, "fresh")


def test_edits_are_numbered_and_placed_after_the_last_message(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1))
    mask = MaskEdit((ReplacedResult("t1", "call_1", "[output masked]", ref="ref_0123456789ab"),))
    assert store.append_edit(sid, mask) == 1
    store.append_messages(sid, tool_turn(2))
    summary = Message("user", (SummaryPart("earlier: ran echo twice"),), id="s1")
    assert store.append_edit(sid, SummarizeEdit("u1", "t2", summary)) == 2
    assert store.append_edit(sid, ArchiveEdit(("s1",))) == 3

    records = list(store.iter_edits(sid))
    assert [(r.number, r.after_seq) for r in records] == [(1, 3), (2, 6), (3, 6)]
    assert records[0].edit == mask
    assert records[1].edit.summary == summary  # type: ignore[union-attr]
    assert [r.number for r in store.iter_edits(sid, after=1)] == [2, 3]


def test_a_compactions_edits_are_written_together_as_each_alone_would_be(
    target: StoreTarget,
) -> None:
    together, alone = target.open(), target.open()
    summary = Message("user", (SummaryPart("earlier: ran echo twice"),), id="s1")
    edits = [
        MaskEdit((ReplacedResult("t1", "call_1", "[output masked]"),)),
        SummarizeEdit("u1", "t2", summary),
        ArchiveEdit(("s1",)),
    ]
    one, other = together.create_session().id, alone.create_session().id
    for store, sid in ((together, one), (alone, other)):
        store.append_messages(sid, [*tool_turn(1), *tool_turn(2)])
    assert together.append_edits(one, [], expected_seq=6, expected_edit=0) == 0
    assert together.append_edits(one, edits, expected_seq=6, expected_edit=0) == 3
    for number, edit in enumerate(edits, 1):
        alone.append_edit(other, edit, expected_seq=6, expected_edit=number - 1)
    assert [(r.number, r.after_seq, r.edit) for r in together.iter_edits(one)] == [
        (r.number, r.after_seq, r.edit) for r in alone.iter_edits(other)
    ]
    assert together.load_view(one).view == alone.load_view(other).view
    # A writer that fell behind writes none of them.
    with pytest.raises(ConcurrentWriteError):
        together.append_edits(one, edits, expected_seq=6, expected_edit=0)
    assert len(list(together.iter_edits(one))) == 3


def test_events_come_back_in_order_with_their_data(store: SessionStore) -> None:
    sid = store.create_session().id
    other = store.create_session().id
    store.append_event(sid, "compaction_started", {"trigger": "threshold", "before_tokens": 9})
    store.append_event(other, "token_usage", {"input_tokens": 1})
    store.append_event(sid, "compaction_finished", {"after_tokens": 4, "ids": ["e1", "e2"]})

    events = list(store.iter_events(sid))
    assert [e.event_type for e in events] == ["compaction_started", "compaction_finished"]
    assert events[1].data == {"after_tokens": 4, "ids": ["e1", "e2"]}
    assert events[0].id < events[1].id
    assert events[0].created > 0


def test_the_event_bus_store_sink_writes_into_the_store(store: SessionStore) -> None:
    from contextfold.events import EventBus, ObservationsMasked, StoreSink

    sid = store.create_session().id
    EventBus(StoreSink(store)).emit(ObservationsMasked(session_id=sid, count=3, freed_tokens=900))

    (event,) = store.iter_events(sid)
    assert event.event_type == "observations_masked"
    assert event.data["count"] == 3
