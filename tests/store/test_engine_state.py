"""The engine's per-session state: a table of its own, saved whole, redacted, moved out of the
session metadata by the schema migration that made the table."""

from __future__ import annotations

import io
import json

import pytest

from contextfold.errors import SessionNotFoundError
from contextfold.store import LATEST_VERSION, SessionStore, _schema

from .conftest import StoreTarget
from .helpers import tool_turn

GITHUB_TOKEN = "ghp_1234567890abcdefghijklmnopqrstuvwxyz"

STATE = {
    "estimator": {"ratio": 0.6019, "samples": 12},
    "cache_tail": ["u1", "a1"],
    "turn": 9,
    "restarts": 1,
    "learned_window": 7_600,
}


def test_a_saved_state_loads_back_and_a_new_save_replaces_it(store: SessionStore) -> None:
    sid = store.create_session().id
    assert store.load_engine_state(sid) is None

    store.save_engine_state(sid, STATE)
    assert store.load_engine_state(sid) == STATE

    store.save_engine_state(sid, {"turn": 10})
    assert store.load_engine_state(sid) == {"turn": 10}  # whole, not merged
    assert "engine" not in store.get_session(sid).metadata


def test_saving_state_marks_the_session_as_recently_updated(store: SessionStore) -> None:
    older = store.create_session().id
    newer = store.create_session().id
    store.save_engine_state(older, STATE)
    assert [info.id for info in store.list_sessions()] == [older, newer]


def test_state_of_an_unknown_session_is_refused_by_name(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError, match="ses_nope"):
        store.save_engine_state("ses_nope", STATE)
    with pytest.raises(SessionNotFoundError, match="ses_nope"):
        store.load_engine_state("ses_nope")


def test_secrets_in_the_state_never_reach_the_database(target: StoreTarget) -> None:
    store = target.open()
    sid = store.create_session().id
    store.save_engine_state(sid, {"fixed_text": f"token {GITHUB_TOKEN} in the prompt"})

    (raw,) = target.raw("SELECT state FROM engine_state WHERE session_id = ?", (sid,))
    assert GITHUB_TOKEN not in raw[0]
    assert "[REDACTED:" in store.load_engine_state(sid)["fixed_text"]


def test_deleting_a_session_deletes_its_state(target: StoreTarget) -> None:
    store = target.open()
    sid = store.create_session().id
    store.save_engine_state(sid, STATE)
    store.delete_session(sid)
    assert target.raw("SELECT COUNT(*) FROM engine_state") == [(0,)]
    assert store.check_integrity() == []


def test_the_export_holds_the_state_on_its_session_line(store: SessionStore) -> None:
    sid = store.create_session(metadata={"cwd": "/src"}).id
    store.append_messages(sid, tool_turn(1))
    store.save_engine_state(sid, STATE)

    out = io.StringIO()
    store.export_jsonl(sid, out)
    header = json.loads(out.getvalue().splitlines()[0])
    assert header["kind"] == "session"
    assert header["engine_state"] == STATE
    assert header["metadata"] == {"cwd": "/src"}


def test_a_state_row_that_does_not_parse_is_reported(target: StoreTarget) -> None:
    store = target.open()
    sid = store.create_session().id
    store.save_engine_state(sid, STATE)
    assert store.check_integrity() == []

    target.raw("UPDATE engine_state SET state = ? WHERE session_id = ?", ("{not json", sid))
    problems = store.check_integrity()
    assert len(problems) == 1
    assert f"session {sid!r}: engine state does not parse" in problems[0]


def test_a_store_from_before_the_table_resumes_with_its_engine_state(
    target: StoreTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store written at schema version 1, where the engine kept its state in the metadata.
    first = next(m for m in _schema.MIGRATIONS if m.version == 1)
    monkeypatch.setattr(_schema, "MIGRATIONS", (first,))
    monkeypatch.setattr(_schema, "LATEST_VERSION", 1)
    old = target.open()
    assert old.schema_version() == 1
    ran = old.create_session(metadata={"cwd": "/src", "engine": STATE}).id
    old.append_messages(ran, tool_turn(1))
    never_ran = old.create_session(metadata={"cwd": "/other"}).id
    odd = old.create_session(metadata={"engine": "not a state"}).id
    old.close()
    monkeypatch.undo()

    store = target.open()
    assert store.schema_version() == LATEST_VERSION
    assert store.load_engine_state(ran) == STATE
    assert store.get_session(ran).metadata == {"cwd": "/src"}
    assert store.load_engine_state(never_ran) is None
    assert store.get_session(never_ran).metadata == {"cwd": "/other"}
    # Only a mapping was ever read back as state; anything else stays where it was.
    assert store.load_engine_state(odd) is None
    assert store.get_session(odd).metadata == {"engine": "not a state"}
    assert store.last_seq(ran) == 3
    assert store.check_integrity() == []


def test_the_move_reads_sessions_in_batches(
    target: StoreTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = next(m for m in _schema.MIGRATIONS if m.version == 1)
    monkeypatch.setattr(_schema, "MIGRATIONS", (first,))
    monkeypatch.setattr(_schema, "LATEST_VERSION", 1)
    old = target.open()
    ids = [old.create_session(metadata={"engine": {"turn": n}}).id for n in range(7)]
    old.close()
    monkeypatch.undo()
    monkeypatch.setattr(_schema, "_MOVE_BATCH", 3)  # 7 sessions: batches of 3, 3 and 1

    store = target.open()
    assert [store.load_engine_state(sid) for sid in ids] == [{"turn": n} for n in range(7)]
    assert all(store.get_session(sid).metadata == {} for sid in ids)
