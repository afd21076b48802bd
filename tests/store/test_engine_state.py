"""The engine's per-session state: a table of its own, saved whole, redacted, moved out of the
session metadata by the schema migration that made the table."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import SessionNotFoundError
from contextfold.redaction.redactor import redact_json
from contextfold.store import LATEST_VERSION, SessionStore, _schema, open_store

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

    (raw,) = target.raw("SELECT value FROM engine_state_parts WHERE session_id = ?", (sid,))
    assert GITHUB_TOKEN not in raw[0]
    assert "[REDACTED:" in store.load_engine_state(sid)["fixed_text"]


def test_deleting_a_session_deletes_its_state(target: StoreTarget) -> None:
    store = target.open()
    sid = store.create_session().id
    store.save_engine_state(sid, STATE)
    store.delete_session(sid)
    assert target.raw("SELECT COUNT(*) FROM engine_state_parts") == [(0,)]
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

    target.raw(
        "UPDATE engine_state_parts SET value = ? WHERE session_id = ? AND part = ?",
        ("{not json", sid, "turn"),
    )
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


# -- part by part ----------------------------------------------------------------------------------

LEDGER = [{"kind": "command", "text": f"pytest tests/t{i}.py", "ref": None} for i in range(30)]


def _parts(target: StoreTarget, sid: str) -> dict[str, str]:
    rows = target.raw(
        "SELECT part, value FROM engine_state_parts WHERE session_id = ? ORDER BY position", (sid,)
    )
    return {str(part): str(value) for part, value in rows}


def test_a_save_writes_only_the_parts_that_changed(target: StoreTarget) -> None:
    store = target.open()
    sid = store.create_session().id
    store.save_engine_state(sid, {"usage": 1, "ledger": LEDGER, "turn": 1})
    # Behind the store's back: a save that rewrote the ledger would put it back.
    target.raw(
        "UPDATE engine_state_parts SET value = ? WHERE session_id = ? AND part = ?",
        ("[]", sid, "ledger"),
    )
    store.save_engine_state(sid, {"usage": 2, "ledger": LEDGER, "turn": 2})
    assert _parts(target, sid) == {"usage": "2", "ledger": "[]", "turn": "2"}


def test_parts_keep_their_order_and_a_part_that_went_is_deleted(store: SessionStore) -> None:
    sid = store.create_session().id
    first = {"b": 1, "a": [1, 2], "ñ": "x", "c": None}
    store.save_engine_state(sid, first)
    loaded = store.load_engine_state(sid)
    assert loaded == first and list(loaded) == list(first)
    later = {"c": None, "ñ": "y", "b": 1}  # reordered, one changed, one gone
    store.save_engine_state(sid, later)
    loaded = store.load_engine_state(sid)
    assert loaded == later and list(loaded) == list(later)
    store.save_engine_state(sid, {})
    assert store.load_engine_state(sid) == {}  # saved, and empty: not None


def test_a_part_saved_again_with_an_equal_value_of_another_json_is_written(
    target: StoreTarget,
) -> None:
    # A part given again equal to the value saved before is not encoded again (issue 28), unless
    # its JSON differs: 1, True and 1.0 are equal in Python, as are 0.0 and -0.0.
    store = target.open()
    sid = store.create_session().id
    values: list[object] = [1, True, 1.0, 1, 0.0, -0.0, 0, False, None, {"a": 1}, None, "x"]
    values += ["".join(["x"]), (1, 2), [1, 2], (1, 2), "y"]
    for value in values:
        store.save_engine_state(sid, {"part": value})
        assert _parts(target, sid) == {"part": json.dumps(value, separators=(",", ":"))}


def test_a_store_another_store_saved_after_writes_every_part(target: StoreTarget) -> None:
    # A's memory of what it wrote must not let it skip a part B changed since.
    a, b = target.open(), target.open()
    sid = a.create_session().id
    a.save_engine_state(sid, {"ledger": LEDGER, "turn": 1})
    b.save_engine_state(sid, {"ledger": LEDGER[:3], "turn": 2})
    a.save_engine_state(sid, {"ledger": LEDGER, "turn": 3})
    assert a.load_engine_state(sid) == {"ledger": LEDGER, "turn": 3}
    b.save_engine_state(sid, {"ledger": LEDGER[:3], "turn": 4})
    assert b.load_engine_state(sid) == {"ledger": LEDGER[:3], "turn": 4}


def test_a_save_undone_with_its_transaction_is_not_taken_for_written(target: StoreTarget) -> None:
    store = target.open()
    sid = store.create_session().id
    store.save_engine_state(sid, {"ledger": LEDGER, "turn": 1})
    with pytest.raises(RuntimeError), store.atomic():
        store.save_engine_state(sid, {"ledger": LEDGER[:3], "turn": 2})
        raise RuntimeError("the block fails: nothing of it is kept")
    assert store.load_engine_state(sid) == {"ledger": LEDGER, "turn": 1}
    store.save_engine_state(sid, {"ledger": LEDGER[:3], "turn": 3})
    assert store.load_engine_state(sid) == {"ledger": LEDGER[:3], "turn": 3}


def test_a_store_from_version_3_keeps_each_state_part_by_part(
    target: StoreTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    three = tuple(m for m in _schema.MIGRATIONS if m.version <= 3)
    monkeypatch.setattr(_schema, "MIGRATIONS", three)
    monkeypatch.setattr(_schema, "LATEST_VERSION", 3)
    old = target.open()
    states = [STATE, {}, {"ñote": "é", "ledger": LEDGER, "a": {"b": [1, None]}}]
    ids = [old.create_session().id for _ in states]
    broken = old.create_session().id
    # As version 3 saved a state: one row, the whole state's JSON.
    for sid, state in zip(ids, states, strict=True):
        target.raw(
            "INSERT INTO engine_state (session_id, state, updated) VALUES (?, ?, ?)",
            (sid, _schema.dumps(state), 0.0),
        )
    target.raw(
        "INSERT INTO engine_state (session_id, state, updated) VALUES (?, ?, ?)",
        (broken, "{not json", 0.0),
    )
    none = old.create_session().id
    old.close()
    monkeypatch.undo()
    monkeypatch.setattr(_schema, "_MOVE_BATCH", 2)

    store = target.open()
    assert store.schema_version() == LATEST_VERSION
    for sid, state in zip(ids, states, strict=True):
        loaded = store.load_engine_state(sid)
        assert loaded == state and list(loaded or {}) == list(state)
    assert store.load_engine_state(broken) is None  # no engine could have resumed from it
    assert store.load_engine_state(none) is None
    assert store.check_integrity() == []
    store.save_engine_state(ids[0], {**STATE, "turn": 10})
    assert store.load_engine_state(ids[0]) == {**STATE, "turn": 10}


# Values of different types whose Python values are equal (1, 1.0 and True; 0.0 and -0.0) have
# different JSON: a part is never taken as unchanged for an equal value of another JSON.
_PART_VALUES = st.sampled_from(
    [None, 1, True, 1.0, 0.0, -0.0, "x", [1, 2], (1, 2), LEDGER, LEDGER[:5], {"k": GITHUB_TOKEN}]
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1),  # which store saves
            st.booleans(),  # inside a block that is then undone
            st.dictionaries(st.sampled_from(["ledger", "usage", "turn", "api_key"]), _PART_VALUES),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_whoever_saves_and_whatever_is_undone_a_load_gives_the_last_state_kept(
    saves: list[tuple[int, bool, dict[str, object]]],
) -> None:
    # The full computation (the state replaced whole) against the part-by-part writes of two
    # stores on one database, some of whose saves are rolled back.
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "s.db")
        stores = [open_store(path), open_store(path)]
        try:
            sid = stores[0].create_session().id
            kept: dict[str, object] | None = None
            for which, undone, state in saves:
                store = stores[which]
                if undone:
                    with contextlib.suppress(RuntimeError), store.atomic():
                        store.save_engine_state(sid, state)
                        raise RuntimeError
                else:
                    store.save_engine_state(sid, state)
                    kept = redact_json(state)
                for reader in stores:
                    loaded = reader.load_engine_state(sid)
                    assert json.dumps(loaded) == json.dumps(kept)  # equal, as JSON
        finally:
            for store in stores:
                store.close()


def test_sqlite_reads_the_session_row_once_per_save(tmp_path: Path) -> None:
    # The state token's read finds the session (SQLite's write transaction holds the lock).
    with open_store(tmp_path / "s.db", warn_wal_reset=False) as store:
        sid = store.create_session().id
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        store.save_engine_state(sid, STATE)
        reads = [s for s in statements if s.startswith("SELECT") and "FROM sessions" in s]
        assert len(reads) == 1, reads
        with pytest.raises(SessionNotFoundError):
            store.save_engine_state("ses_missing", STATE)
