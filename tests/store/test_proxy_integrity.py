"""Crash-safe identity: writes that are one fact commit together (``store.atomic()``), and what a
crash left half-made (partial sessions, proxy heads that point nowhere) is found by
``check_integrity()``, reported by ``contextfold sessions check`` and removed by ``--repair``,
never a complete session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from contextfold.errors import ConcurrentWriteError, SessionNotFoundError, UsageError
from contextfold.messages import Message
from contextfold.proxy.sessions import METADATA_KEY
from contextfold.store import open_store
from contextfold.store._integrity import PROXY_METADATA_KEY

from .conftest import StoreTarget


def _proxy_session(store: Any, *, requests: int = 0, **kwargs: Any) -> str:
    figures: dict[str, Any] = {"tenant": "t"}
    if requests:
        figures["requests"] = requests
    return str(store.create_session(metadata={METADATA_KEY: figures}, **kwargs).id)


def test_the_store_and_the_proxy_agree_on_the_metadata_key() -> None:
    assert PROXY_METADATA_KEY == METADATA_KEY


def test_writes_in_one_atomic_block_commit_together_or_not_at_all(target: StoreTarget) -> None:
    with target.open() as store:
        with pytest.raises(ConcurrentWriteError), store.atomic():
            sid = store.create_session().id
            store.append_messages(sid, [Message.user("one"), Message.user("two")])
            store.record_proxy_head("t", "h1", sid, 2, 2)
            # Another writer's view of the session: refused, and everything above with it.
            store.append_messages(sid, [Message.user("three")], expected_seq=0)
        assert store.list_sessions() == []
        with store.atomic():
            sid = store.create_session().id
            store.append_messages(sid, [Message.user("one")])
            # A failed part undoes only itself, as its own transaction would have.
            with pytest.raises(ConcurrentWriteError):
                store.append_messages(sid, [Message.user("x")], expected_seq=0)
            store.record_proxy_head("t", "h1", sid, 1, 1)
            assert store.last_seq(sid) == 1  # this thread reads what it wrote
        assert store.find_proxy_heads("t", ["h1"]) == {"h1": (sid, 1)}
        assert store.check_integrity() == []


def test_a_session_deleted_inside_an_atomic_block_is_not_found_by_its_later_writes(
    target: StoreTarget,
) -> None:
    # A session found once in a block is not looked up again (issue 28): its delete, in the
    # same block, must still make the next write to it fail as it would have.
    with target.open() as store:
        sid = store.create_session().id
        other = store.create_session().id
        with store.atomic():
            store.append_messages(sid, [Message.user("one")])
            store.record_proxy_head("t", "h1", sid, 1, 1)
            store.delete_session(sid)
            with pytest.raises(SessionNotFoundError):
                store.record_proxy_head("t", "h2", sid, 1, 1)
            with pytest.raises(SessionNotFoundError):
                store.append_event(sid, "e", {"n": 1})
            store.record_proxy_head("t", "h3", other, 0, 0)
        assert [s.id for s in store.list_sessions()] == [other]
        assert store.find_proxy_heads("t", ["h1", "h2", "h3"]) == {"h3": (other, 0)}


def test_partial_sessions_and_heads_pointing_nowhere_are_found_and_removed(
    target: StoreTarget,
) -> None:
    with target.open() as store:
        complete = _proxy_session(store, requests=1)
        store.append_messages(complete, [Message.user("hi"), Message.assistant("hello")])
        store.record_proxy_head("t", "c2", complete, 2, 2)
        answered_unindexed = _proxy_session(store, requests=3)  # its heads taken over: complete
        store.append_messages(answered_unindexed, [Message.user("hi")])
        indexed = _proxy_session(store)  # answered nothing yet, but reachable
        store.append_messages(indexed, [Message.user("hi")])
        store.record_proxy_head("t", "i1", indexed, 1, 1)
        partial = _proxy_session(store, parent_id=complete)  # a fork cut short: 1 of 49
        store.append_messages(partial, [Message.user("hi")])
        mine = store.create_session().id  # not the proxy's: never judged
        store.append_messages(mine, [Message.user("hi")])
        store.record_proxy_head("t", "ahead", indexed, 1, 5)  # recorded past its transcript

        problems = store.check_integrity()
        assert len(problems) == 2, problems
        assert any(partial in line and "partial" in line for line in problems)
        assert any("points nowhere" in line for line in problems)

        removed = store.repair()
        assert len(removed) == 2 and store.check_integrity() == []
        kept = {s.id for s in store.list_sessions()}
        assert kept == {complete, answered_unindexed, indexed, mine}
        assert store.find_proxy_heads("t", ["c2", "i1", "ahead"]).keys() == {"c2", "i1"}
        assert store.repair() == []


def test_sessions_check_reports_and_repairs(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(path, warn_wal_reset=False) as store:
        partial = _proxy_session(store)
        store.append_messages(partial, [Message.user("hi")])
    runner = CliRunner()
    found = runner.invoke(app, ["sessions", "check", "--store", str(path)])
    assert found.exit_code == 1, found.output
    assert partial in found.output and "--repair" in found.output
    repaired = runner.invoke(app, ["sessions", "check", "--repair", "--store", str(path)])
    assert repaired.exit_code == 0, repaired.output
    assert "removed partial session" in repaired.output
    clean = runner.invoke(app, ["sessions", "check", "--store", str(path), "--json"])
    assert clean.exit_code == 0 and '"problems": []' in clean.output


def test_a_failed_write_of_one_statement_in_an_atomic_block_undoes_nothing_else(
    target: StoreTarget,
) -> None:
    # On SQLite such a write takes no savepoint of its own (issue 28): a failed SQLite
    # statement undoes itself and leaves the transaction as it was, as the savepoint would.
    with target.open() as store:
        sid = store.create_session().id
        with store.atomic():
            store.append_messages(sid, [Message.user("one")])
            with pytest.raises(UsageError):
                store.create_session(session_id=sid)  # its INSERT fails: a duplicate key
            with pytest.raises(SessionNotFoundError):
                store.record_proxy_head("t", "h0", "ses_missing", 1, 1)
            store.record_proxy_head("t", "h1", sid, 1, 1)
            store.append_event(sid, "e", {"n": 1})
            store.append_messages(sid, [Message.user("two")])
        assert store.last_seq(sid) == 2
        assert store.find_proxy_heads("t", ["h0", "h1"]) == {"h1": (sid, 1)}
        assert [e.data for e in store.iter_events(sid)] == [{"n": 1}]
        assert [s.id for s in store.list_sessions()] == [sid]
        assert store.check_integrity() == []


def test_sqlite_takes_savepoints_only_for_writes_of_several_statements(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db", warn_wal_reset=False) as store:
        sid = store.create_session().id
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        with store.atomic():
            store.append_messages(sid, [Message.user("one")])  # the touch waits for the end
            store.record_proxy_head("t", "h1", sid, 1, 1)
            store.append_event(sid, "e", {"n": 1})
            store.add_to_metadata(sid, "counts", {"requests": 1})
            store.append_messages(sid, [Message.user("two"), Message.user("three")])
        savepoints = [s for s in statements if s.startswith("SAVEPOINT")]
        assert savepoints == ["SAVEPOINT contextfold_1"]  # the append of two rows
        touches = [s for s in statements if s.startswith("UPDATE sessions SET updated")]
        assert len(touches) == 1


def test_appends_in_an_atomic_block_touch_their_sessions_once_at_its_end(
    target: StoreTarget,
) -> None:
    with target.open() as store:
        first, second = store.create_session().id, store.create_session().id
        store.append_messages(second, [Message.user("kept", id="msg_dup")])
        before = {s.id: s.updated for s in store.list_sessions()}
        with store.atomic():
            store.append_messages(first, [Message.user("one")])
            # Its second row fails: the append undoes itself, and is no activity.
            with pytest.raises(UsageError):
                store.append_messages(
                    second, [Message.user("new"), Message.user("x", id="msg_dup")]
                )
            assert store.get_session(first).updated == before[first]  # not yet
        after = {s.id: s.updated for s in store.list_sessions()}
        assert after[first] > before[first]
        assert after[second] == before[second]
        assert store.last_seq(second) == 1
        assert store.check_integrity() == []
