"""Conformance: sessions (both backends)."""

from __future__ import annotations

import pytest

from contextfold import SessionNotFoundError, UsageError
from contextfold.edits import ArchiveEdit
from contextfold.messages import Message
from contextfold.store import BrowsableSessionStore, SessionStore

from .conftest import StoreTarget
from .helpers import tool_turn


def test_every_backend_satisfies_the_protocol(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)
    assert isinstance(store, BrowsableSessionStore)


def test_a_new_session_keeps_what_it_was_created_with(store: SessionStore) -> None:
    info = store.create_session(
        model="openai/gpt-4o", title="fix the build", metadata={"cwd": "/w"}
    )

    again = store.get_session(info.id)
    assert again == info
    assert (again.model, again.title, dict(again.metadata)) == (
        "openai/gpt-4o",
        "fix the build",
        {"cwd": "/w"},
    )
    assert again.message_count == 0
    assert again.id.startswith("ses_")


def test_a_chosen_session_id_is_used_and_cannot_be_taken_twice(store: SessionStore) -> None:
    store.create_session(session_id="mine")
    assert store.get_session("mine").id == "mine"
    with pytest.raises(UsageError, match="'mine' already exists"):
        store.create_session(session_id="mine")


def test_a_missing_session_is_named_in_the_error(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError, match="'nope'") as caught:
        store.get_session("nope")
    assert caught.value.session_id == "nope"


def test_a_child_session_names_an_existing_parent(store: SessionStore) -> None:
    parent = store.create_session()
    child = store.create_session(parent_id=parent.id)
    store.create_session()

    assert child.parent_id == parent.id
    assert [s.id for s in store.list_sessions(parent_id=parent.id)] == [child.id]
    with pytest.raises(SessionNotFoundError, match="'ghost'"):
        store.create_session(parent_id="ghost")


def test_sessions_are_listed_most_recently_updated_first(store: SessionStore) -> None:
    first = store.create_session(session_id="first")
    second = store.create_session(session_id="second")
    store.append_messages(first.id, [Message.user("back to the first one")])

    listed = [s.id for s in store.list_sessions()]
    assert listed == ["first", "second"]
    assert [s.id for s in store.list_sessions(limit=1)] == ["first"]
    assert store.list_sessions()[0].message_count == 1
    assert second.updated <= store.get_session("first").updated


def test_update_changes_only_what_is_given(store: SessionStore) -> None:
    info = store.create_session(title="old", metadata={"a": 1})

    store.update_session(info.id, title="new")
    assert dict(store.get_session(info.id).metadata) == {"a": 1}
    updated = store.update_session(info.id, metadata={"b": 2})
    assert (updated.title, dict(updated.metadata)) == ("new", {"b": 2})
    with pytest.raises(SessionNotFoundError):
        store.update_session("nope", title="x")


def test_delete_removes_everything_the_session_holds(store: SessionStore) -> None:
    doomed = store.create_session()
    child = store.create_session(parent_id=doomed.id)
    store.append_messages(doomed.id, tool_turn(1))
    store.append_edit(doomed.id, ArchiveEdit(("u1",)))
    store.append_event(doomed.id, "token_usage", {"input_tokens": 5})
    view = store.load_view(doomed.id)
    store.save_snapshot(doomed.id, view.view, 10, last_seq=view.last_seq, last_edit=1)
    ref = store.put_blob(doomed.id, "a long output").ref

    store.delete_session(doomed.id)

    with pytest.raises(SessionNotFoundError):
        store.get_session(doomed.id)
    with pytest.raises(SessionNotFoundError):
        store.get_blob(doomed.id, ref)
    # A restarted continuation outlives its parent; it only loses the link.
    assert store.get_session(child.id).parent_id is None
    with pytest.raises(SessionNotFoundError):
        store.delete_session(doomed.id)


def test_deleted_rows_are_gone_from_the_database(target: StoreTarget) -> None:
    store = target.open()
    doomed = store.create_session()
    store.append_messages(doomed.id, tool_turn(1))
    store.put_blob(doomed.id, "output")
    store.delete_session(doomed.id)

    for table in ("messages", "edits", "events", "snapshots", "blobs"):
        assert target.raw(f"SELECT COUNT(*) FROM {table}") == [(0,)]
